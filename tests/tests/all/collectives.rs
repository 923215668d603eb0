//! The collectives of issue 25: counter-based random numbers (Philox4x64-10 against
//! Random123's known-answer vectors and NumPy's `Philox` streams — digests of the first
//! 10,000 outputs of three keys, computed with NumPy 2.4 — with the same bits on every
//! device), collectives whose predicates and combiners read host uniforms, and histograms
//! (`bincount`, `histogram`) against a host count, segmented reductions against a host
//! fold, and scans against a host emulation of their fixed order, on every device.

use weft::dsl::{
    index, philox4x64, random_below_at, random_f32_at, random_f64_at, random_normal_at,
    random_u64_at, Out, Param, Program, Value,
};
use weft::dsl::{In, Uniform, Value1f};
use weft::{
    bincount, count, cumsum, cumsum_exclusive, histogram, reduce, scan, scan_exclusive,
    scatter_add, scatter_max, scatter_min, segment_max, segment_min, segment_reduce, segment_sum,
    sort, sort_pairs, Array, Const, Device,
};

fn devices() -> Vec<Device> {
    let mut d = vec![
        Device::interp(),
        Device::cpu_cranelift(),
        Device::cpu_llvm(),
        Device::group(&[Device::cpu_cranelift(), Device::cpu_llvm()]).unwrap(),
    ];
    match Device::cuda(0) {
        Ok(g) => d.push(g),
        Err(e) => eprintln!("random: SKIPPED CUDA ({e})"),
    }
    d
}

#[test]
fn philox_matches_random123_known_answers() {
    // Random123's kat_vectors for philox4x64 with 10 rounds: (counter, key, result).
    let m = u64::MAX;
    let cases: [([u64; 4], [u64; 2], [u64; 4]); 3] = [
        (
            [0; 4],
            [0; 2],
            [
                0x16554d9eca36314c,
                0xdb20fe9d672d0fdc,
                0xd7e772cee186176b,
                0x7e68b68aec7ba23b,
            ],
        ),
        (
            [m; 4],
            [m; 2],
            [
                0x87b092c3013fe90b,
                0x438c3c67be8d0224,
                0x9cc7d7c69cd777b6,
                0xa09caebf594f0ba0,
            ],
        ),
        (
            [
                0x243f6a8885a308d3,
                0x13198a2e03707344,
                0xa4093822299f31d0,
                0x082efa98ec4e6c89,
            ],
            [0x452821e638d01377, 0xbe5466cf34e90c6c],
            [
                0xa528f45403e61d95,
                0x38c72dbd566e9788,
                0xa5a1610e72fd18b5,
                0x57bd43b5e52b7fe6,
            ],
        ),
    ];
    for (ctr, key, want) in cases {
        let got = philox4x64(&Value::from_array(ctr), &Value::from_array(key));
        assert_eq!(
            got.to_array().unwrap(),
            want,
            "counter {ctr:x?}, key {key:x?}"
        );
    }
}

/// Outputs `j` of the raw, f64 and f32 streams at `j = index`; and a normal and an integer
/// below 1000.
fn streams() -> (Program, Program) {
    let uniform = Program::record_named("streams", || {
        let key = Param::uniform::<Value<u64, 2>>("key");
        let j = index::<1>().cast::<u64>();
        Out::named("raw", random_u64_at(&key, &j));
        Out::named("f64", random_f64_at(&key, &j));
        Out::named("f32", random_f32_at(&key, &j));
    })
    .unwrap();
    let other = Program::record_named("others", || {
        let key = Param::uniform::<Value<u64, 2>>("key");
        let j = index::<1>().cast::<u64>();
        Out::named("normal", random_normal_at(&key, &j));
        Out::named("below", random_below_at(&key, &j, 1000));
    })
    .unwrap();
    (uniform, other)
}

type Streams = (Array<1, u64>, Array<1, f64>, Array<1, f32>);

