//! GPU multi-scalar multiplication (modules `msm`, `msm_g1`, `msm_g2`)
//! against bellperson's CPU multiexp (ec-gpu-gen's `multiexp_cpu`, as the
//! CPU backend calls it) and, for the large random sizes, blst's multi-exp:
//! edge cases (n = 1, all-zero, all-one, p-1, repeated bases, bases that are
//! each other's negation, the identity among the bases, one giant bucket,
//! sizes that are not powers of two, every window size class, several
//! sorting passes), bellperson's density-filtered A and B layouts, and
//! random sizes up to 2^22 (`CUZK_TEST_LOG2` sets the largest log2 size),
//! and MSMs carried over chunks (a streamed query's buckets summed chunk by
//! chunk, reduced once) with and without densities, and MSMs over bases
//! carrying their window multiples (and those multiples against their CPU
//! twin).
//! Each case runs on G1 and G2. Skips without a GPU; fails instead when
//! `CUZK_REQUIRE_GPU=1`.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::Groth16Error;
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_groth16_cuda::msm::{
    Accumulate, DeviceBases, DeviceDensity, GpuMsm, MsmAffine, MsmConfig,
};
use ec_gpu_gen::multiexp_cpu::{DensityTracker, FullDensity, multiexp_cpu};
use ec_gpu_gen::threadpool::Worker;
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

fn max_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(22)
}

/// The curve-specific parts the tests need, for G1 and G2 alike.
trait TestCurve:
    PrimeCurveAffine<Scalar = Scalar>
    + MsmAffine<Projective = <Self as PrimeCurveAffine>::Curve>
    + Send
    + Sync
{
    const NAME: &'static str;
    /// blst's multi-threaded Pippenger (the fast reference).
    fn blst_multi_exp(points: &[Self::Curve], scalars: &[Scalar]) -> Self::Curve;
}

impl TestCurve for G1Affine {
    const NAME: &'static str = "G1";
    fn blst_multi_exp(points: &[G1Projective], scalars: &[Scalar]) -> G1Projective {
        G1Projective::multi_exp(points, scalars)
    }
}

impl TestCurve for G2Affine {
    const NAME: &'static str = "G2";
    fn blst_multi_exp(points: &[G2Projective], scalars: &[Scalar]) -> G2Projective {
        G2Projective::multi_exp(points, scalars)
    }
}

/// n random points, cheaply: 64 random starts, then repeated additions of
/// a random step, normalised in parallel.
fn random_points<A: TestCurve>(n: usize, rng: &mut ChaCha20Rng) -> Vec<A> {
    let starts: Vec<A::Curve> = (0..64).map(|_| A::Curve::random(&mut *rng)).collect();
    let step = A::Curve::random(&mut *rng);
    let per = n.div_ceil(64).max(1);
    let proj: Vec<A::Curve> = starts
        .par_iter()
        .flat_map_iter(|s| std::iter::successors(Some(*s), move |p| Some(*p + step)).take(per))
        .collect();
    let mut out = vec![A::identity(); proj.len()];
    out.par_chunks_mut(4096)
        .zip(proj.par_chunks(4096))
        .for_each(|(o, p)| A::Curve::batch_normalize(p, o));
    out.truncate(n);
    out
}

