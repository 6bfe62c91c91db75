// Number-theoretic transforms over BLS12-381's Fr, in passes over device
// memory: the building blocks of the H polynomial (kernels/ntt.cu holds the
// entry points, crates/groth16-cuda/src/ntt/plan.rs decides the passes).
//
// A transform of m = 2^k elements splits the k index bits into groups; one
// kernel launch (a "pass") handles one group [lo, lo + bits): each block loads
// 2^bits "rows" (elements whose indices differ only in those bits) for
// 2^log_cols neighbouring "columns" (consecutive values of the bits below lo,
// so global reads and writes come in runs of 2^log_cols elements), runs
// `bits` radix-2 stages on them in shared memory, and writes them back in
// place (or, with NTT_POST_BITREV_SCALE, to their bit-reversed indices in
// another vector). A 2^26 transform takes three passes (10 + 8 + 8 bits).
//
// Each pass is a plain DFT of size 2^bits (twiddles from a 1024-entry table of
// omega_{2^10} powers) plus one multiplication per element by the "factor"
// w^(col * rev_bits(row)) of the four-step decomposition, with w the 2^hi-th
// root of unity (hi = lo + bits) and col the bits below lo. That is exactly
// the radix-2 Cooley-Tukey twiddle with its column-dependent part pulled out
// of the stages: the same number of multiplications, but the stages only need
// the small table and the factor is one lookup per element per pass.
//
// Orders: DIF (Gentleman-Sande) passes run from the top bit group down and
// turn natural order into bit-reversed order; DIT (Cooley-Tukey) passes run
// from the bottom group up and turn bit-reversed order into natural order.
// The factor multiplies after the stages in a DIF pass and before them in a
// DIT pass. The H computation is iNTT (DIF) -> coset NTT (DIT) -> a*b - c ->
// iNTT (DIF) -> one bit-reversal that also applies the final scaling (a
// launch of its own, or the last pass writing another vector); the
// pointwise step does not care about the order it sees.
//
// Inverse transforms use the same tables: w^-e = w^(2^hi - e).
//
// Field elements are Fr in blst's Montgomery form (fr_t), so device buffers
// hold exactly the bytes of &[blstrs::Scalar].
#pragma once
#include "ff/bls12_381.cuh"

// Threads per block of the pass kernels: a template parameter of each
// entry point (kernels/ntt.cu instantiates 128 and 256, with several
// occupancy bounds), which the host launches with (crates/groth16-cuda/src/ntt,
// NttConfig). With radix-2 stages each thread runs two independent
// butterflies per stage (two multiplication chains in flight); with 256
// threads (74-80 registers, 3 blocks per SM) the passes reach 82-86% of the
// Fr multiplication rate of arith_bench (bench-data/ntt/).

// At most 2^NTT_LOG_BLOCK elements per block: 32 KiB of shared memory for
// 2^10 elements, which leaves room for several blocks per SM. Keep in sync
// with LOG_BLOCK in crates/groth16-cuda/src/ntt/plan.rs.
#define NTT_LOG_BLOCK 10
// The stage twiddles come from a table of omega_{2^NTT_RADIX_LOG}^i; a pass
// has at most NTT_LOG_BLOCK bits, so its stages need roots of order up to
// 2^NTT_LOG_BLOCK.
#define NTT_RADIX_LOG NTT_LOG_BLOCK

// Parameters of one pass; the layout matches `PassParams` in plan.rs.
struct ntt_pass_params {
    uint32_t log_m;     // k: the transform has 2^k elements
    uint32_t lo;        // lowest index bit of this pass
    uint32_t bits;      // number of index bits (stages) of this pass, 1..NTT_LOG_BLOCK
    uint32_t log_cols;  // log2 of the columns per block (bits + log_cols <= NTT_LOG_BLOCK, log_cols <= lo)
    uint32_t inverse;   // 1: the root is omega^-1
    uint32_t pre;       // NTT_PRE_*: what happens to an element as it is loaded
    uint32_t post;      // NTT_POST_*: what happens to an element as it is stored
    uint32_t tw_bits;   // factor exponents are taken mod 2^tw_bits (= lo + bits); 0: no factors (lo == 0)
    uint32_t tw_l;      // a factor is tw_lo[e mod 2^tw_l] * tw_hi[e >> tw_l]
    uint32_t sc_l;      // a post scale is sc_lo[e mod 2^sc_l] * sc_hi[e >> sc_l]
};

