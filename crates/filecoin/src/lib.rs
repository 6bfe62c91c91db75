//! Filecoin's circuits proved through the cuzk engine: PoRep commit phase 2
//! from a C1 output ([`porep`]), WinningPoSt and WindowPoSt from vanilla
//! proofs ([`post`]), and SnapDeals (empty sector update) from its vanilla
//! partition proofs ([`update`]).
//!
//! The circuits, public inputs and proof layout are storage-proofs' own
//! (`CompoundProof::circuit` for each partition, proofs concatenated as
//! `MultiProof::write`), so filecoin-proofs' verifiers (`verify_seal`,
//! `verify_winning_post`, `verify_window_post`,
//! `verify_empty_sector_update_proof`) accept the result; only the Groth16
//! proving runs on [`cuzk_engine::Engine`], on whichever backend it has.
//! With the same (r, s), every partition proof is byte for byte
//! bellperson's. Engine priorities: WinningPoSt CRITICAL, WindowPoSt HIGH,
//! PoRep C2 and SnapDeals NORMAL.
//!
//! filecoin-proofs and storage-proofs are used with their GPU features off:
//! this crate must never make them load OpenCL or CUDA code of their own.
//! Parameters follow filecoin-proofs' cache conventions ([`params`]) and
//! are checked against its published digests ([`params_check`]);
//! seeded test parameters are generated only into directories the caller
//! names, never the production cache.

/// Runs `$f::<Tree>($args)` with the Merkle tree type of sector size
/// `$size` (a [`SectorSize`]).
macro_rules! with_tree {
    ($size:expr, $f:ident($($args:expr),*)) => {
        match $size.shape() {
            $crate::sector::Shape::Base => $f::<filecoin_proofs::SectorShapeBase>($($args),*),
            $crate::sector::Shape::Sub2 => $f::<filecoin_proofs::SectorShapeSub2>($($args),*),
            $crate::sector::Shape::Sub8 => $f::<filecoin_proofs::SectorShapeSub8>($($args),*),
            $crate::sector::Shape::Top2 => $f::<filecoin_proofs::SectorShapeTop2>($($args),*),
        }
    };
}

mod challenge;
pub mod error;
pub mod params;
pub mod params_check;
pub mod porep;
pub mod poseidon;
pub mod post;
pub mod prove;
pub mod sector;
pub mod synthetic;
pub mod testing;
pub mod update;
pub mod vanilla;

pub use error::{FilecoinError, Result};
pub use params::ParamFiles;
pub use porep::{C1Output, C2Proof};
pub use prove::{
    BlankPce, Partitions, PartitionsVisitor, proofs_from_bytes, proofs_to_bytes, shape_id,
};
pub use sector::{PostKind, PostProof, SealProof, SealVersion, SectorSize, UpdateProof};
pub use update::UpdateInput;
pub use vanilla::VanillaEncoding;
