// Scalar-side passes of the MSM: classification of scalars (0, 1, other),
// signed-digit windows, and the counting sort of (bucket, point) pairs by
// bucket (histogram, exclusive scan, scatter).
//
// Scalars reach these kernels in two forms: the caller's buffer in
// Montgomery form (the bytes of &[blstrs::Scalar]), which `classify` turns
// into canonical form once; every later pass reads the canonical copy.
#pragma once
#include "../ff/bls12_381.cuh"

// A key that is no bucket: the end of a sorted list, or "no digit here".
#define MSM_NO_KEY 0xffffffffu
// The top bit of a sorted entry marks a negative digit (subtract the base);
// the low 31 bits are the base's index, so bases number fewer than 2^31.
#define MSM_NEG_BIT 0x80000000u

// Window sizes are 2..24 bits (the host checks): 2^c and the signed digits
// fit in 32 bits, and a window never spans more than two 32-bit limbs.
#define MSM_MAX_WINDOW 24

// The lane's slot among `count` slots claimed together by its warp: one
// atomic per warp instead of one per thread (the pattern of NVIDIA's
// "warp-aggregated atomics"). Threads of the warp that are not here now are
// simply not part of the group.
__device__ __forceinline__ uint32_t msm_claim_slot(uint32_t* counter) {
    uint32_t mask = __activemask();
    uint32_t lane = threadIdx.x & 31;
    uint32_t leader = __ffs(mask) - 1;
    uint32_t base = 0;
    if (lane == leader) base = atomicAdd(counter, (uint32_t)__popc(mask));
    base = __shfl_sync(mask, base, leader);
    return base + __popc(mask & ((1u << lane) - 1));
}

// counts[key] += 1 for this thread, returning the old value plus the number
// of lanes of the warp with the same key ahead of this one: lanes with equal
// keys share one atomic. Skewed scalars (small integers, repeated values)
// put many lanes on one bucket; without this their atomics serialise.
__device__ __forceinline__ uint32_t msm_count_key(uint32_t* counts, uint32_t key) {
    uint32_t mask = __activemask();
    uint32_t peers = __match_any_sync(mask, key);
    uint32_t lane = threadIdx.x & 31;
    uint32_t leader = __ffs(peers) - 1;
    uint32_t old = 0;
    if (lane == leader) old = atomicAdd(counts + key, (uint32_t)__popc(peers));
    old = __shfl_sync(peers, old, leader);
    return old + __popc(peers & ((1u << lane) - 1));
}

// Bits [bit, bit + c) of a canonical scalar (zero past bit 255).
__device__ __forceinline__ uint32_t msm_window_bits(const fr_t& s, uint32_t bit, uint32_t c) {
    uint32_t limb = bit >> 5, off = bit & 31;
    if (limb >= 8) return 0;
    uint32_t lo = s.v[limb] >> off;
    uint32_t hi = (off != 0 && limb + 1 < 8) ? s.v[limb + 1] << (32 - off) : 0;
    return (lo | hi) & ((1u << c) - 1);
}

// The signed digit of window w, given the carry out of window w - 1 (0 for
// w = 0), in [-2^(c-1), 2^(c-1)]: sum_w digit_w 2^(c w) is the scalar. With
// ceil(256 / c) windows the last one never carries out, since scalars are
// below r < 2^255.
__device__ __forceinline__ int32_t msm_digit(const fr_t& s, uint32_t w, uint32_t c, uint32_t& carry) {
    uint32_t raw = msm_window_bits(s, w * c, c) + carry;
    if (raw > (1u << (c - 1))) {
        carry = 1;
        return (int32_t)raw - (int32_t)(1u << c);
    }
    carry = 0;
    return (int32_t)raw;
}

