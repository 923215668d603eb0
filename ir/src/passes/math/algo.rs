//! The math algorithms, written once over [`Emit`]: exp exp2 log log2 sin cos tan pow atan2
//! rsqrt in f64 (Cody–Waite and Payne–Hanek reductions, Taylor polynomials, double-double
//! arithmetic with fma); f32 and f16 go through f64 and one final rounding.
//!
//! Error bounds and the reasoning behind them are in docs/semantics.md ("Math functions").

use super::consts::*;
use super::emit::{dd_add, dd_add_c, dd_div, dd_mul, dd_round, fast_two_sum, two_prod, two_sum};
use super::emit::{Dd, Emit};
use crate::opcode::Opcode;
use crate::types::ScalarType;

const F64: ScalarType = ScalarType::F64;
const I64: ScalarType = ScalarType::I64;
const U64: ScalarType = ScalarType::U64;

/// 1/n!, correctly rounded (n! is exact in f64 for n <= 18).
const fn inv_fact(n: u32) -> f64 {
    let mut f = 1.0f64;
    let mut i = 2;
    while i <= n {
        f *= i as f64;
        i += 1;
    }
    1.0 / f
}

/// 2^k for k in [-1022, 1023].
const fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Taylor coefficients `c[i] = sign(i) / d(i)!` or `/ d(i)` for the polynomials below.
const fn coeffs<const N: usize>(
    first: u32,
    step: u32,
    factorial: bool,
    alternate: bool,
) -> [f64; N] {
    let mut c = [0.0; N];
    let mut i = 0;
    while i < N {
        let d = first + step * i as u32;
        let v = if factorial {
            inv_fact(d)
        } else {
            1.0 / d as f64
        };
        c[i] = if alternate && i % 2 == 0 { -v } else { v };
        i += 1;
    }
    c
}

/// exp: 1/n! for n = 2..=13.
const EXP_C: [f64; 12] = coeffs(2, 1, true, false);
/// log: 1/(2n+1) for n = 3..=12.
const LOG_C: [f64; 10] = coeffs(7, 2, false, false);
/// sin: -1/3!, 1/5!, ..., 1/17!.
const SIN_C: [f64; 8] = coeffs(3, 2, true, true);
/// cos: 1/4!, -1/6!, ..., 1/18! (alternating from +).
const COS_C: [f64; 8] = {
    let mut c: [f64; 8] = coeffs(4, 2, true, true);
    let mut i = 0;
    while i < 8 {
        c[i] = -c[i];
        i += 1;
    }
    c
};
/// atan: -1/3, 1/5, ..., 1/13.
const ATAN_C: [f64; 6] = coeffs(3, 2, false, true);

/// Expands math function `op` (one of [`super::MATH_FUNCTIONS`]) on lanes of float type
/// `e.ty(a)`: f64 directly, f32 and f16 through f64 with one final rounding. `b` is the
/// second operand of `pow` (the exponent) and `atan2` (x in `atan2(y, x)`).
pub fn emit_math<E: Emit>(e: &mut E, op: Opcode, a: E::V, b: Option<E::V>) -> E::V {
    let s = e.ty(a);
    let wide = |e: &mut E, v: E::V| if s == F64 { v } else { e.cast(v, F64) };
    let x = wide(e, a);
    let y = match b {
        Some(b) => wide(e, b),
        None => x,
    };
    // f32 and f16 results need far fewer than 53 good bits: plain f64 suffices there.
    let narrow = s != F64;
    let r = match op {
        Opcode::Exp if narrow => exp_narrow(e, x),
        Opcode::Exp => exp(e, x),
        Opcode::Exp2 if narrow => exp2_narrow(e, x),
        Opcode::Exp2 => exp2(e, x),
        Opcode::Log => log(e, x, narrow),
        Opcode::Log2 if narrow => log2_narrow(e, x),
        Opcode::Log2 => log2(e, x),
        Opcode::Sin => sin(e, x),
        Opcode::Cos => cos(e, x),
        Opcode::Tan => tan(e, x),
        Opcode::Pow => pow(e, x, y),
        Opcode::Atan2 => atan2(e, x, y),
        _ => rsqrt(e, x),
    };
    if s == F64 {
        r
    } else {
        e.cast(r, s)
    }
}

/// The low `N` bits of the integer `v` (i64 or u64), least significant first, as bools.
fn index_bits<E: Emit, const N: usize>(e: &mut E, v: E::V) -> [E::V; N] {
    let s = e.ty(v);
    let one = e.konst(s, 1);
    let zero = e.konst(s, 0);
    std::array::from_fn(|i| {
        let sh = e.konst(s, i as u64);
        let t = e.shr(v, sh);
        let t = e.and(t, one);
        e.ne(t, zero)
    })
}

// ---------------------------------------------------------------- exp, exp2