fn random_scalars(n: usize, rng: &mut ChaCha20Rng) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// Filecoin-shaped: 35% zeros, 35% ones, the rest random.
fn filecoin_scalars(n: usize, rng: &mut ChaCha20Rng) -> Vec<Scalar> {
    (0..n)
        .map(|_| match rng.gen_range(0..100) {
            0..35 => Scalar::ZERO,
            35..70 => Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

fn reprs(v: &[Scalar]) -> Arc<Vec<[u8; 32]>> {
    Arc::new(v.iter().map(|s| s.to_repr()).collect())
}

/// bellperson's CPU multiexp of `scalars` with the first `scalars.len()`
/// bases. It refuses identity bases ("an identity element in the CRS"), so
/// their terms, which are the identity whatever the scalar, are left out.
fn cpu_msm<A: TestCurve>(bases: &[A], scalars: &[Scalar]) -> A::Curve {
    let (b, s): (Vec<A>, Vec<Scalar>) = bases
        .iter()
        .zip(scalars)
        .filter(|(b, _)| !bool::from(b.is_identity()))
        .map(|(b, s)| (*b, *s))
        .unzip();
    multiexp_cpu::<_, _, A, _>(&Worker::new(), (Arc::new(b), 0), FullDensity, reprs(&s))
        .wait()
        .expect("CPU multiexp")
}

fn tracker(used: &[bool]) -> Arc<DensityTracker> {
    let mut t = DensityTracker::new();
    for (i, u) in used.iter().enumerate() {
        t.add_element();
        if *u {
            t.inc(i);
        }
    }
    Arc::new(t)
}

/// As the CPU backend filters a query: the inputs (with their density, or
/// all of them), then the aux with theirs, each taking bases in order.
fn cpu_dense<A: TestCurve>(
    bases: &[A],
    inputs: &[Scalar],
    input_used: Option<&[bool]>,
    aux: &[Scalar],
    aux_used: &[bool],
) -> A::Curve {
    let worker = Worker::new();
    let bases = Arc::new(bases.to_vec());
    let (i, skip) = match input_used {
        None => (
            multiexp_cpu::<_, _, A, _>(&worker, (bases.clone(), 0), FullDensity, reprs(inputs))
                .wait(),
            inputs.len(),
        ),
        Some(u) => (
            multiexp_cpu::<_, _, A, _>(&worker, (bases.clone(), 0), tracker(u), reprs(inputs))
                .wait(),
            u.iter().filter(|b| **b).count(),
        ),
    };
    let x =
        multiexp_cpu::<_, _, A, _>(&worker, (bases, skip), tracker(aux_used), reprs(aux)).wait();
    i.expect("CPU multiexp") + x.expect("CPU multiexp")
}

fn gpu() -> Arc<Gpu> {
    Gpu::get(0).expect("GPU 0")
}

fn check<A: TestCurve>(
    msm: &GpuMsm,
    what: &str,
    bases: &DeviceBases<A>,
    host_bases: &[A],
    scalars: &[Scalar],
) -> Result<()> {
    let d = msm.gpu().upload(scalars)?;
    let got = msm.msm(bases, &d, None)?;
    let want = cpu_msm(host_bases, scalars);
    assert_eq!(
        got.to_affine(),
        want.to_affine(),
        "{} {what}: n = {}, config {:?}",
        A::NAME,
        scalars.len(),
        msm.config()
    );
    Ok(())
}

/// Every edge case of the issue on one curve, with the default
/// configuration and with forced window sizes and tiny sorting passes.
fn edge_cases<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n = 5000;
    let mut host = random_points::<A>(n, &mut rng);
    // The identity, a repeated base and a base's negation among the others.
    host[10] = A::identity();
    host[12] = host[11];
    host[14] = -host[13];
    let bases = DeviceBases::upload(&gpu, &host)?;
    let p_minus_1 = -Scalar::ONE;

    let configs = [
        MsmConfig::default(),
        MsmConfig {
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Plain,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Prefetch128,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Prefetch,
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::PlainV4,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Prefetch128V4,
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::BatchAffine128,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::BatchAffine256,
            window_bits: Some(7),
            max_entries_per_pass: 3000,
            ..MsmConfig::default()
        },
        MsmConfig {
            merge_fan_log2: 3,
            ..MsmConfig::default()
        },
        MsmConfig {
            merge_fan_log2: 8,
            window_bits: Some(13),
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(2),
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(7),
            max_entries_per_pass: 3000,
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(13),
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(16),
            max_entries_per_pass: 1,
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(21),
            ..MsmConfig::default()
        },
    ];
    for config in configs {
        let msm = GpuMsm::with_config(Arc::clone(&gpu), config);
        let random = random_scalars(n, &mut rng);
        check(&msm, "random", &bases, &host, &random)?;
        check(
            &msm,
            "filecoin-shaped",
            &bases,
            &host,
            &filecoin_scalars(n, &mut rng),
        )?;
        check(&msm, "n = 1", &bases, &host, &random[..1])?;
        check(&msm, "n = 1, scalar 1", &bases, &host, &[Scalar::ONE])?;
        check(&msm, "n = 1, scalar 0", &bases, &host, &[Scalar::ZERO])?;
        check(&msm, "n = 3, p-1", &bases, &host, &[p_minus_1; 3])?;
        check(&msm, "all zero", &bases, &host, &vec![Scalar::ZERO; n])?;
        check(&msm, "all one", &bases, &host, &vec![Scalar::ONE; n])?;
        check(&msm, "all p-1", &bases, &host, &vec![p_minus_1; n])?;
        check(
            &msm,
            "all 3 (one bucket)",
            &bases,
            &host,
            &vec![Scalar::from(3u64); n],
        )?;
        let small: Vec<Scalar> = (0..n)
            .map(|_| Scalar::from(rng.gen_range(0..6u64)))
            .collect();
        check(&msm, "small integers", &bases, &host, &small)?;
        let edges: Vec<Scalar> = (0..n)
            .map(|i| match i % 7 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                2 => p_minus_1,
                3 => -Scalar::from(2u64),
                4 => Scalar::from(2u64).pow_vartime([254]),
                5 => Scalar::from(2u64).pow_vartime([254]) - Scalar::ONE,
                _ => Scalar::random(&mut rng),
            })
            .collect();
        check(&msm, "0, 1, p-1, 2^254 mixed", &bases, &host, &edges)?;
        check(
            &msm,
            "4097 (not a power of two)",
            &bases,
            &host,
            &random[..4097],
        )?;
    }

    // Repeated bases: every point the same, so every bucket adds P + P.
    let same = vec![host[0]; 3000];
    let same_bases = DeviceBases::upload(&gpu, &same)?;
    let msm = GpuMsm::new(Arc::clone(&gpu));
    check(
        &msm,
        "one repeated base, random",
        &same_bases,
        &same,
        &random_scalars(3000, &mut rng),
    )?;
    check(
        &msm,
        "one repeated base, all 5",
        &same_bases,
        &same,
        &vec![Scalar::from(5u64); 3000],
    )?;
    // Bases that are each other's negation, with equal scalars (every pair
    // cancels: P + (-P) in the buckets) and with random ones.
    let mut pairs = random_points::<A>(2000, &mut rng);
    for i in (0..pairs.len()).step_by(2) {
        pairs[i + 1] = -pairs[i];
    }
    let pair_bases = DeviceBases::upload(&gpu, &pairs)?;
    let mut equal = random_scalars(2000, &mut rng);
    for i in (0..equal.len()).step_by(2) {
        equal[i + 1] = equal[i];
    }
    check(
        &msm,
        "negated pairs, equal scalars",
        &pair_bases,
        &pairs,
        &equal,
    )?;
    let d = gpu.upload(&equal)?;
    assert!(
        bool::from(msm.msm(&pair_bases, &d, None)?.is_identity()),
        "{} pairs cancel",
        A::NAME
    );
    check(
        &msm,
        "negated pairs, random",
        &pair_bases,
        &pairs,
        &random_scalars(2000, &mut rng),
    )?;
    // Bases resident across calls of different sizes (scratch shrinking
    // and growing) and fewer scalars than bases.
    for len in [5000, 17, 4999, 1, 2500] {
        check(
            &msm,
            "resident bases",
            &bases,
            &host,
            &filecoin_scalars(len, &mut rng),
        )?;
    }
    Ok(())
}

#[test]
fn g1_edge_cases_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_edge_cases_match_cpu") else {
        return Ok(());
    };
    edge_cases::<G1Affine>(1)
}

