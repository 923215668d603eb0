// Hand-written CUDA baselines for the workloads of docs/workloads.md (MDH, Jacobi, SpMV, CG,
// EP, the coin finder, Black-Scholes). Plain CUDA 12 runtime API, no libraries. Built on the
// GPU machine:
//   nvcc -O3 -arch=sm_90                  -o workloads_cuda     bench/cuda/workloads.cu  (IMPL cuda)
//   nvcc -O3 -arch=sm_90 --use_fast_math  -o workloads_cuda_fast bench/cuda/workloads.cu (IMPL cudafast)
//
// Usage: workloads_cuda WORKLOAD DIR REPS IMPL ARGS...
//   Reads the raw little-endian inputs of docs/workloads.md from DIR, uploads them once, runs one
//   untimed warm-up repetition and then REPS timed ones (CUDA events around the whole device
//   computation of a repetition, including the device-to-host copies of the scalars the host loop
//   needs), writes DIR/<output>.<IMPL>.bin and prints the median seconds on line 1 of stdout,
//   then the `key value...` lines of the doc. Exit status 1 (message on stderr) on a missing or
//   malformed input or a CUDA error; 2 on a wrong number of arguments.
//
// Examples (DIR = /tmp/wb; sizes as weft-bench uses them; MDH's origin is illustrative, the bench
// passes the atoms' centre minus half the grid):
//   workloads_cuda mdh          /tmp/wb 5  cuda     4096 64 128 128 -20.5137 -81.9863 -34.9863 1.5
//                               (NA nk nj ni ox oy oz spacing; mdh_atoms.bin -> mdh_pot.cuda.bin)
//   workloads_cuda jacobi       /tmp/wb 5  cuda     4096 1000 0
//                               (n sweeps tol; jacobi_u0.bin -> jacobi_u.cuda.bin)
//   workloads_cuda spmv         /tmp/wb 20 cuda     4194304 20963328
//                               (n nnz: 5-point Poisson, m = 2048, nnz = 5m^2 - 4m;
//                                csr_rowptr/csr_col/csr_val.bin, spmv_x.bin -> spmv_y.cuda.bin)
//   workloads_cuda cg           /tmp/wb 5  cuda     147 2449 1000 1e-10
//                               (n nnz maxit tol: lund_a; csr_*.bin, cg_b.bin -> cg_x.cuda.bin)
//   workloads_cuda cg           /tmp/wb 5  cuda     1048576 5238784 500 1e-10   (Poisson, m = 1024)
//   workloads_cuda ep           /tmp/wb 5  cuda     24
//                               (M: 2^M pairs; class S is M = 24; no output file)
//   workloads_cuda coins        /tmp/wb 5  cuda     303 384 15 35 24 40
//                               (h w rmin rmax npeaks thresh; coins_img.bin -> coins_best.cuda.bin)
//   workloads_cuda blackscholes /tmp/wb 5  cudafast 16777216 0.02 0.30
//                               (n R V; bs_s/bs_x/bs_t.bin -> bs_call, bs_put .cudafast.bin)
//
// Design, per workload:
//   mdh     one thread per grid point (the kernel of baseline.cu), atoms as float4 in global
//           memory (warp-uniform loads, broadcast from L1).
//   jacobi  one thread per point, 32x8 blocks, ping-pong buffers (sweep 1 reads u0 itself); on
//           every 10th sweep a block max reduction of |u_new - u| and one atomicMax per block on
//           the f32 bit pattern (non-negative floats order as unsigned ints) into a device slot.
//   spmv    CSR scalar, one thread per row: with ~5 nonzeros a row a warp per row would idle
//           27 of 32 lanes; scalar also keeps the doc's k-order sum.
//   cg      the SpMV kernel + dot (grid-stride, block reduction, atomicAdd on f64) + axpy
//           kernels; each dot is copied to the host, where alpha, beta and the stop test are
//           computed (the host loop of a CUDA programmer).
//   ep      one thread per batch of 2^7 pairs (2^17 threads for M = 24), exact u64 generator,
//           jump-ahead seed s*a^(2*first pair) by square and multiply, block reductions of sx,
//           sy and the 10 counts, then one atomicAdd each per block.
//   coins   Sobel kernel; one kernel computing best and rad over all radii with the ring offsets
//           in __constant__ memory (warp-uniform, so broadcast); peaks on the device: arg_max as
//           a block reduction of a packed (value bits << 32 | ~index) key + atomicMax, the key
//           copied to the host, then a suppression kernel over the found coin's bounding box.
//   blackscholes  one thread per option, expf/logf/sqrtf (intrinsics under --use_fast_math).
#include <cstdio>
#include <cstdlib>
#include <cstdarg>
#include <cstring>
#include <cstdint>
#include <cerrno>
#include <cmath>
#include <climits>
#include <string>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(call)                                                                          \
  do {                                                                                    \
    cudaError_t ck_err_ = (call);                                                         \
    if (ck_err_ != cudaSuccess) {                                                         \
      fprintf(stderr, "CUDA error: %s at %s:%d: %s\n", #call, __FILE__, __LINE__,         \
              cudaGetErrorString(ck_err_));                                               \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
// After a kernel launch: launch-configuration errors (execution errors surface at the next
// synchronising call, which is checked too).
#define KCHECK() CK(cudaGetLastError())

// The coin finder's best map written out: 0 = the score map of step (2), max_R s_R, as
// bench/c/coins.c writes it (peak finding then works on a device copy, made inside the timed
// repetition); 1 = `best` after step (3), the peaks' disks set to 0.
#ifndef COINS_BEST_AFTER_SUPPRESSION
#define COINS_BEST_AFTER_SUPPRESSION 0
#endif

typedef unsigned long long u64;

static int g_sms = 132;             // multiprocessors of device 0, set in main
static void* g_pinned = nullptr;    // pinned staging buffer for the host loop's scalars

static void die(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

// ------------------------------------------------------------------------------------------
// Host helpers: arguments, files, device buffers, timing.

static long long arg_int(const char* s, const char* what, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    die("bad %s '%s': expected an integer in [%lld, %lld]", what, s, lo, hi);
  return v;
}

static double arg_real(const char* s, const char* what) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(v)) die("bad %s '%s': expected a number", what, s);
  return v;
}

// Reads DIR/NAME, which must hold exactly `count` elements of T.
template <class T>
static std::vector<T> read_input(const char* dir, const char* name, size_t count) {
  std::string path = std::string(dir) + "/" + name;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) die("cannot open input %s: %s", path.c_str(), strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) die("cannot seek in %s", path.c_str());
  long size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) die("cannot seek in %s", path.c_str());
  if ((unsigned long)size != count * sizeof(T))
    die("malformed input %s: %ld bytes, expected %zu (%zu elements of %zu bytes)", path.c_str(),
        size, count * sizeof(T), count, sizeof(T));
  std::vector<T> v(count);
  if (count > 0 && fread(v.data(), sizeof(T), count, f) != count)
    die("cannot read %s", path.c_str());
  fclose(f);
  return v;
}

