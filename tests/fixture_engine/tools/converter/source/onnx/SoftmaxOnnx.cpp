#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

// Opset >= 13 semantics: softmax along one axis (default -1).
static bool convertSoftmax(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    if (graph.onnx().opset != 0 && graph.onnx().opset < 13) {
        *err = "Softmax before opset 13 (coerced 2-D semantics) is not supported";
        return false;
    }
    opFromNode(graph, node, "Softmax").ints["axis"] = {static_cast<int>(node.attrInt("axis", -1))};
    return true;
}

REGISTER_ONNX_CONVERTER(Softmax, convertSoftmax);

}  // namespace fixconv
