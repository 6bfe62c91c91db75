//! CPU twin of the kernels' Montgomery multiplication (`kernels/ff/mont.cuh`,
//! `mont_t::operator*`), step for step on 32-bit limbs with the carry flag
//! made explicit.
//!
//! The kernel keeps the running sum of each row in two halves, `lo` (limb k
//! of weight 2^(32k)) and `hi` (limb k of weight 2^(32(k+1))), so that the
//! products of the even-indexed limbs of `a` fall on `lo`'s limbs without
//! overlap and those of the odd-indexed limbs on `hi`'s: each row is four
//! carry chains of N multiply-adds with no fix-ups in between, and the
//! division by 2^32 swaps the halves' roles. Some carries are dropped there
//! on the strength of a bound (the sum stays below 2 * MOD * 2^32); this twin
//! asserts each of them is zero, so the tests check the bound as well as the
//! result.
//!
//! Limbs are little-endian. Both operands must be below `modulus`, and
//! `modulus` below 2^(32N - 1) with `m0 = -modulus^-1 mod 2^32`.

/// The carry flag of a PTX carry chain (`add.cc` / `addc` and friends).
struct Chain {
    carry: u32,
}

impl Chain {
    /// `mad.lo.cc` (`start`) or `madc.lo.cc`: the low half of x * y, plus c.
    fn mad_lo(&mut self, start: bool, x: u32, y: u32, c: u32) -> u32 {
        let carry_in = if start { 0 } else { u64::from(self.carry) };
        let r = u64::from(x.wrapping_mul(y)) + u64::from(c) + carry_in;
        self.carry = (r >> 32) as u32;
        r as u32
    }

    /// `madc.hi.cc`: the high half of x * y, plus c and the carry.
    fn mad_hi(&mut self, x: u32, y: u32, c: u32) -> u32 {
        let r = ((u64::from(x) * u64::from(y)) >> 32) + u64::from(c) + u64::from(self.carry);
        self.carry = (r >> 32) as u32;
        r as u32
    }

    /// `add.cc` (`start`) or `addc.cc`.
    fn add(&mut self, start: bool, x: u32, y: u32) -> u32 {
        let carry_in = if start { 0 } else { u64::from(self.carry) };
        let r = u64::from(x) + u64::from(y) + carry_in;
        self.carry = (r >> 32) as u32;
        r as u32
    }

    /// A carry the kernel drops (an instruction without `.cc`, or a chain
    /// whose flag the next chain overwrites): the bound says it is zero.
    fn dropped(&self, what: &str) {
        assert_eq!(self.carry, 0, "the kernel drops a nonzero carry: {what}");
    }
}

/// `a * b / 2^(32N) mod modulus`, fully reduced, as the kernel computes it.
pub fn mul<const N: usize>(a: &[u32; N], b: &[u32; N], modulus: &[u32; N], m0: u32) -> [u32; N] {
    assert!(N >= 2 && N.is_multiple_of(2), "the limb count must be even");
    assert!(
        modulus[N - 1] < 1 << 31,
        "the modulus must be below 2^(32N - 1)"
    );
    let mut even = [0u32; N];
    let mut odd = [0u32; N];
    // Row 0: plain products.
    for k in (0..N).step_by(2) {
        even[k] = a[k].wrapping_mul(b[0]);
        even[k + 1] = ((u64::from(a[k]) * u64::from(b[0])) >> 32) as u32;
        odd[k] = a[k + 1].wrapping_mul(b[0]);
        odd[k + 1] = ((u64::from(a[k + 1]) * u64::from(b[0])) >> 32) as u32;
    }
    redc_row(&mut even, &mut odd, modulus, m0);
    let mut i = 1;
    while i < N {
        mul_row(&mut odd, &mut even, a, b[i]);
        redc_row(&mut odd, &mut even, modulus, m0);
        if i + 1 < N {
            mul_row(&mut even, &mut odd, a, b[i + 1]);
            redc_row(&mut even, &mut odd, modulus, m0);
        }
        i += 2;
    }
    // The last row's low half is `odd` (limb 0 cleared), its high half `even`.
    assert_eq!(odd[0], 0, "the last row left limb 0 nonzero");
    let mut t = [0u32; N];
    let mut chain = Chain { carry: 0 };
    t[0] = chain.add(true, even[0], odd[1]);
    for k in 1..N - 1 {
        t[k] = chain.add(false, even[k], odd[k + 1]);
    }
    t[N - 1] = chain.add(false, even[N - 1], 0);
    chain.dropped("dividing the last row by 2^32");
    reduce_once(&t, modulus)
}

