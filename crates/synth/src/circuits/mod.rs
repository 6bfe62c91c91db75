//! Built-in circuits for tests, demos and benchmarks.
//!
//! A [`CircuitSpec`] names a circuit *shape* (a family and a size); Groth16
//! parameters and the PCE are made once per shape, and [`CircuitSpec::build`]
//! makes any number of witnesses for it. The constraint structure depends only
//! on the spec, never on the witness seed, so that one set of parameters fits
//! every witness: the structure comes from an RNG seeded by the spec, the
//! values from an RNG seeded by the witness seed.
//!
//! Spec strings (what `--circuit` takes on the command line) are
//! `family:size`, e.g. `mul-chain:10`, `sha256:1`, `porep:12`, `porep:12:50`;
//! see [`CircuitSpec::families`].
//!
//! Constraint counts in this module are *totals* as bellperson sees them:
//! what `synthesize` enforces plus the one constraint bellperson appends per
//! public input, the ONE input (input 0) included. That total decides the
//! evaluation domain, so `mul-chain:K` and `porep:K` fill a domain of exactly
//! 2^K.
//!
//! Every aux variable of every circuit has a nonzero coefficient in some A, B
//! or C, so bellperson's parameter generator never reports
//! `UnconstrainedVariable` (its L query must be fully dense).

mod builtin;
mod constant_only;
mod many_inputs;
mod mul_chain;
mod no_aux;
mod parts;
mod porep;
mod repeated_vars;
mod sha256;
mod spec;

use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

pub use builtin::{BuiltinCircuit, Instance};
pub use constant_only::ConstantOnly;
pub use many_inputs::ManyInputs;
pub use mul_chain::MulChain;
pub use no_aux::NoAux;
pub use parts::Parts;
pub use porep::PorepShaped;
pub use repeated_vars::RepeatedVars;
pub use sha256::Sha256;
pub use spec::{CircuitSpec, DEFAULT_BOOL_PERCENT, Family, SpecError, all_test_specs};

/// The check every family's `synthesize` starts with: a hand-made spec out of
/// range must fail cleanly instead of underflowing or allocating terabytes.
fn check_size(family: Family, size: u32) -> Result<(), SynthesisError> {
    if family.size_range().contains(&size) {
        Ok(())
    } else {
        Err(SynthesisError::Unsatisfiable)
    }
}

/// FNV-1a over a tag and some words: a fixed, platform-independent way to turn
/// (family, parameters) into an RNG seed, so a shape's structure never changes
/// between runs, machines or releases of this crate's dependencies.
fn mix(tag: &str, words: &[u64]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = tag
        .bytes()
        .chain(words.iter().flat_map(|w| w.to_le_bytes()));
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// The RNG that decides a shape's structure (which variables a row uses, its
/// constants). Seeded by the spec only.
fn structure_rng(family: &str, params: &[u64]) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix(&format!("cuzk structure {family}"), params))
}

/// The RNG that draws a witness. Its tag differs from `structure_rng`'s, so
/// no witness seed reproduces a structure stream.
fn witness_rng(family: &str, witness_seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix(&format!("cuzk witness {family}"), &[witness_seed]))
}

