// PTX module `msm_g2`: the curve passes of the multi-scalar multiplication
// over BLS12-381's G2; see kernels/msm/pippenger.cuh.
//
// Fq multiplications are calls here (FF_NOINLINE): an Fq2 point formula
// inlined is 50-90k lines of PTX (three Fq multiplications per Fq2 one),
// which made this module about 13 MB and its JIT minutes long. A call costs
// a few dozen instructions against the ~1,800 of an inlined multiplication.
#define FF_NOINLINE
#include "msm/pippenger.cuh"

MSM_CURVE_KERNELS(g2, fq2_t)
