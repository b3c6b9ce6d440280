#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

static bool rewriteSub(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    // Express-style API that does not exist in this converter
    auto a = _Input(node.inputs[0]);
    auto b = _Input(node.inputs[1]);
    graph.setOutput(node.outputs[0], _Subtract(a, b));
    return true;
}

REGISTER_ONNX_EXTRA(Sub, rewriteSub);

}  // namespace fixconv