/// `2^k * exp(rh + rl)` for an integer-valued f64 `k` in [-2044, 2044] and |rh| <= ~0.35,
/// |rl| small: `exp(r) = 1 + r + r^2 Q(r)` with the Taylor polynomial to r^13/13!
/// (truncation < 2^-57), summed as `(1 + rh) + (lo + ...)` so that one rounding dominates;
/// then two exact-or-final scalings by powers of two, so that subnormal results are rounded
/// once.
fn exp_core<E: Emit>(e: &mut E, k: E::V, rh: E::V, rl: E::V) -> E::V {
    let q = e.horner(rh, &EXP_C);
    let z = e.mul(rh, rh);
    let t = e.fma(rl, rh, rl);
    let t = e.fma(z, q, t);
    let one = e.f(1.0);
    let (ah, al) = fast_two_sum(e, one, rh);
    let lo = e.add(al, t);
    let m = e.add(ah, lo);
    let ki = e.cast(k, I64);
    let c1 = e.i(1);
    let k1 = e.shr(ki, c1);
    let k2 = e.sub(ki, k1);
    let s1 = e.pow2i(k1);
    let s2 = e.pow2i(k2);
    let m = e.mul(m, s1);
    e.mul(m, s2)
}

/// e^x: k = round(x / ln 2), r = x - k ln 2 as a double-double (k ln2_hi exact by fma),
/// then [`exp_core`]. Arguments are clamped to [-746, 710], beyond which the result is
/// 0 or inf anyway; NaN propagates.
fn exp<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let xc = clamp(e, x, -746.0, 710.0);
    let t = e.mulc(xc, INV_LN2[0]);
    let k = e.round(t);
    let l0 = e.f(LN2[0]);
    let l1 = e.f(LN2[1]);
    let (ph, pl) = two_prod(e, k, l0);
    let t1 = e.sub(xc, ph); // exact
    let c = e.fma(k, l1, pl);
    let nc = e.neg(c);
    let (rh, rl) = two_sum(e, t1, nc);
    exp_core(e, k, rh, rl)
}

/// 2^x: k = round(x), f = x - k (exact), r = f ln 2 as a double-double, then
/// [`exp_core`]. Arguments are clamped to [-1100, 1100].
fn exp2<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let xc = clamp(e, x, -1100.0, 1100.0);
    let k = e.round(xc);
    let f = e.sub(xc, k);
    let l0 = e.f(LN2[0]);
    let (rh, t) = two_prod(e, f, l0);
    let l1 = e.f(LN2[1]);
    let rl = e.fma(f, l1, t);
    exp_core(e, k, rh, rl)
}

/// exp: 1/n! for n = 2..=12, for f32 and f16 results.
const EXP_NARROW_C: [f64; 11] = coeffs(2, 1, true, false);

/// 1.5 * 2^52: for |t| < 2^51, `(t + ROUND_MAGIC) - ROUND_MAGIC` is t rounded to an integer
/// (to nearest, ties to even), and the low bits of `t + ROUND_MAGIC` are that integer.
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;

/// `max(min(x, hi), lo)` by compares and selects, which keep NaN: the same values as the
/// IR's NaN-propagating `min`/`max`, cheaper on targets whose own min and max drop NaN.
fn clamp<E: Emit>(e: &mut E, x: E::V, lo: f64, hi: f64) -> E::V {
    let l = e.f(lo);
    let below = e.lt(x, l);
    let x = e.select(below, l, x);
    let h = e.f(hi);
    let above = e.gt(x, h);
    e.select(above, h, x)
}

/// `2^k exp(r)` in plain f64 for f32 and f16 results, given `sk = k + ROUND_MAGIC` (|k| <=
/// 160): `exp(r) = 1 + r + r^2 Q(r)` with the Taylor polynomial to r^12/12! (|r| <= ~0.35,
/// truncation < 2^-52), times 2^k built from the low bits of `sk` (a normal f64, so the
/// product is the only rounding before the final one to the narrow type).
fn exp_narrow_core<E: Emit>(e: &mut E, sk: E::V, r: E::V) -> E::V {
    let q = e.horner(r, &EXP_NARROW_C);
    let z = e.mul(r, r);
    let t = e.fma(z, q, r);
    let m = e.addc(t, 1.0);
    // (bits(sk) << 52) = k << 52 (mod 2^64): ROUND_MAGIC's low 12 bits are zero.
    let b = e.bitcast(sk, I64);
    let c52 = e.i(52);
    let b = e.shl(b, c52);
    let one = e.i(0x3ff0_0000_0000_0000);
    let b = e.add(b, one);
    let s = e.bitcast(b, F64);
    e.mul(m, s)
}

/// e^x for f32 and f16 results: arguments clamped to [-110, 100] (beyond which the f32
/// result is 0 or inf), k = x / ln 2 rounded to an integer (by [`ROUND_MAGIC`]),
/// r = x - k ln 2 by two fmas with ln 2 as a double-double (relative error below 2^-51),
/// then [`exp_narrow_core`]. Relative error below 2^-50 before the final rounding.
fn exp_narrow<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let xc = clamp(e, x, -110.0, 100.0);
    let il = e.f(INV_LN2[0]);
    let magic = e.f(ROUND_MAGIC);
    let sk = e.fma(xc, il, magic);
    let k = e.addc(sk, -ROUND_MAGIC);
    let nk = e.neg(k);
    let l0 = e.f(LN2[0]);
    let l1 = e.f(LN2[1]);
    let r = e.fma(nk, l0, xc);
    let r = e.fma(nk, l1, r);
    exp_narrow_core(e, sk, r)
}

