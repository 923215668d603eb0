// How fast can a reduction of 2^26 f32 be on this GPU, in weft's orders of combination and in
// none? The ceiling study of issue 21's `sum` and `reduce` targets (docs/performance.md,
// "Reductions against the hardware"). Each row is timed by CUDA events and from call to
// result on the host (launches, then the 4-byte result read back, as `weft::sum` is timed),
// medians of 22 calls; bytes read / time, or read + written for the copy:
// - the device-to-device copy (the targets' baseline);
// - a sum in any order with 16-byte loads, grid-stride, warp shuffles, one atomic a block
//   (CUB's shape: the hardware's read bandwidth, with no order to keep);
// - weft's order of the built-ins (docs/semantics.md, "Reductions": blocks of 64 rows x 16
//   columns, each column folded top to bottom, levels of the columns' results), two levels
//   fused per launch then one last launch (`reduce.pair`'s plan): 4-byte loads with 128 to
//   1,024 threads a group and 8 to 64 rows loaded before they are added, 8- and 16-byte loads,
//   the result read into pageable or pinned memory;
// - probes that give up weft's bits: four chains a column, level 1 alone, and level 1 of
//   another fixed order (blocks of 64 rows x 128 columns, 16-byte loads, a warp a block);
// - weft's order for a user combiner (segments of 32 runs of 64, runs folded left to right,
//   combined pairwise), here a + b: a thread per run with 16-byte loads, and staged through
//   shared memory.
// Every row in a weft order checks its result against a host emulation, bit for bit.
// Build: nvcc -O3 -arch=sm_90 -o reduce_cuda bench/cuda/reduce.cu
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Any order: grid-stride float4 loads, warp shuffles, one atomic per block.
__global__ void sum_any(const float4* x, size_t n4, float* out) {
  float a = 0, b = 0, c = 0, d = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    float4 v = x[i];
    a += v.x; b += v.y; c += v.z; d += v.w;
  }
  float s = (a + b) + (c + d);
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffff, s, o);
  __shared__ float w[32];
  if ((threadIdx.x & 31) == 0) w[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < blockDim.x / 32 ? w[threadIdx.x] : 0;
    for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffff, s, o);
    if (threadIdx.x == 0) atomicAdd(out, s);
  }
}

// weft's order, two levels per launch: a group of 256 threads reduces 64 blocks of 1024
// (65,536 elements) to their 1,024 column results (level 1) and those, one level-2 block, to
// its 16 column results. Scalar loads: thread t folds column t % 16 of blocks t / 16 + 16k.
template <bool LAST>
__global__ void pair_scalar(const float* x, int n, float* out) {
  __shared__ float s[1024];
  const int t = threadIdx.x;
  const size_t g = blockIdx.x;
  const float* base = x + g * 65536;
  int left = n - int(g * 65536);
  float acc[4];
#pragma unroll
  for (int k = 0; k < 4; k++) acc[k] = -0.0f;
#pragma unroll
  for (int r0 = 0; r0 < 64; r0 += 16) {
    float v[4][16];
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
      for (int r = 0; r < 16; r++) {
        int p = (t / 16 + 16 * k) * 1024 + (r0 + r) * 16 + t % 16;
        v[k][r] = p < left ? base[p] : -0.0f;
      }
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
      for (int r = 0; r < 16; r++) acc[k] = (r0 + r == 0) ? v[k][r] : acc[k] + v[k][r];
  }
#pragma unroll
  for (int k = 0; k < 4; k++) s[(t / 16 + 16 * k) * 16 + t % 16] = acc[k];
  __syncthreads();
  if (t < 16) {
    float a = s[t];
    for (int r = 1; r < 64; r++) a += s[r * 16 + t];
    if (LAST) s[t] = a; else out[g * 16 + t] = a;
  }
  if (LAST) {
    __syncthreads();
    if (t == 0) {
      float c[16];
      for (int j = 0; j < 16; j++) c[j] = s[j];
      for (int o = 1; o < 16; o *= 2)
        for (int j = 0; j < 16; j += 2 * o) c[j] = c[j] + c[j + o];
      out[0] = c[0];
    }
  }
}

