// Curve-side passes of the MSM, generic over the coordinate field (fq_t
// for G1, fq2_t for G2):
//
// - bucket accumulation over the sorted (bucket, point) list in XYZZ, by
//   fixed-length segments so every thread does the same number of mixed
//   additions however the buckets are sized, with the runs that cross a
//   segment boundary finished by further levels over much shorter lists;
// - the sum of a list of bases (scalars equal to 1) and of XYZZ points;
// - per-window bucket reduction sum_j j * B_j: running sums over parts of
//   the bucket range, then a tree that merges adjacent parts;
// - a gather of the few results, which the host converts to Jacobian.
//
// Every point formula is called out of line (msm_madd_nl, msm_add_nl and
// the doublings of kernels/ec), so each appears once in a module however
// many kernels use it: with the field multiplications inlined a formula is
// 15-30k lines of PTX. A call costs a few dozen instructions against the
// thousands of a formula.
#pragma once
#include "../ec/bls12_381.cuh"
#include "digits.cuh"

// Threads per block of the curve kernels; the host launches with the same
// number (crates/groth16-cuda/src/msm.rs, CURVE_BLOCK).
#ifndef MSM_CURVE_THREADS
#define MSM_CURVE_THREADS 128
#endif
#if MSM_CURVE_THREADS < 32 || (MSM_CURVE_THREADS & (MSM_CURVE_THREADS - 1)) != 0
#error "MSM_CURVE_THREADS must be a power of two of at least 32"
#endif

template <class F>
__device__ __noinline__ xyzz_t<F> msm_add_nl(const xyzz_t<F> a, const xyzz_t<F> b) {
    return a.add(b);
}

template <class F>
__device__ __noinline__ xyzz_t<F> msm_madd_nl(const xyzz_t<F> a, const affine_t<F> b) {
    return a.add(b);
}

// All-zero bytes are the identity too (ZZ = 0): buffers cleared by memset
// hold identities.
template <class F>
__device__ __forceinline__ xyzz_t<F> msm_inf() {
    return {F::zero(), F::zero(), F::zero(), F::zero()};
}

// Asks for the cache lines of *p in L1 (and so in L2) ahead of its load: a
// hint, with no register to hold and no effect on results.
template <class T>
__device__ __forceinline__ void msm_prefetch(const T* p) {
#ifdef __CUDA_ARCH__
    const char* c = reinterpret_cast<const char*>(p);
#pragma unroll
    for (uint32_t off = 0; off < sizeof(T); off += 128) asm volatile("prefetch.L1 [%0];" ::"l"(c + off));
    asm volatile("prefetch.L1 [%0];" ::"l"(c + sizeof(T) - 1));
#endif
}

// *p with 16-byte loads (an affine point is 96 or 192 bytes, and device
// buffers of them are 256-byte aligned): 6 or 12 load instructions instead
// of 24 or 48 of 4 bytes, each touching one sector of the point's lines.
template <class F>
__device__ __forceinline__ affine_t<F> msm_load_affine_v4(const affine_t<F>* p) {
    static_assert(sizeof(affine_t<F>) % 16 == 0, "affine points must be a whole number of 16-byte words");
    constexpr int Q = sizeof(affine_t<F>) / 16;
    const uint4* q = reinterpret_cast<const uint4*>(p);
    union {
        uint4 w[Q];
        affine_t<F> a;
    } u;
#pragma unroll
    for (int i = 0; i < Q; i++) u.w[i] = q[i];
    return u.a;
}

