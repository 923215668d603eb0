#!/usr/bin/env python3
"""Python baselines (numpy and numba) for the workloads of docs/workloads.md.

Usage: python3 bench/py/workloads.py IMPL WORKLOAD DIR REPS ARGS...
  IMPL      numpy | numba
  WORKLOAD  mdh | jacobi | spmv | cg | ep | coins | blackscholes
  ARGS      mdh: NA nk nj ni ox oy oz spacing     jacobi: n sweeps tol
            spmv: n nnz                           cg: n nnz maxit tol
            ep: M                                 coins: h w rmin rmax npeaks thresh
            blackscholes: n R V

Protocol (docs/workloads.md): raw little-endian inputs are read from DIR, outputs are
written to DIR/<output>.<IMPL>.bin (the output names of the doc, e.g. jacobi_u, bs_call),
line 1 of stdout is the median of REPS timed runs in seconds (time.perf_counter around
the computation only: input reading, per-run state reset and output writing are outside),
later lines are the `key value...` pairs of the doc. One untimed warm-up run precedes the
timed runs, so that numba's JIT compile time (and numpy's first-touch costs) are excluded.
Exit 1 (stderr names the file) when an input is missing or malformed, 2 on bad usage,
3 when IMPL is numba and numba cannot be imported (the bench reads that as "not available").

numpy: idiomatic vectorised numpy, float32 where the doc says f32 (scalars are np.float32
so nothing is silently upcast), float64 where it says f64. numba: @njit(parallel=True,
fastmath=True) with prange, as in bench/mdh_numba.py; fastmath is what a numba user
would write, and it lets LLVM reassociate float sums (results may differ from numpy in the
last bits).
"""
import math
import os
import sys
import time

import numpy as np

F32 = np.float32
F64 = np.float64

# Black-Scholes constants, f32 (module globals: numba freezes them as float32 constants).
BS_A1, BS_A2, BS_A3, BS_A4, BS_A5 = (F32(0.31938153), F32(-0.356563782), F32(1.781477937),
                                     F32(-1.821255978), F32(1.330274429))
BS_K = F32(0.2316419)
BS_RSQRT2PI = F32(0.3989422804014327)
ONE32, HALF32, TWO32, QUARTER32 = F32(1.0), F32(0.5), F32(2.0), F32(0.25)

# EP (NAS): x_{k+1} = a x_k mod 2^46. uint64 products wrap mod 2^64, which is exact mod
# 2^46 after masking, since 2^46 divides 2^64.
EP_A = 5 ** 13
EP_S = 271828183
EP_MASK = (1 << 46) - 1
EP_R46 = 2.0 ** -46
EP_BATCH = 1 << 16          # pairs per batch (NPB's 2^MK, MK = 16)
EP_A_U = np.uint64(EP_A)
EP_MASK_U = np.uint64(EP_MASK)


def die(msg, code=1):
    print(msg, file=sys.stderr)
    sys.exit(code)


def load(d, name, dtype, count):
    path = os.path.join(d, name)
    if not os.path.isfile(path):
        die(f"missing input file {path}")
    a = np.fromfile(path, dtype=dtype)
    if a.size != count:
        die(f"malformed input file {path}: {a.size} values of {np.dtype(dtype)}, expected {count}")
    return a


def save(d, name, impl, arr, dtype):
    np.ascontiguousarray(arr, dtype=dtype).tofile(os.path.join(d, f"{name}.{impl}.bin"))


def bench(reps, setup, compute):
    """One untimed warm-up run, then `reps` timed runs of compute(*setup()); returns the
    median (upper median for even reps, as the C baselines) and the last result."""
    res = compute(*setup())
    ts = []
    for _ in range(reps):
        state = setup()
        t0 = time.perf_counter()
        res = compute(*state)
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2], res


def fmt(x):
    return repr(float(x))


# ----------------------------------------------------------------------------- numpy

