// Coin finder (McCool et al.'s RapidMind bead tracking, on scikit-image's coins.png), as
// docs/workloads.md specifies: Sobel edge magnitude, for each radius the mean of the edges
// over a one-pixel ring, the best radius per pixel, then greedy peak picking with the found
// coin's disk cleared. Reads outside the image clamp to the edge (for the image and for the
// edge map). f32 throughout. OpenMP over rows; each ring's sum is accumulated per pixel in
// the ring's row-major offset order, vectorised across a row on an edge-padded copy.
// Usage: coins DIR REPS IMPL h w rmin rmax npeaks thresh
//   reads DIR/coins_img.bin (h*w f32); writes DIR/coins_best.IMPL.bin (h*w f32, max_R s_R
//   before any peak clears it); stdout: median seconds, "peaks K", then "y x r" per peak.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#define PROG "coins"
#define USAGE "usage: coins DIR REPS IMPL h w rmin rmax npeaks thresh\n"
#include "baseline.h"

static inline long clampl(long v, long lo, long hi) { return v < lo ? lo : v > hi ? hi : v; }

// Sobel magnitude at column x from the rows above (a), at (m) and below (b), the columns
// xm, xp being x -+ 1 clamped; sobel_row does a whole row (w values) into e.
static inline float sobel_at(const float *restrict a, const float *restrict m, const float *restrict b,
                             long xm, long x, long xp) {
    float gx = (a[xp] + 2.0f * m[xp] + b[xp]) - (a[xm] + 2.0f * m[xm] + b[xm]);
    float gy = (b[xm] + 2.0f * b[x] + b[xp]) - (a[xm] + 2.0f * a[x] + a[xp]);
    return sqrtf(gx * gx + gy * gy);
}
static void sobel_row(const float *restrict a, const float *restrict m, const float *restrict b,
                      float *restrict e, long w) {
    e[0] = sobel_at(a, m, b, 0, 0, w > 1 ? 1 : 0);
    for (long x = 1; x < w - 1; x++) {
        float gx = (a[x + 1] + 2.0f * m[x + 1] + b[x + 1]) - (a[x - 1] + 2.0f * m[x - 1] + b[x - 1]);
        float gy = (b[x - 1] + 2.0f * b[x] + b[x + 1]) - (a[x - 1] + 2.0f * a[x] + a[x + 1]);
        e[x] = sqrtf(gx * gx + gy * gy);
    }
    if (w > 1) e[w - 1] = sobel_at(a, m, b, w - 2, w - 1, w - 1);
}
static inline void add_row(float *restrict acc, const float *restrict src, long w) {
    for (long x = 0; x < w; x++) acc[x] += src[x];
}
static inline void score_row(const float *restrict acc, float *restrict best, int32_t *restrict rad,
                             long w, float cnt, int32_t R, int first) {
    if (first)
        for (long x = 0; x < w; x++) { best[x] = acc[x] / cnt; rad[x] = R; }
    else
        for (long x = 0; x < w; x++) {
            float s = acc[x] / cnt;
            int better = s > best[x];
            best[x] = better ? s : best[x];
            rad[x] = better ? R : rad[x];
        }
}