// Level 0 of bucket accumulation. Thread s takes entries [s*per, s*per +
// per) of the sorted list (keys ascending, entry = (key, base | sign)) and
// sums each run of equal keys with mixed additions. A run is "owned" by the
// thread holding its first entry: that thread stores its part of the run
// straight into the bucket (plain store: it is the bucket's only writer in
// this launch). The thread whose first run started in an earlier segment
// passes that run's partial sum to the next level instead, as (out_keys[s],
// out_vals[s]); a thread that owns its first run passes the identity, so
// the next level's list has exactly one entry per segment and is sorted by
// key.
//
// With `carry` set, a run's owner starts from the bucket's value instead of
// the identity, so the buckets sum over several launches (the chunks of a
// streamed query, whose buckets are cleared once and reduced once): one
// load of a bucket per run, no extra addition.
//
// With PREFETCH, loads are pipelined two deep: while entry i is added, the
// base of entry i + 1 (whose index arrived during the previous addition) is
// prefetched and entry i + 2 is loaded. Without it each addition waits for
// two dependent memory round trips (entry, then base): on an H200, 2^24
// random scalars accumulated at 6.9e8 additions/s against 1.48e9 for
// additions of cached points (bench-data/arith). The pipeline costs
// registers (162 against 128 for the plain loop, so 12 warps per SM
// instead of 16), hence the variants below, chosen by measurement. With
// VEC4 the bases are read with 16-byte loads (msm_load_affine_v4).
template <class F, bool PREFETCH, bool VEC4 = false>
__device__ __forceinline__ void msm_accumulate(const uint2* entries, uint32_t e, uint32_t per,
                                               const affine_t<F>* bases, xyzz_t<F>* buckets, uint32_t* out_keys,
                                               xyzz_t<F>* out_vals, uint32_t carry) {
    typedef xyzz_t<F> X;
    const uint2 none = make_uint2(MSM_NO_KEY, 0);
    uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t start = s * per;  // the host keeps e + per below 2^32
    if (start >= e) return;
    uint32_t end = start + per < e ? start + per : e;
    uint32_t cur = entries[start].x;
    bool owned = start == 0 || entries[start - 1].x != cur;
    out_keys[s] = cur;
    if (owned) out_vals[s] = msm_inf<F>();
    X acc = owned && carry ? buckets[cur] : msm_inf<F>();
    uint2 e0 = entries[start];
    uint2 e1 = start + 1 < end ? entries[start + 1] : none;
    // One pass past the end (key MSM_NO_KEY) flushes the last run, so the
    // flush and the addition each appear once.
    for (uint32_t i = start; i <= end; i++) {
        if (PREFETCH && e1.x != MSM_NO_KEY) msm_prefetch(bases + (e1.y & ~MSM_NEG_BIT));
        uint2 e2 = i + 2 < end ? entries[i + 2] : none;
        uint32_t k = i < end ? e0.x : MSM_NO_KEY;
        if (k != cur) {
            if (owned) buckets[cur] = acc;
            else out_vals[s] = acc;
            owned = true;
            cur = k;
            acc = carry && k != MSM_NO_KEY ? buckets[k] : msm_inf<F>();
        }
        if (i < end) {
            affine_t<F> p = VEC4 ? msm_load_affine_v4(bases + (e0.y & ~MSM_NEG_BIT)) : bases[e0.y & ~MSM_NEG_BIT];
            if (e0.y & MSM_NEG_BIT) p.y = -p.y;  // the identity (0, 0) stays itself
            acc = msm_madd_nl(acc, p);
        }
        e0 = e1;
        e1 = e2;
    }
}

// Level 0 with batch-affine additions (MsmConfig's Accumulate::BatchAffine*):
// the same segments of `per` entries and the same outputs as msm_accumulate
// (buckets of owned runs, out_keys[s] / out_vals[s] for every segment s),
// but thread t runs the K segments t*K .. t*K + K - 1 side by side, each
// with its running sum in affine coordinates. One step gives every segment
// at most one addition, after it has consumed the entries that need no
// field inversion (a run's first point, identities, P + (-P)); the step's
// additions share one inversion (Montgomery's trick: prefix products of
// the denominators forward, one inversion, back again). An affine addition
// costs 5M + 1S with the trick's share against madd's 8M + 2S in XYZZ, plus
// 1/K of an inversion (Fermat: 384 squarings and 229 multiplications in Fq);
// the per-segment state (running sum, pending point, prefix product) lives
// in local memory, K * 252 bytes a thread in G1 and twice that in G2, and
// the kernels are held to 3 blocks per SM (168 registers, as the plain
// kernel; a few words spill). With
// carry, an owned run's sum is added to its bucket when the run ends (the
// same point as msm_accumulate's; its XYZZ coordinates may differ).
// CPU twin, step for step: crates/groth16-cuda/src/msm/batch_affine.rs.
#define MSM_BA_ADD 1u
#define MSM_BA_DBL 2u
#define MSM_BA_OWNED 4u
#define MSM_BA_EMPTY 8u

