// PTX module `ntt`: the NTT passes and the bit-reversal of kernels/ntt/ntt.cuh
// for BLS12-381's Fr. crates/groth16-cuda/src/ntt/ plans and launches them.
//
// Multiplication stays inlined (FF_NOINLINE is not defined): these kernels
// are bound by field multiplications, and each entry point instantiates the
// multiplication only a few times, so the PTX stays small.
#include "ntt/ntt.cuh"

// The pass entry points of one variant: ntt_dif_pass<suffix>_bls12_381 (a
// DIF pass: natural order in, bit-reversed out across the whole transform)
// and ntt_dit_pass<suffix>_bls12_381 (bit-reversed in, natural out). b and
// c are read only when p.pre == NTT_PRE_AB_MINUS_C, out is written only when
// p.post == NTT_POST_BITREV_SCALE; tables that a mode does not use may be any
// valid pointer. R4: stages in pairs; SW: the swizzled shared-memory slots
// and j-first stage pairs (ntt_slot, ntt_j_major); T: threads per block;
// MINB: blocks per SM the register allocation must allow (0: none).
#define NTT_PASS_KERNELS(SUFFIX, R4, SW, T, MINB)                                                                  \
    extern "C" __global__ void __launch_bounds__(T, MINB)                                                      \
        ntt_dif_pass##SUFFIX##_bls12_381(fr_t* x, const fr_t* b, const fr_t* c, const fr_t* radix,            \
                                         const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* sc_lo,             \
                                         const fr_t* sc_hi, fr_t* out, ntt_pass_params p) {                   \
        ntt_pass<false, R4, SW, T>(x, b, c, radix, tw_lo, tw_hi, sc_lo, sc_hi, out, p);                           \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(T, MINB)                                                      \
        ntt_dit_pass##SUFFIX##_bls12_381(fr_t* x, const fr_t* b, const fr_t* c, const fr_t* radix,            \
                                         const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* sc_lo,             \
                                         const fr_t* sc_hi, fr_t* out, ntt_pass_params p) {                   \
        ntt_pass<true, R4, SW, T>(x, b, c, radix, tw_lo, tw_hi, sc_lo, sc_hi, out, p);                            \
    }

// The variants the host can pick (NttConfig::stages / threads in
// crates/groth16-cuda/src/ntt; the measured default has no suffix).
NTT_PASS_KERNELS(, false, false, 256, 1)
NTT_PASS_KERNELS(_r2_t128, false, false, 128, 6)
NTT_PASS_KERNELS(_r2_t256_b4, false, false, 256, 4)
NTT_PASS_KERNELS(_r4_t256, true, true, 256, 1)
NTT_PASS_KERNELS(_r4_t256_b3, true, true, 256, 3)
NTT_PASS_KERNELS(_r4_t128_b6, true, true, 128, 6)
NTT_PASS_KERNELS(_r4_t128_b6_plain, true, false, 128, 6)
NTT_PASS_KERNELS(_r4_t256_b4, true, true, 256, 4)

// Bit-reversal permutation of 2^p.log_m elements in place, with an optional
// scaling (NTT_SCALE_*); one thread per index, any block size.
extern "C" __global__ void ntt_bitrev_bls12_381(fr_t* x, const fr_t* sc_lo, const fr_t* sc_hi,
                                                ntt_bitrev_params p) {
    ntt_bitrev(x, sc_lo, sc_hi, p);
}

// x[i] = x[i] * y[i] (op NTT_POINTWISE_MUL) or x[i] - y[i] (NTT_POINTWISE_SUB)
// for i < n; one thread per index, any block size.
extern "C" __global__ void ntt_pointwise_bls12_381(fr_t* x, const fr_t* y, uint32_t n, uint32_t op) {
    ntt_pointwise(x, y, n, op);
}
