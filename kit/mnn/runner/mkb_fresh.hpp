// mkb_fresh.hpp: the inputs of mkb_runner's timed forwards (mkb_runner.cpp) and the forwards the kit checks.
//
// Written for the MobileKernelBench kit; standard library and Linux only (nothing of MNN).  Included by
// mkb_runner.cpp only (one translation unit).
//
// Why: with the same input sets repeated on every timed forward, a kernel that keyed a cache on a few input
// values and replayed the output it computed once was right and fast on every forward but the first (a
// reviewer's probe: 4.04x on the fixture engine, unflagged).  So every timed forward of a timing run but the
// first on each input set gets an input of its own, derived here from the input sets the kit wrote, outside the
// timed window (the warm-ups share one such input: mkb_runner.cpp); and a few of those forwards, picked after each forward by randomness the candidate cannot see
// beforehand, are written out with the pool indices of their inputs' units (FreshInputs::drawn) for the kit to
// rebuild those inputs and compare the outputs with ONNX Runtime's.
//
// How an input is derived, per tensor: its elements (4 bytes each, float32 or int32 alike) are cut into units
// (64 elements, or 1 where the tensor has at most kElementwiseUpTo elements), and the new tensor is a random
// sample without replacement of the units of all S sets, in random order (a partial Fisher-Yates shuffle over
// the S x units indices; the elements that do not fill a last unit are sampled alike, one by one).  Every value
// is one the kit drew, so it stays in the tensor's domain: the kit draws every element of a tensor
// independently from one distribution (kit.suite.inputs), so a value is as valid at any position as at its own.
// The multiset of values changes from one forward to the next (half of the pool with S = 2), so no fingerprint
// of the input, not even one over every element (a sum), repeats.  Cost, measured in the runner on the 2-core
// dev VM for a 4 MB float tensor (S = 2, 29 derivations per run of 10 + 30 forwards, 7 runs each, interleaved):
// 0.28-0.50 ms a derivation with 64-element units, 0.65-1.0 ms with 16-element ones (a random 64-byte line per
// unit: the gather waited on the cache), no faster with 128 or 256; element by element (a shuffle of 1 M
// indices) took 14-39 ms.

#pragma once

#include "mkb_guard.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mkb {

// n bytes from getrandom, by the system call itself (a getrandom, rand or random_device the candidate's
// library defined would replace libc's); false if the kernel gives none.
inline bool randomBytes(void* p, size_t n) {
    char* b = static_cast<char*>(p);
    while (n > 0) {
        long got = rawSyscall(SYS_getrandom, reinterpret_cast<long>(b), static_cast<long>(n), 0);
        if (got == -4) continue;  // EINTR
        if (got <= 0) return false;
        b += got;
        n -= static_cast<size_t>(got);
    }
    return true;
}

// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): enough
// for a shuffle, seeded from getrandom per run.
struct Rng {
    uint64_t state = 0;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // a number in [0, n), by Lemire's multiply-shift (bias below n / 2^64: none that matters here)
    uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

constexpr size_t kUnitElements = 64;          // 256 bytes: four cache lines in a row per unit (see above)
constexpr size_t kElementwiseUpTo = 1 << 16;  // tensors this small are shuffled element by element (< 0.5 ms)
// steps between asking for a unit's memory and using it.  Measured on the loaded 2-core dev VM (load 6), one 4 MB
// float tensor from 2 sets, the mean of 20 derivations, same seed and bytes, 9 tries of both side by side: one
// loop 6.2-16.3 ms (median 11.2), prefetched 1.5-7.9 ms (median 4.5)
constexpr size_t kPrefetchAhead = 16;

// One tensor's derivation: `units` units of `unitBytes` per set, their indices over all sets in `order`.
struct UnitSampler {
    size_t unitBytes = 0, units = 0, offset = 0;  // offset: byte offset of unit 0 in each set's tensor
    std::vector<uint32_t> order;                  // set * units + unit, shuffled in place run after run
    std::vector<uint32_t> picks;                  // the shuffle's swap partner of each position, drawn first

    void init(size_t sets, size_t unitBytes_, size_t units_, size_t offset_) {
        unitBytes = unitBytes_;
        units = units_;
        offset = offset_;
        order.resize(sets * units);
        picks.resize(units);
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
    }