// The same with 16-byte loads: thread t folds columns 4(t % 4) .. +3 of block t / 4.
__global__ void pair_vec(const float4* x, float* out) {
  __shared__ float s[1024];
  const int t = threadIdx.x;
  const float4* base = x + size_t(blockIdx.x) * 16384 + (t / 4) * 256 + t % 4;
  float4 acc = base[0];
#pragma unroll
  for (int r0 = 1; r0 < 64; r0 += 21) {
    float4 v[21];
#pragma unroll
    for (int r = 0; r < 21; r++) v[r] = base[(r0 + r) * 4];
#pragma unroll
    for (int r = 0; r < 21; r++) {
      acc.x += v[r].x; acc.y += v[r].y; acc.z += v[r].z; acc.w += v[r].w;
    }
  }
  int q = (t / 4) * 16 + (t % 4) * 4;
  s[q] = acc.x; s[q + 1] = acc.y; s[q + 2] = acc.z; s[q + 3] = acc.w;
  __syncthreads();
  if (t < 16) {
    float a = s[t];
    for (int r = 1; r < 64; r++) a += s[r * 16 + t];
    out[blockIdx.x * 16 + t] = a;
  }
}

// Variants of the 4-byte-load level pair: T threads per group, each folding 1024 / T columns,
// R rows loaded before they are added.
template <int T, int R>
__global__ void __launch_bounds__(T) pair_t(const float* x, float* out) {
  __shared__ float s[1024];
  constexpr int K = 1024 / T;
  const int t = threadIdx.x;
  const float* base = x + size_t(blockIdx.x) * 65536;
  float acc[K];
#pragma unroll
  for (int r0 = 0; r0 < 64; r0 += R) {
    float v[K][R];
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
      for (int r = 0; r < R; r++) {
        int q = t + k * T;
        v[k][r] = base[(q / 16) * 1024 + (r0 + r) * 16 + q % 16];
      }
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
      for (int r = 0; r < R; r++) acc[k] = (r0 + r == 0) ? v[k][r] : acc[k] + v[k][r];
  }
#pragma unroll
  for (int k = 0; k < K; k++) s[t + k * T] = acc[k];
  __syncthreads();
  if (t < 16) {
    float a = s[t];
    for (int r = 1; r < 64; r++) a += s[r * 16 + t];
    out[blockIdx.x * 16 + t] = a;
  }
}

// Probes (not weft's bits): 4 interleaved chains per column (is the add chain the limit?),
// and level 1 alone (what does the fused level 2 cost?).
__global__ void __launch_bounds__(1024) probe_chains(const float* x, float* out) {
  __shared__ float s[1024];
  const int t = threadIdx.x;
  const float* base = x + size_t(blockIdx.x) * 65536 + (t / 16) * 1024 + t % 16;
  float a[4] = {0, 0, 0, 0};
#pragma unroll
  for (int r = 0; r < 64; r++) a[r % 4] += base[r * 16];
  s[t] = (a[0] + a[1]) + (a[2] + a[3]);
  __syncthreads();
  if (t < 16) {
    float acc = s[t];
    for (int r = 1; r < 64; r++) acc += s[r * 16 + t];
    out[blockIdx.x * 16 + t] = acc;
  }
}
__global__ void __launch_bounds__(1024) probe_level1(const float* x, float* out) {
  const int t = threadIdx.x;
  const float* base = x + size_t(blockIdx.x) * 65536 + (t / 16) * 1024 + t % 16;
  float acc = base[0];
#pragma unroll
  for (int r = 1; r < 64; r++) acc += base[r * 16];
  out[size_t(blockIdx.x) * 1024 + t] = acc;
}
// weft's order with 8-byte loads: thread t folds columns 2(t % 8), +1 of block t / 8.
__global__ void __launch_bounds__(512) pair_f2(const float2* x, float* out) {
  __shared__ float s[1024];
  const int t = threadIdx.x;
  const float2* base = x + size_t(blockIdx.x) * 32768 + (t / 8) * 512 + t % 8;
  float2 acc = base[0];
#pragma unroll
  for (int r = 1; r < 64; r++) { float2 v = base[r * 8]; acc.x += v.x; acc.y += v.y; }
  s[(t / 8) * 16 + (t % 8) * 2] = acc.x;
  s[(t / 8) * 16 + (t % 8) * 2 + 1] = acc.y;
  __syncthreads();
  if (t < 16) {
    float a = s[t];
    for (int r = 1; r < 64; r++) a += s[r * 16 + t];
    out[blockIdx.x * 16 + t] = a;
  }
}
// A faster last launch: 1024 threads, every load of a column issued before its adds; the
// last level's columns fold only the rows present.
__global__ void __launch_bounds__(1024) tail_1024(const float* x, int n, float* out) {
  __shared__ float s[1024];
  const int t = threadIdx.x;
  const int b = t / 16, c = t % 16;
  float v[64];
#pragma unroll
  for (int r = 0; r < 64; r++) {
    int p = b * 1024 + r * 16 + c;
    v[r] = p < n ? x[p] : -0.0f;
  }
  float acc = v[0];
#pragma unroll
  for (int r = 1; r < 64; r++) acc += v[r];
  s[t] = acc;
  __syncthreads();
  int n1 = (n + 1023) / 1024 * 16;  // n a multiple of 1024 here
  if (t < 16) {
    float a = s[t];
    for (int r = 1; r * 16 < n1; r++) a += s[r * 16 + t];
    s[t] = a;
  }
  __syncthreads();
  if (t == 0) {
    float c2[16];
    for (int j = 0; j < 16; j++) c2[j] = s[j];
    for (int o = 1; o < 16; o *= 2)
      for (int j = 0; j < 16; j += 2 * o) c2[j] = c2[j] + c2[j + o];
    out[0] = c2[0];
  }
}

