//! The bundle's `run.sh`: the script that unpacks the payload and runs the
//! tests on the GPU machine, with the build root filled in.

use std::{fs, path::Path};

use anyhow::Result;

use super::files::make_executable;

/// The run script, with `@BUILD_ROOT@` replaced by the workspace root.
const RUN_SH: &str = include_str!("../bundle_run.sh");

/// `dir/run.sh`, with the build root filled in.
pub(super) fn write_run_sh(dir: &Path, root: &Path) -> Result<()> {
    let script = RUN_SH.replace("@BUILD_ROOT@", &root.display().to_string());
    let run_sh = dir.join("run.sh");
    fs::write(&run_sh, script)?;
    make_executable(&run_sh)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::bundle::payload::{PAYLOAD, pack};

    #[test]
    fn run_script_parses() {
        assert!(RUN_SH.starts_with("#!/usr/bin/env bash\n"));
        assert!(RUN_SH.contains("@BUILD_ROOT@"));
        // bash -n parses the script without running it.
        let script = RUN_SH.replace("@BUILD_ROOT@", "/ws");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sh");
        fs::write(&path, script).unwrap();
        let status = Command::new("bash").arg("-n").arg(&path).status().unwrap();
        assert!(status.success(), "run.sh does not parse");
    }

    /// A bundle of one fake test executable that prints the environment it
    /// was given, packed and run as on the GPU machine: what run.sh really
    /// sets, not what its text mentions.
    #[cfg(unix)]
    #[test]
    fn run_script_requires_the_gpu_by_default() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        fs::create_dir_all(root.join("crates/fake")).unwrap();
        let staging = root.join("staging");
        fs::create_dir_all(staging.join("tests")).unwrap();
        fs::create_dir_all(staging.join("bin")).unwrap();
        fs::write(
            staging.join("tests.tsv"),
            "# name\tcrate dir\tkind\nfake.test.env\tcrates/fake\ttest\n",
        )
        .unwrap();
        fs::write(staging.join("bins.tsv"), "# bundle path\texpected\n").unwrap();
        let test = staging.join("tests/fake.test.env");
        fs::write(
            &test,
            "#!/bin/sh\necho \"require=${CUZK_REQUIRE_GPU-unset} dir=$(basename \"$PWD\")\"\n\
             echo 'test result: ok. 3 passed; 0 failed; 0 ignored'\n",
        )
        .unwrap();
        make_executable(&test).unwrap();
        let cuzk = staging.join("bin/cuzk");
        fs::write(&cuzk, "#!/bin/sh\nexit 0\n").unwrap();
        make_executable(&cuzk).unwrap();
        let bundle = root.join(".device/bundle");
        fs::create_dir_all(&bundle).unwrap();
        pack(&staging, &bundle.join(PAYLOAD)).unwrap();
        write_run_sh(&bundle, root).unwrap();

        let run = |require: Option<&str>| -> (bool, String, String) {
            let out = root.join(format!("out-{}", require.unwrap_or("default")));
            let mut command = Command::new("bash");
            command
                .arg(bundle.join("run.sh"))
                .arg("fake.test")
                .current_dir(root)
                .env("OUT", &out)
                .env("TMPDIR", root)
                .env_remove("CUZK_REQUIRE_GPU");
            if let Some(v) = require {
                command.env("CUZK_REQUIRE_GPU", v);
            }
            let status = command.status().unwrap();
            let log = fs::read_to_string(out.join("fake.test.env.log")).unwrap_or_default();
            let summary = fs::read_to_string(out.join("summary.txt")).unwrap_or_default();
            (status.success(), log, summary)
        };
        let (ok, log, summary) = run(None);
        assert!(ok, "{summary}");
        assert!(log.contains("require=1 dir=fake"), "{log}");
        assert!(summary.contains("CUZK_REQUIRE_GPU=1"), "{summary}");
        assert!(
            summary.contains("PASS  fake.test.env") && summary.contains("3 passed, 0 failed"),
            "{summary}"
        );
        // An explicit setting is passed on as it is.
        let (ok, log, _) = run(Some("0"));
        assert!(ok);
        assert!(log.contains("require=0 dir=fake"), "{log}");
    }
}
