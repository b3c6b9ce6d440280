// Fixture engine: Transpose lowered to one Raster op (one region per leading index beyond 3 dims).
#include "geometry/GeometryComputer.hpp"

namespace MNN {

class GeometryTranspose : public GeometryComputer {
public:
    bool onCompute(const Op* op, const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   CommandBuffer& cmd) const override {
        const Tensor* x = inputs[0];
        const int rank = x->dimensions();
        std::vector<int> perm(rank);
        const std::vector<int>* p = op->listAttr("perm");
        for (int i = 0; i < rank; ++i) perm[i] = p ? ((*p)[i] + rank) % rank : rank - 1 - i;

        std::vector<int> inStride(rank, 1), outStride(rank, 1);
        for (int i = rank - 2; i >= 0; --i) {
            inStride[i] = inStride[i + 1] * x->length(i + 1);
            outStride[i] = outStride[i + 1] * outputs[0]->length(i + 1);
        }
        // Pad to at least 3 output axes (size 1, stride 0 in front).
        std::vector<int> size, srcStride, dstStride;
        for (int i = rank; i < 3; ++i) {
            size.push_back(1);
            srcStride.push_back(0);
            dstStride.push_back(0);
        }
        for (int i = 0; i < rank; ++i) {
            size.push_back(outputs[0]->length(i));
            srcStride.push_back(inStride[perm[i]]);
            dstStride.push_back(outStride[i]);
        }
        const int lead = static_cast<int>(size.size()) - 3;
        int leadCount = 1;
        for (int i = 0; i < lead; ++i) leadCount *= size[i];

        Op raster;
        raster.type = OpType_Raster;
        raster.name = op->name + "_raster";
        raster.inputIndexes = op->inputIndexes;
        raster.outputIndexes = op->outputIndexes;
        raster.ints["shape"] = outputs[0]->shape();
        std::vector<int>& regions = raster.ints["region"];
        for (int n = 0; n < leadCount; ++n) {
            int srcOffset = 0, dstOffset = 0, rest = n;
            for (int i = lead - 1; i >= 0; --i) {
                int c = rest % size[i];
                rest /= size[i];
                srcOffset += c * srcStride[i];
                dstOffset += c * dstStride[i];
            }
            regions.push_back(srcOffset);
            for (int d = 0; d < 3; ++d) regions.push_back(srcStride[lead + d]);
            regions.push_back(dstOffset);
            for (int d = 0; d < 3; ++d) regions.push_back(dstStride[lead + d]);
            for (int d = 0; d < 3; ++d) regions.push_back(size[lead + d]);
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
