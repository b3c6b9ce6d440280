// Naive TopKV2 kernel for the MNN CPU backend: top-k along the last axis, sorted.
#ifndef CPUTOPKV2_HPP
#define CPUTOPKV2_HPP

#include "core/Execution.hpp"
#include "MNN_generated.h"

namespace MNN {
class CPUTopKV2 : public Execution {
public:
    CPUTopKV2(Backend *b, const Op *op);
    virtual ~CPUTopKV2() = default;
    virtual ErrorCode onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;

private:
    bool mLargest = true;
};
} // namespace MNN

#endif
