// Naive TopKV2: for every row of the last axis, partially sort the row's indices and write the k best
// values and their int32 indices. Order: best first; ties keep the smaller index first (as ONNX asks).
#include "backend/cpu/CPUTopKV2.hpp"
#include <algorithm>
#include <numeric>
#include <vector>
#include "backend/cpu/CPUBackend.hpp"
#include "core/Macro.h"

namespace MNN {

CPUTopKV2::CPUTopKV2(Backend *b, const Op *op) : Execution(b) {
    auto param = op->main_as_TopKV2();
    if (nullptr != param) {
        mLargest = param->largest();
    }
}

template <typename T>
static void topkRows(const T *src, T *values, int32_t *indices, int rows, int rowSize, int k, bool largest) {
    std::vector<int32_t> order(rowSize);
    for (int r = 0; r < rows; ++r) {
        const T *row = src + (size_t)r * rowSize;
        std::iota(order.begin(), order.end(), 0);
        auto better = [row, largest](int32_t a, int32_t b) {
            if (row[a] != row[b]) {
                return largest ? row[a] > row[b] : row[a] < row[b];
            }
            return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
        for (int j = 0; j < k; ++j) {
            values[(size_t)r * k + j]  = row[order[j]];
            indices[(size_t)r * k + j] = order[j];
        }
    }
}

ErrorCode CPUTopKV2::onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    auto input = inputs[0];
    const int k = inputs[1]->host<int32_t>()[0];
    const int rank = input->ndim();
    const int rowSize = input->length(rank - 1);
    if (k <= 0 || k > rowSize) {
        MNN_ERROR("CPUTopKV2: invalid k = %d for a row of %d\n", k, rowSize);
        return INVALID_VALUE;
    }
    const int rows = rowSize > 0 ? input->elementSize() / rowSize : 0;
    auto indices = outputs[1]->host<int32_t>();
    if (input->getType().code == halide_type_int) {
        topkRows<int32_t>(input->host<int32_t>(), outputs[0]->host<int32_t>(), indices, rows, rowSize, k, mLargest);
    } else {
        topkRows<float>(input->host<float>(), outputs[0]->host<float>(), indices, rows, rowSize, k, mLargest);
    }
    return NO_ERROR;
}

class CPUTopKV2Creator : public CPUBackend::Creator {
public:
    virtual Execution *onCreate(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                                const MNN::Op *op, Backend *backend) const override {
        return new CPUTopKV2(backend, op);
    }
};

REGISTER_CPU_OP_CREATOR(CPUTopKV2Creator, OpType_TopKV2);

} // namespace MNN
