//! `cuzk setup --gpu` end to end: with a GPU, the file equals what `cuzk
//! setup` (bellperson) writes for the same `--seed`, and proofs made with it
//! verify; without one, a clear error, a non-zero exit and no file.

use crate::common::{cuzk_ok as ok, cuzk_output as cuzk};
use std::path::Path;

use cuzk_gpu_sched::testing::gpu_or_skip;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn setup_gpu_without_a_gpu_is_a_clear_error() {
    if cuzk_groth16_cuda::cuda::Gpu::get(0).is_ok() {
        eprintln!("skipping setup_gpu_without_a_gpu_is_a_clear_error: there is a GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("p.params");
    let args = [
        "setup",
        "--gpu",
        "--circuit",
        "mul-chain:4",
        "--out",
        s(&params),
        "--seed",
        "1",
    ];
    let out = cuzk(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("needs a CUDA GPU"), "{stderr}");
    assert!(stderr.contains("leave out --gpu"), "{stderr}");
    assert!(stderr.contains("no usable CUDA GPU"), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn setup_gpu_and_fake_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("p.params");
    let out = cuzk(&[
        "setup",
        "--gpu",
        "--fake",
        "--circuit",
        "mul-chain:4",
        "--out",
        s(&params),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    assert!(!params.exists());
}

#[test]
fn setup_gpu_writes_bellpersons_bytes_and_its_proofs_verify() {
    let Some(_) = gpu_or_skip("setup_gpu_writes_bellpersons_bytes_and_its_proofs_verify") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("cpu.params");
    let gpu = dir.path().join("gpu.params");
    let proof = dir.path().join("p.proof");
    for circuit in ["porep:12", "sha256:1"] {
        let common = ["--circuit", circuit, "--seed", "7"];
        ok(&[&["setup", "--out", s(&cpu)][..], &common].concat());
        let out = ok(&[&["setup", "--gpu", "--out", s(&gpu)][..], &common].concat());
        assert!(out.contains("wrote parameters"), "{out}");
        assert!(
            std::fs::read(&cpu).unwrap() == std::fs::read(&gpu).unwrap(),
            "{circuit}: cuzk setup --gpu and cuzk setup (bellperson) wrote different files"
        );
        for backend in ["gpu", "cpu"] {
            let out = ok(&[
                "prove",
                "--circuit",
                circuit,
                "--params",
                s(&gpu),
                "--out",
                s(&proof),
                "--backend",
                backend,
                "--witness-seed",
                "3",
            ]);
            assert!(out.contains("wrote proof"), "{out}");
            let out = ok(&[
                "verify",
                "--circuit",
                circuit,
                "--params",
                s(&gpu),
                "--proof",
                s(&proof),
                "--witness-seed",
                "3",
            ]);
            assert!(out.contains("verifies"), "{circuit} {backend}: {out}");
        }
    }
}
