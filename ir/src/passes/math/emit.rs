//! The `Emit` trait: the basic ops the math algorithms are written in, once, for both the
//! direct evaluator and the IR emitter; plus helpers (typed constants, double-double arithmetic).

use crate::opcode::Opcode;
use crate::types::ScalarType;

/// A sink for the basic ops that the math algorithms are written in.
///
/// Values are single lanes of a scalar type. The algorithms use `f64`, `i64`, `u64` and `bool`
/// (and the caller's float type at the edges). [`super::Direct`] evaluates each op at once
/// with the interpreter's lane semantics; [`super::IrEmitter`] appends the op to a region of
/// a program. Both run the same algorithm code, so both give the same bits.
pub trait Emit {
    /// One lane of a scalar type.
    type V: Copy + PartialEq;

    /// The scalar type of `v`.
    fn ty(&self, v: Self::V) -> ScalarType;

    /// A constant of type `s` with lane bits `bits` (canonical, see [`crate::konst::canon`]).
    fn konst(&mut self, s: ScalarType, bits: u64) -> Self::V;

    /// A basic op on operands of one type: arithmetic (add sub mul div neg abs min max fma),
    /// bitwise (and or xor not shl shr), rounding (floor ceil trunc round), sqrt, or a
    /// comparison (eq ne lt le gt ge, giving `bool`). Never one of the ten math functions.
    fn op(&mut self, op: Opcode, args: &[Self::V]) -> Self::V;

    /// `select c, a, b`.
    fn select(&mut self, c: Self::V, a: Self::V, b: Self::V) -> Self::V;

    /// `cast` (numeric conversion) of `a` to `to`.
    fn cast(&mut self, a: Self::V, to: ScalarType) -> Self::V;

    /// `bitcast` of `a` to `to` (same width).
    fn bitcast(&mut self, a: Self::V, to: ScalarType) -> Self::V;

    /// `if c { then } else { els }`: both arms yield `N` values of matching types. The direct
    /// evaluator runs one arm; the IR emitter emits an `if` op with two regions.
    fn if_else<const N: usize>(
        &mut self,
        c: Self::V,
        then: impl FnOnce(&mut Self) -> [Self::V; N],
        els: impl FnOnce(&mut Self) -> [Self::V; N],
    ) -> [Self::V; N]
    where
        Self: Sized;

    // ---- helpers (default methods) ----

