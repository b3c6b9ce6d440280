#include "core/OpType.hpp"

namespace MNN {

static const char* kNames[OpType_MAX] = {"UnaryOp", "BinaryOp", "ArgMax", "Softmax",
                                         "Reduction", "MatMul", "Transpose", "Raster"};

const char* opTypeName(OpType t) { return (t >= 0 && t < OpType_MAX) ? kNames[t] : "Unknown"; }

bool parseOpType(const std::string& name, OpType* out) {
    for (int i = 0; i < OpType_MAX; ++i) {
        if (name == kNames[i]) {
            *out = static_cast<OpType>(i);
            return true;
        }
    }
    return false;
}

}  // namespace MNN
