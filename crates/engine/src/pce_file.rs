//! The PCE on disk: written once per circuit shape, loaded fast, checked.
//!
//! Format version 1, all integers little-endian:
//!
//! ```text
//! header   magic "CUZKPCE\0" (8) | version u32 | flags u32 (0) | body_len u64
//! body     shape id: len u32 + UTF-8 bytes
//!          num_inputs u64 | num_aux u64 | num_constraints u64
//!          coefficients: count u64 + count × 32 bytes (Scalar::to_repr)
//!          A, B, C each: nnz u64 | row_ptr (num_constraints + 1) × u64
//!                        | cols nnz × u32 | coeffs nnz × u32
//!          densities a_aux, b_input, b_aux each: len u64 + ceil(len/64) × u64
//! trailer  SHA-256 of header and body (32)
//! ```
//!
//! Files are written through a temporary sibling and renamed, so a reader
//! never sees a partial file. Loading streams the body into the PCE's own
//! vectors (no second copy), hashing as it goes; the checksum, the lengths
//! and every index are checked, and the shape id and counts are compared
//! with what the caller expects. Constraint names are not stored.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use blstrs::Scalar;
use cuzk_groth16_cuda::Groth16Error;
use cuzk_synth::{Csr, Density, Pce};
use ff::PrimeField;
use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};

const MAGIC: [u8; 8] = *b"CUZKPCE\0";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 24;
const TRAILER_BYTES: u64 = 32;
/// Values converted per read or write call.
const CHUNK: usize = 1 << 16;

/// What a PCE file's header and leading fields say, read without the matrices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PceFileInfo {
    /// The shape id the file was written for.
    pub shape: String,
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
    /// Bytes of the whole file.
    pub file_bytes: u64,
}

/// The counts a loaded PCE must have, when the caller knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeCounts {
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
}

impl ShapeCounts {
    /// The counts of `pce`.
    pub fn of(pce: &Pce) -> Self {
        ShapeCounts {
            num_inputs: pce.num_inputs,
            num_aux: pce.num_aux,
            num_constraints: pce.num_constraints(),
        }
    }
}

/// A writer that hashes what it writes.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn write_u32s(w: &mut impl Write, v: &[u32]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(CHUNK * 4);
    for chunk in v.chunks(CHUNK) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

fn write_u64s(w: &mut impl Write, v: &[u64]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(CHUNK * 8);
    for chunk in v.chunks(CHUNK) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

fn density_words(d: &Density) -> Vec<u64> {
    let mut words = vec![0u64; d.len().div_ceil(64)];
    for (i, used) in d.iter().enumerate() {
        if used {
            words[i / 64] |= 1 << (i % 64);
        }
    }
    words
}

fn body_len(shape: &str, pce: &Pce) -> u64 {
    let n = pce.num_constraints() as u64;
    let matrices: u64 = [&pce.a, &pce.b, &pce.c]
        .iter()
        .map(|m| 8 + (n + 1) * 8 + m.nnz() as u64 * 8)
        .sum();
    let densities: u64 = [&pce.a_aux_density, &pce.b_input_density, &pce.b_aux_density]
        .iter()
        .map(|d| 8 + d.len().div_ceil(64) as u64 * 8)
        .sum();
    4 + shape.len() as u64 + 24 + 8 + pce.coeff_table.len() as u64 * 32 + matrices + densities
}

fn write_body(w: &mut impl Write, shape: &str, pce: &Pce) -> io::Result<()> {
    let shape_len = u32::try_from(shape.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "shape id too long"))?;
    w.write_all(&shape_len.to_le_bytes())?;
    w.write_all(shape.as_bytes())?;
    for n in [pce.num_inputs, pce.num_aux, pce.num_constraints()] {
        w.write_all(&(n as u64).to_le_bytes())?;
    }
    w.write_all(&(pce.coeff_table.len() as u64).to_le_bytes())?;
    for c in &pce.coeff_table {
        w.write_all(c.to_repr().as_ref())?;
    }
    for m in [&pce.a, &pce.b, &pce.c] {
        w.write_all(&(m.nnz() as u64).to_le_bytes())?;
        write_u64s(w, &m.row_ptr)?;
        write_u32s(w, &m.cols)?;
        write_u32s(w, &m.coeffs)?;
    }
    for d in [&pce.a_aux_density, &pce.b_input_density, &pce.b_aux_density] {
        w.write_all(&(d.len() as u64).to_le_bytes())?;
        write_u64s(w, &density_words(d))?;
    }
    Ok(())
}

