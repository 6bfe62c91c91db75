// BLS12-381's scalar field Fr and base field Fq (with Fq2 = Fq[u]/(u^2 + 1)),
// in blst's Montgomery representation.
#pragma once
#include "mont.cuh"

__device__ __constant__ const uint32_t FR_MOD[8] = {
    0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, 0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
__device__ __constant__ const uint32_t FR_RR[8] = {
    0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb, 0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};
__device__ __constant__ const uint32_t FR_ONE[8] = {
    0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa, 0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
// -MOD^-1 mod 2^32
constexpr uint32_t FR_M0 = 0xffffffff;

__device__ __constant__ const uint32_t FQ_MOD[12] = {
    0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
    0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
__device__ __constant__ const uint32_t FQ_RR[12] = {
    0x1c341746, 0xf4df1f34, 0x09d104f1, 0x0a76e6a6, 0x4c95b6d5, 0x8de5476c,
    0x939d83c0, 0x67eb88a9, 0xb519952d, 0x9a793e85, 0x92cae3aa, 0x11988fe5};
__device__ __constant__ const uint32_t FQ_ONE[12] = {
    0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857,
    0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
constexpr uint32_t FQ_M0 = 0xfffcfffd;

typedef mont_t<8, FR_MOD, FR_M0, FR_RR, FR_ONE> fr_t;
typedef mont_t<12, FQ_MOD, FQ_M0, FQ_RR, FQ_ONE> fq_t;

static_assert(sizeof(fr_t) == 32, "fr_t must match blst_fr");
static_assert(sizeof(fq_t) == 48, "fq_t must match blst_fp");

// Fq2 = Fq[u] / (u^2 + 1), laid out as blst_fp2: c0 then c1.
struct fq2_t {
    fq_t c0, c1;

    __device__ __forceinline__ static fq2_t zero() { return {fq_t::zero(), fq_t::zero()}; }
    __device__ __forceinline__ static fq2_t one() { return {fq_t::one(), fq_t::zero()}; }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ bool operator==(const fq2_t& o) const { return c0 == o.c0 && c1 == o.c1; }
    __device__ __forceinline__ bool operator!=(const fq2_t& o) const { return !(*this == o); }
    __device__ __forceinline__ friend fq2_t operator+(const fq2_t& a, const fq2_t& b) {
        return {a.c0 + b.c0, a.c1 + b.c1};
    }
    __device__ __forceinline__ friend fq2_t operator-(const fq2_t& a, const fq2_t& b) {
        return {a.c0 - b.c0, a.c1 - b.c1};
    }
    __device__ __forceinline__ fq2_t operator-() const { return {-c0, -c1}; }
    __device__ __forceinline__ fq2_t dbl() const { return {c0.dbl(), c1.dbl()}; }
    // Karatsuba: 3 Fq multiplications.
    __device__ __forceinline__ friend fq2_t operator*(const fq2_t& a, const fq2_t& b) {
        fq_t t0 = a.c0 * b.c0;
        fq_t t1 = a.c1 * b.c1;
        fq_t t2 = (a.c0 + a.c1) * (b.c0 + b.c1);
        return {t0 - t1, t2 - t0 - t1};
    }
    // (c0 + c1 u)^2 = (c0 + c1)(c0 - c1) + 2 c0 c1 u
    __device__ __forceinline__ fq2_t sqr() const {
        return {(c0 + c1) * (c0 - c1), (c0 * c1).dbl()};
    }
    // 1 / (c0 + c1 u) = (c0 - c1 u) / (c0^2 + c1^2)
    __device__ fq2_t inv() const {
        fq_t t = (c0.sqr() + c1.sqr()).inv();
        return {c0 * t, -(c1 * t)};
    }
};
static_assert(sizeof(fq2_t) == 96, "fq2_t must match blst_fp2");