#[test]
fn g2_edge_cases_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_edge_cases_match_cpu") else {
        return Ok(());
    };
    edge_cases::<G2Affine>(2)
}

/// bellperson's A and B layouts: scalars are the whole witness (inputs then
/// aux), the density marks what the query has a point for.
fn density_layouts<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let plain = GpuMsm::new(Arc::clone(&gpu));
    let apart = GpuMsm::with_config(
        Arc::clone(&gpu),
        MsmConfig {
            ones_separately: true,
            ..MsmConfig::default()
        },
    );
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for (num_inputs, num_aux) in [(1, 0), (1, 1), (3, 70), (41, 10_000), (328, 200_003)] {
        let inputs = {
            let mut v = filecoin_scalars(num_inputs, &mut rng);
            v[0] = Scalar::ONE; // the ONE input
            v
        };
        let aux = filecoin_scalars(num_aux, &mut rng);
        let witness: Vec<Scalar> = inputs.iter().chain(&aux).copied().collect();
        let d_witness = gpu.upload(&witness)?;
        let aux_used: Vec<bool> = (0..num_aux).map(|_| rng.gen_bool(0.25)).collect();
        let input_used: Vec<bool> = (0..num_inputs).map(|_| rng.gen_bool(0.5)).collect();

        // A: every input, then the aux A uses.
        let a_used: Vec<bool> = std::iter::repeat_n(true, num_inputs)
            .chain(aux_used.iter().copied())
            .collect();
        let a_count = a_used.iter().filter(|b| **b).count();
        let a_bases = random_points::<A>(a_count, &mut rng);
        let want = cpu_dense(&a_bases, &inputs, None, &aux, &aux_used);
        let density = DeviceDensity::upload(&gpu, a_used.iter().copied(), a_used.len())?;
        assert_eq!(density.count(), a_count);
        let d_bases = DeviceBases::upload(&gpu, &a_bases)?;
        for msm in [&plain, &apart] {
            let got = msm.msm(&d_bases, &d_witness, Some(&density))?;
            assert_eq!(
                got.to_affine(),
                want.to_affine(),
                "{} A layout {num_inputs} + {num_aux}",
                A::NAME
            );
        }

        // B: the inputs B uses, then the aux B uses.
        let b_used: Vec<bool> = input_used.iter().chain(&aux_used).copied().collect();
        let b_count = b_used.iter().filter(|b| **b).count();
        let b_bases = random_points::<A>(b_count, &mut rng);
        let want = cpu_dense(&b_bases, &inputs, Some(&input_used), &aux, &aux_used);
        let density = DeviceDensity::upload(&gpu, b_used.iter().copied(), b_used.len())?;
        let d_bases = DeviceBases::upload(&gpu, &b_bases)?;
        for msm in [&plain, &apart] {
            let got = msm.msm(&d_bases, &d_witness, Some(&density))?;
            assert_eq!(
                got.to_affine(),
                want.to_affine(),
                "{} B layout {num_inputs} + {num_aux}",
                A::NAME
            );
        }
    }
    Ok(())
}

