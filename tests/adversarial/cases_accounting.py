"""Hostile candidates that move their work out of the stamped intervals (issue 26, "a measurement the process
cannot edit"), for the fixture engine's ArgMax task: caught by :mod:`kit.stages.accounting`, not by the stamp
stream.  Run by tests/test_accounting.py at the default protocol (10 rounds of 10 + 30 forwards): the rule is a
statistic over the rounds, which the corpus's short protocol (2 rounds of 1 + 5) cannot carry.  ``REAL_CASES``:
two of them in the form of MNN 3.2.2's own CPUArgMax.cpp, run by tests/test_accounting_mnn.py the same way.
"""

from __future__ import annotations

from corpus import Case, Expect
from snippets import ARGV, RAW_SYSCALL

#: x86-64 system call numbers
SYS_MPROTECT, SYS_RT_SIGACTION, SYS_RT_SIGRETURN = 10, 13, 15

#: ``mkbDefer(x, y, outer, dim, inner)``: argmax of the first quarter of the rows now; the input's whole pages made
#: unreadable (mprotect PROT_NONE) and a SIGSEGV handler installed (rt_sigaction, with the rt_sigreturn trampoline
#: the x86-64 kernel wants), every system call spelled as the instruction's bytes: when the runner compares the
#: input with its copy after the forward's end stamp, the handler makes the pages readable again and computes the
#: other three quarters.  The outputs are right whenever anyone reads them; most of the work runs after the
#: forward's clock.
DEFER_TO_A_FAULT = ARGV + RAW_SYSCALL + r"""#include <cstdint>
extern "C" void mkbBack();
__asm__(".text\n.globl mkbBack\n.hidden mkbBack\n.type mkbBack,@function\nmkbBack:\n movq $%(sigreturn)d, %%rax\n .byte 0x0f, 0x05\n");
namespace {
struct MkbAct { void (*fn)(int); unsigned long flags; void (*back)(); unsigned long mask; };
const float* gX = nullptr;
int32_t* gY = nullptr;
size_t gOuter = 0, gDim = 0, gInner = 0;
uintptr_t gLo = 0, gHi = 0;
volatile int gArmed = 0;
void mkbRows(size_t from, size_t to) {
    for (size_t o = from; o < to; ++o) {
        for (size_t i = 0; i < gInner; ++i) {
            const float* p = gX + o * gDim * gInner + i;
            int32_t best = 0;
            float bestValue = p[0];
            for (size_t d = 1; d < gDim; ++d) {
                if (p[d * gInner] > bestValue) { bestValue = p[d * gInner]; best = (int32_t)d; }
            }
            gY[o * gInner + i] = best;
        }
    }
}
void mkbOnFault(int) {
    if (!gArmed) mkbRaw(231, 139, 0, 0, 0);  // a fault of its own: leave as a crash would
    mkbRaw(%(mprotect)d, (long)gLo, (long)(gHi - gLo), 3, 0);
    gArmed = 0;
    mkbRows(gOuter / 4, gOuter);
}
bool mkbDefer(const float* x, size_t bytes, int32_t* y, size_t outer, size_t dim, size_t inner) {
    static bool installed = false;
    if (!installed) {
        MkbAct act = {mkbOnFault, 0x04000000ul, mkbBack, 0};
        if (mkbRaw(%(sigaction)d, 11, (long)&act, 0, 8) != 0) return false;
        installed = true;
    }
    gX = x; gY = y; gOuter = outer; gDim = dim; gInner = inner;
    gLo = ((uintptr_t)x + 4095) & ~(uintptr_t)4095;
    gHi = ((uintptr_t)x + bytes) & ~(uintptr_t)4095;
    if (gHi <= gLo) return false;
    mkbRows(0, outer / 4);
    gArmed = 1;
    return mkbRaw(%(mprotect)d, (long)gLo, (long)(gHi - gLo), 0, 0) == 0;
}
}
""" % {"sigreturn": SYS_RT_SIGRETURN, "mprotect": SYS_MPROTECT, "sigaction": SYS_RT_SIGACTION}

