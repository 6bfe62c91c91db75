//! The pre-compiled constraint evaluator (PCE): a circuit's R1CS recorded once
//! per shape as CSR matrices, so every later proof of that shape only needs a
//! witness and three sparse matrix-vector products.
//!
//! The layout is bellperson's exactly: input 0 is ONE, allocated before
//! `synthesize`; after it, one constraint `input_i * 0 = 0` per input is
//! appended. Columns are `[inputs | aux]`. Densities follow bellperson's
//! prover: a variable counts as used in A (or B) when it appears there with a
//! non-zero coefficient after the linear combination merged repeated terms.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::{Result, SynthError};

mod released;
pub use released::{MatrixSource, Released};

/// Coefficient index of 1 in every PCE's coefficient table.
pub const COEFF_ONE: u32 = 0;
/// Coefficient index of -1 in every PCE's coefficient table.
pub const COEFF_MINUS_ONE: u32 = 1;

/// Marks an aux column while recording, before the number of inputs is known.
const AUX_TAG: u32 = 1 << 31;

/// A sparse matrix in compressed sparse row form. Coefficients are indices
/// into the owning [`Pce`]'s coefficient table: Filecoin circuits use few
/// distinct coefficients (mostly ±1 and powers of two), so 4 bytes per
/// non-zero instead of 32.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Csr {
    /// `row_ptr[i]..row_ptr[i + 1]` are row i's entries; `rows() + 1` long.
    pub row_ptr: Vec<u64>,
    /// Column of each entry, in `[inputs | aux]` numbering.
    pub cols: Vec<u32>,
    /// Coefficient-table index of each entry.
    pub coeffs: Vec<u32>,
}

impl Csr {
    fn new() -> Self {
        Csr {
            row_ptr: vec![0],
            cols: Vec::new(),
            coeffs: Vec::new(),
        }
    }

    /// Number of rows (constraints).
    pub fn rows(&self) -> usize {
        self.row_ptr.len() - 1
    }

    /// Number of stored non-zeros.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// Columns and coefficient indices of row `i`.
    pub fn row(&self, i: usize) -> (&[u32], &[u32]) {
        let (s, e) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        (&self.cols[s..e], &self.coeffs[s..e])
    }

    fn bytes(&self) -> usize {
        self.row_ptr.len() * 8 + self.cols.len() * 4 + self.coeffs.len() * 4
    }
}

/// A bitmap over variables: which ones a query uses (bellperson's
/// `DensityTracker`, without the dependency).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
    count: usize,
}

impl Density {
    /// `len` variables, none used.
    pub fn new(len: usize) -> Self {
        Density {
            words: vec![0; len.div_ceil(64)],
            len,
            count: 0,
        }
    }

    /// Marks variable `i` as used.
    pub fn set(&mut self, i: usize) {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.words[w] & b == 0 {
            self.words[w] |= b;
            self.count += 1;
        }
    }

    /// Whether variable `i` is used.
    pub fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Number of variables covered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it covers no variable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of used variables (the length of the filtered parameter query).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The bitmap: bit `i % 64` of word `i / 64` is variable `i`; bits past
    /// [`Density::len`] are zero.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Iterates over all variables, yielding whether each is used.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| self.get(i))
    }
}

/// A recorded circuit shape: R1CS matrices, coefficient table and densities.
#[derive(Clone, Debug, PartialEq)]
pub struct Pce {
    /// Number of inputs, ONE included.
    pub num_inputs: usize,
    /// Number of aux (private) variables.
    pub num_aux: usize,
    /// The A, B and C matrices, one row per constraint, columns `[inputs | aux]`.
    pub a: Csr,
    pub b: Csr,
    pub c: Csr,
    /// Distinct coefficients; index 0 is 1 and index 1 is -1.
    pub coeff_table: Vec<Scalar>,
    /// Aux variables used in A (A's inputs are always all used: bellperson
    /// appends an A-only constraint per input).
    pub a_aux_density: Density,
    /// Inputs used in B.
    pub b_input_density: Density,
    /// Aux variables used in B.
    pub b_aux_density: Density,
    /// Namespace path of every constraint, when recorded with names.
    pub names: Option<Vec<String>>,
    /// Set when the matrices were dropped from host memory
    /// ([`Pce::release_matrices`]): `a`, `b` and `c` are then empty, and
    /// this says what they were and where they come back from
    /// ([`Pce::with_matrices`]). `None` when building a `Pce`.
    pub released: Option<Released>,
    /// Values computed from the fields above on first use and kept (today
    /// the content [`Pce::fingerprint`]); `PceMemo::default()` when building
    /// a `Pce`.
    pub memo: PceMemo,
}

