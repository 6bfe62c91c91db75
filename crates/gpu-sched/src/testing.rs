//! The one helper every GPU test calls, so that tests skip cleanly on
//! machines without a GPU and fail loudly on the GPU machine.
//!
//! ```no_run
//! use cuzk_gpu_sched::testing::gpu_or_skip;
//!
//! #[test]
//! fn msm_matches_cpu() {
//!     let Some(devs) = gpu_or_skip("msm_matches_cpu") else { return };
//!     // ... run on devs[0], compare with the CPU twin ...
//! # let _ = devs;
//! }
//! ```
//!
//! Without a device, [`gpu_or_skip`] prints
//! `skipping msm_matches_cpu: no CUDA device (<reason>)` to stderr (shown by
//! `cargo test -- --nocapture`) and the test returns early and passes. With
//! `CUZK_REQUIRE_GPU=1` (set on the GPU machine) a missing device is a panic
//! instead, so a broken driver cannot turn the GPU test suite into skips.
//! GPU tests never use the ignore attribute: they skip through this helper.

use crate::{DeviceInfo, Result, device::Probe};

/// Environment variable that turns "no GPU" from a skip into a failure.
pub const REQUIRE_GPU_ENV: &str = "CUZK_REQUIRE_GPU";

/// Returns the CUDA devices when there is at least one; otherwise reports
/// the skip on stderr and returns `None`.
///
/// # Panics
/// When no device is found (or discovery fails) and `CUZK_REQUIRE_GPU=1`,
/// and when `CUZK_REQUIRE_GPU` holds anything but `0`, `1` or nothing.
pub fn gpu_or_skip(test_name: &str) -> Option<Vec<DeviceInfo>> {
    let require = std::env::var(REQUIRE_GPU_ENV).ok();
    let require_gpu = match parse_require_gpu(require.as_deref()) {
        Ok(required) => required,
        Err(message) => panic!("{test_name}: {message}"),
    };
    match decide(test_name, require_gpu, crate::device::probe()) {
        Decision::Run(devices) => Some(devices),
        Decision::Skip { reason } => {
            eprintln!("skipping {test_name}: no CUDA device ({reason})");
            None
        }
    }
}

/// Environment variable naming how many CUDA devices the machine has for
/// tests that need several: with `CUZK_REQUIRE_GPUS=2`, a test asking
/// [`gpus_or_skip`] for two devices fails when fewer are usable instead of
/// skipping (set it on a machine with two GPUs; a one-GPU machine leaves it
/// unset and such tests skip there with the reason).
pub const REQUIRE_GPUS_ENV: &str = "CUZK_REQUIRE_GPUS";

/// As [`gpu_or_skip`], for a test that needs at least `count` devices:
/// returns them (all that are usable) when there are that many; with fewer,
/// prints `skipping <test>: needs <count> CUDA devices, <n> usable` and
/// returns `None`, or panics when `CUZK_REQUIRE_GPUS` asks for `count` or
/// more. No device at all is [`gpu_or_skip`]'s case (a panic with
/// `CUZK_REQUIRE_GPU=1`).
///
/// # Panics
/// As described, and when `CUZK_REQUIRE_GPUS` is not a number.
pub fn gpus_or_skip(test_name: &str, count: usize) -> Option<Vec<DeviceInfo>> {
    let required = match parse_require_gpus(std::env::var(REQUIRE_GPUS_ENV).ok().as_deref()) {
        Ok(required) => required,
        Err(message) => panic!("{test_name}: {message}"),
    };
    let devices = gpu_or_skip(test_name)?;
    match decide_count(test_name, count, required, devices) {
        Decision::Run(devices) => Some(devices),
        Decision::Skip { reason } => {
            eprintln!("skipping {test_name}: {reason}");
            None
        }
    }
}

fn parse_require_gpus(value: Option<&str>) -> std::result::Result<usize, String> {
    match value {
        None | Some("") => Ok(0),
        Some(text) => text
            .parse()
            .map_err(|_| format!("{REQUIRE_GPUS_ENV} must be a device count, not {text:?}")),
    }
}

