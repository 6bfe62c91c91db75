//! Groth16 parameters in bellperson's file format: reading with clear errors,
//! atomic writing, and checking them against a circuit's shape.
//!
//! Format (all big-endian): the verifying key (alpha_g1, beta_g1, beta_g2,
//! gamma_g2, delta_g1, delta_g2, then a u32 count and the IC points), then
//! five sections h, l, a, b_g1 (G1) and b_g2 (G2), each a u32 count followed
//! by uncompressed points (96 bytes in G1, 192 in G2).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::{G1Affine, G2Affine};
use cuzk_synth::Pce;
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use crate::{Bls12, Groth16Error, Result};

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;
/// Points decoded per batch: bounds the extra memory of a read to one batch
/// however large the file is.
const POINTS_PER_BATCH: usize = 1 << 18;

struct Reader<'p> {
    inner: BufReader<File>,
    path: &'p Path,
    len: u64,
    pos: u64,
}

impl Reader<'_> {
    fn read_exact(&mut self, buf: &mut [u8], section: &'static str) -> Result<()> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.pos += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(Groth16Error::ParamsTruncated {
                    path: self.path.to_owned(),
                    section,
                    len: self.len,
                })
            }
            Err(source) => Err(Groth16Error::ParamsIo {
                path: self.path.to_owned(),
                source,
            }),
        }
    }

    fn read_u32(&mut self, section: &'static str) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b, section)?;
        Ok(u32::from_be_bytes(b))
    }

    fn corrupt(&self, section: &'static str, detail: impl Into<String>) -> Groth16Error {
        Groth16Error::ParamsCorrupt {
            path: self.path.to_owned(),
            section,
            detail: detail.into(),
        }
    }

    /// Reads a u32 count and that many points, decoding batches in parallel.
    fn read_points<P: Send>(
        &mut self,
        section: &'static str,
        point_bytes: usize,
        decode: impl Fn(&[u8]) -> Option<P> + Sync,
    ) -> Result<Vec<P>> {
        let count = self.read_u32(section)? as usize;
        let need = count as u64 * point_bytes as u64;
        if self.pos + need > self.len {
            return Err(Groth16Error::ParamsTruncated {
                path: self.path.to_owned(),
                section,
                len: self.len,
            });
        }
        let mut out = Vec::with_capacity(count);
        let mut buf = vec![0u8; POINTS_PER_BATCH.min(count) * point_bytes];
        let mut done = 0;
        while done < count {
            let n = POINTS_PER_BATCH.min(count - done);
            let bytes = &mut buf[..n * point_bytes];
            self.read_exact(bytes, section)?;
            let decoded: Vec<Option<P>> = bytes.par_chunks(point_bytes).map(&decode).collect();
            for (i, p) in decoded.into_iter().enumerate() {
                match p {
                    Some(p) => out.push(p),
                    None => {
                        return Err(self.corrupt(
                            section,
                            format!("point {} is not a valid non-identity curve point", done + i),
                        ));
                    }
                }
            }
            done += n;
        }
        Ok(out)
    }
}

fn open(path: &Path) -> Result<Reader<'_>> {
    let file = File::open(path).map_err(|source| Groth16Error::ParamsIo {
        path: path.to_owned(),
        source,
    })?;
    reader(file, path)
}

/// A reader of `file` from its start; `path` names it in errors.
fn reader(mut file: File, path: &Path) -> Result<Reader<'_>> {
    let io_err = |source| Groth16Error::ParamsIo {
        path: path.to_owned(),
        source,
    };
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0)).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    Ok(Reader {
        inner: BufReader::with_capacity(1 << 20, file),
        path,
        len,
        pos: 0,
    })
}