#[test]
fn streams_equal_numpy_and_every_device_gives_the_same_bits() {
    let (p, q) = streams();
    // key (low, high) → xor and wrapping sum of the first 10,000 `random_raw()` outputs, the
    // 10,000th, the wrapping sum of the bits of `random()`'s first 10,000 doubles and of
    // `random(dtype=float32)`'s first 10,000 floats (NumPy 2.4.6).
    let numpy: [([u64; 2], [u64; 5]); 3] = [
        (
            [0, 0],
            [
                0x1723bc6f8c09d3f1,
                0x35e4844adf5eebb3,
                0x57e5d23d0a09ff8a,
                0xe48c808854c31ac6,
                0x99350f9f079,
            ],
        ),
        (
            [12345, 0],
            [
                0x583533c49d9aea27,
                0xde577b13c3dc93e9,
                0xb0c5b03515924ac4,
                0xe323120fd61d06d1,
                0x9936bfaef74,
            ],
        ),
        (
            [0x0123456789abcdef, 0xdeadbeefcafef00d],
            [
                0x8177c8a53f2e8a2d,
                0x2808be0692f8da79,
                0x1eafb8ebe21a7b71,
                0xed2ff4e7a442113b,
                0x99338e3502a,
            ],
        ),
    ];
    let n = 10_000;
    for (key, want) in numpy {
        let k = Const::from_lanes(Value::<u64, 2>::ir_type(), &key);
        let mut first: Option<Vec<Vec<u64>>> = None;
        for dev in devices() {
            let (raw, f64s, f32s): Streams = p.apply_shape_on(&dev, &[n], k).unwrap();
            let (normal, below): (Array<1, f64>, Array<1, u64>) =
                q.apply_shape_on(&dev, &[n], k).unwrap();
            let raw = raw.to_vec().unwrap();
            let f64s: Vec<u64> = f64s.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
            let f32s: Vec<u64> = f32s
                .to_vec()
                .unwrap()
                .iter()
                .map(|x| u64::from(x.to_bits()))
                .collect();
            let normal: Vec<u64> = normal
                .to_vec()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            let below = below.to_vec().unwrap();
            let xor = raw.iter().fold(0, |a, b| a ^ b);
            let sum = |v: &[u64]| v.iter().fold(0u64, |a, &b| a.wrapping_add(b));
            let got = [xor, sum(&raw), raw[n - 1], sum(&f64s), sum(&f32s)];
            assert_eq!(got, want, "{} against NumPy, key {key:x?}", dev.name());
            assert!(below.iter().all(|&b| b < 1000), "{}", dev.name());
            let all = vec![raw, f64s, f32s, normal, below];
            match &first {
                None => first = Some(all),
                Some(f) => assert!(f == &all, "{} against the interpreter", dev.name()),
            }
        }
        // The normals look normal: mean near 0, variance near 1 (10,000 samples).
        let normal = &first.unwrap()[3];
        let xs: Vec<f64> = normal.iter().map(|&b| f64::from_bits(b)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }
}

#[test]
fn count_and_reduce_take_programs_that_read_uniforms() {
    let limit = Uniform::named("limit", 0.5f32);
    let above = Program::record_named("above", || {
        let x = In::<Value1f>::named("x");
        Out::named("hit", x.gt(limit.value()));
    })
    .unwrap();
    let scale = Uniform::named("scale", 2.0f32);
    // (a + b)·scale is not associative unless scale is 1: the order is weft's fixed one,
    // so only the value at the call matters here.
    let scaled = Program::record_named("scaled", || {
        let a = In::<Value1f>::named("a");
        let b = In::<Value1f>::named("b");
        Out::named("c", (a + b) * scale.value());
    })
    .unwrap();
    let xs = Array::from_fn([5000], |i| (i % 100) as f32 * 0.01).unwrap();
    for dev in devices() {
        dev.scope(|| {
            limit.set(0.5);
            assert_eq!(count(&above, &xs).unwrap(), 2450, "{}", dev.name());
            limit.set(0.895);
            assert_eq!(count(&above, &xs).unwrap(), 500, "{}", dev.name());
            scale.set(1.0);
            let s = reduce(&scaled, &xs).unwrap();
            let plain = weft::sum(&xs).unwrap();
            assert!(
                (s - plain).abs() <= 1e-3 * plain,
                "{} {s} {plain}",
                dev.name()
            );
        });
    }
    // A scan's combiner reads its uniform too, also in the GPU's one-pass kernel: with
    // `scale` 1 each combination is an addition, so the scan is `cumsum`'s bit for bit.
    scale.set(1.0);
    let want: Vec<u32> = scan_order(&xs.to_vec().unwrap(), &|a, b| a + b)
        .into_iter()
        .map(canon)
        .collect();
    on_every_device_and_the_gpu_plan(|d| {
        let y = scan(&scaled, &xs).unwrap().to_vec().unwrap();
        let y: Vec<u32> = y.into_iter().map(canon).collect();
        assert!(y == want, "scan with a uniform on {d}");
    });
}

/// Runs `check` (given the device's name) on every device, then on a CPU device with the
/// GPU's plan of collectives (`scan.chain`, `scan.tile`, the GPU's reduction levels).
fn on_every_device_and_the_gpu_plan(check: impl Fn(&str)) {
    for dev in devices() {
        dev.scope(|| check(&dev.name()));
    }
    let dev = Device::cpu_cranelift();
    let d = format!("{} with the GPU plan", dev.name());
    weft::collective::with_gpu_plan(|| dev.scope(|| check(&d)));
}

#[test]
fn bincount_and_histogram_equal_a_host_count_on_every_device() {
    for n in [0usize, 1, 2, 1023, 1024, 1025, 100_003] {
        let v: Vec<i32> = (0..n)
            .map(|i| ((i as i64 * 7919 + 13) % 5011) as i32 - 3)
            .collect();
        let xs: Vec<f32> = (0..n)
            .map(|i| match i % 97 {
                0 => f32::NAN,
                1 => 2.5,  // the range's top: the last bin
                2 => -1.0, // below the range
                _ => ((i * 37) % 1000) as f32 * 0.0025 - 0.01,
            })
            .collect();
        let va = Array::from_vec([n], v.clone()).unwrap();
        let xa = Array::from_vec([n], xs.clone()).unwrap();
        for bins in [1usize, 7, 256, 5000] {
            let mut want = vec![0u32; bins];
            for &x in &v {
                if x >= 0 && (x as usize) < bins {
                    want[x as usize] += 1;
                }
            }
            let (lo, hi) = (0.0f64, 2.5f64);
            let mut hist = vec![0u32; bins];
            for &x in &xs {
                let x = f64::from(x);
                if x >= lo && x <= hi {
                    let b = (((x - lo) * (bins as f64 / (hi - lo))).floor() as usize).min(bins - 1);
                    hist[b] += 1;
                }
            }
            for dev in devices() {
                let got = dev.scope(|| bincount(&va, bins)).unwrap();
                assert_eq!(
                    got.to_vec().unwrap(),
                    want,
                    "bincount {} n {n} bins {bins}",
                    dev.name()
                );
                let got = dev.scope(|| histogram(&xa, bins, (0.0, 2.5))).unwrap();
                assert_eq!(
                    got.to_vec().unwrap(),
                    hist,
                    "histogram {} n {n} bins {bins}",
                    dev.name()
                );
            }
        }
    }
    let e = histogram(&Array::from_vec([1], vec![0.5f32]).unwrap(), 4, (1.0, 1.0)).unwrap_err();
    assert!(e.to_string().contains("lo < hi"), "{e}");
    let e = bincount(&Array::from_vec([1], vec![0]).unwrap(), 0).unwrap_err();
    assert!(e.to_string().contains("bins"), "{e}");
}

/// IEEE 754-2019 `minimum`/`maximum` (NaN wins; −0 < +0), as docs/semantics.md defines them.
fn ieee(a: f32, b: f32, less: bool) -> f32 {
    if a.is_nan() || b.is_nan() {
        return f32::NAN;
    }
    if a == b {
        return if less == a.is_sign_negative() { a } else { b };
    }
    if (a < b) == less {
        a
    } else {
        b
    }
}

/// `(a + b) / 2`: a combiner that is not associative, so its results show the order.
fn half_sum() -> Program {
    Program::record_named("half_sum", || {
        let a = In::<Value1f>::named("a");
        let b = In::<Value1f>::named("b");
        Out::named("c", (a + b) * 0.5f32);
    })
    .unwrap()
}

#[test]
fn segmented_reductions_equal_a_host_fold_on_every_device() {
    let plus = half_sum();
    for rows in [1usize, 2, 17, 1000, 5003] {
        // Row lengths 0 to 9, so some rows are empty; one NaN.
        let mut offsets = vec![0i32];
        for r in 0..rows {
            offsets.push(offsets[r] + ((r * 7 + 3) % 10) as i32);
        }
        let n = *offsets.last().unwrap() as usize;
        let mut v: Vec<f32> = (0..n)
            .map(|i| ((i * 13) % 29) as f32 * 0.37 - 4.0)
            .collect();
        if n > 40 {
            v[40] = f32::NAN;
        }
        let fold = |init: f32, f: &dyn Fn(f32, f32) -> f32| -> Vec<u32> {
            (0..rows)
                .map(|r| {
                    let (lo, hi) = (offsets[r] as usize, offsets[r + 1] as usize);
                    canon(v[lo..hi].iter().fold(init, |a, &b| f(a, b)))
                })
                .collect()
        };
        let want_sum = fold(0.0, &|a, b| a + b);
        let want_min = fold(f32::INFINITY, &|a, b| ieee(a, b, true));
        let want_max = fold(f32::NEG_INFINITY, &|a, b| ieee(a, b, false));
        let want_half = fold(1.0, &|a, b| (a + b) * 0.5);
        let va = Array::from_vec([n], v.clone()).unwrap();
        let oa = Array::from_vec([rows + 1], offsets.clone()).unwrap();
        let got =
            |a: Array<1, f32>| -> Vec<u32> { a.to_vec().unwrap().into_iter().map(canon).collect() };
        for dev in devices() {
            dev.scope(|| {
                let d = dev.name();
                assert_eq!(
                    got(segment_sum(&va, &oa).unwrap()),
                    want_sum,
                    "sum {d} {rows}"
                );
                assert_eq!(
                    got(segment_min(&va, &oa).unwrap()),
                    want_min,
                    "min {d} {rows}"
                );
                assert_eq!(
                    got(segment_max(&va, &oa).unwrap()),
                    want_max,
                    "max {d} {rows}"
                );
                let h = segment_reduce(&plus, &va, &oa, 1.0f32).unwrap();
                assert_eq!(got(h), want_half, "reduce {d} {rows}");
            });
        }
    }
    let ints = Array::from_vec([4], vec![1i32, 2, 3, 4]).unwrap();
    let rows = Array::from_vec([3], vec![0, 3, 4]).unwrap();
    assert_eq!(
        segment_sum(&ints, &rows).unwrap().to_vec().unwrap(),
        vec![6, 4]
    );
    let none = Array::from_vec([0], Vec::<i32>::new()).unwrap();
    let e = segment_sum(&ints, &none).unwrap_err();
    assert!(e.to_string().contains("at least one element"), "{e}");
}

/// `x`'s bits, every NaN as one (NaN payloads are unspecified: docs/semantics.md).
fn canon(x: f32) -> u32 {
    if x.is_nan() {
        f32::NAN.to_bits()
    } else {
        x.to_bits()
    }
}

/// The inclusive scan of `x` in weft's order (docs/semantics.md, "Scans"): blocks of 32
/// folded left to right, after the scan of the earlier blocks' totals.
fn scan_order<T: Copy>(x: &[T], op: &dyn Fn(T, T) -> T) -> Vec<T> {
    const FAN: usize = 32;
    if x.is_empty() {
        return Vec::new();
    }
    let fold = |lo: usize, hi: usize| x[lo + 1..hi].iter().fold(x[lo], |a, &b| op(a, b));
    let totals: Vec<T> = (0..x.len().div_ceil(FAN))
        .map(|b| fold(b * FAN, ((b + 1) * FAN).min(x.len())))
        .collect();
    let scanned = if x.len() > FAN {
        scan_order(&totals, op)
    } else {
        Vec::new()
    };
    (0..x.len())
        .map(|i| {
            let b = i / FAN;
            let y = fold(b * FAN, i + 1);
            if b > 0 {
                op(scanned[b - 1], y)
            } else {
                y
            }
        })
        .collect()
}

#[test]
fn scans_follow_their_fixed_order_on_every_device() {
    let half = half_sum();
    for n in [0usize, 1, 2, 31, 32, 33, 1023, 1024, 1025, 100_003] {
        let xf: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1013) as f32 * 0.013 - 6.0)
            .collect();
        let xi: Vec<i32> = (0..n).map(|i| (i as i32).wrapping_mul(2_654_435)).collect();
        let fa = Array::from_vec([n], xf.clone()).unwrap();
        let ia = Array::from_vec([n], xi.clone()).unwrap();
        let xd: Vec<f64> = xf.iter().map(|&x| f64::from(x) * 1.0000001).collect();
        let xu: Vec<u64> = xi.iter().map(|&x| (x as u64) << 20).collect();
        let xt: Vec<[f32; 2]> = xf.iter().map(|&x| [x, -x * 0.5]).collect();
        let (da, ua, ta) = (
            Array::from_vec([n], xd.clone()).unwrap(),
            Array::from_vec([n], xu.clone()).unwrap(),
            Array::from_vec([n], xt.clone()).unwrap(),
        );
        let want_d: Vec<u64> = scan_order(&xd, &|a, b| a + b)
            .into_iter()
            .map(f64::to_bits)
            .collect();
        let want_u = scan_order(&xu, &|a: u64, b| a.wrapping_add(b));
        let want_t: Vec<[u32; 2]> = scan_order(&xt, &|a: [f32; 2], b| [a[0] + b[0], a[1] + b[1]])
            .into_iter()
            .map(|p| [canon(p[0]), canon(p[1])])
            .collect();
        let want_f: Vec<u32> = scan_order(&xf, &|a, b| a + b)
            .into_iter()
            .map(canon)
            .collect();
        let want_i = scan_order(&xi, &|a: i32, b| a.wrapping_add(b));
        let mut want_ie = vec![0];
        want_ie.extend(&want_i[..n.saturating_sub(1)]);
        let want_ie = if n == 0 { Vec::new() } else { want_ie };
        let want_h: Vec<u32> = scan_order(&xf, &|a, b| (a + b) * 0.5)
            .into_iter()
            .map(canon)
            .collect();
        let mut want_he = vec![canon(3.0)];
        want_he.extend(&want_h[..n.saturating_sub(1)]);
        let want_he = if n == 0 { Vec::new() } else { want_he };
        let bits =
            |a: Array<1, f32>| -> Vec<u32> { a.to_vec().unwrap().into_iter().map(canon).collect() };
        // Also a CPU device with the GPU's plan (`scan.chain`, `scan.tile`).
        on_every_device_and_the_gpu_plan(|d| {
            assert_eq!(bits(cumsum(&fa).unwrap()), want_f, "f32 {d} {n}");
            assert_eq!(
                cumsum(&ia).unwrap().to_vec().unwrap(),
                want_i,
                "i32 {d} {n}"
            );
            let e = cumsum_exclusive(&ia).unwrap().to_vec().unwrap();
            assert_eq!(e, want_ie, "exclusive {d} {n}");
            assert_eq!(bits(scan(&half, &fa).unwrap()), want_h, "user {d} {n}");
            let he = scan_exclusive(&half, &fa, 3.0).unwrap();
            assert_eq!(bits(he), want_he, "user exclusive {d} {n}");
            // Other types: f64, u64 (wrapping) and 2-lane f32 tuples, lane by lane.
            let d64 = cumsum(&da).unwrap().to_vec().unwrap();
            let d64: Vec<u64> = d64.iter().map(|x| x.to_bits()).collect();
            assert_eq!(d64, want_d, "f64 {d} {n}");
            assert_eq!(
                cumsum(&ua).unwrap().to_vec().unwrap(),
                want_u,
                "u64 {d} {n}"
            );
            let t2 = cumsum(&ta).unwrap().to_vec().unwrap();
            let t2: Vec<[u32; 2]> = t2.iter().map(|p| [canon(p[0]), canon(p[1])]).collect();
            assert_eq!(t2, want_t, "[f32; 2] {d} {n}");
        });
    }
}

