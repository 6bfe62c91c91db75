//! `porep:K[:P]`: a synthetic circuit shaped like Filecoin's PoRep, for
//! benchmarks at any power-of-two size without the real circuit's cost.
//!
//! Exactly 2^K constraints in total, bellperson's appended input rows (ONE and
//! 4 full-field public inputs) included, so the domain is exactly 2^K.
//! P percent of the rows are boolean (default 50):
//!
//! - a few seed bits, each with a booleanity row `(b) * (b - ONE) = 0`;
//! - XOR rows `c = a xor b` as `(2a) * (b) = a + b - c` (A 1 term, B 1, C 3),
//!   a and b two distinct earlier bits.
//!
//! The other rows are field rows that make a new full-field aux v:
//! A = 3 (20%) or 4 (80%) distinct earlier variables with small coefficients
//! (1, -1, 2, or 1 time in 10 a random field element), B = 1 earlier variable,
//! C = v plus (40%) one more earlier variable with coefficient ±1; v's value
//! solves the row, so the circuit is satisfiable by construction.
//! At P=50 that gives A ≈ 0.5·1 + 0.5·3.8 = 2.4, B = 1.0,
//! C ≈ 0.5·3 + 0.5·1.4 = 2.2 nonzeros per row, as PoRep-32G has.
//!
//! "Earlier variable" means: 3 times in 4 one of the part's last 1024 (real
//! circuits reuse what they just computed, which is what makes SpMV
//! cache-friendly), else any of the part's. The ONE variable and the part's
//! public inputs are in the pool, so rows also carry constants and inputs.
//! With P=100 there are no field rows and the public inputs appear only in
//! bellperson's input rows.
//!
//! The rows are split into up to 64 independent parts of at least 1024 rows
//! (a PoRep partition is made of its challenges the same way; more parts
//! than a machine has cores, so one circuit can take them all): each part
//! has its own seed bits and picks only among ONE and its own variables;
//! the public inputs are allocated at the start of parts spread over the
//! circuit. On an extensible constraint system (bellperson's prover, cuzk's
//! witness and PCE systems) the parts are synthesized in parallel, each on
//! its own system, and appended in order with `extend`, through
//! `PartsGate::global()` as PoRep's challenges are (circuits synthesized at
//! once take the pool in turn); on any other, one after the other. Both
//! give the same layout.
//!
//! Row order and all choices come from an RNG seeded by (K, P, part); the
//! witness RNG (seeded by the witness seed and the part) only draws the seed
//! bits and the public inputs, everything else follows from them. Synthesis
//! is O(rows) and keeps two vectors of about 48 bytes per row (variables and
//! their values).

use bellperson::{Circuit, ConstraintSystem, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand_core::RngCore;

use super::{Family, below, check_size, random_nonzero, structure_rng, witness_rng};
use crate::gate::PartsGate;
use crate::witness::{Witness, WitnessCs};

/// See the module docs of `porep`.
#[derive(Clone, Debug)]
pub struct PorepShaped {
    log_rows: u32,
    bool_percent: u8,
    witness_seed: u64,
    /// One part after the other even on an extensible system (for tests).
    sequential: bool,
}

impl PorepShaped {
    pub fn new(log_rows: u32, bool_percent: u8, witness_seed: u64) -> Self {
        PorepShaped {
            log_rows,
            bool_percent,
            witness_seed,
            sequential: false,
        }
    }

    /// The same circuit, synthesized one part after the other whatever the
    /// constraint system: the layout the parallel way must reproduce.
    pub fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }

    /// The circuit's witness, each part synthesized in parallel straight
    /// into its place in the whole witness ([`Witness::fill_sized_parts`]:
    /// no buffer per part, nothing copied afterwards; every row allocates
    /// one aux value, so a part's size is its row count), through
    /// [`PartsGate::global`]. The same values as
    /// [`Witness::synthesize_with_capacity`] of the circuit; `inputs` and
    /// `aux` are the sizes the PCE has, and sizes other than this circuit's
    /// fall back to that (whose result the caller then finds different).
    pub fn witness(self, inputs: usize, aux: usize) -> crate::Result<Witness> {
        let _s = tracing::info_span!("witness", aux).entered();
        if check_size(self.family(), self.log_rows).is_err() || self.bool_percent > 100 {
            return Err(SynthesisError::Unsatisfiable.into());
        }
        let rows = (1usize << self.log_rows) - (PUBLIC_INPUTS + 1);
        let parts = part_count(rows);
        if self.sequential || parts == 1 || inputs != PUBLIC_INPUTS + 1 || aux != rows {
            return Witness::synthesize_with_capacity(self, inputs, aux);
        }
        let head = WitnessCs::with_capacity(inputs, aux).into_witness();
        let sized = (0..parts)
            .map(|index| {
                let part = Part::new(&self, rows, parts, index);
                (part.rows, part)
            })
            .collect();
        let pass = PartsGate::global().try_enter(parts)?;
        let w = head.fill_sized_parts(sized, |cs, part| {
            let done = part.synthesize(cs);
            pass.part_done();
            done.map_err(Into::into)
        });
        drop(pass);
        w
    }

    fn family(&self) -> Family {
        Family::PorepShaped {
            bool_percent: self.bool_percent,
        }
    }
}

