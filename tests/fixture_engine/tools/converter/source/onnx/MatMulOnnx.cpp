#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

static bool convertMatMul(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 2) {
        *err = "MatMul needs two inputs";
        return false;
    }
    FixOp& op = opFromNode(graph, node, "MatMul");
    op.ints["transposeA"] = {0};
    op.ints["transposeB"] = {0};
    return true;
}

REGISTER_ONNX_CONVERTER(MatMul, convertMatMul);

}  // namespace fixconv
