//! Every field and curve operation of the CUDA kernels (module `arith`)
//! against blstrs: edge cases (0, 1, p-1, values at 2^k boundaries, the
//! identity, P + (-P), P + P through the addition formula) and random inputs
//! (2^20 each by default; `CUZK_TEST_LOG2` sets the log2 count). Skips
//! without a GPU; fails instead when `CUZK_REQUIRE_GPU=1`.

use std::sync::Arc;

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::cuda::{DeviceElem, DeviceModule, Gpu, grid_1d};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

// Operation codes of kernels/arith.cu.
/// The test-only module of element-wise field and curve kernels.
const ARITH: DeviceModule = cuzk_groth16_cuda::fatbin_module!("arith");

const F_ADD: u32 = 0;
const F_SUB: u32 = 1;
const F_NEG: u32 = 2;
const F_MUL: u32 = 3;
const F_SQR: u32 = 4;
const F_TO_MONT: u32 = 5;
const F_FROM_MONT: u32 = 6;
const F_INV: u32 = 7;
const F_DBL: u32 = 8;

fn random_count() -> usize {
    let log2 = std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(20);
    1 << log2
}

/// Runs `kernel(op, a, b, out, n)` from module `arith` with one element per
/// input element.
fn launch<I: DeviceElem, O: DeviceElem>(
    gpu: &Arc<Gpu>,
    kernel: &str,
    op: u32,
    a: &[I],
    b: &[I],
) -> Vec<O> {
    launch_n(gpu, kernel, op, a, b, a.len(), a.len())
}

/// Runs `kernel(op, a, b, out, n)` for `n` kernel elements with `out_len`
/// output elements of type O (for conversions between limb vectors and field
/// elements, where one element is several u64).
fn launch_n<I: DeviceElem, O: DeviceElem>(
    gpu: &Arc<Gpu>,
    kernel: &str,
    op: u32,
    a: &[I],
    b: &[I],
    out_len: usize,
    n: usize,
) -> Vec<O> {
    assert_eq!(a.len(), b.len());
    let k = gpu.kernel_in(&ARITH, kernel).unwrap();
    let da = gpu.upload(a).unwrap();
    let db = gpu.upload(b).unwrap();
    let mut out = gpu.alloc_zeros::<O>(out_len).unwrap();
    let n = n as u32;
    // SAFETY: every arith kernel is (uint32_t op, const T* a, const T* b,
    // U* out, uint32_t n) with T and U of the sizes of I and O; all buffers
    // hold n elements and the kernel touches index i only when i < n.
    unsafe {
        k.args()
            .arg(&op)
            .buf(&da)
            .buf(&db)
            .buf_mut(&mut out)
            .arg(&n)
            .launch(grid_1d(n as usize, 128).unwrap())
            .unwrap();
    }
    out.download().unwrap()
}

fn check<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
    inputs: impl Fn(usize) -> String,
) {
    assert_eq!(got.len(), want.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: element {i} differs: got {:?}, want {:?}; inputs {}",
            got[i],
            want[i],
            inputs(i)
        );
    }
}

/// Edge values of a prime field: 0, 1, 2, p-1, p-2, (p±1)/2, and 2^k, 2^k - 1
/// for k across the limb boundaries.
fn field_edges<F: PrimeField>() -> Vec<F> {
    let two = F::from(2);
    let half = two.invert().unwrap();
    let mut v = vec![
        F::ZERO,
        F::ONE,
        two,
        -F::ONE,
        -two,
        half,
        half - F::ONE,
        half + F::ONE,
    ];
    let mut pow = F::ONE;
    for k in 0..F::NUM_BITS {
        if k % 16 == 0 || k % 32 == 31 || k + 2 >= F::NUM_BITS {
            v.push(pow);
            v.push(pow - F::ONE);
            v.push(-pow);
        }
        pow = pow.double();
    }
    v
}

/// All ordered pairs of edges, then `random_count()` random pairs.
fn field_pairs<F: PrimeField>(rng: &mut ChaCha20Rng) -> (Vec<F>, Vec<F>) {
    edge_pairs(field_edges::<F>(), rng)
}

/// All ordered pairs of `edges`, then `random_count()` random pairs.
fn edge_pairs<F: Field>(edges: Vec<F>, rng: &mut ChaCha20Rng) -> (Vec<F>, Vec<F>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in &edges {
        for y in &edges {
            a.push(*x);
            b.push(*y);
        }
    }
    for _ in 0..random_count() {
        a.push(F::random(&mut *rng));
        b.push(F::random(&mut *rng));
    }
    (a, b)
}

