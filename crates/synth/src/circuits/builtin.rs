//! Built circuits: [`CircuitSpec::build`] makes a [`BuiltinCircuit`] (one
//! variant per family), and an [`Instance`] defers that build until it is
//! synthesized.

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;

use super::{
    CircuitSpec, ConstantOnly, Family, ManyInputs, MulChain, NoAux, Parts, PorepShaped,
    RepeatedVars, Sha256,
};

impl CircuitSpec {
    /// Builds the circuit with witness values derived deterministically from
    /// `witness_seed`. The constraint structure depends only on the spec.
    ///
    /// An out-of-range spec (only possible by filling the public fields by
    /// hand; `FromStr` refuses them) still builds, and its `synthesize`
    /// returns `SynthesisError::Unsatisfiable`. See [`CircuitSpec::validate`].
    pub fn build(&self, witness_seed: u64) -> BuiltinCircuit {
        let size = self.size;
        match self.family {
            Family::MulChain => BuiltinCircuit::MulChain(MulChain::new(size, witness_seed)),
            Family::Sha256 => BuiltinCircuit::Sha256(Sha256::new(size, witness_seed)),
            Family::PorepShaped { bool_percent } => {
                BuiltinCircuit::PorepShaped(PorepShaped::new(size, bool_percent, witness_seed))
            }
            Family::NoAux => BuiltinCircuit::NoAux(NoAux::new(size, witness_seed)),
            Family::ManyInputs => BuiltinCircuit::ManyInputs(ManyInputs::new(size, witness_seed)),
            Family::RepeatedVars => {
                BuiltinCircuit::RepeatedVars(RepeatedVars::new(size, witness_seed))
            }
            Family::ConstantOnly => {
                BuiltinCircuit::ConstantOnly(ConstantOnly::new(size, witness_seed))
            }
            Family::Parts => BuiltinCircuit::Parts(Parts::new(size, witness_seed)),
        }
    }
}

/// A built-in circuit instance that is built only when it is synthesized:
/// what a queue of many partitions holds instead of their circuits, so
/// that a circuit's own memory (a sha256 instance's preimage) exists only
/// while its witness is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub spec: CircuitSpec,
    pub witness_seed: u64,
}

impl CircuitSpec {
    /// The instance of this shape with `witness_seed`, built when it is
    /// synthesized; it synthesizes exactly as `self.build(witness_seed)`.
    pub fn instance(&self, witness_seed: u64) -> Instance {
        Instance {
            spec: self.clone(),
            witness_seed,
        }
    }
}

impl Instance {
    /// This instance's witness, by the fastest way its family has
    /// ([`BuiltinCircuit::witness`]): what the engine's
    /// `ProofRequest::with_witness` takes for built-in circuits.
    pub fn witness(self, inputs: usize, aux: usize) -> crate::Result<crate::Witness> {
        self.spec.build(self.witness_seed).witness(inputs, aux)
    }
}

impl Circuit<Scalar> for Instance {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.spec.build(self.witness_seed).synthesize(cs)
    }
}

/// A built circuit with its witness: one variant per family.
#[derive(Clone, Debug)]
pub enum BuiltinCircuit {
    MulChain(MulChain),
    Sha256(Sha256),
    PorepShaped(PorepShaped),
    NoAux(NoAux),
    ManyInputs(ManyInputs),
    RepeatedVars(RepeatedVars),
    ConstantOnly(ConstantOnly),
    Parts(Parts),
}

impl BuiltinCircuit {
    /// The circuit's witness, with the sizes its PCE has reserved: `porep`
    /// writes its parts in parallel straight into place
    /// ([`PorepShaped::witness`]), the others synthesize on the witness
    /// system ([`crate::Witness::synthesize_with_capacity`]). The same
    /// values either way.
    pub fn witness(self, inputs: usize, aux: usize) -> crate::Result<crate::Witness> {
        match self {
            BuiltinCircuit::PorepShaped(c) => c.witness(inputs, aux),
            other => crate::Witness::synthesize_with_capacity(other, inputs, aux),
        }
    }
}

impl Circuit<Scalar> for BuiltinCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            BuiltinCircuit::MulChain(c) => c.synthesize(cs),
            BuiltinCircuit::Sha256(c) => c.synthesize(cs),
            BuiltinCircuit::PorepShaped(c) => c.synthesize(cs),
            BuiltinCircuit::NoAux(c) => c.synthesize(cs),
            BuiltinCircuit::ManyInputs(c) => c.synthesize(cs),
            BuiltinCircuit::RepeatedVars(c) => c.synthesize(cs),
            BuiltinCircuit::ConstantOnly(c) => c.synthesize(cs),
            BuiltinCircuit::Parts(c) => c.synthesize(cs),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use ff::Field;

    use super::*;
    use crate::circuits::all_test_specs;
    use crate::circuits::tests::Recorder;

    #[test]
    fn an_instance_synthesizes_as_its_built_circuit() {
        for spec in all_test_specs() {
            for seed in [1, 7] {
                let built = Recorder::record(&spec, seed);
                let mut lazy = Recorder {
                    inputs: vec![Scalar::ONE],
                    ..Recorder::default()
                };
                spec.instance(seed).synthesize(&mut lazy).unwrap();
                assert!(
                    built.rows == lazy.rows,
                    "{spec} seed {seed}: constraints differ"
                );
                assert_eq!(built.inputs, lazy.inputs, "{spec} seed {seed}");
                assert_eq!(built.aux, lazy.aux, "{spec} seed {seed}");
            }
        }
    }

    #[test]
    fn circuits_are_clone_send_sync_debug() {
        fn check<T: Circuit<Scalar> + Clone + Send + Sync + fmt::Debug>() {}
        check::<Instance>();
        check::<BuiltinCircuit>();
        check::<MulChain>();
        check::<Sha256>();
        check::<PorepShaped>();
        check::<NoAux>();
        check::<ManyInputs>();
        check::<RepeatedVars>();
        check::<ConstantOnly>();
    }
}