// Writes DIR/NAME.IMPL.bin.
template <class T>
static void write_output(const char* dir, const char* name, const char* impl, const std::vector<T>& v) {
  std::string path = std::string(dir) + "/" + name + "." + impl + ".bin";
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) die("cannot create output %s: %s", path.c_str(), strerror(errno));
  if (!v.empty() && fwrite(v.data(), sizeof(T), v.size(), f) != v.size())
    die("cannot write %s", path.c_str());
  if (fclose(f) != 0) die("cannot write %s", path.c_str());
}

template <class T>
static T* dev_alloc(size_t count) {
  T* p = nullptr;
  CK(cudaMalloc((void**)&p, std::max<size_t>(count, 1) * sizeof(T)));
  return p;
}

template <class T>
static T* dev_upload(const std::vector<T>& h) {
  T* p = dev_alloc<T>(h.size());
  if (!h.empty()) CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <class T>
static std::vector<T> dev_download(const T* d, size_t count) {
  std::vector<T> h(count);
  if (count > 0) CK(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Copies a scalar the host loop needs from the device (stream 0, through pinned memory) and
// waits for it: the synchronisation point of the host loop.
static void fetch(void* host, const void* dev, size_t bytes) {
  CK(cudaMemcpyAsync(g_pinned, dev, bytes, cudaMemcpyDeviceToHost, 0));
  CK(cudaStreamSynchronize(0));
  memcpy(host, g_pinned, bytes);
}

// One untimed warm-up run of `body`, then `reps` runs, each timed alone with CUDA events on
// stream 0; returns the median seconds.
template <class F>
static double time_reps(int reps, F body) {
  body();
  CK(cudaDeviceSynchronize());
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  std::vector<double> secs;
  secs.reserve(reps);
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(t0, 0));
    body();
    CK(cudaEventRecord(t1, 0));
    CK(cudaEventSynchronize(t1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    secs.push_back(ms * 1e-3);
  }
  CK(cudaDeviceSynchronize());
  CK(cudaEventDestroy(t0));
  CK(cudaEventDestroy(t1));
  std::sort(secs.begin(), secs.end());
  return secs[reps / 2];
}

static unsigned blocks_for(long long n, int block) {
  long long b = (n + block - 1) / block;
  if (b < 1) b = 1;
  if (b > INT_MAX) die("launch too large: %lld blocks", b);
  return (unsigned)b;
}

// ------------------------------------------------------------------------------------------
// Device helpers: warp and block reductions (block size a multiple of 32, at most 1024; every
// thread of the block must call; the result is valid in thread 0 of the block).

struct SumOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T neutral, Op op) {
  __shared__ T sh[32];
  const int tid = threadIdx.x + threadIdx.y * blockDim.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int nwarps = (blockDim.x * blockDim.y + 31) >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? sh[lane] : neutral;
    v = warp_reduce(v, op);
  }
  return v;
}

// ------------------------------------------------------------------------------------------
// MDH: V(p) = sum_a q_a / |p - x_a|, one thread per grid point (baseline.cu's kernel).

__global__ void mdh_kernel(const float4* __restrict__ atoms, int na, float ox, float oy, float oz,
                           float sp, int nk, int nj, int ni, float* __restrict__ out) {
  const long long n = (long long)nk * nj * ni;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const int i = (int)(e % ni), j = (int)((e / ni) % nj), k = (int)(e / ((long long)ni * nj));
    const float x = ox + (float)i * sp, y = oy + (float)j * sp, z = oz + (float)k * sp;
    float acc = 0.0f;
    for (int a = 0; a < na; a++) {
      const float4 at = atoms[a];
      const float dx = x - at.x, dy = y - at.y, dz = z - at.z;
      const float r2 = dx * dx + dy * dy + dz * dz;
      acc += at.w / sqrtf(r2);
    }
    out[e] = acc;
  }
}

