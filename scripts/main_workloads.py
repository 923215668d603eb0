#!/usr/bin/env python3
"""The main job's workloads: runs each example in examples/ir through `weft run` on the
default CPU device (Cranelift) and checks the outputs against numpy (exactly where the operations and
their order are the same, else against an f64 reference within a stated tolerance).

Environment: WEFT = path of the weft binary. Writes its inputs and outputs to a temp dir."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

WEFT = os.environ.get("WEFT", "target/release/weft")
EX = os.path.join(os.path.dirname(__file__), "..", "examples", "ir")
rng = np.random.default_rng(2026)
tmp = tempfile.mkdtemp(prefix="weft-main-")
failures = []


def path(name):
    return os.path.join(tmp, name)


def run(example, *args):
    cmd = [WEFT, "run", os.path.join(EX, example), *args]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t


def report(name, ok, detail, secs):
    print(f"{name:<14} {'ok  ' if ok else 'FAIL'} {secs:7.3f} s  {detail}")
    if not ok:
        failures.append(name)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


# saxpy: r = 2x + y, exactly numpy's float32 result.
n = 1_000_000
x = rng.standard_normal(n, dtype=np.float32)
y = rng.standard_normal(n, dtype=np.float32)
np.save(path("x.npy"), x)
np.save(path("y.npy"), y)
s = run("saxpy.weft", "--in", "a=2", "--in", f"x={path('x.npy')}", "--in", f"y={path('y.npy')}",
        "--out", f"r={path('r.npy')}")
report("saxpy", same_bits(np.load(path("r.npy")), np.float32(2) * x + y), f"n={n}, bit-exact vs numpy", s)

# (r + s) * f on Value3f arrays.
r3 = rng.standard_normal((n, 3), dtype=np.float32)
s3 = rng.standard_normal((n, 3), dtype=np.float32)
np.save(path("r3.npy"), r3)
np.save(path("s3.npy"), s3)
s = run("rs_f.weft", "--in", "f=0.5", "--in", f"r={path('r3.npy')}", "--in", f"s={path('s3.npy')}",
        "--out", f"q={path('q.npy')}")
report("(r+s)*f", same_bits(np.load(path("q.npy")), (r3 + s3) * np.float32(0.5)), f"n={n}x3, bit-exact", s)

# Particle evolve with bounce and lifetime reset.
m = 200_000
pos = rng.uniform(-1, 1, (m, 3)).astype(np.float32)
pos[:, 1] = np.abs(pos[:, 1]) * 0.01
vel = rng.standard_normal((m, 3), dtype=np.float32)
life = rng.uniform(0, 0.05, m).astype(np.float32)
for nm, arr in (("pos", pos), ("vel", vel), ("life", life)):
    np.save(path(f"{nm}.npy"), arr)
dt, g = np.float32(0.01), np.array([0, -9.8, 0], dtype=np.float32)
s = run("evolve.weft", "--in", "dt=0.01", "--in", "g=0,-9.8,0", "--in", f"pos={path('pos.npy')}",
        "--in", f"vel={path('vel.npy')}", "--in", f"life={path('life.npy')}",
        "--out", f"pos={path('p2.npy')}", "--out", f"vel={path('v2.npy')}", "--out", f"life={path('l2.npy')}")
v1 = vel + g * dt
p1 = pos + v1 * dt
below = p1[:, 1] < 0
p2, v2 = p1.copy(), v1.copy()
p2[below, 1] = 0
v2[below, 1] = v1[below, 1] * np.float32(-0.5)
l1 = life - dt
dead = l1 <= 0
p2[dead] = 0
v2[dead] = [0, 5, 0]
l1[dead] = 1
ok = all(same_bits(np.load(path(a)), b) for a, b in (("p2.npy", p2), ("v2.npy", v2), ("l2.npy", l1)))
report("evolve", ok, f"n={m}, {int(below.sum())} bounced, {int(dead.sum())} reset, bit-exact", s)

# MDH on real atoms: all 8,279 atoms of mache.pqr (data/cache, from scripts/fetch_data.sh)
# on a 32^3 grid around the molecule, vs an f64 reference; tolerance 1e-5 of max |V|.
pqr = os.path.join(os.path.dirname(__file__), "..", "data", "cache", "mache.pqr")
rows = [l.split() for l in open(pqr) if l.startswith(("ATOM", "HETATM"))]
atoms = np.array([[float(r[-5]), float(r[-4]), float(r[-3]), float(r[-2])] for r in rows], dtype=np.float32)
np.save(path("atoms.npy"), atoms)
G = 32
lo, hi = atoms[:, :3].min(0), atoms[:, :3].max(0)
sp = np.float32(float((hi - lo).max()) / (G - 1))
org = (lo - np.float32(0.0137)).astype(np.float32)
s = run("mdh.weft", "--shape", f"{G},{G},{G}", "--in", f"origin={org[0]},{org[1]},{org[2]}",
        "--in", f"spacing={sp}", "--in", f"atoms={path('atoms.npy')}", "--out", f"potential={path('pot.npy')}")
k, j, i = np.meshgrid(np.arange(G), np.arange(G), np.arange(G), indexing="ij")
idx = np.stack([i, j, k], axis=-1).reshape(-1, 3).astype(np.float32)
pts = (org[None, :] + idx * sp).astype(np.float64)  # the same f32 grid points, in f64
a64 = atoms.astype(np.float64)
ref = np.zeros(len(pts))
for c in range(0, len(a64), 128):
    d = pts[:, None, :] - a64[None, c:c + 128, :3]
    ref += (a64[None, c:c + 128, 3] / np.sqrt((d * d).sum(-1))).sum(-1)
got = np.load(path("pot.npy")).reshape(-1).astype(np.float64)
err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
report("mdh", err < 1e-5, f"mache.pqr {len(atoms)} atoms x {G}^3 points, max error {err:.1e} of max |V| (tol 1e-5)", s)

# Boundary modes: 3-tap box filter under clamp, repeat, constant(0).
a = rng.standard_normal(1000, dtype=np.float32)
np.save(path("a.npy"), a)
ok_all = True
total = 0.0
for mode, padded in (("clamp", np.pad(a, 1, mode="edge")), ("repeat", np.pad(a, 1, mode="wrap")),
                     ("constant", np.pad(a, 1, mode="constant"))):
    total += run("boundary.weft", "--program", f"blur_{mode}", "--shape", "1000", "--in", f"a={path('a.npy')}",
                 "--out", f"b={path('b.npy')}")
    want = ((padded[:-2] + padded[1:-1]) + padded[2:]) / np.float32(3)
    ok_all &= same_bits(np.load(path("b.npy")), want)
report("boundary", ok_all, "clamp, repeat, constant(0): bit-exact vs numpy padding", total)

# EP (NPB 3.3 class S): 4096 elements of 4096 pairs, totals with --sum.
cmd = [WEFT, "run", os.path.join(EX, "ep.weft"), "--shape", "4096", "--in", "per=4096", "--sum", "sx", "--sum", "sy"]
t = time.perf_counter()
out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
s = time.perf_counter() - t
sums = {l.split("(")[1].split(")")[0]: float(l.split("= ")[1]) for l in out.splitlines() if l.startswith("sum(")}
rel = max(abs(sums["sx"] / -3.247834652034740e3 - 1), abs(sums["sy"] / -6.958407078382297e3 - 1))
report("ep", rel <= 1e-8, f"class S, 2^24 pairs: sx {sums['sx']:.12e} sy {sums['sy']:.12e}, rel. error {rel:.1e} (NPB: 1e-8)", s)

# Jacobi to a tolerance: weft run --iterate/--feed/--until.
n = 64
u0 = np.zeros((n, n), np.float32)
u0[0] = 1
np.save(path("u0.npy"), u0)
cmd = [WEFT, "run", os.path.join(EX, "jacobi.weft"), "--shape", f"{n},{n}", "--in", f"u={path('u0.npy')}",
       "--iterate", "100000", "--feed", "u_next=u", "--until", "delta<1e-4", "--out", f"u_next={path('u.npy')}"]
t = time.perf_counter()
out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
s = time.perf_counter() - t
sweeps = int(out.split()[1])
ref = u0.astype(np.float64)
for _ in range(sweeps):
    nxt = ref.copy()
    nxt[1:-1, 1:-1] = 0.25 * ((ref[:-2, 1:-1] + ref[2:, 1:-1]) + (ref[1:-1, :-2] + ref[1:-1, 2:]))
    ref = nxt
err = np.max(np.abs(np.load(path("u.npy")) - ref))
report("jacobi", err <= 1e-4 and "converged" in out, f"{n}x{n}, {sweeps} sweeps to max change < 1e-4, max error vs f64 {err:.1e} (tol 1e-4)", s)

if failures:
    print(f"FAILED: {', '.join(failures)}")
    sys.exit(1)
print("all workloads match their references")
