//! The structure of parameter files: bellperson's layout (the verifying
//! key, then h, l, a, b_g1 and b_g2, each a big-endian u32 count and
//! uncompressed points) read a section header at a time, the points
//! decoded only when asked; filecoin-proofs' `.meta` JSON.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use bellperson::groth16::VerifyingKey;
use blstrs::{Bls12, G1Affine, G2Affine};
use rayon::prelude::*;

use super::{CHUNK, Verdict};

const G1_BYTES: u64 = 96;
const G2_BYTES: u64 = 192;
/// alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, then the IC count.
pub(super) const VK_HEAD: u64 = 3 * G1_BYTES + 3 * G2_BYTES + 4;
/// Largest `.vk` or `.meta` read into memory (real ones are a few KiB).
const SMALL_FILE_MAX: u64 = 16 << 20;

pub(super) enum Structure {
    Truncated { needed: u64 },
    Bad(String),
    Io(io::Error),
}

impl From<io::Error> for Structure {
    fn from(e: io::Error) -> Self {
        Structure::Io(e)
    }
}

fn read_at(file: &mut File, at: u64, buf: &mut [u8]) -> io::Result<()> {
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(buf)
}

/// The verifying key at the start of a file of `size` bytes: its points
/// checked by bellperson's reader (on the curve, in the subgroup, no
/// identity in IC); returns it and where it ends. Its six fixed points are
/// checked before any length: a file of other bytes is then told apart
/// from a truncated one.
fn read_vk(
    file: &mut File,
    size: u64,
) -> std::result::Result<(VerifyingKey<Bls12>, u64), Structure> {
    let mut head = vec![0u8; size.min(VK_HEAD) as usize];
    read_at(file, 0, &mut head)?;
    let mut at = 0;
    for (name, len) in [
        ("alpha_g1", G1_BYTES),
        ("beta_g1", G1_BYTES),
        ("beta_g2", G2_BYTES),
        ("gamma_g2", G2_BYTES),
        ("delta_g1", G1_BYTES),
        ("delta_g2", G2_BYTES),
    ] {
        let Some(bytes) = head.get(at..at + len as usize) else {
            break;
        };
        if !on_curve_in_subgroup(bytes) {
            return Err(Structure::Bad(format!(
                "verifying key: {name} is not a point of the prime-order subgroup (not a \
                 parameter file, or damaged)"
            )));
        }
        at += len as usize;
    }
    if size < VK_HEAD {
        return Err(Structure::Truncated { needed: VK_HEAD });
    }
    let mut count = [0u8; 4];
    read_at(file, VK_HEAD - 4, &mut count)?;
    let end = VK_HEAD + u64::from(u32::from_be_bytes(count)) * G1_BYTES;
    if end > size {
        return Err(Structure::Truncated { needed: end });
    }
    if end > SMALL_FILE_MAX {
        return Err(Structure::Bad(format!(
            "a verifying key of {end} bytes ({} IC points): far more than any circuit's",
            u32::from_be_bytes(count)
        )));
    }
    let mut bytes = vec![0u8; end as usize];
    read_at(file, 0, &mut bytes)?;
    let vk = VerifyingKey::<Bls12>::read(&bytes[..])
        .map_err(|e| Structure::Bad(format!("verifying key: {e}")))?;
    Ok((vk, end))
}

pub(super) fn vk_structure(file: &mut File, size: u64) -> std::result::Result<String, Structure> {
    let (vk, end) = read_vk(file, size)?;
    if end < size {
        return Err(Structure::Bad(format!(
            "{} bytes after the verifying key",
            size - end
        )));
    }
    Ok(format!("verifying key, {} public inputs", vk.ic.len() - 1))
}

/// The sections after the verifying key: name, and bytes per point.
const SECTIONS: [(&str, u64); 5] = [
    ("h", G1_BYTES),
    ("l", G1_BYTES),
    ("a", G1_BYTES),
    ("b_g1", G1_BYTES),
    ("b_g2", G2_BYTES),
];

