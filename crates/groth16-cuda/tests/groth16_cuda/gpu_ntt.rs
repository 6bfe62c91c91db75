//! The GPU NTT (module `ntt`, `cuzk_groth16_cuda::ntt`) against its CPU
//! references, bit for bit: the H polynomial against `cpu::compute_h` for
//! every domain from 2^1 to 2^24 (`CUZK_TEST_LOG2` lowers or raises the top)
//! and once at the size above that top with fresh data, for
//! lengths that are not powers of two, and on edge data; `fft`, `ifft`,
//! `coset_fft`, `icoset_fft` against bellperson's `EvaluationDomain`; the
//! device-resident and the overlapped-upload entry points; every pass
//! kernel variant, with split and single factor tables; and the errors
//! for sizes it cannot take. Skips without a GPU; fails instead when
//! `CUZK_REQUIRE_GPU=1`.

use std::sync::Arc;

use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::{
    Groth16Error,
    cpu::compute_h,
    cuda::Gpu,
    ntt::{GpuNtt, NttConfig, PassKernel, TableLayout, Upload, upload_padded_through},
};
use cuzk_pinned_pool::{Pool, PoolConfig, Request};
use ec_gpu_gen::threadpool::Worker;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// The largest log2 of the every-size sweep (default 24).
fn top_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(24)
}

fn setup(name: &str) -> Option<GpuNtt> {
    gpu_or_skip(name)?;
    let gpu = Gpu::get(0).expect("the GPU that gpu_or_skip found");
    Some(GpuNtt::new(gpu))
}

/// n pseudo-random field elements, generated in parallel chunks (2^26 of
/// them would take seconds one after another).
fn random(n: usize, seed: u64) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 14;
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| {
        let mut rng =
            ChaCha20Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9).wrapping_add(i as u64));
        for x in chunk {
            *x = Scalar::random(&mut rng);
        }
    });
    v
}

fn first_difference(got: &[Scalar], want: &[Scalar]) -> Option<usize> {
    if got.len() != want.len() {
        return Some(got.len().min(want.len()));
    }
    got.par_iter()
        .zip(want.par_iter())
        .position_first(|(g, w)| g != w)
}