/// The GPU's one-pass scan (`scan.chain`) looks back through the levels of the tree in its
/// fixed order: lengths around its tiles (8,192 elements) and around the groups of 32 of
/// them at each level, run with the GPU plan on a CPU device (and on each GPU present),
/// against [`scan_order`]; also the interpreter for a few tiles.
#[test]
fn one_pass_scans_keep_the_tree_order_across_tiles() {
    let half = half_sum();
    let sizes = [
        8_191usize, 8_192, 8_193, 40_000, 262_144, 270_000, 1_048_576, 2_109_441, 33_571_841,
    ];
    let mut runs: Vec<(Device, usize)> = vec![
        (Device::cpu_cranelift(), usize::MAX),
        (Device::interp(), 40_000),
    ];
    runs.extend(
        devices()
            .into_iter()
            .filter(|d| d.name().starts_with("cuda"))
            .map(|d| (d, usize::MAX)),
    );
    let gpus = runs.len() > 2;
    // Up, then down again on the GPUs: there the scratch words are kept between calls, so a
    // smaller scan starts from words a larger one used (and its launch zeroed).
    for (k, &n) in sizes.iter().chain(sizes.iter().rev().skip(1)).enumerate() {
        let down = k >= sizes.len();
        if down && !gpus {
            break;
        }
        let xf: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1013) as f32 * 0.013 - 6.0)
            .collect();
        let xi: Vec<i32> = (0..n).map(|i| (i as i32).wrapping_mul(2_654_435)).collect();
        let xu: Vec<u32> = xi.iter().map(|&x| x as u32 ^ 0x8000_0001).collect();
        let fa = Array::from_vec([n], xf.clone()).unwrap();
        let ia = Array::from_vec([n], xi.clone()).unwrap();
        let ua = Array::from_vec([n], xu.clone()).unwrap();
        let want_f: Vec<u32> = scan_order(&xf, &|a, b| a + b)
            .into_iter()
            .map(canon)
            .collect();
        let want_h: Vec<u32> = scan_order(&xf, &|a, b| (a + b) * 0.5)
            .into_iter()
            .map(canon)
            .collect();
        let want_i = scan_order(&xi, &|a: i32, b| a.wrapping_add(b));
        let want_u = scan_order(&xu, &|a: u32, b| a.wrapping_add(b));
        let bits =
            |a: Array<1, f32>| -> Vec<u32> { a.to_vec().unwrap().into_iter().map(canon).collect() };
        for (dev, most) in &runs {
            if n > *most || (down && !dev.name().starts_with("cuda")) {
                continue;
            }
            let d = dev.name();
            let check = || {
                assert!(bits(cumsum(&fa).unwrap()) == want_f, "f32 {d} {n}");
                // The exclusive scan, written one place on by the same kernel.
                let e = bits(cumsum_exclusive(&fa).unwrap());
                assert!(e[0] == 0 && e[1..] == want_f[..n - 1], "exclusive {d} {n}");
                assert!(bits(scan(&half, &fa).unwrap()) == want_h, "user {d} {n}");
                assert!(
                    cumsum(&ia).unwrap().to_vec().unwrap() == want_i,
                    "i32 {d} {n}"
                );
                assert!(
                    cumsum(&ua).unwrap().to_vec().unwrap() == want_u,
                    "u32 {d} {n}"
                );
            };
            weft::collective::with_gpu_plan(|| dev.scope(check));
        }
    }
}

