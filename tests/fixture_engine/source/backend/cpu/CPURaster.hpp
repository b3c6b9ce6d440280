// Fixture engine: Raster, strided region copies produced by the geometry layer.
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPURaster : public Execution {
public:
    CPURaster(Backend* backend, std::vector<int> regions);
    ErrorCode onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    std::vector<int> mRegions;  // groups of kRegionInts, see geometry/GeometryComputer.hpp
};

}  // namespace MNN
