//! The device layout of a PCE matrix, built on the host, and its CPU twin.
//!
//! One matrix is `row_ptr` (u32 word offsets, `rows + 1` of them) and
//! `words`: one 32-bit word per entry with a 2-bit tag and a 30-bit payload
//! (`+w[col]`, `-w[col]`, or `table[k]·w[col]` followed by a continuation
//! word holding k). PoRep's entries are mostly ±1, so they take 4 bytes
//! instead of the host CSR's 8 (column and coefficient index). Every word
//! decodes on its own, so a group of threads may split a row at any word.
//!
//! Rows of at most [`SHORT_MAX_WORDS`] words are summed by one thread each;
//! longer rows are listed ([`PackedMatrix::warp_rows`],
//! [`PackedMatrix::block_rows`]) and summed by a warp or a block. The kernels
//! are in `kernels/spmv/spmv.cuh`; [`evaluate_packed`] does what they do,
//! word by word and lane by lane, so the layout is tested on machines
//! without a GPU.

use std::ops::Range;

use blstrs::Scalar;
use cuzk_synth::Csr;
use cuzk_synth::pce::{COEFF_MINUS_ONE, COEFF_ONE};
use ff::Field;
use rayon::prelude::*;

use crate::{Groth16Error, Result};

/// Bits below the tag: the column or coefficient index.
pub const TAG_SHIFT: u32 = 30;
/// The largest column or coefficient index a word holds.
pub const PAYLOAD_MAX: u32 = (1 << TAG_SHIFT) - 1;
/// `+w[payload]`.
pub const TAG_PLUS: u32 = 0;
/// `-w[payload]`.
pub const TAG_MINUS: u32 = 1;
/// `table[k]·w[payload]`, k in the next word.
pub const TAG_COEFF: u32 = 2;
/// The coefficient index of the word before; adds nothing by itself.
pub const TAG_CONT: u32 = 3;

/// Rows of at most this many words are summed by one thread. PoRep-shaped
/// rows have 1 to about 8 words; a warp's time is its longest row's, so a
/// row much longer than the rest goes to a group of threads instead. Not
/// measured yet; chosen so that a SHA-256 packing row (32 bits with
/// power-of-two coefficients, 64 words) is summed by a warp.
pub const SHORT_MAX_WORDS: u32 = 32;
/// Rows of at least this many words are summed by a whole block
/// ([`LONG_BLOCK_THREADS`] threads, each with 8 or more words); rows between
/// [`SHORT_MAX_WORDS`] and this by a warp.
pub const BLOCK_MIN_WORDS: u32 = 2048;
/// Threads per block of the long-row kernels; `spmv_long_block_bls12_381`
/// has one row per block of exactly this many (kernels/spmv.cu).
pub const LONG_BLOCK_THREADS: u32 = 256;
/// Threads summing one row of [`PackedMatrix::warp_rows`].
pub const WARP_THREADS: u32 = 32;

/// Rows per task of the parallel scans and packing.
const CHUNK_ROWS: usize = 1 << 16;

/// One matrix in the device layout, on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedMatrix {
    /// `words[row_ptr[r]..row_ptr[r + 1]]` is row r; `rows + 1` long.
    pub row_ptr: Vec<u32>,
    /// The entries, encoded (see the module docs).
    pub words: Vec<u32>,
    /// Rows of more than [`SHORT_MAX_WORDS`] and fewer than
    /// [`BLOCK_MIN_WORDS`] words, ascending: one warp each.
    pub warp_rows: Vec<u32>,
    /// Rows of [`BLOCK_MIN_WORDS`] words or more, ascending: one block each.
    pub block_rows: Vec<u32>,
}

impl PackedMatrix {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }

    /// Its size, as [`matrix_size`] predicts it.
    pub fn size(&self) -> MatrixSize {
        MatrixSize {
            rows: self.rows(),
            words: self.words.len() as u64,
            warp_rows: self.warp_rows.len(),
            block_rows: self.block_rows.len(),
        }
    }
}

/// The lengths of one matrix's device buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatrixSize {
    pub rows: usize,
    pub words: u64,
    pub warp_rows: usize,
    pub block_rows: usize,
}

