// Transpose / Permute as geometry, with NEON: the output is a virtual tensor whose regions read the input with
// permuted strides; the last (up to) three output axes form one region, the leading axes are looped over.
// MNN copies the regions itself (Raster), so a layout op's own code is this region arithmetic: the permuted
// input strides of up to four axes are gathered with one table lookup (vqtbl1q_u8 on the strides' bytes).
#include <arm_neon.h>
#include <vector>
#include "geometry/GeometryComputer.hpp"
#include "core/Macro.h"

namespace MNN {

class GeometryPermute : public GeometryComputer {
public:
    virtual bool onCompute(const Op *op, const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                           Context &context, CommandBuffer &res) const override {
        auto input  = inputs[0];
        auto output = outputs[0];
        const int rank = input->dimensions();
        std::vector<int> perm(rank);
        if (op->main_type() == OpParameter_Permute && op->main_as_Permute()->dims() != nullptr) {
            auto dims = op->main_as_Permute()->dims();
            if ((int)dims->size() != rank) {
                MNN_ERROR("GeometryPermute: perm has %d axes, input has %d\n", (int)dims->size(), rank);
                return false;
            }
            for (int i = 0; i < rank; ++i) {
                perm[i] = dims->data()[i];
            }
        } else if (inputs.size() > 1 && inputs[1]->host<int32_t>() != nullptr) {
            for (int i = 0; i < rank; ++i) {
                perm[i] = inputs[1]->host<int32_t>()[i];
            }
        } else {
            for (int i = 0; i < rank; ++i) {
                perm[i] = rank - 1 - i; // ONNX default: reverse the axes
            }
        }
        for (int i = 0; i < rank; ++i) {
            if (perm[i] < 0) {
                perm[i] += rank;
            }
        }
        // contiguous strides of the input; stride of output axis i inside the input
        std::vector<int> inStride(rank), outShape(rank), srcStride(rank), outStride(rank);
        int s = 1;
        for (int i = rank - 1; i >= 0; --i) {
            inStride[i] = s;
            s *= input->length(i);
        }
        if (rank <= 4) {  // srcStride[i] = inStride[perm[i]], four lanes at once
            int32_t strides[4] = {0, 0, 0, 0};
            uint8_t index[16];
            for (int i = 0; i < rank; ++i) {
                strides[i] = inStride[i];
            }
            for (int i = 0; i < 16; ++i) {
                index[i] = (uint8_t)(i / 4 < rank ? perm[i / 4] * 4 + i % 4 : 0xFF);  // 0xFF: a zero byte
            }
            uint8x16_t bytes = vqtbl1q_u8(vreinterpretq_u8_s32(vld1q_s32(strides)), vld1q_u8(index));
            int32_t gathered[4];
            vst1q_s32(gathered, vreinterpretq_s32_u8(bytes));
            for (int i = 0; i < rank; ++i) {
                srcStride[i] = gathered[i];
            }
        } else {
            for (int i = 0; i < rank; ++i) {
                srcStride[i] = inStride[perm[i]];
            }
        }
        s = 1;
        for (int i = rank - 1; i >= 0; --i) {
            outShape[i]  = input->length(perm[i]);
            outStride[i] = s;
            s *= outShape[i];
        }
        // region axes: the last min(rank, 3) output axes, padded in front with size 1
        const int tail = rank < 3 ? rank : 3;
        const int lead = rank - tail;
        int leadCount = 1;
        for (int i = 0; i < lead; ++i) {
            leadCount *= outShape[i];
        }
        auto des = TensorUtils::getDescribe(output);
        des->memoryType = Tensor::InsideDescribe::MEMORY_VIRTUAL;
        des->regions.clear();
        des->regions.reserve(leadCount);
        for (int u = 0; u < leadCount; ++u) {
            int rem = u, srcOffset = 0, dstOffset = 0;
            for (int i = lead - 1; i >= 0; --i) {
                int c = rem % outShape[i];
                rem /= outShape[i];
                srcOffset += c * srcStride[i];
                dstOffset += c * outStride[i];
            }
            Tensor::InsideDescribe::Region reg;
            reg.origin     = input;
            reg.src.offset = srcOffset;
            reg.dst.offset = dstOffset;
            for (int v = 0; v < 3; ++v) {
                int axis = lead + v - (3 - tail);
                if (axis < lead) {
                    reg.size[v]       = 1;
                    reg.src.stride[v] = 0;
                    reg.dst.stride[v] = 0;
                } else {
                    reg.size[v]       = outShape[axis];
                    reg.src.stride[v] = srcStride[axis];
                    reg.dst.stride[v] = outStride[axis];
                }
            }
            des->regions.emplace_back(std::move(reg));
        }
        return true;
    }
};

static void _create() {
    std::shared_ptr<GeometryComputer> comp(new GeometryPermute);
    GeometryComputer::registerGeometryComputer(comp, {OpType_Transpose, OpType_Permute});
}

REGISTER_GEOMETRY(GeometryPermute, _create);

} // namespace MNN
