// Naive Tile as geometry: the output is a virtual tensor made of copy regions of the input.
// The repeat of every axis is output extent / input extent. One region copies a
// [repeat(r-2), in(r-2), in(r-1)] block for every index of the leading output axes and every repeat
// of the last axis.
#include <vector>
#include "geometry/GeometryComputer.hpp"
#include "core/Macro.h"

namespace MNN {

class GeometryTile : public GeometryComputer {
public:
    virtual bool onCompute(const Op *op, const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                           Context &context, CommandBuffer &res) const override {
        auto input  = inputs[0];
        auto output = outputs[0];
        Tensor *source = nullptr; // set below once the layout is known
        const int rank = input->dimensions();
        if (rank != output->dimensions()) {
            MNN_ERROR("GeometryTile: input and output ranks differ\n");
            return false;
        }
        // shapes padded to at least 2 axes
        std::vector<int> inShape, outShape;
        for (int i = rank; i < 2; ++i) {
            inShape.push_back(1);
            outShape.push_back(1);
        }
        for (int i = 0; i < rank; ++i) {
            inShape.push_back(input->length(i));
            outShape.push_back(output->length(i));
        }
        const int n = (int)inShape.size();
        std::vector<int> repeat(n), inStride(n), outStride(n);
        int si = 1, so = 1;
        for (int i = n - 1; i >= 0; --i) {
            if (inShape[i] <= 0 || outShape[i] % inShape[i] != 0) {
                MNN_ERROR("GeometryTile: output extent %d is not a multiple of input extent %d\n", outShape[i], inShape[i]);
                return false;
            }
            repeat[i]    = outShape[i] / inShape[i];
            inStride[i]  = si;
            outStride[i] = so;
            si *= inShape[i];
            so *= outShape[i];
        }
        const int lead = n - 2;
        int leadCount = 1;
        for (int i = 0; i < lead; ++i) {
            leadCount *= outShape[i];
        }
        auto des = TensorUtils::getDescribe(output);
        des->memoryType = Tensor::InsideDescribe::MEMORY_VIRTUAL;
        des->regions.clear();
        des->regions.reserve((size_t)leadCount * repeat[n - 1]);
        std::vector<int> coord(lead > 0 ? lead : 1, 0);
        for (int u = 0; u < leadCount; ++u) {
            int rem = u, srcOffset = 0, dstOffset = 0;
            for (int i = lead - 1; i >= 0; --i) {
                coord[i] = rem % outShape[i];
                rem /= outShape[i];
                srcOffset += (coord[i] % inShape[i]) * inStride[i];
                dstOffset += coord[i] * outStride[i];
            }
            for (int k = 0; k < repeat[n - 1]; ++k) {
                Tensor::InsideDescribe::Region reg;
                reg.origin        = source;
                reg.size[0]       = repeat[n - 2];
                reg.size[1]       = inShape[n - 2];
                reg.size[2]       = inShape[n - 1];
                reg.src.offset    = srcOffset;
                reg.src.stride[0] = 0;
                reg.src.stride[1] = inShape[n - 1];
                reg.src.stride[2] = 1;
                reg.dst.offset    = dstOffset + k * inShape[n - 1];
                reg.dst.stride[0] = inShape[n - 2] * outShape[n - 1];
                reg.dst.stride[1] = outShape[n - 1];
                reg.dst.stride[2] = 1;
                des->regions.emplace_back(std::move(reg));
            }
        }
        return true;
    }
};

static void _create() {
    std::shared_ptr<GeometryComputer> comp(new GeometryTile);
    GeometryComputer::registerGeometryComputer(comp, {OpType_Tile});
}

REGISTER_GEOMETRY(GeometryTile, _create);

} // namespace MNN
