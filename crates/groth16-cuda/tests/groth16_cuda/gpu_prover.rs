//! The CUDA backend against bellperson's `create_proof`: byte-identical
//! proofs that verify, for every built-in circuit family (two sizes each)
//! plus larger PoRep-shaped and mul-chain circuits (2^`CUZK_TEST_LOG2`
//! constraints, default 2^16), with real parameters. Also the CPU backend on
//! the same inputs, so CPU and GPU are twins. Skips without a GPU.

use bellperson::groth16::{
    Parameters, Proof, create_proof, generate_random_parameters, prepare_verifying_key,
    verify_proof,
};
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::msm::{multiples_window_bits, windows};
use cuzk_groth16_cuda::ntt::{NttConfig, PassKernel, TableLayout};
use cuzk_groth16_cuda::{
    AbcInput, Bls12, CpuProver, GpuOptions, GpuProver, Groth16Error, ParamsPlacement, Prover,
    ProverInput, Query, ResidentQueries, StageTimings, Staging, assemble,
};
use cuzk_synth::circuits::{CircuitSpec, all_test_specs};
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::sync::Arc;

/// The tests of this binary share one device in one process: the one that
/// asks the driver for more memory than the card has holds this for writing,
/// every other test for reading, so none allocates while the driver is
/// refusing it (on the H200 a 192-byte allocation of another test failed
/// while it ran).
static DEVICE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    DEVICE.read().unwrap_or_else(|p| p.into_inner())
}

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

fn large_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

/// An NTT unlike the default in every choice (radix-2 stages, whole
/// tables, the separate bit-reversal launch): what some provers below run
/// in place of the default (stage pairs, small tables, fused).
const NTT_NOT_DEFAULT: NttConfig = NttConfig {
    pass_kernel: PassKernel::Radix2,
    tables: TableLayout::WHOLE,
    fused_bitrev: false,
};
#[test]
fn gpu_proofs_are_byte_identical_to_bellperson() {
    let _device = shared();
    let Some(_) = gpu_or_skip("gpu_proofs_are_byte_identical_to_bellperson") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0xD00D);
    let k = large_log2();
    let mut specs = all_test_specs();
    specs.push(format!("porep:{k}").parse::<CircuitSpec>().unwrap());
    specs.push(format!("mul-chain:{k}").parse::<CircuitSpec>().unwrap());
    for spec in &specs {
        let start = std::time::Instant::now();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let pce = Pce::record(spec.build(0)).unwrap();
        for (k, seed) in [1u64, 2, 3].into_iter().enumerate() {
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let theirs = create_proof(spec.build(seed), &params, r, s).unwrap();
            let witness = Witness::synthesize(spec.build(seed)).unwrap();
            let abc = cuzk_synth::evaluate(&pce, &witness).unwrap();
            let input = ProverInput {
                pce: &pce,
                witness: &witness,
                abc: if k == 0 {
                    AbcInput::FromPce
                } else {
                    AbcInput::Evaluated {
                        a: &abc.a,
                        b: &abc.b,
                        c: &abc.c,
                    }
                },
            };
            let ours = gpu.prove(input, &params, r, s).unwrap();
            assert_eq!(
                bytes(&ours.proof),
                bytes(&theirs),
                "{spec}: GPU proof {k} differs"
            );
            assert!(verify_proof(&pvk, &ours.proof, witness.public_inputs()).unwrap());
            if k == 0 {
                let cpu = CpuProver.prove(input, &params, r, s).unwrap();
                assert_eq!(
                    bytes(&cpu.proof),
                    bytes(&ours.proof),
                    "{spec}: CPU and GPU differ"
                );
            }
        }
        eprintln!("{spec}: 3 GPU proofs identical ({:.1?})", start.elapsed());
    }
}