/// What a [`Pce`] computes from its own fields once and keeps. A PCE is not
/// changed after it is shared, so the memo stays true; a clone starts with
/// an empty memo (it may be changed before use), and the memo takes no part
/// in equality.
#[derive(Default)]
pub struct PceMemo {
    fingerprint: OnceLock<u64>,
}

impl Clone for PceMemo {
    fn clone(&self) -> Self {
        PceMemo::default()
    }
}

impl PartialEq for PceMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for PceMemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PceMemo")
            .field("fingerprint", &self.fingerprint.get())
            .finish()
    }
}

impl Pce {
    /// Records `circuit`'s shape. Values are never computed: allocation
    /// closures are not called.
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<Pce> {
        Self::record_inner(circuit, false)
    }

    /// Like [`Pce::record`], and also keeps every constraint's namespace path,
    /// so an unsatisfied constraint can be reported by name. Costs memory:
    /// for debugging and small circuits.
    pub fn record_with_names<C: Circuit<Scalar>>(circuit: C) -> Result<Pce> {
        Self::record_inner(circuit, true)
    }

    /// A 64-bit fingerprint of the matrices (row pointers, columns,
    /// coefficient indices) and the coefficient table, for caches keyed by
    /// content (a GPU keeps one device copy per distinct PCE). Computed on
    /// first use, reading the whole PCE in parallel on rayon's current pool,
    /// and kept: fields must not change after the first call on this value
    /// (a clone computes its own).
    pub fn fingerprint(&self) -> u64 {
        if let Some(r) = &self.released {
            return r.fingerprint;
        }
        *self.memo.fingerprint.get_or_init(|| {
            let mut h = 0x6a09_e667_f3bc_c908u64;
            for m in [&self.a, &self.b, &self.c] {
                h = mix(h, fingerprint_of(&m.row_ptr, |&x| x));
                h = mix(h, fingerprint_of(&m.cols, |&x| u64::from(x)));
                h = mix(h, fingerprint_of(&m.coeffs, |&x| u64::from(x)));
            }
            mix(
                h,
                fingerprint_of(&self.coeff_table, |s| {
                    s.to_repr().chunks(8).fold(0u64, |acc, b| {
                        let mut w = [0u8; 8];
                        w[..b.len()].copy_from_slice(b);
                        mix(acc, u64::from_le_bytes(w))
                    })
                }),
            )
        })
    }

    fn record_inner<C: Circuit<Scalar>>(circuit: C, names: bool) -> Result<Pce> {
        let _s = tracing::info_span!("pce_record").entered();
        let mut cs = RecordingCs::new(names);
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.num_inputs {
            cs.enforce(
                || format!("input constraint {i}"),
                |lc| lc + Variable(Index::Input(i)),
                |lc| lc,
                |lc| lc,
            );
        }
        cs.finish()
    }

    /// Number of constraints (rows), the appended input constraints included.
    pub fn num_constraints(&self) -> usize {
        match &self.released {
            Some(r) => r.rows,
            None => self.a.rows(),
        }
    }

    /// Stored entries of A, B and C (kept when the matrices are released).
    pub fn nnz(&self) -> [usize; 3] {
        match &self.released {
            Some(r) => r.nnz,
            None => [self.a.nnz(), self.b.nnz(), self.c.nnz()],
        }
    }

    /// Host bytes of the three matrices, held or (when released) as they
    /// were.
    pub fn matrix_bytes(&self) -> usize {
        match &self.released {
            Some(r) => r.bytes,
            None => self.a.bytes() + self.b.bytes() + self.c.bytes(),
        }
    }

    /// log2 of the evaluation domain: the smallest power of two holding every
    /// constraint, as bellperson's `EvaluationDomain::from_coeffs` picks it.
    pub fn domain_log2(&self) -> u32 {
        self.num_constraints().next_power_of_two().trailing_zeros()
    }

    /// Size of the evaluation domain (m).
    pub fn domain_size(&self) -> usize {
        1 << self.domain_log2()
    }

