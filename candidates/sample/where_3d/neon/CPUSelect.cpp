// Where (MNN Select) with NEON: the condition (int32, bool in ONNX) becomes a lane mask (vtstq: all ones where
// it is non-zero) and one bit-select picks x or z, four 32-bit values per step, whatever their type.  An input
// of one element is broadcast (scalar loop); 16- and 8-bit element types take the scalar loop too.
#include <arm_neon.h>

#include "backend/cpu/CPUSelect.hpp"
#include "core/Macro.h"

namespace MNN {

template <typename T>
static void selectScalar(const int32_t *cond, const T *x, const T *z, T *y, int n, bool cAll, bool xAll, bool zAll) {
    for (int i = 0; i < n; ++i) {
        y[i] = cond[cAll ? i : 0] ? x[xAll ? i : 0] : z[zAll ? i : 0];
    }
}

static void selectNeon32(const int32_t *cond, const uint32_t *x, const uint32_t *z, uint32_t *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        int32x4_t c   = vld1q_s32(cond + i);
        uint32x4_t m  = vtstq_s32(c, c);
        vst1q_u32(y + i, vbslq_u32(m, vld1q_u32(x + i), vld1q_u32(z + i)));
    }
    for (; i < n; ++i) {
        y[i] = cond[i] ? x[i] : z[i];
    }
}

ErrorCode CPUSelect::onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    auto output  = outputs[0];
    const int n  = output->elementSize();
    const bool cAll = inputs[0]->elementSize() == n;
    const bool xAll = inputs[1]->elementSize() == n;
    const bool zAll = inputs[2]->elementSize() == n;
    const int32_t *cond = inputs[0]->host<int32_t>();
    const int bytes = output->getType().bytes();
    if (bytes == 4 && cAll && xAll && zAll) {
        selectNeon32(cond, inputs[1]->host<uint32_t>(), inputs[2]->host<uint32_t>(), output->host<uint32_t>(), n);
    } else if (bytes == 4) {
        selectScalar(cond, inputs[1]->host<uint32_t>(), inputs[2]->host<uint32_t>(), output->host<uint32_t>(), n,
                     cAll, xAll, zAll);
    } else if (bytes == 2) {
        selectScalar(cond, inputs[1]->host<uint16_t>(), inputs[2]->host<uint16_t>(), output->host<uint16_t>(), n,
                     cAll, xAll, zAll);
    } else if (bytes == 1) {
        selectScalar(cond, inputs[1]->host<uint8_t>(), inputs[2]->host<uint8_t>(), output->host<uint8_t>(), n,
                     cAll, xAll, zAll);
    } else {
        MNN_ERROR("CPUSelect (neon): %d-byte elements are not supported\n", bytes);
        return NOT_SUPPORT;
    }
    return NO_ERROR;
}

class CPUSelectCreator : public CPUBackend::Creator {
public:
    virtual Execution *onCreate(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                                const MNN::Op *op, Backend *backend) const override {
        return new CPUSelect(backend);
    }
};

REGISTER_CPU_OP_CREATOR(CPUSelectCreator, OpType_Select);

} // namespace MNN