    /// An f64 constant.
    fn f(&mut self, x: f64) -> Self::V {
        self.konst(ScalarType::F64, x.to_bits())
    }
    /// An i64 constant.
    fn i(&mut self, x: i64) -> Self::V {
        self.konst(ScalarType::I64, x as u64)
    }
    /// A u64 constant.
    fn u(&mut self, x: u64) -> Self::V {
        self.konst(ScalarType::U64, x)
    }
    /// `add a, b`.
    fn add(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Add, &[a, b])
    }
    /// `sub a, b`.
    fn sub(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Sub, &[a, b])
    }
    /// `mul a, b`.
    fn mul(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Mul, &[a, b])
    }
    /// `div a, b`.
    fn div(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Div, &[a, b])
    }
    /// `fma a, b, c` (a*b + c, one rounding).
    fn fma(&mut self, a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        self.op(Opcode::Fma, &[a, b, c])
    }
    /// `neg a`.
    fn neg(&mut self, a: Self::V) -> Self::V {
        self.op(Opcode::Neg, &[a])
    }
    /// `abs a`.
    fn abs(&mut self, a: Self::V) -> Self::V {
        self.op(Opcode::Abs, &[a])
    }
    /// `min a, b`.
    fn min(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Min, &[a, b])
    }
    /// `max a, b`.
    fn max(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Max, &[a, b])
    }
    /// `and a, b`.
    fn and(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::And, &[a, b])
    }
    /// `or a, b`.
    fn or(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Or, &[a, b])
    }
    /// `xor a, b`.
    fn xor(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Xor, &[a, b])
    }
    /// `not a`.
    fn not(&mut self, a: Self::V) -> Self::V {
        self.op(Opcode::Not, &[a])
    }
    /// `shl a, b`.
    fn shl(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Shl, &[a, b])
    }
    /// `shr a, b` (arithmetic for i64, logical for u64).
    fn shr(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Shr, &[a, b])
    }
    /// `round a` (half away from zero).
    fn round(&mut self, a: Self::V) -> Self::V {
        self.op(Opcode::Round, &[a])
    }
    /// `trunc a`.
    fn trunc(&mut self, a: Self::V) -> Self::V {
        self.op(Opcode::Trunc, &[a])
    }
    /// `sqrt a`.
    fn sqrt(&mut self, a: Self::V) -> Self::V {
        self.op(Opcode::Sqrt, &[a])
    }
    /// `eq a, b`.
    fn eq(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Eq, &[a, b])
    }
    /// `ne a, b`.
    fn ne(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Ne, &[a, b])
    }
    /// `lt a, b`.
    fn lt(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Lt, &[a, b])
    }
    /// `le a, b`.
    fn le(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Le, &[a, b])
    }
    /// `gt a, b`.
    fn gt(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Gt, &[a, b])
    }
    /// `ge a, b`.
    fn ge(&mut self, a: Self::V, b: Self::V) -> Self::V {
        self.op(Opcode::Ge, &[a, b])
    }
    /// `a + c` for an f64 constant `c`.
    fn addc(&mut self, a: Self::V, c: f64) -> Self::V {
        let k = self.f(c);
        self.add(a, k)
    }
    /// `a * c` for an f64 constant `c`.
    fn mulc(&mut self, a: Self::V, c: f64) -> Self::V {
        let k = self.f(c);
        self.mul(a, k)
    }
    /// True where the f64 `a` is NaN (`ne a, a`).
    fn is_nan(&mut self, a: Self::V) -> Self::V {
        self.ne(a, a)
    }
    /// Selects among f64 constants: `if c { a } else { b }`.
    fn selc(&mut self, c: Self::V, a: f64, b: f64) -> Self::V {
        let (a, b) = (self.f(a), self.f(b));
        self.select(c, a, b)
    }
    /// An f64 with the magnitude of `a` and the sign of `s` (through the bits).
    fn copysign(&mut self, a: Self::V, s: Self::V) -> Self::V {
        let ab = self.bitcast(a, ScalarType::U64);
        let sb = self.bitcast(s, ScalarType::U64);
        let m = self.u(!(1u64 << 63));
        let hi = self.u(1u64 << 63);
        let ab = self.and(ab, m);
        let sb = self.and(sb, hi);
        let r = self.or(ab, sb);
        self.bitcast(r, ScalarType::F64)
    }
    /// True where the sign bit of the f64 `a` is set (also for -0 and negative NaNs).
    fn sign_bit(&mut self, a: Self::V) -> Self::V {
        let b = self.bitcast(a, ScalarType::I64);
        let z = self.i(0);
        self.lt(b, z)
    }
    /// `2^k` as an f64 for an i64 `k` in [-1022, 1023] (built from the exponent bits).
    fn pow2i(&mut self, k: Self::V) -> Self::V {
        let bias = self.i(1023);
        let e = self.add(k, bias);
        let sh = self.i(52);
        let b = self.shl(e, sh);
        self.bitcast(b, ScalarType::F64)
    }
    /// Evaluates the polynomial `c[0] + c[1] x + ... ` by Horner's rule with fma.
    fn horner(&mut self, x: Self::V, c: &[f64]) -> Self::V {
        let mut acc = self.f(c[c.len() - 1]);
        for &ci in c[..c.len() - 1].iter().rev() {
            let k = self.f(ci);
            acc = self.fma(acc, x, k);
        }
        acc
    }
    /// Looks `idx` (given as its bits, least significant first, as bools) up in a table of
    /// `table.len() <= 2^bits.len()` constants of type `s`: a tree of selects, with equal
    /// neighbours merged. Entries past the table are zero.
    fn lookup(&mut self, bits: &[Self::V], table: &[u64], s: ScalarType) -> Self::V {
        let n = 1usize << bits.len();
        assert!(n <= 32, "lookup tables have at most 32 entries");
        let zero = self.konst(s, 0);
        let mut level = [zero; 32];
        for (i, l) in level.iter_mut().enumerate().take(n) {
            *l = self.konst(s, table.get(i).copied().unwrap_or(0));
        }
        let mut len = n;
        for &b in bits {
            len /= 2;
            for i in 0..len {
                let (lo, hi) = (level[2 * i], level[2 * i + 1]);
                level[i] = if lo == hi { lo } else { self.select(b, hi, lo) };
            }
        }
        level[0]
    }
}