/// Full-field public inputs, besides ONE.
const PUBLIC_INPUTS: usize = 4;
/// Seed bits have C empty; more of them would pull C's average below 2.2 at
/// small K, while 16 already give XOR rows 2^16 distinct bit patterns.
const MAX_SEED_BITS: usize = 16;
/// How far back "recent" reaches when a row picks an earlier variable.
const WINDOW: usize = 1024;

/// An index in 0..len (len > 0): mostly among the last `WINDOW`, else any.
fn pick(rng: &mut impl RngCore, len: usize) -> usize {
    if len > WINDOW && below(rng, 4) == 0 {
        below(rng, len)
    } else {
        len - 1 - below(rng, len.min(WINDOW))
    }
}

/// A coefficient as small as those in real gadgets, sometimes a full-field one.
fn small_coeff(rng: &mut impl RngCore) -> Scalar {
    match below(rng, 10) {
        0..=4 => Scalar::ONE,
        5 | 6 => -Scalar::ONE,
        7 | 8 => Scalar::ONE.double(),
        _ => random_nonzero(rng),
    }
}

/// The most independent parts a circuit is made of, as a PoRep partition
/// is made of its challenges (18 at 32 GiB). More than the gate's bound on
/// a 16-core machine (32 parts): one circuit at a time takes every core, so
/// of circuits synthesized at once the first is done first.
const MAX_PARTS: usize = 64;
/// Rows a part has at least (smaller circuits have fewer parts).
const MIN_PART_ROWS: usize = 1024;

/// How many parts a circuit of `rows` rows (bellperson's input rows not
/// counted) is made of.
fn part_count(rows: usize) -> usize {
    (rows / MIN_PART_ROWS).clamp(1, MAX_PARTS)
}

/// One part: its share of the rows and of the public inputs.
struct Part {
    log_rows: u32,
    bool_percent: u8,
    witness_seed: u64,
    index: usize,
    rows: usize,
    inputs: std::ops::Range<usize>,
}

impl Part {
    /// Part `index` of `parts` of a circuit with `rows` rows.
    fn new(circuit: &PorepShaped, rows: usize, parts: usize, index: usize) -> Part {
        Part {
            log_rows: circuit.log_rows,
            bool_percent: circuit.bool_percent,
            witness_seed: circuit.witness_seed,
            index,
            rows: rows / parts + usize::from(index < rows % parts),
            inputs: index * PUBLIC_INPUTS / parts..(index + 1) * PUBLIC_INPUTS / parts,
        }
    }

    /// The part's variables and rows; only ONE and what the part allocates
    /// are referenced, so parts can be synthesized apart and appended.
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let rows = self.rows;
        let n_bool = (rows * usize::from(self.bool_percent) + 50) / 100;
        let n_seed = (rows / 64).clamp(2, MAX_SEED_BITS).min(n_bool);
        // XOR rows need two distinct bits: when there are any, n_bool > n_seed,
        // so n_seed was not cut by n_bool and is at least 2.
        let mut xor_left = n_bool - n_seed;
        let mut field_left = rows - n_bool;

