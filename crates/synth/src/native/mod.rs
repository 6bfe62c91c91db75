//! Gadgets computed natively for witness generation: the same variables,
//! values and constraints as bellperson's gadgets, without building the
//! linear combinations a witness-only system throws away.
//!
//! - [`sha256`]: SHA-256 and its compression function, allocation for
//!   allocation the same as `bellperson::gadgets::sha256`.

pub mod sha256;