// The affine sum a + p (add: a.x != p.x) or 2a (!add), given dinv = 1 / d
// for its denominator d (p.x - a.x, or 2 a.y).
template <class F>
__device__ __noinline__ affine_t<F> msm_ba_finish_nl(const affine_t<F> a, const affine_t<F> p, const F dinv,
                                                     bool add) {
    F num, x2;
    if (add) {
        num = p.y - a.y;
        x2 = p.x;
    } else {
        const F xx = a.x.sqr();
        num = xx.dbl() + xx;
        x2 = a.x;
    }
    const F lambda = num * dinv;
    const F x3 = lambda.sqr() - a.x - x2;
    return {x3, lambda * (a.x - x3) - a.y};
}

template <class F>
__device__ __noinline__ F msm_ba_inv_nl(const F x) {
    return x.inv();
}

template <class F, uint32_t K>
__device__ __forceinline__ void msm_accumulate_ba(const uint2* entries, uint32_t e, uint32_t per,
                                                  const affine_t<F>* bases, xyzz_t<F>* buckets,
                                                  uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {
    const uint2 none = make_uint2(MSM_NO_KEY, 0);
    const uint32_t l = e / per + (e % per != 0);
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if ((uint64_t)t * K >= l) return;
    affine_t<F> acc[K], pt[K];
    F pre[K];
    uint32_t pos[K], cur[K];
    uint8_t fl[K];
#pragma unroll 1
    for (uint32_t j = 0; j < K; j++) {
        const uint32_t s = t * K + j;
        if (s >= l) {
            cur[j] = MSM_NO_KEY;
            fl[j] = 0;
            continue;
        }
        const uint32_t start = s * per;  // the host keeps e + per below 2^32
        const uint32_t k = entries[start].x;
        const bool owned = start == 0 || entries[start - 1].x != k;
        out_keys[s] = k;
        if (owned) out_vals[s] = msm_inf<F>();
        cur[j] = k;
        pos[j] = start;
        fl[j] = (owned ? MSM_BA_OWNED : 0u) | MSM_BA_EMPTY;
    }
    for (;;) {
        // Forward: each unfinished segment consumes entries up to its next
        // addition that needs a denominator d, or to its end.
        F prod = F::one();
        bool any = false;
#pragma unroll 1
        for (uint32_t j = 0; j < K; j++) {
            uint32_t k = cur[j];
            if (k == MSM_NO_KEY) continue;
            const uint32_t s = t * K + j;
            const uint32_t end = s * per + per < e ? s * per + per : e;
            uint32_t i = pos[j];
            uint32_t f = fl[j];
            affine_t<F> a = acc[j], p;
            F d;
            for (;;) {
                const uint2 en = i < end ? entries[i] : none;
                if (en.x != k) {
                    // The run of key k ends here.
                    if (f & MSM_BA_OWNED) {
                        if (!carry) buckets[k] = f & MSM_BA_EMPTY ? msm_inf<F>() : xyzz_t<F>::from_affine(a);
                        else if (!(f & MSM_BA_EMPTY)) buckets[k] = msm_madd_nl(buckets[k], a);
                    } else {
                        out_vals[s] = f & MSM_BA_EMPTY ? msm_inf<F>() : xyzz_t<F>::from_affine(a);
                    }
                    f = MSM_BA_OWNED | MSM_BA_EMPTY;
                    k = en.x;
                    if (k == MSM_NO_KEY) break;
                }
                i++;
                p = msm_load_affine_v4(bases + (en.y & ~MSM_NEG_BIT));
                if (en.y & MSM_NEG_BIT) p.y = -p.y;  // the identity (0, 0) stays itself
                if (p.is_inf()) continue;
                if (f & MSM_BA_EMPTY) {
                    a = p;
                    f &= ~MSM_BA_EMPTY;
                } else if (p.x != a.x) {
                    d = p.x - a.x;
                    f |= MSM_BA_ADD;
                    break;
                } else if (p.y == a.y && !a.y.is_zero()) {
                    d = a.y.dbl();
                    f |= MSM_BA_DBL;
                    break;
                } else {
                    f |= MSM_BA_EMPTY;  // P + (-P)
                }
            }
            cur[j] = k;
            pos[j] = i;
            fl[j] = f;
            acc[j] = a;
            if (f & (MSM_BA_ADD | MSM_BA_DBL)) {
                pre[j] = prod;
                prod = prod * d;
                pt[j] = p;
                any = true;
            }
        }
        if (!any) break;
        // Backward: inv is 1 / (d_0 ... d_j) on entering step j.
        F inv = msm_ba_inv_nl(prod);
#pragma unroll 1
        for (uint32_t j = K; j-- > 0;) {
            const uint32_t f = fl[j];
            if (!(f & (MSM_BA_ADD | MSM_BA_DBL))) continue;
            const affine_t<F> a = acc[j], p = pt[j];
            const F dinv = inv * pre[j];
            const bool add = f & MSM_BA_ADD;
            inv = inv * (add ? p.x - a.x : a.y.dbl());
            acc[j] = msm_ba_finish_nl(a, p, dinv, add);
            fl[j] = f & ~(MSM_BA_ADD | MSM_BA_DBL);
        }
    }
}

// Levels 1 and on: the same over the previous level's (key, partial) list,
// whose runs are short. The owner of a run adds it into the bucket, which
// level 0 has written (every key here has an owner at level 0).
template <class F>
__device__ __forceinline__ void msm_accumulate_partials(const uint32_t* in_keys, const xyzz_t<F>* in_vals,
                                                        uint32_t l, uint32_t per, xyzz_t<F>* buckets,
                                                        uint32_t* out_keys, xyzz_t<F>* out_vals) {
    typedef xyzz_t<F> X;
    uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t start = s * per;
    if (start >= l) return;
    uint32_t end = start + per < l ? start + per : l;
    uint32_t cur = in_keys[start];
    bool owned = start == 0 || in_keys[start - 1] != cur;
    out_keys[s] = cur;
    if (owned) out_vals[s] = msm_inf<F>();
    X acc = msm_inf<F>();
    for (uint32_t i = start; i <= end; i++) {
        uint32_t k = i < end ? in_keys[i] : MSM_NO_KEY;
        if (k != cur) {
            if (!owned) out_vals[s] = acc;
            else if (!acc.is_inf()) buckets[cur] = msm_add_nl(buckets[cur], acc);
            owned = true;
            cur = k;
            acc = msm_inf<F>();
        }
        if (i + 1 < end) msm_prefetch(in_vals + i + 1);
        if (i < end) acc = msm_add_nl(acc, in_vals[i]);
    }
}

// out[s] = the sum of bases[idx[j]] for j in [s*per, s*per + per) ∩ [0, n).
template <class F>
__device__ __forceinline__ void msm_sum_bases(const affine_t<F>* bases, const uint32_t* idx, uint32_t n,
                                              uint32_t per, xyzz_t<F>* out) {
    uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t start = s * per;
    if (start >= n) return;
    uint32_t end = start + per < n ? start + per : n;
    xyzz_t<F> acc = msm_inf<F>();
    // Pipelined as in msm_accumulate: prefetch the next base, load the index
    // after it.
    uint32_t j0 = idx[start];
    uint32_t j1 = start + 1 < end ? idx[start + 1] : 0;
    for (uint32_t j = start; j < end; j++) {
        if (j + 1 < end) msm_prefetch(bases + j1);
        uint32_t j2 = j + 2 < end ? idx[j + 2] : 0;
        acc = msm_madd_nl(acc, bases[j0]);
        j0 = j1;
        j1 = j2;
    }
    out[s] = acc;
}

// out[s] = the sum of in[j] for j in [s*per, s*per + per) ∩ [0, n).
template <class F>
__device__ __forceinline__ void msm_sum_points(const xyzz_t<F>* in, uint32_t n, uint32_t per, xyzz_t<F>* out) {
    uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t start = s * per;
    if (start >= n) return;
    uint32_t end = start + per < n ? start + per : n;
    xyzz_t<F> acc = msm_inf<F>();
    for (uint32_t j = start; j < end; j++) {
        if (j + 1 < end) msm_prefetch(in + j + 1);
        acc = msm_add_nl(acc, in[j]);
    }
    out[s] = acc;
}

// Bucket reduction, first step. Window w's buckets B_0 .. B_{nb-1} carry
// the digits 1 .. nb. Thread (w, p) takes the part of 2^part_log2 buckets
// starting at lo = p * 2^part_log2 and computes, by running sums from the
// top, R = sum_j B_j and T = sum_j (j - lo + 1) B_j (weights from 1 within
// the part), into t[w * parts + p] and r[w * parts + p].
template <class F>
__device__ __forceinline__ void msm_bucket_sums(const xyzz_t<F>* buckets, uint32_t windows, uint32_t nb,
                                                uint32_t part_log2, xyzz_t<F>* t, xyzz_t<F>* r) {
    typedef xyzz_t<F> X;
    uint32_t parts = nb >> part_log2;
    uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= windows * parts) return;
    uint32_t w = id / parts, p = id % parts;
    uint32_t len = 1u << part_log2;
    const X* b = buckets + (size_t)w * nb + (size_t)p * len;
    X running = msm_inf<F>(), sum = msm_inf<F>();
    // Steps alternate running += B_j and sum += running, from j = len - 1
    // down; one addition site serves both.
    for (uint32_t k = 0; k < 2 * len; k++) {
        bool second = k & 1;
        if (!second && (k >> 1) + 1 < len) msm_prefetch(b + len - 2 - (k >> 1));
        X rhs = second ? running : b[len - 1 - (k >> 1)];
        X lhs = second ? sum : running;
        X res = msm_add_nl(lhs, rhs);
        if (second) sum = res;
        else running = res;
    }
    t[id] = sum;
    r[id] = running;
}