#[test]
fn gpu_refuses_mismatched_parameters() {
    let _device = shared();
    let Some(_) = gpu_or_skip("gpu_refuses_mismatched_parameters") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let spec: CircuitSpec = "mul-chain:6".parse().unwrap();
    let other: CircuitSpec = "mul-chain:7".parse().unwrap();
    let params: Parameters<Bls12> = generate_random_parameters(other.build(0), &mut rng).unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let witness = Witness::synthesize(spec.build(1)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    let err = gpu
        .prove(input, &params, Scalar::ONE, Scalar::ONE)
        .unwrap_err();
    assert!(
        err.to_string().contains("do not match the circuit"),
        "{err}"
    );
}

/// Parameters streamed chunk by chunk from host memory give the same bytes
/// as resident ones: chunks far smaller than the queries, so every MSM runs
/// over many chunks, some with no used variable, and chunks larger than the
/// queries (one chunk per query, each copied under the previous query's
/// MSM, H's under the NTTs); from page-locked memory (the next chunk copied
/// under the current one's MSM) and from pageable memory. The page-locked
/// host copy is let go with the set.
#[test]
fn streamed_parameters_give_the_same_proofs() {
    let _device = shared();
    let Some(_) = gpu_or_skip("streamed_parameters_give_the_same_proofs") else {
        return;
    };
    let streamed = |pin_streamed, chunk| {
        GpuProver::with_options(
            0,
            GpuOptions {
                params: ParamsPlacement::Streamed,
                stream_chunk: Some(chunk),
                pin_streamed,
                // Uploads through bounce buffers of 4 KiB (every staged
                // vector of these circuits takes several pieces) and
                // pageable ones.
                bounce_bytes: pin_streamed.then_some(4096),
                // Both ways of ordering the work.
                stream_per_worker: pin_streamed,
                // Also covers a/b/c from the PCE on the CPU.
                gpu_abc: false,
                memory_limit: None,
                staging: Staging::Device,
                window_multiples: false,
                // An NTT other than the default in whole proofs too (the
                // pinned prover): radix-2, whole tables, the launch.
                ntt: if pin_streamed {
                    NTT_NOT_DEFAULT
                } else {
                    NttConfig::default()
                },
            },
        )
        .unwrap()
    };
    let (pinned, pageable) = (streamed(true, 300), streamed(false, 300));
    // Pageable: the pinned prover has page-locked the sets already (the
    // driver registers a range once).
    let whole = streamed(false, 1 << 20);
    let resident = GpuProver::with_options(
        0,
        GpuOptions {
            params: ParamsPlacement::Resident,
            ..GpuOptions::default()
        },
    )
    .unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0x57EA);
    for spec in ["porep:12", "no-aux:5", "repeated-vars:8", "many-inputs:9"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let witness = Witness::synthesize(spec.build(7)).unwrap();
        let input = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let theirs = create_proof(spec.build(7), &params, r, s).unwrap();
        for (prover, what) in [
            (&pinned, "pinned"),
            (&pageable, "pageable"),
            (&whole, "pageable, one chunk per query"),
        ] {
            // Twice: the second proof reuses the page-locked set.
            for round in 0..2 {
                let a = prover.prove(input, &params, r, s).unwrap();
                assert_eq!(
                    bytes(&a.proof),
                    bytes(&theirs),
                    "{spec}: streamed ({what}, proof {round}) differs"
                );
                assert!(
                    a.timings.0.iter().any(|(s, _)| s.contains("streamed")),
                    "{spec}: the streamed prover did not stream: {:?}",
                    a.timings.0
                );
                let copies = a.timings.overlapped();
                assert!(
                    copies.iter().any(|(s, _, note)| *s == "streamed h2d"
                        && note.contains(if what.starts_with("pinned") {
                            "page-locked"
                        } else {
                            "pageable"
                        })),
                    "{spec}: no copy time: {copies:?}"
                );
            }
        }
        let b = resident.prove(input, &params, r, s).unwrap();
        assert_eq!(bytes(&b.proof), bytes(&theirs), "{spec}: resident differs");
        // The pinned prover holds the set's vectors while it is alive
        // (no-aux has an empty l, which is never page-locked) ...
        assert_eq!(Arc::strong_count(&params.h), 2, "{spec}: h is page-locked");
        // ... and lets them go once nobody else does.
        let h = Arc::downgrade(&params.h);
        drop(params);
        pinned.release_unused();
        pageable.release_unused();
        whole.release_unused();
        assert!(h.upgrade().is_none(), "{spec}: the page-locked h was kept");
    }
}

