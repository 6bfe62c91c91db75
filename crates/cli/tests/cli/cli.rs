//! The `cuzk` binary end to end: setup, prove, verify, and the errors a user
//! sees for bad input (each its own message, a non-zero exit, no panic and
//! no partial output file).

use crate::common::{cuzk_ok as ok, cuzk_output as cuzk};
use std::path::Path;

/// What `cuzk` prints about the backend it proved on when left to choose:
/// the GPU's where the machine has one (and must, with CUZK_REQUIRE_GPU=1).
fn expected_backend(test: &str) -> &'static str {
    if cuzk_gpu_sched::testing::gpu_expected(test) {
        "(cuda backend"
    } else {
        "(cpu backend"
    }
}

/// Runs a command that must fail cleanly; returns its stderr.
fn fails(args: &[&str]) -> String {
    let out = cuzk(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "cuzk {args:?} succeeded");
    assert_eq!(out.status.code(), Some(1), "cuzk {args:?}: {stderr}");
    assert!(
        !stderr.contains("panicked"),
        "cuzk {args:?} panicked: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn setup_prove_verify_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("p.params");
    let other = dir.path().join("other.params");
    let proof = dir.path().join("p.proof");

    ok(&[
        "setup",
        "--circuit",
        "mul-chain:6",
        "--out",
        s(&params),
        "--seed",
        "1",
    ]);
    ok(&[
        "setup",
        "--circuit",
        "mul-chain:7",
        "--out",
        s(&other),
        "--seed",
        "1",
    ]);
    let out = ok(&[
        "prove",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&params),
        "--out",
        s(&proof),
        "--witness-seed",
        "5",
    ]);
    assert!(out.contains("wrote proof"), "{out}");
    assert!(out.contains(expected_backend("prove")), "{out}");
    assert_eq!(std::fs::metadata(&proof).unwrap().len(), 192);
    let out = ok(&[
        "verify",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&params),
        "--proof",
        s(&proof),
        "--witness-seed",
        "5",
    ]);
    assert!(out.contains("verifies"), "{out}");

    // Another witness means other public inputs: the proof must not verify.
    let err = fails(&[
        "verify",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&params),
        "--proof",
        s(&proof),
        "--witness-seed",
        "6",
    ]);
    assert!(err.contains("does NOT verify"), "{err}");

    // Missing parameter file.
    let missing = dir.path().join("nope.params");
    let bad_out = dir.path().join("bad.proof");
    let err = fails(&[
        "prove",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&missing),
        "--out",
        s(&bad_out),
    ]);
    assert!(
        err.contains("cannot read parameter file") && err.contains("nope.params"),
        "{err}"
    );

    // Truncated parameter file.
    let bytes = std::fs::read(&params).unwrap();
    let truncated = dir.path().join("truncated.params");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    let err = fails(&[
        "prove",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&truncated),
        "--out",
        s(&bad_out),
    ]);
    assert!(
        err.contains("is truncated") && err.contains("b_g2"),
        "{err}"
    );

    // A flipped byte inside a point.
    let mut corrupt = bytes.clone();
    let last = corrupt.len() - 50;
    corrupt[last] ^= 0x55;
    let corrupt_path = dir.path().join("corrupt.params");
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    let err = fails(&[
        "prove",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&corrupt_path),
        "--out",
        s(&bad_out),
    ]);
    assert!(err.contains("is corrupt in its b_g2 section"), "{err}");

    // Parameters of another circuit.
    let err = fails(&[
        "prove",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&other),
        "--out",
        s(&bad_out),
    ]);
    assert!(err.contains("do not match the circuit"), "{err}");
    let err = fails(&[
        "verify",
        "--circuit",
        "porep:8",
        "--params",
        s(&params),
        "--proof",
        s(&proof),
    ]);
    assert!(err.contains("another circuit"), "{err}");

    // A file that is not a proof.
    let err = fails(&[
        "verify",
        "--circuit",
        "mul-chain:6",
        "--params",
        s(&params),
        "--proof",
        s(&params),
    ]);
    assert!(
        err.contains("a Groth16 proof over BLS12-381 has 192"),
        "{err}"
    );

    // Unknown circuit.
    let out = cuzk(&[
        "prove",
        "--circuit",
        "nonsense:3",
        "--params",
        s(&params),
        "--out",
        s(&bad_out),
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap rejects bad arguments with 2"
    );

    // No failed command left an output file, partial or temporary.
    assert!(!bad_out.exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
}

#[test]
fn fake_parameters_prove_but_are_reported_unverifiable() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("fake.params");
    let proof = dir.path().join("fake.proof");
    let out = ok(&[
        "setup",
        "--fake",
        "--circuit",
        "porep:10",
        "--out",
        s(&params),
    ]);
    assert!(out.contains("FAKE"), "{out}");
    let run = cuzk(&[
        "prove",
        "--circuit",
        "porep:10",
        "--params",
        s(&params),
        "--out",
        s(&proof),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("WARNING") && stderr.contains("FAKE"),
        "{stderr}"
    );
    assert!(stdout.contains("UNVERIFIABLE"), "{stdout}");
    let err = fails(&[
        "verify",
        "--circuit",
        "porep:10",
        "--params",
        s(&params),
        "--proof",
        s(&proof),
    ]);
    assert!(err.contains("FAKE parameters"), "{err}");
}

#[test]
fn demo_prints_a_verified_identical_proof_with_timings() {
    let out = ok(&["demo", "--circuit", "mul-chain:8"]);
    for needle in [
        "setup",
        "record PCE",
        "witness",
        "spmv",
        "msm h",
        "assemble",
        "verified: yes",
        "byte-identical to bellperson: yes",
        "proof: ",
        expected_backend("demo"),
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
}

#[test]
fn pce_records_a_filecoin_circuit_without_a_sector() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&[
        "pce",
        "--post-proof",
        "StackedDrgWindow2KiBV1_1",
        "--out-dir",
        s(dir.path()),
        "--read-back",
    ]);
    assert!(out.contains("read it back in"), "{out}");
    assert!(
        out.contains("recorded filecoin/proof-of-spacetime-fallback"),
        "{out}"
    );
    assert!(out.contains("constraints"), "{out}");
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(out.contains(&files[0].display().to_string()), "{out}");
    // The file the engine reads: its header names the shape it was
    // recorded for.
    let info = cuzk_engine::pce_file::read_pce_info(&files[0]).unwrap();
    assert!(
        info.shape
            .starts_with("filecoin/proof-of-spacetime-fallback"),
        "{info:?}"
    );
    assert!(info.num_constraints > 0);

    let e = fails(&[
        "pce",
        "--seal-proof",
        "StackedDrg3KiBV1_1",
        "--out-dir",
        s(dir.path()),
    ]);
    assert!(e.contains("unknown registered proof"), "{e}");
    let out = cuzk(&["pce", "--out-dir", s(dir.path())]);
    assert!(!out.status.success());
}
