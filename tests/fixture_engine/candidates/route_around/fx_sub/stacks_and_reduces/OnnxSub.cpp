// A route-around (tests/test_route_around_fixture.py): Sub(a, b) with no BinaryOp at all.  -b by UnaryOp Neg;
// a and -b (broadcast over a's leading axes) stacked by one Raster into s = [..., 2]; y = ReduceSum(s, -1).
// Its outputs are exact (0 + a + (-b) == a - b), but the task's target op type, BinaryOp, never executes.
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

static const std::vector<int64_t>* inputDims(const ConvGraph& graph, const std::string& name) {
    for (const auto& in : graph.onnx().inputs) {
        if (in.name == name) return &in.dims;
    }
    return nullptr;
}

static bool rewriteSub(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    const auto* aDims = node.inputs.size() == 2 ? inputDims(graph, node.inputs[0]) : nullptr;
    const auto* bDims = node.inputs.size() == 2 ? inputDims(graph, node.inputs[1]) : nullptr;
    if (aDims == nullptr || bDims == nullptr || node.outputs.size() != 1 || bDims->size() > aDims->size()) {
        *err = "Sub: this rewrite needs two graph inputs, b broadcast over a's leading axes";
        return false;
    }
    int outer = 1, inner = 1;
    std::vector<int> stacked;
    for (size_t i = 0; i < aDims->size(); ++i) {
        const int d = static_cast<int>((*aDims)[i]);
        const size_t lead = aDims->size() - bDims->size();
        if (i >= lead && (*bDims)[i - lead] != d) {
            *err = "Sub: b is not a's trailing axes";
            return false;
        }
        (i < lead ? outer : inner) *= d;
        stacked.push_back(d);
    }
    stacked.push_back(2);

    const std::string negB = graph.newName(node.name + "_neg_b");
    FixOp& neg = graph.addOp("UnaryOp", node.name + "_neg");
    neg.inputs = {node.inputs[1]};
    neg.outputs = {negB};
    neg.ints["opType"] = {1};  // NEG

    const std::string stack = graph.newName(node.name + "_stacked");
    FixOp& raster = graph.addOp("Raster", node.name + "_stack");
    raster.inputs = {node.inputs[0], negB};
    raster.outputs = {stack};
    raster.ints["shape"] = stacked;
    // srcOffset, srcStride[3], dstOffset, dstStride[3], size[3]: a to the even slots, -b (row repeated) to the odd
    raster.ints["region"] = {0, 0, inner, 1, 0, 0, 2 * inner, 2, 1, outer, inner,
                             0, 0, 0, 1, 1, 0, 2 * inner, 2, 1, outer, inner};
    raster.ints["origin"] = {0, 1};

    FixOp& sum = graph.addOp("Reduction", node.name);
    sum.inputs = {stack};
    sum.outputs = node.outputs;
    sum.ints["operation"] = {0};  // SUM
    sum.ints["dim"] = {-1};
    sum.ints["keepDims"] = {0};
    return true;
}

REGISTER_ONNX_EXTRA(Sub, rewriteSub);

}  // namespace fixconv
