// Fixture engine: Reduction (sum or mean over a set of axes; attribute "operation": 0 sum, 1 mean).
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUReduction : public Execution {
public:
    CPUReduction(Backend* backend, std::vector<int> axes, int operation);
    ErrorCode onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    std::vector<int> mAxes;
    int mOperation;
    std::vector<size_t> mOutStride;  // per input dim: stride in the output, 0 on reduced dims
    size_t mCount = 1;               // elements reduced into each output
};

}  // namespace MNN