/// 2^x for f32 and f16 results: arguments clamped to [-160, 160], k = x rounded to an
/// integer, r = (x - k) ln 2 (x - k is exact), then [`exp_narrow_core`]; exact at integers.
fn exp2_narrow<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let xc = clamp(e, x, -160.0, 160.0);
    let sk = e.addc(xc, ROUND_MAGIC);
    let k = e.addc(sk, -ROUND_MAGIC);
    let f = e.sub(xc, k);
    let lo = e.mulc(f, LN2[1]);
    let l0 = e.f(LN2[0]);
    let r = e.fma(f, l0, lo);
    exp_narrow_core(e, sk, r)
}

// ---------------------------------------------------------------- log, log2

/// For finite x > 0 (others give unspecified values): `(k, log m)` with x = 2^k m,
/// m in [sqrt(1/2), sqrt(2)), k an integer-valued f64, and log m as a double-double with
/// relative error below 2^-68: log m = 2 atanh(s), s = (m-1)/(m+1) as a double-double,
/// |s| <= 0.1716, `2 atanh(s) = 2s (1 + z/3 + z^2/5 + ... + z^12/25)`, z = s^2, with the
/// first three coefficients in double-double arithmetic. Subnormal x are scaled by 2^54.
fn log_core<E: Emit>(e: &mut E, x: E::V) -> (E::V, Dd<E::V>) {
    let (kf, m) = log_reduce(e, x, true);
    let one = e.f(1.0);
    let f = e.sub(m, one); // exact
    let (uh, ul) = two_sum(e, m, one);
    let sh = e.div(f, uh);
    let nsh = e.neg(sh);
    let r = e.fma(nsh, uh, f); // exact remainder
    let r = e.fma(nsh, ul, r);
    let sl = e.div(r, uh);
    let s = (sh, sl);
    let (zh, zl) = two_prod(e, sh, sh);
    let sh2 = e.add(sh, sh);
    let zl = e.fma(sh2, sl, zl);
    let z = (zh, zl);
    let rr = e.horner(zh, &LOG_C);
    let zr = e.mul(zh, rr);
    let c5 = e.f(FIFTH[0]);
    let (bh, bl) = fast_two_sum(e, c5, zr);
    let bl = e.addc(bl, FIFTH[1]);
    let zb = dd_mul(e, z, (bh, bl));
    let c = dd_add_c(e, zb, THIRD);
    let w = dd_mul(e, z, c);
    let sw = dd_mul(e, s, w);
    let (lh, ll) = dd_add(e, s, sw);
    let lh = e.add(lh, lh);
    let ll = e.add(ll, ll);
    (kf, (lh, ll))
}

/// x = 2^k m for finite x > 0: `(k as f64, m)` with m in [sqrt(1/2), sqrt(2)). With
/// `subnormals`, subnormal x are scaled by 2^54 first (f32 and f16 arguments are never
/// subnormal f64s, so their expansions skip it).
fn log_reduce<E: Emit>(e: &mut E, x: E::V, subnormals: bool) -> (E::V, E::V) {
    if !subnormals {
        let (k, m) = log_split(e, x);
        let kf = e.cast(k, F64);
        return (kf, m);
    }
    let min_normal = e.f(f64::MIN_POSITIVE);
    let tiny = e.lt(x, min_normal);
    let xs = e.mulc(x, pow2(54));
    let xs = e.select(tiny, xs, x);
    let kadj = {
        let a = e.i(-54);
        let b = e.i(0);
        e.select(tiny, a, b)
    };
    let (k, m) = log_split(e, xs);
    let k = e.add(k, kadj);
    let kf = e.cast(k, F64);
    (kf, m)
}

/// The bits of a positive normal f64 x split as x = 2^k m, m in [sqrt(1/2), sqrt(2)):
/// `(k as i64, m)`.
fn log_split<E: Emit>(e: &mut E, x: E::V) -> (E::V, E::V) {
    let ix = e.bitcast(x, I64);
    let off = e.i(0x3fe6_a09e_667f_3bcd); // bits of sqrt(1/2)
    let t = e.sub(ix, off);
    let c52 = e.i(52);
    let k = e.shr(t, c52);
    let kk = e.shl(k, c52);
    let iz = e.sub(ix, kk);
    let m = e.bitcast(iz, F64);
    (k, m)
}