#[test]
fn integer_scatters_equal_a_host_loop_on_every_device() {
    for n in [0usize, 1, 1000, 70_001] {
        let idx: Vec<i32> = (0..n).map(|i| ((i * 7919) % 613) as i32 - 5).collect();
        let vi: Vec<i32> = (0..n)
            .map(|i| (i as i32).wrapping_mul(977) - 40_000)
            .collect();
        let vu: Vec<u64> = (0..n).map(|i| (i as u64) << 33 | 7).collect();
        let ti: Vec<i32> = (0..600).map(|i| i * 3 - 100).collect();
        let tu: Vec<u64> = (0..600).map(|i| i as u64).collect();
        let host = |t: &[i32], f: &dyn Fn(i32, i32) -> i32| {
            let mut t = t.to_vec();
            for (&k, &v) in idx.iter().zip(&vi) {
                if (0..600).contains(&k) {
                    t[k as usize] = f(t[k as usize], v);
                }
            }
            t
        };
        let want_add = host(&ti, &|a, b| a.wrapping_add(b));
        let want_min = host(&ti, &|a, b| a.min(b));
        let want_max = host(&ti, &|a, b| a.max(b));
        let mut want_u = tu.clone();
        for (&k, &v) in idx.iter().zip(&vu) {
            if (0..600).contains(&k) {
                want_u[k as usize] = want_u[k as usize].wrapping_add(v);
            }
        }
        let (ia, via, vua) = (
            Array::from_vec([n], idx.clone()).unwrap(),
            Array::from_vec([n], vi.clone()).unwrap(),
            Array::from_vec([n], vu.clone()).unwrap(),
        );
        let (tia, tua) = (
            Array::from_vec([600], ti.clone()).unwrap(),
            Array::from_vec([600], tu.clone()).unwrap(),
        );
        for dev in devices() {
            dev.scope(|| {
                let d = dev.name();
                let add = scatter_add(&tia, &ia, &via).unwrap().to_vec().unwrap();
                assert_eq!(add, want_add, "add {d} {n}");
                let min = scatter_min(&tia, &ia, &via).unwrap().to_vec().unwrap();
                assert_eq!(min, want_min, "min {d} {n}");
                let max = scatter_max(&tia, &ia, &via).unwrap().to_vec().unwrap();
                assert_eq!(max, want_max, "max {d} {n}");
                let u = scatter_add(&tua, &ia, &vua).unwrap().to_vec().unwrap();
                assert_eq!(u, want_u, "u64 add {d} {n}");
                // The target is a value: unchanged.
                assert_eq!(tia.to_vec().unwrap(), ti, "{d}");
            });
        }
    }
    let f = Array::from_vec([2], vec![1.0f32, 2.0]).unwrap();
    let i = Array::from_vec([2], vec![0, 1]).unwrap();
    let e = scatter_min(&f, &i, &f).unwrap_err().to_string();
    assert!(e.contains("only i32, u32, i64 and u64"), "{e}");
    let e = scatter_add(&i, &Array::from_vec([1], vec![0]).unwrap(), &i)
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 indices for 2 values"), "{e}");
}

