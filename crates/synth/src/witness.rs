//! The witness-only constraint system: runs a circuit's `synthesize` keeping
//! only the values of inputs and aux variables. Constraints are not built:
//! they come from the recorded [`Pce`](crate::Pce).

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::Result;

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
        let mut cs = WitnessCs {
            witness: Witness {
                inputs: Vec::with_capacity(inputs),
                aux: Vec::with_capacity(aux),
            },
        };
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        Ok(cs.witness)
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
