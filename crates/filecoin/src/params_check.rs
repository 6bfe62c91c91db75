//! Checks the files of a Filecoin parameter cache: each `.params` and `.vk`
//! file against the digest filecoin-proofs publishes for its name, and the
//! files it does not list (made by `cuzk setup` or tests) for their
//! structure; `.meta` files for the JSON filecoin-proofs writes there.
//!
//! The published digests are storage-proofs-core's `parameters.json` (the
//! same file as filecoin-proofs', the one storage-proofs checks a file
//! against when it loads it), compiled into that crate as
//! `PARAMETERS_DATA`: taken from there, the table is always the one of
//! the filecoin-proofs version this workspace pins, with no copy to keep
//! in step and no build script. A digest is BLAKE2b-512 of the whole file,
//! its first 16 bytes in hex (storage-proofs' `verify_production_entry`,
//! filecoin-proofs' `get_digest_for_file_within_cache`).
//!
//! Files are streamed, never read whole (a 32 GiB set is ~47 GB); the
//! caller sees progress through a callback of bytes done. [`check_once`] is
//! the daemon's gate: the same check, remembered per file.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use crate::error::{FilecoinError, Result};

mod structure;

use structure::{Structure, check_meta, params_structure, vk_structure};

/// Hex digits of a published digest (the first 16 bytes of BLAKE2b-512).
const DIGEST_HEX: usize = 32;
/// Bytes read per step while hashing or decoding.
const CHUNK: usize = 8 << 20;

/// Digests by file name, as `parameters.json` lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DigestTable {
    digests: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Entry {
    digest: String,
}

impl DigestTable {
    /// The digests filecoin-proofs publishes (its `parameters.json`).
    pub fn official() -> Result<&'static DigestTable> {
        static TABLE: OnceLock<std::result::Result<DigestTable, String>> = OnceLock::new();
        TABLE
            .get_or_init(|| {
                DigestTable::from_json(storage_proofs_core::parameter_cache::PARAMETERS_DATA)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|detail| FilecoinError::BadInput {
                what: "filecoin-proofs' parameters.json",
                detail: detail.clone(),
            })
    }

    /// A table in `parameters.json`'s form: `{"NAME": {"digest": HEX, ...}}`.
    pub fn from_json(text: &str) -> Result<DigestTable> {
        let entries: BTreeMap<String, Entry> =
            serde_json::from_str(text).map_err(|e| FilecoinError::json("digest table", e))?;
        Ok(DigestTable::from_entries(
            entries.into_iter().map(|(name, e)| (name, e.digest)),
        ))
    }

    /// A table of `(file name, digest)` pairs.
    pub fn from_entries(entries: impl IntoIterator<Item = (String, String)>) -> DigestTable {
        DigestTable {
            digests: entries
                .into_iter()
                .map(|(n, d)| (n, d.to_ascii_lowercase()))
                .collect(),
        }
    }

    /// The digest published for a file name.
    pub fn digest(&self, name: &str) -> Option<&str> {
        self.digests.get(name).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.digests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }
}

/// What a check found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Listed, and its digest is the published one.
    Ok,
    /// Listed, whole, and its digest is not the published one.
    WrongDigest { expected: String, got: String },
    /// Shorter than its own section counts say it is.
    Truncated { size: u64, needed: u64 },
    /// Not listed; parses as what its name says.
    UnlistedOk { what: String },
    /// Not listed; does not parse as what its name says.
    UnlistedBad { why: String },
    /// A `.meta` file (never listed) with the JSON filecoin-proofs writes.
    MetaOk { sector_size: u64 },
    /// A `.meta` file that does not hold that JSON.
    MetaBad { why: String },
    /// The file could not be read.
    Unreadable { why: String },
}

impl Verdict {
    /// Whether the file would fail a proof (or is not what its name says).
    pub fn is_bad(&self) -> bool {
        !matches!(
            self,
            Verdict::Ok | Verdict::UnlistedOk { .. } | Verdict::MetaOk { .. }
        )
    }