fn read_vk(r: &mut Reader<'_>) -> Result<VerifyingKey<Bls12>> {
    const SECTION: &str = "verifying key";
    // alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, ic count.
    let fixed = 3 * G1_BYTES + 3 * G2_BYTES + 4;
    let mut head = vec![0u8; fixed];
    r.read_exact(&mut head, SECTION)?;
    let ic_len = u32::from_be_bytes([
        head[fixed - 4],
        head[fixed - 3],
        head[fixed - 2],
        head[fixed - 1],
    ]) as usize;
    if r.pos + (ic_len * G1_BYTES) as u64 > r.len {
        return Err(Groth16Error::ParamsTruncated {
            path: r.path.to_owned(),
            section: SECTION,
            len: r.len,
        });
    }
    let mut all = head;
    let mut ic = vec![0u8; ic_len * G1_BYTES];
    r.read_exact(&mut ic, SECTION)?;
    all.extend_from_slice(&ic);
    // bellperson's own reader checks every point (on curve, in the subgroup)
    // and rejects the identity where the format forbids it.
    let vk =
        VerifyingKey::<Bls12>::read(&all[..]).map_err(|e| r.corrupt(SECTION, e.to_string()))?;
    Ok(vk)
}

fn decode_g1(checked: bool) -> impl Fn(&[u8]) -> Option<G1Affine> + Sync {
    move |b: &[u8]| {
        let arr: &[u8; G1_BYTES] = b.try_into().ok()?;
        let p: Option<G1Affine> = if checked {
            G1Affine::from_uncompressed(arr).into()
        } else {
            Option::<G1Affine>::from(G1Affine::from_uncompressed_unchecked(arr))
                .filter(|p| bool::from(p.is_on_curve()))
        };
        p.filter(|p| !bool::from(p.is_identity()))
    }
}

fn decode_g2(checked: bool) -> impl Fn(&[u8]) -> Option<G2Affine> + Sync {
    move |b: &[u8]| {
        let arr: &[u8; G2_BYTES] = b.try_into().ok()?;
        let p: Option<G2Affine> = if checked {
            G2Affine::from_uncompressed(arr).into()
        } else {
            Option::<G2Affine>::from(G2Affine::from_uncompressed_unchecked(arr))
                .filter(|p| bool::from(p.is_on_curve()))
        };
        p.filter(|p| !bool::from(p.is_identity()))
    }
}

/// Reads a parameter file in bellperson's format. Every point is checked to
/// be on the curve; with `checked`, also to be in the prime-order subgroup
/// (about 25 µs per point: skip it for large files whose digest is verified
/// elsewhere).
/// The file is read once, in bounded batches: no second copy is held.
pub fn read_params(path: &Path, checked: bool) -> Result<Parameters<Bls12>> {
    let _s = tracing::info_span!("read_params", path = %path.display()).entered();
    read_from(open(path)?, checked)
}

/// [`read_params`] from a file already open (from its start, whatever its
/// offset): for callers that check where a file is before they read it,
/// so that what they checked is what they read. `path` names it in errors.
pub fn read_params_from(file: File, path: &Path, checked: bool) -> Result<Parameters<Bls12>> {
    let _s = tracing::info_span!("read_params", path = %path.display()).entered();
    read_from(reader(file, path)?, checked)
}

fn read_from(mut r: Reader<'_>, checked: bool) -> Result<Parameters<Bls12>> {
    let vk = read_vk(&mut r)?;
    let h = r.read_points("h", G1_BYTES, decode_g1(checked))?;
    let l = r.read_points("l", G1_BYTES, decode_g1(checked))?;
    let a = r.read_points("a", G1_BYTES, decode_g1(checked))?;
    let b_g1 = r.read_points("b_g1", G1_BYTES, decode_g1(checked))?;
    let b_g2 = r.read_points("b_g2", G2_BYTES, decode_g2(checked))?;
    if r.pos != r.len {
        return Err(r.corrupt(
            "end",
            format!("{} unexpected bytes after the b_g2 section", r.len - r.pos),
        ));
    }
    Ok(Parameters {
        vk,
        h: Arc::new(h),
        l: Arc::new(l),
        a: Arc::new(a),
        b_g1: Arc::new(b_g1),
        b_g2: Arc::new(b_g2),
    })
}