/// [`gpus_or_skip`]'s policy once at least one device is usable.
fn decide_count(
    test_name: &str,
    count: usize,
    required: usize,
    devices: Vec<DeviceInfo>,
) -> Decision {
    if devices.len() >= count {
        return Decision::Run(devices);
    }
    let reason = format!("needs {count} CUDA devices, {} usable", devices.len());
    if required >= count {
        panic!("{test_name}: {reason}, and {REQUIRE_GPUS_ENV}={required} requires them");
    }
    Decision::Skip { reason }
}

/// For tests that run on whichever backend the machine has (an engine with
/// `backend = "auto"`, `cuzk demo`): whether they must have run on the GPU.
/// `true` when a CUDA device is usable; without one, `false` after printing
/// `<test_name>: no CUDA device (<reason>): expecting the CPU backend`.
/// Such a test asserts the backend that ran against this, so a GPU path
/// that quietly fell back to the CPU fails it on the GPU machine.
///
/// # Panics
/// As [`gpu_or_skip`]: with `CUZK_REQUIRE_GPU=1` and no usable device.
pub fn gpu_expected(test_name: &str) -> bool {
    let require = std::env::var(REQUIRE_GPU_ENV).ok();
    let require_gpu = match parse_require_gpu(require.as_deref()) {
        Ok(required) => required,
        Err(message) => panic!("{test_name}: {message}"),
    };
    match decide(test_name, require_gpu, crate::device::probe()) {
        Decision::Run(_) => true,
        Decision::Skip { reason } => {
            eprintln!("{test_name}: no CUDA device ({reason}): expecting the CPU backend");
            false
        }
    }
}

/// The variable that marks a child process [`alone_in_process`] started.
const ALONE_ENV: &str = "CUZK_TEST_ALONE";

/// For a test that needs its process to itself (a process-wide device
/// limit, a count over all of the process's threads) inside a test
/// executable that holds many tests: in the test harness's process it runs
/// this executable again with only `test_path` (the test's full name, e.g.
/// `dispatch_idle::the_dispatcher_sleeps`), on one thread, waits for it,
/// prints its output and returns `false`; in that child it returns `true`.
/// So a test starts with `if !alone_in_process("module::name") { return; }`
/// and its body runs once, alone in a process.
///
/// # Panics
/// In the parent, when the child cannot start, fails, or did not run
/// exactly that one test.
pub fn alone_in_process(test_path: &str) -> bool {
    if std::env::var(ALONE_ENV).as_deref() == Ok(test_path) {
        return true;
    }
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("{test_path}: cannot find this test executable: {e}"));
    let out = std::process::Command::new(&exe)
        .args([test_path, "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE_ENV, test_path)
        .output()
        .unwrap_or_else(|e| panic!("{test_path}: cannot run {} again: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{test_path}, alone in process {}:\n{stdout}", exe.display());
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "{test_path} failed alone in its own process ({})",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{test_path}: the child process did not run exactly this test"
    );
    false
}

#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Run(Vec<DeviceInfo>),
    Skip { reason: String },
}

