// Fixture engine: Raster, strided region copies produced by the geometry layer.
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPURaster : public Execution {
public:
    CPURaster(Backend* backend, std::vector<int> regions, std::vector<int> origins);
    ErrorCode onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    std::vector<int> mRegions;  // groups of kRegionInts, see geometry/GeometryComputer.hpp
    std::vector<int> mOrigins;  // the input each region reads (empty: input 0 for all)
};

}  // namespace MNN