/// Reads only the verifying key at the start of a parameter file.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey<Bls12>> {
    let mut r = open(path)?;
    read_vk(&mut r)
}

/// Writes `params` to `path` atomically: into a temporary file beside it,
/// then renamed, so a failure never leaves a partial file under `path`.
/// The bytes are bellperson's `Parameters::write`, made on rayon's pool
/// ([`write_params_to`]).
pub fn write_params(path: &Path, params: &Parameters<Bls12>) -> Result<()> {
    write_atomically(path, |w| write_params_to(w, params))
}

/// Writes `params` in bellperson's layout (`Parameters::write`: the
/// verifying key, then h, l, a, b_g1 and b_g2, each a big-endian u32 count
/// and uncompressed points), the points serialized in parallel: a 47 GB
/// set is mostly the conversion of half a billion points out of Montgomery
/// form, which one thread does at well under the speed of a disk.
pub fn write_params_to<W: Write>(w: &mut W, params: &Parameters<Bls12>) -> io::Result<()> {
    params.vk.write(&mut *w)?;
    write_points(w, &params.h, G1Affine::to_uncompressed)?;
    write_points(w, &params.l, G1Affine::to_uncompressed)?;
    write_points(w, &params.a, G1Affine::to_uncompressed)?;
    write_points(w, &params.b_g1, G1Affine::to_uncompressed)?;
    write_points(w, &params.b_g2, G2Affine::to_uncompressed)
}

/// A count and the points' encodings, encoded a batch of chunks at a time
/// on rayon's pool and written in order.
fn write_points<W: Write, T: Sync, const N: usize>(
    w: &mut W,
    points: &[T],
    encode: impl Fn(&T) -> [u8; N] + Sync,
) -> io::Result<()> {
    const CHUNK: usize = 1 << 14;
    let count = u32::try_from(points.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "over 2^32 points in a query"))?;
    w.write_all(&count.to_be_bytes())?;
    let batch = CHUNK * rayon::current_num_threads().max(1) * 2;
    for points in points.chunks(batch) {
        let bytes: Vec<Vec<u8>> = points
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut out = Vec::with_capacity(chunk.len() * N);
                for p in chunk {
                    out.extend_from_slice(&encode(p));
                }
                out
            })
            .collect();
        for b in &bytes {
            w.write_all(b)?;
        }
    }
    Ok(())
}