pub(super) fn params_structure(
    file: &mut File,
    size: u64,
    full: bool,
    progress: &mut dyn FnMut(u64),
) -> std::result::Result<String, Structure> {
    let (vk, mut at) = read_vk(file, size)?;
    let mut counts = [0u64; 5];
    for (count, (_, point)) in counts.iter_mut().zip(SECTIONS) {
        if at + 4 > size {
            return Err(Structure::Truncated { needed: at + 4 });
        }
        let mut b = [0u8; 4];
        read_at(file, at, &mut b)?;
        *count = u64::from(u32::from_be_bytes(b));
        at += 4 + *count * point;
        if at > size {
            return Err(Structure::Truncated { needed: at });
        }
    }
    if at < size {
        return Err(Structure::Bad(format!(
            "{} bytes after the last section (b_g2)",
            size - at
        )));
    }
    if full {
        check_points(file, vk_len(&vk), &counts, progress)?;
    }
    let fake = if cuzk_groth16_cuda::fake::is_fake(&vk) {
        "; FAKE parameters (cuzk setup --fake): proofs made with them never verify"
    } else {
        ""
    };
    Ok(format!(
        "Groth16 parameters, {} public inputs, {} h, {} l, {} a, {} b_g1, {} b_g2 points{}{fake}",
        vk.ic.len() - 1,
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        if full {
            "; every point on the curve and in the subgroup"
        } else {
            ""
        },
    ))
}

fn vk_len(vk: &VerifyingKey<Bls12>) -> u64 {
    VK_HEAD + vk.ic.len() as u64 * G1_BYTES
}

/// Decodes every point of the five sections after the verifying key (which
/// ends at `start`), a chunk at a time, on rayon's pool.
fn check_points(
    file: &mut File,
    start: u64,
    counts: &[u64; 5],
    progress: &mut dyn FnMut(u64),
) -> std::result::Result<(), Structure> {
    file.seek(SeekFrom::Start(start))?;
    progress(start);
    let mut reader = io::BufReader::with_capacity(CHUNK, file);
    let mut buf = Vec::new();
    for (&count, (name, point)) in counts.iter().zip(SECTIONS) {
        reader.read_exact(&mut [0u8; 4])?;
        progress(4);
        let per_chunk = CHUNK as u64 / point;
        let mut done = 0;
        while done < count {
            let n = per_chunk.min(count - done);
            buf.resize((n * point) as usize, 0);
            reader.read_exact(&mut buf)?;
            let bad = buf
                .par_chunks(point as usize)
                .position_first(|b| !valid_point(b))
                .map(|i| done + i as u64);
            if let Some(i) = bad {
                return Err(Structure::Bad(format!(
                    "{name} point {i} is not a non-identity point of the prime-order subgroup"
                )));
            }
            done += n;
            progress(n * point);
        }
    }
    Ok(())
}

fn valid_point(b: &[u8]) -> bool {
    on_curve_in_subgroup(b) && !is_identity(b)
}

fn on_curve_in_subgroup(b: &[u8]) -> bool {
    if let Ok(arr) = <&[u8; G1_BYTES as usize]>::try_from(b) {
        G1Affine::from_uncompressed(arr).is_some().into()
    } else if let Ok(arr) = <&[u8; G2_BYTES as usize]>::try_from(b) {
        G2Affine::from_uncompressed(arr).is_some().into()
    } else {
        false
    }
}

/// The uncompressed encoding's point-at-infinity flag.
fn is_identity(b: &[u8]) -> bool {
    b.first().is_some_and(|b| b & 0x40 != 0)
}

pub(super) fn check_meta(file: &mut File, size: u64) -> Verdict {
    if size > SMALL_FILE_MAX {
        return Verdict::MetaBad {
            why: format!("{size} bytes; a .meta file holds a few bytes of JSON"),
        };
    }
    let mut text = String::new();
    if let Err(e) = file.read_to_string(&mut text) {
        return Verdict::MetaBad {
            why: format!("not UTF-8 text: {e}"),
        };
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        sector_size: u64,
    }
    match serde_json::from_str::<Meta>(&text) {
        Ok(m) => Verdict::MetaOk {
            sector_size: m.sector_size,
        },
        Err(e) => Verdict::MetaBad {
            why: format!("not filecoin-proofs' {{\"sector_size\": N}}: {e}"),
        },
    }
}
