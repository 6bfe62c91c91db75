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
//!
//! The twin of the kernels' Fq2 product, built on these, is in `fq2`
//! ([`fq2_mul`]).

mod fq2;

pub use fq2::fq2_mul;

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
    reduce_once(&divide_last_row(&even, &odd), modulus)
}

/// The last row's value divided by 2^32: its low half is `odd` (limb 0
/// cleared), its high half `even`.
fn divide_last_row<const N: usize>(even: &[u32; N], odd: &[u32; N]) -> [u32; N] {
    assert_eq!(odd[0], 0, "the last row left limb 0 nonzero");
    let mut t = [0u32; N];
    let mut chain = Chain { carry: 0 };
    t[0] = chain.add(true, even[0], odd[1]);
    for k in 1..N - 1 {
        t[k] = chain.add(false, even[k], odd[k + 1]);
    }
    t[N - 1] = chain.add(false, even[N - 1], 0);
    chain.dropped("dividing the last row by 2^32");
    t
}

/// `a^2 / 2^(32N) mod modulus`, fully reduced, as the kernel's `sqr`
/// computes it: the 2N-limb square from the products `a[i] * a[j]` with
/// i < j (once, then doubled) and the N squares `a[i]^2`, then a Montgomery
/// reduction of its low half, to which the high half is added.
///
/// The cross products of row i (fixed i, j = i + 1 ..) fall on limb pairs
/// starting at i + j, alternately odd and even: those at odd positions go to
/// `odd` (limb k of weight 2^(32(k+1))), those at even ones to `even`, so each
/// row is two carry chains over disjoint limbs. Each row reaches one limb
/// higher than the one before, in one array or the other: that chain writes
/// its top pair fresh, and the other chain's carry out (same weight) is added
/// into the fresh top limb, which cannot overflow.
pub fn sqr<const N: usize>(a: &[u32; N], modulus: &[u32; N], m0: u32) -> [u32; N] {
    assert!(
        N >= 4 && N.is_multiple_of(2),
        "the limb count must be even, 4 or more"
    );
    assert!(
        modulus[N - 1] < 1 << 31,
        "the modulus must be below 2^(32N - 1)"
    );
    let w = square_wide(a);
    // a^2 < modulus^2 < modulus * 2^(32N), as redc_wide needs.
    redc_wide::<N>(&w, modulus, m0)
}

/// `w / 2^(32N) mod modulus`, fully reduced, for a 2N-limb `w` below
/// `modulus * 2^(32N)`, as the kernel's `redc_wide` computes it: a
/// Montgomery reduction of the low half (row 0 adds m * modulus to it; each
/// later row divides by 2^32 and adds the next m * modulus in one pass,
/// `mul_row` with the modulus as `a`), then the high half added. The sum is
/// below 2 * modulus (the reduced low half is at most the modulus, the high
/// half below it): one conditional subtraction.
pub fn redc_wide<const N: usize>(w: &[u32], modulus: &[u32; N], m0: u32) -> [u32; N] {
    assert_eq!(w.len(), 2 * N, "a wide value has 2N limbs");
    let mut bound = vec![0u32; N];
    bound.extend_from_slice(modulus);
    assert!(
        wide_lt(w, &bound),
        "redc_wide needs w below modulus * 2^(32N)"
    );
    assert!(N >= 2 && N.is_multiple_of(2), "the limb count must be even");
    let mut even: [u32; N] = std::array::from_fn(|k| w[k]);
    let mut odd = [0u32; N];
    redc_row(&mut even, &mut odd, modulus, m0);
    let mut i = 1;
    while i < N {
        redc_shift_row(&mut odd, &mut even, modulus, m0);
        if i + 1 < N {
            redc_shift_row(&mut even, &mut odd, modulus, m0);
        }
        i += 2;
    }
    let mut t = divide_last_row(&even, &odd);
    let mut chain = Chain { carry: 0 };
    t[0] = chain.add(true, t[0], w[N]);
    for k in 1..N {
        t[k] = chain.add(false, t[k], w[N + k]);
    }
    chain.dropped("adding the high half");
    reduce_once(&t, modulus)
}