fn field_ops<F: Field + DeviceElem + Send + Sync>(gpu: &Arc<Gpu>, kernel: &str, a: &[F], b: &[F]) {
    let show = |i: usize| format!("a = {:?}, b = {:?}", a[i], b[i]);
    type Op<F> = fn(&F, &F) -> F;
    let ops: [(u32, &str, Op<F>); 7] = [
        (F_ADD, "add", |x, y| *x + y),
        (F_SUB, "sub", |x, y| *x - y),
        (F_NEG, "neg", |x, _| -*x),
        (F_MUL, "mul", |x, y| *x * y),
        (F_SQR, "sqr", |x, _| x.square()),
        (F_DBL, "dbl", |x, _| x.double()),
        (F_INV, "inv", |x, _| x.invert().unwrap_or(F::ZERO)),
    ];
    for (op, name, f) in ops {
        let n = a.len();
        let got: Vec<F> = launch(gpu, kernel, op, &a[..n], &b[..n]);
        let want: Vec<F> = (0..n).into_par_iter().map(|i| f(&a[i], &b[i])).collect();
        check(&format!("{kernel} {name}"), &got, &want, show);
    }
}

#[test]
fn fr_matches_blstrs() {
    let Some(_) = gpu_or_skip("fr_matches_blstrs") else {
        return;
    };
    let gpu = Gpu::get(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let (a, b) = field_pairs::<Scalar>(&mut rng);
    field_ops(&gpu, "arith_fr_bls12_381", &a, &b);

    // Montgomery conversions: canonical limbs in, Montgomery form out, and back.
    let canonical: Vec<u64> = a
        .iter()
        .flat_map(|x| {
            x.to_bytes_le()
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    let zeros = vec![0u64; canonical.len()];
    let n = a.len();
    let got: Vec<Scalar> = launch_n(
        &gpu,
        "arith_fr_bls12_381",
        F_TO_MONT,
        &canonical,
        &zeros,
        n,
        n,
    );
    check("fr to_mont", &got, &a, |i| format!("{:?}", a[i]));
    let got: Vec<u64> = launch_n(&gpu, "arith_fr_bls12_381", F_FROM_MONT, &a, &b, 4 * n, n);
    check("fr from_mont", &got, &canonical, |i| {
        format!("limb {i} of {:?}", a[i / 4])
    });
}

#[test]
fn fq_matches_blstrs() {
    let Some(_) = gpu_or_skip("fq_matches_blstrs") else {
        return;
    };
    let gpu = Gpu::get(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let (a, b) = fp_pairs(&mut rng);
    field_ops(&gpu, "arith_fq_bls12_381", &a, &b);
    let canonical: Vec<u64> = a
        .iter()
        .flat_map(|x| {
            x.to_bytes_le()
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    let zeros = vec![0u64; canonical.len()];
    let n = a.len();
    let got: Vec<Fp> = launch_n(
        &gpu,
        "arith_fq_bls12_381",
        F_TO_MONT,
        &canonical,
        &zeros,
        n,
        n,
    );
    check("fq to_mont", &got, &a, |i| format!("{:?}", a[i]));
    let got: Vec<u64> = launch_n(&gpu, "arith_fq_bls12_381", F_FROM_MONT, &a, &b, 6 * n, n);
    check("fq from_mont", &got, &canonical, |i| {
        format!("limb {i} of {:?}", a[i / 6])
    });
}

/// Fp is not a PrimeField in blstrs 0.7; its edges are built by hand.
fn fp_pairs(rng: &mut ChaCha20Rng) -> (Vec<Fp>, Vec<Fp>) {
    edge_pairs(fp_edges(), rng)
}

/// 0, 1, 2, -1, -2, 1/2 and neighbours, powers of two and their neighbours.
fn fp_edges() -> Vec<Fp> {
    let two = Fp::from(2u64);
    let half = two.invert().unwrap();
    let mut edges = vec![
        Fp::ZERO,
        Fp::ONE,
        two,
        -Fp::ONE,
        -two,
        half,
        half - Fp::ONE,
        half + Fp::ONE,
    ];
    let mut pow = Fp::ONE;
    for k in 0..381 {
        if k % 16 == 0 || k % 32 == 31 || k >= 379 {
            edges.extend([pow, pow - Fp::ONE, -pow]);
        }
        pow = pow.double();
    }
    edges
}

#[test]
fn fq2_matches_blstrs() {
    let Some(_) = gpu_or_skip("fq2_matches_blstrs") else {
        return;
    };
    let gpu = Gpu::get(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let (fa, fb) = fp_pairs(&mut rng);
    // Pair edge Fp values into Fq2 elements, and add random ones.
    let mut a: Vec<Fp2> = fa.chunks_exact(2).map(|c| Fp2::new(c[0], c[1])).collect();
    let mut b: Vec<Fp2> = fb.chunks_exact(2).map(|c| Fp2::new(c[0], c[1])).collect();
    a.push(Fp2::new(Fp::ZERO, Fp::ONE));
    b.push(Fp2::new(Fp::ZERO, -Fp::ONE));
    // Mixed edge components, for the lazy multiplication's sums at their
    // extremes: (x, y) * (y, x), and a0 = 0 with a1 b1 near p^2 (the most
    // negative a0 b0 - a1 b1).
    let edges = fp_edges();
    for x in &edges {
        for y in &edges {
            a.push(Fp2::new(*x, *y));
            b.push(Fp2::new(*y, *x));
            a.push(Fp2::new(Fp::ZERO, *x));
            b.push(Fp2::new(*y, *y));
        }
    }
    field_ops(&gpu, "arith_fq2_bls12_381", &a, &b);
}

// Curve operation codes of kernels/arith.cu; results come back Jacobian.
const CURVE_OPS: [(u32, &str); 11] = [
    (0, "jacobian a+b"),
    (1, "jacobian 2a+2b"),
    (2, "jacobian a+affine b"),
    (3, "jacobian 2a+affine b"),
    (4, "jacobian 2a"),
    (5, "xyzz a+b"),
    (6, "xyzz 2a+2b"),
    (7, "xyzz a+affine b"),
    (8, "xyzz 2a+affine b"),
    (9, "xyzz 2a"),
    (10, "xyzz 2a from affine"),
];

fn curve_expected<P: Group>(op: u32, a: P, b: P) -> P {
    match op {
        0 | 2 | 5 | 7 => a + b,
        1 | 6 => a.double() + b.double(),
        3 | 8 => a.double() + b,
        _ => a.double(),
    }
}

/// Edge pairs (identity on either side, P + P, P + (-P), 2P + (-2P), 2P + 2P)
/// and `random_count()` random pairs, as projective points.
fn curve_pairs<P: Group + Send + Sync>(rng: &mut ChaCha20Rng) -> (Vec<P>, Vec<P>) {
    let p = P::random(&mut *rng);
    let q = P::random(&mut *rng);
    let id = P::identity();
    let mut a = vec![id, p, id, p, p, p, p, p, q];
    let mut b = vec![p, id, id, p, -p, -p.double(), p.double(), q, -q];
    // Random points cheaply: a few random starts, then repeated additions.
    let starts: Vec<P> = (0..64).map(|_| P::random(&mut *rng)).collect();
    let step = P::random(&mut *rng);
    let per = random_count().div_ceil(starts.len());
    let walk = |s: &P| {
        let mut v = Vec::with_capacity(per);
        let mut x = *s;
        for _ in 0..per {
            v.push(x);
            x += step;
        }
        v
    };
    let ra: Vec<P> = starts.par_iter().flat_map_iter(walk).collect();
    let rb: Vec<P> = starts.par_iter().rev().flat_map_iter(walk).collect();
    a.extend(ra.into_iter().take(random_count()));
    b.extend(rb.into_iter().take(random_count()));
    (a, b)
}

fn to_affine<P: Curve + Send + Sync>(v: &[P]) -> Vec<P::AffineRepr>
where
    P::AffineRepr: Send + Default + Clone,
{
    let mut out = vec![P::AffineRepr::default(); v.len()];
    out.par_chunks_mut(4096)
        .zip(v.par_chunks(4096))
        .for_each(|(o, p)| P::batch_normalize(p, o));
    out
}

#[test]
fn g1_matches_blstrs() {
    let Some(_) = gpu_or_skip("g1_matches_blstrs") else {
        return;
    };
    let gpu = Gpu::get(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let (a, b) = curve_pairs::<G1Projective>(&mut rng);
    let (aa, ba): (Vec<G1Affine>, Vec<G1Affine>) = (to_affine(&a), to_affine(&b));
    assert!(
        bool::from(aa[0].is_identity()),
        "identity maps to blst's (0, 0)"
    );
    for (op, name) in CURVE_OPS {
        let got: Vec<G1Projective> = launch(&gpu, "arith_g1_bls12_381", op, &aa, &ba);
        let want: Vec<G1Projective> = (0..a.len())
            .into_par_iter()
            .map(|i| curve_expected(op, a[i], b[i]))
            .collect();
        check(&format!("g1 {name}"), &got, &want, |i| {
            format!("a = {:?}, b = {:?}", aa[i], ba[i])
        });
    }
}

#[test]
fn g2_matches_blstrs() {
    let Some(_) = gpu_or_skip("g2_matches_blstrs") else {
        return;
    };
    let gpu = Gpu::get(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let (a, b) = curve_pairs::<G2Projective>(&mut rng);
    let (aa, ba): (Vec<G2Affine>, Vec<G2Affine>) = (to_affine(&a), to_affine(&b));
    for (op, name) in CURVE_OPS {
        let got: Vec<G2Projective> = launch(&gpu, "arith_g2_bls12_381", op, &aa, &ba);
        let want: Vec<G2Projective> = (0..a.len())
            .into_par_iter()
            .map(|i| curve_expected(op, a[i], b[i]))
            .collect();
        check(&format!("g2 {name}"), &got, &want, |i| {
            format!("a = {:?}, b = {:?}", aa[i], ba[i])
        });
    }
}
