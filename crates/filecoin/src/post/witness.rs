//! A PoSt partition's witness on every core: each sector's commitments
//! and each of its challenged inclusion paths are parts synthesized in
//! parallel straight into their places in the partition's witness, with
//! exactly the layout of storage-proofs' sequential synthesis of
//! `FallbackPoStCircuit` (`synthesize_default`).
//!
//! That synthesis is, for each sector in turn: the sector's head (aux
//! comm_r_last, comm_c, comm_r; comm_r made public, its one input; the
//! Poseidon hash of comm_c and comm_r_last) and then one inclusion path
//! per challenge (`PoRCircuit`, private: its root is not an input, its
//! leaf's index is, packed from the path's bits), each checked against
//! comm_r_last. No value is shared between sectors, and a path reads
//! nothing of its sector's head but comm_r_last's variable, which only
//! its constraints use; the witness system keeps no constraints, so a path
//! synthesized on its own, its root allocated on a scratch system, assigns
//! the same values as in place. The parts are, in order, sector 0's head,
//! its paths, sector 1's head, ...; every part is storage-proofs' own code
//! (the head is storage-proofs' `Sector` with no challenges), and each
//! part's inputs follow the earlier parts' ([`Witness::fill_sized_parts`]),
//! so the inputs are ONE, then each sector's comm_r followed by its
//! paths' indices, as sequentially.
//!
//! With [`native_poseidon`] on (the default) each path is synthesized by
//! [`crate::poseidon::inclusion`] from the vanilla proof's path
//! ([`PostCircuit`] keeps it): storage-proofs' `PoRCircuit` step by step,
//! its Poseidon hashes made natively (the same values, several times
//! faster; Poseidon is about 90% of the gadget's witness time). The heads
//! stay storage-proofs' code either way, and the tests compare both ways
//! with storage-proofs' sequential witness.
//!
//! A WindowPoSt partition has `sector_count` sectors of 10 challenges
//! (2,349 at 32 GiB), a WinningPoSt circuit 66 "sectors" of one challenge
//! (its one sector repeated): both have hundreds of parts or more.

use std::sync::atomic::{AtomicBool, Ordering};

use bellperson::ConstraintSystem;
use bellperson::SynthesisError;
use bellperson::gadgets::num::AllocatedNum;
use cuzk_synth::{PartCs, PartsGate, SynthError, Witness, WitnessCs};
use filecoin_hashers::poseidon::PoseidonHasher;
use rayon::prelude::*;
use storage_proofs_core::gadgets::por::PoRCircuit;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::Sector;

use super::PostCircuit;
use super::circuit::SectorPaths;

/// Whether PoSt witnesses make their inclusion paths' Poseidon natively
/// ([`set_native_poseidon`]); `None` until first read from
/// `CUZK_NATIVE_POSEIDON`.
static NATIVE_POSEIDON: std::sync::OnceLock<AtomicBool> = std::sync::OnceLock::new();

fn native_poseidon_flag() -> &'static AtomicBool {
    NATIVE_POSEIDON.get_or_init(|| {
        let off = std::env::var("CUZK_NATIVE_POSEIDON").is_ok_and(|v| v == "0" || v == "off");
        AtomicBool::new(!off)
    })
}

/// Turns the native Poseidon of PoSt witnesses ([`witness`]) on or off for
/// the process: on by default, `CUZK_NATIVE_POSEIDON=0` starts with it off
/// (storage-proofs' `PoRCircuit`, neptune's Poseidon gadget, for every
/// path). The witness is the same either way.
pub fn set_native_poseidon(on: bool) {
    native_poseidon_flag().store(on, Ordering::Relaxed);
}

/// Whether PoSt witnesses make their inclusion paths' Poseidon natively now.
pub fn native_poseidon() -> bool {
    native_poseidon_flag().load(Ordering::Relaxed)
}

/// One part of a partition's synthesis.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Sector `.0`'s commitments and their hash.
    Head(usize),
    /// Sector `.0`'s inclusion path of challenge `.1`.
    Path(usize, usize),
}

/// The witness of a PoSt partition with its sectors' heads and paths
/// synthesized in parallel on rayon's pool (see the module docs): exactly
/// the values of `Witness::synthesize_with_capacity(circuit, inputs,
/// aux)`, in the same order. With `aux` known (from the PCE) every part is
/// written straight into its place ([`Witness::fill_sized_parts`]);
/// `aux == 0` (unknown) synthesizes each part on a system of its own and
/// joins them ([`Witness::from_parts`]). Witnesses made at once start
/// their parts in the order they were asked for ([`PartsGate::global`]).
///
/// Refused with [`SynthError::PartMismatch`] where `aux` does not fit the
/// circuit's shape (sectors with unequal challenge counts or paths, or a
/// count that is not this circuit's): a wrong size is an error, never a
/// wrong witness.
///
/// The paths' Poseidon is made natively while [`native_poseidon`] is on.
pub fn witness<Tree: 'static + MerkleTreeTrait>(
    circuit: PostCircuit<Tree>,
    inputs: usize,
    aux: usize,
) -> cuzk_synth::Result<Witness> {
    witness_with(circuit, inputs, aux, native_poseidon())
}

