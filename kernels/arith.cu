// PTX module `arith`: element-wise field and curve operations, for testing
// every operation against blstrs. The
// production stages (NTT, MSM) instantiate the same headers in their own
// modules.
// Multiplications are called, not inlined, to keep this many-formula module
// small; throughput is measured in `arith_bench` with everything inlined.
#define FF_NOINLINE
#include "ec/bls12_381.cuh"

// Field operation codes (keep in sync with groth16-cuda's arith tests).
enum field_op : uint32_t {
    F_ADD = 0, F_SUB = 1, F_NEG = 2, F_MUL = 3, F_SQR = 4,
    F_TO_MONT = 5, F_FROM_MONT = 6, F_INV = 7, F_DBL = 8,
};

template <class F>
__device__ __forceinline__ void field_apply(uint32_t op, const F* a, const F* b, F* out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    F x = a[i], y = b[i], r;
    switch (op) {
        case F_ADD: r = x + y; break;
        case F_SUB: r = x - y; break;
        case F_NEG: r = -x; break;
        case F_MUL: r = x * y; break;
        case F_SQR: r = x.sqr(); break;
        case F_TO_MONT: r = x.to_mont(); break;
        case F_FROM_MONT: r = x.from_mont(); break;
        case F_INV: r = x.inv(); break;
        case F_DBL: r = x.dbl(); break;
        default: r = F::zero(); break;
    }
    out[i] = r;
}

// Fq2 has no Montgomery conversion of its own.
__device__ __forceinline__ void fq2_apply(uint32_t op, const fq2_t* a, const fq2_t* b, fq2_t* out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fq2_t x = a[i], y = b[i], r;
    switch (op) {
        case F_ADD: r = x + y; break;
        case F_SUB: r = x - y; break;
        case F_NEG: r = -x; break;
        case F_MUL: r = x * y; break;
        case F_SQR: r = x.sqr(); break;
        case F_INV: r = x.inv(); break;
        case F_DBL: r = x.dbl(); break;
        default: r = fq2_t::zero(); break;
    }
    out[i] = r;
}

extern "C" __global__ void arith_fr_bls12_381(uint32_t op, const fr_t* a, const fr_t* b, fr_t* out, uint32_t n) {
    field_apply(op, a, b, out, n);
}
extern "C" __global__ void arith_fq_bls12_381(uint32_t op, const fq_t* a, const fq_t* b, fq_t* out, uint32_t n) {
    field_apply(op, a, b, out, n);
}
extern "C" __global__ void arith_fq2_bls12_381(uint32_t op, const fq2_t* a, const fq2_t* b, fq2_t* out, uint32_t n) {
    fq2_apply(op, a, b, out, n);
}

// Curve operation codes; every result is returned in Jacobian coordinates
// (blst's projective layout). "2a" means a doubled first, which gives the
// operand a Z (or ZZ, ZZZ) other than 1.
enum curve_op : uint32_t {
    J_ADD = 0,          // J(a) + J(b)
    J_ADD_DOUBLED = 1,  // 2a + 2b, both Jacobian with Z != 1
    J_MADD = 2,         // J(a) + affine b
    J_MADD_DOUBLED = 3, // 2a + affine b
    J_DBL = 4,          // 2a
    X_ADD = 5,          // X(a) + X(b)
    X_ADD_DOUBLED = 6,  // 2a + 2b in XYZZ
    X_MADD = 7,         // X(a) + affine b
    X_MADD_DOUBLED = 8, // 2a + affine b in XYZZ
    X_DBL = 9,          // 2a in XYZZ
    X_MDBL = 10,        // 2a from affine a in XYZZ
};

template <class F>
__device__ __forceinline__ void curve_apply(uint32_t op, const affine_t<F>* a, const affine_t<F>* b,
                                            jacobian_t<F>* out, uint32_t n) {
    typedef jacobian_t<F> J;
    typedef xyzz_t<F> X;
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    affine_t<F> p = a[i], q = b[i];
    J r;
    switch (op) {
        case J_ADD: r = J::from_affine(p).add(J::from_affine(q)); break;
        case J_ADD_DOUBLED: r = J::from_affine(p).dbl().add(J::from_affine(q).dbl()); break;
        case J_MADD: r = J::from_affine(p).add(q); break;
        case J_MADD_DOUBLED: r = J::from_affine(p).dbl().add(q); break;
        case J_DBL: r = J::from_affine(p).dbl(); break;
        case X_ADD: r = X::from_affine(p).add(X::from_affine(q)).to_jacobian(); break;
        case X_ADD_DOUBLED: r = X::from_affine(p).dbl().add(X::from_affine(q).dbl()).to_jacobian(); break;
        case X_MADD: r = X::from_affine(p).add(q).to_jacobian(); break;
        case X_MADD_DOUBLED: r = X::from_affine(p).dbl().add(q).to_jacobian(); break;
        case X_DBL: r = X::from_affine(p).dbl().to_jacobian(); break;
        case X_MDBL: r = X::dbl(p).to_jacobian(); break;
        default: r = J::inf(); break;
    }
    out[i] = r;
}

extern "C" __global__ void arith_g1_bls12_381(uint32_t op, const g1_affine_t* a, const g1_affine_t* b,
                                              g1_jacobian_t* out, uint32_t n) {
    curve_apply(op, a, b, out, n);
}
extern "C" __global__ void arith_g2_bls12_381(uint32_t op, const g2_affine_t* a, const g2_affine_t* b,
                                              g2_jacobian_t* out, uint32_t n) {
    curve_apply(op, a, b, out, n);
}