#[test]
fn g1_density_layouts_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_density_layouts_match_cpu") else {
        return Ok(());
    };
    density_layouts::<G1Affine>(3)
}

#[test]
fn g2_density_layouts_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_density_layouts_match_cpu") else {
        return Ok(());
    };
    density_layouts::<G2Affine>(4)
}

/// Points in arithmetic progressions, whose MSM has a closed form: chunk c
/// holds start_c + j * step_c for j = 0, 1, ..., so sum_k s_k P_k =
/// sum_c (sum s_k) start_c + (sum j s_k) step_c: two scalar
/// multiplications per chunk instead of a 2^22-point multiexp on the CPU
/// (bellperson's takes about a minute for G2 there).
struct Progressions<A: TestCurve> {
    points: Vec<A>,
    starts: Vec<A::Curve>,
    steps: Vec<A::Curve>,
    per: usize,
}

impl<A: TestCurve> Progressions<A> {
    fn new(n: usize, rng: &mut ChaCha20Rng) -> Self {
        let per = 1 << 14;
        let chunks = n.div_ceil(per);
        let starts: Vec<A::Curve> = (0..chunks).map(|_| A::Curve::random(&mut *rng)).collect();
        let steps: Vec<A::Curve> = (0..chunks).map(|_| A::Curve::random(&mut *rng)).collect();
        let mut points = vec![A::identity(); n];
        points.par_chunks_mut(per).enumerate().for_each(|(c, out)| {
            let proj: Vec<A::Curve> =
                std::iter::successors(Some(starts[c]), |p| Some(*p + steps[c]))
                    .take(out.len())
                    .collect();
            A::Curve::batch_normalize(&proj, out);
        });
        Progressions {
            points,
            starts,
            steps,
            per,
        }
    }

