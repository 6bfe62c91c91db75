//! Vanilla proofs in a request, in either of the two forms storage software
//! has them in:
//!
//! - JSON: a list of the typed proofs as filecoin-proofs' serde writes them
//!   to JSON (`FallbackPoStSectorProof`, `PartitionProof`);
//! - bincode: a list of strings, each the base64 (standard alphabet, with
//!   padding) of one proof's bytes as filecoin-proofs-api hands them out
//!   (`VanillaProofBytes` from `generate_single_vanilla_proof`,
//!   `PartitionProofBytes` from `generate_partition_proofs`), which is
//!   `bincode::serialize` of the same typed proof.
//!
//! Both decode to the same typed proofs; everything after that is shared.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bincode::Options;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{FilecoinError, Result};

/// How a request's `vanilla_proofs` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VanillaEncoding {
    /// Typed JSON objects.
    Json,
    /// base64 strings of filecoin-proofs-api's bincode bytes.
    Bincode,
}

/// The encoding of `v`: bincode when it is a list of strings, JSON for any
/// other list; a list mixing both is refused.
pub(crate) fn encoding_of(what: &'static str, v: &Value) -> Result<VanillaEncoding> {
    let bad = |detail: String| FilecoinError::BadInput { what, detail };
    let items = v
        .as_array()
        .ok_or_else(|| bad("`vanilla_proofs` is not a list".to_owned()))?;
    let strings = items.iter().filter(|i| i.is_string()).count();
    match strings {
        0 => Ok(VanillaEncoding::Json),
        n if n == items.len() => Ok(VanillaEncoding::Bincode),
        n => Err(bad(format!(
            "`vanilla_proofs` mixes {n} base64 strings with {} JSON objects: use one form",
            items.len() - n
        ))),
    }
}

/// bincode as filecoin-proofs-api writes it (`bincode::serialize`: fixed
/// width integers, little endian), reading no more than the bytes given and
/// refusing bytes left over.
fn bincode_options(len: usize) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(len as u64)
}

/// Decodes `v` (either form) into typed proofs.
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, v: Value) -> Result<Vec<T>> {
    match encoding_of(what, &v)? {
        VanillaEncoding::Json => {
            serde_json::from_value(v).map_err(|e| FilecoinError::json(what, e))
        }
        VanillaEncoding::Bincode => {
            let Value::Array(items) = v else {
                unreachable!("encoding_of accepted only a list")
            };
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let bad = |detail: String| FilecoinError::BadInput {
                        what,
                        detail: format!("vanilla proof {i}: {detail}"),
                    };
                    let text = item.as_str().unwrap_or_default();
                    let bytes = STANDARD
                        .decode(text)
                        .map_err(|e| bad(format!("not base64 ({e})")))?;
                    bincode_options(bytes.len())
                        .deserialize(&bytes)
                        .map_err(|e| {
                            bad(format!(
                                "{} bytes that are not a vanilla proof of this proof type \
                                 in filecoin-proofs' bincode form ({e})",
                                bytes.len()
                            ))
                        })
                })
                .collect()
        }
    }
}

/// Encodes typed proofs in the form asked for.
pub(crate) fn encode<T: Serialize>(
    what: &'static str,
    proofs: &[T],
    encoding: VanillaEncoding,
) -> Result<Value> {
    let bad = |detail: String| FilecoinError::BadInput { what, detail };
    match encoding {
        VanillaEncoding::Json => serde_json::to_value(proofs).map_err(|e| bad(e.to_string())),
        VanillaEncoding::Bincode => proofs
            .iter()
            .map(|p| {
                let bytes = bincode_options(usize::MAX)
                    .serialize(p)
                    .map_err(|e| bad(e.to_string()))?;
                Ok(Value::String(STANDARD.encode(bytes)))
            })
            .collect::<Result<Vec<Value>>>()
            .map(Value::Array),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Leaf {
        index: u64,
        path: Vec<[u8; 4]>,
    }

    fn leaves() -> Vec<Leaf> {
        vec![
            Leaf {
                index: 3,
                path: vec![[1, 2, 3, 4]; 3],
            },
            Leaf {
                index: u64::MAX,
                path: vec![],
            },
        ]
    }

    #[test]
    fn both_forms_round_trip_and_bincode_is_the_default_bincode() {
        for encoding in [VanillaEncoding::Json, VanillaEncoding::Bincode] {
            let v = encode("t", &leaves(), encoding).unwrap();
            assert_eq!(encoding_of("t", &v).unwrap(), encoding);
            assert_eq!(decode::<Leaf>("t", v).unwrap(), leaves());
        }
        // The bytes are bincode 1's default `serialize`: 8-byte index, 8-byte
        // length, then the array elements.
        let v = encode("t", &leaves()[..1], VanillaEncoding::Bincode).unwrap();
        let bytes = STANDARD.decode(v[0].as_str().unwrap()).unwrap();
        let mut expect = 3u64.to_le_bytes().to_vec();
        expect.extend(3u64.to_le_bytes());
        expect.extend([1, 2, 3, 4].repeat(3));
        assert_eq!(bytes, expect);
    }

    #[test]
    fn bad_bincode_is_a_clear_error() {
        let err = |v: Value| decode::<Leaf>("t", v).unwrap_err().to_string();
        let good = encode("t", &leaves(), VanillaEncoding::Bincode).unwrap();
        let good0 = STANDARD.decode(good[0].as_str().unwrap()).unwrap();

        let e = err(serde_json::json!(["not base64!"]));
        assert!(e.contains("vanilla proof 0: not base64"), "{e}");
        let truncated = STANDARD.encode(&good0[..good0.len() - 1]);
        let e = err(serde_json::json!([good[1].clone(), truncated]));
        assert!(
            e.contains("vanilla proof 1:") && e.contains("bincode form"),
            "{e}"
        );
        let mut longer = good0.clone();
        longer.push(0);
        let e = err(serde_json::json!([STANDARD.encode(longer)]));
        assert!(e.contains("vanilla proof 0:"), "{e}");
        // A length prefix far beyond the bytes given.
        let mut huge = 3u64.to_le_bytes().to_vec();
        huge.extend(u64::MAX.to_le_bytes());
        let e = err(serde_json::json!([STANDARD.encode(huge)]));
        assert!(e.contains("vanilla proof 0:"), "{e}");
        let e = err(serde_json::json!([good[0].clone(), {"index": 1, "path": []}]));
        assert!(
            e.contains("mixes 1 base64 strings with 1 JSON objects"),
            "{e}"
        );
        let e = err(serde_json::json!({"index": 1}));
        assert!(e.contains("not a list"), "{e}");
    }
}