        let mut shape = structure_rng(
            "porep",
            &[
                u64::from(self.log_rows),
                u64::from(self.bool_percent),
                self.index as u64,
            ],
        );
        let mut witness = witness_rng("porep", self.witness_seed ^ ((self.index as u64) << 32));
        let two = Scalar::ONE.double();

        // The pool of earlier variables; bits[] indexes the boolean ones.
        let mut vars: Vec<Variable> = Vec::with_capacity(rows + 1 + self.inputs.len());
        let mut vals: Vec<Scalar> = Vec::with_capacity(rows + 1 + self.inputs.len());
        let mut bits: Vec<usize> = Vec::with_capacity(n_bool);
        vars.push(CS::one());
        vals.push(Scalar::ONE);

        for j in self.inputs.clone() {
            let value = random_nonzero(&mut witness);
            vars.push(cs.alloc_input(|| format!("input {j}"), || Ok(value))?);
            vals.push(value);
        }

        for j in 0..n_seed {
            let value = if witness.next_u32() & 1 == 1 {
                Scalar::ONE
            } else {
                Scalar::ZERO
            };
            let b = cs.alloc(|| format!("seed bit {j}"), || Ok(value))?;
            cs.enforce(
                || format!("seed bit {j} is boolean"),
                |lc| lc + b,
                |lc| lc + b - CS::one(),
                |lc| lc,
            );
            bits.push(vars.len());
            vars.push(b);
            vals.push(value);
        }

        let body = xor_left + field_left;
        for row in 0..body {
            // Selection sampling: exactly xor_left XOR rows, in random places.
            if below(&mut shape, xor_left + field_left) < xor_left {
                xor_left -= 1;
                let i = bits[pick(&mut shape, bits.len())];
                let j = loop {
                    let j = bits[pick(&mut shape, bits.len())];
                    if j != i {
                        break j;
                    }
                };
                let (a, b) = (vars[i], vars[j]);
                let value = if vals[i] == vals[j] {
                    Scalar::ZERO
                } else {
                    Scalar::ONE
                };
                let c = cs.alloc(|| format!("xor {row}"), || Ok(value))?;
                // a xor b = a + b - 2ab
                cs.enforce(
                    || format!("row {row} xor"),
                    |lc| lc + (two, a),
                    |lc| lc + b,
                    |lc| lc + a + b - c,
                );
                bits.push(vars.len());
                vars.push(c);
                vals.push(value);
            } else {
                field_left -= 1;
                // A part's first rows may have fewer earlier variables.
                let n_a = (if below(&mut shape, 5) == 0 { 3 } else { 4 }).min(vars.len());
                let mut a_terms = [(0usize, Scalar::ZERO); 4];
                let mut filled = 0;
                while filled < n_a {
                    // Distinct, or LinearCombination would merge the terms.
                    let idx = pick(&mut shape, vars.len());
                    if a_terms[..filled].iter().all(|&(k, _)| k != idx) {
                        a_terms[filled] = (idx, small_coeff(&mut shape));
                        filled += 1;
                    }
                }
                let a_terms = &a_terms[..n_a];
                let b_idx = pick(&mut shape, vars.len());
                let other = if below(&mut shape, 5) < 2 {
                    let sign = if shape.next_u32() & 1 == 0 {
                        Scalar::ONE
                    } else {
                        -Scalar::ONE
                    };
                    Some((pick(&mut shape, vars.len()), sign))
                } else {
                    None
                };

                let a_value: Scalar = a_terms.iter().map(|&(i, k)| vals[i] * k).sum();
                let mut value = a_value * vals[b_idx];
                if let Some((o, k)) = other {
                    value -= vals[o] * k;
                }
                let v = cs.alloc(|| format!("v {row}"), || Ok(value))?;
                cs.enforce(
                    || format!("row {row} field"),
                    |lc| a_terms.iter().fold(lc, |lc, &(i, k)| lc + (k, vars[i])),
                    |lc| lc + vars[b_idx],
                    |lc| match other {
                        Some((o, k)) => lc + v + (k, vars[o]),
                        None => lc + v,
                    },
                );
                vars.push(v);
                vals.push(value);
            }
        }
        Ok(())
    }
}

