//! Page-locked (pinned) host buffers, pooled and reused.
//!
//! Copies between host and GPU run at the link's full speed only from
//! page-locked memory, and allocating page-locked memory is slow and
//! serializes in the driver. This crate will hold size-classed pools of
//! pinned buffers leased as RAII handles, with a capacity limit and stats,
//! and the same API over ordinary memory on machines without a GPU.
//!
//! It must never know about proofs, curves or circuits: it deals in bytes
//! and plain element types only.
