//! The `cuzk` command line's library half: the daemon (`cuzk daemon`, a gRPC
//! service over the engine), its client, and the commands that use either.
//! `src/main.rs` parses the command line and dispatches here.

pub mod client;
pub mod commands;
pub mod daemon;

/// The generated gRPC types (`proto/cuzk.proto`).
pub mod proto {
    #![allow(missing_docs, missing_debug_implementations, clippy::all)]
    tonic::include_proto!("cuzk.v1");
}