/// Writes `pce` for `shape` to `path` atomically (a uniquely named
/// temporary sibling, fsync, rename: `cuzk_groth16_cuda::write_atomically`).
pub fn write_pce(path: &Path, shape: &str, pce: &Pce) -> Result<()> {
    let _s = tracing::info_span!("pce_write", path = %path.display()).entered();
    let pce = &*pce.with_matrices()?;
    cuzk_groth16_cuda::write_atomically(path, |file| {
        let mut w = Hashing {
            inner: &mut *file,
            hash: Sha256::new(),
        };
        w.write_all(&MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&0u32.to_le_bytes())?;
        w.write_all(&body_len(shape, pce).to_le_bytes())?;
        write_body(&mut w, shape, pce)?;
        let Hashing { inner, hash } = w;
        inner.write_all(&hash.finalize())
    })
    .map_err(|e| match e {
        Groth16Error::Write { source, .. } => EngineError::PceIo {
            path: path.to_owned(),
            source,
        },
        other => other.into(),
    })
}

/// Reads the file's body while hashing it, with errors that name the field.
struct Reader<'p> {
    inner: BufReader<File>,
    hash: Sha256,
    path: &'p Path,
    /// Body bytes not yet read.
    left: u64,
    buf: Vec<u8>,
}

impl Reader<'_> {
    fn corrupt(&self, detail: impl Into<String>) -> EngineError {
        EngineError::PceCorrupt {
            path: self.path.to_owned(),
            detail: detail.into(),
        }
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<&[u8]> {
        if n > self.left {
            return Err(self.corrupt(format!(
                "{what} needs {n} bytes but only {} are left in the body",
                self.left
            )));
        }
        let n = usize::try_from(n).map_err(|_| self.corrupt(format!("{what} is too large")))?;
        self.buf.resize(n, 0);
        self.inner
            .read_exact(&mut self.buf)
            .map_err(|source| EngineError::PceIo {
                path: self.path.to_owned(),
                source,
            })?;
        self.left -= n as u64;
        self.hash.update(&self.buf);
        Ok(&self.buf)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.bytes(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn len(&mut self, what: &str) -> Result<usize> {
        let v = self.u64(what)?;
        usize::try_from(v).map_err(|_| self.corrupt(format!("{what} {v} does not fit usize")))
    }

    fn u64s(&mut self, count: usize, what: &str) -> Result<Vec<u64>> {
        let mut out = Vec::with_capacity(count.min(self.left as usize / 8));
        while out.len() < count {
            let n = (count - out.len()).min(CHUNK);
            let b = self.bytes(n as u64 * 8, what)?;
            out.extend(b.chunks_exact(8).map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            }));
        }
        Ok(out)
    }

    fn u32s(&mut self, count: usize, what: &str) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(count.min(self.left as usize / 4));
        while out.len() < count {
            let n = (count - out.len()).min(CHUNK);
            let b = self.bytes(n as u64 * 4, what)?;
            out.extend(b.chunks_exact(4).map(|c| {
                let mut a = [0u8; 4];
                a.copy_from_slice(c);
                u32::from_le_bytes(a)
            }));
        }
        Ok(out)
    }
}

struct Opened<'p> {
    reader: Reader<'p>,
    file_bytes: u64,
}

fn open(path: &Path) -> Result<Opened<'_>> {
    let io_err = |source| EngineError::PceIo {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let file_bytes = file.metadata().map_err(io_err)?.len();
    let mut inner = BufReader::with_capacity(1 << 20, file);
    let mut header = [0u8; HEADER_BYTES as usize];
    if file_bytes < HEADER_BYTES {
        return Err(EngineError::PceTruncated {
            path: path.to_owned(),
            expected_bytes: HEADER_BYTES + TRAILER_BYTES,
            found_bytes: file_bytes,
        });
    }
    inner.read_exact(&mut header).map_err(io_err)?;
    let corrupt = |detail: String| EngineError::PceCorrupt {
        path: path.to_owned(),
        detail,
    };
    if header[..8] != MAGIC {
        return Err(corrupt("not a cuzk PCE file (bad magic)".into()));
    }
    let word = |at: usize| {
        let mut a = [0u8; 4];
        a.copy_from_slice(&header[at..at + 4]);
        u32::from_le_bytes(a)
    };
    let version = word(8);
    if version != VERSION {
        return Err(EngineError::PceVersion {
            path: path.to_owned(),
            found: version,
            supported: VERSION,
        });
    }
    if word(12) != 0 {
        return Err(corrupt(format!("unknown flags {:#x}", word(12))));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&header[16..24]);
    let body = u64::from_le_bytes(len);
    let expected = HEADER_BYTES
        .checked_add(body)
        .and_then(|n| n.checked_add(TRAILER_BYTES))
        .ok_or_else(|| corrupt(format!("body length {body} overflows")))?;
    if file_bytes < expected {
        return Err(EngineError::PceTruncated {
            path: path.to_owned(),
            expected_bytes: expected,
            found_bytes: file_bytes,
        });
    }
    if file_bytes > expected {
        return Err(corrupt(format!(
            "{} unexpected bytes after the checksum",
            file_bytes - expected
        )));
    }
    let mut hash = Sha256::new();
    hash.update(header);
    Ok(Opened {
        reader: Reader {
            inner,
            hash,
            path,
            left: body,
            buf: Vec::new(),
        },
        file_bytes,
    })
}

