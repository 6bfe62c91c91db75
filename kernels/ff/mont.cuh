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

    // Montgomery multiplication (CIOS by rows of b) with the running sum kept
    // in two halves so every carry chain runs over disjoint limbs:
    //   value = lo + 2^32 * hi,
    // lo[k] of weight 2^(32k) and hi[k] of weight 2^(32(k+1)). The products
    // a[j]*b[i] of even j land, low and high halves, on lo's limbs 0..N-1
    // without overlap, those of odd j on hi's: one chain of N multiply-adds
    // each and no carry fix-ups between the rows. The multiple of MOD that
    // clears limb 0 is added the same way. Dividing by 2^32 then makes hi the
    // low half of the next row and lo, shifted by two limbs (its limb 1 added
    // into the new limb 0), the high half: the two arrays swap roles each
    // row and the shift is folded into the next row's first chain.
    //
    // Bounds (a, b < MOD < 2^(32N - 1)): the sum stays below 2 MOD * 2^32
    // before each division, so hi < 2^(32N): the chains into hi never carry
    // out, and the carries out of lo's chains are added into hi's top limb.
    // Per row: 4N + 1 multiply-adds, one addition and two carry additions
    // (the earlier form needed six). The CPU twin is Rust's
    // `cuzk_groth16_cuda::mont::mul`, which checks the dropped carries.
    __device__ FF_MUL_INLINE friend mont_t operator*(const mont_t& a, const mont_t& b) { return mul_inl(a, b); }

    // operator*, always inlined (for callers that are themselves one call).
    __device__ __forceinline__ static mont_t mul_inl(const mont_t& a, const mont_t& b) {
        uint32_t even[N], odd[N];
        // Row 0: plain products, nothing to add to.
#pragma unroll
        for (int k = 0; k < N; k += 2) {
            even[k] = a.v[k] * b.v[0];
            even[k + 1] = __umulhi(a.v[k], b.v[0]);
            odd[k] = a.v[k + 1] * b.v[0];
            odd[k + 1] = __umulhi(a.v[k + 1], b.v[0]);
        }
        redc_row(even, odd);
#pragma unroll
        for (int i = 1; i < N; i += 2) {
            mul_row(odd, even, a.v, b.v[i]);
            redc_row(odd, even);
            if (i + 1 < N) {
                mul_row(even, odd, a.v, b.v[i + 1]);
                redc_row(even, odd);
            }
        }
        // After the last row (an odd one: N is even) the low half is `odd`
        // with limb 0 cleared and the high half `even`: divide by 2^32.
        uint32_t t[N];
        t[0] = ptx::add_cc(even[0], odd[1]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) t[k] = ptx::addc_cc(even[k], odd[k + 1]);
        t[N - 1] = ptx::addc(even[N - 1], 0);
        return reduce_once(t);
    }

    // One row's products after the first: (lo, hi) is the previous row's
    // (hi, lo), so lo needs lo's limb 0 of the previous low half (hi[1]) and
    // hi becomes that low half shifted down two limbs, with a[odd] * bi
    // added as it is shifted.
    __device__ __forceinline__ static void mul_row(uint32_t lo[N], uint32_t hi[N], const uint32_t a[N],
                                                   uint32_t bi) {
        lo[0] = ptx::add_cc(lo[0], hi[1]);
#pragma unroll
        for (int k = 0; k < N - 2; k += 2) {
            hi[k] = ptx::madc_lo_cc(a[k + 1], bi, hi[k + 2]);
            hi[k + 1] = ptx::madc_hi_cc(a[k + 1], bi, hi[k + 3]);
        }
        hi[N - 2] = ptx::madc_lo_cc(a[N - 1], bi, 0);
        // hi(x * y) <= 2^32 - 2 for 32-bit x, y: adding the carry cannot
        // carry out.
        hi[N - 1] = ptx::madc_hi(a[N - 1], bi, 0);
        mad_pairs(lo, a, bi);
        hi[N - 1] = ptx::addc(hi[N - 1], 0);
    }

    // Adds m * MOD, m chosen to clear lo[0].
    __device__ __forceinline__ static void redc_row(uint32_t lo[N], uint32_t hi[N]) {
        const uint32_t m = lo[0] * M0;
        hi[0] = ptx::mad_lo_cc(m, MOD[1], hi[0]);
        hi[1] = ptx::madc_hi_cc(m, MOD[1], hi[1]);
#pragma unroll
        for (int k = 2; k < N; k += 2) {
            hi[k] = ptx::madc_lo_cc(m, MOD[k + 1], hi[k]);
            hi[k + 1] = ptx::madc_hi_cc(m, MOD[k + 1], hi[k + 1]);
        }
        // hi < 2^(32N) (see operator*): this chain's carry out is zero.
        lo[0] = ptx::mad_lo_cc(m, MOD[0], lo[0]);
        lo[1] = ptx::madc_hi_cc(m, MOD[0], lo[1]);
#pragma unroll
        for (int k = 2; k < N; k += 2) {
            lo[k] = ptx::madc_lo_cc(m, MOD[k], lo[k]);
            lo[k + 1] = ptx::madc_hi_cc(m, MOD[k], lo[k + 1]);
        }
        hi[N - 1] = ptx::addc(hi[N - 1], 0);
    }

    // lo += (a[0], a[2], ..., a[N-2]) * bi, the even-indexed limbs' products
    // on limbs (0, 1), (2, 3), ...; the carry out is left in CC.CF.
    __device__ __forceinline__ static void mad_pairs(uint32_t lo[N], const uint32_t a[N], uint32_t bi) {
        lo[0] = ptx::mad_lo_cc(a[0], bi, lo[0]);
        lo[1] = ptx::madc_hi_cc(a[0], bi, lo[1]);
#pragma unroll
        for (int k = 2; k < N; k += 2) {
            lo[k] = ptx::madc_lo_cc(a[k], bi, lo[k]);
            lo[k + 1] = ptx::madc_hi_cc(a[k], bi, lo[k + 1]);
        }
    }

    // Squaring: the 2N-limb square from the cross products a[i]*a[j], i < j,
    // once (then doubled) and the N squares a[i]^2, then redc_wide: 3N^2 + 2N
    // multiply-adds against 4N^2 + N for operator*. The CPU twin is
    // `cuzk_groth16_cuda::mont::sqr`.
    __device__ FF_MUL_INLINE mont_t sqr() const {
        uint32_t w[2 * N];
        square_wide(v, w);
        return redc_wide(w);
    }

    // w / 2^(32N) mod MOD, fully reduced, for a 2N-limb w below
    // MOD * 2^(32N): a Montgomery reduction of w's low half (rows of redc
    // without products), to which the high half is added. The sum stays
    // below 2 MOD (the reduced low half is at most MOD, the high half below
    // MOD), so one conditional subtraction finishes it. The CPU twin is
    // `cuzk_groth16_cuda::mont::redc_wide`.
    __device__ __forceinline__ static mont_t redc_wide(const uint32_t w[2 * N]) {
        uint32_t even[N], odd[N];
#pragma unroll
        for (int k = 0; k < N; k++) {
            even[k] = w[k];
            odd[k] = 0;
        }
        redc_row(even, odd);
#pragma unroll
        for (int i = 1; i < N; i += 2) {
            redc_shift_row(odd, even);
            if (i + 1 < N) redc_shift_row(even, odd);
        }
        uint32_t t[N];
        t[0] = ptx::add_cc(even[0], odd[1]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) t[k] = ptx::addc_cc(even[k], odd[k + 1]);
        t[N - 1] = ptx::addc(even[N - 1], 0);
        t[0] = ptx::add_cc(t[0], w[N]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) t[k] = ptx::addc_cc(t[k], w[N + k]);
        t[N - 1] = ptx::addc(t[N - 1], w[2 * N - 1]);
        return reduce_once(t);
    }

    // w = a * b (2N limbs), exact for any a, b below 2^(32N). Row i's
    // products a[j] * b[i] land on limb pairs starting at i + j: those
    // starting at even limbs accumulate in `e` (e[k] of weight 2^(32k)),
    // those at odd limbs in `o` (o[k] of weight 2^(32(k+1))), so each row is
    // two carry chains of N multiply-adds over disjoint arrays. A chain's
    // carry out goes into the limb above its last pair, which holds at most
    // one earlier carry then and cannot overflow; the last row's carry out
    // of `e` is zero (e alone is below the product, below 2^(64N)). Then
    // w = e + 2^32 o. 2N^2 multiply-adds. The CPU twin is
    // `cuzk_groth16_cuda::mont::mul_wide`.
    __device__ __forceinline__ static void mul_wide(const uint32_t a[N], const uint32_t b[N], uint32_t w[2 * N]) {
        uint32_t e[2 * N], o[2 * N];
#pragma unroll
        for (int k = 0; k < 2 * N; k++) {
            e[k] = 0;
            o[k] = 0;
        }
#pragma unroll
        for (int i = 0; i < N; i++) {
            if (i % 2 == 0) {
                // a[even j] * b[i] start at even limbs i + j: e[i ..];
                // a[odd j] * b[i] at odd limbs i + j: o[i ..].
                wide_chain(e, i, a, 0, b[i], true);
                wide_chain(o, i, a, 1, b[i], true);
            } else {
                wide_chain(o, i - 1, a, 0, b[i], true);
                wide_chain(e, i + 1, a, 1, b[i], i + 1 + N < 2 * N);
            }
        }
        w[0] = e[0];
        w[1] = ptx::add_cc(e[1], o[0]);
#pragma unroll
        for (int k = 2; k < 2 * N - 1; k++) w[k] = ptx::addc_cc(e[k], o[k - 1]);
        w[2 * N - 1] = ptx::addc(e[2 * N - 1], o[2 * N - 2]);
    }

    // arr[base ..] += (a[j0], a[j0 + 2], .., a[j0 + N - 2]) * bi on limb
    // pairs (base, base + 1), (base + 2, base + 3), ..; with carry_out the
    // chain's carry is added into arr[base + N], else it is dropped (zero).
    __device__ __forceinline__ static void wide_chain(uint32_t* arr, int base, const uint32_t a[N], int j0,
                                                      uint32_t bi, bool carry_out) {
        arr[base] = ptx::mad_lo_cc(a[j0], bi, arr[base]);
        arr[base + 1] = ptx::madc_hi_cc(a[j0], bi, arr[base + 1]);
#pragma unroll
        for (int j = j0 + 2; j < N; j += 2) {
            const int k = base + (j - j0);
            arr[k] = ptx::madc_lo_cc(a[j], bi, arr[k]);
            arr[k + 1] = ptx::madc_hi_cc(a[j], bi, arr[k + 1]);
        }
        if (carry_out) arr[base + N] = ptx::addc(arr[base + N], 0);
    }

    // r = a + b without reduction (below 2 MOD < 2^(32N) for reduced a, b).
    __device__ __forceinline__ static void add_plain(const uint32_t a[N], const uint32_t b[N], uint32_t r[N]) {
        r[0] = ptx::add_cc(a[0], b[0]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) r[k] = ptx::addc_cc(a[k], b[k]);
        r[N - 1] = ptx::addc(a[N - 1], b[N - 1]);
    }

    // 2N-limb w += x or w -= x, modulo 2^(64N) (the caller keeps the true
    // value in range).
    __device__ __forceinline__ static void add_wide(uint32_t w[2 * N], const uint32_t x[2 * N]) {
        w[0] = ptx::add_cc(w[0], x[0]);
#pragma unroll
        for (int k = 1; k < 2 * N - 1; k++) w[k] = ptx::addc_cc(w[k], x[k]);
        w[2 * N - 1] = ptx::addc(w[2 * N - 1], x[2 * N - 1]);
    }
    __device__ __forceinline__ static void sub_wide(uint32_t w[2 * N], const uint32_t x[2 * N]) {
        w[0] = ptx::sub_cc(w[0], x[0]);
#pragma unroll
        for (int k = 1; k < 2 * N - 1; k++) w[k] = ptx::subc_cc(w[k], x[k]);
        w[2 * N - 1] = ptx::subc(w[2 * N - 1], x[2 * N - 1]);
    }

    // A reduction row after the first: mul_row's division by 2^32 with
    // m * MOD as the row's products, m chosen to clear the new limb 0.
    __device__ __forceinline__ static void redc_shift_row(uint32_t lo[N], uint32_t hi[N]) {
        const uint32_t m = (lo[0] + hi[1]) * M0;
        mul_row(lo, hi, MOD, m);
    }

    // w = a^2 (2N limbs). Row i's cross products a[i]*a[j] (j > i) land on
    // limb pairs starting at i + j, alternately odd and even positions: the
    // odd ones on `odd` (odd[k] of weight 2^(32(k+1))), the even ones on
    // `even`, two chains over disjoint limbs. Each row reaches one limb
    // higher than the last, in one array or the other: that chain writes its
    // top pair fresh (no addend), and the other chain's carry out, of the
    // same weight, goes into the fresh top limb (hi(x*y) + 1 + 1 < 2^32).
    // Limbs are written before they are read (the twin checks it).
    __device__ __forceinline__ static void square_wide(const uint32_t a[N], uint32_t w[2 * N]) {
        uint32_t even[2 * N], odd[2 * N];
#pragma unroll
        for (int j = 1; j < N; j += 2) {
            odd[j - 1] = a[0] * a[j];
            odd[j] = __umulhi(a[0], a[j]);
        }
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            even[j] = a[0] * a[j];
            even[j + 1] = __umulhi(a[0], a[j]);
        }
