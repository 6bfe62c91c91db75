// Sparse matrix-vector products a = A·w, b = B·w, c = C·w over BLS12-381's
// Fr with the PCE resident in device memory (kernels/spmv.cu holds the entry
// points, crates/groth16-cuda/src/spmv/ lays the matrices out and launches).
//
// Layout of one matrix (built on the host by spmv/layout.rs):
//   row_ptr[rows + 1]  u32 offsets into `words`: row r is
//                      words[row_ptr[r] .. row_ptr[r + 1]]
//   words[]            one 32-bit word per entry, tag in the top 2 bits and a
//                      30-bit payload below:
//                        SPMV_TAG_PLUS   +w[payload]
//                        SPMV_TAG_MINUS  -w[payload]
//                        SPMV_TAG_COEFF  table[k] * w[payload], where k is the
//                                        payload of the next word, which is
//                        SPMV_TAG_CONT   (the coefficient index; contributes
//                                        nothing by itself)
//   table[]            the PCE's coefficient table, Montgomery form.
// Most PoRep entries are +-1, so most take 4 bytes instead of the host's 8.
// Every word can be decoded on its own (a continuation says so), which lets
// a group of threads split a long row at any word.
//
// Rows of at most `short_max` words are summed by one thread each; longer
// rows are listed by the host and summed by a warp (spmv_long<32>) or a
// whole block (spmv_long<blockDim.x>) with a shuffle / shared-memory
// reduction. Field addition is exact, so every order gives the same bytes as
// the CPU's cuzk_synth::spmv.
#pragma once
#include "ff/bls12_381.cuh"

#define SPMV_TAG_SHIFT 30
#define SPMV_PAYLOAD_MASK 0x3fffffffu
#define SPMV_TAG_PLUS 0u
#define SPMV_TAG_MINUS 1u
#define SPMV_TAG_COEFF 2u
#define SPMV_TAG_CONT 3u

// The most threads a block of spmv_long may have (sizes its shared memory).
#define SPMV_MAX_BLOCK 1024

// Field elements are 32 bytes and device buffers are 256-byte aligned, so an
// element is two aligned 16-byte loads through the read-only cache.
__device__ __forceinline__ fr_t spmv_load(const fr_t* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    const uint4 lo = __ldg(q);
    const uint4 hi = __ldg(q + 1);
    fr_t r;
    r.v[0] = lo.x; r.v[1] = lo.y; r.v[2] = lo.z; r.v[3] = lo.w;
    r.v[4] = hi.x; r.v[5] = hi.y; r.v[6] = hi.z; r.v[7] = hi.w;
    return r;
}

__device__ __forceinline__ void spmv_store(fr_t* p, const fr_t& x) {
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    q[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}

// Adds the contribution of words[k] to acc (nothing for a continuation).
__device__ __forceinline__ void spmv_word(fr_t& acc, const uint32_t* words, uint32_t k,
                                          const fr_t* table, const fr_t* w) {
    const uint32_t word = __ldg(words + k);
    const uint32_t tag = word >> SPMV_TAG_SHIFT;
    if (tag == SPMV_TAG_CONT) return;
    const fr_t v = spmv_load(w + (word & SPMV_PAYLOAD_MASK));
    if (tag == SPMV_TAG_PLUS) {
        acc = acc + v;
    } else if (tag == SPMV_TAG_MINUS) {
        acc = acc - v;
    } else {
        const uint32_t coeff = __ldg(words + k + 1) & SPMV_PAYLOAD_MASK;
        acc = acc + spmv_load(table + coeff) * v;
    }
}

// One thread per output element i < m: rows of at most short_max words are
// summed here, rows past the matrix (i >= rows) are the zero padding up to
// the domain size, and longer rows are left to spmv_long.
__device__ __forceinline__ void spmv_rows(fr_t* out, const uint32_t* row_ptr,
                                          const uint32_t* words, const fr_t* table,
                                          const fr_t* w, uint32_t rows, uint64_t m,
                                          uint32_t short_max) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    fr_t acc = fr_t::zero();
    if (i < rows) {
        const uint32_t start = __ldg(row_ptr + i);
        const uint32_t end = __ldg(row_ptr + i + 1);
        if (end - start > short_max) return;
        for (uint32_t k = start; k < end; k++) spmv_word(acc, words, k, table, w);
    }
    spmv_store(out + i, acc);
}

// Sums with all 32 lanes of the warp; lane 0 ends with the warp's total.
__device__ __forceinline__ fr_t spmv_warp_sum(fr_t acc) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        fr_t other;
#pragma unroll
        for (int l = 0; l < 8; l++) other.v[l] = __shfl_down_sync(0xffffffffu, acc.v[l], offset);
        acc = acc + other;
    }
    return acc;
}

// G threads per listed row (G = 32: a warp; G = blockDim.x: the block);
// blockDim.x must be a multiple of G and of 32, at most SPMV_MAX_BLOCK.
// Thread `lane` of a group sums words lane, lane + G, ... of its row.
template <int G>
__device__ __forceinline__ void spmv_long(fr_t* out, const uint32_t* row_ptr,
                                          const uint32_t* words, const fr_t* table,
                                          const fr_t* w, const uint32_t* list, uint32_t n) {
    static_assert(G >= 32 && G <= SPMV_MAX_BLOCK && G % 32 == 0, "G: whole warps");
    const uint32_t group = threadIdx.x / G;
    const uint32_t lane = threadIdx.x % G;
    const uint64_t idx = (uint64_t)blockIdx.x * (blockDim.x / G) + group;
    const bool active = idx < n;
    uint32_t row = 0;
    fr_t acc = fr_t::zero();
    if (active) {
        row = __ldg(list + idx);
        const uint32_t start = __ldg(row_ptr + row);
        const uint32_t end = __ldg(row_ptr + row + 1);
        for (uint32_t k = start + lane; k < end; k += G) spmv_word(acc, words, k, table, w);
    }
    // Every lane reaches the shuffles and the barrier, active or not.
    acc = spmv_warp_sum(acc);
    if (G > 32) {
        __shared__ fr_t partial[SPMV_MAX_BLOCK / 32];
        if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
        __syncthreads();
        if (lane == 0) {
            const uint32_t first = threadIdx.x / 32;
            for (uint32_t j = 1; j < G / 32; j++) acc = acc + partial[first + j];
        }
    }
    if (active && lane == 0) spmv_store(out + row, acc);
}

// first[0] = min(first[0], i) for every row i < rows with a[i]·b[i] != c[i].
__device__ __forceinline__ void spmv_check(const fr_t* a, const fr_t* b, const fr_t* c,
                                           uint32_t rows, uint32_t* first) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    if (spmv_load(a + i) * spmv_load(b + i) != spmv_load(c + i)) atomicMin(first, (uint32_t)i);
}
