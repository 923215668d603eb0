// CG (Lee et al.'s CG): unpreconditioned conjugate gradients on a symmetric positive definite
// CSR matrix (f64 values, i32 indices), exactly the recurrence of docs/workloads.md, x0 = 0.
// One OpenMP parallel region per solve; per iteration three loops over rows with static
// schedules: q = A p fused with p.q, the x/r update fused with r.r, and the p update.
// Usage: cg DIR REPS IMPL n nnz maxit tol
//   reads DIR/csr_rowptr.bin (n+1 i32), DIR/csr_col.bin (nnz i32), DIR/csr_val.bin (nnz f64),
//   DIR/cg_b.bin (n f64); writes DIR/cg_x.IMPL.bin (n f64);
//   stdout: median seconds, then "iterations K residual R" (R = sqrt(r.r)/|b| at exit).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define PROG "cg"
#define USAGE "usage: cg DIR REPS IMPL n nnz maxit tol\n"
#include "baseline.h"

// Exit 1 unless rowptr/col describe a valid n x n CSR matrix with nnz entries.
static void check_csr(const int32_t *rowptr, const int32_t *col, long n, long nnz) {
    if (rowptr[0] != 0 || rowptr[n] != nnz) { fprintf(stderr, "cg: csr_rowptr.bin: must start at 0 and end at nnz = %ld\n", nnz); exit(1); }
    for (long i = 0; i < n; i++)
        if (rowptr[i + 1] < rowptr[i]) { fprintf(stderr, "cg: csr_rowptr.bin: decreases at row %ld\n", i); exit(1); }
    for (long k = 0; k < nnz; k++)
        if (col[k] < 0 || col[k] >= n) { fprintf(stderr, "cg: csr_col.bin: column %d out of range at %ld\n", col[k], k); exit(1); }
}

// Solves A x = b; returns the iterations run and stores sqrt(r.r)/|b| at exit in *res_out.
static long cg(const int32_t *restrict rowptr, const int32_t *restrict col, const double *restrict val,
               const double *restrict b, double *restrict x, double *restrict r, double *restrict p,
               double *restrict q, long n, long maxit, double tol, double *res_out) {
    double bb = 0.0, pq = 0.0, rr1 = 0.0;  // shared reduction targets
    long iters = 0;
    double resid = 0.0;
    #pragma omp parallel
    {
        #pragma omp for simd schedule(static) reduction(+:bb)
        for (long i = 0; i < n; i++) {
            x[i] = 0.0; r[i] = b[i]; p[i] = b[i];
            bb += b[i] * b[i];
        }
        const double bnorm = sqrt(bb);
        double rr = bb, res = bnorm > 0.0 ? 1.0 : 0.0;
        long k = 0;
        while (k < maxit && bnorm > 0.0) {
            #pragma omp single
            { pq = 0.0; rr1 = 0.0; }  // (earlier reads of both are behind at least one barrier)
            #pragma omp for schedule(static) reduction(+:pq)
            for (long i = 0; i < n; i++) {
                double s = 0.0;
                for (int32_t j = rowptr[i]; j < rowptr[i + 1]; j++) s += val[j] * p[col[j]];
                q[i] = s;
                pq += p[i] * s;
            }
            const double alpha = rr / pq;
            #pragma omp for simd schedule(static) reduction(+:rr1)
            for (long i = 0; i < n; i++) {
                x[i] += alpha * p[i];
                r[i] -= alpha * q[i];
                rr1 += r[i] * r[i];
            }
            k++;
            res = sqrt(rr1) / bnorm;
            if (res < tol || k == maxit) break;
            const double beta = rr1 / rr;
            rr = rr1;
            #pragma omp for simd schedule(static)
            for (long i = 0; i < n; i++) p[i] = r[i] + beta * p[i];
        }
        #pragma omp single nowait
        { iters = k; resid = res; }
    }
    *res_out = resid;
    return iters;
}

int main(int argc, char **argv) {
    if (argc != 8) usage();
    const char *dir = argv[1], *impl = argv[3];
    int reps = (int)arg_long(argv[2], 1, LONG_MAX);
    long n = arg_long(argv[4], 1, LONG_MAX), nnz = arg_long(argv[5], 0, LONG_MAX), maxit = arg_long(argv[6], 0, LONG_MAX);
    double tol = arg_double(argv[7], 0);
    if (nnz > INT32_MAX) usage();

    const int32_t *rowptr = load(dir, "csr_rowptr", sizeof(int32_t), n + 1);
    const int32_t *col = load(dir, "csr_col", sizeof(int32_t), nnz);
    const double *val = load(dir, "csr_val", sizeof(double), nnz);
    const double *b = load(dir, "cg_b", sizeof(double), n);
    check_csr(rowptr, col, n, nnz);
    double *x = malloc(n * sizeof *x), *r = malloc(n * sizeof *r), *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    double *t = malloc(reps * sizeof *t);
    if (!x || !r || !p || !q || !t) { fprintf(stderr, "cg: out of memory\n"); return 1; }
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) x[i] = r[i] = p[i] = q[i] = 0.0;  // first touch by the rows' threads

    long iters = 0;
    double res = 0.0;
    for (int k = 0; k < reps; k++) {
        double t0 = omp_get_wtime();
        iters = cg(rowptr, col, val, b, x, r, p, q, n, maxit, tol, &res);
        t[k] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    store(dir, "cg_x", impl, x, sizeof *x, n);
    printf("%.9f\n", t[reps / 2]);
    printf("iterations %ld residual %.17g\n", iters, res);
    return 0;
}
