//! SpMV a/b/c and the recorded densities against a naive evaluation of the
//! linear combinations each built-in circuit builds, the way bellperson's
//! prover evaluates them.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_synth::circuits::all_test_specs;
use cuzk_synth::{Pce, Witness};
use ff::Field;

type Lc = LinearCombination<Scalar>;

/// Keeps every constraint's linear combinations and every value.
#[derive(Default)]
struct NaiveCs {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    rows: Vec<(Lc, Lc, Lc)>,
}

impl ConstraintSystem<Scalar> for NaiveCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        Ok(Variable(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(Lc) -> Lc,
        LB: FnOnce(Lc) -> Lc,
        LC: FnOnce(Lc) -> Lc,
    {
        self.rows
            .push((a(Lc::zero()), b(Lc::zero()), c(Lc::zero())));
    }

    fn push_namespace<NR: Into<String>, N: FnOnce() -> NR>(&mut self, _: N) {}
    fn pop_namespace(&mut self) {}
    fn get_root(&mut self) -> &mut Self {
        self
    }
}

fn naive<C: Circuit<Scalar>>(c: C) -> NaiveCs {
    let mut cs = NaiveCs::default();
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE)).unwrap();
    c.synthesize(&mut cs).unwrap();
    for i in 0..cs.inputs.len() {
        cs.enforce(|| "", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
    }
    cs
}

/// Marks the variables an lc uses with a non-zero coefficient.
fn mark(lc: &Lc, inputs: Option<&mut Vec<bool>>, aux: &mut [bool]) {
    if let Some(inputs) = inputs {
        for (&i, c) in lc.iter_inputs() {
            inputs[i] |= !bool::from(c.is_zero());
        }
    }
    for (&i, c) in lc.iter_aux() {
        aux[i] |= !bool::from(c.is_zero());
    }
}

#[test]
fn spmv_and_densities_match_naive_evaluation_on_every_builtin_circuit() {
    for spec in all_test_specs() {
        for seed in [1, 2] {
            let cs = naive(spec.build(seed));
            let pce = Pce::record(spec.build(seed)).unwrap();
            let witness = Witness::synthesize(spec.build(seed)).unwrap();
            assert_eq!(witness.inputs, cs.inputs, "{spec}");
            assert_eq!(witness.aux, cs.aux, "{spec}");
            assert_eq!(pce.num_constraints(), cs.rows.len(), "{spec}");

            let abc = cuzk_synth::evaluate(&pce, &witness).unwrap();
            for (i, (a, b, c)) in cs.rows.iter().enumerate() {
                assert_eq!(abc.a[i], a.eval(&cs.inputs, &cs.aux), "{spec} row {i} a");
                assert_eq!(abc.b[i], b.eval(&cs.inputs, &cs.aux), "{spec} row {i} b");
                assert_eq!(abc.c[i], c.eval(&cs.inputs, &cs.aux), "{spec} row {i} c");
            }

            let mut a_aux = vec![false; cs.aux.len()];
            let mut b_in = vec![false; cs.inputs.len()];
            let mut b_aux = vec![false; cs.aux.len()];
            for (a, b, _) in &cs.rows {
                mark(a, None, &mut a_aux);
                mark(b, Some(&mut b_in), &mut b_aux);
            }
            assert_eq!(
                pce.a_aux_density.iter().collect::<Vec<_>>(),
                a_aux,
                "{spec}"
            );
            assert_eq!(
                pce.b_input_density.iter().collect::<Vec<_>>(),
                b_in,
                "{spec}"
            );
            assert_eq!(
                pce.b_aux_density.iter().collect::<Vec<_>>(),
                b_aux,
                "{spec}"
            );
        }
    }
}

#[test]
fn recorded_shape_does_not_depend_on_the_witness() {
    for spec in all_test_specs() {
        let p1 = Pce::record(spec.build(1)).unwrap();
        let p2 = Pce::record(spec.build(2)).unwrap();
        assert_eq!((&p1.a, &p1.b, &p1.c), (&p2.a, &p2.b, &p2.c), "{spec}");
        assert_eq!(p1.coeff_table, p2.coeff_table, "{spec}");
    }
}