/// fdlibm's (and musl's) minimax coefficients of `R(z)` in `log(1+f) = f - f^2/2 +
/// s (f^2/2 + R(z))`, s = f/(2+f), z = s^2 (|R(z) - (2/3 z + 2/5 z^2 + ...)| < 2^-58.45).
const LG: [f64; 7] = [
    f64::from_bits(0x3fe5_5555_5555_5593),
    f64::from_bits(0x3fd9_9999_9997_fa04),
    f64::from_bits(0x3fd2_4924_9422_9359),
    f64::from_bits(0x3fcc_71c5_1d8e_78af),
    f64::from_bits(0x3fc7_4664_96cb_03de),
    f64::from_bits(0x3fc3_9a09_d078_c69f),
    f64::from_bits(0x3fc2_f112_df3e_5244),
];

/// The parts of log m for m in [sqrt(1/2), sqrt(2)) as in fdlibm's `__ieee754_log`:
/// `[f, hfsq, t]` with f = m - 1 (exact), hfsq = f^2/2 and t = s (hfsq + R), so that
/// `log m = (t - hfsq) + f`; plain f64 with one division.
fn log_fdlibm<E: Emit>(e: &mut E, m: E::V) -> [E::V; 3] {
    let f = e.addc(m, -1.0); // exact
    let hfsq = {
        let ff = e.mul(f, f);
        e.mulc(ff, 0.5)
    };
    let two_f = e.addc(f, 2.0);
    let s = e.div(f, two_f);
    let z = e.mul(s, s);
    let w = e.mul(z, z);
    let odd = [LG[0], LG[2], LG[4], LG[6]];
    let even = [LG[1], LG[3], LG[5]];
    let t2 = e.horner(w, &odd);
    let t2 = e.mul(z, t2);
    let t1 = e.horner(w, &even);
    let t1 = e.mul(w, t1);
    let r = e.add(t2, t1);
    let hr = e.add(hfsq, r);
    let t = e.mul(s, hr);
    [f, hfsq, t]
}

/// Applies log's special values: +inf for +inf, -inf for ±0, NaN below zero and for NaN.
fn log_specials<E: Emit>(e: &mut E, x: E::V, r: E::V) -> E::V {
    let inf = e.f(f64::INFINITY);
    let is_inf = e.eq(x, inf);
    let r = e.select(is_inf, inf, r);
    let zero = e.f(0.0);
    let is_zero = e.eq(x, zero);
    let ninf = e.f(f64::NEG_INFINITY);
    let r = e.select(is_zero, ninf, r);
    let ok = e.ge(x, zero);
    let nan = e.f(f64::NAN);
    e.select(ok, r, nan)
}

/// fdlibm's split of ln 2: `LN2_HI` has 32 trailing zero bits, so k LN2_HI is exact for
/// |k| < 2^20.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
/// ln 2 - LN2_HI, rounded.
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// ln x = k ln 2 + log m as in fdlibm: `(((t + k LN2_LO) - hfsq) + f) + k LN2_HI`
/// ([`log_fdlibm`]), error below 1 ulp in f64. With `narrow` (f32 and f16 results) the
/// argument is never a subnormal f64, so the subnormal scaling is skipped.
fn log<E: Emit>(e: &mut E, x: E::V, narrow: bool) -> E::V {
    let (kf, m) = log_reduce(e, x, !narrow);
    let [f, hfsq, t] = log_fdlibm(e, m);
    let klo = e.mulc(kf, LN2_LO);
    let r = e.add(t, klo);
    let r = e.sub(r, hfsq);
    let r = e.add(r, f);
    let khi = e.mulc(kf, LN2_HI);
    let r = e.add(r, khi);
    log_specials(e, x, r)
}

/// log2 x for f32 and f16 results: k + (log m) / ln 2 with log m from [`log_fdlibm`]
/// (exact at powers of two).
fn log2_narrow<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let (kf, m) = log_reduce(e, x, false);
    let [f, hfsq, t] = log_fdlibm(e, m);
    let d = e.sub(t, hfsq);
    let lm = e.add(d, f);
    let l2 = e.mulc(lm, INV_LN2[0]);
    let r = e.add(kf, l2);
    log_specials(e, x, r)
}

/// `log2 x = k + log m / ln 2` as a double-double (exact for powers of two).
fn log2_dd<E: Emit>(e: &mut E, x: E::V) -> Dd<E::V> {
    let (kf, lm) = log_core(e, x);
    let il = (e.f(INV_LN2[0]), e.f(INV_LN2[1]));
    let b = dd_mul(e, lm, il);
    let (h, l) = two_sum(e, kf, b.0);
    let l = e.add(l, b.1);
    (h, l)
}

/// log2 x, rounded once from the double-double.
fn log2<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let d = log2_dd(e, x);
    let r = dd_round(e, d);
    log_specials(e, x, r)
}

// ---------------------------------------------------------------- pow