    /// sum_k scalars[k] * points[k].
    fn msm(&self, scalars: &[Scalar]) -> A::Curve {
        scalars
            .par_chunks(self.per)
            .enumerate()
            .map(|(c, s)| {
                let (mut sum, mut weighted, mut j) = (Scalar::ZERO, Scalar::ZERO, Scalar::ZERO);
                for x in s {
                    sum += x;
                    weighted += j * x;
                    j += Scalar::ONE;
                }
                self.starts[c] * sum + self.steps[c] * weighted
            })
            .reduce(A::Curve::identity, |a, b| a + b)
    }
}

/// Random sizes up to 2^max_log2(), random and Filecoin-shaped scalars,
/// against the closed form of [`Progressions`], which bellperson's
/// multiexp and blst's Pippenger confirm at 2^16.
fn random_sizes<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let msm = GpuMsm::new(Arc::clone(&gpu));
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let max = 1usize << max_log2();
    let prog = Progressions::<A>::new(max, &mut rng);
    let bases = DeviceBases::upload(&gpu, &prog.points)?;

    let n = (1 << 16).min(max);
    let s = random_scalars(n, &mut rng);
    let proj: Vec<A::Curve> = prog.points[..n].iter().map(|p| p.to_curve()).collect();
    let closed = prog.msm(&s).to_affine();
    assert_eq!(
        closed,
        cpu_msm(&prog.points, &s).to_affine(),
        "{} closed form vs bellperson",
        A::NAME
    );
    assert_eq!(
        closed,
        A::blst_multi_exp(&proj, &s).to_affine(),
        "{} closed form vs blst",
        A::NAME
    );

    let mut sizes = vec![2, 3, 255, 1023, 65_537, max - 1, max];
    sizes.extend((0..4).map(|_| rng.gen_range(1..=max)));
    sizes.retain(|&s| s <= max);
    for n in sizes {
        for (kind, scalars) in [
            ("random", random_scalars(n, &mut rng)),
            ("filecoin-shaped", filecoin_scalars(n, &mut rng)),
        ] {
            let d = gpu.upload(&scalars)?;
            let got = msm.msm(&bases, &d, None)?;
            assert_eq!(
                got.to_affine(),
                prog.msm(&scalars).to_affine(),
                "{} {kind} n = {n}",
                A::NAME
            );
        }
    }
    Ok(())
}

#[test]
fn g1_random_sizes_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_random_sizes_match_cpu") else {
        return Ok(());
    };
    random_sizes::<G1Affine>(5)
}

#[test]
fn g2_random_sizes_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_random_sizes_match_cpu") else {
        return Ok(());
    };
    random_sizes::<G2Affine>(6)
}

