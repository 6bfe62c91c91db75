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

mod constant_only;
mod many_inputs;
mod mul_chain;
mod no_aux;
mod parts;
mod porep;
mod repeated_vars;
mod sha256;

use std::fmt;
use std::str::FromStr;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

pub use constant_only::ConstantOnly;
pub use many_inputs::ManyInputs;
pub use mul_chain::MulChain;
pub use no_aux::NoAux;
pub use parts::Parts;
pub use porep::PorepShaped;
pub use repeated_vars::RepeatedVars;
pub use sha256::Sha256;

/// A circuit shape: family + size. Parameters are made per shape; many
/// witnesses per shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CircuitSpec {
    pub family: Family,
    pub size: u32,
}

/// The built-in circuit families. What `size` means depends on the family;
/// see [`CircuitSpec::families`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    MulChain,
    Sha256,
    /// `bool_percent`: percent of rows that are boolean (0..=100).
    PorepShaped {
        bool_percent: u8,
    },
    NoAux,
    ManyInputs,
    RepeatedVars,
    ConstantOnly,
    Parts,
}

/// `porep:K` without `:P` means this many percent boolean rows, about what
/// Filecoin's PoRep has and what gives A/B/C ≈ 2.4/1.0/2.2 nonzeros per row.
pub const DEFAULT_BOOL_PERCENT: u8 = 50;

/// What `families()` prints, one entry per family, in `FromStr` syntax.
const FAMILIES: &[(&str, &str)] = &[
    (
        "mul-chain:K",
        "multiplication chain x' = x*(x + k), k constants, full-field values, public input \
         at both ends; exactly 2^K constraints (K in 3..=30)",
    ),
    (
        "sha256:N",
        "SHA-256 of an (N*64 - 9)-byte preimage, i.e. N blocks, digest packed into 2 public \
         inputs; boolean-heavy like Filecoin; 26704N-670 constraints (N in 1..=4096)",
    ),
    (
        "porep:K[:P]",
        "synthetic PoRep-shaped R1CS, P% boolean rows (default 50), about 2.4/1.0/2.2 \
         nonzeros per row in A/B/C at P=50, 4 public inputs; exactly 2^K constraints \
         (K in 5..=30, P in 0..=100)",
    ),
    (
        "no-aux:N",
        "N products x_i*x_(i+1) = y_i of public inputs, no aux variables at all; \
         3N+2 constraints (N in 1..=2^24)",
    ),
    (
        "many-inputs:N",
        "2^N public inputs, each squared into an aux, squares summed in one long row; \
         2^(N+1)+2 constraints (N in 0..=20)",
    ),
    (
        "repeated-vars:N",
        "N blocks of linear combinations that repeat a variable or cancel it to a zero \
         coefficient, incl. a variable with zero A and B density; 3N+3 constraints (N in 1..=2^24)",
    ),
    (
        "constant-only:N",
        "N blocks of rows holding only the ONE variable with constants, (3)*(5) = 15, mixed \
         with (x)*(2) = y; plus an empty and a B-and-C-empty row; 3N+3 constraints \
         (N in 1..=2^24)",
    ),
    (
        "parts:N",
        "N independent parts, synthesized in parallel and joined with `extend` on an \
         extensible constraint system (as WindowPoSt synthesizes its sectors), else one \
         after the other; a public input per part; 35N+1 constraints (N in 1..=4096)",
    ),
];