/// x^y = 2^(y log2|x|) with log2|x| as a double-double (relative error < 2^-67), the
/// product y log2|x| as a double-double, and 2^E by [`exp_core`]; then C99 Annex F's
/// special cases (F.9.4.4) by selects; pow(x, 1) = x.
fn pow<E: Emit>(e: &mut E, x: E::V, y: E::V) -> E::V {
    let zero = e.f(0.0);
    let one = e.f(1.0);
    let inf = e.f(f64::INFINITY);
    let nan = e.f(f64::NAN);
    let ax = e.abs(x);
    let pos = e.gt(ax, zero);
    let fin = e.lt(ax, inf);
    let ok = e.and(pos, fin);
    let axs = e.select(ok, ax, one);
    let (lh, ll) = log2_dd(e, axs);
    let (eh, el) = two_prod(e, y, lh);
    let el = e.fma(y, ll, el);
    let aeh = e.abs(eh);
    let lim = e.f(1100.0);
    let in_range = e.le(aeh, lim);
    let el = e.select(in_range, el, zero);
    let eh = clamp(e, eh, -1100.0, 1100.0);
    let k = e.round(eh);
    let f = e.sub(eh, k); // exact
    let (gh, gl) = two_sum(e, f, el);
    let l0 = e.f(LN2[0]);
    let (rh, t) = two_prod(e, gh, l0);
    let l1 = e.f(LN2[1]);
    let t = e.fma(gh, l1, t);
    let rl = e.fma(gl, l0, t);
    let mut r = exp_core(e, k, rh, rl);

    // Special cases, later selects taking precedence.
    let ty = e.trunc(y);
    let yint = e.eq(y, ty);
    let yh = e.mulc(y, 0.5);
    let tyh = e.trunc(yh);
    let half_frac = e.ne(yh, tyh);
    let yodd = e.and(yint, half_frac);
    let yneg = e.lt(y, zero);
    // |x| = 0 or inf.
    let ax0 = e.eq(ax, zero);
    let axinf = e.eq(ax, inf);
    let v0 = e.select(yneg, inf, zero);
    let vinf = e.select(yneg, zero, inf);
    let v = e.select(ax0, v0, vinf);
    let special_x = e.or(ax0, axinf);
    r = e.select(special_x, v, r);
    // y = ±inf.
    let ay = e.abs(y);
    let yinf = e.eq(ay, inf);
    let gt1 = e.gt(ax, one);
    let flip = e.xor(gt1, yneg);
    let v = e.select(flip, inf, zero);
    let ax1 = e.eq(ax, one);
    let v = e.select(ax1, one, v);
    r = e.select(yinf, v, r);
    // Sign: negative base (or -0, -inf) with an odd integer exponent.
    let xs = e.sign_bit(x);
    let neg = e.and(xs, yodd);
    let nr = e.neg(r);
    r = e.select(neg, nr, r);
    // Finite negative base with a non-integer exponent.
    let xneg = e.lt(x, zero);
    let xfin = e.and(xneg, fin);
    let nyint = e.not(yint);
    let bad = e.and(xfin, nyint);
    r = e.select(bad, nan, r);
    // NaN operands.
    let xn = e.is_nan(x);
    let yn = e.is_nan(y);
    let anyn = e.or(xn, yn);
    r = e.select(anyn, nan, r);
    // pow(x, ±0) = 1 and pow(1, y) = 1, even for NaN; pow(x, 1) = x.
    let y0 = e.eq(y, zero);
    let x1 = e.eq(x, one);
    let ones = e.or(y0, x1);
    r = e.select(ones, one, r);
    let y1 = e.eq(y, one);
    e.select(y1, x, r)
}

// ---------------------------------------------------------------- sin, cos, tan

/// x = n pi/2 + r for |x| < 2^30 (Cody–Waite with fma): n = round(x 2/pi), and
/// r = x - n (P1 + P2 + P3) with pi/2 as a triple-double, every product exact (2Prod) and
/// every sum exact (2Sum) but the last ones, below 2^-100 absolute. Returns [n as i64, rh, rl].
fn reduce_cody_waite<E: Emit>(e: &mut E, x: E::V) -> [E::V; 3] {
    let t = e.mulc(x, TWO_OVER_PI);
    let n = e.round(t);
    let p1 = e.f(PIO2[0]);
    let (ph, pl) = two_prod(e, n, p1);
    let t1 = e.sub(x, ph); // exact
    let p2 = e.f(PIO2[1]);
    let (qh, ql) = two_prod(e, n, p2);
    let (uh, ul) = two_sum(e, pl, qh);
    let nuh = e.neg(uh);
    let (vh, vl) = two_sum(e, t1, nuh);
    let w = e.add(ul, ql);
    let p3 = e.f(PIO2[2]);
    let w = e.fma(n, p3, w);
    let rl = e.sub(vl, w);
    let (rh, rl) = fast_two_sum(e, vh, rl);
    let ni = e.cast(n, I64);
    [ni, rh, rl]
}

