//! The affine point types an MSM runs over ([`MsmAffine`]: G1 and G2), and
//! how a device XYZZ result becomes the curve's projective point.

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective};
use ff::Field;
use group::Group;

use super::Accumulate;
use crate::cuda::DeviceElem;

mod sealed {
    pub trait Sealed {}
    impl Sealed for blstrs::G1Affine {}
    impl Sealed for blstrs::G2Affine {}
}

/// The affine point types an MSM runs over: [`G1Affine`] and [`G2Affine`].
pub trait MsmAffine: DeviceElem + sealed::Sealed {
    /// The result type.
    type Projective: Group + Copy + Send + Sync + std::fmt::Debug;
    /// The coordinate field; an XYZZ point is four of them on the device.
    type Coord: DeviceElem + Field;
    /// `g1` or `g2`: the kernels are `msm_<op>_<curve>_bls12_381` in module
    /// `msm_<curve>`.
    const CURVE: &'static str;
    /// The module of the curve kernels.
    const MODULE: &'static str;
    /// What [`Accumulate::Auto`] means for this curve (never `Auto`).
    const FASTEST_ACCUMULATE: Accumulate;
    /// The point x/ZZ, y/ZZZ from XYZZ coordinates, as blst's Jacobian
    /// (x = X/Z^2, y = Y/Z^3): Z = ZZ ZZZ, X = x ZZ ZZZ^2, Y = y ZZ^3 ZZZ^2.
    fn from_xyzz(xyzz: &[Self::Coord]) -> Self::Projective;
    /// The affine coordinates (x, y) as the device holds them: (0, 0) for
    /// the identity.
    fn xy(&self) -> [Self::Coord; 2];
}

/// The Jacobian coordinates of an XYZZ point, or None for the identity.
fn xyzz_to_jacobian<F: Field>(p: &[F]) -> Option<(F, F, F)> {
    let (x, y, zz, zzz) = (p[0], p[1], p[2], p[3]);
    if bool::from(zz.is_zero()) {
        return None;
    }
    let zzz2 = zzz.square();
    Some((x * zz * zzz2, y * zz.square() * zz * zzz2, zz * zzz))
}

impl MsmAffine for G1Affine {
    type Projective = G1Projective;
    type Coord = Fp;
    const CURVE: &'static str = "g1";
    const MODULE: &'static str = "msm_g1";
    const FASTEST_ACCUMULATE: Accumulate = Accumulate::PlainV4;
    fn from_xyzz(xyzz: &[Fp]) -> G1Projective {
        match xyzz_to_jacobian(xyzz) {
            Some((x, y, z)) => G1Projective::from_raw_unchecked(x, y, z),
            None => G1Projective::identity(),
        }
    }
    fn xy(&self) -> [Fp; 2] {
        [self.x(), self.y()]
    }
}

impl MsmAffine for G2Affine {
    type Projective = G2Projective;
    type Coord = Fp2;
    const CURVE: &'static str = "g2";
    const MODULE: &'static str = "msm_g2";
    const FASTEST_ACCUMULATE: Accumulate = Accumulate::PlainV4;
    fn from_xyzz(xyzz: &[Fp2]) -> G2Projective {
        match xyzz_to_jacobian(xyzz) {
            Some((x, y, z)) => G2Projective::from_raw_unchecked(x, y, z),
            None => G2Projective::identity(),
        }
    }
    fn xy(&self) -> [Fp2; 2] {
        [self.x(), self.y()]
    }
}