impl MatrixSize {
    /// Bytes of device memory the matrix takes: its four u32 buffers, each
    /// at least one element (the driver refuses empty allocations).
    pub fn device_bytes(&self) -> u64 {
        [
            self.rows as u64 + 1,
            self.words,
            self.warp_rows as u64,
            self.block_rows as u64,
        ]
        .iter()
        .map(|&n| n.max(1) * 4)
        .sum()
    }
}

/// One decoded entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `+w[col]` (coefficient index [`COEFF_ONE`]).
    Plus(u32),
    /// `-w[col]` (coefficient index [`COEFF_MINUS_ONE`]).
    Minus(u32),
    /// `table[coeff]·w[col]`.
    Coeff { col: u32, coeff: u32 },
}

/// Appends the words of the entry (`col`, coefficient index `coeff`); both
/// must be at most [`PAYLOAD_MAX`].
pub fn encode(col: u32, coeff: u32, out: &mut Vec<u32>) {
    debug_assert!(col <= PAYLOAD_MAX && coeff <= PAYLOAD_MAX);
    match coeff {
        COEFF_ONE => out.push(TAG_PLUS << TAG_SHIFT | col),
        COEFF_MINUS_ONE => out.push(TAG_MINUS << TAG_SHIFT | col),
        k => {
            out.push(TAG_COEFF << TAG_SHIFT | col);
            out.push(TAG_CONT << TAG_SHIFT | k);
        }
    }
}

/// The entries of `words` (one row), in order; `None` when the words are
/// not a valid encoding (a continuation without its lead or the reverse).
pub fn decode(words: &[u32]) -> Option<Vec<Entry>> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let (tag, payload) = split(words[i]);
        out.push(match tag {
            TAG_PLUS => Entry::Plus(payload),
            TAG_MINUS => Entry::Minus(payload),
            TAG_COEFF => {
                let (next, coeff) = split(*words.get(i + 1)?);
                if next != TAG_CONT {
                    return None;
                }
                i += 1;
                Entry::Coeff {
                    col: payload,
                    coeff,
                }
            }
            _ => return None,
        });
        i += 1;
    }
    Some(out)
}

fn split(word: u32) -> (u32, u32) {
    (word >> TAG_SHIFT, word & PAYLOAD_MAX)
}

fn bad(detail: String) -> Groth16Error {
    Groth16Error::Spmv { detail }
}

/// The chunk of `rows` starting at row `first`.
fn chunk(first: usize, rows: usize) -> Range<usize> {
    first..rows.min(first + CHUNK_ROWS)
}

/// What one pass over a matrix's row pointers and coefficients learns.
struct Scan {
    /// Words of each chunk of [`CHUNK_ROWS`] rows.
    chunk_words: Vec<u64>,
    size: MatrixSize,
}

/// Checks the CSR's structure (row pointers in order and inside the
/// entries, as many coefficients as columns) and counts the words per chunk
/// of rows and the long rows. Columns and coefficient indices are checked
/// while packing.
fn scan(csr: &Csr, what: &str) -> Result<Scan> {
    let Some(rows) = csr.row_ptr.len().checked_sub(1) else {
        return Err(bad(format!(
            "matrix {what} has no row pointers (a CSR of r rows has r + 1)"
        )));
    };
    let nnz = csr.cols.len();
    if csr.coeffs.len() != nnz {
        return Err(bad(format!(
            "matrix {what} has {nnz} columns but {} coefficients",
            csr.coeffs.len()
        )));
    }
    let per_chunk: Vec<Result<(u64, usize, usize)>> = (0..rows.div_ceil(CHUNK_ROWS))
        .into_par_iter()
        .map(|c| {
            let (mut words, mut warp, mut block) = (0u64, 0, 0);
            for r in chunk(c * CHUNK_ROWS, rows) {
                let (s, e) = (csr.row_ptr[r], csr.row_ptr[r + 1]);
                if s > e || e > nnz as u64 {
                    return Err(bad(format!(
                        "matrix {what}, row {r}: row pointers {s}..{e} are out of order or past \
                         its {nnz} entries"
                    )));
                }
                let (s, e) = (s as usize, e as usize);
                let extra = csr.coeffs[s..e].iter().filter(|&&k| k > COEFF_MINUS_ONE);
                let n = (e - s + extra.count()) as u64;
                words += n;
                if n > u64::from(SHORT_MAX_WORDS) {
                    if n >= u64::from(BLOCK_MIN_WORDS) {
                        block += 1;
                    } else {
                        warp += 1;
                    }
                }
            }
            Ok((words, warp, block))
        })
        .collect();
    let mut scan = Scan {
        chunk_words: Vec::with_capacity(per_chunk.len()),
        size: MatrixSize {
            rows,
            ..MatrixSize::default()
        },
    };
    for c in per_chunk {
        let (words, warp, block) = c?;
        scan.chunk_words.push(words);
        scan.size.words += words;
        scan.size.warp_rows += warp;
        scan.size.block_rows += block;
    }
    if scan.size.words > u64::from(u32::MAX) {
        return Err(bad(format!(
            "matrix {what} needs {} words in the device layout, more than the {} its 32-bit row \
             pointers address",
            scan.size.words,
            u32::MAX
        )));
    }
    Ok(scan)
}