// Bucket reduction, merge step `level`: for each window, ranges of 2^level
// parts at a = w * parts + q * 2^(level+1) and b = a + 2^level merge into
// a: T_a += T_b + 2^(part_log2 + level) R_b (the weights of b's buckets
// grow by the length of a), R_a += R_b. After log2(parts) levels t[w *
// parts] is window w's sum_j (j + 1) B_j.
template <class F>
__device__ __forceinline__ void msm_bucket_merge(xyzz_t<F>* t, xyzz_t<F>* r, uint32_t windows, uint32_t parts,
                                                 uint32_t level, uint32_t part_log2) {
    typedef xyzz_t<F> X;
    uint32_t half = parts >> (level + 1);
    uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= windows * half) return;
    uint32_t w = id / half, q = id % half;
    size_t a = (size_t)w * parts + ((size_t)q << (level + 1));
    size_t b = a + ((size_t)1 << level);
    X scaled = r[b];
    for (uint32_t i = 0; i < part_log2 + level; i++) scaled = scaled.dbl();
    X ta = msm_add_nl(t[a], t[b]);
    t[a] = msm_add_nl(ta, scaled);
    r[a] = msm_add_nl(r[a], r[b]);
}

// Bucket reduction, merge step with fan 2^fan_log2 (MsmConfig's
// merge_fan_log2 above 1: fewer launches than msm_bucket_merge's one per
// level). Ranges are 2^level parts long; for each window, the m =
// 2^fan_log2 consecutive ranges at a_i = w * parts + q * 2^(level +
// fan_log2) + i * 2^level merge into a_0: with L = 2^(part_log2 + level)
// buckets a range, T_0 += sum_{i>=1} T_i + L * sum_i i R_i and R_0 +=
// sum_{i>=1} R_i. The weighted sum comes from running sums from the top
// (2(m - 1) additions) and one scaling by L (part_log2 + level doublings),
// where m merges one at a time would scale m - 1 times. With fan_log2 = 1
// it is msm_bucket_merge. CPU twin: crates/groth16-cuda/src/msm/reduce.rs.
template <class F>
__device__ __forceinline__ void msm_bucket_merge_fan(xyzz_t<F>* t, xyzz_t<F>* r, uint32_t windows,
                                                     uint32_t parts, uint32_t level, uint32_t fan_log2,
                                                     uint32_t part_log2) {
    typedef xyzz_t<F> X;
    const uint32_t groups = parts >> (level + fan_log2);
    const uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= windows * groups) return;
    const uint32_t w = id / groups, q = id % groups;
    const size_t a = (size_t)w * parts + ((size_t)q << (level + fan_log2));
    const size_t step = (size_t)1 << level;
    const uint32_t m = 1u << fan_log2;
    X run = msm_inf<F>(), acc = msm_inf<F>();
    for (uint32_t i = m - 1; i >= 1; i--) {
        run = msm_add_nl(run, r[a + i * step]);
        acc = msm_add_nl(acc, run);
    }
    r[a] = msm_add_nl(r[a], run);
    for (uint32_t i = 0; i < part_log2 + level; i++) acc = acc.dbl();
    for (uint32_t i = 0; i < m; i++) acc = msm_add_nl(acc, t[a + i * step]);
    t[a] = acc;
}