// Parameters of the bit-reversal kernel; the layout matches `BitrevParams`.
struct ntt_bitrev_params {
    uint32_t log_m;  // k
    uint32_t scale;  // NTT_SCALE_*
    uint32_t sc_l;   // a scale is sc_lo[e mod 2^sc_l] * sc_hi[e >> sc_l]
};

enum : uint32_t {
    NTT_PRE_NONE = 0,
    NTT_PRE_AB_MINUS_C = 1,  // x = x * b - c (the pointwise step of H, fused into a load)
};
enum : uint32_t {
    NTT_POST_NONE = 0,
    NTT_POST_SCALE_REV = 1,  // x *= scale(rev_k(index)): coset scaling of coefficients in bit-reversed order
    // out[rev_k(index)] = x * scale(rev_k(index)): the last DIF pass writes
    // natural order into another vector, with the bit-reversal's
    // NTT_SCALE_DST scaling (no ntt_bitrev launch after it). The pass must
    // not read `out`: other blocks write anywhere in it.
    NTT_POST_BITREV_SCALE = 2,
};
enum : uint32_t {
    NTT_SCALE_NONE = 0,
    NTT_SCALE_CONST = 1,  // every element times sc_lo[0]
    NTT_SCALE_DST = 2,    // the element landing at index i times scale(i)
    NTT_SCALE_SRC = 3,    // the element leaving index i times scale(i)
};

__device__ __forceinline__ uint32_t ntt_rev(uint32_t x, uint32_t bits) {
    return bits == 0 ? 0 : (__brev(x) >> (32 - bits));
}

// 32-byte elements as two 16-byte accesses (fr_t alone is only 4-byte
// aligned, which would give eight 4-byte accesses). Device buffers of fr_t
// are at least 256-byte aligned, so every element is 32-byte aligned.
__device__ __forceinline__ fr_t ntt_load(const fr_t* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 lo = q[0], hi = q[1];
    fr_t r;
    r.v[0] = lo.x; r.v[1] = lo.y; r.v[2] = lo.z; r.v[3] = lo.w;
    r.v[4] = hi.x; r.v[5] = hi.y; r.v[6] = hi.z; r.v[7] = hi.w;
    return r;
}
__device__ __forceinline__ void ntt_store(fr_t* p, const fr_t& v) {
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(v.v[0], v.v[1], v.v[2], v.v[3]);
    q[1] = make_uint4(v.v[4], v.v[5], v.v[6], v.v[7]);
}

// Shared memory holds elements limb-major (limb j of element i at sm[j][.]),
// so a warp touching consecutive elements reads consecutive words, and each
// element i sits at slot ntt_slot(i, lc): i with its low five bits XORed by
// (i >> 5) << lc. Within 32 aligned elements the XOR is one constant, so
// consecutive accesses stay conflict-free; a warp whose elements are 2^s
// apart (s >= 5, the stage pairs' rows of one j) or whose 2^lc columns come
// with rows that far apart spreads over the banks instead of piling on a
// few. The CPU twin `slot` in plan/cpu_twin.rs is tested to be a
// permutation of each 32-element group.
typedef uint32_t ntt_smem_t[8][1u << NTT_LOG_BLOCK];

// sw: lc, or NTT_NO_SWIZZLE for the plain layout (slot i), which the
// variants without SW use (kept to measure the swizzle and the j-first
// pairs against).
#define NTT_NO_SWIZZLE 0xffu
__device__ __forceinline__ uint32_t ntt_slot(uint32_t i, uint32_t sw) {
    return sw == NTT_NO_SWIZZLE ? i : i ^ (((i >> 5) << sw) & 31u);
}

__device__ __forceinline__ fr_t ntt_sm_load(const ntt_smem_t& sm, uint32_t i, uint32_t sw) {
    const uint32_t s = ntt_slot(i, sw);
    fr_t r;
#pragma unroll
    for (int j = 0; j < 8; j++) r.v[j] = sm[j][s];
    return r;
}
__device__ __forceinline__ void ntt_sm_store(ntt_smem_t& sm, uint32_t i, uint32_t sw, const fr_t& v) {
    const uint32_t s = ntt_slot(i, sw);
#pragma unroll
    for (int j = 0; j < 8; j++) sm[j][s] = v.v[j];
}

