//! The gadget's 32-bit [`Word`] (bellperson's `UInt32`): its bits and value,
//! rotations, shifts and the bitwise operations of SHA-256 (xor, `ch`, `maj`).

use bellperson::gadgets::boolean::Boolean;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;

/// A 32-bit word of the gadget: its bits, least significant first, and its
/// value when every bit's value is known (bellperson's `UInt32`).
#[derive(Clone)]
pub struct Word {
    pub(super) bits: [Boolean; 32],
    pub(super) value: Option<u32>,
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let constant = self.bits.iter().filter(|b| b.is_constant()).count();
        f.debug_struct("Word")
            .field("value", &self.value)
            .field("constant_bits", &constant)
            .finish()
    }
}

impl Word {
    /// A constant word (no variables).
    pub fn constant(value: u32) -> Word {
        Word {
            bits: std::array::from_fn(|i| Boolean::Constant((value >> i) & 1 == 1)),
            value: Some(value),
        }
    }

    /// The word of 32 bits, most significant first.
    pub fn from_bits_be(bits: &[Boolean]) -> Word {
        assert_eq!(bits.len(), 32);
        let mut value = Some(0u32);
        for b in bits {
            value = match (value, b.get_value()) {
                (Some(v), Some(bit)) => Some((v << 1) | u32::from(bit)),
                _ => None,
            };
        }
        Word {
            bits: std::array::from_fn(|i| bits[31 - i].clone()),
            value,
        }
    }

    /// The word's bits, most significant first.
    pub fn into_bits_be(self) -> impl Iterator<Item = Boolean> {
        self.bits.into_iter().rev()
    }

    /// The word's bits, least significant first.
    pub fn bits(&self) -> &[Boolean; 32] {
        &self.bits
    }

    /// The word's value, when known.
    pub fn value(&self) -> Option<u32> {
        self.value
    }

    pub(super) fn is_constant(&self) -> bool {
        self.bits.iter().all(Boolean::is_constant)
    }

    /// Rotated right by `by` bits (no allocation).
    pub fn rotr(&self, by: usize) -> Word {
        let by = by % 32;
        Word {
            bits: std::array::from_fn(|i| self.bits[(i + by) % 32].clone()),
            value: self.value.map(|v| v.rotate_right(by as u32)),
        }
    }

    /// Shifted right by `by` bits, zeros in (no allocation).
    pub fn shr(&self, by: usize) -> Word {
        let by = by % 32;
        Word {
            bits: std::array::from_fn(|i| {
                self.bits
                    .get(i + by)
                    .cloned()
                    .unwrap_or(Boolean::Constant(false))
            }),
            value: self.value.map(|v| v >> by),
        }
    }

    /// Bitwise xor: bellpepper's `Boolean::xor` bit by bit, least
    /// significant first.
    pub fn xor<CS: ConstraintSystem<Scalar>>(
        &self,
        mut cs: CS,
        other: &Word,
    ) -> Result<Word, SynthesisError> {
        let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Boolean::xor(
                cs.namespace(|| format!("xor of bit {i}")),
                &self.bits[i],
                &other.bits[i],
            )?;
        }
        Ok(Word {
            bits,
            value: self.value.zip(other.value).map(|(a, b)| a ^ b),
        })
    }

    /// (e and f) xor ((not e) and g), bit by bit with bellpepper's
    /// `Boolean::sha256_ch`.
    pub fn sha256_ch<CS: ConstraintSystem<Scalar>>(
        mut cs: CS,
        e: &Word,
        f: &Word,
        g: &Word,
    ) -> Result<Word, SynthesisError> {
        let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Boolean::sha256_ch(
                cs.namespace(|| format!("ch {i}")),
                &e.bits[i],
                &f.bits[i],
                &g.bits[i],
            )?;
        }
        let value = match (e.value, f.value, g.value) {
            (Some(e), Some(f), Some(g)) => Some((e & f) ^ (!e & g)),
            _ => None,
        };
        Ok(Word { bits, value })
    }

    /// (a and b) xor (a and c) xor (b and c), bit by bit with bellpepper's
    /// `Boolean::sha256_maj`.
    pub fn sha256_maj<CS: ConstraintSystem<Scalar>>(
        mut cs: CS,
        a: &Word,
        b: &Word,
        c: &Word,
    ) -> Result<Word, SynthesisError> {
        let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Boolean::sha256_maj(
                cs.namespace(|| format!("maj {i}")),
                &a.bits[i],
                &b.bits[i],
                &c.bits[i],
            )?;
        }
        let value = match (a.value, b.value, c.value) {
            (Some(a), Some(b), Some(c)) => Some((a & b) ^ (a & c) ^ (b & c)),
            _ => None,
        };
        Ok(Word { bits, value })
    }
}