/// A set kept on the device in part ([`ParamsPlacement::Queries`], what
/// `Auto` does on a card where the whole set does not fit beside two
/// partitions): the queries kept run against their resident bases, the
/// others stream chunk by chunk (small chunks: many per query), and the
/// proofs are bellperson's bytes whichever queries are kept, on the device
/// or host staging, with and without window multiples.
#[test]
fn partly_resident_parameters_give_the_same_proofs() {
    let _device = shared();
    let Some(_) = gpu_or_skip("partly_resident_parameters_give_the_same_proofs") else {
        return;
    };
    let subsets = ["a,l,h", "b_g2", "h", "l,b_g1", "a,b_g1,b_g2", "h,l,a,b_g1"];
    let provers: Vec<(ResidentQueries, GpuProver)> = subsets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let kept: ResidentQueries = s.parse().unwrap();
            let prover = GpuProver::with_options(
                0,
                GpuOptions {
                    params: ParamsPlacement::Queries(kept),
                    stream_chunk: Some(300),
                    staging: if i % 2 == 0 {
                        Staging::Device
                    } else {
                        Staging::Host
                    },
                    window_multiples: i == 0,
                    ..GpuOptions::default()
                },
            )
            .unwrap();
            (kept, prover)
        })
        .collect();
    let mut rng = ChaCha20Rng::seed_from_u64(0x9A27);
    for spec in ["porep:12", "no-aux:5", "many-inputs:9"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let witness = Witness::synthesize(spec.build(5)).unwrap();
        let input = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        for (kept, prover) in &provers {
            // Twice: the second proof finds the partial copy in the cache.
            for round in 0..2 {
                let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
                let theirs = create_proof(spec.build(5), &params, r, s).unwrap();
                let ours = prover.prove(input, &params, r, s).unwrap();
                assert_eq!(
                    bytes(&ours.proof),
                    bytes(&theirs),
                    "{spec}: {kept} resident (proof {round}) differs"
                );
                // Each query's MSM ran where it was placed.
                let stages: Vec<&str> = ours.timings.0.iter().map(|(s, _)| *s).collect();
                for q in Query::ALL {
                    let resident = format!("msm {}", q.name());
                    let streamed = format!("msm {} (streamed)", q.name());
                    let (want, not) = if kept.has(q) {
                        (&resident, &streamed)
                    } else {
                        (&streamed, &resident)
                    };
                    assert!(
                        stages.contains(&want.as_str()) && !stages.contains(&not.as_str()),
                        "{spec}: {kept} resident, query {}: {stages:?}",
                        q.name()
                    );
                }
            }
        }
    }
}

/// Partitions staged in host memory ([`Staging::Host`], how a 32 GiB PoRep
/// partition runs on a 16-32 GB card): a, b, c uploaded in the kernel
/// region and H computed with two device vectors, the witness uploaded
/// under MSM H, parameters streamed (`Auto`) or resident; a/b/c from the
/// PCE on the CPU or given by the caller. Byte-identical proofs, and no
/// device memory needed outside the kernel region.
/// Resident parameters with their window multiples (every query's that
/// fits on the card: all of them at these sizes) give the same bytes as
/// bellperson, and the prover counts the multiples in the memory it holds.
#[test]
fn window_multiples_give_the_same_proofs() {
    let _device = shared();
    let Some(_) = gpu_or_skip("window_multiples_give_the_same_proofs") else {
        return;
    };
    let prover = GpuProver::with_options(
        0,
        GpuOptions {
            params: ParamsPlacement::Resident,
            window_multiples: true,
            ..GpuOptions::default()
        },
    )
    .unwrap();
    let plain = GpuProver::with_options(
        0,
        GpuOptions {
            params: ParamsPlacement::Resident,
            ..GpuOptions::default()
        },
    )
    .unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0x3417);
    for spec in ["porep:12", "no-aux:5", "many-inputs:9", "mul-chain:14"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let witness = Witness::synthesize(spec.build(3)).unwrap();
        let input = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        for round in 0..2 {
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let theirs = create_proof(spec.build(3), &params, r, s).unwrap();
            let ours = prover.prove(input, &params, r, s).unwrap();
            assert_eq!(
                bytes(&ours.proof),
                bytes(&theirs),
                "{spec}: with window multiples (proof {round}) differs"
            );
        }
        // Against a prover without multiples: at least H's multiples more.
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        plain.prove(input, &params, r, s).unwrap();
        let c = multiples_window_bits(params.h.len());
        let h_extra = u64::from(windows(c) - 1)
            * (params.h.len() * std::mem::size_of::<blstrs::G1Affine>()) as u64;
        let (with, without) = (prover.held_device_bytes(), plain.held_device_bytes());
        assert!(
            with >= without + h_extra,
            "{spec}: holds {with} bytes with multiples, {without} without; H's multiples \
             are {h_extra}"
        );
        drop(params);
    }
}

