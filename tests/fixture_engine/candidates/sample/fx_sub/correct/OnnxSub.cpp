// Composite rewrite: Sub(a, b) = a + (-1 * b), from the engine's BinaryOp Mul and Add.
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

static bool rewriteSub(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 2 || node.outputs.size() != 1) {
        *err = "Sub needs two inputs and one output";
        return false;
    }
    const std::string minusOne = graph.addConst(node.name + "_minus_one", {}, {-1.f});
    const std::string negB = graph.newName(node.name + "_neg_b");

    FixOp& neg = graph.addOp("BinaryOp", node.name + "_neg");
    neg.inputs = {node.inputs[1], minusOne};
    neg.outputs = {negB};
    neg.ints["opType"] = {2};  // MUL

    FixOp& add = graph.addOp("BinaryOp", node.name);
    add.inputs = {node.inputs[0], negB};
    add.outputs = node.outputs;
    add.ints["opType"] = {0};  // ADD
    return true;
}

REGISTER_ONNX_EXTRA(Sub, rewriteSub);

}  // namespace fixconv
