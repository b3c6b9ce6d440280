// Naive LayerNorm kernel for the MNN CPU backend (normalises the trailing `axis` dims).
#ifndef CPULayerNorm_hpp
#define CPULayerNorm_hpp

#include <vector>
#include "core/Execution.hpp"
#include "MNN_generated.h"

namespace MNN {
class CPULayerNorm : public Execution {
public:
    CPULayerNorm(Backend *backend, const Op *op);
    virtual ~CPULayerNorm() = default;
    virtual ErrorCode onResize(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;
    virtual ErrorCode onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;

private:
    int mAxisCount = 0;   // number of trailing dims normalised together
    int mGroup = 1;
    float mEpsilon = 1e-5f;
    bool mRMSNorm = false;
    std::vector<float> mGamma;
    std::vector<float> mBeta;
    int mOuter = 1;
    int mInner = 1;
    float *mRow = nullptr; // normalised row before the affine transform
};
} // namespace MNN
#endif
