//! Filecoin inputs without a sealed sector, deterministic from a seed, for
//! proving at sizes nobody here can seal (32 GiB and 64 GiB): PoRep C1
//! outputs ([`generate`], [`generate_json`]), WinningPoSt / WindowPoSt
//! vanilla proofs ([`post_vanilla`], [`post_json`]) and SnapDeals partition
//! proofs ([`update_json`]). The PoRep and SnapDeals ones are checked with
//! storage-proofs' own vanilla verifier before they are returned; the
//! Merkle trees are kept as runs of equal leaves (`SparseTree`), so a
//! 32 GiB tree costs one hash per run and level.
//!
//! What the PoRep C1 is made of, and how it stays consistent:
//! - every node of the sector holds the same data value (a field element
//!   drawn from the seed), so tree_d is a full binary tree whose every
//!   level is one repeated hash: comm_d costs one hash per level, and the
//!   replica id (prover id, sector id, ticket, comm_d, porep id) and then
//!   the challenges of every partition follow as filecoin-proofs derives
//!   them;
//! - the labels of every challenged node are computed exactly as SDR
//!   computes them (SHA-256 of the replica id, layer, node and its 37
//!   parent labels: the 6 base parents of the same layer and, above layer
//!   1, the 8 expander parents of the layer below), from the columns of its
//!   parents; a parent that is not itself challenged gets a deterministic
//!   filler column, a challenged one its computed column (layer by layer,
//!   in node order, so one node's column is the same wherever it appears);
//! - the replica value of a challenged node is its last label plus its
//!   data (SDR's encoding);
//! - tree_c (column hashes) and tree_r_last (replica values) are sparse:
//!   the leaves of challenged nodes and their parents are real, every other
//!   leaf is one filler value, so only the nodes on the opened paths are
//!   hashed (the rest of each level is one repeated hash);
//! - comm_r = Poseidon(comm_c, comm_r_last), as storage-proofs computes it.
//!
//! The result is checked with storage-proofs' own vanilla verifier
//! (`verify_all_partitions`, the sanity check filecoin-proofs makes after
//! commit phase 1) before it is returned. Its C2 proofs are accepted by
//! `verify_seal` given the prover id and sector id returned with it.
//!
//! The parts: [`generate`] in `c1`, [`post_vanilla`] in `post`,
//! [`update_json`] in `update`, the run-length Merkle trees in
//! `sparse_tree`; the seed's field elements and fillers here.

mod c1;
mod post;
mod sparse_tree;
mod update;

use filecoin_hashers::Domain;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};

pub use c1::{SyntheticC1, SyntheticC1Json, generate, generate_json};
pub use post::{SyntheticPost, SyntheticPostJson, post_json, post_vanilla};
pub use update::{SyntheticUpdate, update_json};

const WHAT: &str = "synthetic C1";
/// 32 random bytes with the top two bits cleared: a canonical field element
/// (ids, tickets and seeds that filecoin-proofs may read as one).
fn field_bytes(rng: &mut ChaCha20Rng) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill(&mut b[..]);
    b[31] &= 0x3f;
    b
}

fn commitment<D: Domain>(d: &D) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Deterministic field elements from the seed's key.
struct Filler {
    key: [u8; 32],
}

impl Filler {
    /// The next 32 bytes of `rng` as the key.
    fn from_rng(rng: &mut ChaCha20Rng) -> Filler {
        let mut key = [0u8; 32];
        rng.fill(&mut key[..]);
        Filler { key }
    }

    /// SHA-256(tag, key, a, b) with its top two bits cleared: below 2^254,
    /// so always a canonical field element.
    fn repr(&self, tag: &[u8], a: u64, b: u64) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"cuzk synthetic C1 ");
        h.update(tag);
        h.update(self.key);
        h.update(a.to_le_bytes());
        h.update(b.to_le_bytes());
        let mut out: [u8; 32] = h.finalize().into();
        out[31] &= 0b0011_1111;
        out
    }
}
