// CUDA's own cost of a replayed launch sequence, the baseline of `weft-bench sequence --gpu`
// (issue 23): 8 chained launches of y = s[0]·x + 1 on 1,024 f32 captured once as a CUDA
// graph (stream capture), then 16 graph launches back to back — host time per kernel,
// no synchronise timed — and the same 8 × 16 kernels launched one by one. Medians of 21.
// Prints the two on one line (s, s).
// Build: nvcc -O3 -arch=sm_90 -o graph_cuda bench/cuda/graph.cu
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void axpb(float* y, const float* x, const float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s[0] * x[i] + 1.0f;
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  const int n = 1024, chain = 8, reps = 16;
  float *a = nullptr, *b = nullptr, *s = nullptr;
  if (cudaMalloc(&a, n * 4) != cudaSuccess || cudaMalloc(&b, n * 4) != cudaSuccess ||
      cudaMalloc(&s, 4) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(a, 0, n * 4);
  cudaMemset(s, 0, 4);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  auto launch_chain = [&]() {
    for (int k = 0; k < chain; k++) {
      float* x = (k % 2) ? b : a;
      float* y = (k % 2) ? a : b;
      axpb<<<(n + 255) / 256, 256, 0, st>>>(y, x, s, n);
    }
  };
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  launch_chain();
  cudaStreamEndCapture(st, &g);
  if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
    fprintf(stderr, "cudaGraphInstantiate failed\n");
    return 1;
  }
  for (int i = 0; i < 20; i++) cudaGraphLaunch(ge, st);
  cudaStreamSynchronize(st);
  std::vector<double> graph, direct;
  for (int r = 0; r < 21; r++) {
    double t = now();
    for (int i = 0; i < reps; i++) cudaGraphLaunch(ge, st);
    graph.push_back((now() - t) / (reps * chain));
    cudaStreamSynchronize(st);
    t = now();
    for (int i = 0; i < reps; i++) launch_chain();
    direct.push_back((now() - t) / (reps * chain));
    cudaStreamSynchronize(st);
  }
  if (cudaGetLastError() != cudaSuccess) {
    fprintf(stderr, "a launch failed\n");
    return 1;
  }
  printf("%.9f %.9f\n", median(graph), median(direct));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaFree(a);
  cudaFree(b);
  cudaFree(s);
  return 0;
}