/// [`witness`] with the inclusion paths made with their Poseidon made
/// natively ([`crate::poseidon::inclusion`]) or by storage-proofs'
/// `PoRCircuit`, as `native` says. Trees of another hasher than Poseidon
/// (no Filecoin sector has one) are always storage-proofs'.
pub fn witness_with<Tree: 'static + MerkleTreeTrait>(
    circuit: PostCircuit<Tree>,
    inputs: usize,
    aux: usize,
    native: bool,
) -> cuzk_synth::Result<Witness> {
    let native = native
        && std::any::TypeId::of::<Tree::Hasher>() == std::any::TypeId::of::<PoseidonHasher>();
    let (sectors, paths) = circuit.into_parts();
    let paths = if native { Some(&*paths) } else { None };
    let parts: Vec<Part> = sectors
        .iter()
        .enumerate()
        .flat_map(|(s, sector)| {
            std::iter::once(Part::Head(s))
                .chain((0..sector.leafs.len()).map(move |c| Part::Path(s, c)))
        })
        .collect();
    let _s = tracing::info_span!(
        "witness",
        aux,
        sectors = sectors.len(),
        parts = parts.len(),
        native
    )
    .entered();
    let synth = |cs: &mut PartCs<'_>, part: Part| -> cuzk_synth::Result<()> {
        Ok(synthesize_part(cs, &sectors, paths, part)?)
    };
    let cs = WitnessCs::with_capacity(inputs, aux);
    let pass = PartsGate::global().try_enter(parts.len())?;
    if aux > 0 {
        let sized = sizes(&sectors, aux)?;
        let sized = parts
            .into_iter()
            .map(|p| match p {
                Part::Head(_) => (sized.head, p),
                Part::Path(..) => (sized.path, p),
            })
            .collect();
        let w = cs.into_witness().fill_sized_parts(sized, |cs, part| {
            let done = synth(cs, part);
            pass.part_done();
            done
        });
        drop(pass);
        return w;
    }
    let done = parts
        .into_par_iter()
        .map(|part| {
            let mut cs = WitnessCs::part();
            let done = synthesize_part(&mut cs, &sectors, paths, part);
            pass.part_done();
            done?;
            Ok(cs.into_witness())
        })
        .collect::<cuzk_synth::Result<Vec<_>>>()?;
    drop(pass);
    Witness::from_parts(cs.into_witness(), done, inputs, aux)
}

/// Aux values of one sector head and of one inclusion path.
struct Sizes {
    head: usize,
    path: usize,
}

/// The part sizes of a partition of `aux` values: the head's by
/// synthesizing sector 0's head (a few hundred values), the paths' as
/// what is left of a sector's equal share, split evenly.
fn sizes<Tree: 'static + MerkleTreeTrait>(
    sectors: &[Sector<Tree>],
    aux: usize,
) -> cuzk_synth::Result<Sizes> {
    let bad = |part| SynthError::PartMismatch {
        part,
        what: "aux count",
    };
    let Some(first) = sectors.first() else {
        return if aux == 0 {
            Ok(Sizes { head: 0, path: 0 })
        } else {
            Err(bad(0))
        };
    };
    let challenges = first.leafs.len();
    if let Some(s) = sectors
        .iter()
        .position(|s| s.leafs.len() != challenges || s.paths.len() != challenges)
    {
        return Err(bad(s));
    }
    let mut cs = WitnessCs::part();
    synthesize_part(&mut cs, sectors, None, Part::Head(0))?;
    let head = cs.aux_len();
    let n = sectors.len();
    let per_sector = aux.is_multiple_of(n).then_some(aux / n).ok_or(bad(0))?;
    let paths = per_sector.checked_sub(head).ok_or(bad(0))?;
    let path = match challenges {
        0 if paths == 0 => 0,
        0 => return Err(bad(0)),
        k if paths.is_multiple_of(k) => paths / k,
        _ => return Err(bad(0)),
    };
    Ok(Sizes { head, path })
}

/// Synthesizes one part as storage-proofs does in place; with `paths` (the
/// sectors' paths as the vanilla proofs hold them), a path natively.
fn synthesize_part<Tree, CS>(
    cs: &mut CS,
    sectors: &[Sector<Tree>],
    paths: Option<&SectorPaths>,
    part: Part,
) -> Result<(), SynthesisError>
where
    Tree: 'static + MerkleTreeTrait,
    CS: ConstraintSystem<blstrs::Scalar>,
{
    match part {
        Part::Head(s) => {
            let sector = &sectors[s];
            let head = Sector::<Tree> {
                comm_r: sector.comm_r,
                comm_c: sector.comm_c,
                comm_r_last: sector.comm_r_last,
                leafs: Vec::new(),
                paths: Vec::new(),
                id: sector.id,
            };
            bellperson::Circuit::synthesize(&head, cs)
        }
        Part::Path(s, c) => {
            let sector = &sectors[s];
            // The root's variable is only read by the path's constraints,
            // which the witness system drops: a scratch allocation stands
            // for the head's comm_r_last.
            let root = AllocatedNum::alloc(WitnessCs::part(), || {
                sector.comm_r_last.ok_or(SynthesisError::AssignmentMissing)
            })?;
            let cs = cs.namespace(|| format!("challenge_inclusion_{c}"));
            match paths {
                Some(paths) => {
                    let path = paths.get(s).and_then(|p| p.get(c)).ok_or_else(|| {
                        SynthesisError::IoError(std::io::Error::other(format!(
                            "no vanilla path for sector {s}'s challenge {c}"
                        )))
                    })?;
                    crate::poseidon::inclusion::<
                        Tree::Arity,
                        Tree::SubTreeArity,
                        Tree::TopTreeArity,
                        _,
                    >(cs, Root::Val(sector.leafs[c]), path, Root::Var(root))
                }
                None => PoRCircuit::<Tree>::synthesize(
                    cs,
                    Root::Val(sector.leafs[c]),
                    sector.paths[c].clone(),
                    Root::Var(root),
                    true,
                ),
            }
        }
    }
}
