// One Montgomery field template for BLS12-381's Fr (8 x 32-bit limbs) and Fq
// (12 x 32-bit limbs).
//
// Elements are stored exactly as blst (and so blstrs) stores them in host
// memory: Montgomery form with R = 2^(32N), little-endian limbs. A device
// buffer of `fr_t` holds the same bytes as a `&[blstrs::Scalar]`, so uploads
// need no conversion. Every value is kept fully reduced (< MOD).
//
// Requires MOD < 2^(32N - 1) (true for both fields: 255 and 381 bits), so
// sums of two reduced values never carry out of the top limb.
#pragma once
#include <cstdint>
#include "ptx.cuh"

// FF_NOINLINE makes multiplication a called function instead of inlined code:
// modules that instantiate many curve formulas (tests) stay small and compile
// fast; hot kernels leave it undefined.
#ifdef FF_NOINLINE
#define FF_MUL_INLINE __noinline__
#else
#define FF_MUL_INLINE __forceinline__
#endif

template <int N, const uint32_t* MOD, uint32_t M0, const uint32_t* RR, const uint32_t* ONE>
struct mont_t {
    static constexpr int LIMBS = N;
    uint32_t v[N];

    __device__ __forceinline__ static mont_t zero() {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    __device__ __forceinline__ static mont_t one() {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = ONE[i];
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool operator==(const mont_t& o) const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool operator!=(const mont_t& o) const { return !(*this == o); }

    // t - MOD if t >= MOD, else t (t < 2 MOD).
    __device__ __forceinline__ static mont_t reduce_once(const uint32_t t[N]) {
        mont_t d;
        d.v[0] = ptx::sub_cc(t[0], MOD[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = ptx::subc_cc(t[i], MOD[i]);
        uint32_t borrow = ptx::subc(0, 0);  // 0 or 0xffffffff
#pragma unroll
        for (int i = 0; i < N; i++) d.v[i] = (t[i] & borrow) | (d.v[i] & ~borrow);
        return d;
    }

    __device__ __forceinline__ friend mont_t operator+(const mont_t& a, const mont_t& b) {
        uint32_t t[N];
        t[0] = ptx::add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) t[i] = ptx::addc_cc(a.v[i], b.v[i]);
        return reduce_once(t);
    }

    __device__ __forceinline__ friend mont_t operator-(const mont_t& a, const mont_t& b) {
        mont_t d;
        d.v[0] = ptx::sub_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = ptx::subc_cc(a.v[i], b.v[i]);
        uint32_t borrow = ptx::subc(0, 0);
        d.v[0] = ptx::add_cc(d.v[0], MOD[0] & borrow);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = ptx::addc_cc(d.v[i], MOD[i] & borrow);
        return d;
    }

    __device__ __forceinline__ mont_t operator-() const {
        mont_t d;
        d.v[0] = ptx::sub_cc(MOD[0], v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = ptx::subc_cc(MOD[i], v[i]);
        // -0 is 0, not MOD.
        uint32_t mask = is_zero() ? 0 : 0xffffffff;
#pragma unroll
        for (int i = 0; i < N; i++) d.v[i] &= mask;
        return d;
    }

    __device__ __forceinline__ mont_t dbl() const { return *this + *this; }

    // Montgomery multiplication, CIOS with two carry chains per row (the low
    // and the high halves of the 32x32 products). t stays below 2 MOD.
    __device__ FF_MUL_INLINE friend mont_t operator*(const mont_t& a, const mont_t& b) {
        uint32_t t[N + 2];
#pragma unroll
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const uint32_t bi = b.v[i];
            // t += a * bi: low halves into t[j], high halves into t[j+1].
            t[0] = ptx::mad_lo_cc(a.v[0], bi, t[0]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j] = ptx::madc_lo_cc(a.v[j], bi, t[j]);
            t[N] = ptx::addc_cc(t[N], 0);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            t[1] = ptx::mad_hi_cc(a.v[0], bi, t[1]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j + 1] = ptx::madc_hi_cc(a.v[j], bi, t[j + 1]);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            // t += m * MOD, which clears t[0]; then shift down one limb.
            const uint32_t m = t[0] * M0;
            t[0] = ptx::mad_lo_cc(m, MOD[0], t[0]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j] = ptx::madc_lo_cc(m, MOD[j], t[j]);
            t[N] = ptx::addc_cc(t[N], 0);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            t[1] = ptx::mad_hi_cc(m, MOD[0], t[1]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j + 1] = ptx::madc_hi_cc(m, MOD[j], t[j + 1]);
            t[N + 1] = ptx::addc(t[N + 1], 0);
#pragma unroll
            for (int j = 0; j < N + 1; j++) t[j] = t[j + 1];
            t[N + 1] = 0;
        }
        return reduce_once(t);
    }

    __device__ __forceinline__ mont_t sqr() const { return *this * *this; }

    __device__ __forceinline__ mont_t to_mont() const {
        mont_t rr;
#pragma unroll
        for (int i = 0; i < N; i++) rr.v[i] = RR[i];
        return *this * rr;
    }
    __device__ __forceinline__ mont_t from_mont() const {
        mont_t one_plain = zero();
        one_plain.v[0] = 1;
        return *this * one_plain;
    }

    // this^e for a little-endian exponent of N limbs, square-and-multiply.
    __device__ mont_t pow(const uint32_t e[N]) const {
        mont_t acc = one();
        for (int i = N - 1; i >= 0; i--) {
            for (int bit = 31; bit >= 0; bit--) {
                acc = acc.sqr();
                if ((e[i] >> bit) & 1) acc = acc * *this;
            }
        }
        return acc;
    }

    // Inverse by Fermat (this^(MOD-2)); the inverse of 0 is 0. Slow: for the
    // few places that need one inversion, not for batches.
    __device__ mont_t inv() const {
        uint32_t e[N];
        e[0] = ptx::sub_cc(MOD[0], 2);
#pragma unroll
        for (int i = 1; i < N; i++) e[i] = ptx::subc_cc(MOD[i], 0);
        return pow(e);
    }
};
