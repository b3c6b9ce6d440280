// ONNX BitwiseXor → MNN Express graph: one BinaryOp BITWISE_XOR on int32 (MNN keeps ints as int32).
#include <MNN/expr/Expr.hpp>
#include <MNN/expr/ExprCreator.hpp>
#include "MNN_generated.h"
#include "OnnxExtraManager.hpp"

namespace MNN {
namespace Express {

static const Attribute* findAttr(const Op* op, const char* name) {
    auto attrs = op->main_as_Extra()->attr();
    for (int i = 0; i < (int)attrs->size(); ++i) {
        auto attr = attrs->GetAs<Attribute>(i);
        if (attr->key() != nullptr && attr->key()->str() == name) {
            return attr;
        }
    }
    return nullptr;
}

class OnnxBitwiseXorTransform : public OnnxExtraManager::Transform {
public:
    virtual EXPRP onExecute(EXPRP expr) const override {
        auto inputs = expr->inputs();
        if (inputs.size() != 2) {
            MNN_ERROR("BitwiseXor expects 2 inputs, got %d\n", (int)inputs.size());
            return nullptr;
        }
        // numpy-style broadcasting unless the legacy flag says otherwise
        const bool broadcast = findAttr(expr->get(), "broadcast")->i() != 0;
        if (!broadcast && inputs[0]->getInfo()->size != inputs[1]->getInfo()->size) {
            MNN_ERROR("BitwiseXor: shapes differ and broadcast=0\n");
            return nullptr;
        }
        auto y      = _BitwiseXor(inputs[0], inputs[1]);
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
