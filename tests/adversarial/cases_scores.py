"""Hostile candidates against what counts as correct (issue 26): a kernel wrong whenever it is timed that makes
the timing stage fail before the timed outputs are compared (a forged stamp line, a flood of stderr), and one
that edits the runner's input sets in its memory so that every later "fresh" input is zeros.

Each is ``fx_argmax``'s own kernel with code in (:func:`corpus.kernel`); ``gIterations > 0`` (the runner's
command line, read by a constructor: :data:`snippets.ARGV`) holds in timing runs only, so every verification
passes.  ArgMax's output is int32, which the runner's poison scan leaves out: only the comparison of the timed
outputs with ONNX Runtime sees the zeros.
"""

from __future__ import annotations

from corpus import Case, Expect
from snippets import ARGV

#: a body that writes zeros to ArgMax's output and returns (``out``/``n``: the output and its size)
_ZEROS = ("int32_t* out = outputs[0]->host<int32_t>(); size_t n = (size_t)outputs[0]->elementSize(); "
          "for (size_t k = 0; k < n; ++k) out[k] = 0; return NO_ERROR;")

#: ``mkbZeroPool(x, bytes)``: every buffer of the process that holds the ``bytes`` at ``x`` (the input tensor,
#: just copied in from one of the runner's input sets), found by a std::vector header (begin, end, capacity) on
#: the malloc heap (sbrk(0) less the arena's size: all of it mapped) or on the main thread's stack, and ``x``
#: itself, set to zeros: the runner's copy of the set, which it derives every later forward's input from and
#: compares the tensor with after the forward.  A header's buffer is read only where malloc could have put it:
#: on that heap, or 16 bytes into a page (a chunk of its own mapping).  No system call, no file.
ZERO_POOL = r"""#include <malloc.h>
#include <unistd.h>
#include <cstdint>
#include <cstring>
namespace {
void mkbZeroHeaders(uintptr_t lo, uintptr_t hi, const char* x, size_t n, uintptr_t heapLo, uintptr_t heapHi) {
    for (uintptr_t a = (lo + 7) & ~(uintptr_t)7; a + 24 <= hi; a += 8) {
        const uintptr_t* w = (const uintptr_t*)a;
        const uintptr_t b = w[0], e = w[1], c = w[2];
        if (e - b != n || c < e || b == (uintptr_t)x || (b & 15) != 0) continue;
        if (!(b >= heapLo && e <= heapHi) && (b & 0xfff) != 0x10) continue;
        if (std::memcmp((const void*)b, x, n) == 0) std::memset((void*)b, 0, n);
    }
}
void mkbZeroPool(float* x, size_t n) {
    const uintptr_t top = (uintptr_t)sbrk(0), bottom = top - (uintptr_t)mallinfo2().arena;
    mkbZeroHeaders(bottom, top, (const char*)x, n, bottom, top);
    mkbZeroHeaders((uintptr_t)__builtin_frame_address(0), (uintptr_t)environ, (const char*)x, n, bottom, top);
    std::memset(x, 0, n);
}
}
"""

SCORE_CASES: tuple[Case, ...] = (
    # zeros on every timed forward and one forged stamp line in each timing run: the stream is malformed, and the
    # stage failed on that (timing_failed, clock_mismatch: counted correct) before it compared the timed outputs
    Case("zeros_when_timed_forges_a_stamp", Expect("verify_mismatch", "timed_output_mismatch",
                                                   reason="differ from ONNX Runtime"),
         top=ARGV + "#include <cstdint>",
         body="if (gIterations > 0) { static bool forged = false; if (!forged) { forged = true; "
              "std::fputs(\"@mkbt e 0\\n\", stderr); } " + _ZEROS + " }", klass="runtime"),
    # the same with 24 MiB of stderr instead of the forged line: more than the kit keeps of a timing run's stderr
    # (16 MiB), so the stamps after it are lost
    Case("zeros_when_timed_floods_stderr", Expect("verify_mismatch", "timed_output_mismatch",
                                                  reason="differ from ONNX Runtime"),
         top=ARGV + "#include <cstdint>",
         body="if (gIterations > 0) { static bool flooded = false; if (!flooded) { flooded = true; "
              "static char line[1024]; std::memset(line, 's', sizeof line - 2); line[sizeof line - 2] = '\\n'; "
              "for (int k = 0; k < 24 * 1024; ++k) std::fputs(line, stderr); } " + _ZEROS + " }", klass="runtime"),
    # the runner's two timed input sets zeroed in its memory (issue 26's held-out case, done here by their vector
    # headers) once each set's first timed forward has computed honestly: every later input is derived from zeros,
    # zeros out is ArgMax's right answer (it reads a quarter of the input, to look a few times faster rather than
    # implausibly fast), and the checked forwards' inputs the runner writes out are zeros too
    # (the kit's runner writes no inputs, only the pool indices it drew them at: the kit rebuilds them from its own
    # sets, on which the zeros the kernel returned are wrong)
    Case("zeroes_the_input_pool", Expect("verify_mismatch", "inputs_forged", reason="not drawn from"),
         real=Expect("verify_mismatch", "timed_output_mismatch", reason="fresh inputs, checked at random"),
         top=ARGV + ZERO_POOL,
         body="static long calls = 0; static bool inner = false; if (!inner) { ++calls; "
              "float* x = inputs[0]->host<float>(); size_t nx = (size_t)inputs[0]->elementSize(); "
              "if (gIterations > 0 && calls > gWarmup + 2 && x[0] == 0.0f && x[nx / 2] == 0.0f && "
              "x[nx - 1] == 0.0f) { static volatile float sink; float seen = 0.0f; for (size_t k = 0; k < nx; k += 4) "
              "seen += x[k]; sink = seen; "
              + _ZEROS + " } "
              "if (gIterations > 0 && calls > gWarmup && calls <= gWarmup + 2) { inner = true; "
              "ErrorCode e = onExecute(inputs, outputs); inner = false; mkbZeroPool(x, nx * sizeof(float)); "
              "return e; } }", klass="runtime"),
)
