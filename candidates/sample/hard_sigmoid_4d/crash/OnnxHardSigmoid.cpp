// ONNX HardSigmoid → MNN Express graph: y = clamp(alpha * x + beta, 0, 1)
// (one multiply, one add, and a ReLU6 with bounds [0, 1]).
#include <MNN/expr/Expr.hpp>
#include <MNN/expr/ExprCreator.hpp>
#include "MNN_generated.h"
#include "OnnxExtraManager.hpp"

namespace MNN {
namespace Express {

static const Attribute* findAttr(const Extra* extra, const char* name) {
    for (auto attr : *extra->attr()) {
        if (attr->key() != nullptr && attr->key()->str() == name) {
            return attr;
        }
    }
    return nullptr;
}

class OnnxHardSigmoidTransform : public OnnxExtraManager::Transform {
public:
    virtual EXPRP onExecute(EXPRP expr) const override {
        auto extra = expr->get()->main_as_Extra();
        const float alpha = findAttr(extra, "alpha")->f();
        const float beta  = findAttr(extra, "bias")->f();
        auto x = expr->inputs()[0];
        auto y = _Add(_Multiply(x, _Scalar<float>(alpha)), _Scalar<float>(beta));
        y = _Relu6(y, 0.0f, 1.0f);
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