/// Uniform-enough integer in 0..n (n > 0) by multiply-shift; the bias is
/// below 2^-40 for every n this module uses.
fn below(rng: &mut impl RngCore, n: usize) -> usize {
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// A random field element that is never zero (zero would drop a term).
fn random_nonzero(rng: &mut impl RngCore) -> Scalar {
    loop {
        let x = Scalar::random(&mut *rng);
        if !bool::from(x.is_zero()) {
            return x;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use bellperson::util_cs::test_cs::TestConstraintSystem;
    use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, Variable};

    /// Keeps every row's linear combinations exactly as built, explicit zero
    /// coefficients included. (TestConstraintSystem keeps them too, but only
    /// through bellpepper-core's `Comparable` trait, which bellperson does
    /// not re-export.)
    #[derive(Default)]
    pub(super) struct Recorder {
        pub(super) inputs: Vec<Scalar>,
        pub(super) aux: Vec<Scalar>,
        pub(super) rows: Vec<[LinearCombination<Scalar>; 3]>,
    }

    impl Recorder {
        pub(super) fn record(spec: &CircuitSpec, seed: u64) -> Recorder {
            // bellperson allocates ONE before synthesize.
            let mut cs = Recorder {
                inputs: vec![Scalar::ONE],
                ..Recorder::default()
            };
            if let Err(e) = spec.build(seed).synthesize(&mut cs) {
                panic!("{spec} seed {seed}: synthesize failed: {e}");
            }
            cs
        }
    }

    impl ConstraintSystem<Scalar> for Recorder {
        type Root = Self;

        fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.aux.push(f()?);
            Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
        }

        fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.inputs.push(f()?);
            Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
        }

        fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
        where
            A: FnOnce() -> AR,
            AR: Into<String>,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            let zero = LinearCombination::zero;
            self.rows.push([a(zero()), b(zero()), c(zero())]);
        }

        fn push_namespace<NR: Into<String>, N: FnOnce() -> NR>(&mut self, _: N) {}

        fn pop_namespace(&mut self) {}

        fn get_root(&mut self) -> &mut Self {
            self
        }
    }

    /// Exact totals (constraints enforced + one per public input incl. ONE)
    /// that the docs promise. sha256's totals are what bellperson's gadget
    /// produces, measured and pinned here so a gadget change is noticed.
    pub(super) fn expected_total(spec: &CircuitSpec) -> usize {
        let n = spec.size as usize;
        match spec.family {
            Family::MulChain | Family::PorepShaped { .. } => 1 << n,
            Family::Sha256 => sha256::tests::expected_total(n),
            Family::NoAux => 3 * n + 2,
            Family::ManyInputs => (1 << (n + 1)) + 2,
            Family::RepeatedVars | Family::ConstantOnly => 3 * n + 3,
            Family::Parts => 35 * n + 1,
        }
    }

    pub(super) fn synthesize(spec: &CircuitSpec, seed: u64) -> TestConstraintSystem<Scalar> {
        let mut cs = TestConstraintSystem::<Scalar>::new();
        if let Err(e) = spec.build(seed).synthesize(&mut cs) {
            panic!("{spec} seed {seed}: synthesize failed: {e}");
        }
        cs
    }

    #[test]
    fn every_test_spec_is_satisfied_sized_and_seed_independent() {
        for spec in all_test_specs() {
            let a = synthesize(&spec, 1);
            let b = synthesize(&spec, 2);
            for (seed, cs) in [(1, &a), (2, &b)] {
                assert!(
                    cs.is_satisfied(),
                    "{spec} seed {seed}: unsatisfied at {:?}",
                    cs.which_is_unsatisfied()
                );
                // TestConstraintSystem, like bellperson's prover, starts with
                // the ONE input, so num_inputs() counts it.
                let total = cs.num_constraints() + cs.num_inputs();
                assert_eq!(total, expected_total(&spec), "{spec} seed {seed}");
            }
            // The structure must not depend on the witness seed. hash()
            // normalizes explicit zero coefficients away; the recorder keeps
            // them.
            assert_eq!(a.hash(), b.hash(), "{spec}");
            let (ra, rb) = (Recorder::record(&spec, 1), Recorder::record(&spec, 2));
            assert!(ra.rows == rb.rows, "{spec}: constraints differ");
            assert_eq!(ra.aux.len(), rb.aux.len(), "{spec}");
            assert_eq!(ra.inputs.len(), rb.inputs.len(), "{spec}");
            assert_eq!(ra.rows.len(), a.num_constraints(), "{spec}");
            // ...while the witness does.
            assert!(
                a.scalar_aux() != b.scalar_aux() || a.scalar_inputs() != b.scalar_inputs(),
                "{spec}: two seeds gave the same witness"
            );
            // Same seed, same witness.
            let a2 = synthesize(&spec, 1);
            assert!(a.scalar_aux() == a2.scalar_aux() && a.scalar_inputs() == a2.scalar_inputs());
        }
    }

    #[test]
    fn every_aux_variable_is_constrained() {
        // bellperson's generator refuses a circuit with an aux variable that
        // no constraint mentions with a nonzero coefficient.
        for spec in all_test_specs() {
            let cs = Recorder::record(&spec, 7);
            let mut used = vec![false; cs.aux.len()];
            for row in &cs.rows {
                for lc in row {
                    for (i, coeff) in lc.iter_aux() {
                        used[*i] |= !bool::from(coeff.is_zero());
                    }
                }
            }
            assert!(
                used.iter().all(|u| *u),
                "{spec}: unconstrained aux variable"
            );
        }
    }

    /// The real oracle: bellperson makes parameters (which fails on an
    /// unconstrained aux variable), proves and verifies. Small shapes only;
    /// sha256 is bellperson's own gadget and costs seconds here.
    #[test]
    fn bellperson_proves_and_verifies_small_specs() {
        use bellperson::groth16::{
            create_random_proof, generate_random_parameters, prepare_verifying_key, verify_proof,
        };
        use blstrs::Bls12;
        use rand::SeedableRng as _;

        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for text in [
            "mul-chain:3",
            "porep:6",
            "porep:6:0",
            "porep:6:100",
            "no-aux:2",
            "many-inputs:0",
            "many-inputs:2",
            "repeated-vars:2",
            "constant-only:2",
        ] {
            let spec: CircuitSpec = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            let params = generate_random_parameters::<Bls12, _, _>(spec.build(0), &mut rng)
                .unwrap_or_else(|e| panic!("{text}: parameters: {e}"));
            let pvk = prepare_verifying_key(&params.vk);
            for seed in [1, 2] {
                let inputs = synthesize(&spec, seed).scalar_inputs();
                let proof = create_random_proof(spec.build(seed), &params, &mut rng)
                    .unwrap_or_else(|e| panic!("{text}: prove: {e}"));
                let ok = verify_proof(&pvk, &proof, &inputs[1..])
                    .unwrap_or_else(|e| panic!("{text}: verify: {e}"));
                assert!(ok, "{text} seed {seed}: proof does not verify");
            }
        }
    }

    #[test]
    fn rng_helpers_are_stable() {
        // The structure of every shape hangs on these; a change would silently
        // invalidate cached parameters and PCEs.
        assert_eq!(mix("", &[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(mix("a", &[]), 0xaf63_dc4c_8601_ec8c);
        let mut r = structure_rng("x", &[1]);
        let mut s = structure_rng("x", &[1]);
        assert_eq!(r.next_u64(), s.next_u64());
        for n in [1, 2, 3, 1000] {
            assert!(below(&mut r, n) < n);
        }
    }
}