/// The device buffer lengths of `csr` in this layout. Errors when the CSR is
/// malformed or too large for the layout.
pub fn matrix_size(csr: &Csr, what: &str) -> Result<MatrixSize> {
    scan(csr, what).map(|s| s.size)
}

/// Packs rows `rows` of `csr` whose first word is at `first_word`:
/// `row_ptr` holds the start of each row (absolute offsets, no end entry).
/// Checks every column against `columns` and every coefficient index
/// against `table_len` and the word format.
fn pack_rows(
    csr: &Csr,
    rows: Range<usize>,
    first_word: u64,
    columns: usize,
    table_len: usize,
    what: &str,
) -> Result<PackedMatrix> {
    let mut out = PackedMatrix {
        row_ptr: Vec::with_capacity(rows.len()),
        ..PackedMatrix::default()
    };
    for r in rows {
        out.row_ptr
            .push((first_word + out.words.len() as u64) as u32);
        let start = out.words.len();
        let (cols, coeffs) = csr.row(r);
        for (&col, &k) in cols.iter().zip(coeffs) {
            if col as usize >= columns {
                return Err(bad(format!(
                    "matrix {what}, row {r}: column {col} is past the witness's {columns} \
                     variables"
                )));
            }
            if k > COEFF_MINUS_ONE && k as usize >= table_len {
                return Err(bad(format!(
                    "matrix {what}, row {r}: coefficient index {k} is past the table's \
                     {table_len} entries"
                )));
            }
            // columns and table_len are checked against PAYLOAD_MAX + 1 by
            // check_limits, so both indices fit a word's payload.
            encode(col, k, &mut out.words);
        }
        let n = (out.words.len() - start) as u32;
        if n > SHORT_MAX_WORDS {
            if n >= BLOCK_MIN_WORDS {
                out.block_rows.push(r as u32);
            } else {
                out.warp_rows.push(r as u32);
            }
        }
    }
    Ok(out)
}

/// The limits of the layout: 30-bit column and coefficient indices, 32-bit
/// row numbers.
pub(crate) fn check_limits(rows: usize, columns: usize, table_len: usize) -> Result<()> {
    let payload = PAYLOAD_MAX as usize + 1;
    if columns > payload {
        return Err(bad(format!(
            "the witness has {columns} variables; the device layout indexes at most {payload}"
        )));
    }
    if table_len > payload {
        return Err(bad(format!(
            "the coefficient table has {table_len} entries; the device layout indexes at most \
             {payload}"
        )));
    }
    if rows >= u32::MAX as usize {
        return Err(bad(format!(
            "the circuit has {rows} constraints; the device layout numbers at most {} rows",
            u32::MAX - 1
        )));
    }
    Ok(())
}

/// `csr` in the device layout, for a witness of `columns` variables and a
/// coefficient table of `table_len` entries. `what` names the matrix in
/// errors.
pub fn pack(csr: &Csr, columns: usize, table_len: usize, what: &str) -> Result<PackedMatrix> {
    let scan = scan(csr, what)?;
    check_limits(scan.size.rows, columns, table_len)?;
    let mut out = PackedMatrix {
        row_ptr: Vec::with_capacity(scan.size.rows + 1),
        words: Vec::with_capacity(scan.size.words as usize),
        ..PackedMatrix::default()
    };
    pack_chunks(
        csr,
        &scan,
        0..scan.chunk_words.len(),
        columns,
        table_len,
        what,
        |p| {
            out.row_ptr.extend_from_slice(&p.row_ptr);
            out.words.extend_from_slice(&p.words);
            out.warp_rows.extend_from_slice(&p.warp_rows);
            out.block_rows.extend_from_slice(&p.block_rows);
            Ok(())
        },
    )?;
    out.row_ptr.push(scan.size.words as u32);
    Ok(out)
}

