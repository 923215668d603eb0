//! Counter-based random numbers (issue 25): Philox4x64-10 (Salmon, Moraes, Dror and Shaw,
//! "Parallel random numbers: as easy as 1, 2, 3", SC 2011; Random123's `philox4x64_R`; the
//! generator of NumPy's `Philox` bit generator). Each function is a pure function of a key
//! and a counter, recorded from ordinary integer ops, so every device — the interpreter,
//! both CPU compilers, a GPU, a device group — and any launch size gives the same numbers,
//! and the `*_at` functions give exactly NumPy's streams: `random_u64_at(key, j)` is output
//! `j` of `numpy.random.Philox(key=k).random_raw()`, where the 128-bit `k` is
//! `key.x() + 2^64 · key.y()`.
//!
//! ```
//! use weft::dsl::*;
//! // Immediate mode: the first output of NumPy's `Philox(key=0)`.
//! let key = Value::<u64, 2>::from_array([0, 0]);
//! let first = random_u64_at(&key, &Value::new(0u64)).get()?;
//! assert_eq!(first, 0x02f4_ba64_08e4_d89b);
//! # Ok::<(), weft::Error>(())
//! ```

use super::value::{select, Value};

/// A Philox key: two 64-bit words.
pub type Key = Value<u64, 2>;

/// Philox4x64's multipliers and Weyl increments (Random123, `philox.h`).
const M0: u64 = 0xD2E7_470E_E14C_6C93;
const M1: u64 = 0xCA5A_8263_9512_1157;
const W0: u64 = 0x9E37_79B9_7F4A_7C15;
const W1: u64 = 0xBB67_AE85_84CA_A73B;

/// The high and low 64 bits of the 128-bit product `a · b` (from 32-bit halves: no op
/// wider than 64 bits is needed).
fn mul_hi_lo(a: &Value<u64, 1>, b: u64) -> (Value<u64, 1>, Value<u64, 1>) {
    let mask = 0xFFFF_FFFFu64;
    let (a0, a1) = (a & mask, a >> 32u64);
    let (b0, b1) = (b & mask, b >> 32);
    let p00 = &a0 * b0;
    let p01 = &a0 * b1;
    let p10 = &a1 * b0;
    let p11 = &a1 * b1;
    let mid = (&p00 >> 32u64) + (&p01 & mask) + (&p10 & mask);
    let hi = p11 + (p01 >> 32u64) + (p10 >> 32u64) + (mid >> 32u64);
    (hi, a * b)
}

/// Philox4x64-10 of `counter` under `key`: Random123's `philox4x64_R(10, counter, key)`, a
/// bijection of 256-bit counters for each 128-bit key (the paper's §3; checked against
/// Random123's known-answer vectors).
pub fn philox4x64(counter: &Value<u64, 4>, key: &Key) -> Value<u64, 4> {
    let mut c = [counter.x(), counter.y(), counter.z(), counter.w()];
    let (mut k0, mut k1) = (key.x(), key.y());
    for round in 0..10 {
        if round > 0 {
            k0 += W0;
            k1 += W1;
        }
        let (hi0, lo0) = mul_hi_lo(&c[0], M0);
        let (hi1, lo1) = mul_hi_lo(&c[2], M1);
        c = [hi1 ^ &c[1] ^ &k0, lo1, hi0 ^ &c[3] ^ &k1, lo0];
    }
    let [a, b, d, e] = c;
    Value::from_lanes([a, b, d, e])
}

/// Block `i` of NumPy's Philox stream under `key`: its outputs `4i .. 4i + 4`
/// (`philox4x64` of the counter `i + 1`, carried into the second word, as NumPy increments
/// its counter before each block).
pub fn random_block(key: &Key, i: &Value<u64, 1>) -> Value<u64, 4> {
    let c0 = i + 1u64;
    let c1 = select(c0.eq(0u64), Value::new(1u64), Value::new(0u64));
    let zero = Value::<u64, 1>::new(0u64);
    philox4x64(&Value::from_lanes([c0, c1, zero.clone(), zero]), key)
}

/// Word `k` (0..4, varying) of a block.
fn word(b: &Value<u64, 4>, k: &Value<u64, 1>) -> Value<u64, 1> {
    let lo = select(k.eq(0u64), b.x(), b.y());
    let hi = select(k.eq(2u64), b.z(), b.w());
    select(k.lt(2u64), lo, hi)
}

/// Output `j` of NumPy's `Philox(key=k).random_raw()`.
pub fn random_u64_at(key: &Key, j: &Value<u64, 1>) -> Value<u64, 1> {
    let b = random_block(key, &(j >> 2u64));
    word(&b, &(j & 3u64))
}

/// Double `j` of NumPy's `Generator(Philox(key=k)).random()`: output `j`'s top 53 bits
/// times 2^-53, uniform on [0, 1).
pub fn random_f64_at(key: &Key, j: &Value<u64, 1>) -> Value<f64, 1> {
    (random_u64_at(key, j) >> 11u64).cast::<f64>() * (1.0f64 / 9_007_199_254_740_992.0)
}

/// Float `j` of NumPy's `Generator(Philox(key=k)).random(dtype=float32)`: the top 24 bits
/// of a 32-bit half of output `j / 2` (the low half first) times 2^-24, uniform on [0, 1).
pub fn random_f32_at(key: &Key, j: &Value<u64, 1>) -> Value<f32, 1> {
    let x = random_u64_at(key, &(j >> 1u64));
    let half = select((j & 1u64).eq(0u64), &x & 0xFFFF_FFFFu64, x >> 32u64);
    (half >> 8u64).cast::<f32>() * (1.0f32 / 16_777_216.0)
}

/// A standard normal number, `j`-th of its own stream: Box–Muller of doubles `2j` and
/// `2j + 1` of [`random_f64_at`]'s stream, `sqrt(-2 ln(1 - u)) · cos(2π v)` (the math
/// functions are weft's, the same bits on every device; not NumPy's ziggurat).
pub fn random_normal_at(key: &Key, j: &Value<u64, 1>) -> Value<f64, 1> {
    let u = random_f64_at(key, &(j * 2u64));
    let v = random_f64_at(key, &(j * 2u64 + 1u64));
    let r = ((1.0f64 - u).log() * -2.0f64).sqrt();
    r * (v * std::f64::consts::TAU).cos()
}

/// An integer in `0 .. n` from output `j` (`n` > 0): the high word of `output · n`
/// (Lemire's multiply-shift; its bias is below n / 2^64; not NumPy's `integers`).
pub fn random_below_at(key: &Key, j: &Value<u64, 1>, n: u64) -> Value<u64, 1> {
    mul_hi_lo(&random_u64_at(key, j), n).0
}
