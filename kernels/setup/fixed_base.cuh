// Fixed-base scalar multiplication for Groth16 parameter generation: many
// scalars times one generator G (G1 or G2), from a table of multiples of G,
// then conversion of the results to affine coordinates.
//
// Table (built by the host, crates/groth16-cuda/src/setup/fixed_base.rs):
//   table[k * half + (d - 1)] = d * 2^(c k) * G
// for window k in 0 .. windows and digit d in 1 .. half, half = 2^(c - 1),
// windows = ceil(256 / c). A canonical scalar s has signed digits d_k in
// [-half, half] with s = sum_k d_k 2^(c k) (msm_digit), so
//   s * G = sum_k sign(d_k) * table[k][|d_k| - 1]:
// one mixed addition per nonzero digit and no doubling at all. One thread
// per scalar; the table is small enough to stay in L2 (G1, c = 12: 22
// windows of 2048 points, 4.3 MB).
//
// Affine conversion uses Montgomery's batch inversion per thread, over the
// points t, t + T, t + 2T, ... (T threads in the grid, so a warp's loads are
// contiguous): one field inversion per thread instead of one per point.
#pragma once
#include "../ec/bls12_381.cuh"
#include "../msm/digits.cuh"

// Threads per block of both kernels; the host launches with the same number
// (crates/groth16-cuda/src/setup/gpu.rs, BLOCK).
#ifndef SETUP_THREADS
#define SETUP_THREADS 128
#endif
#if SETUP_THREADS < 32 || (SETUP_THREADS & (SETUP_THREADS - 1)) != 0
#error "SETUP_THREADS must be a power of two of at least 32"
#endif

// The point formula out of line, so it appears once in the module.
template <class F>
__device__ __noinline__ xyzz_t<F> setup_madd_nl(const xyzz_t<F> a, const affine_t<F> b) {
    return a.add(b);
}

// out[i] = scalars[i] * G in XYZZ coordinates, for i < n. Scalars arrive in
// Montgomery form (the bytes of &[blstrs::Scalar]).
template <class F>
__device__ __forceinline__ void setup_fixed_base_mul(const affine_t<F>* table, uint32_t c, uint32_t windows,
                                                     const fr_t* scalars, uint32_t n, xyzz_t<F>* out) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const fr_t s = scalars[i].from_mont();
    const uint32_t half = 1u << (c - 1);
    uint32_t carry = 0;
    xyzz_t<F> acc = xyzz_t<F>::inf();
    for (uint32_t k = 0; k < windows; k++) {
        int32_t d = msm_digit(s, k, c, carry);
        if (d == 0) continue;
        uint32_t mag = d < 0 ? (uint32_t)(-d) : (uint32_t)d;
        affine_t<F> p = table[(size_t)k * half + (mag - 1)];
        if (d < 0) p.y = -p.y;
        acc = setup_madd_nl(acc, p);
    }
    out[i] = acc;
}

// out[i] = in[i] in affine coordinates (the identity as (0, 0), blst's
// layout), for i < n. With z = ZZ * ZZZ: x = X * ZZZ / z, y = Y * ZZ / z.
// out[i].x holds the prefix product before i and out[i].y the point's z
// between the two passes.
template <class F>
__device__ __forceinline__ void setup_to_affine(const xyzz_t<F>* in, uint32_t n, affine_t<F>* out) {
    const uint32_t stride = gridDim.x * blockDim.x;
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    F acc = F::one();
    uint32_t last = t;
    for (uint32_t i = t; i < n; i += stride) {
        const xyzz_t<F> p = in[i];
        out[i].x = acc;
        if (!p.is_inf()) {
            F z = p.zz * p.zzz;
            out[i].y = z;
            acc = acc * z;
        }
        last = i;
    }
    F inv = acc.inv();
    for (uint32_t i = last;; i -= stride) {
        const xyzz_t<F> p = in[i];
        if (p.is_inf()) {
            out[i] = affine_t<F>::inf();
        } else {
            F zinv = inv * out[i].x;
            inv = inv * out[i].y;
            out[i] = {p.x * p.zzz * zinv, p.y * p.zz * zinv};
        }
        if (i < stride) break;
    }
}

// The entry points of one curve: setup_<op>_<G>_bls12_381 over the
// coordinate field F.
#define SETUP_KERNELS(G, F)                                                                                      \
    extern "C" __global__ void __launch_bounds__(SETUP_THREADS) setup_fixed_base_mul_##G##_bls12_381(            \
        const affine_t<F>* table, uint32_t c, uint32_t windows, const fr_t* scalars, uint32_t n,               \
        xyzz_t<F>* out) {                                                                                      \
        setup_fixed_base_mul<F>(table, c, windows, scalars, n, out);                                           \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(SETUP_THREADS)                                                \
        setup_to_affine_##G##_bls12_381(const xyzz_t<F>* in, uint32_t n, affine_t<F>* out) {                   \
        setup_to_affine<F>(in, n, out);                                                                        \
    }