def mdh_np(atoms, nk, nj, ni, ox, oy, oz, sp):
    ax, ay, az, aq = (np.ascontiguousarray(atoms[:, c]) for c in range(4))
    # point (k, j, i) at origin + (i, j, k) * spacing, f32 as in bench/c/mdh.c
    gx = ox + np.arange(ni, dtype=F32) * sp
    gy = oy + np.arange(nj, dtype=F32) * sp
    gz = oz + np.arange(nk, dtype=F32) * sp
    X = np.broadcast_to(gx[None, None, :], (nk, nj, ni)).ravel()
    Y = np.broadcast_to(gy[None, :, None], (nk, nj, ni)).ravel()
    Z = np.broadcast_to(gz[:, None, None], (nk, nj, ni)).ravel()
    out = np.empty(nk * nj * ni, dtype=F32)
    block = max(1, (1 << 20) // max(1, len(aq)))   # points per block: ~4 MB temporaries
    for s in range(0, out.size, block):
        dx = X[s:s + block, None] - ax
        dy = Y[s:s + block, None] - ay
        dz = Z[s:s + block, None] - az
        out[s:s + block] = (aq / np.sqrt(dx * dx + dy * dy + dz * dz)).sum(axis=1)
    return out


def jacobi_np(u, v, sweeps, tol):
    delta, s = math.nan, 0
    while s < sweeps:
        s += 1
        v[1:-1, 1:-1] = QUARTER32 * ((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]))
        u, v = v, u
        if s % 10 == 0:
            delta = float(np.abs(u - v).max())
            if delta < tol:
                break
    return u, s, delta


def spmv_np(rows, col, val, x, n):
    # bincount sums the weights in k order (CSR expanded to row indices once, untimed)
    return np.bincount(rows, weights=val * x[col], minlength=n)


def cg_np(rows, col, val, b, maxit, tol):
    n = b.size
    x = np.zeros(n)
    r = b.copy()
    p = b.copy()
    rr = r @ r
    bnorm = math.sqrt(b @ b)
    k, res = 0, math.sqrt(rr) / bnorm
    while k < maxit:
        k += 1
        q = spmv_np(rows, col, val, p, n)
        alpha = rr / (p @ q)
        x += alpha * p
        r -= alpha * q
        rr1 = r @ r
        res = math.sqrt(rr1) / bnorm
        if res < tol:
            break
        p = r + (rr1 / rr) * p
        rr = rr1
    return x, k, res


def ep_np(m):
    npairs = 1 << m
    lanes = min(npairs, EP_BATCH)       # each lane a batch of `per` consecutive pairs
    per = npairs // lanes
    # lane l starts at pair l*per: seed s * a^(2 l per) mod 2^46, by doubling in uint64
    step = pow(EP_A, 2 * per, 1 << 46)
    x = np.array([EP_S], dtype=np.uint64)
    while x.size < lanes:
        mult = np.uint64(pow(step, x.size, 1 << 46))
        x = np.concatenate([x, (x * mult) & EP_MASK_U])
    x = x[:lanes]
    sx = sy = 0.0
    q = np.zeros(10, dtype=np.int64)
    for _ in range(per):
        x = (x * EP_A_U) & EP_MASK_U
        x1 = 2.0 * (x * EP_R46) - 1.0
        x = (x * EP_A_U) & EP_MASK_U
        x2 = 2.0 * (x * EP_R46) - 1.0
        t = x1 * x1 + x2 * x2
        ok = t <= 1.0
        t, x1, x2 = t[ok], x1[ok], x2[ok]
        f = np.sqrt(-2.0 * np.log(t) / t)
        X, Y = x1 * f, x2 * f
        sx += X.sum()
        sy += Y.sum()
        q += np.bincount(np.maximum(np.abs(X), np.abs(Y)).astype(np.int64), minlength=10)[:10]
    return sx, sy, q


def ring_masks(rmin, rmax):
    """Ring offsets per radius, row-major in (dy, dx): R-0.5 <= sqrt(dy²+dx²) < R+0.5,
    tested exactly in integers as (2R-1)² <= 4(dy²+dx²) < (2R+1)²."""
    masks = []
    for R in range(rmin, rmax + 1):
        d = np.arange(-R, R + 1)
        dy, dx = np.meshgrid(d, d, indexing="ij")
        d4 = 4 * (dy * dy + dx * dx)
        sel = ((2 * R - 1) ** 2 <= d4) & (d4 < (2 * R + 1) ** 2)
        masks.append((dy[sel].astype(np.int32), dx[sel].astype(np.int32)))
    return masks