#pragma unroll
        for (int i = 1; i < N - 1; i++) {
            if (i % 2 == 0) {
                // N - 1 - i products, an odd count: the odd chain (j = i + 1,
                // i + 3, .., N - 1) tops out fresh at odd[i + N - 2 ..].
                cross_chain(odd, a, i, i + 1, 2 * i, true);
                if (i + 2 < N) {
                    cross_chain(even, a, i, i + 2, 2 * i + 2, false);
                    odd[i + N - 1] = ptx::addc(odd[i + N - 1], 0);
                }
            } else {
                // An even count: the even chain (j = i + 2, .., N - 1) tops
                // out fresh at even[i + N - 1 ..].
                cross_chain(even, a, i, i + 2, 2 * i + 2, true);
                cross_chain(odd, a, i, i + 1, 2 * i, false);
                even[i + N] = ptx::addc(even[i + N], 0);
            }
        }
        // w = even + 2^32 odd: the cross products, below a^2 / 2 < 2^(64N - 1).
        w[1] = odd[0];
        w[2] = ptx::add_cc(even[2], odd[1]);
#pragma unroll
        for (int k = 3; k < 2 * N - 2; k++) w[k] = ptx::addc_cc(even[k], odd[k - 1]);
        w[2 * N - 2] = ptx::addc(odd[2 * N - 3], 0);
        // Doubled, then the squares added on limbs (2k, 2k + 1).
        w[1] = ptx::add_cc(w[1], w[1]);
