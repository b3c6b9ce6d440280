// Transpose as Raster: one region per output row (the last output axis is the inner copy).  NEON: a row's
// source offset is the dot product of its output coordinates with the permuted input strides, four axes per
// vector (ranks up to 4 in one multiply and one horizontal add).
#include "geometry/GeometryComputer.hpp"

#include <arm_neon.h>

namespace MNN {

class GeometryTranspose : public GeometryComputer {
public:
    bool onCompute(const Op* op, const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   CommandBuffer& cmd) const override {
        const Tensor* x = inputs[0];
        const Tensor* y = outputs[0];
        const int rank = x->dimensions();
        if (rank == 0) return false;
        const std::vector<int>* permAttr = op->listAttr("perm");
        std::vector<int> perm(rank);
        for (int i = 0; i < rank; ++i) {
            int a = permAttr ? (*permAttr)[i] : rank - 1 - i;
            perm[i] = a < 0 ? a + rank : a;
        }
        std::vector<int> inStride(rank, 1);
        for (int i = rank - 2; i >= 0; --i) inStride[i] = inStride[i + 1] * x->length(i + 1);

        Op raster;
        raster.type = OpType_Raster;
        raster.name = op->name + "_rows";
        raster.inputIndexes = op->inputIndexes;
        raster.outputIndexes = op->outputIndexes;
        raster.ints["shape"] = y->shape();
        std::vector<int>& regions = raster.ints["region"];

        const int rowLength = y->length(rank - 1);
        const int rows = static_cast<int>(y->elementSize()) / rowLength;
        std::vector<int> index(rank, 0);  // output coordinates of the row start
        for (int r = 0; r < rows; ++r) {
            int32_t coord[4] = {0, 0, 0, 0}, stride[4] = {0, 0, 0, 0};
            int src = 0;
            for (int i = 0; i < rank - 1; ++i) {
                if (i < 4) {
                    coord[i] = index[i];
                    stride[i] = inStride[perm[i]];
                } else {
                    src += index[i] * inStride[perm[i]];
                }
            }
            src += vaddvq_s32(vmulq_s32(vld1q_s32(coord), vld1q_s32(stride)));
            const int dst = r * rowLength;
            const int region[kRegionInts] = {src, 0, 0, inStride[perm[rank - 1]], dst, 0, 0, 1, 1, 1, rowLength};
            regions.insert(regions.end(), region, region + kRegionInts);
            for (int i = rank - 2; i >= 0; --i) {
                if (++index[i] < y->length(i)) break;
                index[i] = 0;
            }
        }
        cmd.ops.push_back(raster);
        return true;
    }
};

static void _create() {
    static GeometryTranspose geometry;
    GeometryComputer::registerGeometryComputer(&geometry, {OpType_Transpose});
}

REGISTER_GEOMETRY(GeometryTranspose, _create);

}  // namespace MNN
