// PTX module `spmv`: a = A·w, b = B·w, c = C·w from the device-resident PCE
// (kernels/spmv/spmv.cuh), and the row-by-row check a·b = c.
// crates/groth16-cuda/src/spmv/ lays the matrices out and launches these.
#include "spmv/spmv.cuh"

// One thread per output element: short rows, and the zero padding past the
// rows up to the domain size m.
extern "C" __global__ void spmv_rows_bls12_381(fr_t* out, const uint32_t* row_ptr,
                                               const uint32_t* words, const fr_t* table,
                                               const fr_t* w, uint32_t rows, uint64_t m,
                                               uint32_t short_max) {
    spmv_rows(out, row_ptr, words, table, w, rows, m, short_max);
}

// One warp per listed long row.
extern "C" __global__ void spmv_long_warp_bls12_381(fr_t* out, const uint32_t* row_ptr,
                                                    const uint32_t* words, const fr_t* table,
                                                    const fr_t* w, const uint32_t* list,
                                                    uint32_t n) {
    spmv_long<32>(out, row_ptr, words, table, w, list, n);
}

// One block of 256 threads per listed very long row.
extern "C" __global__ void __launch_bounds__(256)
spmv_long_block_bls12_381(fr_t* out, const uint32_t* row_ptr, const uint32_t* words,
                          const fr_t* table, const fr_t* w, const uint32_t* list, uint32_t n) {
    spmv_long<256>(out, row_ptr, words, table, w, list, n);
}

// The first row i < rows with a[i]·b[i] != c[i], atomically minimised into
// first[0] (which the caller sets to 0xffffffff).
extern "C" __global__ void spmv_check_bls12_381(const fr_t* a, const fr_t* b, const fr_t* c,
                                                uint32_t rows, uint32_t* first) {
    spmv_check(a, b, c, rows, first);
}