// t_lo[e mod 2^l] * t_hi[e >> l]; one lookup when e < 2^l (then t_hi is not
// read and may be a placeholder).
__device__ __forceinline__ fr_t ntt_table_pow(const fr_t* t_lo, const fr_t* t_hi, uint32_t l, uint32_t e) {
    const uint32_t mask = l >= 32 ? 0xffffffffu : (1u << l) - 1;
    fr_t f = ntt_load(t_lo + (e & mask));
    const uint32_t h = l >= 32 ? 0 : e >> l;
    if (h != 0) f = f * ntt_load(t_hi + h);
    return f;
}

// The four-step factor of the element in column `col` (bits below lo) at
// pass row `row`: w^(col * rev_bits(row)) with w of order 2^tw_bits, or its
// inverse. False (and f untouched) when it is 1.
__device__ __forceinline__ bool ntt_factor(const ntt_pass_params& p, const fr_t* tw_lo, const fr_t* tw_hi,
                                           uint32_t col, uint32_t row, fr_t& f) {
    // col < 2^lo and rev < 2^bits, so e < 2^(lo + bits) = 2^tw_bits <= 2^31.
    uint32_t e = col * ntt_rev(row, p.bits);
    if (e == 0) return false;
    if (p.inverse) e = (1u << p.tw_bits) - e;
    f = ntt_table_pow(tw_lo, tw_hi, p.tw_l, e);
    return true;
}

// omega_{2^(st+1)}^j (or its inverse) for a butterfly at stage st (half size
// 2^st), from the table of omega_{2^NTT_RADIX_LOG} powers.
__device__ __forceinline__ fr_t ntt_stage_twiddle(const fr_t* radix, uint32_t j, uint32_t st, uint32_t inverse) {
    uint32_t e = j << (NTT_RADIX_LOG - 1 - st);
    if (inverse) e = ((1u << NTT_RADIX_LOG) - e) & ((1u << NTT_RADIX_LOG) - 1);
    return ntt_load(radix + e);
}

// Shared-memory indices of butterfly q at stage st: the pair of rows that
// differ in row bit st, in column q mod 2^lc; j is the row's bits below st.
__device__ __forceinline__ void ntt_pair(uint32_t q, uint32_t st, uint32_t lc, uint32_t& i0, uint32_t& i1,
                                         uint32_t& j) {
    const uint32_t col = q & ((1u << lc) - 1);
    const uint32_t qq = q >> lc;
    j = qq & ((1u << st) - 1);
    const uint32_t row = ((qq >> st) << (st + 1)) | j;
    i0 = (row << lc) | col;
    i1 = i0 + (1u << (st + lc));
}

// One radix-2 stage over the block's elements in shared memory. Stage 0's
// twiddles are all 1 (a warp-uniform branch skips them); in later stages a
// warp mixes twiddles of 1 with others, so skipping per thread saves nothing.
template <bool DIT, bool SW, uint32_t T>
__device__ __forceinline__ void ntt_stage(ntt_smem_t& sm, const fr_t* radix, uint32_t st, uint32_t lc,
                                          uint32_t butterflies, uint32_t inverse) {
    const uint32_t sw = SW ? lc : NTT_NO_SWIZZLE;
    for (uint32_t q0 = threadIdx.x; q0 < butterflies; q0 += 2 * T) {
        const uint32_t q1 = q0 + T;
        const bool two = q1 < butterflies;
        uint32_t a0, a1, ja, b0 = 0, b1 = 0, jb = 0;
        ntt_pair(q0, st, lc, a0, a1, ja);
        if (two) ntt_pair(q1, st, lc, b0, b1, jb);
        fr_t ua = ntt_sm_load(sm, a0, sw), va = ntt_sm_load(sm, a1, sw);
        fr_t ub = ua, vb = va;
        if (two) {
            ub = ntt_sm_load(sm, b0, sw);
            vb = ntt_sm_load(sm, b1, sw);
        }
        if (DIT) {
            // (u, v) -> (u + v w, u - v w)
            if (st != 0) {
                va = va * ntt_stage_twiddle(radix, ja, st, inverse);
                if (two) vb = vb * ntt_stage_twiddle(radix, jb, st, inverse);
            }
            ntt_sm_store(sm, a0, sw, ua + va);
            ntt_sm_store(sm, a1, sw, ua - va);
            if (two) {
                ntt_sm_store(sm, b0, sw, ub + vb);
                ntt_sm_store(sm, b1, sw, ub - vb);
            }
        } else {
            // (u, v) -> (u + v, (u - v) w)
            fr_t da = ua - va, db = ub - vb;
            if (st != 0) {
                da = da * ntt_stage_twiddle(radix, ja, st, inverse);
                if (two) db = db * ntt_stage_twiddle(radix, jb, st, inverse);
            }
            ntt_sm_store(sm, a0, sw, ua + va);
            ntt_sm_store(sm, a1, sw, da);
            if (two) {
                ntt_sm_store(sm, b0, sw, ub + vb);
                ntt_sm_store(sm, b1, sw, db);
            }
        }
    }
}

