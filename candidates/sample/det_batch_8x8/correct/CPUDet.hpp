// Naive determinant kernel for the MNN CPU backend.
#ifndef CPUDet_hpp
#define CPUDet_hpp

#include <vector>
#include <MNN/Tensor.hpp>
#include "core/Execution.hpp"

namespace MNN {
class CPUDet : public Execution {
public:
    CPUDet(Backend *bn) : Execution(bn) {
    }
    virtual ~CPUDet() = default;
    virtual ErrorCode onResize(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;
    virtual ErrorCode onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;

private:
    int mBatch = 0;
    int mM = 0;
    std::vector<double> mWork; // one M x M matrix in double precision
};
} // namespace MNN
#endif
