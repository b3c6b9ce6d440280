// Fixture engine: load a converted model (.fixmodel, text), prepare kernels, run with per-op callbacks.
//
// Model file format (whitespace-separated tokens, written by MNNConvert):
//   FIXMODEL 1
//   input  <name> <dtype> <ndim> <dims...>
//   const  <name> <dtype> <ndim> <dims...> <values...>
//   op     <OpType> <name> <nin> <inputs...> <nout> <outputs...> <nattr> (i <key> <n> <ints...> | f <key> <float>)*
//   output <name>
//   end
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/Execution.hpp"

namespace MNN {

class Net {
public:
    using OpCallback = std::function<void(const Op& op)>;

    // nullptr (and *err) on a missing or malformed file.
    static Net* createFromFile(const char* path, std::string* err);
    ~Net();

    const std::vector<std::string>& inputNames() const { return mInputs; }
    const std::vector<std::string>& outputNames() const { return mOutputs; }
    // Any named tensor (input, constant, intermediate, output); nullptr if unknown.
    Tensor* getTensor(const std::string& name);

    // Shapes, geometry lowering, kernel creation and onResize.  Inputs keep their declared shapes.
    bool prepare(int threads, Precision precision, std::string* err);
    // Executes every op in order; callbacks (may be empty) run just before and after each op.  First, as MNN's
    // StaticModule does, an input whose shape differs from the one prepare() saw gets it back and every kernel is
    // resized (onResize), outside the callbacks.
    bool run(const OpCallback& before, const OpCallback& after, std::string* err);

private:
    Net() = default;
    int tensorIndex(const std::string& name, bool create);

    std::vector<std::unique_ptr<Tensor>> mTensors;
    std::map<std::string, int> mNames;
    std::vector<std::string> mInputs, mOutputs;
    std::vector<std::vector<int>> mInputShapes;  // as prepared (prepare()), in mInputs' order
    std::vector<Op> mOps;       // as loaded
    std::vector<Op> mPlan;      // after geometry lowering
    std::vector<std::unique_ptr<Execution>> mExecutions;
    std::unique_ptr<Backend> mBackend;
};

}  // namespace MNN
