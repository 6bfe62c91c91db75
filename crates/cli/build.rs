//! Generates the daemon's gRPC code from `proto/cuzk.proto` with the protoc
//! that `protoc-bin-vendored` ships, so a fresh machine needs no system
//! protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/cuzk.proto");
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded; nothing else reads the
        // environment concurrently.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    tonic_prost_build::configure().compile_protos(&["proto/cuzk.proto"], &["proto"])?;
    Ok(())
}