/// A row after the first: `lo` is the previous row's `hi`; `hi` becomes the
/// previous `lo` shifted down two limbs, its limb 1 added into `lo[0]`.
fn mul_row<const N: usize>(lo: &mut [u32; N], hi: &mut [u32; N], a: &[u32; N], bi: u32) {
    let mut chain = Chain { carry: 0 };
    lo[0] = chain.add(true, lo[0], hi[1]);
    for k in (0..N - 2).step_by(2) {
        hi[k] = chain.mad_lo(false, a[k + 1], bi, hi[k + 2]);
        hi[k + 1] = chain.mad_hi(a[k + 1], bi, hi[k + 3]);
    }
    hi[N - 2] = chain.mad_lo(false, a[N - 1], bi, 0);
    hi[N - 1] = chain.mad_hi(a[N - 1], bi, 0);
    chain.dropped("the shifted high half's top limb (madc.hi)");
    mad_pairs(&mut chain, lo, a, bi);
    hi[N - 1] = chain.add(false, hi[N - 1], 0);
    chain.dropped("the low half's carry into the high half's top limb");
}

/// Adds m * modulus, m chosen to clear `lo[0]`.
fn redc_row<const N: usize>(lo: &mut [u32; N], hi: &mut [u32; N], modulus: &[u32; N], m0: u32) {
    let m = lo[0].wrapping_mul(m0);
    let mut chain = Chain { carry: 0 };
    for k in (0..N).step_by(2) {
        hi[k] = chain.mad_lo(k == 0, m, modulus[k + 1], hi[k]);
        hi[k + 1] = chain.mad_hi(m, modulus[k + 1], hi[k + 1]);
    }
    chain.dropped("the high half's reduction chain");
    mad_pairs(&mut chain, lo, modulus, m);
    assert_eq!(lo[0], 0, "m did not clear limb 0");
    hi[N - 1] = chain.add(false, hi[N - 1], 0);
    chain.dropped("the low half's reduction carry into the high half's top limb");
}

/// lo += (x[0], x[2], ..., x[N-2]) * y on limb pairs (0, 1), (2, 3), ...; the
/// carry out stays in the chain.
fn mad_pairs<const N: usize>(chain: &mut Chain, lo: &mut [u32; N], x: &[u32; N], y: u32) {
    for k in (0..N).step_by(2) {
        lo[k] = chain.mad_lo(k == 0, x[k], y, lo[k]);
        lo[k + 1] = chain.mad_hi(x[k], y, lo[k + 1]);
    }
}

