// Sub lowered to BinaryOp SUB; assumes the second operand is a constant (it is a graph input here).
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

static bool rewriteSub(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    (void)err;
    const OnnxTensor* b = graph.initializer(node.inputs[1]);
    std::vector<int> dims;
    for (size_t i = 0; i < b->dims.size(); ++i) dims.push_back(static_cast<int>(b->dims[i]));
    std::vector<float> negated(b->floats.size());
    for (size_t i = 0; i < negated.size(); ++i) negated[i] = -b->floats[i];
    FixOp& op = graph.addOp("BinaryOp", node.name);
    op.inputs = {node.inputs[0], graph.addConst(node.name + "_neg_b", dims, negated)};
    op.outputs = node.outputs;
    op.ints["opType"] = {0};  // ADD
    return true;
}

REGISTER_ONNX_EXTRA(Sub, rewriteSub);

}  // namespace fixconv
