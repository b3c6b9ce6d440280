// Where (MNN Select) with NEON: y = cond ? x : z, four 32-bit lanes per bit-select.
#ifndef CPUSelect_hpp
#define CPUSelect_hpp

#include "backend/cpu/CPUBackend.hpp"

namespace MNN {
class CPUSelect : public Execution {
public:
    explicit CPUSelect(Backend *backend) : Execution(backend) {
    }
    virtual ErrorCode onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) override;
};
} // namespace MNN

#endif /* CPUSelect_hpp */