// Shared-memory index of the first row of quad q for the stage pair (st,
// st + 1): rows r, r + 2^st, r + 2^(st+1), r + 3 * 2^st in column q mod
// 2^lc, at i0, i0 + h, i0 + 2h, i0 + 3h with h = 2^(st + lc); j is the
// row's bits below st. Quads are numbered column first; then, in the usual
// order, by j and the row bits above st + 1 ("hi"). With ntt_j_major the
// order is hi before j, so each of the 2^st values of j owns a run of
// 2^(bits - 2 - st + lc) consecutive quads: at least a warp's 32 wherever
// the rule holds, and the warps of j = 0, whose twiddles in both stages
// but one are 1, skip those multiplications on a warp-uniform branch. The
// CPU twins are `quad` and `j_major` in plan/cpu_twin.rs.
__device__ __forceinline__ bool ntt_j_major(uint32_t st, uint32_t lc, uint32_t bits) {
    // st >= 1 (at 0 every quad has j = 0 anyway), st + lc <= 4 (beyond it
    // the run's rows pile on fewer banks than the usual order's), and runs
    // of at least 32 quads.
    return st >= 1 && st + lc <= 4 && bits + lc >= st + 7;
}
__device__ __forceinline__ void ntt_quad(uint32_t q, uint32_t st, uint32_t lc, uint32_t bits, bool jm,
                                         uint32_t& i0, uint32_t& j) {
    const uint32_t col = q & ((1u << lc) - 1);
    const uint32_t qq = q >> lc;
    uint32_t hi;
    if (jm && ntt_j_major(st, lc, bits)) {
        const uint32_t hib = bits - 2 - st;
        hi = qq & ((1u << hib) - 1);
        j = qq >> hib;
    } else {
        j = qq & ((1u << st) - 1);
        hi = qq >> st;
    }
    const uint32_t row = (hi << (st + 2)) | j;
    i0 = (row << lc) | col;
}