#[test]
fn float_scatter_add_sums_in_input_order_on_every_device() {
    // Each element's values summed left to right from −0 in input order, then added to it
    // (docs/semantics.md): the host's loop in that order, bit for bit.
    fn want<T: Copy + std::ops::Add<Output = T>>(t: &[T], idx: &[i32], v: &[T], z: T) -> Vec<T> {
        let mut runs: Vec<Option<T>> = vec![None; t.len()];
        for (&k, &x) in idx.iter().zip(v) {
            if k >= 0 && (k as usize) < t.len() {
                let r = &mut runs[k as usize];
                *r = Some(r.unwrap_or(z) + x);
            }
        }
        t.iter()
            .zip(&runs)
            .map(|(&a, r)| r.map_or(a, |s| a + s))
            .collect()
    }
    for n in [0usize, 1, 2, 1000, 70_001] {
        let idx: Vec<i32> = (0..n).map(|i| ((i * 7919) % 613) as i32 - 5).collect();
        let vf: Vec<f32> = (0..n)
            .map(|i| match i % 101 {
                0 => -0.0,
                1 => 1e30,
                _ => ((i * 104_729) % 2003) as f32 * 0.37 - 300.0,
            })
            .collect();
        let vd: Vec<f64> = vf.iter().map(|&x| x as f64 * 1.000_000_1).collect();
        let tf: Vec<f32> = (0..600)
            .map(|i| if i % 7 == 0 { -0.0 } else { i as f32 * 0.1 })
            .collect();
        let td: Vec<f64> = tf.iter().map(|&x| x as f64).collect();
        let (wf, wd) = (want(&tf, &idx, &vf, -0.0), want(&td, &idx, &vd, -0.0));
        let bits_f = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let bits_d = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let ia = Array::from_vec([n], idx.clone()).unwrap();
        let (vfa, vda) = (
            Array::from_vec([n], vf.clone()).unwrap(),
            Array::from_vec([n], vd.clone()).unwrap(),
        );
        let (tfa, tda) = (
            Array::from_vec([600], tf.clone()).unwrap(),
            Array::from_vec([600], td.clone()).unwrap(),
        );
        for dev in devices() {
            dev.scope(|| {
                let d = dev.name();
                let f = scatter_add(&tfa, &ia, &vfa).unwrap().to_vec().unwrap();
                assert_eq!(bits_f(&f), bits_f(&wf), "f32 {d} {n}");
                let g = scatter_add(&tda, &ia, &vda).unwrap().to_vec().unwrap();
                assert_eq!(bits_d(&g), bits_d(&wd), "f64 {d} {n}");
                assert_eq!(
                    bits_f(&tfa.to_vec().unwrap()),
                    bits_f(&tf),
                    "{d}: unchanged"
                );
            });
        }
    }
}