impl Family {
    /// The name used in spec strings.
    pub fn name(self) -> &'static str {
        match self {
            Family::MulChain => "mul-chain",
            Family::Sha256 => "sha256",
            Family::PorepShaped { .. } => "porep",
            Family::NoAux => "no-aux",
            Family::ManyInputs => "many-inputs",
            Family::RepeatedVars => "repeated-vars",
            Family::ConstantOnly => "constant-only",
            Family::Parts => "parts",
        }
    }

    /// Valid sizes. The upper bounds keep a typo from asking for terabytes;
    /// the lower bounds are what the construction needs (porep needs room for
    /// its 4 public inputs and 5 appended rows, mul-chain for its 4 fixed rows).
    pub fn size_range(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Family::MulChain => 3..=30,
            Family::Sha256 => 1..=4096,
            Family::PorepShaped { .. } => 5..=30,
            Family::ManyInputs => 0..=20,
            Family::Parts => 1..=4096,
            Family::NoAux | Family::RepeatedVars | Family::ConstantOnly => 1..=1 << 24,
        }
    }

    fn by_name(name: &str) -> Option<Family> {
        Some(match name {
            "mul-chain" => Family::MulChain,
            "sha256" => Family::Sha256,
            "porep" => Family::PorepShaped {
                bool_percent: DEFAULT_BOOL_PERCENT,
            },
            "no-aux" => Family::NoAux,
            "many-inputs" => Family::ManyInputs,
            "repeated-vars" => Family::RepeatedVars,
            "constant-only" => Family::ConstantOnly,
            "parts" => Family::Parts,
            _ => return None,
        })
    }
}

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

    /// Families with a one-line description and the meaning of `size`, for
    /// `--help` output. The first string is the spec syntax, e.g. `porep:K[:P]`.
    pub fn families() -> &'static [(&'static str, &'static str)] {
        FAMILIES
    }

    /// Checks the size (and porep's percentage) against the family's range.
    pub fn validate(&self) -> Result<(), SpecError> {
        let range = self.family.size_range();
        if !range.contains(&self.size) {
            return Err(SpecError(format!(
                "{} size {} is out of range {}..={}; {}",
                self.family.name(),
                self.size,
                range.start(),
                range.end(),
                valid_specs()
            )));
        }
        if let Family::PorepShaped { bool_percent } = self.family
            && bool_percent > 100
        {
            return Err(SpecError(format!(
                "porep boolean percentage {bool_percent} is over 100; {}",
                valid_specs()
            )));
        }
        Ok(())
    }
}

/// Two small sizes per family, for exhaustive tests: each under ~2^12
/// constraints except sha256 (1 and 2 blocks: 26,034 and 52,738).
pub fn all_test_specs() -> Vec<CircuitSpec> {
    let spec = |family, size| CircuitSpec { family, size };
    vec![
        spec(Family::MulChain, 3),
        spec(Family::MulChain, 10),
        spec(Family::Sha256, 1),
        spec(Family::Sha256, 2),
        spec(Family::PorepShaped { bool_percent: 20 }, 7),
        spec(
            Family::PorepShaped {
                bool_percent: DEFAULT_BOOL_PERCENT,
            },
            12,
        ),
        spec(Family::NoAux, 1),
        spec(Family::NoAux, 16),
        spec(Family::ManyInputs, 0),
        spec(Family::ManyInputs, 8),
        spec(Family::RepeatedVars, 1),
        spec(Family::RepeatedVars, 8),
        spec(Family::ConstantOnly, 1),
        spec(Family::ConstantOnly, 8),
        spec(Family::Parts, 1),
        spec(Family::Parts, 8),
    ]
}

/// A spec string that does not parse, or a spec out of range. The message
/// says what is valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(String);

impl SpecError {
    pub fn message(&self) -> &str {
        &self.0
    }
}

fn valid_specs() -> String {
    let list: Vec<&str> = FAMILIES.iter().map(|(syntax, _)| *syntax).collect();
    format!("valid circuit specs: {}", list.join(", "))
}

impl FromStr for CircuitSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        let s = s.trim();
        let mut fields = s.split(':');
        // `split` always yields at least one field, possibly empty.
        let name = fields.next().unwrap_or_default();
        let Some(mut family) = Family::by_name(name) else {
            return Err(SpecError(format!(
                "unknown circuit family `{name}` in `{s}`; {}",
                valid_specs()
            )));
        };
        let Some(size) = fields.next() else {
            return Err(SpecError(format!("`{s}` has no size; {}", valid_specs())));
        };
        let size: u32 = size.parse().map_err(|_| {
            SpecError(format!(
                "size `{size}` in `{s}` is not a non-negative integer; {}",
                valid_specs()
            ))
        })?;
        if let Family::PorepShaped { bool_percent } = &mut family
            && let Some(p) = fields.next()
        {
            *bool_percent = p.parse().map_err(|_| {
                SpecError(format!(
                    "boolean percentage `{p}` in `{s}` is not an integer in 0..=100; {}",
                    valid_specs()
                ))
            })?;
        }
        if fields.next().is_some() {
            return Err(SpecError(format!(
                "`{s}` has too many `:` fields; {}",
                valid_specs()
            )));
        }
        let spec = CircuitSpec { family, size };
        spec.validate()?;
        Ok(spec)
    }
}

