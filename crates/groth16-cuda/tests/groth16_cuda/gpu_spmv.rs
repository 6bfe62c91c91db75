//! GPU SpMV (module `spmv`): a, b, c from the device-resident PCE against
//! `cuzk_synth::spmv` bit for bit, on every built-in circuit family, on
//! random matrices with the edge cases (empty rows, rows for the warp and
//! block kernels, repeated columns, coefficients 0, -1, -2 and random ones,
//! witness values 0 and -1, outputs longer than the matrix), and on a
//! PoRep-shaped circuit of 2^CUZK_TEST_LOG2 rows (default 18); the GPU
//! satisfaction check against `cuzk_synth::check_satisfied`; a, b, c fed
//! straight into the GPU H computation; refusals of bad input. Skips without
//! a GPU; fails instead when `CUZK_REQUIRE_GPU=1`.

use std::sync::Arc;

use anyhow::Result;
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::cuda::{DeviceBuffer, Gpu};
use cuzk_groth16_cuda::spmv::{self, DevicePce, GpuSpmv, PceShapeKey};
use cuzk_groth16_cuda::{GpuNtt, Groth16Error, cpu};
use cuzk_synth::circuits::{CircuitSpec, Family, all_test_specs};
use cuzk_synth::pce::{COEFF_MINUS_ONE, COEFF_ONE};
use cuzk_synth::{Csr, Density, Pce, SynthError, Witness};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn max_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(18)
}

fn setup(name: &str) -> Option<(Arc<Gpu>, GpuSpmv)> {
    gpu_or_skip(name)?;
    let gpu = Gpu::get(0).expect("the GPU that gpu_or_skip found");
    Some((gpu.clone(), GpuSpmv::new(gpu)))
}

fn witness_vec(w: &Witness) -> Vec<Scalar> {
    w.inputs.iter().chain(&w.aux).copied().collect()
}

/// `cuzk_synth`'s CPU SpMV, zero-padded to m.
fn reference(pce: &Pce, w: &Witness, m: usize) -> Result<[Vec<Scalar>; 3]> {
    let n = pce.num_constraints();
    let mut out = [
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
    ];
    let [a, b, c] = &mut out;
    cuzk_synth::spmv::evaluate_into(pce, w, a, b, c)?;
    for v in &mut out {
        v.resize(m, Scalar::ZERO);
    }
    Ok(out)
}

/// Uploads `pce` and `w`, evaluates with outputs of m elements (fresh
/// buffers, and caller buffers full of a non-zero value so every element
/// must be written) and compares with the CPU.
fn check(
    gpu: &Arc<Gpu>,
    spmv: &GpuSpmv,
    pce: &Pce,
    w: &Witness,
    m: usize,
    what: &str,
) -> Result<()> {
    let dpce = DevicePce::upload(gpu, pce)?;
    assert_eq!(dpce.device_bytes(), spmv::device_bytes(pce), "{what}");
    assert_eq!(*dpce.key(), PceShapeKey::of(pce), "{what}");
    let dw = gpu.upload(&witness_vec(w))?;
    let expected = reference(pce, w, m)?;
    let (a, b, c) = spmv.evaluate(&dpce, &dw, m)?;
    for (name, got, want) in [
        ("a", &a, &expected[0]),
        ("b", &b, &expected[1]),
        ("c", &c, &expected[2]),
    ] {
        let got = got.download()?;
        if let Some(i) = (0..m).find(|&i| got[i] != want[i]) {
            panic!("{what}: {name}[{i}] differs from the CPU (m = {m})");
        }
    }
    let junk = vec![Scalar::from(0xdead_beefu64); m];
    let mut bufs = [gpu.upload(&junk)?, gpu.upload(&junk)?, gpu.upload(&junk)?];
    let [a2, b2, c2] = &mut bufs;
    spmv.evaluate_into(&dpce, &dw, a2, b2, c2)?;
    for (name, got, want) in [
        ("a", &*a2, &expected[0]),
        ("b", &*b2, &expected[1]),
        ("c", &*c2, &expected[2]),
    ] {
        assert!(
            got.download()? == *want,
            "{what}: {name} into caller buffers (m = {m})"
        );
    }
    Ok(())
}