    /// A stable name for JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::WrongDigest { .. } => "wrong_digest",
            Verdict::Truncated { .. } => "truncated",
            Verdict::UnlistedOk { .. } => "unlisted_ok",
            Verdict::UnlistedBad { .. } => "unlisted_bad",
            Verdict::MetaOk { .. } => "meta_ok",
            Verdict::MetaBad { .. } => "meta_bad",
            Verdict::Unreadable { .. } => "unreadable",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ok => write!(f, "ok"),
            Verdict::WrongDigest { expected, got } => {
                write!(f, "wrong digest (expected {expected}, got {got})")
            }
            Verdict::Truncated { size, needed } => write!(
                f,
                "truncated ({size} bytes; its sections need at least {needed})"
            ),
            Verdict::UnlistedOk { what } => write!(f, "unlisted: structure ok ({what})"),
            Verdict::UnlistedBad { why } => write!(f, "unlisted: bad structure ({why})"),
            Verdict::MetaOk { sector_size } => write!(
                f,
                "ok (metadata, sector_size {sector_size}; no digest is published for .meta files)"
            ),
            Verdict::MetaBad { why } => write!(f, "bad metadata ({why})"),
            Verdict::Unreadable { why } => write!(f, "unreadable ({why})"),
        }
    }
}

/// The kinds of file a parameter cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `.params`: Groth16 parameters in bellperson's format.
    Params,
    /// `.vk`: a verifying key.
    VerifyingKey,
    /// `.meta`: `{"sector_size": N}`.
    Meta,
}

impl FileKind {
    /// The kind a file's extension names; `None` for other files.
    pub fn of(path: &Path) -> Option<FileKind> {
        match path.extension()?.to_str()? {
            "params" => Some(FileKind::Params),
            "vk" => Some(FileKind::VerifyingKey),
            "meta" => Some(FileKind::Meta),
            _ => None,
        }
    }
}

/// The `.params`, `.vk` and `.meta` files directly in `dir`, sorted, and
/// how many other entries it has (ignored).
pub fn cache_files(dir: &Path) -> Result<(Vec<PathBuf>, usize)> {
    let io_err = |source| FilecoinError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    let mut ignored = 0;
    for entry in fs::read_dir(dir).map_err(io_err)? {
        let path = entry.map_err(io_err)?.path();
        // Follows symbolic links: caches are often links into shared storage.
        if FileKind::of(&path).is_some() && path.is_file() {
            files.push(path);
        } else {
            ignored += 1;
        }
    }
    files.sort();
    Ok((files, ignored))
}

/// Checks one file: against `table` when it lists the file's name, else
/// for its structure (with `full`, every point of a `.params` file is
/// decoded and checked to be on the curve and in the prime-order subgroup,
/// about 25 µs a point spread over the cores; without it only the section
/// lengths, and the verifying key's few points, are checked). `progress`
/// gets the bytes read as they are read.
pub fn check_file(
    path: &Path,
    table: &DigestTable,
    full: bool,
    progress: &mut dyn FnMut(u64),
) -> Verdict {
    let _s = tracing::info_span!("check_param_file", path = %path.display()).entered();
    let Some(kind) = FileKind::of(path) else {
        return Verdict::UnlistedBad {
            why: "not a .params, .vk or .meta file".into(),
        };
    };
    let unreadable = |e: io::Error| Verdict::Unreadable { why: e.to_string() };
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return unreadable(e),
    };
    let size = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => return unreadable(e),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if kind == FileKind::Meta {
        return check_meta(&mut file, size);
    }
    let listed = table.digest(name);
    // The sections first (a few reads): a truncated file is told apart
    // from an altered one without hashing it.
    let structure = match kind {
        FileKind::Params => params_structure(&mut file, size, full && listed.is_none(), progress),
        _ => vk_structure(&mut file, size),
    };
    match (structure, listed) {
        (Err(Structure::Io(e)), _) => unreadable(e),
        (Err(Structure::Truncated { needed }), _) => Verdict::Truncated { size, needed },
        (Err(Structure::Bad(why)), None) => Verdict::UnlistedBad { why },
        (Ok(what), None) => Verdict::UnlistedOk { what },
        (_, Some(expected)) => match digest(&mut file, progress) {
            Ok(got) if got == expected => Verdict::Ok,
            Ok(got) => Verdict::WrongDigest {
                expected: expected.to_owned(),
                got,
            },
            Err(e) => unreadable(e),
        },
    }
}