static int run_mdh(const char* dir, int reps, const char* impl, char** a, int na_args) {
  if (na_args != 8) { fprintf(stderr, "mdh: ARGS = NA nk nj ni ox oy oz spacing\n"); return 2; }
  const int na = (int)arg_int(a[0], "NA", 1, INT_MAX / 4);
  const int nk = (int)arg_int(a[1], "nk", 1, INT_MAX), nj = (int)arg_int(a[2], "nj", 1, INT_MAX),
            ni = (int)arg_int(a[3], "ni", 1, INT_MAX);
  const float ox = (float)arg_real(a[4], "ox"), oy = (float)arg_real(a[5], "oy"),
              oz = (float)arg_real(a[6], "oz"), sp = (float)arg_real(a[7], "spacing");
  const long long n = (long long)nk * nj * ni;
  if (n > (1LL << 34)) die("mdh: grid of %lld points is too large", n);
  std::vector<float> atoms = read_input<float>(dir, "mdh_atoms.bin", 4 * (size_t)na);
  float4* d_atoms = dev_alloc<float4>(na);
  CK(cudaMemcpy(d_atoms, atoms.data(), atoms.size() * sizeof(float), cudaMemcpyHostToDevice));
  float* d_pot = dev_alloc<float>(n);
  const int block = 256;
  const unsigned grid = blocks_for(n, block);  // one thread per point (<= 2^26 blocks)
  double t = time_reps(reps, [&]() {
    mdh_kernel<<<grid, block>>>(d_atoms, na, ox, oy, oz, sp, nk, nj, ni, d_pot);
    KCHECK();
  });
  write_output(dir, "mdh_pot", impl, dev_download(d_pot, n));
  printf("%.9f\n", t);
  return 0;
}

// ------------------------------------------------------------------------------------------
// Jacobi: 5-point sweeps on an n x n f32 grid, boundary kept; every 10th sweep the max change.

#define JACOBI_CHECK 10

template <bool CHECK>
__global__ void __launch_bounds__(256) jacobi_sweep(const float* __restrict__ in, float* __restrict__ out,
                                                    int n, unsigned* __restrict__ dmax) {
  const int j = blockIdx.x * 32 + threadIdx.x;  // column
  const int i = blockIdx.y * 8 + threadIdx.y;   // row
  float d = 0.0f;
  if (i < n && j < n) {
    const size_t c = (size_t)i * n + j;
    const float old = in[c];
    float v = old;
    if (i > 0 && j > 0 && i < n - 1 && j < n - 1)
      v = 0.25f * ((in[c - n] + in[c + n]) + (in[c - 1] + in[c + 1]));
    out[c] = v;
    if (CHECK) d = fabsf(v - old);
  }
  if (CHECK) {
    d = block_reduce(d, 0.0f, MaxOp());
    if (threadIdx.x == 0 && threadIdx.y == 0) atomicMax(dmax, __float_as_uint(d));
  }
}

static int run_jacobi(const char* dir, int reps, const char* impl, char** a, int na_args) {
  if (na_args != 3) { fprintf(stderr, "jacobi: ARGS = n sweeps tol\n"); return 2; }
  const int n = (int)arg_int(a[0], "n", 1, 65535 * 8);  // gridDim.y <= 65535 blocks of 8 rows
  const int sweeps = (int)arg_int(a[1], "sweeps", 0, INT_MAX - 1);
  const double tol = arg_real(a[2], "tol");
  const size_t nn = (size_t)n * n;
  std::vector<float> u0 = read_input<float>(dir, "jacobi_u0.bin", nn);
  float* d_u0 = dev_upload(u0);
  float* d_a = dev_alloc<float>(nn);
  float* d_b = dev_alloc<float>(nn);
  const int nslots = std::max(1, sweeps / JACOBI_CHECK);  // one max slot per check sweep
  unsigned* d_dmax = dev_alloc<unsigned>(nslots);
  const dim3 block(32, 8), grid((n + 31) / 32, (n + 7) / 8);

  int done = 0;
  float delta = 0.0f;  // 0 when no check sweep ran (sweeps < 10)
  const float* result = d_u0;
  double t = time_reps(reps, [&]() {
    CK(cudaMemsetAsync(d_dmax, 0, nslots * sizeof(unsigned), 0));
    const float* src = d_u0;
    int s = 0, check = 0;
    float dl = 0.0f;
    while (s < sweeps) {
      ++s;
      float* dst = (s & 1) ? d_a : d_b;
      if (s % JACOBI_CHECK == 0) {
        jacobi_sweep<true><<<grid, block>>>(src, dst, n, d_dmax + check);
        KCHECK();
        unsigned bits;
        fetch(&bits, d_dmax + check, sizeof bits);
        ++check;
        memcpy(&dl, &bits, sizeof dl);
        src = dst;
        if ((double)dl < tol) break;
      } else {
        jacobi_sweep<false><<<grid, block>>>(src, dst, n, nullptr);
        KCHECK();
        src = dst;
      }
    }
    done = s;
    delta = dl;
    result = src;
  });
  write_output(dir, "jacobi_u", impl, dev_download(result, nn));
  printf("%.9f\n", t);
  printf("sweeps %d delta %.9g\n", done, (double)delta);
  return 0;
}