/// `a * b` as 2N limbs, exact for any `a`, `b` below 2^(32N), as the
/// kernel's `mul_wide` computes it: row i's products `a[j] * b[i]` on limb
/// pairs starting at i + j, those at even limbs in `e` (weight 2^(32k)), those
/// at odd limbs in `o` (weight 2^(32(k+1))), two carry chains per row; each
/// chain's carry goes into the limb above it (checked not to overflow), the
/// last row's carry out of `e` is dropped (checked zero); then `e + 2^32 o`.
pub fn mul_wide<const N: usize>(a: &[u32; N], b: &[u32; N]) -> Vec<u32> {
    assert!(N >= 2 && N.is_multiple_of(2), "the limb count must be even");
    let mut e = vec![0u32; 2 * N];
    let mut o = vec![0u32; 2 * N];
    let chain = |arr: &mut Vec<u32>, base: usize, j0: usize, bi: u32, carry_out: bool| {
        let mut c = Chain { carry: 0 };
        for j in (j0..N).step_by(2) {
            let k = base + (j - j0);
            arr[k] = c.mad_lo(j == j0, a[j], bi, arr[k]);
            arr[k + 1] = c.mad_hi(a[j], bi, arr[k + 1]);
        }
        if carry_out {
            arr[base + N] = c.add(false, arr[base + N], 0);
            c.dropped("a row chain's carry into the limb above it");
        } else {
            c.dropped("the last row's carry out of the even-limb array");
        }
    };
    for (i, &bi) in b.iter().enumerate() {
        if i % 2 == 0 {
            chain(&mut e, i, 0, bi, true);
            chain(&mut o, i, 1, bi, true);
        } else {
            chain(&mut o, i - 1, 0, bi, true);
            chain(&mut e, i + 1, 1, bi, i + 1 + N < 2 * N);
        }
    }
    let mut w = vec![0u32; 2 * N];
    let mut c = Chain { carry: 0 };
    w[0] = e[0];
    w[1] = c.add(true, e[1], o[0]);
    for k in 2..2 * N {
        w[k] = c.add(false, e[k], o[k - 1]);
    }
    c.dropped("merging the two arrays");
    w
}

/// 2N-limb `w + x` (`sub`: `w - x`) modulo 2^(64N), as the kernel's
/// `add_wide` / `sub_wide`.
fn add_sub_wide(w: &[u32], x: &[u32], sub: bool) -> Vec<u32> {
    let mut carry = false;
    w.iter()
        .zip(x)
        .map(|(&a, &b)| {
            let (r, c) = if sub {
                let (r, c1) = a.overflowing_sub(b);
                let (r, c2) = r.overflowing_sub(u32::from(carry));
                (r, c1 || c2)
            } else {
                let (r, c1) = a.overflowing_add(b);
                let (r, c2) = r.overflowing_add(u32::from(carry));
                (r, c1 || c2)
            };
            carry = c;
            r
        })
        .collect()
}

/// x < y for little-endian limb vectors of one length.
fn wide_lt(x: &[u32], y: &[u32]) -> bool {
    for k in (0..x.len()).rev() {
        if x[k] != y[k] {
            return x[k] < y[k];
        }
    }
    false
}

