// PTX module `msm`: the scalar passes of the multi-scalar multiplication
// (classification of scalars into 0 / 1 / other, signed-digit windows, the
// counting sort of (bucket, point) pairs), shared by G1 and G2. The curve
// passes are the modules msm_g1 and msm_g2; the host side, and the order in
// which the kernels run, is crates/groth16-cuda/src/msm.rs.
#include "msm/digits.cuh"

extern "C" __global__ void msm_classify_bls12_381(const fr_t* scalars, uint32_t n, const uint64_t* dens_bits,
                                                  const uint32_t* dens_prefix, uint32_t use_density,
                                                  uint32_t ones_separately, uint32_t* counters,
                                                  uint32_t* ones_idx, uint32_t* other_idx, fr_t* other_scalars) {
    msm_classify(scalars, n, dens_bits, dens_prefix, use_density, ones_separately, counters, ones_idx, other_idx,
                 other_scalars);
}

extern "C" __global__ void msm_histogram_bls12_381(const fr_t* scalars, uint32_t m, uint32_t c, uint32_t w0,
                                                   uint32_t w1, uint32_t* counts, uint32_t fold) {
    msm_histogram(scalars, m, c, w0, w1, counts, fold);
}

extern "C" __global__ void msm_scan_reduce_bls12_381(const uint32_t* in, uint32_t n, uint32_t per, uint32_t* sums) {
    msm_scan_reduce(in, n, per, sums);
}

extern "C" __global__ void msm_scan_apply_bls12_381(const uint32_t* in, uint32_t n, uint32_t per,
                                                    const uint32_t* base, uint32_t has_base, uint32_t* out,
                                                    uint32_t* total) {
    msm_scan_apply(in, n, per, base, has_base, out, total);
}

extern "C" __global__ void msm_scatter_bls12_381(const fr_t* scalars, const uint32_t* idx, uint32_t m, uint32_t c,
                                                 uint32_t w0, uint32_t w1, uint32_t* offsets, uint2* entries,
                                                 uint32_t fold_stride) {
    msm_scatter(scalars, idx, m, c, w0, w1, offsets, entries, fold_stride);
}

// msm_scatter with B windows' atomics in flight (kernels/msm/digits.cuh,
// msm_scatter_batched); the host picks B (`MsmConfig::scatter_batch`).
#define MSM_SCATTER_BATCHED(B)                                                                                      \
    extern "C" __global__ void msm_scatter_b##B##_bls12_381(const fr_t* scalars, const uint32_t* idx, uint32_t m,  \
                                                           uint32_t c, uint32_t w0, uint32_t w1, uint32_t* offsets, \
                                                           uint2* entries, uint32_t fold_stride) {                 \
        msm_scatter_batched<B>(scalars, idx, m, c, w0, w1, offsets, entries, fold_stride);                         \
    }
MSM_SCATTER_BATCHED(4)
MSM_SCATTER_BATCHED(8)
MSM_SCATTER_BATCHED(16)
