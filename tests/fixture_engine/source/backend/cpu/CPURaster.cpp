#include "backend/cpu/CPURaster.hpp"

#include "geometry/GeometryComputer.hpp"

namespace MNN {

CPURaster::CPURaster(Backend* backend, std::vector<int> regions, std::vector<int> origins)
    : Execution(backend), mRegions(std::move(regions)), mOrigins(std::move(origins)) {}

ErrorCode CPURaster::onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    if (mRegions.size() % kRegionInts != 0) return INVALID_VALUE;
    if (!mOrigins.empty() && mOrigins.size() != mRegions.size() / kRegionInts) return INVALID_VALUE;
    const long dstSize = static_cast<long>(outputs[0]->elementSize());
    for (size_t r = 0; r < mRegions.size(); r += kRegionInts) {
        const int* g = mRegions.data() + r;
        const int origin = mOrigins.empty() ? 0 : mOrigins[r / kRegionInts];
        if (origin < 0 || origin >= static_cast<int>(inputs.size())) return INVALID_VALUE;
        const long srcSize = static_cast<long>(inputs[origin]->elementSize());
        long srcLast = g[0], dstLast = g[4];
        for (int d = 0; d < 3; ++d) {
            if (g[8 + d] <= 0) return INVALID_VALUE;
            srcLast += static_cast<long>(g[1 + d]) * (g[8 + d] - 1);
            dstLast += static_cast<long>(g[5 + d]) * (g[8 + d] - 1);
        }
        if (g[0] < 0 || g[4] < 0 || srcLast >= srcSize || dstLast >= dstSize) return INVALID_VALUE;
    }
    return NO_ERROR;
}

ErrorCode CPURaster::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    int32_t* dst = outputs[0]->host<int32_t>();
    for (size_t r = 0; r < mRegions.size(); r += kRegionInts) {
        const int* g = mRegions.data() + r;
        const Tensor* origin = inputs[mOrigins.empty() ? 0 : mOrigins[r / kRegionInts]];
        const int32_t* src = origin->host<int32_t>();  // 4-byte copy, any type
        for (int i = 0; i < g[8]; ++i) {
            for (int j = 0; j < g[9]; ++j) {
                const int32_t* s = src + g[0] + i * g[1] + j * g[2];
                int32_t* d = dst + g[4] + i * g[5] + j * g[6];
                for (int k = 0; k < g[10]; ++k) d[k * g[7]] = s[k * g[3]];
            }
        }
    }
    return NO_ERROR;
}

class CPURasterCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)inputs;
        (void)outputs;
        const std::vector<int>* regions = op->listAttr("region");
        const std::vector<int>* origins = op->listAttr("origin");
        return regions == nullptr ? nullptr
                                  : new CPURaster(backend, *regions, origins ? *origins : std::vector<int>());
    }
};

REGISTER_CPU_OP_CREATOR(CPURasterCreator, OpType_Raster);

}  // namespace MNN