/// Packs chunks `chunks` in parallel, a window at a time, and hands each
/// packed chunk to `sink` in order, so the host never holds more than a
/// window of the packed matrix.
fn pack_chunks(
    csr: &Csr,
    scan: &Scan,
    chunks: Range<usize>,
    columns: usize,
    table_len: usize,
    what: &str,
    mut sink: impl FnMut(PackedMatrix) -> Result<()>,
) -> Result<()> {
    let rows = scan.size.rows;
    let mut first_word: Vec<u64> = Vec::with_capacity(scan.chunk_words.len());
    let mut at = 0u64;
    for &w in &scan.chunk_words {
        first_word.push(at);
        at += w;
    }
    let window = 4 * rayon::current_num_threads().max(1);
    let mut c = chunks.start;
    while c < chunks.end {
        let end = chunks.end.min(c + window);
        let packed: Vec<Result<PackedMatrix>> = (c..end)
            .into_par_iter()
            .map(|i| {
                pack_rows(
                    csr,
                    chunk(i * CHUNK_ROWS, rows),
                    first_word[i],
                    columns,
                    table_len,
                    what,
                )
            })
            .collect();
        for p in packed {
            sink(p?)?;
        }
        c = end;
    }
    Ok(())
}

/// Packs `csr` chunk by chunk: `begin` gets the matrix's size once it is
/// known (to allocate the destination), then `sink` each chunk's row starts,
/// words and long rows with the offsets (in rows and in words) where they
/// go. For uploads that stream instead of holding the whole packed matrix.
pub(crate) fn pack_streaming<S>(
    csr: &Csr,
    columns: usize,
    table_len: usize,
    what: &str,
    begin: impl FnOnce(MatrixSize) -> Result<S>,
    mut sink: impl FnMut(&mut S, usize, u64, PackedMatrix) -> Result<()>,
) -> Result<S> {
    let scan = scan(csr, what)?;
    check_limits(scan.size.rows, columns, table_len)?;
    let mut state = begin(scan.size)?;
    let mut row = 0usize;
    let mut word = 0u64;
    pack_chunks(
        csr,
        &scan,
        0..scan.chunk_words.len(),
        columns,
        table_len,
        what,
        |p| {
            let (rows, words) = (p.row_ptr.len(), p.words.len() as u64);
            sink(&mut state, row, word, p)?;
            row += rows;
            word += words;
            Ok(())
        },
    )?;
    Ok(state)
}