def coins_np(img, rmin, rmax, masks, npeaks, thresh):
    h, w = img.shape
    P = np.pad(img, 1, mode="edge")
    gx = (P[:-2, 2:] + 2 * P[1:-1, 2:] + P[2:, 2:]) - (P[:-2, :-2] + 2 * P[1:-1, :-2] + P[2:, :-2])
    gy = (P[2:, :-2] + 2 * P[2:, 1:-1] + P[2:, 2:]) - (P[:-2, :-2] + 2 * P[:-2, 1:-1] + P[:-2, 2:])
    e = np.sqrt(gx * gx + gy * gy)
    pad = rmax
    E = np.pad(e, pad, mode="edge")
    best = np.full((h, w), -1.0, dtype=F32)   # scores are >= 0
    rad = np.zeros((h, w), dtype=np.int32)
    acc = np.empty((h, w), dtype=F32)
    for R, (dys, dxs) in zip(range(rmin, rmax + 1), masks):
        acc.fill(0)
        for dy, dx in zip(dys.tolist(), dxs.tolist()):
            acc += E[pad + dy:pad + dy + h, pad + dx:pad + dx + w]
        s = acc / F32(len(dys))
        better = s > best                      # strict: the smallest R keeps ties
        best = np.where(better, s, best)
        rad = np.where(better, np.int32(R), rad)
    return best, rad, peaks_np(best, rad, npeaks, thresh)


def peaks_np(best, rad, npeaks, thresh):
    h, w = best.shape
    b = best.copy()
    yy, xx = np.ogrid[:h, :w]
    peaks = []
    for _ in range(npeaks):
        p = int(np.argmax(b))
        if b.flat[p] < thresh:
            break
        py, px = divmod(p, w)
        r = int(rad.flat[p])
        peaks.append((py, px, r))
        b[(yy - py) ** 2 + (xx - px) ** 2 < r * r] = 0
    return peaks


def cnd_np(d):
    k = ONE32 / (ONE32 + BS_K * np.abs(d))
    c = BS_RSQRT2PI * np.exp(-HALF32 * d * d) * (k * (BS_A1 + k * (BS_A2 + k * (BS_A3 + k * (BS_A4 + k * BS_A5)))))
    return np.where(d > 0, ONE32 - c, c)


def bs_np(S, X, T, R, V):
    vst = V * np.sqrt(T)
    d1 = (np.log(S / X) + (R + HALF32 * V * V) * T) / vst
    d2 = d1 - vst
    c1, c2 = cnd_np(d1), cnd_np(d2)
    xe = X * np.exp(-R * T)
    return S * c1 - xe * c2, xe * (ONE32 - c2) - S * (ONE32 - c1)


NUMPY = dict(mdh=mdh_np, jacobi=jacobi_np, spmv=spmv_np, cg=cg_np, ep=ep_np,
             coins=coins_np, blackscholes=bs_np)


# ----------------------------------------------------------------------------- numba