/// [`check_file`] against the official table, structure only for unlisted
/// files, remembered: a file that passed is not checked again while its
/// path, size and modification time stay the same. One check runs at a
/// time, so a file asked for by several callers at once is hashed once.
/// `Ok` with what the check said when the file may be used, `Err` with it
/// when it may not.
pub fn check_once(path: &Path) -> std::result::Result<Verdict, Verdict> {
    type Key = (u64, Option<SystemTime>);
    static PASSED: OnceLock<Mutex<HashMap<PathBuf, (Key, Verdict)>>> = OnceLock::new();
    let passed = PASSED.get_or_init(Default::default);
    let key = |p: &Path| -> io::Result<Key> {
        let m = fs::metadata(p)?;
        Ok((m.len(), m.modified().ok()))
    };
    let stamp = key(path).map_err(|e| Verdict::Unreadable { why: e.to_string() })?;
    let mut passed = passed.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, v)) = passed.get(path)
        && *k == stamp
    {
        return Ok(v.clone());
    }
    let table = DigestTable::official().map_err(|e| Verdict::Unreadable { why: e.to_string() })?;
    let verdict = check_file(path, table, false, &mut |_| {});
    tracing::info!(path = %path.display(), %verdict, "parameter file checked");
    if verdict.is_bad() {
        return Err(verdict);
    }
    // The stamp from before the check: a file changed while it was read
    // gets a new stamp and is checked again next time.
    passed.insert(path.to_owned(), (stamp, verdict.clone()));
    Ok(verdict)
}

