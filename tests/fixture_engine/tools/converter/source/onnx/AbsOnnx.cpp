#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

static bool convertAbs(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 1 || node.outputs.size() != 1) {
        *err = "Abs needs one input and one output";
        return false;
    }
    opFromNode(graph, node, "UnaryOp").ints["opType"] = {0};
    return true;
}

REGISTER_ONNX_CONVERTER(Abs, convertAbs);

}  // namespace fixconv