    // dst (offset on) gets `units` units drawn without replacement from the sets' tensors (`blobs`): the random
    // numbers first, then the partial shuffle (order[0, units) becomes the draw, in order), then the gather; the
    // last two ask for the memory they touch kPrefetchAhead steps before (each step reads a random place of
    // `order` or of the sets' bytes, so one loop doing all waited for memory at every unit).  The same draws and
    // bytes as that one loop.
    void draw(Rng& rng, const std::vector<const char*>& blobs, char* dst) {
        const size_t pool = order.size();
        for (size_t i = 0; i < units; ++i) picks[i] = static_cast<uint32_t>(i + rng.below(pool - i));
        for (size_t i = 0; i < units; ++i) {
            if (i + kPrefetchAhead < units) __builtin_prefetch(&order[picks[i + kPrefetchAhead]]);
            const size_t j = picks[i];
            const uint32_t v = order[j];
            order[j] = order[i];
            order[i] = v;
        }
        auto source = [&](size_t i) { return blobs[order[i] / units] + offset + (order[i] % units) * unitBytes; };
        for (size_t i = 0; i < units; ++i) {
            if (i + kPrefetchAhead < units) __builtin_prefetch(source(i + kPrefetchAhead));
            const char* src = source(i);
            char* to = dst + offset + i * unitBytes;
            // copies of a constant size, which the compiler inlines as moves (never a call to memcpy, which a
            // library could replace; 64 bytes a copy: inlined by g++ for x86-64 and aarch64 alike); a loop of
            // 8-byte moves of a variable size took twice as long
            if (unitBytes == kUnitElements * 4) {
                for (size_t b = 0; b < kUnitElements * 4; b += 64) __builtin_memcpy(to + b, src + b, 64);
            } else {
                for (size_t b = 0; b < unitBytes; b += 4) __builtin_memcpy(to + b, src + b, 4);
            }
        }
    }
};

// The derived inputs of a run: next(out) redraws every tensor of `out` from the sets' blobs.
struct FreshInputs {
    std::vector<std::vector<const char*>> sources;  // per tensor, the blob of every set
    std::vector<UnitSampler> whole, rest;           // per tensor: the full units, and the elements after them
    Rng rng;

    // sets[k][t]: the bytes of tensor t in set k (every set has the same tensors); out gets one blob per tensor,
    // sized; false without randomness
    bool init(const std::vector<std::vector<const std::vector<char>*>>& sets, std::vector<std::vector<char>>& out) {
        if (!randomBytes(&rng.state, sizeof rng.state)) return false;
        const size_t nTensors = sets[0].size();
        sources.assign(nTensors, {});
        whole.assign(nTensors, {});
        rest.assign(nTensors, {});
        out.assign(nTensors, {});
        for (size_t t = 0; t < nTensors; ++t) {
            const size_t elements = sets[0][t]->size() / 4;
            for (const auto& set : sets) sources[t].push_back(set[t]->data());
            const size_t unit = elements <= kElementwiseUpTo ? 1 : kUnitElements;
            whole[t].init(sets.size(), unit * 4, elements / unit, 0);
            rest[t].init(sets.size(), 4, elements % unit, (elements / unit) * unit * 4);
            out[t].resize(elements * 4);
        }
        return true;
    }

    void next(std::vector<std::vector<char>>& out) {
        for (size_t t = 0; t < out.size(); ++t) {
            whole[t].draw(rng, sources[t], out[t].data());
            rest[t].draw(rng, sources[t], out[t].data());
        }
    }

    // The last draw of tensor t, as 4-byte words: the pool index of each of its units (set * units + unit), then
    // of each element after the last full unit (set * rest + element).  Written for a checked forward instead of
    // its inputs: the kit rebuilds them from the sets it generated itself (kit/mnn/fresh.py), so what the
    // candidate may have edited in this process's memory (the sets, the derived input) is never what the
    // forward's outputs are compared on; indices that are no sample without replacement are a forgery.
    std::vector<char> drawn(size_t t) const {
        const UnitSampler& w = whole[t];
        const UnitSampler& r = rest[t];
        std::vector<char> bytes((w.units + r.units) * 4);
        if (w.units > 0) __builtin_memcpy(bytes.data(), w.order.data(), w.units * 4);
        if (r.units > 0) __builtin_memcpy(bytes.data() + w.units * 4, r.order.data(), r.units * 4);
        return bytes;
    }
};

// Which timed forwards are written out for the kit: `want` of the `candidates` forwards with derived inputs,
// each decided right after its forward (Knuth's selection sampling, TAOCP vol. 2, 3.4.2, algorithm S: every set
// of `want` forwards equally likely), by fresh getrandom bytes, so nothing the candidate can read beforehand
// (its argv, the runner's memory, the PRNG above) says which forwards count.
struct Picker {
    size_t want = 0, candidates = 0, seen = 0, picked = 0;

    // whether the forward just done is picked; false once `want` are
    bool pick() {
        const size_t left = candidates - seen++;
        if (picked >= want || left == 0) return false;
        uint64_t r = 0;
        if (!randomBytes(&r, sizeof r)) return false;
        Rng one{r};
        if (one.below(left) < want - picked) {
            ++picked;
            return true;
        }
        return false;
    }
};

// Whether any float32 word of n bytes at p still holds the runner's poison (0xFFFFFFFF, a NaN no arithmetic
// makes: the default NaN is 0xFFC00000 on x86-64, 0x7FC00000 on aarch64, and no input holds a NaN): the
// forward did not write every element of that output.  No libc: 16-byte vectors (GCC's vector extension, SSE2
// or NEON), 256 bytes between looks; 0.09 ms for 4 MB in the runner here, against 0.22 ms 8 bytes at a time.
inline bool holdsPoison(const void* p, size_t n) {
    typedef uint32_t Words __attribute__((vector_size(16)));
    const Words poison = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    const unsigned char* b = static_cast<const unsigned char*>(p);
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        Words hit = {0, 0, 0, 0};
        for (size_t k = 0; k < 256; k += 16) {
            Words w;
            __builtin_memcpy(&w, b + i + k, 16);
            hit |= reinterpret_cast<Words>(w == poison);
        }
        if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) return true;
    }
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        __builtin_memcpy(&w, b + i, 4);
        if (w == 0xFFFFFFFFu) return true;
    }
    return false;
}

}  // namespace mkb