// ------------------------------------------------------------------------------------------
// SpMV and CG: CSR, f64 values, i32 indices.

__global__ void __launch_bounds__(256) spmv_csr_scalar(int n, const int* __restrict__ rowptr,
                                                       const int* __restrict__ col,
                                                       const double* __restrict__ val,
                                                       const double* __restrict__ x, double* __restrict__ y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int k1 = rowptr[i + 1];
  double s = 0.0;
  for (int k = rowptr[i]; k < k1; k++) s += val[k] * __ldg(&x[col[k]]);
  y[i] = s;
}

__global__ void __launch_bounds__(256) dot_kernel(int n, const double* __restrict__ a,
                                                  const double* __restrict__ b, double* __restrict__ out) {
  double s = 0.0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    s += a[i] * b[i];
  s = block_reduce(s, 0.0, SumOp());
  if (threadIdx.x == 0) atomicAdd(out, s);
}

// x += alpha p; r -= alpha q
__global__ void __launch_bounds__(256) axpy2_kernel(int n, double alpha, const double* __restrict__ p,
                                                    const double* __restrict__ q, double* __restrict__ x,
                                                    double* __restrict__ r) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  x[i] += alpha * p[i];
  r[i] -= alpha * q[i];
}

// p = r + beta p
__global__ void __launch_bounds__(256) xpay_kernel(int n, double beta, const double* __restrict__ r,
                                                   double* __restrict__ p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  p[i] = r[i] + beta * p[i];
}

struct Csr {
  int n, nnz;
  int* rowptr;
  int* col;
  double* val;
};

static Csr load_csr(const char* dir, const char* wl, int n, int nnz) {
  std::vector<int> rowptr = read_input<int>(dir, "csr_rowptr.bin", (size_t)n + 1);
  std::vector<int> col = read_input<int>(dir, "csr_col.bin", (size_t)nnz);
  std::vector<double> val = read_input<double>(dir, "csr_val.bin", (size_t)nnz);
  if (rowptr[0] != 0 || rowptr[n] != nnz)
    die("%s: malformed csr_rowptr.bin: rowptr[0] = %d, rowptr[n] = %d, expected 0 and nnz = %d", wl,
        rowptr[0], rowptr[n], nnz);
  for (int i = 0; i < n; i++)
    if (rowptr[i + 1] < rowptr[i]) die("%s: malformed csr_rowptr.bin: decreasing at row %d", wl, i);
  for (int k = 0; k < nnz; k++)
    if (col[k] < 0 || col[k] >= n) die("%s: malformed csr_col.bin: col[%d] = %d not in [0, %d)", wl, k, col[k], n);
  Csr m;
  m.n = n;
  m.nnz = nnz;
  m.rowptr = dev_upload(rowptr);
  m.col = dev_upload(col);
  m.val = dev_upload(val);
  return m;
}

static int run_spmv(const char* dir, int reps, const char* impl, char** a, int na_args) {
  if (na_args != 2) { fprintf(stderr, "spmv: ARGS = n nnz\n"); return 2; }
  const int n = (int)arg_int(a[0], "n", 1, INT_MAX - 1024);
  const int nnz = (int)arg_int(a[1], "nnz", 0, INT_MAX);
  Csr m = load_csr(dir, "spmv", n, nnz);
  double* d_x = dev_upload(read_input<double>(dir, "spmv_x.bin", (size_t)n));
  double* d_y = dev_alloc<double>(n);
  const unsigned grid = blocks_for(n, 256);
  double t = time_reps(reps, [&]() {
    spmv_csr_scalar<<<grid, 256>>>(n, m.rowptr, m.col, m.val, d_x, d_y);
    KCHECK();
  });
  write_output(dir, "spmv_y", impl, dev_download(d_y, n));
  printf("%.9f\n", t);
  return 0;
}