fn read_info(r: &mut Reader<'_>, file_bytes: u64) -> Result<PceFileInfo> {
    let shape_len = {
        let b = r.bytes(4, "shape id length")?;
        let mut a = [0u8; 4];
        a.copy_from_slice(b);
        u32::from_le_bytes(a)
    };
    let shape = String::from_utf8(r.bytes(u64::from(shape_len), "shape id")?.to_vec())
        .map_err(|_| r.corrupt("shape id is not UTF-8"))?;
    Ok(PceFileInfo {
        shape,
        num_inputs: r.len("num_inputs")?,
        num_aux: r.len("num_aux")?,
        num_constraints: r.len("num_constraints")?,
        file_bytes,
    })
}

/// Reads only the header and leading fields (shape id, counts).
pub fn read_pce_info(path: &Path) -> Result<PceFileInfo> {
    let Opened {
        mut reader,
        file_bytes,
    } = open(path)?;
    read_info(&mut reader, file_bytes)
}

fn check_matches(
    path: &Path,
    info: &PceFileInfo,
    shape: &str,
    expected: Option<ShapeCounts>,
) -> Result<()> {
    let mismatch = |what, expected: String, found: String| EngineError::PceShapeMismatch {
        path: path.to_owned(),
        what,
        expected,
        found,
    };
    if info.shape != shape {
        return Err(mismatch(
            "shape",
            format!("`{shape}`"),
            format!("`{}`", info.shape),
        ));
    }
    if let Some(e) = expected {
        for (what, want, got) in [
            ("num_inputs", e.num_inputs, info.num_inputs),
            ("num_aux", e.num_aux, info.num_aux),
            ("num_constraints", e.num_constraints, info.num_constraints),
        ] {
            if want != got {
                return Err(mismatch(what, want.to_string(), got.to_string()));
            }
        }
    }
    Ok(())
}

fn read_csr(
    r: &mut Reader<'_>,
    name: &str,
    rows: usize,
    columns: usize,
    coeffs: usize,
) -> Result<Csr> {
    let nnz = r.len(&format!("{name} nnz"))?;
    let pointers = rows
        .checked_add(1)
        .ok_or_else(|| r.corrupt(format!("{name}: {rows} rows overflow")))?;
    let row_ptr = r.u64s(pointers, &format!("{name} row pointers"))?;
    let cols = r.u32s(nnz, &format!("{name} columns"))?;
    let coeff = r.u32s(nnz, &format!("{name} coefficients"))?;
    if row_ptr.first() != Some(&0) || row_ptr.last() != Some(&(nnz as u64)) {
        return Err(r.corrupt(format!("{name}: row pointers do not span 0..{nnz}")));
    }
    if let Some(row) = row_ptr.windows(2).position(|w| w[0] > w[1]) {
        return Err(r.corrupt(format!("{name}: row pointers decrease at row {row}")));
    }
    if let Some(i) = cols.iter().position(|&c| c as usize >= columns) {
        return Err(r.corrupt(format!(
            "{name}: entry {i} has column {} but there are {columns} variables",
            cols[i]
        )));
    }
    if let Some(i) = coeff.iter().position(|&c| c as usize >= coeffs) {
        return Err(r.corrupt(format!(
            "{name}: entry {i} has coefficient index {} but the table has {coeffs}",
            coeff[i]
        )));
    }
    Ok(Csr {
        row_ptr,
        cols,
        coeffs: coeff,
    })
}