#[test]
fn sorts_are_stable_and_equal_rusts_on_every_device() {
    for n in [0usize, 1, 2, 1000, 2048, 2049, 70_001] {
        let ku: Vec<u32> = (0..n)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761) >> 7)
            .collect();
        let ki: Vec<i32> = (0..n).map(|i| ((i * 7919) % 1001) as i32 - 500).collect();
        let mut kf: Vec<f32> = (0..n)
            .map(|i| ((i * 104_729) % 2003) as f32 * 0.37 - 300.0)
            .collect();
        for (j, x) in [
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            -0.0,
            0.0,
            f32::NEG_INFINITY,
        ]
        .into_iter()
        .enumerate()
        {
            if j < n {
                kf[j * n / 6] = x;
            }
        }
        let mut want_u = ku.clone();
        want_u.sort_unstable();
        let mut want_f = kf.clone();
        want_f.sort_by(|a, b| a.total_cmp(b));
        let want_f: Vec<u32> = want_f.iter().map(|x| x.to_bits()).collect();
        let idx: Vec<u32> = (0..n as u32).collect();
        let k64: Vec<u64> = (0..n as u64)
            .map(|i| {
                f64::from_bits(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 2).to_bits() ^ (i << 63)
            })
            .collect();
        let f64a = Array::from_vec(
            [n],
            k64.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>(),
        )
        .unwrap();
        let i64a = Array::from_vec([n], k64.iter().map(|&b| b as i64).collect::<Vec<_>>()).unwrap();
        let mut want_pairs: Vec<(i32, u32)> = ki.iter().copied().zip(idx.clone()).collect();
        want_pairs.sort_by_key(|p| p.0);
        let (ua, ia, fa, xa) = (
            Array::from_vec([n], ku.clone()).unwrap(),
            Array::from_vec([n], ki.clone()).unwrap(),
            Array::from_vec([n], kf.clone()).unwrap(),
            Array::from_vec([n], idx.clone()).unwrap(),
        );
        for dev in devices() {
            dev.scope(|| {
                let d = dev.name();
                assert_eq!(sort(&ua).unwrap().to_vec().unwrap(), want_u, "u32 {d} {n}");
                let f: Vec<u32> = sort(&fa)
                    .unwrap()
                    .to_vec()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect();
                assert_eq!(f, want_f, "f32 {d} {n}");
                let mut want_i = ki.clone();
                want_i.sort_unstable();
                assert_eq!(sort(&ia).unwrap().to_vec().unwrap(), want_i, "i32 {d} {n}");
                let (fk, fv) = sort_pairs(&ua, &fa).unwrap();
                let mut want_uf: Vec<(u32, u32)> = ku
                    .iter()
                    .copied()
                    .zip(kf.iter().map(|x| x.to_bits()))
                    .collect();
                want_uf.sort_by_key(|p| p.0);
                let got_uf: Vec<(u32, u32)> = fk
                    .to_vec()
                    .unwrap()
                    .into_iter()
                    .zip(fv.to_vec().unwrap().iter().map(|x| x.to_bits()))
                    .collect();
                assert_eq!(got_uf, want_uf, "u32 keys, f32 values {d} {n}");
                // 64-bit keys: eight passes.
                let mut want_64: Vec<u64> = k64.clone();
                want_64.sort_by(|a, b| f64::from_bits(*a).total_cmp(&f64::from_bits(*b)));
                let got: Vec<u64> = sort(&f64a)
                    .unwrap()
                    .to_vec()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect();
                assert_eq!(got, want_64, "f64 {d} {n}");
                let mut want_i64: Vec<i64> = k64.iter().map(|&x| x as i64).collect();
                want_i64.sort_unstable();
                assert_eq!(
                    sort(&i64a).unwrap().to_vec().unwrap(),
                    want_i64,
                    "i64 {d} {n}"
                );
                let (k, v) = sort_pairs(&ia, &xa).unwrap();
                let got: Vec<(i32, u32)> = k
                    .to_vec()
                    .unwrap()
                    .into_iter()
                    .zip(v.to_vec().unwrap())
                    .collect();
                assert_eq!(got, want_pairs, "pairs {d} {n}");
            });
        }
    }
    let e = sort(&Array::from_vec([2], vec![[1.0f32, 2.0], [0.0, 1.0]]).unwrap()).unwrap_err();
    assert!(e.to_string().contains("are sorted"), "{e}");
}