static int run_cg(const char* dir, int reps, const char* impl, char** a, int na_args) {
  if (na_args != 4) { fprintf(stderr, "cg: ARGS = n nnz maxit tol\n"); return 2; }
  const int n = (int)arg_int(a[0], "n", 1, INT_MAX - 1024);
  const int nnz = (int)arg_int(a[1], "nnz", 0, INT_MAX);
  const int maxit = (int)arg_int(a[2], "maxit", 0, 10000000);
  const double tol = arg_real(a[3], "tol");
  Csr m = load_csr(dir, "cg", n, nnz);
  double* d_b = dev_upload(read_input<double>(dir, "cg_b.bin", (size_t)n));
  double* d_x = dev_alloc<double>(n);
  double* d_r = dev_alloc<double>(n);
  double* d_p = dev_alloc<double>(n);
  double* d_q = dev_alloc<double>(n);
  // One zeroed accumulator per dot product of a repetition (b.b, then p.q and r.r per
  // iteration), cleared by one memset per repetition instead of one per dot.
  const size_t nslots = 2 * (size_t)maxit + 1;
  double* d_dots = dev_alloc<double>(nslots);
  const unsigned grid = blocks_for(n, 256);
  const unsigned dgrid = std::min<unsigned>(grid, (unsigned)g_sms * 8);
  const size_t bytes = (size_t)n * sizeof(double);

  int iterations = 0;
  double residual = 0.0;
  double t = time_reps(reps, [&]() {
    CK(cudaMemsetAsync(d_dots, 0, nslots * sizeof(double), 0));
    CK(cudaMemsetAsync(d_x, 0, bytes, 0));                             // x0 = 0
    CK(cudaMemcpyAsync(d_r, d_b, bytes, cudaMemcpyDeviceToDevice, 0));  // r = b
    CK(cudaMemcpyAsync(d_p, d_b, bytes, cudaMemcpyDeviceToDevice, 0));  // p = b
    size_t slot = 0;
    dot_kernel<<<dgrid, 256>>>(n, d_b, d_b, d_dots + slot);
    KCHECK();
    double rr;
    fetch(&rr, d_dots + slot++, sizeof rr);
    const double bnorm = sqrt(rr);
    int k = 0;
    double res = bnorm > 0.0 ? 1.0 : 0.0;  // b = 0: x = 0 is the solution
    while (k < maxit && bnorm > 0.0) {
      spmv_csr_scalar<<<grid, 256>>>(n, m.rowptr, m.col, m.val, d_p, d_q);  // q = A p
      KCHECK();
      dot_kernel<<<dgrid, 256>>>(n, d_p, d_q, d_dots + slot);
      KCHECK();
      double pq;
      fetch(&pq, d_dots + slot++, sizeof pq);
      const double alpha = rr / pq;
      axpy2_kernel<<<grid, 256>>>(n, alpha, d_p, d_q, d_x, d_r);
      KCHECK();
      dot_kernel<<<dgrid, 256>>>(n, d_r, d_r, d_dots + slot);
      KCHECK();
      double rr1;
      fetch(&rr1, d_dots + slot++, sizeof rr1);
      ++k;
      res = sqrt(rr1) / bnorm;
      if (res < tol || k == maxit) break;
      const double beta = rr1 / rr;
      xpay_kernel<<<grid, 256>>>(n, beta, d_r, d_p);
      KCHECK();
      rr = rr1;
    }
    iterations = k;
    residual = res;
  });
  write_output(dir, "cg_x", impl, dev_download(d_x, n));
  printf("%.9f\n", t);
  printf("iterations %d residual %.17g\n", iterations, residual);
  return 0;
}

// ------------------------------------------------------------------------------------------
// EP (NPB 3.3): 2^M Gaussian pairs from x_{k+1} = a x_k mod 2^46.

#define EP_A 1220703125ULL  // 5^13
#define EP_S 271828183ULL
#define EP_MASK ((1ULL << 46) - 1)
#define EP_LOG_BATCH 7      // 2^7 pairs per thread
#define EP_BLOCK 256

// (a * b) mod 2^46 for a, b < 2^46: the product wraps mod 2^64, whose low 46 bits are exact.
__device__ __forceinline__ u64 ep_mul(u64 a, u64 b) { return (a * b) & EP_MASK; }

__device__ u64 ep_pow(u64 base, u64 e) {
  u64 r = 1;
  while (e) {
    if (e & 1) r = ep_mul(r, base);
    base = ep_mul(base, base);
    e >>= 1;
  }
  return r;
}