// Radix-2 stages st and st + 1 in one round trip through shared memory (a
// radix-4 step): each thread takes a quad of rows and does both stages'
// butterflies on it in registers. The same butterflies and twiddles as two
// ntt_stage calls, so the same multiplications (a prime field's radix-4
// butterfly saves none), with half the shared-memory traffic and
// __syncthreads. DIT runs st then st + 1; DIF st + 1 then st. Stage st + 1
// pairs r with r + 2^(st+1) (twiddle index j) and r + 2^st with r + 3 *
// 2^st (index j + 2^st). A quad with j = 0 has twiddles of 1 in stage st
// and in stage st + 1's first pair: those three of its four
// multiplications are skipped. In the pair (0, 1) that is every quad; with
// ntt_j_major it is whole warps at st = 1-3 (the branch is per thread, so
// elsewhere a warp mixing j = 0 with others saves nothing and loses
// nothing).
template <bool DIT, bool SW, uint32_t T>
__device__ __forceinline__ void ntt_stage_pair(ntt_smem_t& sm, const fr_t* radix, uint32_t st, uint32_t lc,
                                               uint32_t bits, uint32_t quads, uint32_t inverse) {
    const uint32_t sw = SW ? lc : NTT_NO_SWIZZLE;
    for (uint32_t q = threadIdx.x; q < quads; q += T) {
        uint32_t i0, j;
        ntt_quad(q, st, lc, bits, SW, i0, j);
        const uint32_t h = 1u << (st + lc);
        fr_t x0 = ntt_sm_load(sm, i0, sw), x1 = ntt_sm_load(sm, i0 + h, sw);
        fr_t x2 = ntt_sm_load(sm, i0 + 2 * h, sw), x3 = ntt_sm_load(sm, i0 + 3 * h, sw);
        const bool tw = j != 0;
        if (DIT) {
            if (tw) {
                const fr_t w = ntt_stage_twiddle(radix, j, st, inverse);
                x1 = x1 * w;
                x3 = x3 * w;
            }
            const fr_t y0 = x0 + x1, y1 = x0 - x1;
            fr_t y2 = x2 + x3;
            if (tw) y2 = y2 * ntt_stage_twiddle(radix, j, st + 1, inverse);
            const fr_t y3 = (x2 - x3) * ntt_stage_twiddle(radix, j + (1u << st), st + 1, inverse);
            ntt_sm_store(sm, i0, sw, y0 + y2);
            ntt_sm_store(sm, i0 + h, sw, y1 + y3);
            ntt_sm_store(sm, i0 + 2 * h, sw, y0 - y2);
            ntt_sm_store(sm, i0 + 3 * h, sw, y1 - y3);
        } else {
            const fr_t y0 = x0 + x2;
            fr_t y2 = x0 - x2;
            if (tw) y2 = y2 * ntt_stage_twiddle(radix, j, st + 1, inverse);
            const fr_t y1 = x1 + x3, y3 = (x1 - x3) * ntt_stage_twiddle(radix, j + (1u << st), st + 1, inverse);
            // The sums first: fewer values live across the last two
            // multiplications.
            ntt_sm_store(sm, i0, sw, y0 + y1);
            ntt_sm_store(sm, i0 + 2 * h, sw, y2 + y3);
            fr_t d0 = y0 - y1, d1 = y2 - y3;
            if (tw) {
                const fr_t w = ntt_stage_twiddle(radix, j, st, inverse);
                d0 = d0 * w;
                d1 = d1 * w;
            }
            ntt_sm_store(sm, i0 + h, sw, d0);
            ntt_sm_store(sm, i0 + 3 * h, sw, d1);
        }
    }
}

// One pass (see the top of this file). Block b handles the columns
// [c0, c0 + 2^log_cols) of the rows with high bits t, where
// b = t * 2^(lo - log_cols) + c0 / 2^log_cols; the element at block row r,
// column c has global index t * 2^(lo + bits) + r * 2^lo + c0 + c.
// With R4 the stages run in pairs (ntt_stage_pair), with a lone stage 0
// when the pass has an odd number of bits (first in DIT, last in DIF; its
// twiddles are 1). T is the block size.
template <bool DIT, bool R4, bool SW, uint32_t T>
__device__ __forceinline__ void ntt_pass(fr_t* x, const fr_t* b, const fr_t* c, const fr_t* radix,
                                         const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* sc_lo,
                                         const fr_t* sc_hi, fr_t* out, const ntt_pass_params& p) {
    __shared__ ntt_smem_t sm;
    const uint32_t lo = p.lo, lc = p.log_cols;
    const uint32_t n = 1u << (p.bits + lc);
    const uint32_t col_mask = (1u << lc) - 1;
    const uint32_t col_blocks_log = lo - lc;
    const uint32_t c0 = (blockIdx.x & ((1u << col_blocks_log) - 1)) << lc;
    const uint32_t base = ((blockIdx.x >> col_blocks_log) << (lo + p.bits)) + c0;

    for (uint32_t l = threadIdx.x; l < n; l += T) {
        const uint32_t row = l >> lc, col = l & col_mask;
        const uint32_t g = base + (row << lo) + col;
        fr_t v = ntt_load(x + g);
        if (p.pre == NTT_PRE_AB_MINUS_C) v = v * ntt_load(b + g) - ntt_load(c + g);
        if (DIT && p.tw_bits != 0) {
            fr_t f;
            if (ntt_factor(p, tw_lo, tw_hi, c0 + col, row, f)) v = v * f;
        }
        ntt_sm_store(sm, l, SW ? lc : NTT_NO_SWIZZLE, v);
    }
    __syncthreads();

    const uint32_t butterflies = n >> 1;
    if (!R4) {
        for (uint32_t i = 0; i < p.bits; i++) {
            const uint32_t st = DIT ? i : p.bits - 1 - i;
            ntt_stage<DIT, SW, T>(sm, radix, st, lc, butterflies, p.inverse);
            __syncthreads();
        }
    } else {
        const uint32_t odd = p.bits & 1;
        if (DIT && odd) {
            ntt_stage<DIT, SW, T>(sm, radix, 0, lc, butterflies, p.inverse);
            __syncthreads();
        }
        for (uint32_t i = 0; i + 1 < p.bits; i += 2) {
            const uint32_t st = DIT ? odd + i : p.bits - 2 - i;
            ntt_stage_pair<DIT, SW, T>(sm, radix, st, lc, p.bits, n >> 2, p.inverse);
            __syncthreads();
        }
        if (!DIT && odd) {
            ntt_stage<DIT, SW, T>(sm, radix, 0, lc, butterflies, p.inverse);
            __syncthreads();
        }
    }

    for (uint32_t l = threadIdx.x; l < n; l += T) {
        const uint32_t row = l >> lc, col = l & col_mask;
        const uint32_t g = base + (row << lo) + col;
        fr_t v = ntt_sm_load(sm, l, SW ? lc : NTT_NO_SWIZZLE);
        if (!DIT && p.tw_bits != 0) {
            fr_t f;
            if (ntt_factor(p, tw_lo, tw_hi, c0 + col, row, f)) v = v * f;
        }
        if (p.post == NTT_POST_SCALE_REV) v = v * ntt_table_pow(sc_lo, sc_hi, p.sc_l, ntt_rev(g, p.log_m));
        if (p.post == NTT_POST_BITREV_SCALE) {
            const uint32_t i = ntt_rev(g, p.log_m);
            ntt_store(out + i, v * ntt_table_pow(sc_lo, sc_hi, p.sc_l, i));
        } else {
            ntt_store(x + g, v);
        }
    }
}

