// ONNX HardSigmoid → MNN Express graph: y = clamp(alpha * x + beta, 0, 1)
// (one multiply, one add, and a clip to [0, 1]).
#include <MNN/expr/Expr.hpp>
#include <MNN/expr/ExprCreator.hpp>
#include "MNN_generated.h"
#include "OnnxExtraManager.hpp"

namespace MNN {
namespace Express {

class OnnxHardSigmoidTransform : public OnnxExtraManager::Transform {
public:
    virtual EXPRP onExecute(EXPRP expr) const override {
        float alpha = 0.2f; // ONNX defaults
        float beta  = 0.5f;
        auto extra = expr->get()->main_as_Extra();
        if (nullptr != extra && nullptr != extra->attr()) {
            for (auto attr : *extra->attr()) {
                if (nullptr == attr->key()) {
                    continue;
                }
                const auto key = attr->key()->str();
                if (key == "alpha") {
                    alpha = attr->f();
                } else if (key == "beta") {
                    beta = attr->f();
                }
            }
        }
        auto x = expr->inputs()[0];
        auto y = _Add(_Multiply(x, _Scalar<float>(alpha)), _Scalar<float>(beta));
        y = _Clip(y, 0.0f, 1.0f);
        auto result = y->expr().first;
        result->setName(expr->name());
        return result;
    }
};

static auto gRegisterHardSigmoid = []() {
    OnnxExtraManager::get()->insert("HardSigmoid",
                                    std::shared_ptr<OnnxExtraManager::Transform>(new OnnxHardSigmoidTransform));
    return true;
}();

} // namespace Express
} // namespace MNN