fn parse_require_gpu(value: Option<&str>) -> std::result::Result<bool, String> {
    match value {
        None | Some("" | "0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(format!("{REQUIRE_GPU_ENV} must be 0 or 1, not {other:?}")),
    }
}

/// The whole policy, free of environment and driver so it can be tested.
fn decide(test_name: &str, require_gpu: bool, found: Result<Probe>) -> Decision {
    let reason = match found {
        Ok(probe) => match probe.no_gpu_reason() {
            Some(reason) => reason.to_owned(),
            None => return Decision::Run(probe.devices().to_vec()),
        },
        Err(error) => error.to_string(),
    };
    if require_gpu {
        panic!(
            "{test_name}: a CUDA device is required ({REQUIRE_GPU_ENV}=1) but none is usable: {reason}"
        );
    }
    Decision::Skip { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CUresult, GpuSchedError};

    fn h200() -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            total_memory_bytes: 150_110_011_392,
            compute_capability: (9, 0),
            multiprocessors: 132,
        }
    }

    fn init_failed() -> GpuSchedError {
        GpuSchedError::Driver {
            call: "cuInit",
            code: CUresult::CUDA_ERROR_UNKNOWN,
        }
    }

    #[test]
    fn no_device_not_required_skips() {
        let decision = decide("t", false, Ok(Probe::Devices(vec![])));
        assert!(matches!(decision, Decision::Skip { .. }), "{decision:?}");
        let decision = decide("t", false, Ok(Probe::NoDriverLibrary));
        assert_eq!(
            decision,
            Decision::Skip {
                reason: "CUDA driver library (libcuda) not found".into()
            }
        );
    }

    #[test]
    #[should_panic(expected = "t: a CUDA device is required (CUZK_REQUIRE_GPU=1)")]
    fn no_device_required_panics() {
        decide("t", true, Ok(Probe::Devices(vec![])));
    }

    #[test]
    #[should_panic(expected = "a CUDA device is required (CUZK_REQUIRE_GPU=1)")]
    fn no_driver_required_panics() {
        decide("t", true, Ok(Probe::NoDriverLibrary));
    }

    #[test]
    #[should_panic(
        expected = "but none is usable: CUDA driver call cuInit failed: CUDA_ERROR_UNKNOWN"
    )]
    fn discovery_error_required_panics() {
        decide("t", true, Err(init_failed()));
    }

    #[test]
    fn discovery_error_not_required_skips_with_the_call() {
        // The driver's own text for the error needs libcuda, so only check
        // the part this crate writes.
        let Decision::Skip { reason } = decide("t", false, Err(init_failed())) else {
            panic!("expected a skip");
        };
        assert!(
            reason.starts_with("CUDA driver call cuInit failed: "),
            "{reason}"
        );
    }

    #[test]
    fn devices_run() {
        for require_gpu in [false, true] {
            let decision = decide("t", require_gpu, Ok(Probe::Devices(vec![h200()])));
            assert_eq!(decision, Decision::Run(vec![h200()]));
        }
    }

    fn second(mut d: DeviceInfo) -> DeviceInfo {
        d.ordinal = 1;
        d
    }

    #[test]
    fn enough_devices_run_whatever_is_required() {
        for required in [0, 1, 2, 3] {
            let both = vec![h200(), second(h200())];
            assert_eq!(
                decide_count("t", 2, required, both.clone()),
                Decision::Run(both)
            );
        }
    }

    #[test]
    fn too_few_devices_skip_with_the_counts_when_not_required() {
        for required in [0, 1] {
            assert_eq!(
                decide_count("t", 2, required, vec![h200()]),
                Decision::Skip {
                    reason: "needs 2 CUDA devices, 1 usable".into()
                }
            );
        }
    }

    #[test]
    #[should_panic(
        expected = "t: needs 2 CUDA devices, 1 usable, and CUZK_REQUIRE_GPUS=2 requires them"
    )]
    fn too_few_devices_panic_when_required() {
        decide_count("t", 2, 2, vec![h200()]);
    }

    #[test]
    fn require_gpus_values() {
        assert_eq!(parse_require_gpus(None), Ok(0));
        assert_eq!(parse_require_gpus(Some("")), Ok(0));
        assert_eq!(parse_require_gpus(Some("2")), Ok(2));
        assert!(parse_require_gpus(Some("two")).is_err());
    }

    #[test]
    fn require_gpu_values() {
        assert_eq!(parse_require_gpu(None), Ok(false));
        assert_eq!(parse_require_gpu(Some("")), Ok(false));
        assert_eq!(parse_require_gpu(Some("0")), Ok(false));
        assert_eq!(parse_require_gpu(Some("1")), Ok(true));
        assert!(parse_require_gpu(Some("yes")).is_err());
    }
}