/// t - modulus when t >= modulus, else t (t < 2 modulus).
fn reduce_once<const N: usize>(t: &[u32; N], modulus: &[u32; N]) -> [u32; N] {
    let mut d = [0u32; N];
    let mut borrow = false;
    for k in 0..N {
        let (x, b1) = t[k].overflowing_sub(modulus[k]);
        let (x, b2) = x.overflowing_sub(u32::from(borrow));
        d[k] = x;
        borrow = b1 || b2;
    }
    if borrow { *t } else { d }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{Fp, Scalar};
    use ff::Field;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// BLS12-381's Fr and Fq moduli as in kernels/ff/bls12_381.cuh.
    const FR_MOD: [u32; 8] = [
        0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, 0x09a1d805, 0x3339d808, 0x299d7d48,
        0x73eda753,
    ];
    const FR_M0: u32 = 0xffffffff;
    const FQ_MOD: [u32; 12] = [
        0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf,
        0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea,
    ];
    const FQ_M0: u32 = 0xfffcfffd;

    fn limbs<const N: usize>(bytes: &[u8]) -> [u32; N] {
        std::array::from_fn(|k| u32::from_le_bytes(bytes[4 * k..4 * k + 4].try_into().unwrap()))
    }
    fn bytes<const N: usize>(limbs: &[u32; N]) -> Vec<u8> {
        limbs.iter().flat_map(|l| l.to_le_bytes()).collect()
    }

    /// Values below the modulus that stress the carries: 0, 1, small, p - 1,
    /// p - 2, all-ones limbs under the top one, top-heavy, powers of two.
    fn edges<const N: usize>(modulus: &[u32; N], rng: &mut ChaCha20Rng) -> Vec<[u32; N]> {
        let mut v = vec![[0; N]];
        let mut one = [0; N];
        one[0] = 1;
        v.push(one);
        let mut small = [0; N];
        small[0] = u32::MAX;
        v.push(small);
        for d in [1u32, 2, 3, 0x1_0000] {
            let mut x = *modulus;
            x[0] = x[0].wrapping_sub(d);
            if modulus[0] < d {
                // borrow once (the moduli's second limbs are nonzero)
                x[1] -= 1;
            }
            v.push(x);
        }
        let mut ones = [u32::MAX; N];
        ones[N - 1] = modulus[N - 1] - 1;
        v.push(ones);
        for bit in [0, 31, 32, 63, 32 * N - 34, 32 * N - 35] {
            let mut x = [0; N];
            x[bit / 32] = 1 << (bit % 32);
            v.push(x);
        }
        for _ in 0..8 {
            let mut x: [u32; N] = std::array::from_fn(|_| rng.r#gen());
            x[N - 1] = modulus[N - 1] - 1 - rng.gen_range(0..16);
            v.push(x);
        }
        v
    }

    fn random_below<const N: usize>(modulus: &[u32; N], rng: &mut ChaCha20Rng) -> [u32; N] {
        let mut x: [u32; N] = std::array::from_fn(|_| rng.r#gen());
        x[N - 1] = rng.gen_range(0..modulus[N - 1]);
        x
    }

    /// The twin's product of canonical limbs x, y is x * y / R: times R it
    /// must equal blstrs's x * y.
    fn check_fr(x: &[u32; 8], y: &[u32; 8], r: Scalar) {
        let got = mul(x, y, &FR_MOD, FR_M0);
        let fx = Scalar::from_bytes_le(&bytes(x).try_into().unwrap()).unwrap();
        let fy = Scalar::from_bytes_le(&bytes(y).try_into().unwrap()).unwrap();
        let fz = Scalar::from_bytes_le(&bytes(&got).try_into().unwrap());
        assert!(
            bool::from(fz.is_some()),
            "{x:x?} * {y:x?} is not reduced: {got:x?}"
        );
        assert_eq!(fz.unwrap() * r, fx * fy, "{x:x?} * {y:x?}");
    }

    fn check_fq(x: &[u32; 12], y: &[u32; 12], r: Fp) {
        let got = mul(x, y, &FQ_MOD, FQ_M0);
        let fx = Fp::from_bytes_le(&bytes(x).try_into().unwrap()).unwrap();
        let fy = Fp::from_bytes_le(&bytes(y).try_into().unwrap()).unwrap();
        let fz = Fp::from_bytes_le(&bytes(&got).try_into().unwrap());
        assert!(
            bool::from(fz.is_some()),
            "{x:x?} * {y:x?} is not reduced: {got:x?}"
        );
        assert_eq!(fz.unwrap() * r, fx * fy, "{x:x?} * {y:x?}");
    }

    #[test]
    fn fr_products_match_blstrs_on_edges_and_random_values() {
        let mut rng = ChaCha20Rng::seed_from_u64(21);
        let r = Scalar::from(2u64).pow_vartime([256]);
        let edges = edges(&FR_MOD, &mut rng);
        for x in &edges {
            for y in &edges {
                check_fr(x, y, r);
            }
        }
        for _ in 0..20_000 {
            check_fr(
                &random_below(&FR_MOD, &mut rng),
                &random_below(&FR_MOD, &mut rng),
                r,
            );
        }
        // The Montgomery form's one (R mod p) is the identity.
        let one_mont: [u32; 8] = limbs(&r.to_bytes_le());
        let x = random_below(&FR_MOD, &mut rng);
        assert_eq!(mul(&x, &one_mont, &FR_MOD, FR_M0), x);
    }

    #[test]
    fn fq_products_match_blstrs_on_edges_and_random_values() {
        let mut rng = ChaCha20Rng::seed_from_u64(22);
        let r = Fp::from(2u64).pow_vartime([384]);
        let edges = edges(&FQ_MOD, &mut rng);
        for x in &edges {
            for y in &edges {
                check_fq(x, y, r);
            }
        }
        for _ in 0..20_000 {
            check_fq(
                &random_below(&FQ_MOD, &mut rng),
                &random_below(&FQ_MOD, &mut rng),
                r,
            );
        }
        let one_mont: [u32; 12] = limbs(&r.to_bytes_le());
        let x = random_below(&FQ_MOD, &mut rng);
        assert_eq!(mul(&x, &one_mont, &FQ_MOD, FQ_M0), x);
    }

    #[test]
    #[should_panic(expected = "the kernel drops a nonzero carry")]
    fn a_carry_the_kernel_would_drop_is_caught() {
        // Operands above the modulus break the bound the kernel relies on;
        // the twin must notice rather than return a wrong product.
        let mut modulus = FR_MOD;
        modulus[7] = 0x7fff_ffff;
        mul(&[u32::MAX; 8], &[u32::MAX; 8], &modulus, FR_M0);
    }
}
