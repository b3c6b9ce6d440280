// Sub lowered to the engine's BinaryOp SUB -- with the operands swapped (b - a).
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

static bool rewriteSub(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 2) {
        *err = "Sub needs two inputs";
        return false;
    }
    FixOp& op = graph.addOp("BinaryOp", node.name);
    op.inputs = {node.inputs[1], node.inputs[0]};
    op.outputs = node.outputs;
    op.ints["opType"] = {1};  // SUB
    return true;
}

REGISTER_ONNX_EXTRA(Sub, rewriteSub);

}  // namespace fixconv
