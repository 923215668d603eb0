// SpMV (Lee et al.'s SPMUL): y = A x for A in CSR (f64 values, i32 indices), each y[i] summed
// in k order as docs/workloads.md specifies; OpenMP over rows.
// Usage: spmv DIR REPS IMPL n nnz
//   reads DIR/csr_rowptr.bin (n+1 i32), DIR/csr_col.bin (nnz i32), DIR/csr_val.bin (nnz f64),
//   DIR/spmv_x.bin (n f64); writes DIR/spmv_y.IMPL.bin (n f64); stdout: median seconds.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define PROG "spmv"
#define USAGE "usage: spmv DIR REPS IMPL n nnz\n"
#include "baseline.h"

// Exit 1 unless rowptr/col describe a valid n x n CSR matrix with nnz entries.
static void check_csr(const int32_t *rowptr, const int32_t *col, long n, long nnz) {
    if (rowptr[0] != 0 || rowptr[n] != nnz) { fprintf(stderr, "spmv: csr_rowptr.bin: must start at 0 and end at nnz = %ld\n", nnz); exit(1); }
    for (long i = 0; i < n; i++)
        if (rowptr[i + 1] < rowptr[i]) { fprintf(stderr, "spmv: csr_rowptr.bin: decreases at row %ld\n", i); exit(1); }
    for (long k = 0; k < nnz; k++)
        if (col[k] < 0 || col[k] >= n) { fprintf(stderr, "spmv: csr_col.bin: column %d out of range at %ld\n", col[k], k); exit(1); }
}

static void spmv(const int32_t *restrict rowptr, const int32_t *restrict col, const double *restrict val,
                 const double *restrict x, double *restrict y, long n) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double s = 0.0;
        for (int32_t k = rowptr[i]; k < rowptr[i + 1]; k++) s += val[k] * x[col[k]];
        y[i] = s;
    }
}

int main(int argc, char **argv) {
    if (argc != 6) usage();
    const char *dir = argv[1], *impl = argv[3];
    int reps = (int)arg_long(argv[2], 1, LONG_MAX);
    long n = arg_long(argv[4], 1, LONG_MAX), nnz = arg_long(argv[5], 0, LONG_MAX);
    if (nnz > INT32_MAX) usage();

    const int32_t *rowptr = load(dir, "csr_rowptr", sizeof(int32_t), n + 1);
    const int32_t *col = load(dir, "csr_col", sizeof(int32_t), nnz);
    const double *val = load(dir, "csr_val", sizeof(double), nnz);
    const double *x = load(dir, "spmv_x", sizeof(double), n);
    check_csr(rowptr, col, n, nnz);
    double *y = malloc(n * sizeof *y);
    double *t = malloc(reps * sizeof *t);
    if (!y || !t) { fprintf(stderr, "spmv: out of memory\n"); return 1; }
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) y[i] = 0.0;  // first touch by the rows' threads

    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        spmv(rowptr, col, val, x, y, n);
        t[r] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    store(dir, "spmv_y", impl, y, sizeof *y, n);
    printf("%.9f\n", t[reps / 2]);
    return 0;
}
