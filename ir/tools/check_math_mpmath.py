#!/usr/bin/env python3
"""Measures the f64 math expansion against correctly rounded values from mpmath.

    WEFT_MATH_DUMP=/tmp/math_dump.txt cargo test --release -p weft-ir --test math_accuracy \\
        dump_f64_samples_for_mpmath -- --ignored
    python3 ir/tools/check_math_mpmath.py /tmp/math_dump.txt

Prints, per function, the maximum error in ulps of the exact value (0.5 = correctly rounded).
Results that overflow or underflow below 2^-1075 are skipped.
"""
import struct
import sys
from collections import defaultdict

from mpmath import atan2, cos, exp, frexp, log, mp, mpf, power, sin, sqrt, tan


def h2f(h):
    return struct.unpack("<d", struct.pack("<Q", int(h, 16)))[0]


def ulp_error(ours, exact):
    _, e = frexp(exact)  # exact = m 2^e, 1/2 <= |m| < 1
    ulp = mpf(2) ** max(e - 53, -1074)
    return float(abs(mpf(ours) - exact) / ulp)


FUNCS = {
    "Exp": lambda x, y: exp(x),
    "Exp2": lambda x, y: power(2, x),
    "Log": lambda x, y: log(x),
    "Log2": lambda x, y: log(x, 2),
    "Sin": lambda x, y: sin(x),
    "Cos": lambda x, y: cos(x),
    "Tan": lambda x, y: tan(x),
    "Pow": lambda x, y: power(x, y),
    "Atan2": lambda x, y: atan2(x, y),
    "Rsqrt": lambda x, y: 1 / sqrt(x),
}

worst = defaultdict(lambda: (0.0, None))
count = defaultdict(int)
for line in open(sys.argv[1] if len(sys.argv) > 1 else "math_dump.txt"):
    op, xh, yh, rh = line.split()
    x, y, r = h2f(xh), h2f(yh), h2f(rh)
    # Huge trigonometric arguments need the working precision to cover their exponent.
    mp.dps = 400 if op in ("Sin", "Cos", "Tan") and abs(x) > 1e6 else 60
    exact = FUNCS[op](mpf(x), mpf(y))
    if r != r or abs(exact) > mpf(2) ** 1024 or abs(exact) < mpf(2) ** -1075:
        continue
    count[op] += 1
    err = ulp_error(r, exact)
    if err > worst[op][0]:
        worst[op] = (err, (x, y))
for op in FUNCS:
    err, at = worst[op]
    print(f"{op}: max {err:.4f} ulp over {count[op]} inputs (at {at})")