__global__ void __launch_bounds__(EP_BLOCK) ep_kernel(int log_batch, u64 nthreads, double* __restrict__ sums,
                                                      u64* __restrict__ counts) {
  const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  const double r46 = 1.0 / 70368744177664.0;  // 2^-46
  double sx = 0.0, sy = 0.0;
  unsigned q[10];
#pragma unroll
  for (int c = 0; c < 10; c++) q[c] = 0;
  if (t < nthreads) {
    const u64 first = t << log_batch;                    // first pair of this thread's batch
    u64 x = ep_mul(EP_S, ep_pow(EP_A, 2 * first));       // s * a^(2 first): number 2*first
    const int npairs = 1 << log_batch;
    for (int k = 0; k < npairs; k++) {
      x = ep_mul(EP_A, x);
      const double u1 = (double)x * r46;                 // number 2i+1
      x = ep_mul(EP_A, x);
      const double u2 = (double)x * r46;                 // number 2i+2
      const double x1 = 2.0 * u1 - 1.0, x2 = 2.0 * u2 - 1.0;
      const double tt = x1 * x1 + x2 * x2;
      if (tt <= 1.0) {
        const double f = sqrt(-2.0 * log(tt) / tt);
        const double X = x1 * f, Y = x2 * f;
        sx += X;
        sy += Y;
        const int l = (int)fmax(fabs(X), fabs(Y));
#pragma unroll
        for (int c = 0; c < 10; c++) q[c] += (l == c) ? 1u : 0u;  // registers, no local array
      }
    }
  }
  // Block reductions of sx, sy and the 10 counts; one atomic each per block.
  __shared__ double sh_s[2][EP_BLOCK / 32];
  __shared__ unsigned sh_q[10][EP_BLOCK / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  sx = warp_reduce(sx, SumOp());
  sy = warp_reduce(sy, SumOp());
#pragma unroll
  for (int c = 0; c < 10; c++) q[c] = warp_reduce(q[c], SumOp());
  if (lane == 0) {
    sh_s[0][warp] = sx;
    sh_s[1][warp] = sy;
#pragma unroll
    for (int c = 0; c < 10; c++) sh_q[c][warp] = q[c];
  }
  __syncthreads();
  if (warp == 0) {
    sx = lane < nwarps ? sh_s[0][lane] : 0.0;
    sy = lane < nwarps ? sh_s[1][lane] : 0.0;
    sx = warp_reduce(sx, SumOp());
    sy = warp_reduce(sy, SumOp());
#pragma unroll
    for (int c = 0; c < 10; c++) {
      q[c] = lane < nwarps ? sh_q[c][lane] : 0u;
      q[c] = warp_reduce(q[c], SumOp());
    }
    if (lane == 0) {
      atomicAdd(&sums[0], sx);
      atomicAdd(&sums[1], sy);
#pragma unroll
      for (int c = 0; c < 10; c++)
        if (q[c]) atomicAdd(&counts[c], (u64)q[c]);
    }
  }
}

static int run_ep(const char* dir, int reps, const char* impl, char** a, int na_args) {
  (void)dir;
  (void)impl;
  if (na_args != 1) { fprintf(stderr, "ep: ARGS = M\n"); return 2; }
  const int M = (int)arg_int(a[0], "M", 0, 40);
  const int log_batch = std::min(EP_LOG_BATCH, M);
  const u64 nthreads = 1ULL << (M - log_batch);
  const unsigned grid = blocks_for((long long)nthreads, EP_BLOCK);
  double* d_sums = dev_alloc<double>(2);
  u64* d_counts = dev_alloc<u64>(10);
  double t = time_reps(reps, [&]() {
    CK(cudaMemsetAsync(d_sums, 0, 2 * sizeof(double), 0));
    CK(cudaMemsetAsync(d_counts, 0, 10 * sizeof(u64), 0));
    ep_kernel<<<grid, EP_BLOCK>>>(log_batch, nthreads, d_sums, d_counts);
    KCHECK();
  });
  std::vector<double> sums = dev_download(d_sums, 2);
  std::vector<u64> counts = dev_download(d_counts, 10);
  printf("%.9f\n", t);
  printf("sx %.17g sy %.17g\n", sums[0], sums[1]);
  printf("q");
  for (int c = 0; c < 10; c++) printf(" %llu", counts[c]);
  printf("\n");
  return 0;
}

// ------------------------------------------------------------------------------------------
// Coin finder: Sobel edges, ring-mask scores over radii, peaks with suppression.

#define COINS_MAX_OFFS 12288  // short2: 48 KiB of the 64 KiB constant bank
#define COINS_MAX_R 1024
__constant__ short2 c_ring_offs[COINS_MAX_OFFS];     // (x = dx, y = dy), rings one after another
__constant__ int c_ring_start[COINS_MAX_R + 1];       // ring ri is [start[ri], start[ri+1])

__global__ void __launch_bounds__(256) sobel_kernel(const float* __restrict__ img, float* __restrict__ e,
                                                    int h, int w) {
  const int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
  if (x >= w || y >= h) return;
  const int ym = max(y - 1, 0), yp = min(y + 1, h - 1), xm = max(x - 1, 0), xp = min(x + 1, w - 1);
#define IMG(r, c) __ldg(&img[(size_t)(r) * w + (c)])
  const float gx = (IMG(ym, xp) + 2.0f * IMG(y, xp) + IMG(yp, xp)) - (IMG(ym, xm) + 2.0f * IMG(y, xm) + IMG(yp, xm));
  const float gy = (IMG(yp, xm) + 2.0f * IMG(yp, x) + IMG(yp, xp)) - (IMG(ym, xm) + 2.0f * IMG(ym, x) + IMG(ym, xp));
#undef IMG
  e[(size_t)y * w + x] = sqrtf(gx * gx + gy * gy);
}

__global__ void __launch_bounds__(256) ring_score_kernel(const float* __restrict__ e, float* __restrict__ best,
                                                         int* __restrict__ rad, int h, int w, int rmin, int nr) {
  const int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
  if (x >= w || y >= h) return;
  float bv = 0.0f;
  int br = rmin;
  for (int ri = 0; ri < nr; ri++) {
    const int k0 = c_ring_start[ri], k1 = c_ring_start[ri + 1];
    float s = 0.0f;
    for (int k = k0; k < k1; k++) {  // row-major order of (dy, dx)
      const short2 o = c_ring_offs[k];
      const int yy = min(max(y + o.y, 0), h - 1), xx = min(max(x + o.x, 0), w - 1);
      s += __ldg(&e[(size_t)yy * w + xx]);
    }
    s = s / (float)(k1 - k0);
    if (ri == 0 || s > bv) {  // strict: the smallest R reaching the max
      bv = s;
      br = rmin + ri;
    }
  }
  best[(size_t)y * w + x] = bv;
  rad[(size_t)y * w + x] = br;
}

// arg max over v (all values >= +0, so their f32 bits order as unsigned ints) as the max of the
// key (bits << 32) | (0xffffffff - index): the first index wins ties.
__global__ void __launch_bounds__(256) argmax_kernel(const float* __restrict__ v, int n, u64* __restrict__ key) {
  u64 k = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const u64 kk = ((u64)__float_as_uint(v[i]) << 32) | (u64)(0xffffffffu - (unsigned)i);
    k = kk > k ? kk : k;
  }
  k = block_reduce(k, (u64)0, MaxOp());
  if (threadIdx.x == 0) atomicMax(key, k);
}