fn read_density(r: &mut Reader<'_>, name: &str, expected_len: usize) -> Result<Density> {
    let len = r.len(&format!("{name} density length"))?;
    if len != expected_len {
        return Err(r.corrupt(format!(
            "{name} density covers {len} variables, expected {expected_len}"
        )));
    }
    let words = r.u64s(len.div_ceil(64), &format!("{name} density"))?;
    let mut d = Density::new(len);
    for (w, &word) in words.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            let i = w * 64 + b;
            if i >= len {
                return Err(r.corrupt(format!("{name} density has a bit set past its end")));
            }
            d.set(i);
            bits &= bits - 1;
        }
    }
    Ok(d)
}

/// Loads the PCE at `path`, checking the checksum, every length and index,
/// that it was written for `shape`, and (when given) its counts.
pub fn read_pce(path: &Path, shape: &str, expected: Option<ShapeCounts>) -> Result<Pce> {
    let _s = tracing::info_span!("pce_load", path = %path.display()).entered();
    let Opened {
        mut reader,
        file_bytes,
    } = open(path)?;
    let r = &mut reader;
    let info = read_info(r, file_bytes)?;
    check_matches(path, &info, shape, expected)?;
    let columns = info
        .num_inputs
        .checked_add(info.num_aux)
        .ok_or_else(|| r.corrupt("variable count overflows"))?;
    let coeff_count = r.len("coefficient count")?;
    if coeff_count < 2 {
        return Err(r.corrupt("the coefficient table must hold 1 and -1"));
    }
    let mut coeff_table = Vec::with_capacity(coeff_count.min(r.left as usize / 32));
    for i in 0..coeff_count {
        let b = r.bytes(32, "coefficient")?;
        let mut repr = [0u8; 32];
        repr.copy_from_slice(b);
        let c: Option<Scalar> = Scalar::from_repr(repr).into();
        let Some(c) = c else {
            return Err(r.corrupt(format!("coefficient {i} is not a canonical field element")));
        };
        coeff_table.push(c);
    }
    if coeff_table[0] != Scalar::from(1u64) || coeff_table[1] != -Scalar::from(1u64) {
        return Err(r.corrupt("the coefficient table must start with 1 and -1"));
    }
    let rows = info.num_constraints;
    let a = read_csr(r, "A", rows, columns, coeff_count)?;
    let b = read_csr(r, "B", rows, columns, coeff_count)?;
    let c = read_csr(r, "C", rows, columns, coeff_count)?;
    let a_aux_density = read_density(r, "a_aux", info.num_aux)?;
    let b_input_density = read_density(r, "b_input", info.num_inputs)?;
    let b_aux_density = read_density(r, "b_aux", info.num_aux)?;
    if r.left != 0 {
        return Err(r.corrupt(format!("{} bytes left over in the body", r.left)));
    }
    let mut stored = [0u8; TRAILER_BYTES as usize];
    r.inner
        .read_exact(&mut stored)
        .map_err(|source| EngineError::PceIo {
            path: path.to_owned(),
            source,
        })?;
    let computed = std::mem::take(&mut r.hash).finalize();
    if computed.as_slice() != stored {
        return Err(r.corrupt("checksum mismatch: the file was modified or damaged"));
    }
    Ok(Pce {
        num_inputs: info.num_inputs,
        num_aux: info.num_aux,
        a,
        b,
        c,
        coeff_table,
        a_aux_density,
        b_input_density,
        b_aux_density,
        names: None,
        released: None,
        memo: Default::default(),
    })
}

/// The file name for `shape` in a cache directory: the id with anything but
/// `[A-Za-z0-9._-]` replaced, plus a hash of the exact id so two ids that
/// map to the same name do not collide.
pub fn file_name(shape: &str) -> String {
    let clean: String = shape
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let digest = Sha256::digest(shape.as_bytes());
    format!("{clean}-{}.pce", hex8(&digest[..4]))
}

