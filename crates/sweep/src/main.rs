//! `cuzk-sweep run ...` / `cuzk-sweep plot JSON...`; see the crate docs and
//! docs/BENCHMARKS.md.

use std::process::ExitCode;

fn main() -> ExitCode {
    match cuzk_sweep::cli::main_with(std::env::args_os()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
