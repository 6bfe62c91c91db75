//! Gadgets computed natively for witness generation: the same variables,
//! values and constraints as bellperson's gadgets, without building the
//! linear combinations a witness-only system throws away.
//!
//! - [`sha256`]: SHA-256 and its compression function, allocation for
//!   allocation the same as `bellperson::gadgets::sha256`, on the 32-bit
//!   words of `uint32` and the packed additions of `multieq`.

mod multieq;
pub mod sha256;
mod uint32;
