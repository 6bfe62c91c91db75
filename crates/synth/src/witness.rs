//! The witness-only constraint system: runs a circuit's `synthesize` keeping
//! only the values of inputs and aux variables. Constraints are not built:
//! they come from the recorded [`Pce`](crate::Pce).

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::{Result, SynthError};

use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether large witness buffers ask the kernel for huge pages
/// ([`set_huge_pages`]); `None` until first read from `CUZK_HUGE_PAGES`.
static HUGE_PAGES: OnceLock<AtomicBool> = OnceLock::new();

fn huge_pages_flag() -> &'static AtomicBool {
    HUGE_PAGES.get_or_init(|| {
        let off = std::env::var("CUZK_HUGE_PAGES").is_ok_and(|v| v == "0" || v == "off");
        AtomicBool::new(!off)
    })
}

/// Turns huge pages for witness buffers on or off for the process (on by
/// default; `CUZK_HUGE_PAGES=0` starts with them off). A 32 GiB PoRep
/// partition's witness is 4.2 GB of new memory, and made in parallel it is
/// written by every core at once: with 4 KiB pages that is a million page
/// faults per partition, all taking the same process-wide lock. Linux
/// backs a region advised with `MADV_HUGEPAGE` by 2 MiB pages where
/// transparent huge pages are in `madvise` or `always` mode; elsewhere the
/// advice does nothing.
pub fn set_huge_pages(on: bool) {
    huge_pages_flag().store(on, Ordering::Relaxed);
}

/// Whether witness buffers ask for huge pages now.
pub fn huge_pages() -> bool {
    huge_pages_flag().load(Ordering::Relaxed)
}

/// Advises huge pages for the whole page-aligned part of `v`'s capacity
/// when it is at least 4 MiB and huge pages are on. Advice only: nothing
/// changes if the kernel declines.
fn advise_huge_pages<T>(v: &mut Vec<T>) {
    const MIN: usize = 4 << 20;
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < MIN || !huge_pages() {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = v.as_mut_ptr() as usize;
        let aligned = start.next_multiple_of(PAGE);
        let len = (start + bytes).saturating_sub(aligned) / PAGE * PAGE;
        // SAFETY: [aligned, aligned + len) lies inside the allocation of
        // `v`'s capacity, which this process owns; MADV_HUGEPAGE only sets
        // how the kernel backs those pages and never changes their contents
        // or the mapping's validity.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
}

/// The assignment of one circuit instance: inputs (ONE first) and aux values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    pub inputs: Vec<Scalar>,
    pub aux: Vec<Scalar>,
}

impl Witness {
    /// Synthesizes `circuit` for its values, allocating ONE as input 0 first
    /// as bellperson's prover does.
    pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<Witness> {
        Self::synthesize_with_capacity(circuit, 0, 0)
    }

    /// Like [`Witness::synthesize`], with the expected sizes (from the PCE)
    /// reserved up front so the vectors never reallocate.
    pub fn synthesize_with_capacity<C: Circuit<Scalar>>(
        circuit: C,
        inputs: usize,
        aux: usize,
    ) -> Result<Witness> {
        let _s = tracing::info_span!("witness", aux).entered();
        let mut cs = WitnessCs::with_capacity(inputs, aux);
        circuit.synthesize(&mut cs)?;
        Ok(cs.witness)
    }

    /// Assembles the witness of a circuit synthesized in parts, each part
    /// on its own system repeating a common head: `head` is the head alone
    /// (ONE first), each part is the head followed by that part's values
    /// (ONE first). The result is the head followed by every part's own
    /// values in order: the witness of the circuit that synthesizes the head
    /// once and then the parts one after the other, as long as the head's
    /// values come before the part's in each (inputs and aux separately).
    ///
    /// A part whose first values differ from `head`'s is refused
    /// ([`SynthError::PartMismatch`]). `inputs` and `aux` are the expected
    /// sizes (from the PCE), reserved up front.
    pub fn from_parts(
        head: Witness,
        parts: Vec<Witness>,
        inputs: usize,
        aux: usize,
    ) -> Result<Witness> {
        let mut out = head;
        let (head_inputs, head_aux) = (out.inputs.len(), out.aux.len());
        out.inputs.reserve(inputs.saturating_sub(head_inputs));
        out.aux.reserve(aux.saturating_sub(head_aux));
        for (part, w) in parts.into_iter().enumerate() {
            let mismatch = |what| SynthError::PartMismatch { part, what };
            if w.inputs.get(..head_inputs) != Some(&out.inputs[..head_inputs]) {
                return Err(mismatch("input"));
            }
            if w.aux.get(..head_aux) != Some(&out.aux[..head_aux]) {
                return Err(mismatch("aux"));
            }
            out.inputs.extend_from_slice(&w.inputs[head_inputs..]);
            out.aux.extend_from_slice(&w.aux[head_aux..]);
        }
        Ok(out)
    }