#[test]
fn spmv_matches_cpu_on_every_builtin_circuit() -> Result<()> {
    let Some((gpu, spmv)) = setup("spmv_matches_cpu_on_every_builtin_circuit") else {
        return Ok(());
    };
    for spec in all_test_specs() {
        let circuit = spec.build(11);
        let pce = Pce::record(circuit.clone())?;
        let w = Witness::synthesize(circuit)?;
        let rows = pce.num_constraints();
        for m in [pce.domain_size(), rows, 2 * pce.domain_size() + 3] {
            check(&gpu, &spmv, &pce, &w, m, &format!("{spec}"))?;
        }
        // A satisfied witness passes the GPU check.
        let dpce = DevicePce::upload(&gpu, &pce)?;
        let (a, b, c) = spmv.evaluate(&dpce, &gpu.upload(&witness_vec(&w))?, pce.domain_size())?;
        assert_eq!(spmv.first_unsatisfied(&dpce, &a, &b, &c)?, None, "{spec}");
    }
    Ok(())
}

/// A random PCE over `columns` variables: 10% empty rows, 1% rows of 33 to
/// 200 entries (warp kernel), one row of 2100 entries in matrices of 100 rows
/// or more (block kernel), the rest 1 to 5 entries; a fifth of the columns
/// from a pool of 4 (repeats within a row); coefficients ±1 and indices
/// into a table holding 0, -2 and random elements.
fn random_pce(rng: &mut ChaCha20Rng, rows: usize, columns: usize) -> Pce {
    let mut table = vec![Scalar::ONE, -Scalar::ONE, Scalar::ZERO, -Scalar::from(2u64)];
    for _ in 0..60 {
        table.push(Scalar::random(&mut *rng));
    }
    let table_len = table.len() as u32;
    let mut matrix = || {
        let mut m = Csr {
            row_ptr: vec![0],
            ..Csr::default()
        };
        for r in 0..rows {
            let len = match rng.gen_range(0..100) {
                _ if rows >= 100 && r == rows / 3 => 2100,
                0..=9 => 0,
                10 => rng.gen_range(33..200),
                _ => rng.gen_range(1..6),
            };
            for _ in 0..len {
                let col = if rng.gen_bool(0.2) {
                    rng.gen_range(0..columns.min(4) as u32)
                } else {
                    rng.gen_range(0..columns as u32)
                };
                let k = match rng.gen_range(0..10) {
                    0..=3 => COEFF_ONE,
                    4..=6 => COEFF_MINUS_ONE,
                    _ => rng.gen_range(2..table_len),
                };
                m.cols.push(col);
                m.coeffs.push(k);
            }
            m.row_ptr.push(m.cols.len() as u64);
        }
        m
    };
    let (a, b, c) = (matrix(), matrix(), matrix());
    let num_inputs = columns.min(3);
    Pce {
        num_inputs,
        num_aux: columns - num_inputs,
        a,
        b,
        c,
        coeff_table: table,
        a_aux_density: Density::new(0),
        b_input_density: Density::new(0),
        b_aux_density: Density::new(0),
        names: None,
        released: None,
        memo: Default::default(),
    }
}

/// Witness values: a quarter 0, a quarter -1, the rest random.
fn random_witness(rng: &mut ChaCha20Rng, pce: &Pce) -> Witness {
    let mut value = || match rng.gen_range(0..4) {
        0 => Scalar::ZERO,
        1 => -Scalar::ONE,
        _ => Scalar::random(&mut *rng),
    };
    Witness {
        inputs: (0..pce.num_inputs).map(|_| value()).collect(),
        aux: (0..pce.num_aux).map(|_| value()).collect(),
    }
}