impl fmt::Display for CircuitSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.family.name(), self.size)?;
        match self.family {
            Family::PorepShaped { bool_percent } if bool_percent != DEFAULT_BOOL_PERCENT => {
                write!(f, ":{bool_percent}")
            }
            _ => Ok(()),
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
    use bellperson::{Index, LinearCombination, Variable};

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

    #[test]
    fn specs_round_trip_through_display_and_from_str() {
        let mut specs = all_test_specs();
        for p in [0, 1, 50, 99, 100] {
            specs.push(CircuitSpec {
                family: Family::PorepShaped { bool_percent: p },
                size: 20,
            });
        }
        for spec in specs {
            let text = spec.to_string();
            let back: CircuitSpec = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(back, spec, "{text}");
        }
        let parse = |s: &str| s.parse::<CircuitSpec>();
        assert_eq!(parse("porep:12:50"), parse("porep:12"));
        assert_eq!(
            parse("porep:12:50").map(|s| s.to_string()).as_deref(),
            Ok("porep:12")
        );
        assert_eq!(
            parse("porep:12:30").map(|s| s.to_string()).as_deref(),
            Ok("porep:12:30")
        );
        assert_eq!(
            parse(" mul-chain:10 "),
            Ok(CircuitSpec {
                family: Family::MulChain,
                size: 10
            })
        );
        for s in [
            "mul-chain:10",
            "sha256:1",
            "porep:12",
            "porep:12:50",
            "no-aux:4",
            "many-inputs:6",
            "repeated-vars:8",
            "constant-only:8",
        ] {
            assert!(parse(s).is_ok(), "{s}");
        }
    }

    #[test]
    fn bad_specs_are_refused_with_the_valid_list() {
        for s in [
            "",
            ":",
            "mul-chain",
            "mul-chain:",
            "mul-chain:x",
            "mul-chain:-1",
            "mul-chain:2",
            "mul-chain:31",
            "mul-chain:10:5",
            "Mul-Chain:10",
            "sha256:0",
            "sha256:1:2",
            "porep:4",
            "porep:12:101",
            "porep:12:-1",
            "porep:12:",
            "porep:12:50:1",
            "many-inputs:21",
            "no-aux:0",
            "repeated-vars:0",
            "constant-only:99999999999",
            "foo:3",
        ] {
            match s.parse::<CircuitSpec>() {
                Ok(spec) => panic!("`{s}` parsed as {spec:?}"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("valid circuit specs"), "{s}: {msg}");
                    assert!(msg.contains("porep:K[:P]"), "{s}: {msg}");
                }
            }
        }
    }

    #[test]
    fn families_list_matches_the_parser() {
        let names: Vec<&str> = CircuitSpec::families()
            .iter()
            .map(|(syntax, _)| syntax.split(':').next().unwrap_or_default())
            .collect();
        assert_eq!(names.len(), 8);
        for spec in all_test_specs() {
            assert!(names.contains(&spec.family.name()), "{spec}");
            let min = *spec.family.size_range().start();
            let text = format!("{}:{min}", spec.family.name());
            assert!(text.parse::<CircuitSpec>().is_ok(), "{text}");
        }
    }

    #[test]
    fn out_of_range_hand_made_spec_fails_to_synthesize() {
        for spec in [
            CircuitSpec {
                family: Family::MulChain,
                size: 2,
            },
            CircuitSpec {
                family: Family::PorepShaped { bool_percent: 101 },
                size: 8,
            },
            CircuitSpec {
                family: Family::PorepShaped { bool_percent: 50 },
                size: 4,
            },
            CircuitSpec {
                family: Family::Sha256,
                size: 0,
            },
            CircuitSpec {
                family: Family::ManyInputs,
                size: 40,
            },
        ] {
            assert!(spec.validate().is_err(), "{spec:?}");
            let mut cs = TestConstraintSystem::<Scalar>::new();
            assert!(spec.build(1).synthesize(&mut cs).is_err(), "{spec:?}");
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
