// Fixture engine: kernels (Execution), the CPU backend handle and the creator registry.
//
// A kernel file defines an Execution subclass plus a Creator and ends with
//     REGISTER_CPU_OP_CREATOR(CPUFooCreator, OpType_Foo);
// which only DEFINES the function ___CPUFooCreator__OpType_Foo__(); the generated
// source/backend/cpu/CPUOPRegister.cpp calls every such function (tools/script/register.py).
#pragma once
#include <string>
#include <vector>

#include "core/OpType.hpp"
#include "core/Tensor.hpp"

namespace MNN {

enum ErrorCode { NO_ERROR = 0, NOT_SUPPORT = 1, INPUT_DATA_ERROR = 2, COMPUTE_SIZE_ERROR = 3, INVALID_VALUE = 4 };

enum class Precision { Normal = 0, High = 1, Low = 2 };

class Backend {
public:
    Backend(int threads, Precision precision) : mThreads(threads), mPrecision(precision) {}
    int threadNumber() const { return mThreads; }
    Precision precision() const { return mPrecision; }

private:
    int mThreads;
    Precision mPrecision;
};

class Execution {
public:
    explicit Execution(Backend* backend) : mBackend(backend) {}
    virtual ~Execution() = default;
    // Called once after output shapes are known (outputs are already allocated).
    virtual ErrorCode onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
        (void)inputs;
        (void)outputs;
        return NO_ERROR;
    }
    virtual ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) = 0;
    Backend* backend() const { return mBackend; }

private:
    Backend* mBackend;
};

class CPUBackend {
public:
    class Creator {
    public:
        virtual ~Creator() = default;
        // Returns nullptr when the op is not supported with these attributes/inputs.
        virtual Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                                    const Op* op, Backend* backend) const = 0;
    };
    static bool addCreator(OpType type, Creator* creator);
    static const Creator* findCreator(OpType type);
};

// Called once by the library before the first model is prepared (defined in CPUOPRegister.cpp).
void registerCPUOps();

}  // namespace MNN

#define REGISTER_CPU_OP_CREATOR(name, opType)              \
    void ___##name##__##opType##__() {                     \
        static name _temp;                                 \
        MNN::CPUBackend::addCreator(MNN::opType, &_temp);  \
    }
