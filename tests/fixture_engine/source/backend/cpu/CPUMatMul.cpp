#include "backend/cpu/CPUMatMul.hpp"

#include <cstring>

namespace MNN {

CPUMatMul::CPUMatMul(Backend* backend, bool transposeA, bool transposeB, bool transposeC, bool needParallel)
    : Execution(backend),
      mTransposeA(transposeA),
      mTransposeB(transposeB),
      mTransposeC(transposeC),
      mNeedParallel(needParallel) {}

ErrorCode CPUMatMul::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    if (mTransposeC) return NOT_SUPPORT;
    const Tensor* A = inputs[0];
    const Tensor* B = inputs[1];
    const int m = outputs[0]->length(0), n = outputs[0]->length(1);
    const int k = mTransposeA ? A->length(0) : A->length(1);
    const float* a = A->host<float>();
    const float* b = B->host<float>();
    float* c = outputs[0]->host<float>();
    std::memset(c, 0, sizeof(float) * m * n);
    for (int i = 0; i < m; ++i) {
        for (int p = 0; p < k; ++p) {
            float av = mTransposeA ? a[p * m + i] : a[i * k + p];
            float* row = c + i * n;
            if (mTransposeB) {
                for (int j = 0; j < n; ++j) row[j] += av * b[j * k + p];
            } else {
                const float* brow = b + p * n;
                for (int j = 0; j < n; ++j) row[j] += av * brow[j];
            }
        }
    }
    return NO_ERROR;
}

class CPUMatMulCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)outputs;
        if (inputs[0]->type() != DataType::Float32 || inputs[1]->type() != DataType::Float32) return nullptr;
        return new CPUMatMul(backend, op->intAttr("transposeA", 0) != 0, op->intAttr("transposeB", 0) != 0, false,
                             true);
    }
};

REGISTER_CPU_OP_CREATOR(CPUMatMulCreator, OpType_MatMul);

}  // namespace MNN
