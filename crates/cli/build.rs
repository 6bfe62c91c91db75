//! Generates the daemon's gRPC code with the protoc that
//! `protoc-bin-vendored` ships, so a fresh machine needs no system protoc:
//! cuzk's own interface (`proto/cuzk.proto`, into `OUT_DIR`) and the one
//! Curio's client speaks (`proto/curio/cuzk/v1/proving.proto`, into
//! `OUT_DIR/curio`). Both are package `cuzk.v1` with clashing message
//! names, so each is compiled on its own into its own directory and
//! included into its own module.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/cuzk.proto");
    println!("cargo:rerun-if-changed=proto/curio/cuzk/v1/proving.proto");
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded; nothing else reads the
        // environment concurrently.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    tonic_prost_build::configure().compile_protos(&["proto/cuzk.proto"], &["proto"])?;
    let curio =
        PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?).join("curio");
    std::fs::create_dir_all(&curio)?;
    tonic_prost_build::configure()
        .out_dir(&curio)
        .compile_protos(&["proto/curio/cuzk/v1/proving.proto"], &["proto/curio"])?;
    Ok(())
}