// out[i] = 2^c * in[i] for i < n (c doublings in XYZZ): the next window's
// multiples of a parameter query's bases, made once when the bases are
// uploaded (crates/groth16-cuda/src/msm, DeviceBases::with_window_multiples;
// kernels/setup's to_affine converts them). The identity stays itself.
template <class F>
__device__ __forceinline__ void msm_shift(const affine_t<F>* in, uint32_t n, uint32_t c, xyzz_t<F>* out) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const affine_t<F> p = in[i];
    xyzz_t<F> acc = xyzz_t<F>::dbl(p);
    for (uint32_t k = 1; k < c; k++) acc = acc.dbl();
    out[i] = acc;
}

// out[i] = in[i * stride] for i < n: the window sums, for the host.
template <class F>
__device__ __forceinline__ void msm_gather(const xyzz_t<F>* in, uint32_t n, uint32_t stride, xyzz_t<F>* out) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[(size_t)i * stride];
}

// The entry points of one curve's module (kernels/msm_g1.cu, msm_g2.cu):
// msm_<op>_<G>_bls12_381 over the coordinate field F.
// Level-0 accumulation comes in seven variants (the host picks one by
// name, MsmConfig::accumulate): plain loads; the prefetch pipeline; the
// pipeline held to 128 registers (4 blocks of MSM_CURVE_THREADS per SM);
// plain and prefetch128 with 16-byte loads of the bases; and the
// batch-affine kernels with K = 128 and 256 segments a thread.
#define MSM_CURVE_KERNELS(G, F)                                                                                  \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS) msm_accumulate_plain_##G##_bls12_381(      \
        const uint2* entries, uint32_t e, uint32_t per, const affine_t<F>* bases, xyzz_t<F>* buckets,         \
        uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {                                             \
        msm_accumulate<F, false>(entries, e, per, bases, buckets, out_keys, out_vals, carry);                  \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS) msm_accumulate_prefetch_##G##_bls12_381(   \
        const uint2* entries, uint32_t e, uint32_t per, const affine_t<F>* bases, xyzz_t<F>* buckets,         \
        uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {                                             \
        msm_accumulate<F, true>(entries, e, per, bases, buckets, out_keys, out_vals, carry);                   \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS, 4)                                         \
        msm_accumulate_prefetch128_##G##_bls12_381(const uint2* entries, uint32_t e, uint32_t per,             \
                                                   const affine_t<F>* bases, xyzz_t<F>* buckets,               \
                                                   uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {  \
        msm_accumulate<F, true>(entries, e, per, bases, buckets, out_keys, out_vals, carry);                   \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS) msm_accumulate_plain_v4_##G##_bls12_381(   \
        const uint2* entries, uint32_t e, uint32_t per, const affine_t<F>* bases, xyzz_t<F>* buckets,         \
        uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {                                             \
        msm_accumulate<F, false, true>(entries, e, per, bases, buckets, out_keys, out_vals, carry);            \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS, 4)                                         \
        msm_accumulate_prefetch128_v4_##G##_bls12_381(const uint2* entries, uint32_t e, uint32_t per,          \
                                                      const affine_t<F>* bases, xyzz_t<F>* buckets,            \
                                                      uint32_t* out_keys, xyzz_t<F>* out_vals,                 \
                                                      uint32_t carry) {                                        \
        msm_accumulate<F, true, true>(entries, e, per, bases, buckets, out_keys, out_vals, carry);             \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS, 3) msm_accumulate_ba128_##G##_bls12_381(      \
        const uint2* entries, uint32_t e, uint32_t per, const affine_t<F>* bases, xyzz_t<F>* buckets,         \
        uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {                                             \
        msm_accumulate_ba<F, 128>(entries, e, per, bases, buckets, out_keys, out_vals, carry);                 \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS, 3) msm_accumulate_ba256_##G##_bls12_381(      \
        const uint2* entries, uint32_t e, uint32_t per, const affine_t<F>* bases, xyzz_t<F>* buckets,         \
        uint32_t* out_keys, xyzz_t<F>* out_vals, uint32_t carry) {                                             \
        msm_accumulate_ba<F, 256>(entries, e, per, bases, buckets, out_keys, out_vals, carry);                 \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS) msm_accumulate_partials_##G##_bls12_381(   \
        const uint32_t* in_keys, const xyzz_t<F>* in_vals, uint32_t l, uint32_t per, xyzz_t<F>* buckets,      \
        uint32_t* out_keys, xyzz_t<F>* out_vals) {                                                             \
        msm_accumulate_partials<F>(in_keys, in_vals, l, per, buckets, out_keys, out_vals);                     \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_sum_bases_##G##_bls12_381(const affine_t<F>* bases, const uint32_t* idx, uint32_t n, uint32_t per, \
                                      xyzz_t<F>* out) {                                                        \
        msm_sum_bases<F>(bases, idx, n, per, out);                                                             \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_sum_points_##G##_bls12_381(const xyzz_t<F>* in, uint32_t n, uint32_t per, xyzz_t<F>* out) {       \
        msm_sum_points<F>(in, n, per, out);                                                                    \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_bucket_sums_##G##_bls12_381(const xyzz_t<F>* buckets, uint32_t windows, uint32_t nb,              \
                                        uint32_t part_log2, xyzz_t<F>* t, xyzz_t<F>* r) {                      \
        msm_bucket_sums<F>(buckets, windows, nb, part_log2, t, r);                                             \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_bucket_merge_##G##_bls12_381(xyzz_t<F>* t, xyzz_t<F>* r, uint32_t windows, uint32_t parts,        \
                                         uint32_t level, uint32_t part_log2) {                                 \
        msm_bucket_merge<F>(t, r, windows, parts, level, part_log2);                                           \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_bucket_merge_fan_##G##_bls12_381(xyzz_t<F>* t, xyzz_t<F>* r, uint32_t windows, uint32_t parts,    \
                                             uint32_t level, uint32_t fan_log2, uint32_t part_log2) {          \
        msm_bucket_merge_fan<F>(t, r, windows, parts, level, fan_log2, part_log2);                             \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_gather_##G##_bls12_381(const xyzz_t<F>* in, uint32_t n, uint32_t stride, xyzz_t<F>* out) {        \
        msm_gather<F>(in, n, stride, out);                                                                     \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_CURVE_THREADS)                                            \
        msm_shift_##G##_bls12_381(const affine_t<F>* in, uint32_t n, uint32_t c, xyzz_t<F>* out) {            \
        msm_shift<F>(in, n, c, out);                                                                           \
    }