#pragma unroll
        for (int k = 2; k < 2 * N - 1; k++) w[k] = ptx::addc_cc(w[k], w[k]);
        w[2 * N - 1] = ptx::addc(0, 0);
        w[0] = ptx::mad_lo_cc(a[0], a[0], 0);
        w[1] = ptx::madc_hi_cc(a[0], a[0], w[1]);
#pragma unroll
        for (int k = 1; k < N; k++) {
            w[2 * k] = ptx::madc_lo_cc(a[k], a[k], w[2 * k]);
            w[2 * k + 1] = ptx::madc_hi_cc(a[k], a[k], w[2 * k + 1]);
        }
    }

    // arr[base ..] += a[i] * (a[j0], a[j0 + 2], .., up to a[N - 1]) on limb
    // pairs (base, base + 1), (base + 2, base + 3), ..; with fresh_top the
    // last pair is written, not added to, and nothing carries out of it;
    // otherwise the carry out is left in CC.CF.
    __device__ __forceinline__ static void cross_chain(uint32_t* arr, const uint32_t a[N], int i, int j0, int base,
                                                       bool fresh_top) {
#pragma unroll
        for (int j = j0; j < N; j += 2) {
            const int k = base + (j - j0);
            const bool first = j == j0, last = j + 2 >= N;
            if (fresh_top && last) {
                arr[k] = first ? ptx::mad_lo_cc(a[i], a[j], 0) : ptx::madc_lo_cc(a[i], a[j], 0);
                arr[k + 1] = ptx::madc_hi(a[i], a[j], 0);
            } else {
                arr[k] = first ? ptx::mad_lo_cc(a[i], a[j], arr[k]) : ptx::madc_lo_cc(a[i], a[j], arr[k]);
                arr[k + 1] = ptx::madc_hi_cc(a[i], a[j], arr[k + 1]);
            }
        }
    }

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