// weft's order for a user combiner (docs/semantics.md: segments of 2,048 = 32 runs of 64, each
// run folded left to right, the runs combined pairwise), here `a + b`: a warp per segment, a
// thread per run loading it with 16-byte loads, the runs combined by shuffles.
__global__ void __launch_bounds__(256) runs_f4(const float4* x, float* out) {
  const int t = threadIdx.x, lane = t % 32;
  const size_t seg = size_t(blockIdx.x) * 8 + t / 32;
  const float4* p = x + seg * 512 + lane * 16;
  float4 v[16];
#pragma unroll
  for (int r = 0; r < 16; r++) v[r] = p[r];
  float a = v[0].x;
  a = a + v[0].y; a = a + v[0].z; a = a + v[0].w;
#pragma unroll
  for (int r = 1; r < 16; r++) { a = a + v[r].x; a = a + v[r].y; a = a + v[r].z; a = a + v[r].w; }
  for (int o = 1; o < 32; o *= 2) {
    float b = __shfl_down_sync(0xffffffff, a, o);
    if ((lane & (2 * o - 1)) == 0) a = a + b;
  }
  if (lane == 0) out[seg] = a;
}
// The same staged through shared memory: a warp loads its segment with coalesced 16-byte
// loads into shared memory (runs padded by one element), then each thread folds its run.
__global__ void __launch_bounds__(128) runs_staged(const float4* x, float* out) {
  __shared__ float s[4][32 * 65];
  const int t = threadIdx.x, lane = t % 32, w = t / 32;
  const size_t seg = size_t(blockIdx.x) * 4 + w;
  const float4* p = x + seg * 512;
  float4 v[16];
#pragma unroll
  for (int k = 0; k < 16; k++) v[k] = p[k * 32 + lane];
#pragma unroll
  for (int k = 0; k < 16; k++) {
    int e = (k * 32 + lane) * 4;
    int q = (e / 64) * 65 + e % 64;
    s[w][q] = v[k].x; s[w][q + 1] = v[k].y; s[w][q + 2] = v[k].z; s[w][q + 3] = v[k].w;
  }
  __syncwarp();
  float a = s[w][lane * 65];
  for (int r = 1; r < 64; r++) a = a + s[w][lane * 65 + r];
  for (int o = 1; o < 32; o *= 2) {
    float b = __shfl_down_sync(0xffffffff, a, o);
    if ((lane & (2 * o - 1)) == 0) a = a + b;
  }
  if (lane == 0) out[seg] = a;
}
// The last launch of the user-combiner order for 32,768 elements: 16 warps, one segment
// each, then one segment of 16 (run 0 folded left to right).
__global__ void runs_tail(const float* x, float* out) {
  __shared__ float s[16];
  const int t = threadIdx.x, lane = t % 32, w = t / 32;
  const float* p = x + w * 2048 + lane * 64;
  float v[64];
#pragma unroll
  for (int r = 0; r < 64; r++) v[r] = p[r];
  float a = v[0];
#pragma unroll
  for (int r = 1; r < 64; r++) a = a + v[r];
  for (int o = 1; o < 32; o *= 2) {
    float b = __shfl_down_sync(0xffffffff, a, o);
    if ((lane & (2 * o - 1)) == 0) a = a + b;
  }
  if (lane == 0) s[w] = a;
  __syncthreads();
  if (t == 0) {
    float r = s[0];
    for (int j = 1; j < 16; j++) r = r + s[j];
    out[0] = r;
  }
}
static float emulate_runs(std::vector<float> x) {
  while (x.size() > 1) {
    std::vector<float> y;
    for (size_t b = 0; b < x.size(); b += 2048) {
      size_t len = std::min<size_t>(2048, x.size() - b);
      float run[32];
      bool has[32];
      for (int j = 0; j < 32; j++) {
        has[j] = j * 64 < (int)len;
        if (!has[j]) continue;
        run[j] = x[b + j * 64];
        for (size_t r = j * 64 + 1; r < std::min<size_t>(len, j * 64 + 64); r++) run[j] = run[j] + x[b + r];
      }
      for (int o = 1; o < 32; o *= 2)
        for (int j = 0; j < 32; j += 2 * o)
          if (has[j] && has[j + o]) run[j] = run[j] + run[j + o];
      y.push_back(run[0]);
    }
    x = y;
  }
  return x[0];
}