/// The CPU twin of the kernels: out = matrix · w over `m` outputs (rows
/// past the matrix are zero), decoding word by word as the kernels do.
/// Short rows are summed in order; a listed row is summed in lanes of 32 or
/// [`LONG_BLOCK_THREADS`] words apart, then the lanes are added up, so a
/// list or a row split that loses or repeats a word shows here.
pub fn evaluate_packed(
    p: &PackedMatrix,
    table: &[Scalar],
    w: &[Scalar],
    m: usize,
) -> Result<Vec<Scalar>> {
    let rows = p.rows();
    if m < rows {
        return Err(bad(format!(
            "an output of {m} elements cannot hold the matrix's {rows} rows"
        )));
    }
    let word = |acc: &mut Scalar, k: usize| -> Result<()> {
        let (tag, payload) = split(p.words[k]);
        if tag == TAG_CONT {
            return Ok(());
        }
        let v = w.get(payload as usize).ok_or_else(|| {
            bad(format!(
                "word {k} reads variable {payload} of a witness of {}",
                w.len()
            ))
        })?;
        match tag {
            TAG_PLUS => *acc += v,
            TAG_MINUS => *acc -= v,
            _ => {
                let coeff = p.words.get(k + 1).map(|&next| split(next).1);
                let c = coeff.and_then(|c| table.get(c as usize)).ok_or_else(|| {
                    bad(format!("word {k} has no valid coefficient index after it"))
                })?;
                *acc += *c * v;
            }
        }
        Ok(())
    };
    let ordered = p.row_ptr.windows(2).all(|w| w[0] <= w[1]);
    let inside = p
        .row_ptr
        .last()
        .is_some_and(|&e| e as usize <= p.words.len());
    let listed = p
        .warp_rows
        .iter()
        .chain(&p.block_rows)
        .all(|&r| (r as usize) < rows);
    if !(ordered && inside && listed) {
        return Err(bad(
            "the packed matrix's row pointers or row lists are malformed".to_owned(),
        ));
    }
    let mut out = vec![Scalar::ZERO; m];
    for (r, o) in out.iter_mut().enumerate().take(rows) {
        let (s, e) = (p.row_ptr[r] as usize, p.row_ptr[r + 1] as usize);
        if e - s > SHORT_MAX_WORDS as usize {
            continue;
        }
        for k in s..e {
            word(o, k)?;
        }
    }
    for (list, lanes) in [
        (&p.warp_rows, WARP_THREADS),
        (&p.block_rows, LONG_BLOCK_THREADS),
    ] {
        for &r in list {
            let r = r as usize;
            let (s, e) = (p.row_ptr[r] as usize, p.row_ptr[r + 1] as usize);
            let mut sum = Scalar::ZERO;
            for lane in 0..lanes as usize {
                let mut acc = Scalar::ZERO;
                for k in (s + lane..e).step_by(lanes as usize) {
                    word(&mut acc, k)?;
                }
                sum += acc;
            }
            out[r] = sum;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(rows: &[&[(u32, u32)]]) -> Csr {
        let mut m = Csr {
            row_ptr: vec![0],
            ..Csr::default()
        };
        for row in rows {
            for &(col, k) in *row {
                m.cols.push(col);
                m.coeffs.push(k);
            }
            m.row_ptr.push(m.cols.len() as u64);
        }
        m
    }

    #[test]
    fn words_round_trip() {
        let mut words = Vec::new();
        encode(0, COEFF_ONE, &mut words);
        encode(PAYLOAD_MAX, COEFF_MINUS_ONE, &mut words);
        encode(7, 2, &mut words);
        encode(PAYLOAD_MAX, PAYLOAD_MAX, &mut words);
        assert_eq!(words.len(), 6);
        assert_eq!(
            decode(&words).unwrap(),
            vec![
                Entry::Plus(0),
                Entry::Minus(PAYLOAD_MAX),
                Entry::Coeff { col: 7, coeff: 2 },
                Entry::Coeff {
                    col: PAYLOAD_MAX,
                    coeff: PAYLOAD_MAX
                },
            ]
        );
        // A continuation alone, and a coefficient word without one.
        assert_eq!(decode(&[TAG_CONT << TAG_SHIFT | 5]), None);
        assert_eq!(decode(&[TAG_COEFF << TAG_SHIFT | 5]), None);
        assert_eq!(decode(&[TAG_COEFF << TAG_SHIFT | 5, 5]), None);
    }

    #[test]
    fn rows_are_classified_by_words() {
        let short: Vec<(u32, u32)> = (0..SHORT_MAX_WORDS).map(|c| (c, COEFF_ONE)).collect();
        // 17 coefficient entries: 34 words, just past short.
        let warp: Vec<(u32, u32)> = (0..17).map(|c| (c, 2)).collect();
        let block: Vec<(u32, u32)> = (0..BLOCK_MIN_WORDS).map(|c| (c, COEFF_MINUS_ONE)).collect();
        let below_block: Vec<(u32, u32)> = (0..BLOCK_MIN_WORDS - 1).map(|c| (c, 1)).collect();
        let m = csr(&[&short, &[], &warp, &block, &below_block]);
        let p = pack(&m, BLOCK_MIN_WORDS as usize, 3, "A").unwrap();
        assert_eq!(p.warp_rows, vec![2, 4]);
        assert_eq!(p.block_rows, vec![3]);
        assert_eq!(p.row_ptr[1] - p.row_ptr[0], SHORT_MAX_WORDS);
        assert_eq!(p.row_ptr[2], p.row_ptr[1]);
        assert_eq!(p.row_ptr[3] - p.row_ptr[2], 34);
        assert_eq!(p.size(), matrix_size(&m, "A").unwrap());
        for r in 0..m.rows() {
            let (s, e) = (p.row_ptr[r] as usize, p.row_ptr[r + 1] as usize);
            let entries = decode(&p.words[s..e]).unwrap();
            let (cols, coeffs) = m.row(r);
            assert_eq!(entries.len(), cols.len());
            for (entry, (&col, &k)) in entries.iter().zip(cols.iter().zip(coeffs)) {
                let expected = match k {
                    COEFF_ONE => Entry::Plus(col),
                    COEFF_MINUS_ONE => Entry::Minus(col),
                    coeff => Entry::Coeff { col, coeff },
                };
                assert_eq!(*entry, expected, "row {r}");
            }
        }
    }

    #[test]
    fn malformed_matrices_are_refused() {
        let ok = csr(&[&[(0, 0), (1, 2)]]);
        let err = |m: &Csr, columns, table| pack(m, columns, table, "B").unwrap_err().to_string();
        assert!(err(&ok, 1, 3).contains("column 1 is past the witness's 1"));
        assert!(err(&ok, 2, 2).contains("coefficient index 2 is past the table's 2"));
        let mut m = ok.clone();
        m.row_ptr = vec![0, 5];
        assert!(
            err(&m, 2, 3).contains("past its 2 entries"),
            "{}",
            err(&m, 2, 3)
        );
        let mut m = ok.clone();
        m.row_ptr = vec![1, 0];
        assert!(err(&m, 2, 3).contains("out of order"));
        let mut m = ok.clone();
        m.coeffs.pop();
        assert!(err(&m, 2, 3).contains("2 columns but 1 coefficients"));
        let mut m = ok.clone();
        m.row_ptr.clear();
        assert!(err(&m, 2, 3).contains("no row pointers"));
        assert!(err(&ok, PAYLOAD_MAX as usize + 2, 3).contains("indexes at most"));
        assert!(err(&ok, 2, PAYLOAD_MAX as usize + 2).contains("coefficient table"));
        let msg = matrix_size(&m, "C").unwrap_err().to_string();
        assert!(
            msg.starts_with("cannot compute a/b/c on the GPU: matrix C"),
            "{msg}"
        );
    }

    #[test]
    fn streaming_equals_whole() {
        // More than one chunk and one window of chunks, rows of every class.
        let rows = CHUNK_ROWS * 3 + 17;
        let mut m = Csr {
            row_ptr: vec![0],
            ..Csr::default()
        };
        for r in 0..rows {
            let len = match r % 5000 {
                0 => 3000,
                1 => 40,
                _ => r % 4,
            };
            for j in 0..len {
                m.cols.push(((r + j) % 100) as u32);
                m.coeffs.push(((r + j) % 5) as u32);
            }
            m.row_ptr.push(m.cols.len() as u64);
        }
        let whole = pack(&m, 100, 5, "A").unwrap();
        let (size, mut streamed) = pack_streaming(
            &m,
            100,
            5,
            "A",
            |size| Ok((size, PackedMatrix::default())),
            |(_, streamed), row, word, p| {
                assert_eq!(row, streamed.row_ptr.len());
                assert_eq!(word, streamed.words.len() as u64);
                streamed.row_ptr.extend(p.row_ptr);
                streamed.words.extend(p.words);
                streamed.warp_rows.extend(p.warp_rows);
                streamed.block_rows.extend(p.block_rows);
                Ok(())
            },
        )
        .unwrap();
        streamed.row_ptr.push(size.words as u32);
        assert_eq!(streamed, whole);
        assert_eq!(size, whole.size());
        assert!(!whole.block_rows.is_empty() && !whole.warp_rows.is_empty());
    }

    #[test]
    fn evaluate_packed_refuses_short_outputs() {
        let p = pack(&csr(&[&[], &[]]), 0, 2, "A").unwrap();
        assert!(evaluate_packed(&p, &[], &[], 1).is_err());
        assert_eq!(
            evaluate_packed(&p, &[], &[], 3).unwrap(),
            vec![Scalar::ZERO; 3]
        );
    }
}
