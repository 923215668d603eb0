//! `weft-bench collectives [--gpu]` (issue 25): `bincount` of 10^7 i32 values into 256
//! bins, 10^7 Philox doubles, `cumsum` of 2^24 f32 and `sort` of 2^24 u32 on the CPU
//! devices (and CUDA GPU 0 with `--gpu`), next to
//! NumPy's `bincount(v, minlength=256)`, `Generator(Philox(key=7)).random(10^7)` and
//! `cumsum` and `sort` (and
//! CuPy's `bincount` and `sort` on a GPU), run by python3 in the same run on the same values; medians;
//! every weft result checked against the host's count or NumPy's first numbers. With
//! `--gpu` also issue 25's GPU sizes: `sort` of 2^26 u32 against CuPy's and `cumsum` of
//! 2^26 f32 against CuPy's copy of the same array (the scan's bandwidth target).
//! Markdown on stdout.

use crate::{fail, time_median as time};
use std::process::Command;
use weft::dsl::{index, random_f64_at, Out, Param, Program, Value};
use weft::{bincount, cumsum, sort, Array, Const, Device};

fn ok<T>(r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(e.to_string()))
}

/// Values counted.
const N: usize = 10_000_000;
/// Bins.
const BINS: usize = 256;

/// The values: `(i · 7919 + 13) mod 256`.
fn values() -> Vec<i32> {
    (0..N).map(|i| ((i * 7919 + 13) % BINS) as i32).collect()
}

const PY: &str = r#"
import sys, time
import numpy as np
n, bins, gpu = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
v = ((np.arange(n, dtype=np.int64) * 7919 + 13) % bins).astype(np.int32)
def med(f):
    f(); ts = []
    for _ in range(7):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[3]
print("numpy_bincount", med(lambda: np.bincount(v, minlength=bins)))
print("numpy_philox", med(lambda: np.random.Generator(np.random.Philox(key=7)).random(n)))
x = (np.arange(1 << 24) % 1000).astype(np.float32) * np.float32(0.001)
print("numpy_cumsum", med(lambda: np.cumsum(x)))
def mix(n):
    # SplitMix64's finaliser of 0, 1, …, n − 1, top 32 bits: the Rust side's `sort_key`.
    z = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return ((z ^ (z >> np.uint64(31))) >> np.uint64(32)).astype(np.uint32)
keys = mix(1 << 24)
print("numpy_sort", med(lambda: np.sort(keys)))
if gpu:
    import cupy as cp
    g = cp.asarray(v)
    def cb():
        cp.bincount(g, minlength=bins); cp.cuda.Device().synchronize()
    print("cupy_bincount", med(cb))
    gk = cp.asarray(keys)
    def cs():
        cp.sort(gk); cp.cuda.Device().synchronize()
    print("cupy_sort", med(cs))
    big = cp.asarray(mix(1 << 26))
    def cs26():
        cp.sort(big); cp.cuda.Device().synchronize()
    print("cupy_sort26", med(cs26))
    xf = cp.asarray((np.arange(1 << 26) % 1000).astype(np.float32) * np.float32(0.001))
    def cp26():
        xf.copy(); cp.cuda.Device().synchronize()
    print("cupy_copy26", med(cp26))
    dst = cp.empty_like(xf)
    def cpto26():
        cp.copyto(dst, xf); cp.cuda.Device().synchronize()
    print("cupy_copyto26", med(cpto26))
"#;

/// Key `i` of the sort rows: the top 32 bits of SplitMix64's finaliser of `i` (uniformly
/// spread keys; the Python side's `mix` makes the same ones). Keys `i · 2654435761 mod 2^32`,
/// used until the seventeenth session, give every 2,048-key tile exactly 128 keys of each
/// low digit, which flattered the GPU sort (2.30 ms against 2.65 ms for these, 2^26).
fn sort_key(i: usize) -> u32 {
    let mut z = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 32) as u32
}

