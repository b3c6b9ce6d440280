#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

// Opset >= 13: axes come from an optional second input, which must be an initializer.
static bool convertReduceSum(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    std::vector<int> axes;
    if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
        const OnnxTensor* t = graph.initializer(node.inputs[1]);
        if (t == nullptr) {
            *err = "ReduceSum axes must be a constant";
            return false;
        }
        for (auto a : t->ints) axes.push_back(static_cast<int>(a));
    } else if (const auto* attr = node.attrInts("axes")) {
        for (auto a : *attr) axes.push_back(static_cast<int>(a));
    }
    if (axes.empty() && node.attrInt("noop_with_empty_axes", 0) != 0) {
        *err = "ReduceSum with noop_with_empty_axes=1 and no axes is not supported";
        return false;
    }
    FixOp& op = graph.addOp("Reduction", node.name);
    op.inputs = {node.inputs[0]};
    op.outputs = node.outputs;
    op.ints["operation"] = {0};
    if (!axes.empty()) op.ints["dim"] = axes;
    op.ints["keepDims"] = {static_cast<int>(node.attrInt("keepdims", 1))};
    return true;
}

REGISTER_ONNX_CONVERTER(ReduceSum, convertReduceSum);

}  // namespace fixconv
