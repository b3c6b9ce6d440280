#include "onnx/OnnxOpConverter.hpp"

namespace fixconv {

static bool convertTranspose(const OnnxNode& node, ConvGraph& graph, std::string* err) {
    (void)err;
    FixOp& op = opFromNode(graph, node, "Transpose");
    if (const auto* perm = node.attrInts("perm")) {
        std::vector<int>& p = op.ints["perm"];
        for (auto v : *perm) p.push_back(static_cast<int>(v));
    }
    return true;
}

REGISTER_ONNX_CONVERTER(Transpose, convertTranspose);

}  // namespace fixconv
