//! Merkle trees kept as runs of equal nodes ([`SparseTree`]) and the
//! shape of a sector's trees ([`tree_shape`]).

use std::collections::BTreeMap;

use filecoin_hashers::Hasher;
use merkletree::hash::Algorithm;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use typenum::Unsigned;

use crate::error::{FilecoinError, Result};

use super::WHAT;

/// The arity of every level of `Tree`'s tree over `nodes` leaves (bottom
/// up) and how many levels each path segment (base, sub, top) has.
pub(super) fn tree_shape<Tree: MerkleTreeTrait>(nodes: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let base = Tree::Arity::to_usize();
    let sub = Tree::SubTreeArity::to_usize();
    let top = Tree::TopTreeArity::to_usize();
    let mut per_base = nodes / sub.max(1) / top.max(1);
    let mut height = 0;
    while per_base > 1 && per_base.is_multiple_of(base) {
        per_base /= base;
        height += 1;
    }
    if per_base != 1 {
        return Err(FilecoinError::BadInput {
            what: WHAT,
            detail: format!("{nodes} nodes do not make a tree of arities {base}/{sub}/{top}"),
        });
    }
    let mut arities = vec![base; height];
    let mut segments = vec![height];
    for extra in [sub, top] {
        if extra > 0 {
            arities.push(extra);
            segments.push(1);
        }
    }
    Ok((arities, segments))
}

/// A Merkle tree kept as runs: each level is a list of runs of equal
/// nodes, so a tree whose leaves are one filler value except at a few
/// places (or a few long runs of equal values) costs one hash per run and
/// level, never one per node.
pub(super) struct SparseTree<H: Hasher> {
    arities: Vec<usize>,
    /// levels[l]: (first index, value) of each run, in index order; a run
    /// ends where the next begins (the last at the level's end).
    levels: Vec<Vec<(usize, H::Domain)>>,
}

impl<H: Hasher> SparseTree<H> {
    /// Every leaf `filler` except `leaves`. `arities` per level (bottom
    /// up); `segments`: levels per path segment (the hash's height counts
    /// from 0 in each, as storage-proofs' inclusion paths do).
    pub(super) fn new(
        arities: &[usize],
        segments: &[usize],
        filler: H::Domain,
        leaves: BTreeMap<usize, H::Domain>,
    ) -> Result<Self> {
        let total: usize = arities.iter().product();
        let mut runs = vec![(0, filler)];
        for (&i, &v) in &leaves {
            if i >= total {
                return Err(FilecoinError::BadInput {
                    what: WHAT,
                    detail: format!("leaf {i} outside a tree of {total} leaves"),
                });
            }
            push_run(&mut runs, i, v);
            if i + 1 < total {
                push_run(&mut runs, i + 1, filler);
            }
        }
        Self::from_runs(arities, segments, runs)
    }

    /// Leaves given as runs: (first index, value), starting at 0, in order.
    pub(super) fn from_runs(
        arities: &[usize],
        segments: &[usize],
        leaves: Vec<(usize, H::Domain)>,
    ) -> Result<Self> {
        let total: usize = arities.iter().product();
        let ordered = leaves.windows(2).all(|w| w[0].0 < w[1].0);
        if leaves.first().map(|r| r.0) != Some(0) || !ordered || leaves.iter().any(|r| r.0 >= total)
        {
            return Err(FilecoinError::BadInput {
                what: WHAT,
                detail: format!("leaf runs that do not tile a tree of {total} leaves"),
            });
        }
        let heights: Vec<usize> = segments.iter().flat_map(|&n| 0..n).collect();
        let mut f = H::Function::default();
        let mut levels = vec![leaves];
        let mut len = total;
        for (l, &arity) in arities.iter().enumerate() {
            let below = &levels[l];
            let mut above: Vec<(usize, H::Domain)> = Vec::new();
            let mut whole: std::collections::HashMap<H::Domain, H::Domain> = Default::default();
            let groups = len / arity;
            let mut g = 0;
            while g < groups {
                let first = g * arity;
                let i = below.partition_point(|r| r.0 <= first) - 1;
                let run_end = below.get(i + 1).map_or(len, |r| r.0);
                if (g + 1) * arity <= run_end {
                    // Groups inside one run: one hash for all of them.
                    let v = below[i].1;
                    let h = *whole.entry(v).or_insert_with(|| {
                        f.reset();
                        f.multi_node(&vec![v; arity], heights[l])
                    });
                    push_run(&mut above, g, h);
                    g = run_end / arity;
                } else {
                    let children: Vec<H::Domain> =
                        (first..first + arity).map(|j| run_at(below, j)).collect();
                    f.reset();
                    push_run(&mut above, g, f.multi_node(&children, heights[l]));
                    g += 1;
                }
            }
            levels.push(above);
            len = groups;
        }
        Ok(SparseTree {
            arities: arities.to_vec(),
            levels,
        })
    }

