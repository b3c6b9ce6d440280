#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

static bool convertAdd(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (node.inputs.size() != 2 || node.outputs.size() != 1) {
        *err = "Add needs two inputs and one output";
        return false;
    }
    opFromNode(graph, node, "BinaryOp").ints["opType"] = {0};
    return true;
}

REGISTER_ONNX_CONVERTER(Add, convertAdd);

}  // namespace fixconv
