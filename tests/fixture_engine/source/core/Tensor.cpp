#include "core/Tensor.hpp"

#include <cstring>

namespace MNN {

const char* dataTypeName(DataType t) { return t == DataType::Int32 ? "int32" : "float32"; }

bool parseDataType(const char* s, DataType* out) {
    if (std::strcmp(s, "float32") == 0) {
        *out = DataType::Float32;
        return true;
    }
    if (std::strcmp(s, "int32") == 0) {
        *out = DataType::Int32;
        return true;
    }
    return false;
}

size_t Tensor::elementSize() const {
    size_t n = 1;
    for (int d : mShape) n *= static_cast<size_t>(d);
    return n;
}

void Tensor::resize(const std::vector<int>& shape, DataType type) {
    mShape = shape;
    mType = type;
    std::free(mData);
    size_t bytes = size();
    mData = std::calloc(bytes == 0 ? 1 : bytes, 1);
    mAllocated = true;
}

}  // namespace MNN
