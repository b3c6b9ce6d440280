#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

static bool convertExp(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 1 || node.outputs.size() != 1) {
        *err = "Exp needs one input and one output";
        return false;
    }
    opFromNode(graph, node, "UnaryOp").ints["opType"] = {7};
    return true;
}

REGISTER_ONNX_CONVERTER(Exp, convertExp);

}  // namespace fixconv
