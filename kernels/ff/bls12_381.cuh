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

// FQ_MOD^2 (24 limbs): added to a0 b0 - a1 b1 in Fq2 multiplication so the
// difference is never negative.
__device__ __constant__ const uint32_t FQ_MOD_SQ[24] = {
    0x1c718e39, 0x26aa0000, 0x76382eab, 0x7ced6b1d, 0x62113cfd, 0x162c3383, 0x3e71b743, 0x66bf91ed,
    0x7091a049, 0x292e85a8, 0x86185c7b, 0x1d68619c, 0x0978ef01, 0xf5314933, 0x16ddca6e, 0x50a62cfd,
    0x349e8bd0, 0x66e59e49, 0x0e7046b4, 0xe2dc90e5, 0xa22f25e9, 0x4bd278ea, 0xb8c35fc7, 0x02a437a4};

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
    // Karatsuba with lazy reduction: three 24-limb products and two
    // Montgomery reductions (three multiplications would reduce three times):
    //   c0 = redc(a0 b0 - a1 b1 + MOD^2),  c1 = redc((a0 + a1)(b0 + b1) - a0 b0 - a1 b1),
    // with a0 + a1, b0 + b1 not reduced (below 2 MOD). Both sums are exact
    // and in [0, 2 MOD^2), below MOD * 2^384 as redc_wide needs. One call
    // where FF_NOINLINE is set (G2's module), its parts inlined. The CPU twin
    // is `cuzk_groth16_cuda::mont::fq2_mul`.
    __device__ FF_MUL_INLINE friend fq2_t operator*(const fq2_t& a, const fq2_t& b) {
        uint32_t sa[12], sb[12];
        fq_t::add_plain(a.c0.v, a.c1.v, sa);
        fq_t::add_plain(b.c0.v, b.c1.v, sb);
        uint32_t t0[24], t1[24];
        fq_t::mul_wide(a.c0.v, b.c0.v, t0);
        fq_t::mul_wide(a.c1.v, b.c1.v, t1);
        // t1 <- t0 + t1, t0 <- t0 - t1 + MOD^2
        uint32_t s01[24];
#pragma unroll
        for (int k = 0; k < 24; k++) s01[k] = t0[k];
        fq_t::add_wide(s01, t1);
        fq_t::sub_wide(t0, t1);
        uint32_t m2[24];
#pragma unroll
        for (int k = 0; k < 24; k++) m2[k] = FQ_MOD_SQ[k];
        fq_t::add_wide(t0, m2);
        fq2_t r;
        r.c0 = fq_t::redc_wide(t0);
        fq_t::mul_wide(sa, sb, t1);
        fq_t::sub_wide(t1, s01);
        r.c1 = fq_t::redc_wide(t1);
        return r;
    }
    // (c0 + c1 u)^2 = (c0 + c1)(c0 - c1) + 2 c0 c1 u: one call where
    // FF_NOINLINE is set, its two Fq multiplications inlined.
    __device__ FF_MUL_INLINE fq2_t sqr() const {
        return {fq_t::mul_inl(c0 + c1, c0 - c1), fq_t::mul_inl(c0, c1).dbl()};
    }
    // 1 / (c0 + c1 u) = (c0 - c1 u) / (c0^2 + c1^2)
    __device__ fq2_t inv() const {
        fq_t t = (c0.sqr() + c1.sqr()).inv();
        return {c0 * t, -(c1 * t)};
    }
};
static_assert(sizeof(fq2_t) == 96, "fq2_t must match blst_fp2");
