//! Facts every bench-data file records about the run, shared by the
//! benchmark examples (`#[path]`-included; not an example itself).

/// Today's date as `YYYY-MM-DD`, or empty when `date` is unavailable.
pub fn today() -> String {
    command_line("date", &["+%Y-%m-%d"])
}

/// The NVIDIA driver version from nvidia-smi, or empty without it.
pub fn driver_version() -> String {
    command_line(
        "nvidia-smi",
        &["--query-gpu=driver_version", "--format=csv,noheader"],
    )
}

/// The first line a command prints, trimmed; empty when it cannot run.
fn command_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.lines().next().unwrap_or("").trim().to_owned())
        .unwrap_or_default()
}