impl Circuit<Scalar> for PorepShaped {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(self.family(), self.log_rows)?;
        if self.bool_percent > 100 {
            return Err(SynthesisError::Unsatisfiable);
        }
        let rows = (1usize << self.log_rows) - (PUBLIC_INPUTS + 1);
        let parts = part_count(rows);
        if CS::is_extensible() && parts > 1 && !self.sequential {
            // Circuits synthesized at once take rayon's pool in turn, as
            // PoRep's partitions do, so the first finishes first.
            let pass = PartsGate::global().enter(parts);
            // Each part a task of its own, queued from outside the pool in
            // order (no joins: see `Witness::fill_sized_parts`).
            let mut made: Vec<Option<Result<CS, SynthesisError>>> =
                (0..parts).map(|_| None).collect();
            let (this, pass_ref) = (&self, &pass);
            rayon::in_place_scope(|scope| {
                for (index, out) in made.iter_mut().enumerate() {
                    scope.spawn(move |_| {
                        let mut part = CS::new();
                        let done = part
                            .alloc_input(|| "temp ONE", || Ok(Scalar::ONE))
                            .and_then(|_| {
                                Part::new(this, rows, parts, index)
                                    .synthesize(&mut part.namespace(|| format!("part {index}")))
                            });
                        pass_ref.part_done();
                        *out = Some(done.map(|()| part));
                    });
                }
            });
            drop(pass);
            let made = made
                .into_iter()
                .map(|m| m.unwrap_or(Err(SynthesisError::AssignmentMissing)))
                .collect::<Result<Vec<CS>, SynthesisError>>();
            for part in &made? {
                cs.extend(part);
            }
        } else {
            for index in 0..parts {
                Part::new(&self, rows, parts, index)
                    .synthesize(&mut cs.namespace(|| format!("part {index}")))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::CircuitSpec;
    use crate::circuits::tests::Recorder;
    use bellperson::util_cs::test_cs::TestConstraintSystem;
    use bellperson::{Index, LinearCombination};
    use rayon::prelude::*;

    /// Counts what a PCE would store, without keeping anything: rows, and
    /// nonzero coefficients per matrix. Calls the value closures like a
    /// witness-generating CS would, so timing it measures real synthesis.
    #[derive(Default)]
    struct Counter {
        inputs: usize,
        aux: usize,
        rows: usize,
        nnz: [usize; 3],
    }

    impl Counter {
        fn new() -> Self {
            // bellperson allocates ONE before synthesize.
            Counter {
                inputs: 1,
                ..Counter::default()
            }
        }

        /// Averages over the full matrix bellperson proves: the circuit's
        /// rows plus one (A = input, B = C = 0) row per input.
        fn averages(&self) -> (usize, [f64; 3]) {
            let total = self.rows + self.inputs;
            let nnz = [self.nnz[0] + self.inputs, self.nnz[1], self.nnz[2]];
            (total, nnz.map(|n| n as f64 / total as f64))
        }
    }

    impl ConstraintSystem<Scalar> for Counter {
        type Root = Self;

        fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            std::hint::black_box(f()?);
            self.aux += 1;
            Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
        }

        fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            std::hint::black_box(f()?);
            self.inputs += 1;
            Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
        }

        fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
        where
            A: FnOnce() -> AR,
            AR: Into<String>,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            let lcs = [
                a(LinearCombination::zero()),
                b(LinearCombination::zero()),
                c(LinearCombination::zero()),
            ];
            for (n, lc) in self.nnz.iter_mut().zip(&lcs) {
                *n += lc.iter().filter(|(_, k)| !bool::from(k.is_zero())).count();
            }
            self.rows += 1;
        }

        fn push_namespace<NR: Into<String>, N: FnOnce() -> NR>(&mut self, _: N) {}

        fn pop_namespace(&mut self) {}

