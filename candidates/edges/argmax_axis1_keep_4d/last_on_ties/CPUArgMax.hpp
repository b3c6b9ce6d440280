// Naive ArgMax / ArgMin kernel for the MNN CPU backend (sample candidate, expected: ok).
#ifndef CPUArgMax_hpp
#define CPUArgMax_hpp

#include "core/Execution.hpp"

namespace MNN {

class CPUArgMax : public Execution {
public:
    enum ArgMinOrMax { ARGMIN, ARGMAX };
    CPUArgMax(Backend *backend, ArgMinOrMax mode, int axis);
    virtual ~CPUArgMax() = default;
    virtual ErrorCode onResize(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;
    virtual ErrorCode onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;

private:
    ArgMinOrMax mMode;
    int mAxis;
    int mOuter = 1;  // product of the dims before the axis
    int mLength = 1; // extent of the reduced axis
    int mInner = 1;  // product of the dims after the axis
};

} // namespace MNN

#endif