fn hex8(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use cuzk_synth::circuits::CircuitSpec;

    use super::*;

    fn pce(spec: &str) -> Pce {
        let spec: CircuitSpec = spec.parse().unwrap();
        Pce::record(spec.build(0)).unwrap()
    }

    fn same(a: &Pce, b: &Pce) -> bool {
        a.num_inputs == b.num_inputs
            && a.num_aux == b.num_aux
            && a.a == b.a
            && a.b == b.b
            && a.c == b.c
            && a.coeff_table == b.coeff_table
            && a.a_aux_density == b.a_aux_density
            && a.b_input_density == b.b_input_density
            && a.b_aux_density == b.b_aux_density
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let dir = tempfile::tempdir().unwrap();
        for spec in ["porep:9", "mul-chain:6", "many-inputs:3", "no-aux:2"] {
            let original = pce(spec);
            let path = dir.path().join(file_name(spec));
            write_pce(&path, spec, &original).unwrap();
            let info = read_pce_info(&path).unwrap();
            assert_eq!(info.shape, spec);
            assert_eq!(info.num_constraints, original.num_constraints());
            assert_eq!(
                info.file_bytes,
                HEADER_BYTES + body_len(spec, &original) + TRAILER_BYTES
            );
            let back = read_pce(&path, spec, Some(ShapeCounts::of(&original))).unwrap();
            assert!(same(&original, &back), "{spec}");
            assert_eq!(back.bytes(), original.bytes());
        }
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }

    #[test]
    fn truncated_corrupted_and_foreign_files_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let original = pce("porep:8");
        let path = dir.path().join("p.pce");
        write_pce(&path, "porep:8", &original).unwrap();
        let bytes = std::fs::read(&path).unwrap();

        // Truncated: the header's promise is named.
        let cut = dir.path().join("cut.pce");
        std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
        let err = read_pce(&cut, "porep:8", None).unwrap_err();
        assert!(
            matches!(err, EngineError::PceTruncated { expected_bytes, found_bytes, .. }
                if expected_bytes == bytes.len() as u64 && found_bytes + 100 == expected_bytes),
            "{err:?}"
        );
        assert!(err.to_string().contains("is truncated"), "{err}");
        std::fs::write(&cut, &bytes[..10]).unwrap();
        assert!(matches!(
            read_pce(&cut, "porep:8", None),
            Err(EngineError::PceTruncated { .. })
        ));

        // A flipped bit in the matrices: the checksum catches it.
        let bad = dir.path().join("bad.pce");
        let mut flipped = bytes.clone();
        let at = bytes.len() - 200;
        flipped[at] ^= 0x01;
        std::fs::write(&bad, &flipped).unwrap();
        let err = read_pce(&bad, "porep:8", None).unwrap_err();
        assert!(matches!(err, EngineError::PceCorrupt { .. }), "{err:?}");
        assert!(err.to_string().contains("corrupt"), "{err}");

        // An out-of-range column is reported before the checksum.
        let mut wild = bytes.clone();
        let n = original.num_constraints();
        let a_cols = (HEADER_BYTES as usize)
            + 4
            + "porep:8".len()
            + 24
            + 8
            + original.coeff_table.len() * 32
            + 8
            + (n + 1) * 8;
        wild[a_cols..a_cols + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&bad, &wild).unwrap();
        let err = read_pce(&bad, "porep:8", None).unwrap_err();
        assert!(
            err.to_string().contains("A: entry 0 has column 4294967295"),
            "{err}"
        );

        // Not a PCE file at all.
        std::fs::write(&bad, vec![7u8; 100]).unwrap();
        let err = read_pce(&bad, "porep:8", None).unwrap_err();
        assert!(err.to_string().contains("bad magic"), "{err}");

        // Another version.
        let mut v2 = bytes.clone();
        v2[8] = 2;
        std::fs::write(&bad, &v2).unwrap();
        assert!(matches!(
            read_pce(&bad, "porep:8", None),
            Err(EngineError::PceVersion {
                found: 2,
                supported: 1,
                ..
            })
        ));

        // Another shape.
        let err = read_pce(&path, "porep:9", None).unwrap_err();
        assert!(
            matches!(&err, EngineError::PceShapeMismatch { what: "shape", .. }),
            "{err:?}"
        );
        let mut counts = ShapeCounts::of(&original);
        counts.num_aux += 1;
        let err = read_pce(&path, "porep:8", Some(counts)).unwrap_err();
        assert!(err.to_string().contains("is for num_aux"), "{err}");
        // The good file still loads.
        read_pce(&path, "porep:8", Some(ShapeCounts::of(&original))).unwrap();
    }

    #[test]
    fn file_names_are_safe_and_distinct() {
        let a = file_name("porep 32GiB/v1");
        assert!(
            a.starts_with("porep_32GiB_v1-") && a.ends_with(".pce"),
            "{a}"
        );
        assert_ne!(file_name("a/b"), file_name("a_b"));
    }
}