/// Bits of an f32 with every NaN made one NaN (payloads are unspecified across devices).
fn canon_bits(x: f32) -> u32 {
    if x.is_nan() {
        0x7fc0_0000
    } else {
        x.to_bits()
    }
}

#[test]
fn apply_reduce_equals_the_apply_then_the_reduction_on_every_device() {
    use weft::{maximum_array, minimum_array, product, sum_array, Reduction};
    // A map with two outputs: `y` is kept, `d` reduced.
    let map = Program::record_named("twice", || {
        let x = In::<Value1f>::named("x");
        Out::named("y", &x * 2.0f32 + 1.0f32);
        Out::named("d", &x * &x - 0.5f32);
    })
    .unwrap();
    let reductions = [
        Reduction::Sum,
        Reduction::Product,
        Reduction::Min,
        Reduction::Max,
    ];
    // The launch then the reduction, on the current device.
    let unfused = |x: &Array<1, f32>, r: Reduction| -> (Vec<f32>, f32) {
        let (y, d): (Array<1, f32>, Array<1, f32>) = map.apply(x).unwrap();
        let v = match r {
            Reduction::Sum => sum_array(&d).unwrap().to_vec().unwrap()[0],
            Reduction::Product => product(&d).unwrap(),
            Reduction::Min => minimum_array(&d).unwrap().to_vec().unwrap()[0],
            Reduction::Max => maximum_array(&d).unwrap().to_vec().unwrap()[0],
        };
        (y.to_vec().unwrap(), v)
    };
    let lens = [1usize, 2, 1023, 1024, 1025, 2049, 16_384, 32_775, 100_003];
    let mut reference: Vec<(usize, Reduction, Vec<f32>, f32)> = Vec::new();
    for dev in devices() {
        dev.scope(|| {
            for &n in &lens {
                // Values near 1 (so products stay finite), a NaN in the longest.
                let mut xs: Vec<f32> = (0..n)
                    .map(|i| 1.0 + ((i * 7919) % 1000) as f32 * 1e-6)
                    .collect();
                if n == 100_003 {
                    xs[77_777] = f32::NAN;
                }
                let x = Array::from_vec([n], xs).unwrap();
                for r in reductions {
                    let (y, d): (Array<1, f32>, Array<1, f32>) =
                        map.apply_reduce("d", r, &x).unwrap();
                    let (y, d) = (y.to_vec().unwrap(), d.to_vec().unwrap());
                    let (uy, ud) = unfused(&x, r);
                    let what = format!("{dev}, {n} elements, {r:?}");
                    assert_eq!(d.len(), 1, "{what}");
                    assert_eq!(d[0].to_bits(), ud.to_bits(), "{what}: reduction");
                    let differ = y
                        .iter()
                        .zip(&uy)
                        .position(|(a, b)| a.to_bits() != b.to_bits());
                    assert_eq!(differ, None, "{what}: kept output");
                    match reference.iter().find(|e| e.0 == n && e.1 == r) {
                        Some((_, _, ry, rd)) => {
                            assert_eq!(canon_bits(d[0]), canon_bits(*rd), "{what}: vs interp");
                            let differ = y
                                .iter()
                                .zip(ry)
                                .position(|(a, b)| canon_bits(*a) != canon_bits(*b));
                            assert_eq!(differ, None, "{what}: kept output vs interp");
                        }
                        None => reference.push((n, r, y, d[0])),
                    }
                }
            }
            // Empty launches: the identities, or an error for min and max.
            let e = Array::<1, f32>::from_vec([0], vec![]).unwrap();
            let (_, s): (Array<1, f32>, Array<1, f32>) =
                map.apply_reduce("d", Reduction::Sum, &e).unwrap();
            assert_eq!(s.to_vec().unwrap(), vec![0.0]);
            let (_, p): (Array<1, f32>, Array<1, f32>) =
                map.apply_reduce("d", Reduction::Product, &e).unwrap();
            assert_eq!(p.to_vec().unwrap(), vec![1.0]);
            let err = map
                .apply_reduce::<Array<1, f32>, f32>("d", Reduction::Max, &e)
                .expect_err("max of nothing");
            assert!(err.to_string().contains("empty launch"), "{err}");
        });
    }
    // Errors name what is wrong.
    let x = Array::from_vec([4], vec![1.0f32; 4]).unwrap();
    let err = map
        .apply_reduce::<Array<1, f32>, f32>("nope", Reduction::Sum, &x)
        .expect_err("no such output");
    assert!(err.to_string().contains("no output `nope`"), "{err}");
    assert!(err.to_string().contains("y, d"), "{err}");
    let err = map
        .apply_reduce::<Array<1, f32>, i32>("d", Reduction::Sum, &x)
        .expect_err("wrong type");
    assert!(err.to_string().contains("elements of type f32"), "{err}");
}