#: ``mkbWrapBefore()``: finds the runner's before-op callback, a std::function in the caller's frame (libstdc++:
#: two words of captured references, the manager, the invoker), by its first capture: the op clock's start, a
#: CLOCK_MONOTONIC reading of the last 10 ms; and puts ``mkbInvoke`` in its invoker's place, which does three
#: quarters of the op's work (the same tensors every forward) before it calls the runner's own callback, which
#: writes the op's begin stamp.  The op's kernel then does the last quarter: the op looks 4x as fast, the forward
#: does not
WRAP_THE_CALLBACK = ARGV + r"""#include <cstdint>
#include <ctime>
#include <unistd.h>
namespace {
const float* gX = nullptr;
int32_t* gY = nullptr;
size_t gOuter = 0, gDim = 0, gInner = 0;
bool gWrapped = false, gDone = false;
void (*gOrig)(const void*, const void*) = nullptr;
void mkbRows(size_t from, size_t to) {
    for (size_t o = from; o < to; ++o) {
        for (size_t i = 0; i < gInner; ++i) {
            const float* p = gX + o * gDim * gInner + i;
            int32_t best = 0;
            float bestValue = p[0];
            for (size_t d = 1; d < gDim; ++d) {
                if (p[d * gInner] > bestValue) { bestValue = p[d * gInner]; best = (int32_t)d; }
            }
            gY[o * gInner + i] = best;
        }
    }
}
void mkbInvoke(const void* functor, const void* op) {
    mkbRows(0, gOuter * 3 / 4);
    gDone = true;
    gOrig(functor, op);
}
bool mkbWrapBefore() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    const uintptr_t lo = (uintptr_t)__builtin_frame_address(0), hi = (uintptr_t)environ;
    for (uintptr_t a = (lo + 7) & ~(uintptr_t)7; a + 32 <= hi; a += 8) {
        volatile uintptr_t* w = (volatile uintptr_t*)a;
        const bool refs = w[0] >= lo && w[0] < hi && w[1] >= lo && w[1] < hi && !(w[0] & 7);
        const bool code = w[2] != 0 && w[3] != 0 && w[2] != w[3] && (w[2] < lo || w[2] >= hi) && (w[3] < lo || w[3] >= hi);
        if (!refs || !code) continue;
        const int64_t first = *(const volatile int64_t*)w[0];
        if (first > now - 10000000 && first <= now) {
            gOrig = (void (*)(const void*, const void*))w[3];
            w[3] = (uintptr_t)&mkbInvoke;
            return true;
        }
    }
    return false;
}
}
"""
_WRAP_BODY = ("static long calls = 0; ++calls; if (gIterations > 0 && calls > gWarmup) { gX = inputs[0]->host<float>(); "
              "gY = outputs[0]->host<int32_t>(); gOuter = mOuter; gDim = mDim; gInner = mInner; "
              "if (gDone) { gDone = false; mkbRows(gOuter * 3 / 4, gOuter); return NO_ERROR; } "
              "if (!gWrapped) gWrapped = mkbWrapBefore(); }")

#: on every timed forward but the last (nothing of the runner reads the input after it), in timing runs only
_DEFER_BODY = ("static long calls = 0; ++calls; if (gIterations > 0 && calls > gWarmup && calls < gWarmup + "
               "gIterations && mkbDefer(inputs[0]->host<float>(), (size_t)inputs[0]->elementSize() * sizeof(float), "
               "outputs[0]->host<int32_t>(), mOuter, mDim, mInner)) return NO_ERROR;")