/// A PCE whose matrices were released from host memory uploads them from
/// its source (read again, checked) and evaluates as the whole PCE does,
/// under the same key and device bytes; a source that fails is an error
/// naming it, and nothing is uploaded.
#[test]
fn a_released_pce_uploads_from_its_source() -> Result<()> {
    let Some((gpu, spmv)) = setup("a_released_pce_uploads_from_its_source") else {
        return Ok(());
    };
    let mut rng = ChaCha20Rng::seed_from_u64(0x7e1e);
    let pce = random_pce(&mut rng, 1000, 700);
    let w = random_witness(&mut rng, &pce);
    let m = pce.domain_size();
    let whole = DevicePce::upload(&gpu, &pce)?;
    let bytes = spmv::device_bytes(&pce);
    let copy = pce.clone();
    let released = pce.release_matrices(cuzk_synth::MatrixSource::new("a copy", move || {
        Ok(copy.clone())
    }));
    assert_eq!(spmv::device_bytes(&released), bytes);
    let again = DevicePce::upload(&gpu, &released)?;
    assert_eq!(again.key(), whole.key());
    assert_eq!(again.key(), &PceShapeKey::of(&released));
    assert_eq!(again.device_bytes(), bytes);
    let wd = gpu.upload(&witness_vec(&w))?;
    let (a, b, c) = spmv.evaluate(&whole, &wd, m)?;
    let (a2, b2, c2) = spmv.evaluate(&again, &wd, m)?;
    assert_eq!(
        (a.download()?, b.download()?, c.download()?),
        (a2.download()?, b2.download()?, c2.download()?)
    );
    let gone = pce.release_matrices(cuzk_synth::MatrixSource::new("a deleted file", || {
        Err("no such file".into())
    }));
    let err = DevicePce::upload(&gpu, &gone).unwrap_err();
    assert!(err.to_string().contains("a deleted file"), "{err}");
    Ok(())
}

#[test]
fn spmv_matches_cpu_on_random_matrices() -> Result<()> {
    let Some((gpu, spmv)) = setup("spmv_matches_cpu_on_random_matrices") else {
        return Ok(());
    };
    let mut rng = ChaCha20Rng::seed_from_u64(0x5e3d);
    let big = 1usize << max_log2().min(20);
    for (rows, columns, m) in [
        (0, 0, 0),
        (0, 1, 5),
        (1, 1, 1),
        (5, 2, 16),
        (300, 50, 300),
        (1000, 700, 4096),
        (big - 7, big / 2, big),
    ] {
        let pce = random_pce(&mut rng, rows, columns);
        let w = random_witness(&mut rng, &pce);
        let what = format!("random, {rows} rows, {columns} columns");
        check(&gpu, &spmv, &pce, &w, m, &what)?;
        if rows >= 100 {
            let [a, ..] = DevicePce::upload(&gpu, &pce)?.sizes();
            assert!(a.warp_rows > 0 && a.block_rows > 0, "{what}: {a:?}");
        }
    }
    Ok(())
}

#[test]
fn spmv_matches_cpu_on_large_porep() -> Result<()> {
    let Some((gpu, spmv)) = setup("spmv_matches_cpu_on_large_porep") else {
        return Ok(());
    };
    let spec = CircuitSpec {
        family: Family::PorepShaped { bool_percent: 50 },
        size: max_log2(),
    };
    let circuit = spec.build(5);
    let pce = Pce::record(circuit.clone())?;
    let w = Witness::synthesize(circuit)?;
    check(&gpu, &spmv, &pce, &w, pce.domain_size(), &format!("{spec}"))
}

#[test]
fn gpu_check_finds_the_first_unsatisfied_row() -> Result<()> {
    let Some((gpu, spmv)) = setup("gpu_check_finds_the_first_unsatisfied_row") else {
        return Ok(());
    };
    let spec: CircuitSpec = "porep:12".parse()?;
    let circuit = spec.build(3);
    let pce = Pce::record(circuit.clone())?;
    let mut w = Witness::synthesize(circuit)?;
    let dpce = DevicePce::upload(&gpu, &pce)?;
    let m = pce.domain_size();
    // A wrong aux value breaks the rows that use it: the GPU names the same
    // first row as the CPU check.
    for aux in [0, w.aux.len() / 2, w.aux.len() - 1] {
        let saved = w.aux[aux];
        w.aux[aux] += Scalar::ONE;
        let cpu_first = match cuzk_synth::evaluate(&pce, &w) {
            Err(SynthError::Unsatisfied { index, .. }) => Some(index),
            Ok(_) => None,
            Err(e) => return Err(e.into()),
        };
        let (a, b, c) = spmv.evaluate(&dpce, &gpu.upload(&witness_vec(&w))?, m)?;
        assert_eq!(
            spmv.first_unsatisfied(&dpce, &a, &b, &c)?,
            cpu_first,
            "aux {aux}"
        );
        assert!(cpu_first.is_some(), "changing aux {aux} broke no row");
        w.aux[aux] = saved;
    }
    // Rows past the constraints are not checked, the last one is.
    let (a, b, mut c) = spmv.evaluate(&dpce, &gpu.upload(&witness_vec(&w))?, m)?;
    let rows = pce.num_constraints();
    let mut host_c = c.download()?;
    host_c[rows - 1] += Scalar::ONE;
    c.copy_from_host(&host_c)?;
    assert_eq!(spmv.first_unsatisfied(&dpce, &a, &b, &c)?, Some(rows - 1));
    Ok(())
}