    pub(super) fn node(&self, level: usize, index: usize) -> H::Domain {
        run_at(&self.levels[level], index)
    }

    pub(super) fn root(&self) -> H::Domain {
        self.node(self.arities.len(), 0)
    }

    /// The inclusion proof of `leaf`, in storage-proofs' form (base path,
    /// then the sub-tree and top-tree elements).
    pub(super) fn proof<A, B, C>(&self, leaf: usize) -> MerkleProof<H, A, B, C>
    where
        A: filecoin_hashers::PoseidonArity,
        B: filecoin_hashers::PoseidonArity,
        C: filecoin_hashers::PoseidonArity,
    {
        let mut index = leaf;
        let mut path = Vec::with_capacity(self.arities.len());
        for (l, &arity) in self.arities.iter().enumerate() {
            let group = index / arity;
            let pos = index % arity;
            let siblings = (0..arity)
                .filter(|&j| j != pos)
                .map(|j| self.node(l, group * arity + j))
                .collect();
            path.push((siblings, pos));
            index = group;
        }
        MerkleProof::from_parts(self.node(0, leaf), self.root(), path)
    }
}

/// Appends a run starting at `start`, merged into the last one when equal.
fn push_run<D: PartialEq>(runs: &mut Vec<(usize, D)>, start: usize, value: D) {
    match runs.last_mut() {
        Some(last) if last.1 == value => {}
        Some(last) if last.0 == start => last.1 = value,
        _ => runs.push((start, value)),
    }
}

/// The value at `index` of a level kept as runs.
fn run_at<D: Copy>(runs: &[(usize, D)], index: usize) -> D {
    runs[runs.partition_point(|r| r.0 <= index) - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Filler;
    use filecoin_proofs::SectorShape2KiB;

    #[test]
    fn tree_shapes_match_the_sector_shapes() {
        assert_eq!(
            tree_shape::<SectorShape2KiB>(64).unwrap(),
            (vec![8, 8], vec![2])
        );
        assert_eq!(
            tree_shape::<filecoin_proofs::SectorShape32GiB>(1 << 30).unwrap(),
            (vec![8; 10], vec![9, 1])
        );
        assert_eq!(
            tree_shape::<filecoin_proofs::SectorShape64GiB>(1 << 31).unwrap(),
            (vec![8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2], vec![9, 1, 1])
        );
        assert!(tree_shape::<SectorShape2KiB>(96).is_err());
    }

    #[test]
    fn a_sparse_tree_equals_the_full_tree() {
        use filecoin_hashers::poseidon::PoseidonHasher;
        type D = <PoseidonHasher as Hasher>::Domain;
        let fill = Filler { key: [7; 32] };
        let filler: D = fill.repr(b"f", 0, 0).into();
        let known: BTreeMap<usize, D> = [3usize, 17, 40, 63]
            .iter()
            .map(|&i| (i, D::from(fill.repr(b"leaf", i as u64, 0))))
            .collect();
        let sparse =
            SparseTree::<PoseidonHasher>::new(&[8, 8], &[2], filler, known.clone()).unwrap();
        // The same tree hashed in full.
        let mut level: Vec<D> = (0..64).map(|i| *known.get(&i).unwrap_or(&filler)).collect();
        let mut f = <PoseidonHasher as Hasher>::Function::default();
        for height in 0..2 {
            level = level
                .chunks(8)
                .map(|c| {
                    f.reset();
                    f.multi_node(c, height)
                })
                .collect();
        }
        assert_eq!(sparse.root(), level[0]);
        // Leaves as runs (two halves, as SnapDeals' replica with h = 1).
        let (a, b) = (filler, D::from(fill.repr(b"other", 0, 0)));
        let runs =
            SparseTree::<PoseidonHasher>::from_runs(&[8, 8], &[2], vec![(0, a), (32, b)]).unwrap();
        let mut full: Vec<D> = (0..64).map(|i| if i < 32 { a } else { b }).collect();
        for height in 0..2 {
            full = full
                .chunks(8)
                .map(|c| {
                    f.reset();
                    f.multi_node(c, height)
                })
                .collect();
        }
        assert_eq!(runs.root(), full[0]);
        assert!(SparseTree::<PoseidonHasher>::from_runs(&[8, 8], &[2], vec![(1, a)]).is_err());
        use storage_proofs_core::merkle::MerkleProofTrait;
        for leaf in [3, 17, 5, 63] {
            let p: MerkleProof<PoseidonHasher, typenum::U8> = sparse.proof(leaf);
            assert!(p.validate(leaf), "leaf {leaf}");
            assert_eq!(p.leaf(), *known.get(&leaf).unwrap_or(&filler));
        }
    }
}