/// x = n pi/2 + r for finite |x| >= 2^30 (Payne–Hanek, in exact integer arithmetic):
/// with x = M 2^E (M a 53-bit integer), x 2/pi mod 4 = M W 2^-190 mod 4, where W is the
/// 192-bit window of the bits of 2/pi that matter for this E (fetched from the table by a
/// select tree over the word index and shifted into place), and M W mod 2^192 is computed
/// with 32-bit limbs. The top two bits are the quadrant; the fraction (signed, |f| <= 1/2,
/// more than 120 significant bits) becomes r = f pi/2 as a double-double.
fn reduce_payne_hanek<E: Emit>(e: &mut E, x: E::V) -> [E::V; 3] {
    let bits = e.bitcast(x, U64);
    let c52 = e.u(52);
    let ex = e.shr(bits, c52);
    let c7ff = e.u(0x7ff);
    let ex = e.and(ex, c7ff);
    let mmask = e.u((1u64 << 52) - 1);
    let mant = e.and(bits, mmask);
    let hidden = e.u(1u64 << 52);
    let mant = e.or(mant, hidden);
    // Window start: bit P0 = E - 1 of 2/pi, at table position t = P0 + 63 = ex - 1013.
    let c1013 = e.u(1013);
    let t = e.sub(ex, c1013);
    let c6 = e.u(6);
    let j = e.shr(t, c6);
    let c63 = e.u(63);
    let sh = e.and(t, c63);
    let jb: [E::V; 5] = index_bits(e, j);
    let w: [E::V; 4] = std::array::from_fn(|k| e.lookup(&jb, &TWO_OVER_PI_BITS[k..], U64));
    let nsh = e.sub(c63, sh);
    let c1 = e.u(1);
    let words: [E::V; 3] = std::array::from_fn(|k| {
        let a = e.shl(w[k], sh);
        let b = e.shr(w[k + 1], c1);
        let b = e.shr(b, nsh);
        e.or(a, b)
    });
    let m32 = e.u(0xffff_ffff);
    let c32 = e.u(32);
    // Limbs of W, least significant first: w0..w5.
    let wl: [E::V; 6] = std::array::from_fn(|i| {
        let word = words[2 - i / 2];
        if i % 2 == 0 {
            e.and(word, m32)
        } else {
            e.shr(word, c32)
        }
    });
    let m0 = e.and(mant, m32);
    let m1 = e.shr(mant, c32);
    let a: [E::V; 6] = std::array::from_fn(|i| e.mul(m0, wl[i]));
    let b: [E::V; 5] = std::array::from_fn(|i| e.mul(m1, wl[i]));
    let lo = |e: &mut E, v: E::V| e.and(v, m32);
    let hi = |e: &mut E, v: E::V| e.shr(v, c32);
    // Column sums of M W mod 2^192; limb k collects lo(a_k), lo(b_{k-1}), hi(a_{k-1}),
    // hi(b_{k-2}) and the carry.
    let zero_u = e.u(0);
    let mut limbs = [zero_u; 6];
    let mut carry = zero_u;
    for k in 0..6 {
        let mut col = carry;
        let t = lo(e, a[k]);
        col = e.add(col, t);
        if k >= 1 {
            let t = lo(e, b[k - 1]);
            col = e.add(col, t);
            let t = hi(e, a[k - 1]);
            col = e.add(col, t);
        }
        if k >= 2 {
            let t = hi(e, b[k - 2]);
            col = e.add(col, t);
        }
        limbs[k] = e.and(col, m32);
        carry = e.shr(col, c32);
    }
    let c5 = limbs[5];
    let c30 = e.u(30);
    let quad = e.shr(c5, c30);
    let c29 = e.u(29);
    let half = e.shr(c5, c29);
    let half = e.and(half, c1);
    // |fraction|: the bits below bit 189, complemented when the fraction is >= 1/2
    // (one's complement: off by 2^-190, far below what matters).
    let mask = e.sub(zero_u, half);
    let mask = e.and(mask, m32);
    let m29 = e.u((1 << 29) - 1);
    let top = e.and(c5, m29);
    let mask29 = e.and(mask, m29);
    let top = e.xor(top, mask29);
    let f: [E::V; 4] = std::array::from_fn(|k| {
        let l = e.xor(limbs[k + 1], mask);
        let l = e.cast(l, F64);
        e.mulc(l, pow2(32 * k as i32 - 158))
    });
    let ft = e.cast(top, F64);
    let ft = e.mulc(ft, pow2(-30));
    let (h1, h2) = two_sum(e, ft, f[3]);
    let low = e.add(f[1], f[0]);
    let low = e.add(f[2], low);
    let lo_sum = e.add(h2, low);
    let (fh, fl) = fast_two_sum(e, h1, lo_sum);
    let p0 = e.f(PIO2[0]);
    let p1 = e.f(PIO2[1]);
    let (rh, t) = two_prod(e, fh, p0);
    let t = e.fma(fh, p1, t);
    let t = e.fma(fl, p0, t);
    let (rh, rl) = fast_two_sum(e, rh, t);
    let n = e.add(quad, half);
    let n = e.bitcast(n, I64);
    let zero = e.f(0.0);
    let xneg = e.lt(x, zero);
    let hb = e.ne(half, zero_u);
    let flip = e.xor(hb, xneg);
    let nrh = e.neg(rh);
    let nrl = e.neg(rl);
    let rh = e.select(flip, nrh, rh);
    let rl = e.select(flip, nrl, rl);
    let zi = e.i(0);
    let nn = e.sub(zi, n);
    let n = e.select(xneg, nn, n);
    [n, rh, rl]
}