#[test]
fn gpu_abc_feed_the_gpu_h_computation() -> Result<()> {
    let Some((gpu, spmv)) = setup("gpu_abc_feed_the_gpu_h_computation") else {
        return Ok(());
    };
    let ntt = GpuNtt::new(gpu.clone());
    for spec in ["porep:12", "sha256:1", "many-inputs:8"] {
        let spec: CircuitSpec = spec.parse()?;
        let circuit = spec.build(9);
        let pce = Pce::record(circuit.clone())?;
        let w = Witness::synthesize(circuit)?;
        let abc = cuzk_synth::evaluate(&pce, &w)?;
        let expected = cpu::compute_h(&abc.a, &abc.b, &abc.c)?;
        let dpce = DevicePce::upload(&gpu, &pce)?;
        let (mut a, mut b, mut c) =
            spmv.evaluate(&dpce, &gpu.upload(&witness_vec(&w))?, pce.domain_size())?;
        ntt.compute_h(&mut a, &mut b, &mut c, pce.domain_log2())?;
        let h = a.download()?;
        assert!(h[..expected.len()] == expected[..], "{spec}: h differs");
    }
    Ok(())
}

#[test]
fn bad_inputs_are_refused() -> Result<()> {
    let Some((gpu, spmv)) = setup("bad_inputs_are_refused") else {
        return Ok(());
    };
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let pce = random_pce(&mut rng, 20, 10);
    let dpce = DevicePce::upload(&gpu, &pce)?;
    let w = gpu.upload(&witness_vec(&random_witness(&mut rng, &pce)))?;
    let msg = |e: Groth16Error| e.to_string();
    let short_w = gpu.upload(&vec![Scalar::ONE; 9])?;
    let e = msg(spmv.evaluate(&dpce, &short_w, 32).unwrap_err());
    assert!(
        e.contains("witness on the device has 9 elements, the PCE 10"),
        "{e}"
    );
    let e = msg(spmv.evaluate(&dpce, &w, 19).unwrap_err());
    assert!(e.contains("for 20 constraints"), "{e}");
    let z = |n| -> Result<DeviceBuffer<Scalar>> { Ok(gpu.alloc_zeros(n)?) };
    let (mut a, mut b, mut c) = (z(32)?, z(31)?, z(32)?);
    assert!(
        spmv.evaluate_into(&dpce, &w, &mut a, &mut b, &mut c)
            .is_err()
    );
    let e = msg(spmv.first_unsatisfied(&dpce, &a, &z(5)?, &c).unwrap_err());
    assert!(e.contains("cannot hold 20 constraints"), "{e}");
    // A malformed PCE is an error at upload, not a fault in a kernel.
    let mut bad = pce.clone();
    bad.a.cols[0] = 10;
    let e = msg(DevicePce::upload(&gpu, &bad).unwrap_err());
    assert!(
        e.contains("column 10 is past the witness's 10 variables"),
        "{e}"
    );
    let mut bad = pce.clone();
    bad.c.coeffs[0] = 1000;
    let e = msg(DevicePce::upload(&gpu, &bad).unwrap_err());
    assert!(
        e.contains("coefficient index 1000 is past the table's"),
        "{e}"
    );
    // The GPU is still fine afterwards.
    let (a, ..) = spmv.evaluate(&dpce, &w, 20)?;
    assert_eq!(a.len(), 20);
    gpu.synchronize()?;
    Ok(())
}