    /// Length of the parameters' `a` query: all inputs, then used aux.
    pub fn a_query_len(&self) -> usize {
        self.num_inputs + self.a_aux_density.count()
    }

    /// Length of the parameters' `b_g1` and `b_g2` queries.
    pub fn b_query_len(&self) -> usize {
        self.b_input_density.count() + self.b_aux_density.count()
    }

    /// Host bytes held by this PCE (for memory budgets).
    pub fn bytes(&self) -> usize {
        self.a.bytes()
            + self.b.bytes()
            + self.c.bytes()
            + self.coeff_table.len() * 32
            + (self.a_aux_density.words.len()
                + self.b_input_density.words.len()
                + self.b_aux_density.words.len())
                * 8
            + self
                .names
                .as_ref()
                .map_or(0, |n| n.iter().map(|s| s.len() + 24).sum())
    }

    /// Column `col` of the witness `[inputs | aux]`.
    #[inline]
    pub fn value<'w>(&self, inputs: &'w [Scalar], aux: &'w [Scalar], col: u32) -> &'w Scalar {
        let col = col as usize;
        if col < self.num_inputs {
            &inputs[col]
        } else {
            &aux[col - self.num_inputs]
        }
    }
}

/// A `ConstraintSystem` that records the shape of a circuit into a [`Pce`].
#[derive(Debug)]
pub struct RecordingCs {
    num_inputs: usize,
    num_aux: usize,
    a: Csr,
    b: Csr,
    c: Csr,
    coeffs: Coeffs,
    namespace: Vec<String>,
    names: Option<Vec<String>>,
    overflow: bool,
}

/// The distinct coefficients met so far, 1 and -1 first, and where each is.
#[derive(Debug)]
struct Coeffs {
    table: Vec<Scalar>,
    index: HashMap<[u8; 32], u32>,
}

impl Coeffs {
    fn new() -> Self {
        let table = vec![Scalar::ONE, -Scalar::ONE];
        let index = table
            .iter()
            .enumerate()
            .map(|(i, c)| (c.to_repr(), i as u32))
            .collect();
        Coeffs { table, index }
    }

    /// The index of `coeff` in the table, added if new.
    fn intern(&mut self, coeff: &Scalar) -> u32 {
        // Most coefficients are 1 or -1 (entries 0 and 1): compared as they
        // are, without the conversion and hash below.
        if *coeff == self.table[0] {
            return 0;
        }
        if *coeff == self.table[1] {
            return 1;
        }
        let next = self.table.len() as u32;
        let idx = *self.index.entry(coeff.to_repr()).or_insert(next);
        if idx == next {
            self.table.push(*coeff);
        }
        idx
    }
}

impl RecordingCs {
    fn new(names: bool) -> Self {
        RecordingCs {
            num_inputs: 0,
            num_aux: 0,
            a: Csr::new(),
            b: Csr::new(),
            c: Csr::new(),
            coeffs: Coeffs::new(),
            namespace: Vec::new(),
            names: names.then(Vec::new),
            overflow: false,
        }
    }

    fn push_row(&mut self, which: u8, lc: &LinearCombination<Scalar>) {
        let RecordingCs {
            a, b, c, coeffs, ..
        } = self;
        let m = match which {
            0 => a,
            1 => b,
            _ => c,
        };
        // Zero coefficients are skipped: bellperson's prover neither evaluates
        // nor counts them in the densities.
        for (&i, coeff) in lc.iter_inputs() {
            if !bool::from(coeff.is_zero()) {
                m.cols.push(i as u32);
                m.coeffs.push(coeffs.intern(coeff));
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if !bool::from(coeff.is_zero()) {
                m.cols.push(AUX_TAG | i as u32);
                m.coeffs.push(coeffs.intern(coeff));
            }
        }
        m.row_ptr.push(m.cols.len() as u64);
    }

    fn finish(self) -> Result<Pce> {
        if self.overflow {
            return Err(SynthError::TooLarge(format!(
                "more than 2^31 inputs or aux variables (inputs {}, aux {})",
                self.num_inputs, self.num_aux
            )));
        }
        let num_inputs = self.num_inputs;
        if num_inputs as u64 + self.num_aux as u64 > u32::MAX as u64 {
            return Err(SynthError::TooLarge(format!(
                "{} variables do not fit 32-bit column indices",
                num_inputs + self.num_aux
            )));
        }
        let mut a_aux_density = Density::new(self.num_aux);
        let mut b_input_density = Density::new(num_inputs);
        let mut b_aux_density = Density::new(self.num_aux);
        let a = untag_columns(self.a, num_inputs, None, &mut a_aux_density);
        let b = untag_columns(
            self.b,
            num_inputs,
            Some(&mut b_input_density),
            &mut b_aux_density,
        );
        let mut unused = Density::new(self.num_aux);
        let c = untag_columns(self.c, num_inputs, None, &mut unused);
        Ok(Pce {
            num_inputs,
            num_aux: self.num_aux,
            a,
            b,
            c,
            coeff_table: self.coeffs.table,
            a_aux_density,
            b_input_density,
            b_aux_density,
            names: self.names,
            released: None,
            memo: PceMemo::default(),
        })
    }
}

/// One step of a multiply-rotate hash (for fingerprints, not security).
fn mix(h: u64, x: u64) -> u64 {
    (h ^ x)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29)
        .wrapping_add(0x632b_e59b_d9b4_e019)
}