// best = 0 on the disk (y - py)^2 + (x - px)^2 < rad[p]^2; the grid covers the box of
// half-side `box` = rmax >= rad[p] around p.
__global__ void __launch_bounds__(256) suppress_kernel(float* __restrict__ best, const int* __restrict__ rad,
                                                       int h, int w, int p, int box) {
  const int py = p / w, px = p % w;
  const int r = rad[p];
  const int y = py - box + (int)(blockIdx.y * 8 + threadIdx.y);
  const int x = px - box + (int)(blockIdx.x * 32 + threadIdx.x);
  if (y < 0 || y >= h || x < 0 || x >= w) return;
  const int dy = y - py, dx = x - px;
  if (dy * dy + dx * dx < r * r) best[(size_t)y * w + x] = 0.0f;
}

static int run_coins(const char* dir, int reps, const char* impl, char** a, int na_args) {
  if (na_args != 6) { fprintf(stderr, "coins: ARGS = h w rmin rmax npeaks thresh\n"); return 2; }
  const int h = (int)arg_int(a[0], "h", 1, 65535 * 8), w = (int)arg_int(a[1], "w", 1, INT_MAX);
  const int rmin = (int)arg_int(a[2], "rmin", 0, 4096), rmax = (int)arg_int(a[3], "rmax", 0, 4096);
  const int npeaks = (int)arg_int(a[4], "npeaks", 0, 1 << 20);
  const float thresh = (float)arg_real(a[5], "thresh");
  if (rmax < rmin) die("coins: rmax %d < rmin %d", rmax, rmin);
  if ((long long)h * w > INT_MAX) die("coins: image too large");
  const int nr = rmax - rmin + 1, npix = h * w;
  if (nr > COINS_MAX_R) die("coins: more than %d radii", COINS_MAX_R);

  // Ring masks {(dy, dx) : R - 0.5 <= sqrt(dy^2 + dx^2) < R + 0.5}, row-major in (dy, dx).
  std::vector<short2> offs;
  std::vector<int> start(1, 0);
  for (int R = rmin; R <= rmax; R++) {
    for (int dy = -(R + 1); dy <= R + 1; dy++)
      for (int dx = -(R + 1); dx <= R + 1; dx++) {
        const double d = sqrt((double)dy * dy + (double)dx * dx);
        if (R - 0.5 <= d && d < R + 0.5) {
          if (offs.size() >= COINS_MAX_OFFS)
            die("coins: the rings of radii %d..%d have more than %d offsets", rmin, rmax, COINS_MAX_OFFS);
          offs.push_back(make_short2((short)dx, (short)dy));
        }
      }
    if ((int)offs.size() == start.back()) die("coins: empty ring mask for R = %d", R);
    start.push_back((int)offs.size());
  }
  CK(cudaMemcpyToSymbol(c_ring_offs, offs.data(), offs.size() * sizeof(short2)));
  CK(cudaMemcpyToSymbol(c_ring_start, start.data(), start.size() * sizeof(int)));

  float* d_img = dev_upload(read_input<float>(dir, "coins_img.bin", (size_t)npix));
  float* d_e = dev_alloc<float>(npix);
  float* d_best = dev_alloc<float>(npix);
  int* d_rad = dev_alloc<int>(npix);
#if !COINS_BEST_AFTER_SUPPRESSION
  float* d_work = dev_alloc<float>(npix);
#endif
  u64* d_keys = dev_alloc<u64>(std::max(npeaks, 1));  // one zeroed arg-max key per peak
  const dim3 block(32, 8), grid((w + 31) / 32, (h + 7) / 8);
  const int side = 2 * rmax + 1;
  const dim3 sgrid((side + 31) / 32, (side + 7) / 8);
  const unsigned agrid = std::min<unsigned>(blocks_for(npix, 256), (unsigned)g_sms * 4);

  std::vector<int> peaks;
  peaks.reserve(npeaks);
  double t = time_reps(reps, [&]() {
    sobel_kernel<<<grid, block>>>(d_img, d_e, h, w);
    KCHECK();
    ring_score_kernel<<<grid, block>>>(d_e, d_best, d_rad, h, w, rmin, nr);
    KCHECK();
    float* work = d_best;
#if !COINS_BEST_AFTER_SUPPRESSION
    CK(cudaMemcpyAsync(d_work, d_best, (size_t)npix * sizeof(float), cudaMemcpyDeviceToDevice, 0));
    work = d_work;
#endif
    CK(cudaMemsetAsync(d_keys, 0, std::max(npeaks, 1) * sizeof(u64), 0));
    peaks.clear();
    for (int pk = 0; pk < npeaks; pk++) {
      argmax_kernel<<<agrid, 256>>>(work, npix, d_keys + pk);
      KCHECK();
      u64 key;
      fetch(&key, d_keys + pk, sizeof key);
      const unsigned vbits = (unsigned)(key >> 32);
      float v;
      memcpy(&v, &vbits, sizeof v);
      const int p = (int)(0xffffffffu - (unsigned)(key & 0xffffffffULL));
      if (v < thresh) break;
      peaks.push_back(p);
      suppress_kernel<<<sgrid, block>>>(work, d_rad, h, w, p, rmax);
      KCHECK();
    }
  });
  std::vector<int> rad = dev_download(d_rad, npix);
  write_output(dir, "coins_best", impl, dev_download(d_best, npix));
  printf("%.9f\n", t);
  printf("peaks %d\n", (int)peaks.size());
  for (int p : peaks) printf("%d %d %d\n", p / w, p % w, rad[p]);
  return 0;
}