#[test]
fn apply_reduce_of_a_stencil_equals_the_apply_then_the_reduction() {
    use weft::{maximum_array, sum_array, Reduction};
    let sweep = weft_workloads::jacobi::sweep().unwrap();
    // Shapes smaller than the stencil, rows not a multiple of any block, a large one.
    let shapes = [
        [1usize, 1],
        [3, 5],
        [2, 700],
        [64, 64],
        [100, 130],
        [257, 300],
        [512, 512],
    ];
    for dev in devices() {
        dev.scope(|| {
            for s in shapes {
                let n = s[0] * s[1];
                let u: Vec<f32> = (0..n).map(|i| ((i * 31) % 97) as f32 * 0.01).collect();
                let u = Array::from_vec(s, u).unwrap();
                let (next, d): (Array<2, f32>, Array<2, f32>) = sweep.apply_shape(&s, &u).unwrap();
                let want_max = maximum_array(&d).unwrap().to_vec().unwrap();
                let want_sum = sum_array(&d).unwrap().to_vec().unwrap();
                let want = next.to_vec().unwrap();
                let (got, m): (Array<2, f32>, Array<1, f32>) = sweep
                    .apply_reduce_shape(&s, "delta", Reduction::Max, &u)
                    .unwrap();
                let (_, t): (Array<2, f32>, Array<1, f32>) = sweep
                    .apply_reduce_shape(&s, "delta", Reduction::Sum, &u)
                    .unwrap();
                let what = format!("{dev}, {s:?}");
                let got = got.to_vec().unwrap();
                let differ = got
                    .iter()
                    .zip(&want)
                    .position(|(a, b)| a.to_bits() != b.to_bits());
                assert_eq!(differ, None, "{what}: grid");
                assert_eq!(m.to_vec().unwrap(), want_max, "{what}: max");
                assert_eq!(
                    t.to_vec().unwrap()[0].to_bits(),
                    want_sum[0].to_bits(),
                    "{what}: sum"
                );
            }
        });
    }
}

#[test]
fn apply_reduce_of_every_element_type_equals_the_apply_then_the_reduction() {
    use weft::{maximum_array, minimum_array, sum_array, Reduction};
    // One output per type from an f32 input: the kept `y` and the reduced ones.
    let p = Program::parse(
        "program @many(%x: f32) -> (y: f32, i: i32, u: u8, h: i16, l: u64, d: f64, f: f16, t: <2 x f32>) {
  %k: f32 = const 1000.0
  %s: f32 = mul %x, %k
  %i: i32 = cast %s
  %u: u8 = cast %i
  %h: i16 = cast %i
  %l: u64 = cast %i
  %d: f64 = cast %x
  %f: f16 = cast %x
  %n: f32 = neg %x
  %t: <2 x f32> = tuple %x, %n
  return %x, %i, %u, %h, %l, %d, %f, %t
}",
        "many",
    )
    .unwrap();
    fn check<T: weft::Elem + std::fmt::Debug>(
        p: &Program,
        name: &str,
        x: &Array<1, f32>,
        what: &str,
    ) {
        for r in [Reduction::Sum, Reduction::Min, Reduction::Max] {
            let (_, got): (weft::Bundle, Array<1, T>) = p.apply_reduce(name, r, x).unwrap();
            let all: weft::Bundle = p.apply(x).unwrap();
            let names = ["y", "i", "u", "h", "l", "d", "f", "t"];
            let k = names.iter().position(|n| *n == name).unwrap();
            let out: Array<1, T> = all.get(k).unwrap();
            let want = match r {
                Reduction::Sum => sum_array(&out),
                Reduction::Min => minimum_array(&out),
                _ => maximum_array(&out),
            }
            .unwrap();
            assert_eq!(
                format!("{:?}", got.to_vec().unwrap()),
                format!("{:?}", want.to_vec().unwrap()),
                "{what}: {name} {r:?}"
            );
        }
    }
    for dev in devices() {
        dev.scope(|| {
            for n in [1usize, 17, 1023, 5000, 70_001] {
                let xs: Vec<f32> = (0..n)
                    .map(|i| ((i * 7919) % 2001) as f32 * 0.37 - 370.0)
                    .collect();
                let x = Array::from_vec([n], xs).unwrap();
                let what = format!("{dev}, {n} elements");
                check::<i32>(&p, "i", &x, &what);
                check::<u8>(&p, "u", &x, &what);
                check::<i16>(&p, "h", &x, &what);
                check::<u64>(&p, "l", &x, &what);
                check::<f64>(&p, "d", &x, &what);
                check::<half::f16>(&p, "f", &x, &what);
                check::<[f32; 2]>(&p, "t", &x, &what);
            }
        });
    }
}
