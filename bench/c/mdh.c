// MDH (Stone et al.'s OpenCL electrostatics kernel): potential at each point of a 3-D grid
// as the sum over atoms of q / r, f32, OpenMP over grid points. The grid point (k, j, i)
// sits at origin + (i, j, k) * spacing, as in examples/ir/mdh.weft.
// Usage: mdh ATOMS.bin NATOMS NK NJ NI OX OY OZ SPACING REPS OUT.bin -> median seconds.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
    if (argc < 12) { fprintf(stderr, "usage: mdh ATOMS.bin NATOMS NK NJ NI OX OY OZ SPACING REPS OUT.bin\n"); return 2; }
    int na = atoi(argv[2]), nk = atoi(argv[3]), nj = atoi(argv[4]), ni = atoi(argv[5]);
    float ox = atof(argv[6]), oy = atof(argv[7]), oz = atof(argv[8]), sp = atof(argv[9]);
    int reps = atoi(argv[10]);
    float *atoms = malloc((size_t)na * 4 * sizeof *atoms);
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(atoms, sizeof *atoms, (size_t)na * 4, f) != (size_t)na * 4) { fprintf(stderr, "cannot read %s\n", argv[1]); return 1; }
    fclose(f);
    float *ax = malloc(na * sizeof(float)), *ay = malloc(na * sizeof(float)), *az = malloc(na * sizeof(float)), *aq = malloc(na * sizeof(float));
    for (int a = 0; a < na; a++) { ax[a] = atoms[4*a]; ay[a] = atoms[4*a+1]; az[a] = atoms[4*a+2]; aq[a] = atoms[4*a+3]; }
    long np = (long)nk * nj * ni;
    float *pot = malloc(np * sizeof *pot);
    double *t = malloc(reps * sizeof *t);
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        #pragma omp parallel for schedule(static)
        for (long p = 0; p < np; p++) {
            long i = p % ni, j = (p / ni) % nj, k = p / ((long)ni * nj);
            float x = ox + i * sp, y = oy + j * sp, z = oz + k * sp, e = 0.0f;
            for (int a = 0; a < na; a++) {
                float dx = x - ax[a], dy = y - ay[a], dz = z - az[a];
                e += aq[a] / sqrtf(dx * dx + dy * dy + dz * dz);
            }
            pot[p] = e;
        }
        t[r] = omp_get_wtime() - t0;
    }
    qsort(t, reps, sizeof *t, cmp);
    FILE *o = fopen(argv[11], "wb"); fwrite(pot, sizeof *pot, np, o); fclose(o);
    printf("%.9f\n", t[reps / 2]);
    return 0;
}