// Probe of another fixed order (not weft's): blocks of 64 rows x 128 columns, a warp per
// block, a thread folding 4 adjacent columns top to bottom with 16-byte loads, so that each
// warp instruction reads 512 contiguous bytes (as the any-order kernel's do). Level 1 alone.
__global__ void __launch_bounds__(256) probe_wide(const float4* x, float4* out) {
  const int lane = threadIdx.x % 32;
  const size_t blk = size_t(blockIdx.x) * 8 + threadIdx.x / 32;
  const float4* p = x + blk * 2048 + lane;
  float4 acc = p[0];
#pragma unroll
  for (int r0 = 1; r0 < 64; r0 += 21) {
    float4 v[21];
#pragma unroll
    for (int r = 0; r < 21; r++) v[r] = p[(r0 + r) * 32];
#pragma unroll
    for (int r = 0; r < 21; r++) {
      acc.x += v[r].x; acc.y += v[r].y; acc.z += v[r].z; acc.w += v[r].w;
    }
  }
  out[blk * 32 + lane] = acc;
}

// Host emulation of weft's order (docs/semantics.md).
static float emulate(std::vector<float> x) {
  while (x.size() > 1024) {
    std::vector<float> y;
    for (size_t b = 0; b < x.size(); b += 1024) {
      size_t len = std::min<size_t>(1024, x.size() - b);
      for (size_t j = 0; j < std::min<size_t>(16, len); j++) {
        float a = x[b + j];
        for (size_t p = j + 16; p < len; p += 16) a += x[b + p];
        y.push_back(a);
      }
    }
    x = y;
  }
  float c[16];
  for (int j = 0; j < 16; j++) {
    c[j] = -0.0f;
    bool any = false;
    for (size_t p = j; p < x.size(); p += 16) { c[j] = any ? c[j] + x[p] : x[p]; any = true; }
  }
  for (int o = 1; o < 16; o *= 2)
    for (int j = 0; j < 16; j += 2 * o) c[j] = c[j] + c[j + o];
  return c[0];
}

