#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_pack.sh here, with .gpu carried): unpacks the
# binaries, runs every filetest on the cuda backend and the CUDA integration tests, the
# differential fuzzer with cuda, builds the nvcc baselines and runs the GPU benchmarks. Output
# goes to stdout and $OUT (if set). Arguments pick steps (default all): filetests cuda library
# fuzz bench workloads kernels registers. FUZZ_CASES (default 20000) sets the fuzz budget.
set -uo pipefail
cd "$(dirname "$0")/.."
# The binaries were built in /work/main and find filetests and examples there.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
out=${OUT:-/tmp/weft-gpu}; mkdir -p "$out" /tmp/weft-bin
for f in .gpu/*.xz; do
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "/tmp/weft-bin/$(basename "$f" .xz)"
done
chmod +x /tmp/weft-bin/*
mkdir -p data/cache && cp .gpu/mache.pqr .gpu/lund_a.mtx .gpu/coins.png data/cache/
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
/tmp/weft-bin/weft devices
steps=" ${*:-filetests cuda library fuzz bench workloads kernels registers} "
want() { [[ "$steps" == *" $1 "* ]]; }
if want filetests; then
echo "== filetests on cuda"
WEFT_FILETEST_BACKENDS=cuda /tmp/weft-bin/all filetests --test-threads 1 2>&1 | tail -15 | tee "$out/filetests.txt"
fi
if want cuda; then
echo "== cuda integration tests"
/tmp/weft-bin/all cuda --test-threads 1 --nocapture 2>&1 | tail -30 | tee "$out/cuda_tests.txt"
fi
if want library; then
echo "== weft library on cuda: examples and arrays against the interpreter"
/tmp/weft-bin/all examples:: arrays:: --test-threads 1 --nocapture 2>&1 | grep -E 'example|test result|FAILED|panicked|cuda' | tee "$out/library.txt"
fi
if want fuzz; then
echo "== differential fuzzing with cuda"
/tmp/weft-bin/weft fuzz --backends interp,cranelift,llvm,llvm-fast,cuda,cuda-fast \
  --seed "${FUZZ_SEED:-7}" --cases "${FUZZ_CASES:-20000}" --quiet --out-dir "$out/fuzz" 2>&1 | tee "$out/fuzz.txt"
fi
if want workloads; then
echo "== workloads: tests on cuda (full image, class S, lund_a), then the benchmark suite"
/tmp/weft-bin/all workloads:: --test-threads 1 --nocapture 2>&1 | grep -E 'workload|test result|FAILED|panicked' | tee "$out/workloads_tests.txt"
nvcc -O3 -arch=sm_90 -o /tmp/weft-bin/workloads_cuda bench/cuda/workloads.cu
nvcc -O3 -arch=sm_90 --use_fast_math -o /tmp/weft-bin/workloads_cuda_fast bench/cuda/workloads.cu
/tmp/weft-bin/weft-bench workloads --gpu-only --cuda-bin /tmp/weft-bin --out "$out/performance-workloads-gpu.md" 2>&1 | tail -40
fi
if want kernels; then
echo "== kernel mode on cuda: the kernel filetests and examples against the interpreter, weft run, the benchmark"
WEFT_FILETEST_BACKENDS=cranelift,llvm,cuda /tmp/weft-bin/all filetests::filetests kernels:: --test-threads 1 --nocapture 2>&1 | grep -E 'kernel|agrees|test result|FAILED|panicked|filetests:' | tee "$out/kernels_tests.txt"
python3 -c 'import numpy as np; np.save("/tmp/x.npy", (np.arange(1<<20) % 7).astype(np.float32)); np.save("/tmp/p.npy", np.zeros(64, np.float32))'
/tmp/weft-bin/weft run examples/ir/kernels/reduce.weft --backend cuda --grid 64 --block 256 --in x=/tmp/x.npy --in partials=/tmp/p.npy --sum partials 2>&1 | tee -a "$out/kernels_tests.txt"
/tmp/weft-bin/weft fuzz --kernels --backends cranelift,llvm,cuda --seed 3 --cases "${KERNEL_FUZZ_CASES:-2000}" --out-dir "$out/kernel-fuzz" 2>&1 | tail -3 | tee -a "$out/kernels_tests.txt"
/tmp/weft-bin/weft-bench kernels --gpu --out "$out/performance-kernels.md" 2>&1 | tail -16
fi
if want registers; then
# scan.chain holds 5 work-groups a multiprocessor only at 48 registers or fewer
# (docs/performance.md, fifteenth session): a change that crosses it costs 10 %.
echo "== registers of the collectives' kernels (ptxas -v on their PTX)"
rm -rf /tmp/weft-ptx && mkdir -p /tmp/weft-ptx
WEFT_CACHE=off WEFT_DUMP_PTX=/tmp/weft-ptx /tmp/weft-bin/all collectives::one_pass collectives::sorts --test-threads 1 >/dev/null 2>&1
for f in /tmp/weft-ptx/*.ptx; do
  echo "$(basename "$f" .ptx): $(ptxas -v -arch=sm_90 -o /dev/null "$f" 2>&1 | grep -o 'Used [0-9]* registers.*')"
done | tee "$out/registers.txt"
fi
want bench || exit 0
echo "== baselines"
nvcc -O3 -arch=sm_90 -o /tmp/weft-bin/baseline_precise bench/cuda/baseline.cu
nvcc -O3 -arch=sm_90 --use_fast_math -o /tmp/weft-bin/baseline_fast bench/cuda/baseline.cu
nvcc -O3 -arch=sm_90 --fmad=false -o /tmp/weft-bin/baseline_nofma bench/cuda/baseline.cu
echo "== benchmarks"
/tmp/weft-bin/weft-bench gpu /tmp/weft-bin 2>&1 | tee "$out/gpu.md"