/// The published form of a file's digest: BLAKE2b-512 of all its bytes,
/// the first 16 bytes in hex. A second thread reads while this one hashes.
fn digest(file: &mut File, progress: &mut dyn FnMut(u64)) -> io::Result<String> {
    file.seek(SeekFrom::Start(0))?;
    let mut state = blake2b_simd::State::new();
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<io::Result<Vec<u8>>>(2);
    let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    for _ in 0..3 {
        let _ = empty_tx.send(vec![0u8; CHUNK]);
    }
    std::thread::scope(|s| {
        s.spawn(move || {
            while let Ok(mut buf) = empty_rx.recv() {
                buf.resize(CHUNK, 0);
                let n = match read_full(file, &mut buf) {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                };
                buf.truncate(n);
                if full_tx.send(Ok(buf)).is_err() || n == 0 {
                    return;
                }
            }
        });
        for chunk in full_rx {
            let chunk = chunk?;
            if chunk.is_empty() {
                break;
            }
            state.update(&chunk);
            progress(chunk.len() as u64);
            // The reader has stopped if this fails; the loop then ends.
            let _ = empty_tx.send(chunk);
        }
        drop(empty_tx);
        Ok(state.finalize().to_hex()[..DIGEST_HEX].to_owned())
    })
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// BLAKE2b-512 of `bytes`, the first 16 bytes in hex: what `parameters.json`
/// lists for a file of these bytes (for tests that make their own table).
pub fn digest_of(bytes: &[u8]) -> String {
    blake2b_simd::blake2b(bytes).to_hex()[..DIGEST_HEX].to_owned()
}

#[cfg(test)]
mod tests {
    use super::structure::VK_HEAD;
    use super::*;
    use bellperson::groth16::VerifyingKey;
    use bellperson::groth16::{Parameters, generate_random_parameters};
    use bellperson::{Circuit, ConstraintSystem, SynthesisError};
    use blstrs::Bls12;
    use blstrs::Scalar;
    use ff::Field;
    use rand::SeedableRng;

    /// x * x = y, x public: the smallest circuit with every section filled.
    struct Square;

    impl Circuit<Scalar> for Square {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = cs.alloc_input(|| "x", || Ok(Scalar::ONE))?;
            let y = cs.alloc(|| "y", || Ok(Scalar::ONE))?;
            cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
            Ok(())
        }
    }

    fn params_bytes() -> Vec<u8> {
        static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
        BYTES
            .get_or_init(|| {
                let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
                let p: Parameters<Bls12> = generate_random_parameters(Square, &mut rng).unwrap();
                let mut out = Vec::new();
                p.write(&mut out).unwrap();
                out
            })
            .clone()
    }

    fn vk_bytes() -> Vec<u8> {
        let vk = VerifyingKey::<Bls12>::read(&params_bytes()[..]).unwrap();
        let mut out = Vec::new();
        vk.write(&mut out).unwrap();
        out
    }

    fn check(dir: &Path, name: &str, bytes: &[u8], table: &DigestTable, full: bool) -> Verdict {
        let path = dir.join(name);
        fs::write(&path, bytes).unwrap();
        let mut seen = 0;
        let v = check_file(&path, table, full, &mut |n| seen += n);
        assert!(seen <= bytes.len() as u64, "{name}: progress past the end");
        v
    }

    #[test]
    fn listed_files_are_told_apart_by_digest_and_length() {
        let dir = tempfile::tempdir().unwrap();
        let good = params_bytes();
        let vk = vk_bytes();
        let table = DigestTable::from_entries([
            ("v28-good.params".to_owned(), digest_of(&good)),
            ("v28-short.params".to_owned(), digest_of(&good)),
            ("v28-altered.params".to_owned(), digest_of(&good)),
            ("v28-good.vk".to_owned(), digest_of(&vk)),
            ("v28-short.vk".to_owned(), digest_of(&vk)),
        ]);
        assert_eq!(
            check(dir.path(), "v28-good.params", &good, &table, false),
            Verdict::Ok
        );
        assert_eq!(
            check(dir.path(), "v28-good.vk", &vk, &table, false),
            Verdict::Ok
        );
        let short = &good[..good.len() - 100];
        let v = check(dir.path(), "v28-short.params", short, &table, false);
        assert!(
            matches!(v, Verdict::Truncated { size, needed } if size == short.len() as u64 && needed > size),
            "{v}"
        );
        assert!(v.to_string().starts_with("truncated ("), "{v}");
        let v = check(
            dir.path(),
            "v28-short.vk",
            &vk[..vk.len() - 1],
            &table,
            false,
        );
        assert!(matches!(v, Verdict::Truncated { .. }), "{v}");
        // One byte of the last point (b_g2) changed: whole, but not the file.
        let mut altered = good.clone();
        let last = altered.len() - 10;
        altered[last] ^= 1;
        let v = check(dir.path(), "v28-altered.params", &altered, &table, false);
        assert_eq!(
            v,
            Verdict::WrongDigest {
                expected: digest_of(&good),
                got: digest_of(&altered)
            }
        );
        assert!(v.is_bad());
        assert!(
            v.to_string().starts_with(&format!(
                "wrong digest (expected {}, got ",
                digest_of(&good)
            )),
            "{v}"
        );
    }

    #[test]
    fn unlisted_files_are_checked_for_structure() {
        let dir = tempfile::tempdir().unwrap();
        let table = DigestTable::default();
        let good = params_bytes();
        let v = check(dir.path(), "mine.params", &good, &table, false);
        assert!(
            matches!(&v, Verdict::UnlistedOk { what } if what.contains("1 public inputs")),
            "{v}"
        );
        assert!(!v.is_bad());
        assert!(v.to_string().starts_with("unlisted: structure ok ("), "{v}");
        let v = check(dir.path(), "mine.params", &good, &table, true);
        assert!(
            matches!(&v, Verdict::UnlistedOk { what } if what.contains("subgroup")),
            "{v}"
        );
        let v = check(dir.path(), "mine.vk", &vk_bytes(), &table, false);
        assert!(matches!(v, Verdict::UnlistedOk { .. }), "{v}");

        // Garbage: bytes that are no curve point, however long.
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
        for (name, len) in [("junk.params", 4096), ("junk.vk", 4096), ("tiny.vk", 100)] {
            let v = check(dir.path(), name, &garbage[..len], &table, false);
            assert_eq!(
                v,
                Verdict::UnlistedBad {
                    why: "verifying key: alpha_g1 is not a point of the prime-order subgroup \
                          (not a parameter file, or damaged)"
                        .into()
                },
                "{name}"
            );
            assert!(v.is_bad());
            assert!(
                v.to_string()
                    .starts_with("unlisted: bad structure (verifying key: ")
            );
        }
        let v = check(dir.path(), "junk.params", &good[..500], &table, false);
        assert_eq!(
            v,
            Verdict::Truncated {
                size: 500,
                needed: VK_HEAD
            }
        );
        let mut long = good.clone();
        long.extend_from_slice(&[0; 3]);
        let v = check(dir.path(), "long.params", &long, &table, false);
        assert_eq!(
            v,
            Verdict::UnlistedBad {
                why: "3 bytes after the last section (b_g2)".into()
            }
        );
        // A point off the curve in h: the sections still add up, so only
        // --full sees it.
        let mut bent = good.clone();
        let h_first_point = vk_bytes().len() + 4;
        bent[h_first_point + 50] ^= 1;
        let v = check(dir.path(), "bent.params", &bent, &table, false);
        assert!(matches!(v, Verdict::UnlistedOk { .. }), "{v}");
        let v = check(dir.path(), "bent.params", &bent, &table, true);
        assert_eq!(
            v,
            Verdict::UnlistedBad {
                why: "h point 0 is not a non-identity point of the prime-order subgroup".into()
            }
        );
        // The verifying key's own points are always checked.
        let mut bent_vk = good.clone();
        bent_vk[10] ^= 1;
        let v = check(dir.path(), "bentvk.params", &bent_vk, &table, false);
        assert!(
            matches!(&v, Verdict::UnlistedBad { why } if why.starts_with("verifying key")),
            "{v}"
        );

        assert_eq!(
            check(
                dir.path(),
                "x.meta",
                br#"{"sector_size":2048}"#,
                &table,
                false
            ),
            Verdict::MetaOk { sector_size: 2048 }
        );
        let v = check(dir.path(), "y.meta", b"{}", &table, false);
        assert!(matches!(v, Verdict::MetaBad { .. }) && v.is_bad(), "{v}");
    }

    #[test]
    fn the_official_table_parses_and_names_every_published_file() {
        let t = DigestTable::official().unwrap();
        // filecoin-proofs 19.1.0: 22 circuits, a .params and a .vk each.
        assert_eq!(t.len(), 44);
        // The name cuzk computes for the 2 KiB SnapDeals circuit is listed,
        // with the digest parameters.json gives it.
        let files = crate::update::param_files_for(
            crate::UpdateProof::new(crate::SectorSize::KIB2).unwrap(),
            Path::new("/nowhere"),
        )
        .unwrap();
        let name = files.params.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            name,
            "v28-empty-sector-update-merkletree-poseidon_hasher-8-0-0-\
             fb9e095bebdd77511c0269b967b4d87ba8b8a525edaa0e165de23ba454510194.params"
        );
        assert_eq!(t.digest(name), Some("311f92a3e75036ced01b1c0025f1fa0c"));
        assert_eq!(t.digest("v28-nothing.params"), None);
        assert!(
            t.digests
                .values()
                .all(|d| d.len() == DIGEST_HEX && d.bytes().all(|b| b.is_ascii_hexdigit()))
        );
        // A table in the same form, and files read from a directory.
        let small =
            DigestTable::from_json(r#"{"a.vk": {"cid": "x", "digest": "AB", "sector_size": 1}}"#)
                .unwrap();
        assert_eq!(small.digest("a.vk"), Some("ab"));
        assert!(DigestTable::from_json("[").is_err());
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.params", "a.vk", "c.meta", "notes.txt", ".x.params.tmp"] {
            fs::write(dir.path().join(f), b"").unwrap();
        }
        fs::create_dir(dir.path().join("sub")).unwrap();
        let (files, ignored) = cache_files(dir.path()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a.vk", "b.params", "c.meta"]);
        assert_eq!(ignored, 3);
    }
}