/// The full square of `a` as 2N limbs (the `w` of the kernel's `sqr`), exact
/// for every `a` below 2^(32N). A vector: 2N is not a const expression here.
fn square_wide<const N: usize>(a: &[u32; N]) -> Vec<u32> {
    let lo = |x: u32, y: u32| x.wrapping_mul(y);
    let hi = |x: u32, y: u32| ((u64::from(x) * u64::from(y)) >> 32) as u32;
    // `even[k]` has weight 2^(32k), `odd[k]` 2^(32(k+1)). The kernel leaves
    // limbs unset until a row writes them; here they start as garbage, so a
    // read before the first write spoils the result.
    let mut even = vec![0xdead_beef_u32; 2 * N];
    let mut odd = vec![0xdead_beef_u32; 2 * N];
    // Row 0 writes everything fresh: a[0] * a[odd j] on odd[j-1 ..], a[0] *
    // a[even j > 0] on even[j ..].
    for j in (1..N).step_by(2) {
        odd[j - 1] = lo(a[0], a[j]);
        odd[j] = hi(a[0], a[j]);
    }
    for j in (2..N).step_by(2) {
        even[j] = lo(a[0], a[j]);
        even[j + 1] = hi(a[0], a[j]);
    }
    for i in 1..N - 1 {
        // Row i: j = i + 1, i + 3, .. land on odd[2i ..] (positions 2i + 1,
        // ..), j = i + 2, i + 4, .. on even[2i + 2 ..]. With N - 1 - i
        // products, odd when i is even: then the odd chain's top pair
        // (odd[i + N - 2], odd[i + N - 1]) is fresh and the even chain's
        // carry goes into odd[i + N - 1]; when i is odd the even chain's top
        // pair (even[i + N - 1], even[i + N]) is fresh and the odd chain's
        // carry goes into even[i + N].
        let odd_js: Vec<usize> = (i + 1..N).step_by(2).collect();
        let even_js: Vec<usize> = (i + 2..N).step_by(2).collect();
        let fresh_on_odd = i % 2 == 0;
        let mut chain = Chain { carry: 0 };
        let run =
            |chain: &mut Chain, arr: &mut Vec<u32>, js: &[usize], base: usize, fresh_top: bool| {
                for (t, &j) in js.iter().enumerate() {
                    let k = base + 2 * t;
                    let last = t + 1 == js.len();
                    if fresh_top && last {
                        arr[k] = chain.mad_lo(t == 0, a[i], a[j], 0);
                        arr[k + 1] = chain.mad_hi(a[i], a[j], 0);
                        chain.dropped("a fresh top pair (madc.hi)");
                    } else {
                        arr[k] = chain.mad_lo(t == 0, a[i], a[j], arr[k]);
                        arr[k + 1] = chain.mad_hi(a[i], a[j], arr[k + 1]);
                    }
                }
            };
        if fresh_on_odd {
            run(&mut chain, &mut odd, &odd_js, 2 * i, true);
            let mut c = Chain { carry: 0 };
            run(&mut c, &mut even, &even_js, 2 * i + 2, false);
            if !even_js.is_empty() {
                odd[i + N - 1] = c.add(false, odd[i + N - 1], 0);
                c.dropped("the even chain's carry into the fresh top limb");
            }
        } else {
            run(&mut chain, &mut even, &even_js, 2 * i + 2, true);
            let mut c = Chain { carry: 0 };
            run(&mut c, &mut odd, &odd_js, 2 * i, false);
            even[i + N] = c.add(false, even[i + N], 0);
            c.dropped("the odd chain's carry into the fresh top limb");
        }
    }
    // Merge: w = even + 2^32 odd over limbs 1 .. 2N - 2 (even[0], even[1]
    // are zero: no cross product lands below limb 1).
    let mut w = vec![0u32; 2 * N];
    let mut chain = Chain { carry: 0 };
    w[1] = odd[0];
    for k in 2..2 * N - 2 {
        w[k] = chain.add(k == 2, even[k], odd[k - 1]);
    }
    w[2 * N - 2] = chain.add(false, odd[2 * N - 3], 0);
    // The cross products sum to under a^2 / 2 < 2^(64N - 1): limb 2N - 1 is 0.
    chain.dropped("merging the cross products");
    // Double.
    for (k, limb) in w.iter_mut().enumerate().take(2 * N - 1).skip(1) {
        *limb = chain.add(k == 1, *limb, *limb);
    }
    w[2 * N - 1] = chain.add(false, 0, 0);
    // Add the squares a[k]^2 on limbs (2k, 2k + 1).
    for k in 0..N {
        w[2 * k] = chain.mad_lo(k == 0, a[k], a[k], w[2 * k]);
        w[2 * k + 1] = chain.mad_hi(a[k], a[k], w[2 * k + 1]);
    }
    chain.dropped("the square's top limb");
    w
}

