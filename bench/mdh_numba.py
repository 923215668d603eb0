"""MDH with numba @njit(parallel=True, fastmath=True), same grid and atoms as bench/c/mdh.c.
Usage: python3 mdh_numba.py ATOMS.bin NATOMS NK NJ NI OX OY OZ SPACING REPS -> median seconds."""
import sys
import time

import numpy as np
from numba import njit, prange


@njit(parallel=True, fastmath=True)
def mdh(ax, ay, az, aq, nk, nj, ni, ox, oy, oz, sp, out):
    for p in prange(nk * nj * ni):
        i = p % ni
        j = (p // ni) % nj
        k = p // (ni * nj)
        x = np.float32(ox + i * sp)
        y = np.float32(oy + j * sp)
        z = np.float32(oz + k * sp)
        e = np.float32(0.0)
        for a in range(ax.shape[0]):
            dx = x - ax[a]
            dy = y - ay[a]
            dz = z - az[a]
            e += aq[a] / np.sqrt(dx * dx + dy * dy + dz * dz)
        out[p] = e


def main():
    path, na, nk, nj, ni = sys.argv[1], *map(int, sys.argv[2:6])
    ox, oy, oz, sp = map(np.float32, sys.argv[6:10])
    reps = int(sys.argv[10])
    atoms = np.fromfile(path, dtype=np.float32, count=na * 4).reshape(na, 4)
    ax, ay, az, aq = (np.ascontiguousarray(atoms[:, c]) for c in range(4))
    out = np.zeros(nk * nj * ni, dtype=np.float32)
    mdh(ax, ay, az, aq, nk, nj, ni, ox, oy, oz, sp, out)  # compile
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        mdh(ax, ay, az, aq, nk, nj, ni, ox, oy, oz, sp, out)
        times.append(time.perf_counter() - t0)
    print(f"{sorted(times)[len(times) // 2]:.9f}")


main()