/// x = n pi/2 + r, |r| <= ~pi/4: Cody–Waite below 2^30, Payne–Hanek (in an `if`) above.
/// Infinite and NaN x take the Cody–Waite path, which yields NaN.
fn reduce_pio2<E: Emit>(e: &mut E, x: E::V) -> [E::V; 3] {
    let ax = e.abs(x);
    let lim = e.f(pow2(30));
    let inf = e.f(f64::INFINITY);
    let ge = e.ge(ax, lim);
    let fin = e.lt(ax, inf);
    let big = e.and(ge, fin);
    e.if_else(
        big,
        |e| reduce_payne_hanek(e, x),
        |e| reduce_cody_waite(e, x),
    )
}

/// sin(rh + rl) for |r| <= ~pi/4 as a double-double: r + r^3 S(r^2) + rl (1 - r^2/2),
/// Taylor to r^17/17! (truncation < 2^-63 relative).
fn sin_kernel<E: Emit>(e: &mut E, rh: E::V, rl: E::V) -> Dd<E::V> {
    let z = e.mul(rh, rh);
    let s = e.horner(z, &SIN_C);
    let v = e.mul(z, rh);
    let hz = e.mulc(z, 0.5);
    let nhz = e.neg(hz);
    let t = e.fma(nhz, rl, rl);
    let lo = e.fma(v, s, t);
    (rh, lo)
}

/// cos(rh + rl) for |r| <= ~pi/4 as a double-double: w = 1 - z/2 with its rounding error
/// recovered exactly, plus z^2 C(z), z = r^2 from an exact product; Taylor to r^18/18!.
fn cos_kernel<E: Emit>(e: &mut E, rh: E::V, rl: E::V) -> Dd<E::V> {
    let (zh, zl) = two_prod(e, rh, rh);
    let rh2 = e.add(rh, rh);
    let zl = e.fma(rh2, rl, zl);
    let hz = e.mulc(zh, 0.5);
    let one = e.f(1.0);
    let w = e.sub(one, hz);
    let d = e.sub(one, w); // exact
    let e1 = e.sub(d, hz); // exact
    let p = e.horner(zh, &COS_C);
    let z2 = e.mul(zh, zh);
    let hzl = e.mulc(zl, 0.5);
    let t = e.sub(e1, hzl);
    let lo = e.fma(z2, p, t);
    (w, lo)
}

/// The quadrant bits of n: (odd, bit 1).
fn quadrant<E: Emit>(e: &mut E, n: E::V, add: i64) -> (E::V, E::V) {
    let a = e.i(add);
    let n = e.add(n, a);
    let b: [E::V; 2] = index_bits(e, n);
    (b[0], b[1])
}

/// Keeps the sign of a zero argument (sin and tan are odd).
fn keep_zero<E: Emit>(e: &mut E, x: E::V, r: E::V) -> E::V {
    let zero = e.f(0.0);
    let z = e.eq(x, zero);
    e.select(z, x, r)
}

/// sin x: reduce, then ±sin r or ±cos r by the quadrant.
fn sin<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let [n, rh, rl] = reduce_pio2(e, x);
    let s = sin_kernel(e, rh, rl);
    let c = cos_kernel(e, rh, rl);
    let s = dd_round(e, s);
    let c = dd_round(e, c);
    let (odd, neg) = quadrant(e, n, 0);
    let v = e.select(odd, c, s);
    let nv = e.neg(v);
    let v = e.select(neg, nv, v);
    keep_zero(e, x, v)
}

/// cos x: reduce, then ±cos r or ±sin r by the quadrant.
fn cos<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let [n, rh, rl] = reduce_pio2(e, x);
    let s = sin_kernel(e, rh, rl);
    let c = cos_kernel(e, rh, rl);
    let s = dd_round(e, s);
    let c = dd_round(e, c);
    let (odd, _) = quadrant(e, n, 0);
    let (_, neg) = quadrant(e, n, 1);
    let v = e.select(odd, s, c);
    let nv = e.neg(v);
    e.select(neg, nv, v)
}

/// tan x: sin r / cos r (even quadrant) or -cos r / sin r (odd), divided in double-double.
fn tan<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let [n, rh, rl] = reduce_pio2(e, x);
    let s = sin_kernel(e, rh, rl);
    let c = cos_kernel(e, rh, rl);
    // Normalize, so that the low parts are below an ulp of the high parts for dd_div.
    let s = fast_two_sum(e, s.0, s.1);
    let c = fast_two_sum(e, c.0, c.1);
    let (odd, _) = quadrant(e, n, 0);
    let nh = e.select(odd, c.0, s.0);
    let nl = e.select(odd, c.1, s.1);
    let dh = e.select(odd, s.0, c.0);
    let dl = e.select(odd, s.1, c.1);
    let q = dd_div(e, (nh, nl), (dh, dl));
    let v = dd_round(e, q);
    let nv = e.neg(v);
    let v = e.select(odd, nv, v);
    keep_zero(e, x, v)
}

