"""The peers' sum of 2^26 f32 on the GPU, from call to result (the ceiling study of issue 21's
`sum` target, next to bench/cuda/reduce.cu): PyTorch's and CuPy's (CUB's) `x.sum().item()`
and each library's device copy, medians of 30 calls. Run: python3 bench/cuda/reduce_peers.py"""
import time, statistics
n = 1 << 26
def bench(name, f, sync, bytes_):
    for _ in range(5): f(); sync()
    ts = []
    for _ in range(30):
        t = time.perf_counter(); f(); sync(); ts.append(time.perf_counter() - t)
    m = statistics.median(ts)
    print(f"{name:40s} call-to-result {bytes_/m/1e9:7.1f} GB/s ({m*1e6:6.1f} us)")
try:
    import torch
    x = torch.rand(n, device='cuda', dtype=torch.float32); y = torch.empty_like(x)
    bench("torch copy_ (read+written)", lambda: y.copy_(x), torch.cuda.synchronize, 8*n)
    bench("torch x.sum().item()", lambda: x.sum().item(), lambda: None, 4*n)
except Exception as e: print("torch:", e)
try:
    import cupy as cp
    x = cp.random.rand(n, dtype=cp.float32); y = cp.empty_like(x)
    s = cp.cuda.Stream.null
    bench("cupy copy (read+written)", lambda: y.__setitem__(slice(None), x), s.synchronize, 8*n)
    bench("cupy x.sum().item()", lambda: x.sum().item(), lambda: None, 4*n)
except Exception as e: print("cupy:", e)
