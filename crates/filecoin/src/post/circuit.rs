//! The circuit of one PoSt partition: storage-proofs' `FallbackPoStCircuit`,
//! synthesized by storage-proofs' own code (what bellperson proves and the
//! PCE is recorded from), plus each challenge's inclusion path as the
//! partition's vanilla proof holds it, which the native witness reads
//! (storage-proofs' `AuthPath` keeps its levels private).

use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{self, FallbackPoStCircuit, Sector};

use crate::error::{FilecoinError, Result};
use crate::poseidon::PathOptions;

/// Each sector's inclusion paths, in challenge order.
pub(super) type SectorPaths = Vec<Vec<PathOptions>>;

/// The circuit of one PoSt partition (see the module documentation).
/// Cloning it clones storage-proofs' circuit; the paths are shared.
pub struct PostCircuit<Tree: 'static + MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    /// `paths[s][c]`: sector `s`'s path of challenge `c`, the path of
    /// `circuit.sectors[s].paths[c]`.
    paths: Arc<SectorPaths>,
}

impl<Tree: 'static + MerkleTreeTrait> PostCircuit<Tree> {
    /// `circuit` as `FallbackPoStCompound::circuit` made it from `vanilla`,
    /// the partition's vanilla proof: its circuit sector `s` is the vanilla
    /// proof's sector `s` (padding repeats the last public sector, never a
    /// vanilla one), each path that sector's inclusion proof.
    pub(crate) fn new(
        circuit: FallbackPoStCircuit<Tree>,
        vanilla: &fallback::Proof<Tree::Proof>,
    ) -> Result<PostCircuit<Tree>> {
        let bad = |message: String| FilecoinError::Proofs {
            context: "building a PoSt partition circuit",
            message,
        };
        if circuit.sectors.len() != vanilla.sectors.len() {
            return Err(bad(format!(
                "{} circuit sectors for {} vanilla sector proofs",
                circuit.sectors.len(),
                vanilla.sectors.len()
            )));
        }
        let paths: SectorPaths = vanilla.sectors.iter().map(|s| s.as_options()).collect();
        for (s, (sector, paths)) in circuit.sectors.iter().zip(&paths).enumerate() {
            if sector.paths.len() != paths.len() || sector.leafs.len() != paths.len() {
                return Err(bad(format!(
                    "sector {s}: {} circuit paths for {} inclusion proofs",
                    sector.paths.len(),
                    paths.len()
                )));
            }
        }
        Ok(PostCircuit {
            circuit,
            paths: Arc::new(paths),
        })
    }

    /// The partition's sectors, as storage-proofs' circuit holds them.
    pub fn sectors(&self) -> &[Sector<Tree>] {
        &self.circuit.sectors
    }

    /// Keeps the first `n` sectors (to measure a part of a partition).
    pub fn truncate_sectors(&mut self, n: usize) {
        self.circuit.sectors.truncate(n);
        if self.paths.len() > n {
            Arc::make_mut(&mut self.paths).truncate(n);
        }
    }

    /// Keeps the first `n` challenges of sector `sector` (none past the
    /// last sector).
    pub fn truncate_challenges(&mut self, sector: usize, n: usize) {
        if let Some(s) = self.circuit.sectors.get_mut(sector) {
            s.leafs.truncate(n);
            s.paths.truncate(n);
        }
        if self.paths.get(sector).is_some_and(|p| p.len() > n) {
            Arc::make_mut(&mut self.paths)[sector].truncate(n);
        }
    }

    /// storage-proofs' circuit.
    pub fn storage_proofs(&self) -> &FallbackPoStCircuit<Tree> {
        &self.circuit
    }

    /// The sectors and their paths, for the witness.
    pub(super) fn into_parts(self) -> (Vec<Sector<Tree>>, Arc<SectorPaths>) {
        (self.circuit.sectors, self.paths)
    }
}

impl<Tree: 'static + MerkleTreeTrait> Clone for PostCircuit<Tree> {
    fn clone(&self) -> Self {
        PostCircuit {
            circuit: self.circuit.clone(),
            paths: Arc::clone(&self.paths),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> std::fmt::Debug for PostCircuit<Tree> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostCircuit")
            .field("sectors", &self.circuit.sectors.len())
            .finish_non_exhaustive()
    }
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for PostCircuit<Tree> {
    /// storage-proofs' synthesis of the partition (`FallbackPoStCircuit`'s).
    fn synthesize<CS: ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> std::result::Result<(), SynthesisError> {
        self.circuit.synthesize(cs)
    }
}