/// A double-double number `hi + lo` (not necessarily normalized).
pub type Dd<V> = (V, V);

/// Exact sum: `(s, e)` with `s = RN(a + b)` and `s + e = a + b` (Knuth's 2Sum).
pub fn two_sum<E: Emit>(e: &mut E, a: E::V, b: E::V) -> Dd<E::V> {
    let s = e.add(a, b);
    let bb = e.sub(s, a);
    let ab = e.sub(s, bb);
    let d1 = e.sub(a, ab);
    let d2 = e.sub(b, bb);
    let err = e.add(d1, d2);
    (s, err)
}

/// Exact sum when `|a| >= |b|` or `a == 0` (Dekker's Fast2Sum).
pub fn fast_two_sum<E: Emit>(e: &mut E, a: E::V, b: E::V) -> Dd<E::V> {
    let s = e.add(a, b);
    let t = e.sub(s, a);
    let err = e.sub(b, t);
    (s, err)
}

/// Exact product: `(p, e)` with `p = RN(a * b)` and `p + e = a * b` (barring underflow).
pub fn two_prod<E: Emit>(e: &mut E, a: E::V, b: E::V) -> Dd<E::V> {
    let p = e.mul(a, b);
    let np = e.neg(p);
    let err = e.fma(a, b, np);
    (p, err)
}

/// Double-double sum `a + b` (relative error about 2^-104 unless it cancels).
pub fn dd_add<E: Emit>(e: &mut E, a: Dd<E::V>, b: Dd<E::V>) -> Dd<E::V> {
    let (s, t) = two_sum(e, a.0, b.0);
    let l = e.add(a.1, b.1);
    let t = e.add(t, l);
    fast_two_sum(e, s, t)
}

/// Double-double sum of a double-double and a constant double-double.
pub fn dd_add_c<E: Emit>(e: &mut E, a: Dd<E::V>, c: [f64; 2]) -> Dd<E::V> {
    let c = (e.f(c[0]), e.f(c[1]));
    dd_add(e, a, c)
}

/// Double-double product `a * b`.
pub fn dd_mul<E: Emit>(e: &mut E, a: Dd<E::V>, b: Dd<E::V>) -> Dd<E::V> {
    let (p, t) = two_prod(e, a.0, b.0);
    let x = e.mul(a.0, b.1);
    let y = e.fma(a.1, b.0, x);
    let t = e.add(t, y);
    fast_two_sum(e, p, t)
}

/// Double-double quotient `a / b`.
pub fn dd_div<E: Emit>(e: &mut E, a: Dd<E::V>, b: Dd<E::V>) -> Dd<E::V> {
    let q = e.div(a.0, b.0);
    let nq = e.neg(q);
    let r = e.fma(nq, b.0, a.0); // exact remainder
    let r = e.add(r, a.1);
    let r = e.fma(nq, b.1, r);
    let ql = e.div(r, b.0);
    fast_two_sum(e, q, ql)
}

/// `hi + lo` rounded to one double.
pub fn dd_round<E: Emit>(e: &mut E, a: Dd<E::V>) -> E::V {
    e.add(a.0, a.1)
}
