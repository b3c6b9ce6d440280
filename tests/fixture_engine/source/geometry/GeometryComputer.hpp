// Fixture engine: geometry layer.  A GeometryComputer lowers an op into other ops (typically one
// Raster copy) before kernels are created; when one is registered for an op type it always wins.
//
//     static void _create() { static GeometryFoo g; GeometryComputer::registerGeometryComputer(&g, {OpType_Foo}); }
//     REGISTER_GEOMETRY(GeometryFoo, _create);
// defines ___GeometryFoo___create__(), called from the generated GeometryOPRegister.cpp.
#pragma once
#include <vector>

#include "core/OpType.hpp"
#include "core/Tensor.hpp"

namespace MNN {

// Raster regions: the "region" int attribute is a flat list of groups of kRegionInts ints:
//   srcOffset, srcStride[3], dstOffset, dstStride[3], size[3]
// Element (i, j, k) < size is copied from src[srcOffset + i*srcStride0 + j*srcStride1 + k*srcStride2]
// to dst[dstOffset + i*dstStride0 + j*dstStride1 + k*dstStride2].  Input 0 is the source, unless the optional
// "origin" int attribute (one input index per region, MNN's Region::origin) names another: a Raster with
// regions of several inputs concatenates or stacks them, as MNN's does.
constexpr int kRegionInts = 11;

struct CommandBuffer {
    std::vector<Op> ops;
};

class GeometryComputer {
public:
    virtual ~GeometryComputer() = default;
    // Appends the lowered ops to cmd; output shapes are already computed.  Returns false on error.
    virtual bool onCompute(const Op* op, const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                           CommandBuffer& cmd) const = 0;
    static void registerGeometryComputer(const GeometryComputer* comp, const std::vector<OpType>& types);
    static const GeometryComputer* search(OpType type);
};

void registerGeometryOps();  // defined in the generated GeometryOPRegister.cpp
void ensureRegistered();

}  // namespace MNN

#define REGISTER_GEOMETRY(name, func) \
    void ___##name##__##func##__() { func(); }
