// Naive determinant: Gaussian elimination with partial pivoting in double precision, one matrix at a time.
// Input [..., M, M] (row-major), output [...].
#include "backend/cpu/CPUDet.hpp"
#include <cmath>
#include <utility>
#include "backend/cpu/CPUBackend.hpp"
#include "core/Macro.h"

namespace MNN {

ErrorCode CPUDet::onResize(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    auto input = inputs[0];
    const int rank = input->dimensions();
    if (rank < 2 || input->length(rank - 1) != input->length(rank - 2)) {
        MNN_ERROR("CPUDet: input must be [..., M, M]\n");
        return INVALID_VALUE;
    }
    mM = input->length(rank - 1);
    mBatch = mM > 0 ? input->elementSize() / (mM * mM) : 0;
    mWork.resize((size_t)mM * mM);
    return NO_ERROR;
}

ErrorCode CPUDet::onExecute(const std::vector<Tensor *> &inputs, std::vector<Tensor *> &outputs) {
    const float *src = inputs[0]->host<float>();
    float *dst = outputs[0]->host<float>();
    const int M = mM;
    double *a = mWork.data();
    for (int b = 0; b < mBatch; ++b) {
        const float *m = src + (size_t)b * M * M;
        for (int i = 0; i < M * M; ++i) {
            a[i] = m[i];
        }
        double det = 1.0;
        for (int c = 0; c < M; ++c) {
            int pivot = c;
            for (int r = c + 1; r < M; ++r) {
                if (std::fabs(a[r * M + c]) > std::fabs(a[pivot * M + c])) {
                    pivot = r;
                }
            }
            if (a[pivot * M + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (pivot != c) {
                for (int j = 0; j < M; ++j) {
                    std::swap(a[c * M + j], a[pivot * M + j]);
                }
                det = -det;
            }
            const double p = a[c * M + c];
            det *= p;
            for (int r = c + 1; r < M; ++r) {
                const double f = a[r * M + c] / p;
                for (int j = c + 1; j < M; ++j) {
                    a[r * M + j] -= f * a[c * M + j];
                }
            }
        }
        dst[b] = (float)det;
    }
    return NO_ERROR;
}

class CPUDetCreator : public CPUBackend::Creator {
public:
    virtual Execution *onCreate(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                                const MNN::Op *op, Backend *backend) const override {
        return new CPUDet(backend);
    }
};

REGISTER_CPU_OP_CREATOR(CPUDetCreator, OpType_Det);

} // namespace MNN
