#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

// select_last_index is ignored (first maximum wins), like the real engine.
static bool convertArgMax(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    (void)err;
    FixOp& op = opFromNode(graph, node, "ArgMax");
    op.ints["axis"] = {static_cast<int>(node.attrInt("axis", 0))};
    op.ints["keepDims"] = {static_cast<int>(node.attrInt("keepdims", 1))};
    return true;
}

REGISTER_ONNX_CONVERTER(ArgMax, convertArgMax);

}  // namespace fixconv