// Sorts variables into ones and others, in canonical form, dropping zeros
// and variables the density leaves out. Variable i pairs with base i, or,
// with a density, with base "number of used variables before i".
// counters[0] counts ones, counters[1] others; the order within each list
// is whatever the atomics give (addition does not care).
__device__ __forceinline__ void msm_classify(const fr_t* scalars, uint32_t n, const uint64_t* dens_bits,
                                             const uint32_t* dens_prefix, uint32_t use_density,
                                             uint32_t ones_separately, uint32_t* counters, uint32_t* ones_idx,
                                             uint32_t* other_idx, fr_t* other_scalars) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t base = i;
    if (use_density) {
        uint64_t word = dens_bits[i >> 6];
        uint32_t bit = i & 63;
        if (((word >> bit) & 1) == 0) return;
        base = dens_prefix[i >> 6] + (uint32_t)__popcll(word & ((1ull << bit) - 1));
    }
    fr_t s = scalars[i].from_mont();
    if (s.is_zero()) return;
    uint32_t high = 0;
#pragma unroll
    for (int k = 1; k < 8; k++) high |= s.v[k];
    if (ones_separately && high == 0 && s.v[0] == 1) {
        ones_idx[msm_claim_slot(&counters[0])] = base;
    } else {
        uint32_t slot = msm_claim_slot(&counters[1]);
        other_idx[slot] = base;
        other_scalars[slot] = s;
    }
}

// Histogram of the nonzero digits of windows [w0, w1) of the m canonical
// scalars: counts[(w - w0) * nb + |d| - 1] with nb = 2^(c-1) buckets per
// window; with `fold` set, counts[|d| - 1] (every window's digits go to
// one set of buckets: the bases come with their multiples 2^(c w), see
// msm_scatter). counts starts zeroed.
__device__ __forceinline__ void msm_histogram(const fr_t* scalars, uint32_t m, uint32_t c, uint32_t w0, uint32_t w1,
                                              uint32_t* counts, uint32_t fold) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const fr_t s = scalars[i];
    const uint32_t nb = 1u << (c - 1);
    uint32_t carry = 0;
    for (uint32_t w = 0; w < w1; w++) {
        int32_t d = msm_digit(s, w, c, carry);
        if (w >= w0 && d != 0) {
            uint32_t mag = d < 0 ? (uint32_t)(-d) : (uint32_t)d;
            msm_count_key(counts, (fold ? 0 : (w - w0) * nb) + mag - 1);
        }
    }
}

// Places every nonzero digit of windows [w0, w1) at its bucket's next free
// slot: offsets holds the exclusive scan of the histogram (group-local
// keys) and is advanced by the atomics. Entry j is (x: the global bucket
// w * nb + |d| - 1, y: base index | MSM_NEG_BIT if d < 0), one 8-byte
// store: the scatter's writes land at random, so one store per entry
// instead of two halves its memory transactions. Within a bucket the
// order is arbitrary.
//
// With fold_stride > 0 the bases come with their window multiples (base i
// of window w, 2^(c w) times base i, at w * fold_stride + i): every window
// shares the buckets |d| - 1, and the entry names the multiple, so one
// bucket reduction serves all windows and no window combination is left.
__device__ __forceinline__ void msm_scatter(const fr_t* scalars, const uint32_t* idx, uint32_t m, uint32_t c,
                                            uint32_t w0, uint32_t w1, uint32_t* offsets, uint2* entries,
                                            uint32_t fold_stride) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const fr_t s = scalars[i];
    const uint32_t base = idx[i];
    const uint32_t nb = 1u << (c - 1);
    uint32_t carry = 0;
    for (uint32_t w = 0; w < w1; w++) {
        int32_t d = msm_digit(s, w, c, carry);
        if (w >= w0 && d != 0) {
            uint32_t mag = d < 0 ? (uint32_t)(-d) : (uint32_t)d;
            uint32_t sign = d < 0 ? MSM_NEG_BIT : 0u;
            if (fold_stride) {
                uint32_t pos = msm_count_key(offsets, mag - 1);
                entries[pos] = make_uint2(mag - 1, (w * fold_stride + base) | sign);
            } else {
                uint32_t pos = msm_count_key(offsets, (w - w0) * nb + mag - 1);
                entries[pos] = make_uint2(w * nb + mag - 1, base | sign);
            }
        }
    }
}