        fn get_root(&mut self) -> &mut Self {
            self
        }
    }

    fn count(log_rows: u32, bool_percent: u8, seed: u64) -> Counter {
        let mut cs = Counter::new();
        PorepShaped::new(log_rows, bool_percent, seed)
            .synthesize(&mut cs)
            .unwrap_or_else(|e| panic!("porep:{log_rows}:{bool_percent}: {e}"));
        cs
    }

    #[test]
    fn nonzeros_per_row_match_porep_at_k12() {
        let (total, [a, b, c]) = count(12, 50, 1).averages();
        println!("porep:12 A {a:.4} B {b:.4} C {c:.4} over {total} rows");
        assert_eq!(total, 1 << 12);
        assert!((a - 2.4).abs() <= 0.15, "A {a}");
        assert!((b - 1.0).abs() <= 0.15, "B {b}");
        assert!((c - 2.2).abs() <= 0.15, "C {c}");

        // The same from the recorded rows, counting only the circuit's rows
        // (bellperson's input rows are appended by its prover, not here).
        let spec = CircuitSpec {
            family: Family::PorepShaped { bool_percent: 50 },
            size: 12,
        };
        let cs = Recorder::record(&spec, 1);
        let rows = cs.rows.len() as f64;
        let mut nnz = [0usize; 3];
        for row in &cs.rows {
            for (n, lc) in nnz.iter_mut().zip(row) {
                *n += lc.iter().filter(|(_, k)| !bool::from(k.is_zero())).count();
            }
        }
        let [a, b, c] = nnz.map(|n| n as f64 / rows);
        println!("porep:12 circuit rows only: A {a:.4} B {b:.4} C {c:.4}");
        assert!((a - 2.4).abs() <= 0.15 && (b - 1.0).abs() <= 0.15 && (c - 2.2).abs() <= 0.15);
    }

    #[test]
    fn every_percentage_fills_the_domain_exactly_and_is_satisfied() {
        for (k, p) in [
            (5, 0),
            (5, 50),
            (5, 100),
            (6, 1),
            (8, 0),
            (8, 75),
            (8, 100),
            (9, 99),
        ] {
            let spec = CircuitSpec {
                family: Family::PorepShaped { bool_percent: p },
                size: k,
            };
            let mut cs = TestConstraintSystem::<Scalar>::new();
            spec.build(3)
                .synthesize(&mut cs)
                .unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(cs.is_satisfied(), "{spec}: {:?}", cs.which_is_unsatisfied());
            assert_eq!(cs.num_constraints() + cs.num_inputs(), 1 << k, "{spec}");
            assert_eq!(cs.num_inputs(), 1 + PUBLIC_INPUTS, "{spec}");
        }
    }

    #[test]
    fn boolean_fraction_follows_p() {
        for p in [0u8, 20, 50, 80, 100] {
            let (_, [a, _, _]) = count(12, p, 1).averages();
            // A has 1 term on boolean rows and 3.8 on field rows.
            let expect = f64::from(p) / 100.0 + (1.0 - f64::from(p) / 100.0) * 3.8;
            assert!((a - expect).abs() < 0.1, "P={p}: A {a} vs {expect}");
        }
    }

    #[test]
    fn parts_in_parallel_give_the_layout_of_one_part_after_the_other() {
        use crate::{Pce, Witness};
        // 1 part (K=10), 3 parts (K=12), 32 parts (K=15), 64 (K=17),
        // P = 0, 50, 100.
        for (k, p) in [(10, 50), (12, 50), (12, 100), (15, 0), (15, 50), (17, 50)] {
            let circuit = || PorepShaped::new(k, p, 4);
            let parallel = Pce::record(circuit()).unwrap();
            let sequential = Pce::record(circuit().sequential()).unwrap();
            assert_eq!(
                (parallel.num_inputs, parallel.num_aux),
                (sequential.num_inputs, sequential.num_aux)
            );
            assert_eq!(parallel.num_inputs, 1 + PUBLIC_INPUTS, "porep:{k}:{p}");
            assert_eq!(parallel.num_constraints(), 1 << k, "porep:{k}:{p}");
            for (m, n) in [
                (&parallel.a, &sequential.a),
                (&parallel.b, &sequential.b),
                (&parallel.c, &sequential.c),
            ] {
                for i in 0..m.rows() {
                    assert_eq!(m.row(i), n.row(i), "porep:{k}:{p} row {i}");
                }
            }
            assert_eq!(parallel.coeff_table, sequential.coeff_table);
            assert_eq!(
                parallel.b_aux_density.iter().collect::<Vec<_>>(),
                sequential.b_aux_density.iter().collect::<Vec<_>>()
            );
            let w = Witness::synthesize(circuit()).unwrap();
            assert_eq!(w, Witness::synthesize(circuit().sequential()).unwrap());
            crate::evaluate(&parallel, &w).expect("the parallel witness satisfies the PCE");
            // Parts written in place give the same values.
            let in_place = circuit()
                .witness(parallel.num_inputs, parallel.num_aux)
                .unwrap();
            assert_eq!(in_place, w, "porep:{k}:{p} in place");
        }
        assert_eq!(part_count((1 << 12) - 5), 3);
        assert_eq!(part_count((1 << 24) - 5), MAX_PARTS);
    }

    #[test]
    fn many_circuits_synthesized_at_once_on_a_small_pool_all_finish() {
        use crate::Witness;
        // As bellperson's batch prover does: circuits synthesized in
        // parallel on rayon's threads, each entering the gate for its parts.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let made: Vec<Witness> = pool.install(|| {
            (0..8u64)
                .into_par_iter()
                .map(|seed| Witness::synthesize(PorepShaped::new(12, 50, seed)).unwrap())
                .collect()
        });
        for (seed, w) in made.iter().enumerate() {
            let alone = Witness::synthesize(PorepShaped::new(12, 50, seed as u64).sequential());
            assert_eq!(w, &alone.unwrap(), "seed {seed}");
        }
    }

    #[test]
    fn parts_in_place_on_a_small_pool_and_with_other_sizes() {
        use crate::Witness;
        let sizes = |k: u32| (1 + PUBLIC_INPUTS, (1usize << k) - (PUBLIC_INPUTS + 1));
        // Several at once from a 2-thread pool's own threads (as the
        // engine's synthesis threads may be), 3 and 64 parts each.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for k in [12, 17] {
            let (inputs, aux) = sizes(k);
            let made: Vec<Witness> = pool.install(|| {
                (0..6u64)
                    .into_par_iter()
                    .map(|seed| PorepShaped::new(k, 50, seed).witness(inputs, aux).unwrap())
                    .collect()
            });
            for (seed, w) in made.iter().enumerate() {
                let alone = Witness::synthesize(PorepShaped::new(k, 50, seed as u64).sequential());
                assert_eq!(w, &alone.unwrap(), "porep:{k} seed {seed}");
                assert_eq!((w.inputs.len(), w.aux.len()), (inputs, aux));
            }
        }
        // Sizes of another shape: the ordinary synthesis, the same values.
        let (inputs, aux) = sizes(12);
        let reference = Witness::synthesize(PorepShaped::new(12, 50, 9).sequential()).unwrap();
        for (i, a) in [
            (inputs, aux + 1),
            (inputs, aux - 1),
            (0, 0),
            (inputs + 2, aux),
        ] {
            let w = PorepShaped::new(12, 50, 9).witness(i, a).unwrap();
            assert_eq!(w, reference, "hint ({i}, {a})");
        }
        // Through the built-in circuit and its instance.
        let spec: CircuitSpec = "porep:12".parse().unwrap();
        let via_instance = spec.instance(9).witness(inputs, aux).unwrap();
        assert_eq!(via_instance, reference);
        // Out of range sizes are refused, not attempted.
        assert!(PorepShaped::new(40, 50, 1).witness(0, 0).is_err());
        assert!(PorepShaped::new(12, 101, 1).witness(inputs, aux).is_err());
    }

    /// Larger sizes through the counting CS: `CUZK_TEST_LOG2=20` for the
    /// benchmark scale, small by default.
    #[test]
    fn large_size_counts_and_shape() {
        let log2: u32 = std::env::var("CUZK_TEST_LOG2")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(14);
        let start = std::time::Instant::now();
        let cs = count(log2, 50, 9);
        let elapsed = start.elapsed();
        let (total, [a, b, c]) = cs.averages();
        println!(
            "porep:{log2}: {elapsed:?}, A {a:.4} B {b:.4} C {c:.4}, aux {}",
            cs.aux
        );
        assert_eq!(total, 1 << log2);
        assert!((a - 2.4).abs() <= 0.15 && (b - 1.0).abs() <= 0.15 && (c - 2.2).abs() <= 0.15);
    }
}
