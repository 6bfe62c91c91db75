//! `cuzk params check DIR`: one verdict line per file (listed with the
//! right digest, truncated, altered, unlisted and whole, unlisted garbage,
//! metadata), other files ignored and counted, JSON with `--json`, and a
//! non-zero exit when any file is bad. The digest table is the test's own
//! (`--digests`), in parameters.json's form.

use std::path::Path;
use std::process::{Command, Output};

use cuzk_filecoin::params_check::digest_of;
use serde_json::{Value, json};

use crate::daemon::params_file;

fn cuzk(args: &[&str], env: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cuzk"));
    cmd.args(args);
    if let Some(dir) = env {
        cmd.env("FIL_PROOFS_PARAMETER_CACHE", dir);
    }
    cmd.output().expect("run cuzk")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn params_check_gives_one_verdict_per_file_and_fails_on_bad_ones() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("params");
    std::fs::create_dir(&dir).unwrap();
    let good = std::fs::read(params_file(work.path(), "mul-chain:6")).unwrap();
    let mut altered = good.clone();
    let at = altered.len() - 20;
    altered[at] ^= 1;
    let garbage: Vec<u8> = (0..3000u32).map(|i| (i * 131 % 256) as u8).collect();
    let files: [(&str, &[u8]); 7] = [
        ("v28-good.params", &good),
        ("v28-short.params", &good[..good.len() - 1000]),
        ("v28-altered.params", &altered),
        ("mine.params", &good),
        ("junk.vk", &garbage),
        ("v28-good.meta", br#"{"sector_size":2048}"#),
        ("README.txt", b"not a parameter file"),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let table = json!({
        "v28-good.params": {"cid": "-", "digest": digest_of(&good), "sector_size": 2048},
        "v28-short.params": {"cid": "-", "digest": digest_of(&good), "sector_size": 2048},
        "v28-altered.params": {"cid": "-", "digest": digest_of(&good), "sector_size": 2048},
    });
    let digests = work.path().join("parameters.json");
    std::fs::write(&digests, table.to_string()).unwrap();
    let (d, t) = (dir.to_str().unwrap(), digests.to_str().unwrap());

    let out = cuzk(&["params", "check", d, "--digests", t], None);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.starts_with("error: 3 of 6 parameter files in "),
        "{stderr}"
    );
    let line = |name: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no line for {name} in\n{stdout}"))
            .to_owned()
    };
    assert_eq!(line("v28-good.params"), "v28-good.params: ok");
    assert!(
        line("v28-short.params").starts_with(&format!(
            "v28-short.params: truncated ({} bytes; its sections need at least ",
            good.len() - 1000
        )),
        "{stdout}"
    );
    assert_eq!(
        line("v28-altered.params"),
        format!(
            "v28-altered.params: wrong digest (expected {}, got {})",
            digest_of(&good),
            digest_of(&altered)
        )
    );
    assert!(
        line("mine.params").starts_with("mine.params: unlisted: structure ok (Groth16 parameters"),
        "{stdout}"
    );
    assert!(
        line("junk.vk").starts_with("junk.vk: unlisted: bad structure (verifying key: "),
        "{stdout}"
    );
    assert!(
        line("v28-good.meta").starts_with("v28-good.meta: ok (metadata, sector_size 2048"),
        "{stdout}"
    );
    assert!(!stdout.contains("README.txt"), "{stdout}");
    assert!(
        stdout.contains("1 other entries ignored (not .params, .vk or .meta files)"),
        "{stdout}"
    );

    // The same as JSON.
    let out = cuzk(&["params", "check", d, "--digests", t, "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["bad"], 3);
    assert_eq!(j["ignored"], 1);
    let verdicts: Vec<(String, String)> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_owned(),
                f["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expect = [
        ("junk.vk", "unlisted_bad"),
        ("mine.params", "unlisted_ok"),
        ("v28-altered.params", "wrong_digest"),
        ("v28-good.meta", "meta_ok"),
        ("v28-good.params", "ok"),
        ("v28-short.params", "truncated"),
    ];
    let expect: Vec<(String, String)> = expect
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(verdicts, expect);
    assert_eq!(j["files"][2]["got"], digest_of(&altered));

    // Only good files left: exit 0. No DIR: FIL_PROOFS_PARAMETER_CACHE's.
    for bad in ["v28-short.params", "v28-altered.params", "junk.vk"] {
        std::fs::remove_file(dir.join(bad)).unwrap();
    }
    let out = cuzk(&["params", "check", "--digests", t, "--full"], Some(&dir));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.starts_with(&format!("3 parameter files in {d}, checked against ")),
        "{stdout}"
    );
    assert!(
        line_of(&stdout, "mine.params").contains("in the subgroup"),
        "{stdout}"
    );

    // A directory that is not there: an error saying what to give.
    let out = cuzk(&["params", "check", "/nonexistent/params"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot list the parameter directory /nonexistent/params"),
        "{}",
        text(&out.stderr)
    );
}

fn line_of(stdout: &str, name: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name}: ")))
        .unwrap_or_default()
        .to_owned()
}
