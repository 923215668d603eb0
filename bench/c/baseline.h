// Shared by the C baselines (docs/workloads.md protocol): argument parsing, raw little-endian
// input and output files in DIR, and the median of the timed repetitions. Each baseline
// defines PROG (its name) and USAGE before including this file.
#ifndef WEFT_BASELINE_H
#define WEFT_BASELINE_H
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the input and output files are little-endian"
#endif

__attribute__((unused)) static void usage(void) { fputs(USAGE, stderr); exit(2); }
// An integer in [lo, hi].
__attribute__((unused)) static long arg_long(const char *s, long lo, long hi) {
    char *e; errno = 0; long v = strtol(s, &e, 10);
    if (!*s || *e || errno || v < lo || v > hi) usage();
    return v;
}
// A number at least lo (use -INFINITY for any); NaN is rejected.
__attribute__((unused)) static double arg_double(const char *s, double lo) {
    char *e; errno = 0; double v = strtod(s, &e);
    if (!*s || *e || errno || !(v >= lo)) usage();
    return v;
}
__attribute__((unused)) static void path_of(char *buf, size_t len, const char *dir, const char *name, const char *impl) {
    int k = impl ? snprintf(buf, len, "%s/%s.%s.bin", dir, name, impl) : snprintf(buf, len, "%s/%s.bin", dir, name);
    if (k < 0 || (size_t)k >= len) { fprintf(stderr, PROG ": path too long: %s/%s\n", dir, name); exit(1); }
}
// Reads exactly count elements of size el from DIR/name.bin (exit 1 if missing, short or long).
__attribute__((unused)) static void *load(const char *dir, const char *name, size_t el, size_t count) {
    char path[4096]; path_of(path, sizeof path, dir, name, NULL);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, PROG ": cannot open %s\n", path); exit(1); }
    void *p = malloc(el * count + 1);
    if (!p) { fprintf(stderr, PROG ": out of memory\n"); exit(1); }
    size_t got = fread(p, el, count, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != count || extra) { fprintf(stderr, PROG ": %s: expected exactly %zu bytes\n", path, el * count); exit(1); }
    return p;
}
__attribute__((unused)) static void store(const char *dir, const char *name, const char *impl, const void *p, size_t el, size_t count) {
    char path[4096]; path_of(path, sizeof path, dir, name, impl);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, el, count, f) != count || fclose(f)) { fprintf(stderr, PROG ": cannot write %s\n", path); exit(1); }
}
__attribute__((unused)) static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
#endif