/// Writes a file through a temporary sibling and a rename, so `path` holds
/// either its old content or all of the new one, never a part: the bytes go
/// to a uniquely named `.NAME.XXXXXX.tmp` beside it (tempfile's, so threads
/// and processes writing the same path at once never share one), are
/// synced, and the file is renamed over `path`; on any error the temporary
/// file is removed. The new file gets the usual permissions (0666 less the
/// umask), as `File::create` would give it.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<()> {
    let err = |source| Groth16Error::Write {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let (file, temp_path) = builder.tempfile_in(dir).map_err(err)?.into_parts();
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write(&mut w).map_err(err)?;
    w.flush().map_err(err)?;
    w.get_ref().sync_all().map_err(err)?;
    drop(w);
    // Dropping `temp_path` on an error above removed the temporary file.
    temp_path.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

/// Checks that `params` fit the circuit recorded in `pce`: every query has
/// the length the prover will use. Catches parameters made for another
/// circuit before any work is done.
pub fn check_params(params: &Parameters<Bls12>, pce: &Pce) -> Result<()> {
    let checks = [
        (
            "the verifying key's IC (one per input, ONE included)",
            pce.num_inputs,
            params.vk.ic.len(),
        ),
        (
            "the h query (domain size - 1)",
            pce.domain_size() - 1,
            params.h.len(),
        ),
        (
            "the l query (one per aux variable)",
            pce.num_aux,
            params.l.len(),
        ),
        (
            "the a query (inputs + aux used in A)",
            pce.a_query_len(),
            params.a.len(),
        ),
        (
            "the b_g1 query (variables used in B)",
            pce.b_query_len(),
            params.b_g1.len(),
        ),
        (
            "the b_g2 query (variables used in B)",
            pce.b_query_len(),
            params.b_g2.len(),
        ),
    ];
    for (what, expected, found) in checks {
        if expected != found {
            return Err(Groth16Error::ParamsMismatch {
                what,
                expected,
                found,
            });
        }
    }
    if bool::from(params.vk.delta_g1.is_identity() | params.vk.delta_g2.is_identity()) {
        return Err(Groth16Error::DegenerateParams);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_synth::circuits::CircuitSpec;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Threads writing the same file at once each succeed, the file ends
    /// whole (one writer's bytes) and no temporary file stays; a writer
    /// that fails leaves the old file as it was and nothing beside it.
    #[test]
    fn atomic_writes_race_safely_and_failures_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.params");
        let contents: Vec<Vec<u8>> = (0..8u8)
            .map(|i| vec![i; 300_000 + usize::from(i)])
            .collect();
        std::thread::scope(|scope| {
            for bytes in &contents {
                let path = &path;
                scope.spawn(move || {
                    write_atomically(path, |w| {
                        for chunk in bytes.chunks(4096) {
                            w.write_all(chunk)?;
                        }
                        Ok(())
                    })
                    .unwrap()
                });
            }
        });
        let got = std::fs::read(&path).unwrap();
        assert!(
            contents.contains(&got),
            "a mix of writers: {} bytes",
            got.len()
        );
        assert_eq!(names_in(dir.path()), ["out.params"]);

        let e = write_atomically(&path, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("the writer failed"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("out.params"), "{e}");
        assert!(e.to_string().contains("the writer failed"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), got);
        assert_eq!(names_in(dir.path()), ["out.params"]);

        let missing = dir.path().join("no-such-dir").join("x");
        let e = write_atomically(&missing, |_| Ok(())).unwrap_err();
        assert!(matches!(e, Groth16Error::Write { .. }), "{e:?}");
    }

    /// A file made by `write_atomically` has the permissions `File::create`
    /// gives (0666 less the umask), not a temporary file's 0600.
    #[cfg(unix)]
    #[test]
    fn atomic_writes_get_the_usual_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        File::create(&plain).unwrap();
        let atomic = dir.path().join("atomic");
        write_atomically(&atomic, |w| w.write_all(b"x")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
    }

    /// The parallel writer's bytes are bellperson's, for a set of a few
    /// points and for one whose queries span several chunks and batches.
    #[test]
    fn parallel_writer_writes_bellpersons_bytes() {
        for (spec, seed) in [("porep:5", 1), ("no-aux:3", 4), ("porep:17", 2)] {
            let spec: CircuitSpec = spec.parse().unwrap();
            let pce = Pce::record(spec.build(0)).unwrap();
            let params = crate::fake::fake_params(&pce, seed);
            let mut theirs = Vec::new();
            params.write(&mut theirs).unwrap();
            // Two threads: porep:17's h and l queries span several batches
            // of chunks whatever the machine.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap();
            let mut ours = Vec::new();
            pool.install(|| write_params_to(&mut ours, &params))
                .unwrap();
            assert_eq!(ours.len(), theirs.len(), "{spec}");
            assert!(ours == theirs, "{spec}: the bytes differ");
        }
    }

    /// Through a file, atomically, and read back to the same set.
    #[test]
    fn written_parameters_read_back() {
        let spec: CircuitSpec = "porep:10".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let params = crate::fake::fake_params(&pce, 3);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.params");
        write_params(&path, &params).unwrap();
        let back = read_params(&path, true).unwrap();
        assert!(back.vk == params.vk);
        assert_eq!(back.h.as_slice(), params.h.as_slice());
        assert_eq!(back.b_g2.as_slice(), params.b_g2.as_slice());
        // Nothing left beside the file.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