def numba_kernels():
    try:
        from numba import njit, prange
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        die(f"numba is not available ({e}); pip install numba", 3)

    # fastmath=True throughout: what a numba user writes; it allows reassociation.
    @njit(parallel=True, fastmath=True)
    def mdh_k(ax, ay, az, aq, nk, nj, ni, ox, oy, oz, sp, out):
        for p in prange(nk * nj * ni):
            i = p % ni
            j = (p // ni) % nj
            k = p // (ni * nj)
            x = F32(ox + F32(i) * sp)
            y = F32(oy + F32(j) * sp)
            z = F32(oz + F32(k) * sp)
            e = F32(0.0)
            for a in range(ax.shape[0]):
                dx = x - ax[a]
                dy = y - ay[a]
                dz = z - az[a]
                e += aq[a] / np.sqrt(dx * dx + dy * dy + dz * dz)
            out[p] = e

    def mdh(atoms, nk, nj, ni, ox, oy, oz, sp, out):
        ax, ay, az, aq = (np.ascontiguousarray(atoms[:, c]) for c in range(4))
        mdh_k(ax, ay, az, aq, nk, nj, ni, ox, oy, oz, sp, out)
        return out

    @njit(parallel=True, fastmath=True)
    def jacobi(u, v, sweeps, tol, rowmax):
        n = u.shape[0]
        delta = np.nan
        s = 0
        while s < sweeps:
            s += 1
            check = s % 10 == 0
            for i in prange(1, n - 1):
                m = F32(0.0)
                for j in range(1, n - 1):
                    nv = QUARTER32 * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))
                    if check:
                        m = max(m, abs(nv - u[i, j]))
                    v[i, j] = nv
                rowmax[i] = m
            u, v = v, u
            if check:
                delta = F64(rowmax.max())
                if delta < tol:
                    break
        return u, s, delta

    @njit(parallel=True, fastmath=True)
    def spmv(rowptr, col, val, x, y):
        for i in prange(y.shape[0]):
            s = 0.0
            for k in range(rowptr[i], rowptr[i + 1]):
                s += val[k] * x[col[k]]
            y[i] = s
        return y

    @njit(parallel=True, fastmath=True)
    def cg(rowptr, col, val, b, maxit, tol, x, r, p, q):
        n = b.shape[0]
        bb = 0.0
        for i in prange(n):
            x[i] = 0.0
            r[i] = b[i]
            p[i] = b[i]
            bb += b[i] * b[i]
        rr = bb
        bnorm = np.sqrt(bb)
        k = 0
        res = np.sqrt(rr) / bnorm
        while k < maxit:
            k += 1
            pq = 0.0
            for i in prange(n):           # q = A p, fused with p·q
                s = 0.0
                for kk in range(rowptr[i], rowptr[i + 1]):
                    s += val[kk] * p[col[kk]]
                q[i] = s
                pq += p[i] * s
            alpha = rr / pq
            rr1 = 0.0
            for i in prange(n):
                x[i] += alpha * p[i]
                r[i] -= alpha * q[i]
                rr1 += r[i] * r[i]
            res = np.sqrt(rr1) / bnorm
            if res < tol:
                break
            beta = rr1 / rr
            for i in prange(n):
                p[i] = r[i] + beta * p[i]
            rr = rr1
        return x, k, res

    @njit(parallel=True, fastmath=True)
    def ep(m):
        npairs = 1 << m
        batch = min(npairs, EP_BATCH)
        nb = npairs // batch
        qs = np.zeros((nb, 10), dtype=np.int64)
        sx = 0.0
        sy = 0.0
        for b in prange(nb):
            # jump-ahead: seed s * a^(2 * first pair) by square and multiply, exact in u64
            e = 2 * b * batch
            x = np.uint64(EP_S)
            pw = EP_A_U
            while e > 0:
                if e & 1:
                    x = (x * pw) & EP_MASK_U
                pw = (pw * pw) & EP_MASK_U
                e >>= 1
            lx = 0.0
            ly = 0.0
            for _ in range(batch):
                x = (x * EP_A_U) & EP_MASK_U
                x1 = 2.0 * (F64(x) * EP_R46) - 1.0
                x = (x * EP_A_U) & EP_MASK_U
                x2 = 2.0 * (F64(x) * EP_R46) - 1.0
                t = x1 * x1 + x2 * x2
                if t <= 1.0:
                    f = np.sqrt(-2.0 * np.log(t) / t)
                    X = x1 * f
                    Y = x2 * f
                    lx += X
                    ly += Y
                    l = np.int64(max(abs(X), abs(Y)))
                    if l < 10:
                        qs[b, l] += 1
            sx += lx
            sy += ly
        return sx, sy, qs.sum(axis=0)

    @njit(parallel=True, fastmath=True)
    def coins_k(img, rmin, rmax, ody, odx, ostart, e, best, rad):
        h, w = img.shape
        pad = rmax
        E = np.empty((h + 2 * pad, w + 2 * pad), dtype=F32)   # edges, clamped border
        for y in prange(h):
            ym = max(y - 1, 0)
            yp = min(y + 1, h - 1)
            for x in range(w):
                xm = max(x - 1, 0)
                xp = min(x + 1, w - 1)
                gx = (img[ym, xp] + TWO32 * img[y, xp] + img[yp, xp]) - (img[ym, xm] + TWO32 * img[y, xm] + img[yp, xm])
                gy = (img[yp, xm] + TWO32 * img[yp, x] + img[yp, xp]) - (img[ym, xm] + TWO32 * img[ym, x] + img[ym, xp])
                e[y, x] = np.sqrt(gx * gx + gy * gy)
        for yy in prange(h + 2 * pad):
            y = min(max(yy - pad, 0), h - 1)
            for xx in range(w + 2 * pad):
                E[yy, xx] = e[y, min(max(xx - pad, 0), w - 1)]
        for y in prange(h):
            acc = np.empty(w, dtype=F32)
            for x in range(w):
                best[y, x] = F32(-1.0)   # scores are >= 0
            for R in range(rmin, rmax + 1):
                acc[:] = 0
                for o in range(ostart[R - rmin], ostart[R - rmin + 1]):   # mask order
                    c0 = pad + odx[o]
                    er = E[y + pad + ody[o], c0:c0 + w]
                    for x in range(w):
                        acc[x] += er[x]
                cnt = F32(ostart[R - rmin + 1] - ostart[R - rmin])
                for x in range(w):
                    s = acc[x] / cnt
                    if s > best[y, x]:   # strict: the smallest R keeps ties
                        best[y, x] = s
                        rad[y, x] = R

    def coins(img, rmin, rmax, masks, npeaks, thresh, e, best, rad):
        ody, odx, ostart = masks
        coins_k(img, rmin, rmax, ody, odx, ostart, e, best, rad)
        return best, rad, peaks(best, rad, npeaks, thresh)

    @njit(fastmath=True)
    def peaks_k(best, rad, npeaks, thresh, out):
        h, w = best.shape
        b = best.copy()
        k = 0
        for _ in range(npeaks):
            p = np.argmax(b)          # first index on ties
            py, px = p // w, p % w
            if b[py, px] < thresh:
                break
            r = rad[py, px]
            out[k, 0], out[k, 1], out[k, 2] = py, px, r
            k += 1
            for y in range(max(0, py - r), min(h, py + r + 1)):
                for x in range(max(0, px - r), min(w, px + r + 1)):
                    if (y - py) ** 2 + (x - px) ** 2 < r * r:
                        b[y, x] = 0
        return k

    def peaks(best, rad, npeaks, thresh):
        out = np.zeros((max(npeaks, 0), 3), dtype=np.int64)
        k = peaks_k(best, rad, npeaks, thresh, out)
        return [tuple(int(v) for v in row) for row in out[:k]]

    @njit(fastmath=True)
    def cnd(d):
        k = ONE32 / (ONE32 + BS_K * abs(d))
        c = BS_RSQRT2PI * np.exp(-HALF32 * d * d) * (k * (BS_A1 + k * (BS_A2 + k * (BS_A3 + k * (BS_A4 + k * BS_A5)))))
        return ONE32 - c if d > 0 else c

    @njit(parallel=True, fastmath=True)
    def bs(S, X, T, R, V, call, put):
        for i in prange(S.shape[0]):
            vst = V * np.sqrt(T[i])
            d1 = (np.log(S[i] / X[i]) + (R + HALF32 * V * V) * T[i]) / vst
            d2 = d1 - vst
            c1 = cnd(d1)
            c2 = cnd(d2)
            xe = X[i] * np.exp(-R * T[i])
            call[i] = S[i] * c1 - xe * c2
            put[i] = xe * (ONE32 - c2) - S[i] * (ONE32 - c1)
        return call, put

    return dict(mdh=mdh, jacobi=jacobi, spmv=spmv, cg=cg, ep=ep, coins=coins, blackscholes=bs)


