// A route-around candidate for the kit's tests (tests/test_route_around_mnn.py), written for the kit, not taken
// from MNN: the geometry of LayerNorm lowers a layer normalization over trailing axes into MNN's native
// Reduction, BinaryOp and UnaryOp kernels (and Rasters to broadcast), so its outputs are right but no LayerNorm
// op executes: the candidate's LayerNorm kernel never does the work.  The kit must record it as not_executed.
//
//   x viewed as [outer, inner, 1]; mean = ReduceMean(x); d = x - mean; var = ReduceMean(d * d);
//   y = d * rsqrt(var + eps) [* gamma + beta]
//
// Anything else (no axis, axes that are not trailing, external, grouped or mis-sized parameters) is left to the
// LayerNorm kernel as one command over the whole tensor.

#include "geometry/GeometryComputer.hpp"
#include "geometry/GeometryComputerUtils.hpp"
#include "core/TensorUtils.hpp"

namespace MNN {

namespace {

using View = Tensor::InsideDescribe::Region;  // a Raster region: `size` elements read from `origin`

// a tensor of `shape` made by the Raster of one region read from `origin`
std::shared_ptr<Tensor> viewOf(Tensor* like, const std::vector<int>& shape, const View& region, CommandBuffer& res) {
    std::shared_ptr<Tensor> t(Tensor::createDevice(shape, like->getType(), like->getDimensionType()));
    auto des = TensorUtils::getDescribe(t.get());
    des->memoryType = Tensor::InsideDescribe::MEMORY_VIRTUAL;
    des->regions = {region};
    res.extras.emplace_back(t);
    return t;
}

// a plain tensor of `shape` for a command to write
std::shared_ptr<Tensor> scratch(Tensor* like, const std::vector<int>& shape, CommandBuffer& res) {
    std::shared_ptr<Tensor> t(Tensor::createDevice(shape, like->getType(), like->getDimensionType()));
    res.extras.emplace_back(t);
    return t;
}

// [outer, inner, 1] from `src` of `outer` (or 1) rows of `inner` (or 1) values: stride 0 repeats a row or a value
View broadcast(Tensor* src, int outer, int inner, int rowStride, int colStride) {
    View r;
    r.origin = src;
    r.size[0] = 1;
    r.size[1] = outer;
    r.size[2] = inner;
    r.src.offset = 0;
    r.src.stride[0] = 0;
    r.src.stride[1] = rowStride;
    r.src.stride[2] = colStride;
    r.dst.offset = 0;
    r.dst.stride[0] = outer * inner;
    r.dst.stride[1] = inner;
    r.dst.stride[2] = 1;
    return r;
}

}  // namespace

class GeometryLayerNorm : public GeometryComputer {
public:
    bool onCompute(const Op* op, const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   Context& context, CommandBuffer& res) const override {
        auto param = op->main_as_LayerNorm();
        Tensor* x = inputs[0];
        Tensor* y = outputs[0];
        const int rank = x->dimensions();
        int reduced = (param->axis() != nullptr) ? static_cast<int>(param->axis()->size()) : 0;
        bool trailing = reduced > 0 && reduced <= rank && param->external() == nullptr && param->group() == 1;
        for (int i = 0; trailing && i < reduced; ++i) {
            int a = param->axis()->data()[i];
            trailing = (a + rank) % rank == rank - reduced + i;
        }
        int inner = 1;
        for (int i = rank - reduced; trailing && i < rank; ++i) inner *= x->length(i);
        const bool affine = param->gamma() != nullptr && param->beta() != nullptr;
        if (affine && (static_cast<int>(param->gamma()->size()) != inner ||
                       param->beta()->size() != param->gamma()->size())) {
            trailing = false;
        }
        if (!trailing) {
            std::shared_ptr<Command> cmd(new Command);
            cmd->op = op;
            cmd->inputs = {x};
            cmd->outputs = outputs;
            res.command.emplace_back(std::move(cmd));
            return true;
        }
        const int outer = x->elementSize() / inner;
        const std::vector<int> full = {outer, inner, 1}, row = {outer, 1, 1};
        auto add = [&res](std::shared_ptr<Command> cmd) { res.command.emplace_back(std::move(cmd)); };

        auto xv = viewOf(x, full, TensorUtils::makeFullSlice(x), res);
        std::shared_ptr<Tensor> centred = xv;
        if (!param->useRMSNorm()) {
            auto mean = scratch(x, row, res);
            add(GeometryComputerUtils::makeReduce(ReductionType_MEAN, xv.get(), mean.get()));
            auto meanB = viewOf(x, full, broadcast(mean.get(), outer, inner, 1, 0), res);
            centred = scratch(x, full, res);
            add(GeometryComputerUtils::makeBinary(BinaryOpOperation_SUB, xv.get(), meanB.get(), centred.get()));
        }
        auto squared = scratch(x, full, res);
        add(GeometryComputerUtils::makeBinary(BinaryOpOperation_MUL, centred.get(), centred.get(), squared.get()));
        auto var = scratch(x, row, res);
        add(GeometryComputerUtils::makeReduce(ReductionType_MEAN, squared.get(), var.get()));
        auto eps = context.allocConst(op, {1}, halide_type_of<float>());
        eps->host<float>()[0] = param->epsilon();
        auto varEps = scratch(x, row, res);
        add(GeometryComputerUtils::makeBinary(BinaryOpOperation_ADD, var.get(), eps.get(), varEps.get()));
        auto rstd = scratch(x, row, res);
        add(GeometryComputerUtils::makeUnary(UnaryOpOperation_RSQRT, varEps.get(), rstd.get()));
        auto rstdB = viewOf(x, full, broadcast(rstd.get(), outer, inner, 1, 0), res);
        auto normed = scratch(x, full, res);
        add(GeometryComputerUtils::makeBinary(BinaryOpOperation_MUL, centred.get(), rstdB.get(), normed.get()));
        std::shared_ptr<Tensor> last = normed;
        if (affine) {
            auto gamma = context.allocConst(op, {inner}, halide_type_of<float>());
            auto beta = context.allocConst(op, {inner}, halide_type_of<float>());
            for (int i = 0; i < inner; ++i) {
                gamma->host<float>()[i] = param->gamma()->data()[i];
                beta->host<float>()[i] = param->beta()->data()[i];
            }
            auto gammaB = viewOf(x, full, broadcast(gamma.get(), outer, inner, 0, 1), res);
            auto betaB = viewOf(x, full, broadcast(beta.get(), outer, inner, 0, 1), res);
            auto scaled = scratch(x, full, res);
            add(GeometryComputerUtils::makeBinary(BinaryOpOperation_MUL, normed.get(), gammaB.get(), scaled.get()));
            last = scratch(x, full, res);
            add(GeometryComputerUtils::makeBinary(BinaryOpOperation_ADD, scaled.get(), betaB.get(), last.get()));
        }
        auto des = TensorUtils::getDescribe(y);
        des->memoryType = Tensor::InsideDescribe::MEMORY_VIRTUAL;
        des->regions = {TensorUtils::makeFullSlice(last.get())};
        return true;
    }
};

static void _create() {
    std::shared_ptr<GeometryComputer> comp(new GeometryLayerNorm);
    GeometryComputer::registerGeometryComputer(comp, {OpType_LayerNorm});
}

REGISTER_GEOMETRY(GeometryLayerNorm, _create);

}  // namespace MNN