int main() {
  const int n = 1 << 26;
  std::vector<float> h(n);
  uint32_t st = 12345;
  for (int i = 0; i < n; i++) {
    st = st * 1664525u + 1013904223u;
    h[i] = float(st >> 8) / float(1 << 24) - 0.25f;
  }
  float want = emulate(h);
  float want_runs = emulate_runs(h);
  float *x, *dst, *part, *res, *pinned;
  cudaMalloc(&x, size_t(n) * 4);
  cudaMalloc(&dst, size_t(n) * 4);
  cudaMalloc(&part, (n / 2048) * 4);
  cudaMalloc(&res, 4);
  cudaMallocHost(&pinned, 4);
  cudaMemcpy(x, h.data(), size_t(n) * 4, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int groups = n / 65536;
  auto weft_scalar = [&]() {
    pair_scalar<false><<<groups, 256>>>(x, n, part);
    pair_scalar<true><<<1, 256>>>(part, groups * 16, res);
  };
  auto weft_vec = [&]() {
    pair_vec<<<groups, 256>>>((const float4*)x, part);
    pair_scalar<true><<<1, 256>>>(part, groups * 16, res);
  };
  auto any = [&]() {
    cudaMemsetAsync(res, 0, 4);
    sum_any<<<132 * 8, 256>>>((const float4*)x, n / 4, res);
  };
  auto copy = [&]() { cudaMemcpyAsync(dst, x, size_t(n) * 4, cudaMemcpyDeviceToDevice); };
  auto run = [&](const char* name, auto f, double bytes, bool check, bool pin) {
    std::vector<double> ev, wall;
    float got = 0;
    for (int r = 0; r < 25; r++) {
      double t = now();
      cudaEventRecord(e0);
      f();
      cudaEventRecord(e1);
      if (pin) {
        cudaMemcpyAsync(pinned, res, 4, cudaMemcpyDeviceToHost);
        cudaStreamSynchronize(0);
        got = *pinned;
      } else if (check) {
        cudaMemcpy(&got, res, 4, cudaMemcpyDeviceToHost);
      } else {
        cudaEventSynchronize(e1);
      }
      t = now() - t;
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (r > 2) {
        ev.push_back(bytes / (ms * 1e-3) / 1e9);
        wall.push_back(bytes / t / 1e9);
      }
    }
    printf("%-44s events %7.1f GB/s (%6.1f us)  call-to-result %7.1f GB/s (%6.1f us)%s\n", name,
           median(ev), bytes / median(ev) / 1e3, median(wall), bytes / median(wall) / 1e3,
           check ? (memcmp(&got, &want, 4) == 0 || memcmp(&got, &want_runs, 4) == 0 ? "  bits: weft's" : "  bits: DIFFER") : "");
  };
  const double rb = double(n) * 4;
  run("copy d2d (read + written)", copy, 2 * rb, false, false);
  run("sum, any order, float4 (pageable read)", any, rb, false, false);
  run("weft order, 4-byte loads (pageable read)", weft_scalar, rb, true, false);
  run("weft order, 4-byte loads (pinned read)", weft_scalar, rb, true, true);
  run("weft order, 16-byte loads (pageable read)", weft_vec, rb, true, false);
  run("weft order, 16-byte loads (pinned read)", weft_vec, rb, true, true);
#define V(T, R) run("weft order, T=" #T " R=" #R, [&]() { pair_t<T, R><<<groups, T>>>(x, part); \
    pair_scalar<true><<<1, 256>>>(part, groups * 16, res); }, rb, true, false);
  V(256, 8) V(256, 16) V(512, 8) V(512, 16) V(512, 32) V(1024, 8) V(1024, 16) V(1024, 32) V(1024, 64)
  V(128, 8) V(128, 16)
  run("the last launch alone (16,384 elements)", [&]() { pair_scalar<true><<<1, 256>>>(part, groups * 16, res); }, groups * 64.0, false, false);
  run("the last launch, 1024 threads", [&]() { tail_1024<<<1, 1024>>>(part, groups * 16, res); }, groups * 64.0, false, false);
  run("weft order, T=1024 R=16 + fast last launch", [&]() { pair_t<1024, 16><<<groups, 1024>>>(x, part);
    tail_1024<<<1, 1024>>>(part, groups * 16, res); }, rb, true, false);
  run("weft order, 8-byte loads + fast last launch", [&]() { pair_f2<<<groups, 512>>>((const float2*)x, part);
    tail_1024<<<1, 1024>>>(part, groups * 16, res); }, rb, true, false);
  run("probe: 4 chains a column (other bits)", [&]() { probe_chains<<<groups, 1024>>>(x, part); }, rb, false, false);
  run("probe: level 1 alone (1024 threads)", [&]() { probe_level1<<<groups, 1024>>>(x, dst); }, rb, false, false);
  run("user order, thread-per-run 16-byte loads", [&]() { runs_f4<<<n / 2048 / 8, 256>>>((const float4*)x, part);
    runs_tail<<<1, 512>>>(part, res); }, rb, true, false);
  run("user order, staged in shared memory", [&]() { runs_staged<<<n / 2048 / 4, 128>>>((const float4*)x, part);
    runs_tail<<<1, 512>>>(part, res); }, rb, true, false);
  run("probe: 64 x 128 blocks, 16-byte loads, level 1", [&]() { probe_wide<<<n / 8192 / 8, 256>>>((const float4*)x, (float4*)dst); }, rb, false, false);
  run("copy d2d (read + written)", copy, 2 * rb, false, false);
  if (cudaGetLastError() != cudaSuccess) {
    fprintf(stderr, "a launch failed\n");
    return 1;
  }
  return 0;
}