// ------------------------------------------------------------------------------------------
// Black-Scholes: European call and put, f32, one thread per option.

__device__ __forceinline__ float cnd(float d) {
  const float A1 = 0.31938153f, A2 = -0.356563782f, A3 = 1.781477937f, A4 = -1.821255978f,
              A5 = 1.330274429f;
  const float K = 1.0f / (1.0f + 0.2316419f * fabsf(d));
  const float c = 0.3989422804014327f * expf(-0.5f * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
  return d > 0.0f ? 1.0f - c : c;
}

__global__ void __launch_bounds__(256) bs_kernel(long long n, const float* __restrict__ S,
                                                 const float* __restrict__ X, const float* __restrict__ T,
                                                 float R, float V, float* __restrict__ call,
                                                 float* __restrict__ put) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float s = S[i], x = X[i], t = T[i];
  const float sqrtT = sqrtf(t);
  const float d1 = (logf(s / x) + (R + 0.5f * V * V) * t) / (V * sqrtT);
  const float d2 = d1 - V * sqrtT;
  const float c1 = cnd(d1), c2 = cnd(d2);
  const float xe = x * expf(-R * t);
  call[i] = s * c1 - xe * c2;
  put[i] = xe * (1.0f - c2) - s * (1.0f - c1);
}

static int run_blackscholes(const char* dir, int reps, const char* impl, char** a, int na_args) {
  if (na_args != 3) { fprintf(stderr, "blackscholes: ARGS = n R V\n"); return 2; }
  const long long n = arg_int(a[0], "n", 1, 1LL << 33);
  const float R = (float)arg_real(a[1], "R"), V = (float)arg_real(a[2], "V");
  float* d_s = dev_upload(read_input<float>(dir, "bs_s.bin", (size_t)n));
  float* d_x = dev_upload(read_input<float>(dir, "bs_x.bin", (size_t)n));
  float* d_t = dev_upload(read_input<float>(dir, "bs_t.bin", (size_t)n));
  float* d_call = dev_alloc<float>(n);
  float* d_put = dev_alloc<float>(n);
  const unsigned grid = blocks_for(n, 256);
  double t = time_reps(reps, [&]() {
    bs_kernel<<<grid, 256>>>(n, d_s, d_x, d_t, R, V, d_call, d_put);
    KCHECK();
  });
  write_output(dir, "bs_call", impl, dev_download(d_call, n));
  write_output(dir, "bs_put", impl, dev_download(d_put, n));
  printf("%.9f\n", t);
  return 0;
}

// ------------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr,
            "usage: %s WORKLOAD DIR REPS IMPL ARGS...\n"
            "  WORKLOAD: mdh jacobi spmv cg ep coins blackscholes (ARGS: see docs/workloads.md and\n"
            "  the header of bench/cuda/workloads.cu)\n",
            argv[0]);
    return 2;
  }
  const std::string wl = argv[1];
  const char* dir = argv[2];
  const int reps = (int)arg_int(argv[3], "REPS", 1, 1000000);
  const char* impl = argv[4];
  if (impl[0] == '\0') die("empty IMPL");
  char** args = argv + 5;
  const int nargs = argc - 5;

  int dev = 0;
  CK(cudaSetDevice(dev));
  CK(cudaFree(0));  // create the context before anything is timed
  CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaMallocHost(&g_pinned, 64));

  int rc;
  if (wl == "mdh") rc = run_mdh(dir, reps, impl, args, nargs);
  else if (wl == "jacobi") rc = run_jacobi(dir, reps, impl, args, nargs);
  else if (wl == "spmv") rc = run_spmv(dir, reps, impl, args, nargs);
  else if (wl == "cg") rc = run_cg(dir, reps, impl, args, nargs);
  else if (wl == "ep") rc = run_ep(dir, reps, impl, args, nargs);
  else if (wl == "coins") rc = run_coins(dir, reps, impl, args, nargs);
  else if (wl == "blackscholes") rc = run_blackscholes(dir, reps, impl, args, nargs);
  else {
    fprintf(stderr, "unknown workload '%s' (mdh jacobi spmv cg ep coins blackscholes)\n", wl.c_str());
    return 2;
  }
  if (rc == 0) {
    CK(cudaDeviceSynchronize());
    CK(cudaFreeHost(g_pinned));
  }
  fflush(stdout);
  return rc;
}