    /// Completes a witness whose head is made with equal-shaped parts
    /// synthesized in parallel straight into their places: no part has a
    /// buffer of its own, nothing is copied afterwards.
    ///
    /// `self` is the head alone (ONE first), made on a system with room for
    /// the whole witness ([`WitnessCs::with_capacity`]`(inputs, aux)`);
    /// `aux` is the whole witness's aux count (from the PCE). Every part has
    /// the same number of aux values of its own, `per = (aux - head aux) /
    /// parts`. `synth` synthesizes one part on a [`PartCs`] as the circuit
    /// of the head followed by that part (as for [`Witness::from_parts`]):
    /// the head's values are checked against `self`'s rather than stored
    /// again, part k's own aux values are written at `head aux + k * per`,
    /// its own inputs follow the earlier parts' inputs. The result equals
    /// [`Witness::from_parts`] of the same parts.
    ///
    /// Refused with [`SynthError::PartMismatch`]: sizes that do not split
    /// evenly (`what: "aux count"`), a part whose head differs, or one with
    /// more or fewer aux values than `per`. Parts run on rayon's pool, each
    /// as a task of its own, started in the order given (after the parts
    /// queued before them); the calling thread waits for them.
    pub fn fill_parts<P, F>(self, parts: Vec<P>, aux: usize, synth: F) -> Result<Witness>
    where
        P: Send,
        F: Fn(&mut PartCs<'_>, P) -> std::result::Result<(), SynthError> + Sync,
    {
        let n = parts.len();
        let rest = aux.checked_sub(self.aux.len());
        let per = match rest {
            Some(rest) if n > 0 && rest % n == 0 => rest / n,
            _ if n == 0 && rest == Some(0) => return Ok(self),
            _ => {
                return Err(SynthError::PartMismatch {
                    part: 0,
                    what: "aux count",
                });
            }
        };
        self.fill_sized_parts(parts.into_iter().map(|p| (per, p)).collect(), synth)
    }

    /// [`Witness::fill_parts`] for parts of known but unequal sizes: each
    /// part comes with the number of aux values of its own, and part k's
    /// are written after the head's and those of parts 0..k. A part with
    /// more or fewer aux values than it said is refused
    /// ([`SynthError::PartMismatch`], `what: "aux count"`).
    pub fn fill_sized_parts<P, F>(mut self, parts: Vec<(usize, P)>, synth: F) -> Result<Witness>
    where
        P: Send,
        F: Fn(&mut PartCs<'_>, P) -> std::result::Result<(), SynthError> + Sync,
    {
        let n = parts.len();
        let head_aux = self.aux.len();
        let total: usize = parts.iter().map(|(size, _)| size).sum();
        let head = Witness {
            inputs: self.inputs.clone(),
            aux: self.aux.clone(),
        };
        self.aux.reserve_exact(total);
        let mut spare = &mut self.aux.spare_capacity_mut()[..total];
        let mut work = Vec::with_capacity(n);
        for (size, p) in parts {
            let (slot, after) = std::mem::take(&mut spare).split_at_mut(size);
            spare = after;
            work.push((slot, p));
        }
        // Each part is a task of its own in rayon's pool, and this thread
        // waits outside the pool: a part never waits for anything, so no
        // pool thread holds one witness's part on its stack while it runs
        // another witness's (as the joins of a parallel iterator would,
        // making witnesses made at once all finish together), and parts
        // queued from outside the pool start in the order they were queued.
        let mut results: Vec<Option<Result<Vec<Scalar>>>> = (0..n).map(|_| None).collect();
        let (synth, head) = (&synth, &head);
        rayon::in_place_scope(|scope| {
            for (part, ((slot, p), out)) in work.into_iter().zip(results.iter_mut()).enumerate() {
                scope.spawn(move |_| {
                    let mut cs = PartCs::new(head, slot);
                    *out = Some(synth(&mut cs, p).and_then(|()| cs.finish(part)));
                });
            }
        });
        let own_inputs = results
            .into_iter()
            .map(|r| {
                r.unwrap_or(Err(SynthError::PartMismatch {
                    part: 0,
                    what: "missing",
                }))
            })
            .collect::<Result<Vec<Vec<Scalar>>>>()?;
        // SAFETY: every part wrote each place of its slot exactly once
        // (`PartCs::finish` checked it saw exactly head + slot-length aux
        // values, written in order), the slots tile the first `total`
        // places after the head, so the first head_aux + total values are
        // initialized; the capacity was reserved above.
        unsafe { self.aux.set_len(head_aux + total) };
        for inputs in own_inputs {
            self.inputs.extend_from_slice(&inputs);
        }
        Ok(self)
    }

    /// The public inputs a verifier is given: every input but ONE.
    pub fn public_inputs(&self) -> &[Scalar] {
        self.inputs.get(1..).unwrap_or(&[])
    }
}

/// A `ConstraintSystem` that keeps values and ignores constraints.
#[derive(Debug, Default)]
pub struct WitnessCs {
    witness: Witness,
}

impl WitnessCs {
    /// A system for a whole circuit: ONE allocated as input 0 (as
    /// bellperson's prover does), room for `inputs` and `aux` values.
    ///
    /// A circuit that synthesizes parts of itself in parallel starts here,
    /// synthesizes each part on a [`WitnessCs::part`] and appends the parts
    /// in order with [`ConstraintSystem::extend`]: values only need their
    /// order, so a part may use gadgets allocated on the whole system (the
    /// variables it refers to are never looked at here).
    pub fn with_capacity(inputs: usize, aux: usize) -> WitnessCs {
        let mut witness = Witness {
            inputs: Vec::with_capacity(inputs.max(1)),
            aux: Vec::with_capacity(aux),
        };
        advise_huge_pages(&mut witness.aux);
        witness.inputs.push(Scalar::ONE);
        WitnessCs { witness }
    }

    /// A part for [`ConstraintSystem::extend`]: a temporary ONE input (which
    /// `extend` drops) and nothing else.
    pub fn part() -> WitnessCs {
        WitnessCs::with_capacity(1, 0)
    }

    /// [`WitnessCs::part`] with room for `aux` values up front (a part of
    /// known size grows without reallocating).
    pub fn part_with_capacity(aux: usize) -> WitnessCs {
        WitnessCs::with_capacity(1, aux)
    }

    /// Aux values assigned so far.
    pub fn aux_len(&self) -> usize {
        self.witness.aux.len()
    }

    /// The values assigned so far.
    pub fn into_witness(self) -> Witness {
        self.witness
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    /// A part for [`ConstraintSystem::extend`].
    fn new() -> Self {
        WitnessCs::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.aux.push(f()?);
        Ok(Variable(Index::Aux(self.witness.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.inputs.push(f()?);
        Ok(Variable(Index::Input(self.witness.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    /// Extensible, as bellperson's prover is (and as the PCE recorder is):
    /// a circuit that synthesizes independent parts in parallel
    /// (WindowPoSt's sectors) does so here too. Not a "witness generator":
    /// bellperson's prover is not one either, and gadgets lay out their
    /// variables differently for those.
    fn is_extensible() -> bool {
        true
    }

    /// Appends a part synthesized on its own after a temporary ONE input,
    /// which is dropped (this system's ONE stands for it).
    fn extend(&mut self, other: &Self) {
        self.witness
            .inputs
            .extend_from_slice(other.witness.inputs.get(1..).unwrap_or(&[]));
        self.witness.aux.extend_from_slice(&other.witness.aux);
    }
}

/// The system one part of [`Witness::fill_parts`] is synthesized on: the
/// head's values are compared with the head's, the part's own aux values
/// are written into its place in the whole witness, its own inputs kept.
pub struct PartCs<'a> {
    head: &'a Witness,
    slot: &'a mut [MaybeUninit<Scalar>],
    /// Inputs and aux values assigned so far, ONE counted.
    inputs: usize,
    aux: usize,
    own_inputs: Vec<Scalar>,
    mismatch: Option<&'static str>,
}

impl std::fmt::Debug for PartCs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartCs")
            .field("head_aux", &self.head.aux.len())
            .field("slot", &self.slot.len())
            .field("inputs", &self.inputs)
            .field("aux", &self.aux)
            .field("mismatch", &self.mismatch)
            .finish()
    }
}

impl<'a> PartCs<'a> {
    fn new(head: &'a Witness, slot: &'a mut [MaybeUninit<Scalar>]) -> PartCs<'a> {
        PartCs {
            head,
            slot,
            inputs: 1,
            aux: 0,
            own_inputs: Vec::new(),
            mismatch: None,
        }
    }

    /// The part's own inputs, once its head matched and its slot is full.
    fn finish(self, part: usize) -> Result<Vec<Scalar>> {
        let mismatch = |what| SynthError::PartMismatch { part, what };
        if let Some(what) = self.mismatch {
            return Err(mismatch(what));
        }
        if self.inputs < self.head.inputs.len().max(1) {
            return Err(mismatch("input"));
        }
        if self.aux != self.head.aux.len() + self.slot.len() {
            return Err(mismatch("aux count"));
        }
        Ok(self.own_inputs)
    }
}

impl ConstraintSystem<Scalar> for PartCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let i = self.aux;
        self.aux += 1;
        let head = self.head.aux.len();
        if i < head {
            if v != self.head.aux[i] {
                self.mismatch.get_or_insert("aux");
            }
        } else if let Some(place) = self.slot.get_mut(i - head) {
            place.write(v);
        }
        Ok(Variable(Index::Aux(i)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let i = self.inputs;
        self.inputs += 1;
        match self.head.inputs.get(i) {
            Some(h) if *h != v => {
                self.mismatch.get_or_insert("input");
            }
            Some(_) => {}
            None => self.own_inputs.push(v),
        }
        Ok(Variable(Index::Input(i)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
mod tests {
    use bellperson::gadgets::num::AllocatedNum;

    use super::*;

    #[test]
    fn huge_pages_switch_and_large_buffers_keep_their_values() {
        for on in [true, false] {
            set_huge_pages(on);
            assert_eq!(huge_pages(), on);
            // 32 MiB of aux: over the advice threshold.
            let mut cs = WitnessCs::with_capacity(1, 1 << 20);
            for i in 0..(1u64 << 20) {
                cs.alloc(|| "v", || Ok(Scalar::from(i))).unwrap();
            }
            assert_eq!(cs.aux_len(), 1 << 20);
            let w = cs.into_witness();
            assert_eq!(w.aux[12345], Scalar::from(12345u64));
            assert_eq!(w.aux[(1 << 20) - 1], Scalar::from((1u64 << 20) - 1));
            let part = WitnessCs::part_with_capacity(3 << 17);
            assert_eq!(part.into_witness().inputs, [Scalar::ONE]);
        }
        set_huge_pages(true);
    }

    /// A head (one aux made an input) and parts that each allocate an input
    /// and two aux values from the head's value and their index.
    #[derive(Clone)]
    struct HeadAndParts {
        head: u64,
        parts: Vec<u64>,
    }

    impl Circuit<Scalar> for HeadAndParts {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            let head =
                AllocatedNum::alloc(cs.namespace(|| "head"), || Ok(Scalar::from(self.head)))?;
            head.inputize(cs.namespace(|| "head input"))?;
            for (k, p) in self.parts.into_iter().enumerate() {
                let mut cs = cs.namespace(|| format!("part {k}"));
                let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(p)))?;
                let y = x.mul(cs.namespace(|| "x * head"), &head)?;
                y.inputize(cs.namespace(|| "y"))?;
            }
            Ok(())
        }
    }

    fn parts_of(c: &HeadAndParts) -> (Witness, Vec<Witness>) {
        let head = Witness::synthesize(HeadAndParts {
            head: c.head,
            parts: vec![],
        })
        .unwrap();
        let parts = c
            .parts
            .iter()
            .map(|&p| {
                Witness::synthesize(HeadAndParts {
                    head: c.head,
                    parts: vec![p],
                })
                .unwrap()
            })
            .collect();
        (head, parts)
    }

    #[test]
    fn parts_assemble_to_the_sequential_witness() {
        for parts in [vec![], vec![5], vec![2, 3, 11, 0, u64::MAX]] {
            let c = HeadAndParts { head: 7, parts };
            let sequential = Witness::synthesize(c.clone()).unwrap();
            let (head, parts) = parts_of(&c);
            let assembled =
                Witness::from_parts(head, parts, sequential.inputs.len(), sequential.aux.len())
                    .unwrap();
            assert_eq!(assembled, sequential);
        }
    }

    /// The parts of `c` filled in place after its head.
    fn filled(c: &HeadAndParts, aux: usize) -> Result<Witness> {
        let mut cs = WitnessCs::with_capacity(1, aux);
        HeadAndParts {
            head: c.head,
            parts: vec![],
        }
        .synthesize(&mut cs)
        .unwrap();
        let head = c.head;
        cs.into_witness()
            .fill_parts(c.parts.clone(), aux, move |cs, p| {
                HeadAndParts {
                    head,
                    parts: vec![p],
                }
                .synthesize(cs)
                .map_err(SynthError::from)
            })
    }

    #[test]
    fn parts_filled_in_place_equal_the_sequential_witness() {
        for parts in [
            vec![],
            vec![5],
            vec![2, 3, 11, 0, u64::MAX],
            (0..40).collect(),
        ] {
            let c = HeadAndParts { head: 7, parts };
            let sequential = Witness::synthesize(c.clone()).unwrap();
            let w = filled(&c, sequential.aux.len()).unwrap();
            assert_eq!(w, sequential);
            // The same as assembling separately made parts.
            let (head, parts) = parts_of(&c);
            let assembled =
                Witness::from_parts(head, parts, sequential.inputs.len(), sequential.aux.len())
                    .unwrap();
            assert_eq!(w, assembled);
        }
    }

    #[test]
    fn parts_in_place_of_the_wrong_size_or_head_are_refused() {
        let c = HeadAndParts {
            head: 7,
            parts: vec![1, 2, 3],
        };
        let aux = Witness::synthesize(c.clone()).unwrap().aux.len();
        // Sizes that do not split evenly, or are smaller than the head.
        for wrong in [aux + 1, aux - 1, 0] {
            let err = filled(&c, wrong).unwrap_err();
            assert!(
                matches!(
                    err,
                    SynthError::PartMismatch {
                        what: "aux count",
                        ..
                    }
                ),
                "{wrong}: {err}"
            );
        }
        // Evenly split but each part one value larger than it makes.
        let err = filled(&c, aux + 3).unwrap_err();
        assert!(
            matches!(
                err,
                SynthError::PartMismatch {
                    what: "aux count",
                    ..
                }
            ),
            "{err}"
        );
        // One part with another head.
        let mut cs = WitnessCs::with_capacity(1, aux);
        HeadAndParts {
            head: 7,
            parts: vec![],
        }
        .synthesize(&mut cs)
        .unwrap();
        let err = cs
            .into_witness()
            .fill_parts(vec![1u64, 2, 3], aux, |cs, p| {
                HeadAndParts {
                    head: if p == 2 { 8 } else { 7 },
                    parts: vec![p],
                }
                .synthesize(cs)
                .map_err(SynthError::from)
            })
            .unwrap_err();
        assert!(
            matches!(err, SynthError::PartMismatch { part: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_part_with_another_head_is_refused() {
        let c = HeadAndParts {
            head: 7,
            parts: vec![1, 2, 3],
        };
        let (head, mut parts) = parts_of(&c);
        parts[2] = Witness::synthesize(HeadAndParts {
            head: 8,
            parts: vec![3],
        })
        .unwrap();
        let err = Witness::from_parts(head.clone(), parts, 0, 0).unwrap_err();
        assert!(
            matches!(
                err,
                SynthError::PartMismatch {
                    part: 2,
                    what: "input"
                }
            ),
            "{err}"
        );
        // A part shorter than the head.
        let err = Witness::from_parts(head, vec![Witness::default()], 0, 0).unwrap_err();
        assert!(
            matches!(err, SynthError::PartMismatch { part: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn parts_extend_after_their_temporary_one() {
        let mut whole = WitnessCs::with_capacity(4, 4);
        let mut part = WitnessCs::part();
        part.alloc_input(|| "i", || Ok(Scalar::from(3))).unwrap();
        part.alloc(|| "a", || Ok(Scalar::from(4))).unwrap();
        whole.extend(&part);
        let w = whole.into_witness();
        assert_eq!(w.inputs, vec![Scalar::ONE, Scalar::from(3)]);
        assert_eq!(w.aux, vec![Scalar::from(4)]);
    }
}