#[test]
fn host_staging_gives_the_same_proofs() {
    let _device = shared();
    let Some(_) = gpu_or_skip("host_staging_gives_the_same_proofs") else {
        return;
    };
    let prover = |params, bounce_bytes| {
        GpuProver::with_options(
            0,
            GpuOptions {
                params,
                staging: Staging::Host,
                stream_chunk: Some(500),
                bounce_bytes,
                ..GpuOptions::default()
            },
        )
        .unwrap()
    };
    // The default bounce buffers (32 MiB) are larger than these vectors, so
    // those provers copy them as they are; 4 KiB ones make pageable a/b/c
    // (and the witness) cross in pieces.
    let (streamed, resident, bounced) = (
        prover(ParamsPlacement::Auto, Some(cuzk_groth16_cuda::BOUNCE_BYTES)),
        prover(
            ParamsPlacement::Resident,
            Some(cuzk_groth16_cuda::BOUNCE_BYTES),
        ),
        prover(ParamsPlacement::Auto, Some(4096)),
    );
    let pool =
        cuzk_pinned_pool::Pool::pinned(0, cuzk_pinned_pool::PoolConfig::unbounded()).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0x4057);
    for spec in ["porep:12", "no-aux:5", "repeated-vars:8", "many-inputs:9"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        assert_eq!(streamed.device_bytes(&pce), 0, "{spec}: staged on the host");
        let witness = Witness::synthesize(spec.build(3)).unwrap();
        let abc = cuzk_synth::evaluate(&pce, &witness).unwrap();
        // The same a/b/c in page-locked buffers, as the engine's pool
        // leases them: copied as they are, bounce buffers or not.
        let locked = |v: &[Scalar]| {
            let mut lease = pool
                .lease(cuzk_pinned_pool::Request::elems::<Scalar>(v.len()))
                .unwrap();
            // SAFETY: `Scalar` is plain old data (blst's [u64; 4]).
            unsafe { lease.as_mut_slice_of_unchecked::<Scalar>() }.unwrap()[..v.len()]
                .copy_from_slice(v);
            lease
        };
        let (la, lb, lc) = (locked(&abc.a), locked(&abc.b), locked(&abc.c));
        let n = abc.a.len();
        fn view(l: &cuzk_pinned_pool::Lease, n: usize) -> &[Scalar] {
            // SAFETY: as above; each lease holds at least `n` elements.
            unsafe { &l.as_slice_of_unchecked::<Scalar>().unwrap()[..n] }
        }
        let gpu = cuzk_groth16_cuda::cuda::Gpu::get(0).unwrap();
        assert!(
            cuzk_groth16_cuda::cuda::is_page_locked(&gpu, view(&la, n)),
            "{spec}: a pinned lease is page-locked"
        );
        assert!(
            !cuzk_groth16_cuda::cuda::is_page_locked(&gpu, &abc.a),
            "{spec}: a vector is not page-locked"
        );
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let theirs = bytes(&create_proof(spec.build(3), &params, r, s).unwrap());
        for (abc, how) in [
            (AbcInput::FromPce, "a/b/c from the PCE"),
            (
                AbcInput::Evaluated {
                    a: &abc.a,
                    b: &abc.b,
                    c: &abc.c,
                },
                "a/b/c given",
            ),
            (
                AbcInput::Evaluated {
                    a: view(&la, n),
                    b: view(&lb, n),
                    c: view(&lc, n),
                },
                "a/b/c given page-locked",
            ),
        ] {
            let input = ProverInput {
                pce: &pce,
                witness: &witness,
                abc,
            };
            for (p, what) in [
                (&streamed, "streamed"),
                (&resident, "resident"),
                (&bounced, "streamed, 4 KiB bounce buffers"),
            ] {
                let out = p.prove(input, &params, r, s).unwrap();
                assert_eq!(bytes(&out.proof), theirs, "{spec}: {what}, {how}");
                let stages: Vec<&str> = out.timings.0.iter().map(|(s, _)| *s).collect();
                // H from host vectors (with two or three on the device, as
                // the card has room), the witness after it.
                for want in ["h (ntt, a/b/c from host", "witness h2d (wait)"] {
                    assert!(
                        stages.iter().any(|s| s.starts_with(want)),
                        "{spec}: {what}: {stages:?}"
                    );
                }
                // The witness's upload ran beside MSM H, on a helper thread.
                let beside = out.timings.overlapped();
                assert!(
                    beside.iter().any(|(s, _, _)| *s == "witness h2d"),
                    "{spec}: {what}: {beside:?}"
                );
                assert_eq!(
                    stages.iter().any(|s| s.contains("streamed")),
                    what.starts_with("streamed"),
                    "{spec}: {what}: {stages:?}"
                );
            }
        }
    }
}

