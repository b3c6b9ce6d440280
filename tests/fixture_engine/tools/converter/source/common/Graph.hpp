// Fixture converter: the engine-side graph being built, and the .fixmodel writer.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/OnnxModel.hpp"

namespace fixconv {

struct FixOp {
    std::string type;  // runtime op type name: UnaryOp, BinaryOp, ArgMax, Softmax, Reduction, MatMul, Transpose, Raster
    std::string name;
    std::vector<std::string> inputs, outputs;
    std::map<std::string, std::vector<int>> ints;
    std::map<std::string, float> floats;
};

struct FixTensor {
    std::string name;
    bool isInt = false;
    std::vector<int> dims;
    std::vector<float> floats;
    std::vector<int> ints;
};

class ConvGraph {
public:
    explicit ConvGraph(const OnnxModel& onnx) : mOnnx(onnx) {}

    const OnnxModel& onnx() const { return mOnnx; }
    // The initializer named `name`, or nullptr when it is a runtime tensor.
    const OnnxTensor* initializer(const std::string& name) const;
    // A fresh tensor name starting with `hint`.
    std::string newName(const std::string& hint);
    FixOp& addOp(const std::string& type, const std::string& name);
    // A constant tensor added by a converter; returns its name.
    std::string addConst(const std::string& hint, const std::vector<int>& dims, const std::vector<float>& values);
    std::string addIntConst(const std::string& hint, const std::vector<int>& dims, const std::vector<int>& values);

    // Writes the model; false (with *err) when an input cannot be expressed.
    bool write(const std::string& path, std::string* err) const;

private:
    const OnnxModel& mOnnx;
    std::vector<FixOp> mOps;
    std::vector<FixTensor> mConsts;
    std::set<std::string> mUsed;
    int mCounter = 0;
};

// Signature of both the direct ONNX converters (source/onnx) and the composite rewrites
// (source/optimizer/onnxextra): append the node's lowering to `graph`; false (with *err) on failure.
using OnnxConvertFunction = bool (*)(const OnnxNode& node, ConvGraph& graph, std::string* err);

}  // namespace fixconv