// msm_scatter with the atomics of B windows in flight at once. The serial
// loop above waits for each window's atomic (a round trip to L2, often to
// DRAM once the entries have pushed the counters out) before the next
// window's: profiled on an H200, its warps spend three quarters of their
// cycles on that wait. Here a thread first works out B windows' keys, then
// issues their atomics one after another (each a register of its own, read
// only later), then exchanges the results and stores the entries. Every
// lane of a warp takes part in the warp-wide steps: lanes past m or
// without a digit carry MSM_NO_KEY, which never names a counter. The
// entries are those of msm_scatter; only the order within a bucket (which
// addition does not see) may differ.
template <int B>
__device__ __forceinline__ void msm_scatter_batched(const fr_t* scalars, const uint32_t* idx, uint32_t m, uint32_t c,
                                                    uint32_t w0, uint32_t w1, uint32_t* offsets, uint2* entries,
                                                    uint32_t fold_stride) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    // Whole warps past the end leave together; a partial warp stays whole.
    if ((i & ~31u) >= m) return;
    const bool live = i < m;
    fr_t s;
#pragma unroll
    for (int k = 0; k < 8; k++) s.v[k] = 0;
    uint32_t base = 0;
    if (live) {
        s = scalars[i];
        base = idx[i];
    }
    const uint32_t nb = 1u << (c - 1);
    const uint32_t lane = threadIdx.x & 31;
    const uint32_t below = (1u << lane) - 1;
    // The entry's bucket is its key plus this (window w0's first bucket).
    const uint32_t key_to_bucket = fold_stride ? 0 : w0 * nb;
    uint32_t carry = 0;
    for (uint32_t wb = 0; wb < w1; wb += B) {
        uint32_t key[B], y[B], old[B], peers[B];
#pragma unroll
        for (int k = 0; k < B; k++) {
            const uint32_t w = wb + k;
            key[k] = MSM_NO_KEY;
            y[k] = 0;
            if (w < w1) {
                int32_t d = msm_digit(s, w, c, carry);
                if (live && w >= w0 && d != 0) {
                    uint32_t mag = d < 0 ? (uint32_t)(-d) : (uint32_t)d;
                    uint32_t sign = d < 0 ? MSM_NEG_BIT : 0u;
                    key[k] = (fold_stride ? 0 : (w - w0) * nb) + mag - 1;
                    y[k] = (fold_stride ? w * fold_stride + base : base) | sign;
                }
            }
        }
#pragma unroll
        for (int k = 0; k < B; k++) {
            peers[k] = __match_any_sync(0xffffffffu, key[k]);
            old[k] = 0;
            if (key[k] != MSM_NO_KEY && lane == (uint32_t)(__ffs(peers[k]) - 1))
                old[k] = atomicAdd(offsets + key[k], (uint32_t)__popc(peers[k]));
        }
#pragma unroll
        for (int k = 0; k < B; k++) {
            uint32_t first = __shfl_sync(0xffffffffu, old[k], __ffs(peers[k]) - 1);
            if (key[k] != MSM_NO_KEY)
                entries[first + __popc(peers[k] & below)] = make_uint2(key[k] + key_to_bucket, y[k]);
        }
    }
}

// Exclusive scan in three kernels without shared memory: each thread owns
// `per` consecutive elements. reduce: sums[t] = sum of thread t's elements.
__device__ __forceinline__ void msm_scan_reduce(const uint32_t* in, uint32_t n, uint32_t per, uint32_t* sums) {
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t start = t * per;
    if (start >= n) return;
    uint32_t end = start + per < n ? start + per : n;
    uint32_t acc = 0;
    for (uint32_t j = start; j < end; j++) acc += in[j];
    sums[t] = acc;
}

// apply: out[j] = base[t] (or 0) + the sum of in[start..j); the thread that
// ends the input also writes the total to out[n] and *total.
__device__ __forceinline__ void msm_scan_apply(const uint32_t* in, uint32_t n, uint32_t per, const uint32_t* base,
                                               uint32_t has_base, uint32_t* out, uint32_t* total) {
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t start = t * per;
    if (start >= n) return;
    uint32_t end = start + per < n ? start + per : n;
    uint32_t acc = has_base ? base[t] : 0;
    for (uint32_t j = start; j < end; j++) {
        uint32_t x = in[j];
        out[j] = acc;
        acc += x;
    }
    if (end == n) {
        out[n] = acc;
        *total = acc;
    }
}