/// Two workers of one prover, as the engine runs them: prepare on two
/// threads at once (uploads, the SpMV and the witness check on each
/// worker's stream), kernel regions one at a time under a lock, each on the
/// thread that prepared it. On streams of their own (the default) and on the
/// GPU's shared stream, resident and streamed parameters: byte-identical
/// proofs.
#[test]
fn workers_on_their_own_streams_give_the_same_proofs() {
    let _device = shared();
    let Some(_) = gpu_or_skip("workers_on_their_own_streams_give_the_same_proofs") else {
        return;
    };
    let mut rng = ChaCha20Rng::seed_from_u64(0x5EED);
    for spec in ["porep:12", "mul-chain:13"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        // Six partitions: witness, r, s and bellperson's proof.
        let jobs: Vec<_> = (0..6u64)
            .map(|seed| {
                let witness = Witness::synthesize(spec.build(seed)).unwrap();
                let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
                let theirs = bytes(&create_proof(spec.build(seed), &params, r, s).unwrap());
                (witness, r, s, theirs)
            })
            .collect();
        for (stream_per_worker, params_at, staging) in [
            (true, ParamsPlacement::Resident, Staging::Device),
            (false, ParamsPlacement::Resident, Staging::Device),
            (true, ParamsPlacement::Streamed, Staging::Device),
            // Staged in host memory: both workers' prepare on the CPU, the
            // uploads and H's two buffers in the kernel regions.
            (true, ParamsPlacement::Auto, Staging::Host),
            (false, ParamsPlacement::Resident, Staging::Host),
        ] {
            // Host staging with per-worker streams runs the NTT unlike the
            // default (H in two buffers, with the bit-reversal launch).
            let ntt = if staging == Staging::Host && stream_per_worker {
                NTT_NOT_DEFAULT
            } else {
                NttConfig::default()
            };
            let prover = GpuProver::with_options(
                0,
                GpuOptions {
                    params: params_at,
                    stream_per_worker,
                    staging,
                    stream_chunk: Some(700),
                    ntt,
                    ..GpuOptions::default()
                },
            )
            .unwrap();
            let kernel_lock = std::sync::Mutex::new(());
            std::thread::scope(|scope| {
                for worker in 0..2 {
                    let (prover, jobs, kernel_lock) = (&prover, &jobs, &kernel_lock);
                    let (pce, params, spec) = (&pce, &params, &spec);
                    scope.spawn(move || {
                        for (witness, r, s, theirs) in jobs.iter().skip(worker).step_by(2) {
                            let input = ProverInput {
                                pce,
                                witness,
                                abc: AbcInput::FromPce,
                            };
                            let mut timings = StageTimings::default();
                            let staged = prover.prepare(input, params, &mut timings).unwrap();
                            let msm = {
                                let _region = kernel_lock.lock().unwrap();
                                prover
                                    .kernel_region(input, params, staged, &mut timings)
                                    .unwrap()
                            };
                            let proof = assemble(&params.vk, &msm, *r, *s).unwrap();
                            assert_eq!(
                                &bytes(&proof),
                                theirs,
                                "{spec}: worker {worker}, own streams {stream_per_worker}, \
                                 {params_at:?} parameters, staged {staging:?}"
                            );
                        }
                    });
                }
            });
        }
    }
}