int main(int argc, char **argv) {
    if (argc != 10) usage();
    const char *dir = argv[1], *impl = argv[3];
    int reps = (int)arg_long(argv[2], 1, LONG_MAX);
    long h = arg_long(argv[4], 1, LONG_MAX), w = arg_long(argv[5], 1, LONG_MAX);
    long rmin = arg_long(argv[6], 0, LONG_MAX), rmax = arg_long(argv[7], 0, LONG_MAX), npeaks = arg_long(argv[8], 0, LONG_MAX);
    float thresh = (float)arg_double(argv[9], -INFINITY);
    if (rmax < rmin || rmax > 4096) usage();
    const long hw = h * w, P = rmax, W = w + 2 * P, H = h + 2 * P;  // padded edge map: P on each side

    const float *img = load(dir, "coins_img", sizeof(float), hw);
    float *e = malloc(hw * sizeof *e), *ep = malloc(W * H * sizeof *ep);
    float *best = malloc(hw * sizeof *best), *work = malloc(hw * sizeof *work);
    int32_t *rad = malloc(hw * sizeof *rad);
    const int nth = omp_get_max_threads();
    float *accs = malloc((size_t)nth * w * sizeof *accs);
    // Ring masks, radius by radius, as (dy, dx) offsets in row-major order: at most (2P+1)^2 in all.
    const long nr = rmax - rmin + 1, side = 2 * P + 1;
    long *moff = malloc(nr * side * side * sizeof *moff);  // dy * W + dx
    long *mstart = malloc((nr + 1) * sizeof *mstart);
    long *pk = malloc((npeaks + 1) * 3 * sizeof *pk);
    double *t = malloc(reps * sizeof *t);
    if (!e || !ep || !best || !work || !rad || !accs || !moff || !mstart || !pk || !t) { fprintf(stderr, "coins: out of memory\n"); return 1; }
    #pragma omp parallel for schedule(static)
    for (long y = 0; y < h; y++)
        for (long x = 0; x < w; x++) { e[y * w + x] = 0.0f; best[y * w + x] = 0.0f; rad[y * w + x] = 0; work[y * w + x] = 0.0f; }
    memset(ep, 0, W * H * sizeof *ep);
    long npk = 0;

    for (int rep = 0; rep < reps; rep++) {
        double t0 = omp_get_wtime();
        // The rings: R - 0.5 <= sqrt(d2) < R + 0.5 is, for integer d2 and R >= 1,
        // R^2 - R < d2 <= R^2 + R (and d2 = 0 for R = 0).
        mstart[0] = 0;
        for (long k = 0; k < nr; k++) {
            long R = rmin + k, c = mstart[k];
            for (long dy = -R; dy <= R; dy++)
                for (long dx = -R; dx <= R; dx++) {
                    long d2 = dy * dy + dx * dx;
                    if ((R == 0 || d2 > R * R - R) && d2 <= R * R + R) moff[c++] = dy * W + dx;
                }
            mstart[k + 1] = c;
        }
        #pragma omp parallel
        {
            #pragma omp for schedule(static)
            for (long y = 0; y < h; y++)
                sobel_row(img + clampl(y - 1, 0, h - 1) * w, img + y * w, img + clampl(y + 1, 0, h - 1) * w, e + y * w, w);
            #pragma omp for schedule(static)
            for (long yy = 0; yy < H; yy++) {
                const float *src = e + clampl(yy - P, 0, h - 1) * w;
                float *dst = ep + yy * W;
                for (long xx = 0; xx < P; xx++) dst[xx] = src[0];
                for (long x = 0; x < w; x++) dst[P + x] = src[x];
                for (long xx = P + w; xx < W; xx++) dst[xx] = src[w - 1];
            }
            float *acc = accs + (size_t)omp_get_thread_num() * w;
            #pragma omp for schedule(static)
            for (long y = 0; y < h; y++) {
                const float *centre = ep + (y + P) * W + P;  // the padded map at (y, 0)
                for (long k = 0; k < nr; k++) {
                    for (long x = 0; x < w; x++) acc[x] = 0.0f;
                    for (long m = mstart[k]; m < mstart[k + 1]; m++) add_row(acc, centre + moff[m], w);
                    score_row(acc, best + y * w, rad + y * w, w, (float)(mstart[k + 1] - mstart[k]), (int32_t)(rmin + k), k == 0);
                }
            }
            #pragma omp for simd schedule(static)
            for (long i = 0; i < hw; i++) work[i] = best[i];
        }
        // Peaks: arg max (first index on ties) in parallel, then clear the coin's disk.
        npk = 0;
        for (long k = 0; k < npeaks; k++) {
            float bv = -INFINITY;
            long bi = 0;
            #pragma omp parallel
            {
                float v = -INFINITY;
                long vi = 0;
                #pragma omp for schedule(static) nowait
                for (long i = 0; i < hw; i++)
                    if (work[i] > v) { v = work[i]; vi = i; }
                #pragma omp critical
                if (v > bv || (v == bv && vi < bi)) { bv = v; bi = vi; }
            }
            if (bv < thresh) break;
            long py = bi / w, px = bi % w, r = rad[bi];
            pk[3 * npk] = py; pk[3 * npk + 1] = px; pk[3 * npk + 2] = r; npk++;
            for (long y = clampl(py - r, 0, h - 1); y <= clampl(py + r, 0, h - 1); y++)
                for (long x = clampl(px - r, 0, w - 1); x <= clampl(px + r, 0, w - 1); x++)
                    if ((y - py) * (y - py) + (x - px) * (x - px) < r * r) work[y * w + x] = 0.0f;
        }
        t[rep] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    store(dir, "coins_best", impl, best, sizeof *best, hw);
    printf("%.9f\n", t[reps / 2]);
    printf("peaks %ld\n", npk);
    for (long k = 0; k < npk; k++) printf("%ld %ld %ld\n", pk[3 * k], pk[3 * k + 1], pk[3 * k + 2]);
    return 0;
}
