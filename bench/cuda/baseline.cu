// Hand-written CUDA baselines for weft's GPU benchmarks (docs/performance.md), built on the
// GPU machine with nvcc: `nvcc -O3 -arch=sm_90 baseline.cu` (precise) and the same with
// `--use_fast_math` (fast). Usage:
//   baseline copy N REPS                 -> device-to-device copy of N f32, prints GB/s and ms
//   baseline mdh ATOMS.bin NA NK NJ NI OX OY OZ SP REPS OUT.bin
//                                        -> direct Coulomb summation (the OpenCL MDH example,
//                                           Stone et al.), prints the median kernel time (ms)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

// One thread per grid point (grid-stride), atoms as float4 (x, y, z, q); the point is
// origin + (i, j, k) * spacing with i the fastest axis, as examples/ir/mdh.weft computes it.
__global__ void mdh(const float4* __restrict__ atoms, int na, float ox, float oy, float oz,
                    float sp, int nk, int nj, int ni, float* __restrict__ out) {
  long n = (long)nk * nj * ni;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < n;
       e += (long)gridDim.x * blockDim.x) {
    int i = (int)(e % ni), j = (int)((e / ni) % nj), k = (int)(e / ((long)ni * nj));
    float x = ox + (float)i * sp, y = oy + (float)j * sp, z = oz + (float)k * sp;
    float acc = 0.0f;
    for (int a = 0; a < na; a++) {
      float4 at = atoms[a];
      float dx = x - at.x, dy = y - at.y, dz = z - at.z;
      float r2 = dx * dx + dy * dy + dz * dz;
      acc += at.w / sqrtf(r2);
    }
    out[e] = acc;
  }
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: see the header of baseline.cu\n"); return 2; }
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0)); CK(cudaEventCreate(&t1));
  std::string mode = argv[1];
  if (mode == "copy" && argc == 4) {
    size_t n = strtoull(argv[2], 0, 10); int reps = atoi(argv[3]);
    float *a, *b;
    CK(cudaMalloc(&a, n * 4)); CK(cudaMalloc(&b, n * 4));
    CK(cudaMemset(a, 0, n * 4));
    CK(cudaMemcpy(b, a, n * 4, cudaMemcpyDeviceToDevice));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
      CK(cudaEventRecord(t0));
      CK(cudaMemcpyAsync(b, a, n * 4, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(t1)); CK(cudaEventSynchronize(t1));
      float t; CK(cudaEventElapsedTime(&t, t0, t1)); ms.push_back(t);
    }
    float m = median(ms);
    printf("%.4f %.1f\n", m, 2.0 * n * 4 / (m * 1e-3) / 1e9);
    return 0;
  }
  if (mode == "mdh" && argc == 13) {
    int na = atoi(argv[3]), nk = atoi(argv[4]), nj = atoi(argv[5]), ni = atoi(argv[6]);
    float ox = atof(argv[7]), oy = atof(argv[8]), oz = atof(argv[9]), sp = atof(argv[10]);
    int reps = atoi(argv[11]);
    std::vector<float> h(4 * (size_t)na);
    FILE* f = fopen(argv[2], "rb");
    if (!f || fread(h.data(), 4, h.size(), f) != h.size()) { fprintf(stderr, "reading %s\n", argv[2]); return 1; }
    fclose(f);
    long n = (long)nk * nj * ni;
    float4* da; float* dout;
    CK(cudaMalloc(&da, 16 * (size_t)na)); CK(cudaMalloc(&dout, 4 * n));
    CK(cudaMemcpy(da, h.data(), 16 * (size_t)na, cudaMemcpyHostToDevice));
    int dev; CK(cudaGetDevice(&dev));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, dev));
    int block = 256;
    int grid = (int)std::min<long>((n + block - 1) / block, (long)prop.multiProcessorCount * 8);
    mdh<<<grid, block>>>(da, na, ox, oy, oz, sp, nk, nj, ni, dout);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
      CK(cudaEventRecord(t0));
      mdh<<<grid, block>>>(da, na, ox, oy, oz, sp, nk, nj, ni, dout);
      CK(cudaEventRecord(t1)); CK(cudaEventSynchronize(t1));
      float t; CK(cudaEventElapsedTime(&t, t0, t1)); ms.push_back(t);
    }
    std::vector<float> out(n);
    CK(cudaMemcpy(out.data(), dout, 4 * n, cudaMemcpyDeviceToHost));
    FILE* g = fopen(argv[12], "wb");
    if (!g) { fprintf(stderr, "writing %s\n", argv[12]); return 1; }
    fwrite(out.data(), 4, n, g); fclose(g);
    printf("%.4f\n", median(ms));
    return 0;
  }
  fprintf(stderr, "usage: see the header of baseline.cu\n");
  return 2;
}