/// Every device stage is timed with CUDA events, and the times are sane.
#[test]
fn gpu_stages_are_timed_with_events() {
    let _device = shared();
    let Some(_) = gpu_or_skip("gpu_stages_are_timed_with_events") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let spec: CircuitSpec = "porep:12".parse().unwrap();
    let params: Parameters<Bls12> = generate_random_parameters(spec.build(0), &mut rng).unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let witness = Witness::synthesize(spec.build(1)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    let out = gpu.prove(input, &params, Scalar::ONE, Scalar::ONE).unwrap();
    let stages: Vec<&str> = out.timings.gpu().iter().map(|(s, _)| *s).collect();
    assert_eq!(
        stages,
        [
            "h2d",
            "spmv",
            "check",
            "params h2d",
            "h (ntt)",
            "msm h",
            "msm l",
            "msm a",
            "msm b_g1",
            "msm b_g2"
        ]
    );
    let gpu_total: std::time::Duration = out.timings.gpu().iter().map(|(_, d)| *d).sum();
    assert!(gpu_total > std::time::Duration::ZERO);
    // The H and MSM stages did work; the event pairs are in stream order.
    // (GPU time is not compared with wall time: other tests of this binary
    // share the GPU's stream, so their work can fall between two events.)
    for (stage, d) in out.timings.gpu() {
        if stage.starts_with("msm") || *stage == "h (ntt)" {
            assert!(*d > std::time::Duration::ZERO, "{stage}: {d:?}");
        }
    }
}

/// Asking for more device memory than the GPU has is an error naming the
/// numbers, not a crash, and the GPU stays usable afterwards.
#[test]
fn out_of_device_memory_is_a_clear_error() {
    let _device = DEVICE.write().unwrap_or_else(|p| p.into_inner());
    let Some(_) = gpu_or_skip("out_of_device_memory_is_a_clear_error") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let (free, total) = gpu.gpu().mem_info().unwrap();
    assert!(free <= total && total > 0);
    let err = gpu
        .gpu()
        .ensure_free(total + 1, || "for a test".into())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, Groth16Error::DeviceOutOfMemory { need, .. } if need == total + 1),
        "{text}"
    );
    assert!(
        text.contains("out of memory") && text.contains("free"),
        "{text}"
    );
    // A real allocation past the device's size.
    let err = gpu
        .gpu()
        .alloc_zeros::<Scalar>((2 * total / 32) as usize)
        .unwrap_err();
    assert!(
        matches!(err, Groth16Error::DeviceOutOfMemory { .. }),
        "{err}"
    );
    // Still usable.
    let v = gpu.gpu().upload(&[Scalar::ONE; 4]).unwrap();
    assert_eq!(v.download().unwrap(), vec![Scalar::ONE; 4]);
}

/// With a/b/c evaluated on the GPU, a witness that breaks a constraint is
/// refused with the same constraint index as the CPU check names.
#[test]
fn gpu_abc_refuses_an_unsatisfying_witness() {
    let _device = shared();
    let Some(_) = gpu_or_skip("gpu_abc_refuses_an_unsatisfying_witness") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let spec: CircuitSpec = "porep:10".parse().unwrap();
    let params: Parameters<Bls12> = generate_random_parameters(spec.build(0), &mut rng).unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let mut witness = Witness::synthesize(spec.build(3)).unwrap();
    witness.aux[17] += Scalar::ONE;
    let expected = match cuzk_synth::evaluate(&pce, &witness) {
        Err(cuzk_synth::SynthError::Unsatisfied { index, .. }) => index,
        other => panic!("the CPU check should refuse the witness: {other:?}"),
    };
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    match gpu.prove(input, &params, Scalar::ONE, Scalar::ONE) {
        Err(Groth16Error::Synth(cuzk_synth::SynthError::Unsatisfied { index, .. })) => {
            assert_eq!(index, expected)
        }
        other => panic!("the GPU check should refuse the witness: {other:?}"),
    }
}

