// PTX module `arith_bench`: throughput of field multiplication and XYZZ mixed
// addition, with everything inlined as the production kernels have it.
#include "ec/bls12_381.cuh"

// Throughput: each thread runs `iters` dependent multiplications x = x * y
// (two independent chains to hide latency) and writes x back so the work is
// not optimised away. Multiplications done: 2 * iters * n.
template <class F>
__device__ __forceinline__ void bench_mul(F* data, uint32_t iters, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    F x = data[i], y = data[(i + 1) % n], z = data[(i + 2) % n];
    for (uint32_t k = 0; k < iters; k++) {
        x = x * y;
        z = z * y;
    }
    data[i] = x + z;
}

// The same with squarings x = x^2 (kernels/ff/mont.cuh's sqr).
template <class F>
__device__ __forceinline__ void bench_sqr(F* data, uint32_t iters, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    F x = data[i], z = data[(i + 1) % n];
    for (uint32_t k = 0; k < iters; k++) {
        x = x.sqr();
        z = z.sqr();
    }
    data[i] = x + z;
}

extern "C" __global__ void arith_bench_sqr_fr_bls12_381(fr_t* data, uint32_t iters, uint32_t n) {
    bench_sqr(data, iters, n);
}
extern "C" __global__ void arith_bench_sqr_fq_bls12_381(fq_t* data, uint32_t iters, uint32_t n) {
    bench_sqr(data, iters, n);
}

extern "C" __global__ void arith_bench_mul_fr_bls12_381(fr_t* data, uint32_t iters, uint32_t n) {
    bench_mul(data, iters, n);
}
extern "C" __global__ void arith_bench_mul_fq_bls12_381(fq_t* data, uint32_t iters, uint32_t n) {
    bench_mul(data, iters, n);
}

// Throughput of XYZZ mixed addition: each thread accumulates `iters` affine
// points (from a small table that stays in cache) into one XYZZ point.
// Additions done: iters * n.
extern "C" __global__ void arith_bench_madd_g1_bls12_381(const g1_affine_t* table, uint32_t table_len,
                                                         g1_jacobian_t* out, uint32_t iters, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    g1_xyzz_t acc = g1_xyzz_t::from_affine(table[i % table_len]);
    for (uint32_t k = 0; k < iters; k++) acc = acc.add(table[(i + k + 1) % table_len]);
    out[i] = acc.to_jacobian();
}