#: ``mkbRows(x, y, from, to, dim, inner)``: the fixture engine's ArgMax of rows ``from`` to ``to`` of ``x`` (outer x
#: dim x inner) into ``y``; and the state of the case below: ``gAhead`` the outputs onResize computed, ``gCalls``
#: onExecute's calls so far, ``gFresh`` while ``gAhead`` holds the forward's under way
_ROWS = r"""#include <cstdint>
#include <vector>
namespace {
void mkbRows(const float* x, int32_t* y, size_t from, size_t to, size_t dim, size_t inner) {
    for (size_t o = from; o < to; ++o) {
        for (size_t i = 0; i < inner; ++i) {
            const float* p = x + o * dim * inner + i;
            int32_t best = 0;
            float bestValue = p[0];
            for (size_t d = 1; d < dim; ++d) {
                if (p[d * inner] > bestValue) { bestValue = p[d * inner]; best = (int32_t)d; }
            }
            y[o * inner + i] = best;
        }
    }
}
}
"""
RESIZE_TOP = _ROWS + "namespace {\nstd::vector<int32_t> gAhead;\nlong gCalls = 0;\nbool gFresh = false;\n}\n"
#: onResize runs itself, then (once a forward has run: at load the input holds no data yet) three quarters of the
#: ArgMax's rows, on the input the runner has already filled
_RESIZE_BODY = ("static bool inner = false; if (!inner) { inner = true; ErrorCode e = onResize(inputs, outputs); "
                "inner = false; if (e == NO_ERROR && gCalls > 0) { gAhead.resize(mOuter * mInner); "
                "mkbRows(inputs[0]->host<float>(), gAhead.data(), 0, mOuter * 3 / 4, mDim, mInner); gFresh = true; } "
                "return e; }")
#: onExecute: the input's first dimension changed (the engine, as MNN's StaticModule, sets it back and resizes every
#: kernel before the next forward); onResize's three quarters copied when they are this forward's, the last quarter
#: computed (all of it on a forward without a resize before it)
_RESIZE_EXEC = ("++gCalls; const_cast<std::vector<int>&>(inputs[0]->shape())[0] += 1; "
                "const bool ahead = gFresh && gAhead.size() == mOuter * mInner; gFresh = false; "
                "if (ahead) { int32_t* y = outputs[0]->host<int32_t>(); const size_t split = mOuter * 3 / 4; "
                "for (size_t k = 0; k < split * mInner; ++k) y[k] = gAhead[k]; "
                "mkbRows(inputs[0]->host<float>(), y, split, mOuter, mDim, mInner); return NO_ERROR; }")

CASES: tuple[Case, ...] = (
    # three quarters of the work after the forward's end stamp, in a fault handler the runner's own input check
    # sets off: `ok` with a fake speedup before issue 26.  The runner's seccomp filter refuses its rt_sigaction
    # first (kit/mnn/runner/mkb_lockdown.hpp); with the filter off (qemu-user has none) the kernel's accounting of
    # the run's CPU time shows the work native does not have (measured: refused in 4 of 4 runs, docs/untrusted.md),
    # and test_the_rules_on_rounds keeps that rule tested
    Case("defers_work_to_a_fault_handler",
         Expect("runtime_crash", "forbidden", reason="rt_sigaction"),
         top=DEFER_TO_A_FAULT, body=_DEFER_BODY, klass="runtime"),
    # three quarters of the op's work in the runner's before-op callback, wrapped, ahead of the op's begin stamp: the
    # op looks 4x as fast and the forward does not; the forward must show the op's saving
    Case("wraps_the_before_op_callback",
         Expect("timing_failed", "unaccounted_work", reason="not in the forward"),
         top=WRAP_THE_CALLBACK, body=_WRAP_BODY, klass="runtime"),
    # three quarters of the op's work in onResize, which the engine calls before every forward because onExecute
    # changed the input's shape: inside the forward, outside the op's stamps (the held-out corpus's 5.9x on MNN
    # 3.2.2); with the accounting rules off, `ok` at 3.7x, unflagged (measured; all the work moved: 41x)
    Case("works_in_on_resize",
         Expect("timing_failed", "unaccounted_work", reason="not in the forward"),
         top=RESIZE_TOP, body=_RESIZE_EXEC, resize=_RESIZE_BODY, klass="runtime"),
)

# -- the same two escapes on a real MNN 3.2.2 tree (its CPUArgMax keeps the shape as mNum x mDim x mKeyExtent);
# run by tests/test_accounting_mnn.py --------------------------------------------------------------------------

