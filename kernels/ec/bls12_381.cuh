// BLS12-381's G1 (over Fq) and G2 (over Fq2) in every coordinate system.
#pragma once
#include "../ff/bls12_381.cuh"
#include "curve.cuh"

typedef affine_t<fq_t> g1_affine_t;
typedef jacobian_t<fq_t> g1_jacobian_t;
typedef xyzz_t<fq_t> g1_xyzz_t;
typedef affine_t<fq2_t> g2_affine_t;
typedef jacobian_t<fq2_t> g2_jacobian_t;
typedef xyzz_t<fq2_t> g2_xyzz_t;

static_assert(sizeof(g1_affine_t) == 96, "matches blst_p1_affine");
static_assert(sizeof(g1_jacobian_t) == 144, "matches blst_p1");
static_assert(sizeof(g2_affine_t) == 192, "matches blst_p2_affine");
static_assert(sizeof(g2_jacobian_t) == 288, "matches blst_p2");