// ---------------------------------------------------------------- atan2

/// atan2(y, x): t = min(|x|,|y|) / max(|x|,|y|) in [0, 1] as a double-double, then
/// atan t = atan(k/8) + atan(u), u = (t - k/8) / (1 + t k/8), |u| <= 1/16, k = round(8t)
/// (atan(k/8) from a 9-entry double-double table, atan u by Taylor to u^13/13); then
/// pi/2 - a when |y| > |x| and pi - a when x is negative (sign bit), in double-double;
/// the sign of y last. Annex F's zeros and infinities fall out of this (both infinite: t = 1;
/// both zero, or only the larger infinite: t = 0); NaN gives NaN.
fn atan2<E: Emit>(e: &mut E, y: E::V, x: E::V) -> E::V {
    let ax = e.abs(x);
    let ay = e.abs(y);
    let inf = e.f(f64::INFINITY);
    let one = e.f(1.0);
    let xi = e.eq(ax, inf);
    let yi = e.eq(ay, inf);
    let both = e.and(xi, yi);
    let ax = e.select(both, one, ax);
    let ay = e.select(both, one, ay);
    let swap = e.gt(ay, ax);
    let num = e.select(swap, ax, ay);
    let den = e.select(swap, ay, ax);
    // den = 0 (both zero) or den = inf (num finite): t = 0 / 1.
    let zero = e.f(0.0);
    let dz = e.eq(den, zero);
    let dinf = e.eq(den, inf);
    let fix = e.or(dz, dinf);
    let num = e.select(fix, zero, num);
    let den = e.select(fix, one, den);
    let lim = e.f(pow2(-900));
    let small = e.lt(den, lim);
    let sc = e.selc(small, pow2(600), 1.0);
    let num = e.mul(num, sc);
    let den = e.mul(den, sc);
    let th = e.div(num, den);
    let nth = e.neg(th);
    let r = e.fma(nth, den, num);
    let tl = e.div(r, den);
    // u = (t - c) / (1 + t c), c = k/8.
    let t8 = e.mulc(th, 8.0);
    let kf = e.round(t8);
    let c = e.mulc(kf, 0.125);
    let nh = e.sub(th, c); // exact
    let nu = two_sum(e, nh, tl);
    let (mh, ml) = two_prod(e, th, c);
    let (dh, dl) = fast_two_sum(e, one, mh);
    let t = e.fma(tl, c, ml);
    let dl = e.add(dl, t);
    let (uh, ul) = dd_div(e, nu, (dh, dl));
    let z = e.mul(uh, uh);
    let p = e.horner(z, &ATAN_C);
    let v = e.mul(z, uh);
    let lo = e.fma(v, p, ul);
    let ki = e.cast(kf, U64);
    let kb: [E::V; 4] = index_bits(e, ki);
    let ch = e.lookup(&kb, &ATAN_K8_HI, F64);
    let cl = e.lookup(&kb, &ATAN_K8_LO, F64);
    let a = dd_add(e, (ch, cl), (uh, lo));
    // |y| > |x|: pi/2 - a.
    let na = (e.neg(a.0), e.neg(a.1));
    let b = dd_add_c(e, na, [PIO2[0], PIO2[1]]);
    let ah = e.select(swap, b.0, a.0);
    let al = e.select(swap, b.1, a.1);
    // x negative: pi - a.
    let na = (e.neg(ah), e.neg(al));
    let b = dd_add_c(e, na, PI);
    let xs = e.sign_bit(x);
    let ah = e.select(xs, b.0, ah);
    let al = e.select(xs, b.1, al);
    let r = dd_round(e, (ah, al));
    let r = e.copysign(r, y);
    let xn = e.is_nan(x);
    let yn = e.is_nan(y);
    let n = e.or(xn, yn);
    let nan = e.f(f64::NAN);
    e.select(n, nan, r)
}

// ---------------------------------------------------------------- rsqrt

/// 1/sqrt(x) with one Newton step on the exact residual 1 - x y^2 (y = 1/sqrt(x)), which
/// makes it nearly correctly rounded; zeros, infinities, negatives and NaN keep
/// `1 / sqrt(x)` (±inf, +0, NaN, NaN).
fn rsqrt<E: Emit>(e: &mut E, x: E::V) -> E::V {
    let s = e.sqrt(x);
    let one = e.f(1.0);
    let y = e.div(one, s);
    let (ah, al) = two_prod(e, x, y);
    let nah = e.neg(ah);
    let t = e.fma(nah, y, one);
    let nal = e.neg(al);
    let t = e.fma(nal, y, t);
    let hy = e.mulc(y, 0.5);
    let yr = e.fma(hy, t, y);
    let zero = e.f(0.0);
    let inf = e.f(f64::INFINITY);
    let pos = e.gt(x, zero);
    let fin = e.lt(x, inf);
    let ok = e.and(pos, fin);
    e.select(ok, yr, y)
}
