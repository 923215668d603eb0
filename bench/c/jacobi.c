// Jacobi (Lee et al.'s JACOBI): Laplace's equation on an n x n f32 grid, Dirichlet boundary,
// as docs/workloads.md specifies. Double-buffered sweeps, OpenMP over rows inside one parallel
// region; every CHECK-th sweep also reduces delta = max |u_new - u| in the same pass and the
// run stops when delta < tol. Every repetition restarts from u0: the first sweep reads u0 and
// the two buffers keep u0's boundary, which no sweep writes.
// Usage: jacobi DIR REPS IMPL n sweeps tol
//   reads DIR/jacobi_u0.bin (n*n f32), writes DIR/jacobi_u.IMPL.bin (n*n f32);
//   stdout: median seconds, then "sweeps S delta D" (D: delta of the last check sweep, 0 if none).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the input and output files are little-endian"
#endif

#define CHECK 10

static const char *usage_msg = "usage: jacobi DIR REPS IMPL n sweeps tol\n";
static void usage(void) { fputs(usage_msg, stderr); exit(2); }
static long arg_long(const char *s, long lo) {
    char *e; errno = 0; long v = strtol(s, &e, 10);
    if (!*s || *e || errno || v < lo) usage();
    return v;
}
static double arg_double(const char *s) {
    char *e; errno = 0; double v = strtod(s, &e);
    if (!*s || *e || errno || !(v >= 0)) usage();
    return v;
}
static void path_of(char *buf, size_t len, const char *dir, const char *name, const char *impl) {
    int k = impl ? snprintf(buf, len, "%s/%s.%s.bin", dir, name, impl) : snprintf(buf, len, "%s/%s.bin", dir, name);
    if (k < 0 || (size_t)k >= len) { fprintf(stderr, "jacobi: path too long: %s/%s\n", dir, name); exit(1); }
}
// Reads exactly count elements of size el from DIR/name.bin (exit 1 if missing, short or long).
static void *load(const char *dir, const char *name, size_t el, size_t count) {
    char path[4096]; path_of(path, sizeof path, dir, name, NULL);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "jacobi: cannot open %s\n", path); exit(1); }
    void *p = malloc(el * count + 1);
    if (!p) { fprintf(stderr, "jacobi: out of memory\n"); exit(1); }
    size_t got = fread(p, el, count, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != count || extra) { fprintf(stderr, "jacobi: %s: expected exactly %zu bytes\n", path, el * count); exit(1); }
    return p;
}
static void store(const char *dir, const char *name, const char *impl, const void *p, size_t el, size_t count) {
    char path[4096]; path_of(path, sizeof path, dir, name, impl);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, el, count, f) != count || fclose(f)) { fprintf(stderr, "jacobi: cannot write %s\n", path); exit(1); }
}
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

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
    int reps = (int)arg_long(argv[2], 1);
    long n = arg_long(argv[4], 1), sweeps = arg_long(argv[5], 0);
    double tol = arg_double(argv[6]);
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
