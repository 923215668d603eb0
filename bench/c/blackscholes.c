// Black-Scholes (MC#'s finance example; NVIDIA's BlackScholes sample): European call and put
// for n options in f32 with the polynomial CND of docs/workloads.md; OpenMP over options
// (gcc vectorises the loop, logf/expf included, under -ffast-math).
// Usage: blackscholes DIR REPS IMPL n R V
//   reads DIR/bs_s.bin, DIR/bs_x.bin, DIR/bs_t.bin (n f32 each);
//   writes DIR/bs_call.IMPL.bin and DIR/bs_put.IMPL.bin (n f32 each); stdout: median seconds.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define PROG "blackscholes"
#define USAGE "usage: blackscholes DIR REPS IMPL n R V\n"
#include "baseline.h"

// The cumulative normal distribution by the Abramowitz-Stegun polynomial.
static inline float cnd(float d) {
    const float A1 = 0.31938153f, A2 = -0.356563782f, A3 = 1.781477937f, A4 = -1.821255978f, A5 = 1.330274429f;
    float K = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = 0.3989422804014327f * expf(-0.5f * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    return d > 0.0f ? 1.0f - c : c;
}

static void bs(const float *restrict S, const float *restrict X, const float *restrict T,
               float *restrict call, float *restrict put, long n, float R, float V) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        float s = S[i], x = X[i], t = T[i];
        float vst = V * sqrtf(t);
        float d1 = (logf(s / x) + (R + 0.5f * V * V) * t) / vst;
        float d2 = d1 - vst;
        float c1 = cnd(d1), c2 = cnd(d2);
        float xe = x * expf(-R * t);
        call[i] = s * c1 - xe * c2;
        put[i] = xe * (1.0f - c2) - s * (1.0f - c1);
    }
}

int main(int argc, char **argv) {
    if (argc != 7) usage();
    const char *dir = argv[1], *impl = argv[3];
    int reps = (int)arg_long(argv[2], 1, LONG_MAX);
    long n = arg_long(argv[4], 0, LONG_MAX);
    float R = (float)arg_double(argv[5], -INFINITY), V = (float)arg_double(argv[6], -INFINITY);

    const float *S = load(dir, "bs_s", sizeof(float), n);
    const float *X = load(dir, "bs_x", sizeof(float), n);
    const float *T = load(dir, "bs_t", sizeof(float), n);
    float *call = malloc(n * sizeof *call + 1), *put = malloc(n * sizeof *put + 1);
    double *t = malloc(reps * sizeof *t);
    if (!call || !put || !t) { fprintf(stderr, "blackscholes: out of memory\n"); return 1; }
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) call[i] = put[i] = 0.0f;  // first touch by the options' threads

    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        bs(S, X, T, call, put, n, R, V);
        t[r] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    store(dir, "bs_call", impl, call, sizeof *call, n);
    store(dir, "bs_put", impl, put, sizeof *put, n);
    printf("%.9f\n", t[reps / 2]);
    return 0;
}
