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
//! A WindowPoSt partition has `sector_count` sectors of 10 challenges
//! (2,349 at 32 GiB), a WinningPoSt circuit 66 "sectors" of one challenge
//! (its one sector repeated): both have hundreds of parts or more.

use bellperson::ConstraintSystem;
use bellperson::SynthesisError;
use bellperson::gadgets::num::AllocatedNum;
use cuzk_synth::{PartCs, PartsGate, SynthError, Witness, WitnessCs};
use rayon::prelude::*;
use storage_proofs_core::gadgets::por::PoRCircuit;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::Sector;

use super::PostCircuit;

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
pub fn witness<Tree: 'static + MerkleTreeTrait>(
    circuit: PostCircuit<Tree>,
    inputs: usize,
    aux: usize,
) -> cuzk_synth::Result<Witness> {
    let sectors = circuit.sectors;
    let parts: Vec<Part> = sectors
        .iter()
        .enumerate()
        .flat_map(|(s, sector)| {
            std::iter::once(Part::Head(s))
                .chain((0..sector.leafs.len()).map(move |c| Part::Path(s, c)))
        })
        .collect();
    let _s =
        tracing::info_span!("witness", aux, sectors = sectors.len(), parts = parts.len()).entered();
    let synth = |cs: &mut PartCs<'_>, part: Part| -> cuzk_synth::Result<()> {
        Ok(synthesize_part(cs, &sectors, part)?)
    };
    let cs = WitnessCs::with_capacity(inputs, aux);
    let pass = PartsGate::global().enter(parts.len());
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
            let done = synthesize_part(&mut cs, &sectors, part);
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
    synthesize_part(&mut cs, sectors, Part::Head(0))?;
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

/// Synthesizes one part as storage-proofs does in place.
fn synthesize_part<Tree, CS>(
    cs: &mut CS,
    sectors: &[Sector<Tree>],
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
            PoRCircuit::<Tree>::synthesize(
                cs.namespace(|| format!("challenge_inclusion_{c}")),
                Root::Val(sector.leafs[c]),
                sector.paths[c].clone(),
                Root::Var(root),
                true,
            )
        }
    }
}
