// STREAM-style triad a[i] = s*b[i] + c[i] on f32 (weft's saxpy), OpenMP on all cores.
// Usage: triad N REPS  -> prints the median seconds of one pass.
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 16777216; int reps = argc > 2 ? atoi(argv[2]) : 10;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    #pragma omp parallel for
    for (long i = 0; i < n; i++) { a[i] = 0; b[i] = (float)(i % 1000) * 0.001f; c[i] = 1.0f; }
    double *t = malloc(reps * sizeof *t); const float s = 2.0f;
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        #pragma omp parallel for
        for (long i = 0; i < n; i++) a[i] = s * b[i] + c[i];
        t[r] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    double check = 0; for (long i = 0; i < n; i += 4096) check += a[i];
    printf("%.9f %g\n", t[reps / 2], check);
    return 0;
}
