// Jacobi (Lee et al.'s JACOBI): Laplace's equation on an n x n f32 grid, Dirichlet boundary,
// as docs/workloads.md specifies. Double-buffered sweeps, OpenMP over rows inside one parallel
// region; every CHECK-th sweep also reduces delta = max |u_new - u| in the same pass and the
// run stops when delta < tol. Every repetition restarts from u0: the first sweep reads u0 and
// the two buffers keep u0's boundary, which no sweep writes.
// Usage: jacobi DIR REPS IMPL n sweeps tol
//   reads DIR/jacobi_u0.bin (n*n f32), writes DIR/jacobi_u.IMPL.bin (n*n f32);
//   stdout: median seconds, then "sweeps S delta D" (D: delta of the last check sweep, 0 if none).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define CHECK 10

#define PROG "jacobi"
#define USAGE "usage: jacobi DIR REPS IMPL n sweeps tol\n"
#include "baseline.h"

// One interior row: o[j] for 1 <= j < n-1 from the rows above (up), at (mid) and below (dn).
static inline void row(const float *restrict up, const float *restrict mid, const float *restrict dn,
                       float *restrict o, long n) {
    for (long j = 1; j < n - 1; j++)
        o[j] = 0.25f * ((up[j] + dn[j]) + (mid[j - 1] + mid[j + 1]));
}
// The same, also returning max_j |o[j] - mid[j]|.
static inline float row_check(const float *restrict up, const float *restrict mid, const float *restrict dn,
                              float *restrict o, long n) {
    float dm = 0.0f;
    #pragma omp simd reduction(max:dm)
    for (long j = 1; j < n - 1; j++) {
        float v = 0.25f * ((up[j] + dn[j]) + (mid[j - 1] + mid[j + 1]));
        o[j] = v;
        float d = fabsf(v - mid[j]);
        dm = d > dm ? d : dm;
    }
    return dm;
}

int main(int argc, char **argv) {
    if (argc != 7) usage();
    const char *dir = argv[1], *impl = argv[3];
    int reps = (int)arg_long(argv[2], 1, LONG_MAX);
    long n = arg_long(argv[4], 1, LONG_MAX), sweeps = arg_long(argv[5], 0, LONG_MAX);
    double tol = arg_double(argv[6], 0);
    size_t nn = (size_t)n * (size_t)n;

    const float *u0 = load(dir, "jacobi_u0", sizeof(float), nn);
    float *buf[2];
    for (int k = 0; k < 2; k++) {
        buf[k] = malloc(nn * sizeof(float));
        if (!buf[k]) { fprintf(stderr, "jacobi: out of memory\n"); return 1; }
        // First touch by the threads that sweep these rows; both buffers start as u0, so they
        // hold its boundary for good (sweeps write interior points only).
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) buf[k][i * n + j] = u0[i * n + j];
    }
    double *t = malloc(reps * sizeof *t);
    long ran = 0;
    float delta = 0.0f;

    for (int r = 0; r < reps; r++) {
        float dmax = 0.0f;  // shared: the reduction target of the check sweeps
        double t0 = omp_get_wtime();
        #pragma omp parallel
        {
            const float *in = u0;
            long s;
            float last = 0.0f;
            for (s = 1; s <= sweeps; s++) {
                float *out = buf[(s - 1) & 1];
                if (s % CHECK == 0) {
                    #pragma omp single
                    dmax = 0.0f;  // (its barrier orders this before the reduction)
                    #pragma omp for schedule(static) reduction(max:dmax)
                    for (long i = 1; i < n - 1; i++) {
                        float d = row_check(in + (i - 1) * n, in + i * n, in + (i + 1) * n, out + i * n, n);
                        dmax = d > dmax ? d : dmax;
                    }
                    // After the loop's barrier every thread reads the same dmax; the next write
                    // of dmax comes CHECK sweeps (and barriers) later.
                    last = dmax;
                    in = out;
                    if ((double)last < tol) break;
                } else {
                    #pragma omp for schedule(static)
                    for (long i = 1; i < n - 1; i++)
                        row(in + (i - 1) * n, in + i * n, in + (i + 1) * n, out + i * n, n);
                    in = out;
                }
            }
            #pragma omp single nowait
            { ran = s > sweeps ? sweeps : s; delta = last; }
        }
        t[r] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    const float *u = ran == 0 ? u0 : buf[(ran - 1) & 1];
    store(dir, "jacobi_u", impl, u, sizeof(float), nn);
    printf("%.9f\n", t[reps / 2]);
    printf("sweeps %ld delta %.17g\n", ran, (double)delta);
    return 0;
}