/// One MSM carried over chunks (`GpuMsm::carried`), as a streamed query
/// runs: each chunk's bases and scalars in buffers of their own, the
/// chunk's used variables marked by a density when `dense`. Against the CPU
/// over the whole; the scratch within its bound.
fn carried_chunks<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let big = 1usize << max_log2().min(18);
    let configs = [
        MsmConfig::default(),
        MsmConfig {
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(5),
            max_entries_per_pass: 1 << 10,
            ..MsmConfig::default()
        },
        MsmConfig::for_device_memory(16 << 30),
        MsmConfig {
            accumulate: Accumulate::BatchAffine128,
            merge_fan_log2: 5,
            ..MsmConfig::default()
        },
    ];
    for n in [1usize, 7, 5000, 200_003, big] {
        // Filecoin-shaped, with a stretch of zeros and one of ones (chunks
        // with nothing for Pippenger), and p - 1 at both ends.
        let mut scalars = filecoin_scalars(n, &mut rng);
        if n >= 5000 {
            scalars[n / 4..n / 4 + 1500].fill(Scalar::ZERO);
            scalars[n / 2..n / 2 + 1500].fill(Scalar::ONE);
        }
        scalars[0] = -Scalar::ONE;
        scalars[n - 1] = -Scalar::ONE;
        let used: Vec<bool> = (0..n).map(|i| i == 0 || rng.gen_bool(0.6)).collect();
        let bases = random_points::<A>(n, &mut rng);
        let chunkings: Vec<usize> = match n {
            1 => vec![1],
            7 => vec![1, 3, 7],
            _ => vec![n, n / 3 + 1, 4096],
        };
        for dense in [false, true] {
            let (host_bases, picked): (Vec<A>, Vec<Scalar>) = if dense {
                let count = used.iter().filter(|&&u| u).count();
                let picked = scalars
                    .iter()
                    .zip(&used)
                    .filter(|(_, u)| **u)
                    .map(|(s, _)| *s)
                    .collect();
                (bases[..count].to_vec(), picked)
            } else {
                (bases.clone(), scalars.clone())
            };
            let want = cpu_msm(&host_bases, &picked).to_affine();
            // All scalars at once: chunks with a density read theirs in
            // place (`add_at`), the others from buffers of their own.
            let all_scalars = gpu.upload(&scalars)?;
            for &chunk in &chunkings {
                // Each chunk's device buffers, made before the MSMs.
                let mut parts = Vec::new();
                let mut first_base = 0;
                for lo in (0..n).step_by(chunk) {
                    let len = chunk.min(n - lo);
                    let d_scalars = gpu.upload(&scalars[lo..lo + len])?;
                    let (count, density) = if dense {
                        let u = &used[lo..lo + len];
                        let count = u.iter().filter(|&&u| u).count();
                        (
                            count,
                            Some(DeviceDensity::upload(&gpu, u.iter().copied(), len)?),
                        )
                    } else {
                        (len, None)
                    };
                    // A chunk without a used variable has no bases.
                    let span = match count {
                        0 => &host_bases[..1],
                        _ => &host_bases[first_base..first_base + count],
                    };
                    let d_bases = DeviceBases::upload(&gpu, span)?;
                    first_base += count;
                    parts.push((d_bases, d_scalars, lo, density));
                }
                // Tiny passes (one window each, many per chunk) at small n only.
                for config in configs
                    .iter()
                    .filter(|c| n <= 5000 || c.max_entries_per_pass > 1 << 10)
                {
                    let config = *config;
                    let msm = GpuMsm::with_config(Arc::clone(&gpu), config);
                    let mut carried = msm.carried::<A>(n, n.div_ceil(chunk))?;
                    for (b, s, lo, d) in &parts {
                        match d {
                            Some(d) => carried.add_at(b, &all_scalars, *lo, Some(d))?,
                            None => carried.add(b, s, None)?,
                        }
                    }
                    let got = carried.finish()?.to_affine();
                    assert_eq!(
                        got,
                        want,
                        "{} carried: n = {n}, chunks of {chunk}, dense {dense}, {config:?}",
                        A::NAME
                    );
                    let held = msm.scratch_bytes();
                    let bound = config.scratch_bound(chunk.min(n));
                    assert!(
                        held <= bound,
                        "{} carried: n = {n}, chunks of {chunk}: scratch {held} > bound {bound}",
                        A::NAME
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn g1_carried_chunks_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_carried_chunks_match_cpu") else {
        return Ok(());
    };
    carried_chunks::<G1Affine>(61)
}

#[test]
fn g2_carried_chunks_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_carried_chunks_match_cpu") else {
        return Ok(());
    };
    carried_chunks::<G2Affine>(62)
}

/// Bases with window multiples (`DeviceBases::with_window_multiples`): the
/// multiples equal the CPU twin's (identity, repeated and negated bases
/// among them), and MSMs over them equal the CPU multiexp: every window
/// class, edge scalars, several sorting passes (which then carry into the
/// one set of buckets), ones apart, a density, sizes below the bases'
/// count, and a carried MSM (which reads the plain bases).
fn window_multiples<A: TestCurve>(seed: u64) -> Result<()>
where
    A::Curve: From<A>,
{
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n = 3000;
    let mut host = random_points::<A>(n, &mut rng);
    host[10] = A::identity();
    host[12] = host[11];
    host[14] = -host[13];
    let p_minus_1 = -Scalar::ONE;
    let mut scalar_sets: Vec<(&str, Vec<Scalar>)> = vec![
        ("random", random_scalars(n, &mut rng)),
        ("filecoin", filecoin_scalars(n, &mut rng)),
        ("p-1", vec![p_minus_1; n]),
        ("zeros", vec![Scalar::ZERO; n]),
        ("one scalar", vec![Scalar::from(5u64)]),
        ("fewer than the bases", random_scalars(1234, &mut rng)),
    ];
    scalar_sets.push((
        "small",
        (0..n as u64).map(|i| Scalar::from(i * i + 3)).collect(),
    ));
    for c in [2u32, 7, 13, 22] {
        // Digits at the bucket range's edges in every window below bit 250:
        // 2^(c-1) (the last bucket), 2^(c-1) + 1 (negative, with a carry)
        // and 1 (the first bucket), times the index to vary the top ones.
        let two = Scalar::from(2u64);
        let mut top = Scalar::ZERO;
        let mut low = Scalar::ZERO;
        let mut k = 0u64;
        while u64::from(c) * (k + 1) <= 250 {
            top += two.pow_vartime([u64::from(c) * k + u64::from(c) - 1]);
            low += two.pow_vartime([u64::from(c) * k]);
            k += 1;
        }
        let mut scalar_sets = scalar_sets.clone();
        scalar_sets.push((
            "bucket edges",
            (0..n as u64)
                .map(|i| match i % 3 {
                    0 => top,
                    1 => top + low,
                    _ => low * Scalar::from(i),
                })
                .collect(),
        ));
        let bases = DeviceBases::upload(&gpu, &host)?.with_window_multiples(c)?;
        assert_eq!(bases.len(), n);
        assert_eq!(bases.multiples_window(), Some(c));
        let want_table = cuzk_groth16_cuda::msm::window_multiples_cpu(&host, c);
        let got_table = bases.buffer().download()?;
        assert_eq!(got_table.len(), want_table.len(), "{} c = {c}", A::NAME);
        if let Some(i) = (0..want_table.len()).find(|&i| got_table[i] != want_table[i]) {
            panic!(
                "{} c = {c}: multiple {i} (window {}, base {}) differs from the CPU twin's",
                A::NAME,
                i / n,
                i % n
            );
        }
        let configs = [
            MsmConfig::default(),
            MsmConfig {
                max_entries_per_pass: 2000,
                ones_separately: true,
                ..MsmConfig::default()
            },
            MsmConfig {
                accumulate: Accumulate::Prefetch128,
                max_entries_per_pass: 1,
                ..MsmConfig::default()
            },
            // Passes after the first carry into the buckets.
            MsmConfig {
                accumulate: Accumulate::BatchAffine128,
                max_entries_per_pass: 2000,
                ..MsmConfig::default()
            },
            // One window of 2^(c - 1) buckets, merged 2^4 ranges a launch.
            MsmConfig {
                merge_fan_log2: 4,
                ..MsmConfig::default()
            },
        ];
        for config in configs {
            let msm = GpuMsm::with_config(Arc::clone(&gpu), config);
            for (what, scalars) in &scalar_sets {
                check(
                    &msm,
                    &format!("multiples c = {c}, {what}"),
                    &bases,
                    &host,
                    scalars,
                )?;
            }
        }
        // A density (bellperson's A layout, all inputs then a third of the
        // aux): the used variables take bases 0, 1, 2, ...
        let num = 2500;
        let used: Vec<bool> = (0..num).map(|i| i < 5 || rng.gen_bool(0.33)).collect();
        let witness = filecoin_scalars(num, &mut rng);
        let picked: Vec<Scalar> = witness
            .iter()
            .zip(&used)
            .filter(|(_, u)| **u)
            .map(|(s, _)| *s)
            .collect();
        let density = DeviceDensity::upload(&gpu, used.iter().copied(), num)?;
        let got =
            GpuMsm::new(Arc::clone(&gpu)).msm(&bases, &gpu.upload(&witness)?, Some(&density))?;
        assert_eq!(
            got.to_affine(),
            cpu_msm(&host, &picked).to_affine(),
            "{} multiples c = {c} with a density",
            A::NAME
        );
        // A carried MSM reads the plain bases of the same buffer.
        let scalars = &scalar_sets[1].1;
        let msm = GpuMsm::new(Arc::clone(&gpu));
        let mut carried = msm.carried::<A>(n, 1)?;
        carried.add(&bases, &gpu.upload(scalars)?, None)?;
        assert_eq!(
            carried.finish()?.to_affine(),
            cpu_msm(&host, scalars).to_affine(),
            "{} carried over bases with multiples of c = {c}",
            A::NAME
        );
    }
    // Windows the kernels do not take.
    for c in [0, 1, 25] {
        let err = DeviceBases::upload(&gpu, &host[..4])?
            .with_window_multiples(c)
            .unwrap_err();
        assert!(
            err.to_string().contains(&format!("a window of {c} bits")),
            "{err}"
        );
    }
    Ok(())
}

#[test]
fn g1_window_multiples_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_window_multiples_match_cpu") else {
        return Ok(());
    };
    window_multiples::<G1Affine>(71)
}