/// A reduction row after the first: divides by 2^32 (as `mul_row`'s shift)
/// and adds m * modulus, m chosen to clear the new limb 0.
fn redc_shift_row<const N: usize>(
    lo: &mut [u32; N],
    hi: &mut [u32; N],
    modulus: &[u32; N],
    m0: u32,
) {
    let m = lo[0].wrapping_add(hi[1]).wrapping_mul(m0);
    mul_row(lo, hi, modulus, m);
    assert_eq!(lo[0], 0, "m did not clear limb 0");
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
    pub(super) const FQ_MOD: [u32; 12] = [
        0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf,
        0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea,
    ];
    pub(super) const FQ_M0: u32 = 0xfffcfffd;

    fn limbs<const N: usize>(bytes: &[u8]) -> [u32; N] {
        std::array::from_fn(|k| u32::from_le_bytes(bytes[4 * k..4 * k + 4].try_into().unwrap()))
    }
    pub(super) fn bytes<const N: usize>(limbs: &[u32; N]) -> Vec<u8> {
        limbs.iter().flat_map(|l| l.to_le_bytes()).collect()
    }

    /// Values below the modulus that stress the carries: 0, 1, small, p - 1,
    /// p - 2, all-ones limbs under the top one, top-heavy, powers of two.
    pub(super) fn edges<const N: usize>(
        modulus: &[u32; N],
        rng: &mut ChaCha20Rng,
    ) -> Vec<[u32; N]> {
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

    pub(super) fn random_below<const N: usize>(
        modulus: &[u32; N],
        rng: &mut ChaCha20Rng,
    ) -> [u32; N] {
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

    /// The twin's square of canonical limbs x is x^2 / R, and equals its
    /// own product x * x.
    fn check_sqr<const N: usize, F: PrimeFieldBytes>(
        x: &[u32; N],
        modulus: &[u32; N],
        m0: u32,
        r: F,
    ) {
        let got = sqr(x, modulus, m0);
        assert_eq!(got, mul(x, x, modulus, m0), "sqr vs mul of {x:x?}");
        let fx = F::from_le(&bytes(x)).unwrap();
        let fz = F::from_le(&bytes(&got));
        assert!(fz.is_some(), "{x:x?}^2 is not reduced: {got:x?}");
        assert_eq!(fz.unwrap() * r, fx.square(), "{x:x?}^2");
    }

    /// Little-endian canonical bytes into the field, for both test fields.
    trait PrimeFieldBytes: Field {
        fn from_le(bytes: &[u8]) -> Option<Self>;
    }
    impl PrimeFieldBytes for Scalar {
        fn from_le(bytes: &[u8]) -> Option<Self> {
            Scalar::from_bytes_le(bytes.try_into().unwrap()).into()
        }
    }
    impl PrimeFieldBytes for Fp {
        fn from_le(bytes: &[u8]) -> Option<Self> {
            Fp::from_bytes_le(bytes.try_into().unwrap()).into()
        }
    }

    #[test]
    fn squares_match_blstrs_and_the_product_on_edges_and_random_values() {
        let mut rng = ChaCha20Rng::seed_from_u64(23);
        let r = Scalar::from(2u64).pow_vartime([256]);
        for x in edges(&FR_MOD, &mut rng) {
            check_sqr(&x, &FR_MOD, FR_M0, r);
        }
        for _ in 0..20_000 {
            check_sqr(&random_below(&FR_MOD, &mut rng), &FR_MOD, FR_M0, r);
        }
        let r = Fp::from(2u64).pow_vartime([384]);
        for x in edges(&FQ_MOD, &mut rng) {
            check_sqr(&x, &FQ_MOD, FQ_M0, r);
        }
        for _ in 0..20_000 {
            check_sqr(&random_below(&FQ_MOD, &mut rng), &FQ_MOD, FQ_M0, r);
        }
    }

    #[test]
    fn the_wide_square_is_exact_for_all_ones_limbs() {
        // (2^(32N) - 1)^2 = 2^(64N) - 2^(32N + 1) + 1: every cross-product
        // chain and the doubling carry as far as they can.
        for n in [4usize, 8, 12] {
            let w = match n {
                4 => square_wide(&[u32::MAX; 4]),
                8 => square_wide(&[u32::MAX; 8]),
                _ => square_wide(&[u32::MAX; 12]),
            };
            let mut want = vec![0u32; 2 * n];
            want[0] = 1;
            want[n] = 0xffff_fffe;
            for limb in &mut want[n + 1..] {
                *limb = u32::MAX;
            }
            assert_eq!(w, want, "N = {n}");
        }
    }

    /// The schoolbook product of two limb vectors on u64 columns: the
    /// reference the twin's `mul_wide` is checked against.
    fn schoolbook(a: &[u32], b: &[u32]) -> Vec<u32> {
        let mut w = vec![0u32; a.len() + b.len()];
        for (i, &bi) in b.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &aj) in a.iter().enumerate() {
                let t = u64::from(aj) * u64::from(bi) + u64::from(w[i + j]) + carry;
                w[i + j] = t as u32;
                carry = t >> 32;
            }
            w[i + a.len()] = carry as u32;
        }
        w
    }

    fn random_full<const N: usize>(rng: &mut ChaCha20Rng) -> [u32; N] {
        std::array::from_fn(|_| rng.r#gen())
    }

    /// Values of every size up to 2^(32N) - 1: the edges below the modulus
    /// and all-ones / top-bit patterns above it (mul_wide takes any N limbs).
    fn wide_edges<const N: usize>(modulus: &[u32; N], rng: &mut ChaCha20Rng) -> Vec<[u32; N]> {
        let mut v = edges(modulus, rng);
        v.push([u32::MAX; N]);
        let mut top = [0; N];
        top[N - 1] = 1 << 31;
        v.push(top);
        let mut twice: [u32; N] = *modulus;
        twice[N - 1] = 2 * modulus[N - 1] - 1;
        v.push(twice);
        v
    }

    #[test]
    fn wide_products_are_exact_on_edges_and_random_values() {
        fn run<const N: usize>(modulus: &[u32; N], seed: u64) {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let edges = wide_edges(modulus, &mut rng);
            for x in &edges {
                for y in &edges {
                    assert_eq!(mul_wide(x, y), schoolbook(x, y), "{x:x?} * {y:x?}");
                }
            }
            for _ in 0..20_000 {
                let (x, y) = (random_full::<N>(&mut rng), random_full::<N>(&mut rng));
                assert_eq!(mul_wide(&x, &y), schoolbook(&x, &y), "{x:x?} * {y:x?}");
            }
        }
        run(&FR_MOD, 24);
        run(&FQ_MOD, 25);
        // (2^(32N) - 1)^2 for the other even sizes: every carry as far as it goes.
        assert_eq!(
            mul_wide(&[u32::MAX; 2], &[u32::MAX; 2]),
            schoolbook(&[u32::MAX; 2], &[u32::MAX; 2])
        );
        assert_eq!(
            mul_wide(&[u32::MAX; 4], &[u32::MAX; 4]),
            schoolbook(&[u32::MAX; 4], &[u32::MAX; 4])
        );
    }

    /// The value of little-endian limbs in Fp (any length).
    fn fold_fp(w: &[u32]) -> Fp {
        let base = Fp::from(1u64 << 32);
        w.iter()
            .rev()
            .fold(Fp::ZERO, |acc, &l| acc * base + Fp::from(u64::from(l)))
    }

    #[test]
    fn wide_reduction_matches_blstrs_up_to_its_bound() {
        let mut rng = ChaCha20Rng::seed_from_u64(26);
        let r_inv = Fp::from(2u64).pow_vartime([384]).invert().unwrap();
        let sq = mul_wide(&FQ_MOD, &FQ_MOD);
        // p * 2^384 - 1: the largest input redc_wide takes.
        let mut bound = vec![0u32; 12];
        bound.extend_from_slice(&FQ_MOD);
        let top = add_sub_wide(
            &bound,
            &{
                let mut one = vec![0u32; 24];
                one[0] = 1;
                one
            },
            true,
        );
        let twice_sq_minus_1 = add_sub_wide(
            &add_sub_wide(&sq, &sq, false),
            &{
                let mut one = vec![0u32; 24];
                one[0] = 1;
                one
            },
            true,
        );
        let mut cases = vec![vec![0u32; 24], sq.clone(), twice_sq_minus_1, top];
        for x in edges(&FQ_MOD, &mut rng) {
            for y in edges(&FQ_MOD, &mut rng) {
                cases.push(mul_wide(&x, &y));
            }
        }
        for _ in 0..5_000 {
            let mut w: Vec<u32> = (0..24).map(|_| rng.r#gen()).collect();
            w[23] = rng.gen_range(0..FQ_MOD[11]);
            cases.push(w);
        }
        for w in &cases {
            let got = redc_wide::<12>(w, &FQ_MOD, FQ_M0);
            let fz = Fp::from_bytes_le(&bytes(&got).try_into().unwrap());
            assert!(
                bool::from(fz.is_some()),
                "redc of {w:x?} is not reduced: {got:x?}"
            );
            assert_eq!(fz.unwrap(), fold_fp(w) * r_inv, "redc of {w:x?}");
        }
        // On products of reduced values it is the Montgomery product.
        for _ in 0..2_000 {
            let (x, y) = (
                random_below(&FQ_MOD, &mut rng),
                random_below(&FQ_MOD, &mut rng),
            );
            assert_eq!(
                redc_wide::<12>(&mul_wide(&x, &y), &FQ_MOD, FQ_M0),
                mul(&x, &y, &FQ_MOD, FQ_M0)
            );
        }
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
