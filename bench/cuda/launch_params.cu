// Does the number of kernel parameters change CUDA's launch cost? (issue 21, back-to-back
// launches: weft passes its launch context as one u64 parameter per word.) Seconds per
// back-to-back launch of an empty kernel with 0, 8, 24 and 48 u64 parameters, and with one
// 192-byte struct parameter, through the driver API's cuLaunchKernel as weft launches.
// Medians of 9 rounds of 2,000. Build: nvcc -O3 -arch=sm_90 -o launch_params bench/cuda/launch_params.cu -lcuda
#include <cuda.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

struct Words24 { uint64_t w[24]; };
extern "C" __global__ void p0() {}
extern "C" __global__ void p8(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                              uint64_t, uint64_t) {}
#define U4 uint64_t, uint64_t, uint64_t, uint64_t
extern "C" __global__ void p24(U4, U4, U4, U4, U4, U4) {}
extern "C" __global__ void p48(U4, U4, U4, U4, U4, U4, U4, U4, U4, U4, U4, U4) {}
extern "C" __global__ void pstruct(Words24) {}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  cudaFree(0);
  uint64_t words[48] = {0};
  void* params[48];
  for (int i = 0; i < 48; i++) params[i] = &words[i];
  Words24 s = {};
  void* sp[1] = {&s};
  struct K { const char* name; const void* f; void** args; };
  K ks[] = {{"0 params", (const void*)p0, nullptr}, {"8 u64 params", (const void*)p8, params},
            {"24 u64 params", (const void*)p24, params}, {"48 u64 params", (const void*)p48, params},
            {"one 192-byte struct", (const void*)pstruct, sp}};
  for (auto& k : ks) {
    CUfunction f;
    cudaGetFuncBySymbol(&f, k.f);
    std::vector<double> back;
    for (int r = 0; r < 9; r++) {
      double t = now();
      for (int i = 0; i < 2000; i++) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, k.args, nullptr);
      cuCtxSynchronize();
      back.push_back((now() - t) / 2000);
    }
    printf("%-22s %.2f us per back-to-back launch\n", k.name, median(back) * 1e6);
  }
  return 0;
}