#[test]
fn g2_window_multiples_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_window_multiples_match_cpu") else {
        return Ok(());
    };
    window_multiples::<G2Affine>(72)
}

#[test]
fn misuse_is_an_error() -> Result<()> {
    let Some(_) = gpu_or_skip("misuse_is_an_error") else {
        return Ok(());
    };
    let gpu = gpu();
    let msm = GpuMsm::new(Arc::clone(&gpu));
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let host = random_points::<G1Affine>(10, &mut rng);
    let bases = DeviceBases::upload(&gpu, &host)?;
    let host_scalars = random_scalars(11, &mut rng);
    let scalars = gpu.upload(&host_scalars)?;
    let err = msm.g1(&bases, &scalars).unwrap_err();
    assert!(
        matches!(
            err,
            Groth16Error::MsmTooFewBases {
                needed: 11,
                available: 10
            }
        ),
        "{err}"
    );
    // A density longer than the scalars.
    let density = DeviceDensity::upload(&gpu, std::iter::repeat_n(false, 12), 12)?;
    let err = msm.g1_dense(&bases, &scalars, &density).unwrap_err();
    assert!(
        err.to_string().contains("density covers 12 variables"),
        "{err}"
    );
    // A density that uses more variables than there are bases.
    let density = DeviceDensity::upload(&gpu, std::iter::repeat_n(true, 11), 11)?;
    assert!(matches!(
        msm.g1_dense(&bases, &scalars, &density),
        Err(Groth16Error::MsmTooFewBases { .. })
    ));
    // A carried chunk whose scalars would run past the buffer's end, or
    // start past it.
    let density = DeviceDensity::upload(&gpu, std::iter::repeat_n(true, 4), 4)?;
    let mut carried = msm.carried::<G1Affine>(4, 1)?;
    let err = carried
        .add_at(&bases, &scalars, 8, Some(&density))
        .unwrap_err();
    assert!(err.to_string().contains("from 8 on"), "{err}");
    let err = carried
        .add_at(&bases, &scalars, 12, Some(&density))
        .unwrap_err();
    assert!(err.to_string().contains("start at 12"), "{err}");
    // The failed calls added nothing; the last four scalars, in place.
    carried.add_at(&bases, &scalars, 7, Some(&density))?;
    assert_eq!(
        carried.finish()?.to_affine(),
        cpu_msm(&host[..4], &host_scalars[7..]).to_affine()
    );
    // A density iterator that ends early.
    let err = DeviceDensity::upload(&gpu, std::iter::repeat_n(true, 3), 5).unwrap_err();
    assert!(err.to_string().contains("gave only 3"), "{err}");
    // A window the kernels do not take.
    let bad = GpuMsm::with_config(
        Arc::clone(&gpu),
        MsmConfig {
            window_bits: Some(25),
            ..MsmConfig::default()
        },
    );
    assert!(
        bad.g1(&bases, &gpu.upload(&random_scalars(10, &mut rng))?)
            .is_err()
    );
    // Empty inputs are the identity.
    let none = gpu.upload::<Scalar>(&[])?;
    assert!(bool::from(msm.g1(&bases, &none)?.is_identity()));
    Ok(())
}
