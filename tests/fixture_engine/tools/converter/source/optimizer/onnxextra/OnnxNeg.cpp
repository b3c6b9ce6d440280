// Composite rewrite: Neg(x) = Mul(x, -1).
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

static bool rewriteNeg(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 1 || node.outputs.size() != 1) {
        *err = "Neg needs one input and one output";
        return false;
    }
    std::string minusOne = graph.addConst(node.name + "_minus_one", {}, {-1.f});
    FixOp& op = graph.addOp("BinaryOp", node.name);
    op.inputs = {node.inputs[0], minusOne};
    op.outputs = node.outputs;
    op.ints["opType"] = {2};  // MUL
    return true;
}

REGISTER_ONNX_EXTRA(Neg, rewriteNeg);

}  // namespace fixconv
