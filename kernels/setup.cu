// PTX module `setup`: Groth16 parameter generation's fixed-base scalar
// multiplications (every query point is a scalar times the G1 or G2
// generator) and their conversion to affine coordinates, for G1 and G2; see
// kernels/setup/fixed_base.cuh. The host side is
// crates/groth16-cuda/src/setup/gpu.rs.
//
// Fq multiplications are calls (FF_NOINLINE), as in msm_g2: with them
// inlined, the G2 formulas alone are tens of thousands of PTX lines and the
// driver's JIT takes long, for a few percent of kernel time in a stage that
// is not the bottleneck of a setup (the CPU's QAP evaluation and the file
// write are).
#define FF_NOINLINE
#include "setup/fixed_base.cuh"

SETUP_KERNELS(g1, fq_t)
SETUP_KERNELS(g2, fq2_t)