// In-place bit-reversal permutation with an optional scaling: thread i swaps
// elements i and rev(i) when i < rev(i). Each access is one whole 32-byte
// sector, so the scattered side wastes no fetched bytes; still, the scattered
// side makes it the slowest pass per byte: 7.6 ms at 2^26 (3% of H), H200.
__device__ __forceinline__ void ntt_bitrev(fr_t* x, const fr_t* sc_lo, const fr_t* sc_hi,
                                           const ntt_bitrev_params& p) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << p.log_m)) return;
    const uint32_t r = ntt_rev(i, p.log_m);
    if (i > r) return;
    fr_t xi = ntt_load(x + i), xr = ntt_load(x + r);
    if (p.scale == NTT_SCALE_CONST) {
        const fr_t s = ntt_load(sc_lo);
        xi = xi * s;
        xr = xr * s;
    } else if (p.scale == NTT_SCALE_DST || p.scale == NTT_SCALE_SRC) {
        // DST: the value moving to i is scaled by f(i); SRC: by f(r), its
        // old index. Swapping the operands first keeps one code path. When
        // i == r both are the same element and both modes scale it by f(i).
        if (p.scale == NTT_SCALE_SRC && r != i) {
            const fr_t t = xi;
            xi = xr;
            xr = t;
        }
        xr = xr * ntt_table_pow(sc_lo, sc_hi, p.sc_l, i);
        if (r != i) xi = xi * ntt_table_pow(sc_lo, sc_hi, p.sc_l, r);
        if (p.scale == NTT_SCALE_SRC && r != i) {
            const fr_t t = xi;
            xi = xr;
            xr = t;
        }
    }
    ntt_store(x + i, xr);
    if (r != i) ntt_store(x + r, xi);
}

enum : uint32_t {
    NTT_POINTWISE_MUL = 0,  // x = x * y
    NTT_POINTWISE_SUB = 1,  // x = x - y
};

// x[i] = x[i] op y[i] for i < n: H's pointwise step a*b - c when a, b and c
// are not on the device at once (HCoset of each, then these two).
__device__ __forceinline__ void ntt_pointwise(fr_t* x, const fr_t* y, uint32_t n, uint32_t op) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const fr_t a = ntt_load(x + i), b = ntt_load(y + i);
    ntt_store(x + i, op == NTT_POINTWISE_SUB ? a - b : a * b);
}
