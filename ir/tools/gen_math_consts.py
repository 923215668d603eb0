#!/usr/bin/env python3
"""Generates the constants of ir/src/passes/math/consts.rs with mpmath (500 decimal digits).

Every f64 is correctly rounded (round to nearest even); a double-double (hi, lo) has
hi = RN(c) and lo = RN(c - hi); a triple has a third part RN(c - hi - lo). The bits of 2/pi
are exact (floor of 2/pi * 2^1216). Run: python3 ir/tools/gen_math_consts.py > consts.rs.in
"""
import struct
from mpmath import mp, mpf, pi, log, atan, floor

mp.dps = 500


def rn(x):
    """Correctly rounded f64 of an mpf (no subnormals needed here)."""
    f = float(x)  # mpmath rounds to nearest
    return f


def bits(f):
    return struct.unpack("<Q", struct.pack("<d", f))[0]


def parts(c, n):
    out = []
    r = mpf(c)
    for _ in range(n):
        f = rn(r)
        out.append(f)
        r = r - mpf(f)
    return out


def emit(name, c, n, doc):
    ps = parts(c, n)
    print(f"/// {doc}")
    vals = ", ".join(f"f64::from_bits(0x{bits(p):016x})" for p in ps)
    if n == 1:
        print(f"pub const {name}: f64 = {vals};")
    else:
        print(f"pub const {name}: [f64; {n}] = [{vals}];")


emit("PIO2", pi / 2, 3, "pi/2 as a triple-double.")
emit("PI", pi, 2, "pi as a double-double.")
emit("TWO_OVER_PI", 2 / pi, 1, "2/pi rounded.")
emit("LN2", log(2), 2, "ln 2 as a double-double.")
emit("INV_LN2", 1 / log(2), 2, "1/ln 2 as a double-double.")
emit("THIRD", mpf(1) / 3, 2, "1/3 as a double-double.")
emit("FIFTH", mpf(1) / 5, 2, "1/5 as a double-double.")
hi = []
lo = []
for k in range(9):
    h, l = parts(atan(mpf(k) / 8), 2)
    hi.append(h)
    lo.append(l)
print("/// atan(k/8) for k = 0..=8, high parts.")
print("pub const ATAN_K8_HI: [u64; 9] = [" + ", ".join(f"0x{bits(h):016x}" for h in hi) + "];")
print("/// atan(k/8) for k = 0..=8, low parts.")
print("pub const ATAN_K8_LO: [u64; 9] = [" + ", ".join(f"0x{bits(l):016x}" for l in lo) + "];")
# Bits of 2/pi: word j (j >= 1) holds bits 64j-63 ..= 64j after the binary point; word 0 is zero.
N = 20
v = int(floor((2 / pi) * mpf(2) ** (64 * (N - 1))))
words = [0] + [(v >> (64 * (N - 1 - j))) & ((1 << 64) - 1) for j in range(1, N)]
print("/// Bits of 2/pi in 64-bit words: word j holds the bits of weight 2^-(64j-63) ..= 2^-64j")
print("/// (word 0 is zero, so that windows may start before the binary point).")
print(f"pub const TWO_OVER_PI_BITS: [u64; {N}] = [")
for w in words:
    print(f"    0x{w:016x},")
print("];")
