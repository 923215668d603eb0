// EP (NAS Parallel Benchmarks 3.3): 2^M Gaussian pairs by the acceptance-rejection (polar)
// method from the NAS generator x_{k+1} = a x_k mod 2^46, as docs/workloads.md specifies.
// The generator runs in exact u64 arithmetic; the pairs are split in batches of 2^MK pairs
// (NAS's MK = 16), each seeded by jumping ahead to s * a^(2 * first pair) with square and
// multiply; OpenMP over batches with a reduction of sx, sy and the counts q.
// Usage: ep DIR REPS IMPL M
//   no input or output files; stdout: median seconds, "sx SX sy SY", "q Q0 ... Q9".
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define MK 16
#define NQ 10
#define CHUNK 1024                    // pairs generated into a buffer at a time (L1-resident)
#define A_ 1220703125ULL              // 5^13
#define SEED 271828183ULL
#define MASK ((1ULL << 46) - 1)
#define R46 (1.0 / 70368744177664.0)  // 2^-46

#define PROG "ep"
#define USAGE "usage: ep DIR REPS IMPL M\n"
#include "baseline.h"

// a^e mod 2^46 by square and multiply (u64 products wrap mod 2^64, a multiple of 2^46).
static uint64_t pow46(uint64_t a, uint64_t e) {
    uint64_t r = 1;
    for (; e; e >>= 1) {
        if (e & 1) r = (r * a) & MASK;
        a = (a * a) & MASK;
    }
    return r;
}

// Pairs [first, first + count) of the stream; adds to *sx, *sy and q.
static void batch(uint64_t first, uint64_t count, double *sx_out, double *sy_out, uint64_t *q) {
    uint64_t x = (SEED * pow46(A_, 2 * first)) & MASK;  // number 2*first; the pair uses the next two
    double u[2 * CHUNK], gx[CHUNK], gy[CHUNK];
    int gl[CHUNK];
    double sx = 0.0, sy = 0.0;
    for (uint64_t c = 0; c < count; c += CHUNK) {
        int m = count - c < CHUNK ? (int)(count - c) : CHUNK;
        for (int j = 0; j < 2 * m; j++) {
            x = (A_ * x) & MASK;
            u[j] = (double)x * R46;
        }
        // Branch-free pass (gcc vectorises it, log and sqrt included under -ffast-math),
        // then the sums and counts over the accepted pairs (l = NQ marks a rejected one).
        for (int i = 0; i < m; i++) {
            double x1 = 2.0 * u[2 * i] - 1.0, x2 = 2.0 * u[2 * i + 1] - 1.0;
            double t = x1 * x1 + x2 * x2;
            int ok = t <= 1.0;
            double f = ok ? sqrt(-2.0 * log(t) / t) : 0.0;
            double X = x1 * f, Y = x2 * f;
            double ax = fabs(X), ay = fabs(Y);
            gx[i] = X;
            gy[i] = Y;
            gl[i] = ok ? (int)(ax > ay ? ax : ay) : NQ;
        }
        for (int i = 0; i < m; i++) {
            if (gl[i] < NQ) q[gl[i]]++;
            sx += gx[i];  // a rejected pair adds 0
            sy += gy[i];
        }
    }
    *sx_out += sx;
    *sy_out += sy;
}

int main(int argc, char **argv) {
    if (argc != 5) usage();
    int reps = (int)arg_long(argv[2], 1, 1 << 30);
    int M = (int)arg_long(argv[4], 0, 62);
    (void)argv[1]; (void)argv[3];  // EP reads and writes no files
    const uint64_t pairs = 1ULL << M;
    const uint64_t bsize = M < MK ? pairs : 1ULL << MK;
    const long nb = (long)(pairs / bsize);

    double *t = malloc(reps * sizeof *t);
    double sx = 0.0, sy = 0.0;
    uint64_t q[NQ];
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        sx = 0.0; sy = 0.0;
        for (int l = 0; l < NQ; l++) q[l] = 0;
        #pragma omp parallel for schedule(static) reduction(+:sx, sy, q[:NQ])
        for (long k = 0; k < nb; k++) batch((uint64_t)k * bsize, bsize, &sx, &sy, q);
        t[r] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    printf("%.9f\n", t[reps / 2]);
    printf("sx %.17g sy %.17g\n", sx, sy);
    printf("q");
    for (int l = 0; l < NQ; l++) printf(" %llu", (unsigned long long)q[l]);
    printf("\n");
    return 0;
}