/// A PCE whose matrices were released from host memory: the prover that
/// does not hold it on the device reads them again from the source once,
/// uploads them, says it holds the PCE, and proves byte-identical to
/// bellperson; later proofs read nothing.
#[test]
fn a_released_pce_is_read_again_once_for_the_device() {
    let _device = shared();
    let Some(_) = gpu_or_skip("a_released_pce_is_read_again_once_for_the_device") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let spec: CircuitSpec = "porep:10".parse().unwrap();
    let params: Parameters<Bls12> = generate_random_parameters(spec.build(0), &mut rng).unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let source = {
        let (pce, reads) = (pce.clone(), Arc::clone(&reads));
        cuzk_synth::MatrixSource::new("a copy", move || {
            reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(pce.clone())
        })
    };
    let released = pce.release_matrices(source);
    assert!(!gpu.holds_pce(&released));
    for seed in [3u64, 5] {
        let witness = Witness::synthesize(spec.build(seed)).unwrap();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let input = ProverInput {
            pce: &released,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        let ours = gpu.prove(input, &params, r, s).unwrap();
        let theirs = create_proof(spec.build(seed), &params, r, s).unwrap();
        assert_eq!(bytes(&ours.proof), bytes(&theirs), "seed {seed}");
        assert!(gpu.holds_pce(&released) && gpu.holds_pce(&pce));
    }
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Where a/b/c are evaluated is reported with its reason: off by option,
/// on the device when the PCE fits (and then resident after a proof).
#[test]
fn the_abc_placement_says_why() {
    let _device = shared();
    let Some(_) = gpu_or_skip("the_abc_placement_says_why") else {
        return;
    };
    let spec: CircuitSpec = "porep:10".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let off = GpuProver::with_options(
        0,
        GpuOptions {
            gpu_abc: false,
            ..GpuOptions::default()
        },
    )
    .unwrap();
    let p = off.abc_placement(&pce);
    assert!(!p.on_device && p.reason.contains("gpu_abc is off"), "{p:?}");
    assert!(!off.evaluates_abc(&pce));

    let gpu = GpuProver::new(0).unwrap();
    let p = gpu.abc_placement(&pce);
    assert!(p.on_device && p.reason.contains("fits beside"), "{p:?}");
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let params: Parameters<Bls12> = generate_random_parameters(spec.build(0), &mut rng).unwrap();
    let witness = Witness::synthesize(spec.build(3)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    gpu.prove(input, &params, Scalar::ONE, Scalar::ONE).unwrap();
    let p = gpu.abc_placement(&pce);
    assert!(p.on_device && p.reason.contains("resident"), "{p:?}");
}

/// Every built-in family at about 2^`CUZK_TEST_FAMILY_LOG2` constraints
/// (default 12; the GPU machine runs 20) with real parameters made by
/// cuzk's GPU setup (byte-identical to bellperson's generator, see
/// gpu_setup.rs): GPU proofs equal bellperson's `create_proof` and verify.
#[test]
fn every_family_at_the_large_size_with_real_parameters() {
    let _device = shared();
    let Some(_) = gpu_or_skip("every_family_at_the_large_size_with_real_parameters") else {
        return;
    };
    use cuzk_groth16_cuda::setup::{SetupOptions, ToxicWaste, generate_parameters};
    let k: u32 = std::env::var("CUZK_TEST_FAMILY_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let n = 1usize << k;
    let specs = [
        format!("mul-chain:{k}"),
        format!("porep:{k}"),
        format!("sha256:{}", ((n + 670) / 26704).max(1)),
        format!("no-aux:{}", (n / 5).max(1)),
        format!("many-inputs:{}", k.saturating_sub(2)),
        format!("repeated-vars:{}", ((n - 3) / 3).max(1)),
        format!("constant-only:{}", ((n - 3) / 3).max(1)),
    ];
    // CUZK_TEST_FAMILIES=porep,sha256 limits the run to those families.
    let only = std::env::var("CUZK_TEST_FAMILIES").unwrap_or_default();
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0xFA11);
    for spec in &specs {
        let family = spec.split(':').next().unwrap_or_default();
        if !only.is_empty() && !only.split(',').any(|f| f == family) {
            continue;
        }
        let spec: CircuitSpec = spec.parse().unwrap();
        let t = std::time::Instant::now();
        let pce = Pce::record(spec.build(0)).unwrap();
        let waste = ToxicWaste::random(&mut rng);
        let params = generate_parameters(&pce, &waste, &SetupOptions::gpu(0)).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let witness = Witness::synthesize(spec.build(5)).unwrap();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let input = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        let ours = gpu.prove(input, &params, r, s).unwrap();
        let theirs = create_proof(spec.build(5), &params, r, s).unwrap();
        assert_eq!(
            bytes(&ours.proof),
            bytes(&theirs),
            "{spec}: GPU proof differs"
        );
        assert!(verify_proof(&pvk, &ours.proof, witness.public_inputs()).unwrap());
        eprintln!(
            "{spec}: {} constraints (domain 2^{}), byte-identical and verified ({:.1?})",
            pce.num_constraints(),
            pce.domain_log2(),
            t.elapsed()
        );
        gpu.evict_params();
        gpu.evict_pces();
    }
}