/// h by the three-buffer path and by the two-buffer one (a, b, c to the
/// coset one at a time, the pointwise step apart, uploads on a second
/// stream), both against the CPU.
fn check_h(ntt: &GpuNtt, what: &str, a: &[Scalar], b: &[Scalar], c: &[Scalar]) {
    let want = compute_h(a, b, c).unwrap();
    let got = ntt.compute_h_host(a, b, c).unwrap();
    assert_eq!(got.len(), want.len(), "{what}: length of h");
    if let Some(i) = first_difference(&got, &want) {
        panic!(
            "{what}: h[{i}] differs: got {:?}, want {:?}",
            got[i], want[i]
        );
    }
    let log2 = a.len().next_power_of_two().trailing_zeros();
    let copy = ntt.gpu().cuda_context().new_stream().unwrap();
    let h = ntt.compute_h_two_buffers(a, b, c, log2, &copy).unwrap();
    let mut got = h.download().unwrap();
    assert_eq!(got.len(), 1 << log2, "{what}: two buffers' length");
    got.truncate(want.len());
    if let Some(i) = first_difference(&got, &want) {
        panic!(
            "{what}: two buffers: h[{i}] differs: got {:?}, want {:?}",
            got[i], want[i]
        );
    }
    // The same from pageable vectors through two page-locked bounce
    // buffers of about an eighth of a vector each (a on the GPU's stream,
    // b and c on the copy stream), as the prover uploads pageable a/b/c.
    let pool = Pool::pinned(0, PoolConfig::unbounded()).unwrap();
    let piece = (size_of_val(a) / 8).max(size_of::<Scalar>());
    let upload = |stream: &Arc<cudarc::driver::CudaStream>,
                  dst: &mut cuzk_groth16_cuda::cuda::DeviceBuffer<Scalar>,
                  src: &[Scalar]| {
        let mut bounce = [
            pool.lease(Request::bytes(piece)).unwrap(),
            pool.lease(Request::bytes(piece)).unwrap(),
        ];
        upload_padded_through(stream, dst, src, &mut bounce, |d, s| d.copy_from_slice(s))
    };
    let h = ntt
        .compute_h_two_buffers_with(a, b, c, log2, &copy, &upload)
        .unwrap();
    let mut got = h.download().unwrap();
    got.truncate(want.len());
    if let Some(i) = first_difference(&got, &want) {
        panic!(
            "{what}: two buffers through bounce buffers: h[{i}] differs: got {:?}, want {:?}",
            got[i], want[i]
        );
    }
    // Three vectors (c's copy under b's transforms), with plain copies and
    // through the bounce buffers.
    let plain =
        |stream: &Arc<cudarc::driver::CudaStream>,
         dst: &mut cuzk_groth16_cuda::cuda::DeviceBuffer<Scalar>,
         src: &[Scalar]| { cuzk_groth16_cuda::ntt::upload_padded_on(stream, dst, src) };
    let uploads: [(&cuzk_groth16_cuda::ntt::HostUpload<'_>, &str); 2] =
        [(&plain, "plain copies"), (&upload, "bounce buffers")];
    for (up, how) in uploads {
        let h = ntt
            .compute_h_three_buffers_with(a, b, c, log2, &copy, up)
            .unwrap();
        let mut got = h.download().unwrap();
        assert_eq!(got.len(), 1 << log2, "{what}: three buffers' length");
        got.truncate(want.len());
        if let Some(i) = first_difference(&got, &want) {
            panic!(
                "{what}: three buffers, {how}: h[{i}] differs: got {:?}, want {:?}",
                got[i], want[i]
            );
        }
    }
}

#[test]
fn h_matches_cpu_for_every_power_of_two() {
    let Some(ntt) = setup("h_matches_cpu_for_every_power_of_two") else {
        return;
    };
    for log2 in 1..=top_log2().min(24) {
        let m = 1usize << log2;
        let seed = u64::from(log2) * 3;
        let (a, b, c) = (random(m, seed), random(m, seed + 1), random(m, seed + 2));
        check_h(&ntt, &format!("2^{log2} random"), &a, &b, &c);
    }
}

/// Every pass kernel variant (radix-2 and stage pairs, each block size)
/// with small and with whole tables, with and without the fused
/// bit-reversal: H (both entry points) on sizes with one, two and three
/// passes of odd and even bits (the layouts differ from 2^19 up, and at
/// every size in H's scalings) and on edge data (zeros, ones, p - 1), and
/// the four transforms against bellperson.
#[test]
fn every_pass_kernel_and_table_layout_gives_the_cpu_results() {
    let Some(ntt) = setup("every_pass_kernel_and_table_layout_gives_the_cpu_results") else {
        return;
    };
    let gpu = Arc::clone(ntt.gpu());
    for pass_kernel in PassKernel::ALL {
        for (tables, fused_bitrev) in [
            (TableLayout::SMALL, false),
            (TableLayout::WHOLE, false),
            (TableLayout::SMALL, true),
            (TableLayout::WHOLE, true),
            (TableLayout::WHOLE_FACTORS, true),
            (TableLayout::WHOLE_SCALES, true),
        ] {
            let config = NttConfig {
                pass_kernel,
                tables,
                fused_bitrev,
            };
            let ntt = GpuNtt::with_config(Arc::clone(&gpu), config);
            for log2 in [1u32, 2, 5, 10, 11, 17, 19, 20, 21] {
                let m = 1usize << log2;
                let seed = 1000 + u64::from(log2);
                let (a, b, c) = (random(m, seed), random(m, seed + 1), random(m, seed + 2));
                check_h(&ntt, &format!("{config:?}, 2^{log2}"), &a, &b, &c);
            }
            let m = 1usize << 12;
            let minus_one = -Scalar::ONE;
            let edge: Vec<Scalar> = (0..m)
                .map(|i| match i % 3 {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    _ => minus_one,
                })
                .collect();
            let (b, c) = (
                vec![minus_one; m],
                edge.iter().rev().copied().collect::<Vec<_>>(),
            );
            check_h(&ntt, &format!("{config:?}, 2^12 edge"), &edge, &b, &c);
            // Device-resident (compute_h hands back the buffers so h is in a).
            let log2 = 19;
            let m = 1usize << log2;
            let (ha, hb, hc) = (random(m, 77), random(m, 78), random(m, 79));
            let want = compute_h(&ha, &hb, &hc).unwrap();
            let (mut da, mut db, mut dc) = (
                gpu.upload(&ha).unwrap(),
                gpu.upload(&hb).unwrap(),
                gpu.upload(&hc).unwrap(),
            );
            ntt.compute_h(&mut da, &mut db, &mut dc, log2).unwrap();
            let got = da.download().unwrap();
            if let Some(i) = first_difference(&got[..m - 1], &want) {
                panic!("{config:?}: compute_h at 2^{log2}: h[{i}] differs");
            }
            check_transforms(&ntt, &format!("{config:?}"), [3, 11, 19, 20]);
        }
    }
}

/// fft, ifft, coset_fft and icoset_fft of random data at 2^log2 for each
/// of `sizes`, against bellperson's EvaluationDomain.
fn check_transforms(ntt: &GpuNtt, what: &str, sizes: impl IntoIterator<Item = u32>) {
    let gpu: &Arc<Gpu> = ntt.gpu();
    let worker = Worker::new();
    type Step = fn(&mut EvaluationDomain<Scalar>, &Worker);
    let ops: [(&str, Step); 4] = [
        ("fft", |d, w| d.fft(w, &mut None).unwrap()),
        ("ifft", |d, w| d.ifft(w, &mut None).unwrap()),
        ("coset_fft", |d, w| d.coset_fft(w, &mut None).unwrap()),
        ("icoset_fft", |d, w| d.icoset_fft(w, &mut None).unwrap()),
    ];
    for log2 in sizes {
        let m = 1usize << log2;
        let x = random(m, 500 + u64::from(log2));
        for (name, step) in ops {
            let mut want = EvaluationDomain::from_coeffs(x.clone()).unwrap();
            step(&mut want, &worker);
            let mut buf = gpu.upload(&x).unwrap();
            match name {
                "fft" => ntt.fft(&mut buf, log2),
                "ifft" => ntt.ifft(&mut buf, log2),
                "coset_fft" => ntt.coset_fft(&mut buf, log2),
                _ => ntt.icoset_fft(&mut buf, log2),
            }
            .unwrap();
            let got = buf.download().unwrap();
            if let Some(i) = first_difference(&got, want.as_ref()) {
                panic!("{what}: {name} at 2^{log2}: element {i} differs");
            }
        }
    }
}

#[test]
fn h_matches_cpu_when_n_is_not_a_power_of_two() {
    let Some(ntt) = setup("h_matches_cpu_when_n_is_not_a_power_of_two") else {
        return;
    };
    for n in [0usize, 1, 3, 5, 1000, 1025, 65_537, 5_000_001] {
        let seed = 1000 + n as u64;
        let (a, b, c) = (random(n, seed), random(n, seed + 1), random(n, seed + 2));
        check_h(&ntt, &format!("n = {n}"), &a, &b, &c);
    }
}

#[test]
fn h_matches_cpu_on_edge_data() {
    let Some(ntt) = setup("h_matches_cpu_on_edge_data") else {
        return;
    };
    for log2 in [1u32, 4, 10, 11, 17, 20] {
        let m = 1usize << log2;
        let zeros = vec![Scalar::ZERO; m];
        let ones = vec![Scalar::ONE; m];
        let minus_ones = vec![-Scalar::ONE; m];
        let r = random(m, 77);
        check_h(&ntt, &format!("2^{log2} zeros"), &zeros, &zeros, &zeros);
        check_h(&ntt, &format!("2^{log2} a = 1"), &ones, &r, &zeros);
        check_h(
            &ntt,
            &format!("2^{log2} a = b = c = 1"),
            &ones,
            &ones,
            &ones,
        );
        check_h(
            &ntt,
            &format!("2^{log2} -1"),
            &minus_ones,
            &minus_ones,
            &ones,
        );
        // A satisfied system (a*b = c pointwise): h is the quotient of a
        // polynomial identity, the case proofs actually have.
        let c: Vec<Scalar> = r.iter().zip(&ones).map(|(x, y)| x * y).collect();
        check_h(&ntt, &format!("2^{log2} a*b = c"), &r, &ones, &c);
    }
}

#[test]
fn transforms_match_bellperson() {
    let Some(ntt) = setup("transforms_match_bellperson") else {
        return;
    };
    check_transforms(&ntt, "default", (0..=12).chain([15, 18, 19, 20, 21]));
}

/// The device-resident entry point, and the host entry point with both
/// upload modes from pinned memory, give the same h.
#[test]
fn device_and_overlapped_entry_points_agree() {
    let Some(ntt) = setup("device_and_overlapped_entry_points_agree") else {
        return;
    };
    let gpu = Arc::clone(ntt.gpu());
    let pool = Pool::pinned(gpu.ordinal(), PoolConfig::unbounded()).unwrap();
    // The default, and stage pairs with whole tables and the fused
    // bit-reversal (h computed into the second buffer).
    let fused = GpuNtt::with_config(
        Arc::clone(&gpu),
        NttConfig {
            pass_kernel: PassKernel::Radix4T256B3,
            tables: TableLayout::WHOLE,
            fused_bitrev: true,
        },
    );
    for ((log2, n), ntt) in [(3u32, 8usize), (16, 60_000), (22, 1 << 22)]
        .into_iter()
        .flat_map(|size| [(size, &ntt), (size, &fused)])
    {
        let m = 1usize << log2;
        let (a, b, c) = (random(n, 1), random(n, 2), random(n, 3));
        let want = compute_h(&a, &b, &c).unwrap();
        assert_eq!(want.len(), m - 1);

        let pad = |v: &[Scalar]| {
            let mut p = v.to_vec();
            p.resize(m, Scalar::ZERO);
            p
        };
        let (mut da, mut db, mut dc) = (
            gpu.upload(&pad(&a)).unwrap(),
            gpu.upload(&pad(&b)).unwrap(),
            gpu.upload(&pad(&c)).unwrap(),
        );
        ntt.compute_h(&mut da, &mut db, &mut dc, log2).unwrap();
        let got = da.download().unwrap();
        assert!(
            first_difference(&got[..m - 1], &want).is_none(),
            "device API at 2^{log2}, {:?}",
            ntt.config()
        );

        let lease = |v: &[Scalar]| {
            let l = pool
                .lease(Request::elems::<Scalar>(v.len().max(1)))
                .unwrap();
            // SAFETY: Scalar is four u64 limbs: no padding, no pointers, and
            // any bytes are a value (it is only compared, never trusted).
            let mut t = unsafe { l.into_typed_unchecked::<Scalar>() }.unwrap();
            t[..v.len()].copy_from_slice(v);
            t
        };
        let (pa, pb, pc) = (lease(&a), lease(&b), lease(&c));
        let mut out = lease(&vec![Scalar::ZERO; m - 1]);
        let mut bufs = ntt.alloc_h_buffers(log2).unwrap();
        for upload in [Upload::Serial, Upload::Overlapped, Upload::Overlapped] {
            out.fill(Scalar::ONE);
            ntt.compute_h_from_host(
                &pa[..n],
                &pb[..n],
                &pc[..n],
                &mut out[..m - 1],
                &mut bufs,
                upload,
            )
            .unwrap();
            assert!(
                first_difference(&out[..m - 1], &want).is_none(),
                "{upload:?} at 2^{log2}, n = {n}, {:?}",
                ntt.config()
            );
        }
    }
}

/// One transform a size above the every-size sweep (2^25 by default; with
/// `CUZK_TEST_LOG2=K`, 2^(K+1)), with fresh data: the largest size is
/// always checked once, whatever the sweep's top.
#[test]
fn h_matches_cpu_at_a_size_above_the_sweep() {
    let Some(ntt) = setup("h_matches_cpu_at_a_size_above_the_sweep") else {
        return;
    };
    let log2 = top_log2() + 1;
    let m = 1usize << log2;
    let (a, b, c) = (random(m, 9001), random(m, 9002), random(m, 9003));
    check_h(&ntt, &format!("2^{log2} random"), &a, &b, &c);
}

#[test]
fn refuses_sizes_it_cannot_take() {
    let Some(ntt) = setup("refuses_sizes_it_cannot_take") else {
        return;
    };
    let gpu = Arc::clone(ntt.gpu());
    let mut a = gpu.alloc_zeros::<Scalar>(8).unwrap();
    let mut b = gpu.alloc_zeros::<Scalar>(8).unwrap();
    let mut c7 = gpu.alloc_zeros::<Scalar>(7).unwrap();
    let err = ntt.compute_h(&mut a, &mut b, &mut c7, 3).unwrap_err();
    assert!(matches!(err, Groth16Error::NttSize { .. }), "{err}");
    assert!(err.to_string().contains("c holds 7 elements"), "{err}");
    let err = ntt.fft(&mut a, 4).unwrap_err();
    assert!(err.to_string().contains("holds 8 elements"), "{err}");
    let err = ntt.fft(&mut a, 40).unwrap_err();
    assert!(err.to_string().contains("up to 2^31"), "{err}");
    let err = ntt
        .compute_h_host(&[Scalar::ONE; 3], &[Scalar::ONE; 2], &[Scalar::ONE; 3])
        .unwrap_err();
    assert!(
        err.to_string().contains("b has length 2, expected 3"),
        "{err}"
    );
    let mut bufs = ntt.alloc_h_buffers(2).unwrap();
    let mut out = [Scalar::ZERO; 3];
    let five = [Scalar::ONE; 5];
    let err = ntt
        .compute_h_from_host(&five, &five, &five, &mut out, &mut bufs, Upload::Serial)
        .unwrap_err();
    assert!(err.to_string().contains("n <= m"), "{err}");
}
