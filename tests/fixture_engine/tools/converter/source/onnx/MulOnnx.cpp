#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

static bool convertMul(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 2 || node.outputs.size() != 1) {
        *err = "Mul needs two inputs and one output";
        return false;
    }
    opFromNode(graph, node, "BinaryOp").ints["opType"] = {2};
    return true;
}

REGISTER_ONNX_CONVERTER(Mul, convertMul);

}  // namespace fixconv
