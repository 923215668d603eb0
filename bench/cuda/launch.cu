// CUDA's own launch cost, the baseline of `weft-bench launch` (issue 21): seconds per launch
// of an empty kernel back to back (one synchronise at the end), and per launch followed by a
// synchronise and a 4-byte device-to-host copy; and the device-to-device copy bandwidth of
// 2^26 f32 (bytes read + written / time), the baseline of the `sum` rows: timed on the host
// around the copy and its synchronise (as `weft::sum` is timed, from call to result), and by
// CUDA events (the copy alone). Medians. Prints the four on one line (s, s, GB/s, GB/s).
// Build: nvcc -O3 -arch=sm_90 -o launch_cuda bench/cuda/launch.cu
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void empty_kernel() {}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  float* d = nullptr;
  float h = 0;
  if (cudaMalloc(&d, sizeof(float)) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  for (int i = 0; i < 100; i++) empty_kernel<<<1, 32>>>();
  cudaDeviceSynchronize();
  const int n = 2000;
  std::vector<double> back, sync;
  for (int r = 0; r < 9; r++) {
    double t = now();
    for (int i = 0; i < n; i++) empty_kernel<<<1, 32>>>();
    cudaDeviceSynchronize();
    back.push_back((now() - t) / n);
    t = now();
    for (int i = 0; i < n / 10; i++) {
      empty_kernel<<<1, 32>>>();
      cudaStreamSynchronize(0);
      cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost);
    }
    sync.push_back((now() - t) / (n / 10));
  }
  if (cudaGetLastError() != cudaSuccess) {
    fprintf(stderr, "a launch failed\n");
    return 1;
  }
  const size_t big = size_t(1) << 26;
  float *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, big * 4) != cudaSuccess || cudaMalloc(&dst, big * 4) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc of 2 x 256 MiB failed\n");
    return 1;
  }
  cudaMemset(src, 0, big * 4);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> copy, wall;
  for (int r = 0; r < 12; r++) {
    double t = now();
    cudaEventRecord(e0);
    cudaMemcpy(dst, src, big * 4, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    t = now() - t;
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r > 1) {
      copy.push_back(2.0 * big * 4 / (ms * 1e-3) / 1e9);
      wall.push_back(2.0 * big * 4 / t / 1e9);
    }
  }
  printf("%.9f %.9f %.1f %.1f\n", median(back), median(sync), median(wall), median(copy));
  cudaFree(src);
  cudaFree(dst);
  cudaFree(d);
  return 0;
}