# ----------------------------------------------------------------------------- driver

def main():
    argv = sys.argv[1:]
    if len(argv) < 4 or argv[0] not in ("numpy", "numba"):
        die(__doc__, 2)
    impl, work, d, reps, args = argv[0], argv[1], argv[2], int(argv[3]), argv[4:]
    nargs = dict(mdh=8, jacobi=3, spmv=2, cg=4, ep=1, coins=6, blackscholes=3)
    if work not in nargs:
        die(f"unknown workload {work!r}; one of {' '.join(nargs)}", 2)
    if len(args) != nargs[work] or reps < 1:
        die(f"{work} takes {nargs[work]} arguments after IMPL WORKLOAD DIR REPS (REPS >= 1)", 2)
    K = NUMPY if impl == "numpy" else numba_kernels()
    nb = impl == "numba"
    lines = []

    if work == "mdh":
        na, nk, nj, ni = map(int, args[:4])
        ox, oy, oz, sp = map(F32, args[4:8])
        atoms = load(d, "mdh_atoms.bin", "<f4", na * 4).reshape(na, 4)
        out = np.empty(nk * nj * ni, dtype=F32)
        extra = (out,) if nb else ()
        t, pot = bench(reps, lambda: (atoms, nk, nj, ni, ox, oy, oz, sp) + extra, K["mdh"])
        save(d, "mdh_pot", impl, pot, "<f4")

    elif work == "jacobi":
        n, sweeps, tol = int(args[0]), int(args[1]), float(args[2])
        u0 = load(d, "jacobi_u0.bin", "<f4", n * n).reshape(n, n)
        rowmax = np.zeros(n, dtype=F32)
        extra = (rowmax,) if nb else ()
        t, (u, s, delta) = bench(reps, lambda: (u0.copy(), u0.copy(), sweeps, tol) + extra, K["jacobi"])
        save(d, "jacobi_u", impl, u, "<f4")
        lines.append(f"sweeps {s} delta {fmt(delta)}")

    elif work in ("spmv", "cg"):
        n, nnz = int(args[0]), int(args[1])
        rowptr = load(d, "csr_rowptr.bin", "<i4", n + 1)
        col = load(d, "csr_col.bin", "<i4", nnz)
        val = load(d, "csr_val.bin", "<f8", nnz)
        if rowptr[0] != 0 or rowptr[-1] != nnz or np.any(np.diff(rowptr) < 0) or \
                (nnz and (col.min() < 0 or col.max() >= n)):
            die(f"malformed CSR in {os.path.join(d, 'csr_rowptr.bin')} / csr_col.bin")
        rows = np.repeat(np.arange(n, dtype=np.intp), np.diff(rowptr))
        A = (rowptr, col, val) if nb else (rows, col, val)
        if work == "spmv":
            x = load(d, "spmv_x.bin", "<f8", n)
            extra = (np.empty(n),) if nb else (n,)
            t, y = bench(reps, lambda: A + (x,) + extra, K["spmv"])
            save(d, "spmv_y", impl, y, "<f8")
        else:
            maxit, tol = int(args[2]), float(args[3])
            b = load(d, "cg_b.bin", "<f8", n)
            extra = tuple(np.empty(n) for _ in range(4)) if nb else ()
            t, (x, k, res) = bench(reps, lambda: A + (b, maxit, tol) + extra, K["cg"])
            save(d, "cg_x", impl, x, "<f8")
            lines.append(f"iterations {k} residual {fmt(res)}")

    elif work == "ep":
        m = int(args[0])
        t, (sx, sy, q) = bench(reps, lambda: (m,), K["ep"])
        lines.append(f"sx {float(sx):.15e} sy {float(sy):.15e}")
        lines.append("q " + " ".join(str(int(v)) for v in q))

    elif work == "coins":
        h, w, rmin, rmax, npeaks = map(int, args[:5])
        thresh = float(args[5])
        img = load(d, "coins_img.bin", "<f4", h * w).reshape(h, w)
        masks = ring_masks(rmin, rmax)    # constant offset tables, built once (untimed)
        if nb:
            masks = (np.concatenate([m[0] for m in masks]), np.concatenate([m[1] for m in masks]),
                     np.cumsum([0] + [len(m[0]) for m in masks]).astype(np.int64))
        extra = (np.empty((h, w), F32), np.empty((h, w), F32), np.empty((h, w), np.int32)) if nb else ()
        t, (best, rad, pk) = bench(reps, lambda: (img, rmin, rmax, masks, npeaks, thresh) + extra, K["coins"])
        # timed: edges, ring scores, best/rad and the peaks; coins_best is best before the
        # peak loop zeroes the found disks (the peak loop works on a copy)
        save(d, "coins_best", impl, best, "<f4")
        lines.append(f"peaks {len(pk)}")
        lines.extend(f"{y} {x} {r}" for y, x, r in pk)

    elif work == "blackscholes":
        n = int(args[0])
        R, V = F32(args[1]), F32(args[2])
        S = load(d, "bs_s.bin", "<f4", n)
        X = load(d, "bs_x.bin", "<f4", n)
        T = load(d, "bs_t.bin", "<f4", n)
        extra = (np.empty(n, F32), np.empty(n, F32)) if nb else ()
        t, (call, put) = bench(reps, lambda: (S, X, T, R, V) + extra, K["blackscholes"])
        save(d, "bs_call", impl, call, "<f4")
        save(d, "bs_put", impl, put, "<f4")

    print(f"{t:.9f}")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
