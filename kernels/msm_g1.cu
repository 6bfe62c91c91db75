// PTX module `msm_g1`: the curve passes of the multi-scalar multiplication
// over BLS12-381's G1 (bucket accumulation in XYZZ, sums of bases, bucket
// reduction); see kernels/msm/pippenger.cuh. Field multiplications are
// inlined into each point formula, and each formula is emitted once.
#include "msm/pippenger.cuh"

MSM_CURVE_KERNELS(g1, fq_t)
