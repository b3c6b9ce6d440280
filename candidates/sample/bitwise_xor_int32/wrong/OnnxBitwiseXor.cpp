// ONNX BitwiseXor → MNN Express graph: a ^ b = (a | b) & ~(a & b), built from OR / AND / NOT.
#include <MNN/expr/Expr.hpp>
#include <MNN/expr/ExprCreator.hpp>
#include "MNN_generated.h"
#include "OnnxExtraManager.hpp"

namespace MNN {
namespace Express {

class OnnxBitwiseXorTransform : public OnnxExtraManager::Transform {
public:
    virtual EXPRP onExecute(EXPRP expr) const override {
        auto inputs = expr->inputs();
        if (inputs.size() != 2) {
            MNN_ERROR("BitwiseXor expects 2 inputs, got %d\n", (int)inputs.size());
            return nullptr;
        }
        auto both   = _BitwiseAnd(inputs[0], inputs[1]);
        auto y      = _BitwiseAnd(_BitwiseOr(inputs[0], inputs[1]), _Negative(both));
        auto result = y->expr().first;
        result->setName(expr->name());
        return result;
    }
};

static auto gRegisterBitwiseXor = []() {
    OnnxExtraManager::get()->insert("BitwiseXor",
                                    std::shared_ptr<OnnxExtraManager::Transform>(new OnnxBitwiseXorTransform));
    return true;
}();

} // namespace Express
} // namespace MNN
