// Fixture engine: a dense host tensor (float32 or int32, C order).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace MNN {

enum class DataType { Float32 = 0, Int32 = 1 };

const char* dataTypeName(DataType t);
bool parseDataType(const char* s, DataType* out);

class Tensor {
public:
    Tensor() = default;
    ~Tensor() { std::free(mData); }
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;

    // Sets shape and type and (re)allocates zeroed storage.
    void resize(const std::vector<int>& shape, DataType type);

    // Sets the shape back to ``shape`` (the same element count), storage and type kept: the engine's resize of a
    // changed input (Net::run).
    void reshape(const std::vector<int>& shape) { mShape = shape; }

    bool allocated() const { return mAllocated; }
    DataType type() const { return mType; }
    const std::vector<int>& shape() const { return mShape; }
    int dimensions() const { return static_cast<int>(mShape.size()); }
    // Negative axes count from the back.
    int length(int axis) const { return mShape[axis < 0 ? axis + dimensions() : axis]; }
    size_t elementSize() const;
    size_t size() const { return elementSize() * 4; }  // bytes; both types are 4 bytes wide

    template <typename T> T* host() { return static_cast<T*>(mData); }
    template <typename T> const T* host() const { return static_cast<const T*>(mData); }

private:
    std::vector<int> mShape;
    DataType mType = DataType::Float32;
    void* mData = nullptr;
    bool mAllocated = false;
};

}  // namespace MNN