/// Entry point.
pub fn main(args: &[String]) {
    let gpu = args.iter().any(|a| a == "--gpu");
    let v = values();
    let mut want = vec![0u32; BINS];
    for &x in &v {
        want[x as usize] += 1;
    }
    let va = ok(Array::from_vec([N], v));
    let mut devices = vec![
        ("cranelift", Device::cpu_cranelift()),
        ("llvm", Device::cpu_llvm()),
    ];
    if gpu {
        devices.push(("cuda", ok(Device::cuda(0))));
    }
    let key = Const::from_lanes(Value::<u64, 2>::ir_type(), &[7, 0]);
    let rng = ok(Program::record_named("uniforms", || {
        let k = Param::uniform::<Value<u64, 2>>("key");
        Out::named("u", random_f64_at(&k, &index::<1>().cast::<u64>()));
    }));
    let xs: Array<1, f32> = ok(Array::from_fn([1 << 24], |i| (i % 1000) as f32 * 0.001));
    let keys: Array<1, u32> = ok(Array::from_fn([1 << 24], sort_key));
    let mut sorted = ok(keys.to_vec());
    sorted.sort_unstable();
    let mut rows: Vec<(String, f64)> = Vec::new();
    // Issue 25's CPU scan target is ≥ 0.8× triad bandwidth: the STREAM triad of
    // `weft-bench`'s saxpy row (gcc -O3 -march=native -fopenmp) on 2^24 f32, before and after
    // the weft rows (bandwidth drifts on a shared machine).
    let triad_bin = crate::root().join("target/bench/triad");
    let has_gcc = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if has_gcc {
        let dir = crate::root().join("target/bench");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
        crate::gcc("triad.c", &triad_bin, &[]);
    } else {
        eprintln!("collectives: no gcc, so no triad to compare the scans with");
    }
    let triad = || {
        has_gcc.then(|| {
            crate::run_secs(
                Command::new(&triad_bin)
                    .arg((1u32 << 24).to_string())
                    .arg("10"),
            )
            .unwrap_or_else(|| fail("triad failed".to_string()))
        })
    };
    let mut triads: Vec<f64> = triad().into_iter().collect();
    let mut scans: Vec<(String, f64)> = Vec::new();
    for (name, dev) in &devices {
        let counts = ok(dev.scope(|| bincount(&va, BINS)));
        if ok(counts.to_vec()) != want {
            fail(format!("bincount on {name}: wrong counts"));
        }
        let t = time(7, || {
            let c = ok(dev.scope(|| bincount(&va, BINS)));
            ok(c.get(0));
        });
        rows.push((format!("bincount 10^7 → 256 bins, weft {name}"), t));
        let t = time(7, || {
            let u: Array<1, f64> = ok(rng.apply_shape_on(dev, &[N], key));
            ok(u.get(0));
        });
        rows.push((format!("10^7 Philox doubles, weft {name}"), t));
        let t = time(7, || {
            let y = ok(dev.scope(|| cumsum(&xs)));
            ok(y.get(0));
        });
        rows.push((format!("cumsum 2^24 f32, weft {name}"), t));
        if *name != "cuda" {
            scans.push((format!("cumsum 2^24 f32, weft {name}"), t));
        }
        if ok(ok(dev.scope(|| sort(&keys))).to_vec()) != sorted {
            fail(format!("sort on {name}: wrong order"));
        }
        let t = time(5, || {
            let y = ok(dev.scope(|| sort(&keys)));
            ok(y.get(0));
        });
        rows.push((format!("sort 2^24 u32, weft {name}"), t));
        if *name == "cuda" {
            // Issue 25's GPU sizes: sort and scan of 2^26, against CuPy's sort and a copy.
            let big: Array<1, u32> = ok(Array::from_fn([1 << 26], sort_key));
            let y = ok(ok(dev.scope(|| sort(&big))).to_vec());
            let x = ok(big.to_vec());
            let sum = |v: &[u32]| v.iter().fold(0u64, |a, &k| a.wrapping_add(u64::from(k)));
            if y.windows(2).any(|w| w[0] > w[1]) || sum(&y) != sum(&x) {
                fail("sort 2^26 on cuda: wrong order".to_string());
            }
            let t = time(5, || {
                let y = ok(dev.scope(|| sort(&big)));
                ok(y.get(0));
            });
            rows.push(("sort 2^26 u32, weft cuda".to_string(), t));
            let xf: Array<1, f32> = ok(Array::from_fn([1 << 26], |i| (i % 1000) as f32 * 0.001));
            // Waits as CuPy's rows do, with a synchronize (reading an element back adds a
            // transfer the copy does not make: about 9 µs).
            let t = time(7, || {
                let y = ok(dev.scope(|| cumsum(&xf)));
                ok(dev.synchronize());
                drop(y);
            });
            rows.push((
                "cumsum 2^26 f32, weft cuda (base: CuPy's copy)".to_string(),
                t,
            ));
            rows.push((
                "cumsum 2^26 f32, weft cuda (base: CuPy's copyto, preallocated)".to_string(),
                t,
            ));
        }
    }
    triads.extend(triad());
    let py = Command::new("python3")
        .arg("-c")
        .arg(PY)
        .arg(N.to_string())
        .arg(BINS.to_string())
        .arg(if gpu { "1" } else { "0" })
        .output();
    let mut base: std::collections::HashMap<String, f64> = Default::default();
    match py {
        Ok(o) if o.status.success() => {
            for l in String::from_utf8_lossy(&o.stdout).lines() {
                if let Some((k, v)) = l.split_once(' ') {
                    if let Ok(t) = v.trim().parse::<f64>() {
                        base.insert(k.to_string(), t);
                    }
                }
            }
        }
        Ok(o) => eprintln!(
            "collectives: python3 failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => eprintln!("collectives: no python3 ({e})"),
    }
    println!("| row | median | NumPy (CuPy) in the same run | NumPy ÷ weft |");
    println!("|---|---:|---:|---:|");
    for (name, t) in rows {
        let b = if name.starts_with("bincount") {
            if name.ends_with("cuda") {
                base.get("cupy_bincount")
            } else {
                base.get("numpy_bincount")
            }
        } else if name.starts_with("sort 2^26") {
            base.get("cupy_sort26")
        } else if name.starts_with("cumsum 2^26") && name.contains("copyto") {
            base.get("cupy_copyto26")
        } else if name.starts_with("cumsum 2^26") {
            base.get("cupy_copy26")
        } else if name.starts_with("sort") {
            if name.ends_with("cuda") {
                base.get("cupy_sort")
            } else {
                base.get("numpy_sort")
            }
        } else if name.starts_with("cumsum") {
            base.get("numpy_cumsum")
        } else {
            base.get("numpy_philox")
        };
        match b {
            Some(b) => println!(
                "| {name} | {:.2} ms | {:.2} ms | {:.2}× |",
                t * 1e3,
                b * 1e3,
                b / t
            ),
            None => println!("| {name} | {:.2} ms | — | — |", t * 1e3),
        }
    }
    // Bandwidth of the CPU scans (4 bytes read and 4 written an element) against the triad's
    // (12 bytes an element), the faster of its two runs.
    if triads.is_empty() {
        return;
    }
    let tt = triads.iter().copied().fold(f64::INFINITY, f64::min);
    let gbs = |bytes: f64, t: f64| bytes * f64::from(1u32 << 24) / t / 1e9;
    println!();
    println!(
        "Triad (gcc -O3 -march=native -fopenmp, 2^24 f32): {:.2} ms, {:.1} GB/s (runs: {})",
        tt * 1e3,
        gbs(12.0, tt),
        triads
            .iter()
            .map(|t| format!("{:.2} ms", t * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!("| scan | median | GB/s (read + written) | of triad bandwidth |");
    println!("|---|---:|---:|---:|");
    for (name, t) in scans {
        println!(
            "| {name} | {:.2} ms | {:.1} | {:.2}× |",
            t * 1e3,
            gbs(8.0, t),
            gbs(8.0, t) / gbs(12.0, tt)
        );
    }
}