/// A fingerprint of `v`: chunks hashed in parallel and combined in order,
/// with the length mixed in.
fn fingerprint_of<T: Sync>(v: &[T], word: impl Fn(&T) -> u64 + Sync) -> u64 {
    const CHUNK: usize = 1 << 16;
    let chunks: Vec<u64> = v
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(i, c)| c.iter().fold(i as u64, |h, x| mix(h, word(x))))
        .collect();
    chunks.into_iter().fold(v.len() as u64, mix)
}

/// Turns recorded (tagged) columns into `[inputs | aux]` numbering and marks
/// the densities on the way.
fn untag_columns(
    mut m: Csr,
    num_inputs: usize,
    mut input_density: Option<&mut Density>,
    aux_density: &mut Density,
) -> Csr {
    for col in m.cols.iter_mut() {
        if *col & AUX_TAG != 0 {
            let i = (*col & !AUX_TAG) as usize;
            aux_density.set(i);
            *col = (num_inputs + i) as u32;
        } else if let Some(d) = input_density.as_deref_mut() {
            d.set(*col as usize);
        }
    }
    m
}

impl ConstraintSystem<Scalar> for RecordingCs {
    type Root = Self;

    /// A part for [`ConstraintSystem::extend`] (without names).
    fn new() -> Self {
        RecordingCs::new(false)
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.num_aux;
        self.num_aux += 1;
        self.overflow |= i as u64 >= AUX_TAG as u64;
        Ok(Variable(Index::Aux(i)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.num_inputs;
        self.num_inputs += 1;
        self.overflow |= i as u64 >= AUX_TAG as u64;
        Ok(Variable(Index::Input(i)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, name: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        if self.names.is_some() {
            let mut path = self.namespace.join("/");
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(&name().into());
            if let Some(names) = self.names.as_mut() {
                names.push(path);
            }
        }
        self.push_row(0, &a(LinearCombination::zero()));
        self.push_row(1, &b(LinearCombination::zero()));
        self.push_row(2, &c(LinearCombination::zero()));
    }

    fn push_namespace<NR, N>(&mut self, name_fn: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        if self.names.is_some() {
            self.namespace.push(name_fn().into());
        }
    }

    fn pop_namespace(&mut self) {
        self.namespace.pop();
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    /// Extensible, as bellperson's prover is: a circuit that synthesizes
    /// independent parts in parallel (WindowPoSt's sectors) takes the same
    /// path here as under bellperson.
    fn is_extensible() -> bool {
        true
    }

    /// Appends a part recorded on its own after a temporary ONE input:
    /// its input 0 is this system's ONE, its other inputs and its aux
    /// variables come after this system's, its constraints after these.
    fn extend(&mut self, other: &Self) {
        let input_base = self.num_inputs as u64;
        let aux_base = self.num_aux as u64;
        let other_inputs = other.num_inputs.saturating_sub(1);
        self.overflow |= other.overflow
            || input_base + other_inputs as u64 > AUX_TAG as u64
            || aux_base + other.num_aux as u64 > AUX_TAG as u64;
        if !self.overflow {
            let coeffs: Vec<u32> = other
                .coeffs
                .table
                .iter()
                .map(|c| self.coeffs.intern(c))
                .collect();
            let col = |c: u32| -> u32 {
                if c & AUX_TAG != 0 {
                    AUX_TAG | (aux_base as u32 + (c & !AUX_TAG))
                } else if c == 0 {
                    0
                } else {
                    input_base as u32 + c - 1
                }
            };
            for (dst, src) in [
                (&mut self.a, &other.a),
                (&mut self.b, &other.b),
                (&mut self.c, &other.c),
            ] {
                dst.cols.extend(src.cols.iter().map(|&c| col(c)));
                dst.coeffs
                    .extend(src.coeffs.iter().map(|&k| coeffs[k as usize]));
                let base = *dst.row_ptr.last().unwrap_or(&0);
                dst.row_ptr
                    .extend(src.row_ptr.iter().skip(1).map(|&p| base + p));
            }
        }
        if let Some(names) = self.names.as_mut() {
            match &other.names {
                Some(theirs) => names.extend(theirs.iter().cloned()),
                None => {
                    let first = names.len();
                    names.extend((0..other.a.rows()).map(|k| format!("extended/{}", first + k)));
                }
            }
        }
        self.num_inputs += other_inputs;
        self.num_aux += other.num_aux;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// x * (2x + 3y - x + 0y) = y, plus x * 1 = -y + 2y with an input.
    pub(super) struct Coeffs;

    impl Circuit<Scalar> for Coeffs {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(2u64)))?;
            let y = cs.alloc(|| "y", || Ok(Scalar::from(3u64)))?;
            let z = cs.alloc_input(|| "z", || Ok(Scalar::ONE))?;
            let two = Scalar::from(2u64);
            let three = Scalar::from(3u64);
            cs.enforce(
                || "first",
                |lc| lc + x,
                |lc| lc + (two, x) + (three, y) + (Scalar::ZERO, z),
                |lc| lc + y,
            );
            cs.enforce(
                || "second",
                |lc| lc + (-Scalar::ONE, z) + (three, x),
                |lc| lc + CS::one(),
                |lc| lc + (two, y) + (-Scalar::ONE, x),
            );
            Ok(())
        }
    }

    #[test]
    fn coefficients_are_interned_in_first_use_order_after_one_and_minus_one() {
        let pce = Pce::record(Coeffs).unwrap();
        let two = Scalar::from(2u64);
        let three = Scalar::from(3u64);
        assert_eq!(pce.coeff_table, vec![Scalar::ONE, -Scalar::ONE, two, three]);
        // Columns: inputs [one, z], then aux [x, y].
        let (one, z, x, y) = (0, 1, 2, 3);
        assert_eq!(pce.a.row(0), (&[x][..], &[0][..]));
        // The zero coefficient of z is not stored.
        assert_eq!(pce.b.row(0), (&[x, y][..], &[2, 3][..]));
        assert_eq!(pce.c.row(0), (&[y][..], &[0][..]));
        assert_eq!(pce.a.row(1), (&[z, x][..], &[1, 3][..]));
        assert_eq!(pce.b.row(1), (&[one][..], &[0][..]));
        assert_eq!(pce.c.row(1), (&[x, y][..], &[1, 2][..]));
        assert!(pce.b_input_density.get(0) && !pce.b_input_density.get(1));
    }

    #[test]
    fn the_fingerprint_is_kept_per_value_and_a_clone_computes_its_own() {
        let pce = Pce::record(Coeffs).unwrap();
        let print = pce.fingerprint();
        assert_eq!(pce.memo.fingerprint.get(), Some(&print));
        assert_eq!(pce.fingerprint(), print);
        let copy = pce.clone();
        assert_eq!(copy.memo.fingerprint.get(), None);
        assert_eq!(copy.fingerprint(), print);
        assert_eq!(copy, pce);
        // A changed clone, one change per hashed part, prints differently.
        let changes: [fn(&mut Pce); 4] = [
            |p| p.a.cols[0] ^= 1,
            |p| p.b.coeffs[0] = COEFF_MINUS_ONE,
            |p| p.c.row_ptr[1] += 1,
            |p| p.coeff_table[3] += Scalar::ONE,
        ];
        for (k, change) in changes.iter().enumerate() {
            let mut other = pce.clone();
            change(&mut other);
            assert_ne!(other.fingerprint(), print, "change {k}");
        }
    }
}