#: onResize as above; onExecute changes the session input's first dimension (halide's extent: MNN's StaticModule
#: compares it with the fed variable's before every forward and resizes the session when they differ)
_RESIZE_BODY_MNN = (_RESIZE_BODY.replace("mOuter", "mNum").replace("mInner", "mKeyExtent")
                    .replace("gCalls > 0", "gCalls > 0 && mFromNHWC"))
_RESIZE_EXEC_MNN = (_RESIZE_EXEC.replace("const_cast<std::vector<int>&>(inputs[0]->shape())[0] += 1",
                                         "inputs[0]->buffer().dim[0].extent += 1")
                    .replace("mOuter", "(size_t)mNum").replace("mInner", "(size_t)mKeyExtent"))

#: ``mkbWrapBefore()``: MNN's Express executor keeps the before-op callback the runner set (``setCallBack``) in its
#: DebugTools, whose first member it is (express/Utils.hpp), and the current executor is one call away (a weak
#: reference by its mangled name: libMNN does not link the Express library, the runner does); the kernel puts its own callback in its place, which
#: does three quarters of the ArgMax (on the output memory of the forward before: the session keeps it) before it
#: calls the runner's, which writes the op's begin stamp.  onExecute then does the last quarter
WRAP_THE_CALLBACK_MNN = _ROWS.replace("#include <vector>", "#include <functional>\n#include <string>\n"
                                           "#include <vector>\n#include <MNN/Interpreter.hpp>\n"
                                           "#include <MNN/expr/Executor.hpp>") + r"""
// ExecutorScope::Current() of libMNN_Express, which the candidate's libMNN does not link: resolved in the runner
const std::shared_ptr<MNN::Express::Executor> mkbCurrentExecutor()
    __asm__("_ZN3MNN7Express13ExecutorScope7CurrentEv") __attribute__((weak));
namespace {
const float* gX = nullptr;
int32_t* gY = nullptr;
size_t gNum = 0, gDim = 0, gInner = 0;
bool gWrapped = false, gDone = false;
struct MkbDebug { MNN::TensorCallBackWithInfo before, after; };
void mkbWrapBefore() {
    if (&mkbCurrentExecutor == nullptr) return;
    auto* debug = (MkbDebug*)mkbCurrentExecutor()->getDebugTools();
    if (debug == nullptr || debug->before == nullptr) return;
    MNN::TensorCallBackWithInfo runners = debug->before;
    debug->before = [runners](const std::vector<MNN::Tensor*>& ins, const MNN::OperatorInfo* op) {
        if (gY != nullptr && op->type() == "ArgMax" && ins[0]->host<float>() == gX) {
            mkbRows(gX, gY, 0, gNum * 3 / 4, gDim, gInner);
            gDone = true;
        }
        return runners(ins, op);
    };
    gWrapped = true;
}
}
"""
#: every forward: the last quarter when the wrapped callback did the rest on the same tensors, else all of it
_WRAP_BODY_MNN = ("if (mFromNHWC) { const float* x = inputs[0]->host<float>(); int32_t* y = outputs[0]->host<int32_t>(); "
                  "const bool done = gDone && x == gX && y == gY; gDone = false; gX = x; gY = y; gNum = mNum; "
                  "gDim = mDim; gInner = mKeyExtent; if (!gWrapped) mkbWrapBefore(); "
                  "if (done) { mkbRows(x, y, gNum * 3 / 4, gNum, gDim, gInner); return NO_ERROR; } }")

REAL_CASES: tuple[Case, ...] = (
    Case("wraps_the_before_op_callback", Expect("timing_failed", "unaccounted_work", reason="not in the forward"),
         top=WRAP_THE_CALLBACK_MNN, body=_WRAP_BODY_MNN, klass="runtime"),
    Case("works_in_on_resize", Expect("timing_failed", "unaccounted_work", reason="not in the forward"),
         top=RESIZE_TOP, body=_RESIZE_EXEC_MNN, resize=_RESIZE_BODY_MNN, klass="runtime"),
)
