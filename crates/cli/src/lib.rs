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

/// The generated gRPC types of Curio's interface
/// (`proto/curio/cuzk/v1/proving.proto`, service `cuzk.v1.ProvingEngine`),
/// which the daemon also serves (`daemon::curio`).
pub mod curio_proto {
    #![allow(missing_docs, missing_debug_implementations, clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/curio/cuzk.v1.rs"));
}
