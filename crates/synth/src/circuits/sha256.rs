//! `sha256:N`: SHA-256 of an (N*64 - 9)-byte preimage, which pads to exactly
//! N blocks, built from bellperson's own gadget. The preimage bits are aux
//! (`AllocatedBit`, one booleanity row each) and the digest is packed into
//! two public inputs with `multipack::pack_into_inputs`, as Filecoin exposes
//! its commitments. Nearly every witness value is 0 or 1: the workload that
//! the GPU's 0/1 scalar classification is for.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use rand_core::RngCore;

use super::{Family, check_size, witness_rng};

/// Bytes that SHA-256 padding adds at least: the 0x80 marker and the 64-bit
/// length. A preimage of `64*N - PADDING` bytes is exactly N blocks.
const PADDING: usize = 9;

/// See the module docs of `sha256`.
#[derive(Clone, Debug)]
pub struct Sha256 {
    blocks: u32,
    preimage: Vec<u8>,
}

impl Sha256 {
    pub fn new(blocks: u32, witness_seed: u64) -> Self {
        let len = (blocks as usize * 64).saturating_sub(PADDING);
        // An out-of-range block count is refused in synthesize; do not
        // allocate a huge preimage for it first.
        let len = if Family::Sha256.size_range().contains(&blocks) {
            len
        } else {
            0
        };
        let mut preimage = vec![0u8; len];
        witness_rng("sha256", witness_seed).fill_bytes(&mut preimage);
        Sha256 { blocks, preimage }
    }

    /// The circuit for a given preimage; its length decides the shape.
    #[cfg(test)]
    fn with_preimage(preimage: Vec<u8>) -> Self {
        let blocks = ((preimage.len() + PADDING).div_ceil(64)) as u32;
        Sha256 { blocks, preimage }
    }
}

impl Circuit<Scalar> for Sha256 {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::Sha256, self.blocks)?;
        // The gadget wants bits most significant first within each byte.
        let bits = multipack::bytes_to_bits(&self.preimage)
            .into_iter()
            .enumerate()
            .map(|(i, bit)| {
                let bit =
                    AllocatedBit::alloc(cs.namespace(|| format!("preimage bit {i}")), Some(bit))?;
                Ok(Boolean::from(bit))
            })
            .collect::<Result<Vec<_>, SynthesisError>>()?;
        let digest = sha256::sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::circuits::{CircuitSpec, Family};
    use bellperson::util_cs::test_cs::TestConstraintSystem;

    /// Measured with bellperson 0.27's gadget (1, 2 and 3 blocks: 26,034,
    /// 52,738, 79,442): preimage booleanity rows, compression rounds (the
    /// constant padding bits make the last block cheaper), 2 packing rows and
    /// 3 input rows (ONE + 2 digest inputs). Pinned so that a gadget change
    /// is noticed.
    pub(crate) fn expected_total(blocks: usize) -> usize {
        26_704 * blocks - 670
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("{s}: {e}")))
            .collect()
    }

    #[test]
    fn digest_matches_known_answers() {
        // Digests from Python's hashlib.sha256(bytes(range(n))).
        for (len, digest) in [
            (
                55,
                "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59",
            ),
            (
                119,
                "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6",
            ),
        ] {
            let preimage: Vec<u8> = (0..len as u8).collect();
            let mut cs = TestConstraintSystem::<Scalar>::new();
            Sha256::with_preimage(preimage)
                .synthesize(&mut cs)
                .unwrap_or_else(|e| panic!("{len}: {e}"));
            assert!(cs.is_satisfied());
            let expected =
                multipack::compute_multipacking::<Scalar>(&multipack::bytes_to_bits(&hex(digest)));
            assert_eq!(expected.len(), 2);
            assert_eq!(
                &cs.scalar_inputs()[1..],
                &expected[..],
                "{len}-byte preimage"
            );
        }
    }

    #[test]
    fn preimage_pads_to_exactly_n_blocks() {
        for blocks in [1, 2, 3] {
            let c = Sha256::new(blocks, 5);
            assert_eq!(c.preimage.len() + PADDING, blocks as usize * 64);
            let spec = CircuitSpec {
                family: Family::Sha256,
                size: blocks,
            };
            let mut cs = TestConstraintSystem::<Scalar>::new();
            spec.build(5)
                .synthesize(&mut cs)
                .unwrap_or_else(|e| panic!("{e}"));
            let total = cs.num_constraints() + cs.num_inputs();
            assert_eq!(total, expected_total(blocks as usize), "sha256:{blocks}");
        }
    }
}
