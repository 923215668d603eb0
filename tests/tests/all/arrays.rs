//! The `weft` library's arrays, apply over buffers and collectives on the interpreter, the CPU
//! with Cranelift and with LLVM: results equal the interpreter's, errors are clear `Err`s.

use weft::{arg_max, arg_min, maximum, minimum, product, sum, Array, Device};

/// The devices every test runs on: the interpreter, both CPU backends, and CUDA GPU 0 when
/// a driver and GPU are present.
fn devices() -> Vec<Device> {
    let mut d = vec![
        Device::interp(),
        Device::cpu_cranelift(),
        Device::cpu_llvm(),
    ];
    if let Ok(g) = Device::cuda(0) {
        d.push(g);
    }
    d
}

#[test]
fn sums_agree_with_the_interpreter_bit_for_bit() {
    // Sizes around the lanes (32), a segment (2048) and two levels of the tree; multiples
    // of a block (1024) take the CPU's `reduce.rows` levels.
    for n in [
        1usize, 5, 16, 17, 31, 32, 33, 255, 1000, 2047, 2048, 2049, 3072, 4099, 65_536, 70_000,
    ] {
        let xs: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.001 + 0.1)
            .collect();
        let a = Array::from_vec([n], xs.clone()).unwrap();
        let want = Device::interp().scope(|| sum(&a)).unwrap();
        for d in devices() {
            let got = d.scope(|| sum(&a)).unwrap();
            // The order of additions depends on n alone: every device, GPUs included.
            assert_eq!(got.to_bits(), want.to_bits(), "n = {n} on {d}");
        }
        let exact: f64 = xs.iter().map(|&x| x as f64).sum();
        assert!(
            (want as f64 - exact).abs() < 1e-3 * exact.max(1.0),
            "n = {n}"
        );
    }
}

#[test]
fn integer_reductions_are_exact() {
    let n = 3001;
    let xs: Vec<i32> = (0..n).map(|i| (i * 37 % 101) - 50).collect();
    let a = Array::from_vec([n as usize], xs.clone()).unwrap();
    for d in devices() {
        d.scope(|| {
            assert_eq!(sum(&a).unwrap(), xs.iter().sum::<i32>());
            assert_eq!(minimum(&a).unwrap(), *xs.iter().min().unwrap());
            assert_eq!(maximum(&a).unwrap(), *xs.iter().max().unwrap());
            let p = product(&Array::from_vec([3], vec![2i64, 3, 7]).unwrap()).unwrap();
            assert_eq!(p, 42);
            let (v, i) = arg_max(&a).unwrap();
            assert_eq!(v, 50);
            assert_eq!(
                i,
                xs.iter().position(|&x| x == 50).unwrap(),
                "first maximum"
            );
            let (v, i) = arg_min(&a).unwrap();
            assert_eq!((v, i), (-50, xs.iter().position(|&x| x == -50).unwrap()));
        });
    }
}

#[test]
fn vector_sums_and_2d_arrays() {
    let a = Array::from_fn([40, 30], |i| [i as f32, 1.0, (i % 3) as f32]).unwrap();
    let want = [(0..1200).sum::<usize>() as f32, 1200.0, 1200.0];
    for d in devices() {
        assert_eq!(d.scope(|| sum(&a)).unwrap(), want, "on {d}");
    }
}

#[test]
fn gather_reads_with_the_boundary_mode() {
    let b = Array::from_vec([5], vec![10.0f32, 11.0, 12.0, 13.0, 14.0]).unwrap();
    let idx = Array::from_vec([4], vec![0i32, 4, 7, -1]).unwrap();
    for d in devices() {
        let g = d.scope(|| b.gather(&idx)).unwrap();
        assert_eq!(
            g.to_vec().unwrap(),
            vec![10.0, 14.0, 14.0, 10.0],
            "clamp on {d}"
        );
        let r = b.with_boundary(weft::ir::Boundary::Repeat);
        let g = d.scope(|| r.gather(&idx)).unwrap();
        assert_eq!(
            g.to_vec().unwrap(),
            vec![10.0, 14.0, 12.0, 14.0],
            "repeat on {d}"
        );
    }
}

#[test]
fn scatter_writes_and_copies_on_write() {
    let a = Array::from_vec([4], vec![0u32; 4]).unwrap();
    let mut b = a.clone();
    assert!(b.shares_storage(&a));
    let idx = Array::from_vec([2], vec![3i32, 1]).unwrap();
    let v = Array::from_vec([2], vec![7u32, 9]).unwrap();
    b.scatter(&idx, &v).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![0, 9, 0, 7]);
    assert_eq!(
        a.to_vec().unwrap(),
        vec![0; 4],
        "the original keeps its contents"
    );
    let bad = Array::from_vec([1], vec![4i32]).unwrap();
    let e = b
        .scatter(&bad, &Array::from_vec([1], vec![1u32]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index 0 is [4], outside the array's shape [4]"),
        "{e}"
    );
}

#[test]
fn views_share_storage_and_read_correctly() {
    let a = Array::from_fn([4, 5], |i| i as i32).unwrap();
    let s = a.slice([1, 1], [3, 4]).unwrap();
    assert_eq!(s.shape(), [2, 3]);
    assert_eq!(s.to_vec().unwrap(), vec![6, 7, 8, 11, 12, 13]);
    let t = a.stride([2, 2]).unwrap();
    assert_eq!(t.to_vec().unwrap(), vec![0, 2, 4, 10, 12, 14]);
    for d in devices() {
        assert_eq!(d.scope(|| sum(&s)).unwrap(), 57, "on {d}");
        assert_eq!(d.scope(|| sum(&t)).unwrap(), 42, "on {d}");
    }
    let o = a.offset([3, 0]).unwrap();
    assert_eq!(o.to_vec().unwrap(), vec![15, 16, 17, 18, 19]);
    assert!(a.slice([0, 0], [5, 1]).is_err());
}

#[test]
fn ndarray_round_trip_and_dtype_errors() {
    let nd = ndarray::Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f32);
    let a = Array::<2, f32>::from_ndarray(&nd).unwrap();
    assert_eq!(a.to_ndarray().unwrap(), nd);
    let wrong = ndarray::ArrayD::<f64>::zeros(ndarray::IxDyn(&[3, 4]));
    let e = Array::<2, f32>::from_ndarray_dyn(&wrong)
        .unwrap_err()
        .to_string();
    assert!(e.contains("f64") && e.contains("f32"), "{e}");
    let rank = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[3]));
    assert!(Array::<2, f32>::from_ndarray_dyn(&rank).is_err());
    assert!(Array::<1, f32>::from_vec([3], vec![1.0]).is_err());
}

#[test]
fn empty_arrays() {
    let e = Array::<1, f32>::from_vec([0], vec![]).unwrap();
    assert_eq!(sum(&e).unwrap(), 0.0);
    assert!(maximum(&e).is_err());
    assert!(arg_min(&e).is_err());
}

#[test]
fn apply_and_collective_errors_are_clear() {
    use weft::dsl::{In, Out, Program, Value1f};
    let add = Program::record(|| {
        let a = In::<Value1f>::named("a");
        let b = In::<Value1f>::named("b");
        Out::named("c", a + b);
    })
    .unwrap();
    let x = Array::from_vec([3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let y = Array::from_vec([4], vec![1.0f32; 4]).unwrap();
    // Varying inputs of different shapes.
    let e = add
        .apply::<Array<1, f32>>((&x, &y))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`b`") && e.contains("[4]") && e.contains("[3]"),
        "{e}"
    );
    // Wrong element type (from ndarray f64 data).
    let nd = ndarray::ArrayD::<f64>::zeros(ndarray::IxDyn(&[3]));
    let z = Array::<1, f64>::from_ndarray_dyn(&nd).unwrap();
    let e = add
        .apply::<Array<1, f32>>((&x, &z))
        .unwrap_err()
        .to_string();
    assert!(e.contains("f32") && e.contains("f64"), "{e}");
    // Wrong argument count, and a result type that does not match the output.
    assert!(add
        .apply::<Array<1, f32>>(&x)
        .unwrap_err()
        .to_string()
        .contains("takes 2 inputs"));
    assert!(add.apply::<Array<1, i32>>((&x, &x)).is_err());
    // A combiner of the wrong arity (3 inputs) and of the wrong type.
    let three = Program::record(|| {
        let a = In::<Value1f>::new();
        let b = In::<Value1f>::new();
        let c = In::<Value1f>::new();
        Out::from(a + b + c);
    })
    .unwrap();
    let e = weft::reduce(&three, &x).unwrap_err().to_string();
    assert!(e.contains("2 inputs") && e.contains("takes 3"), "{e}");
    let e = weft::reduce(&add, &Array::from_vec([2], vec![1i32, 2]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("combines f32") && e.contains("i32"), "{e}");
    // A count predicate that does not give a bool.
    assert!(weft::count(&add, &x).is_err());
}

#[test]
fn deferred_results_and_residency() {
    use weft::dsl::{In, Out, Program, Value1f};
    let double = Program::record(|| {
        let a = In::<Value1f>::new();
        Out::from(&a + &a);
    })
    .unwrap();
    let mut x = Array::from_fn([1000], |i| i as f32).unwrap();
    let old = x.clone();
    x = double.apply(&x).unwrap();
    assert!(x.residency().unwrap().pending, "not run until read");
    assert_eq!(x.get(999).unwrap(), Some(1998.0));
    let r = x.residency().unwrap();
    assert!(r.host && !r.pending);
    assert_eq!(
        old.get(999).unwrap(),
        Some(999.0),
        "the input kept its contents"
    );
    // A grid input runs without storage.
    let idx = Program::record(|| {
        let i = In::<weft::dsl::Value1i>::new();
        Out::from(i.cast::<f32>() * 0.5f32);
    })
    .unwrap();
    let h: Array<1, f32> = idx.apply(&weft::grid1(5)).unwrap();
    assert_eq!(h.to_vec().unwrap(), vec![0.0, 0.5, 1.0, 1.5, 2.0]);
}

/// A long chain of applies with no read in between (an iteration that reads its result only
/// at the end) neither overflows the stack when the result is read nor when the chain is
/// dropped unread: chains of pending launches are bounded.
#[test]
fn long_chains_of_deferred_applies_run() {
    use weft::dsl::{In, Out, Program, Value1i};
    let inc = Program::record(|| {
        let a = In::<Value1i>::new();
        Out::from(a + 1i32);
    })
    .unwrap();
    let mut x = Array::from_fn([3], |i| i as i32).unwrap();
    for _ in 0..20_000 {
        x = inc.apply(&x).unwrap();
    }
    assert_eq!(x.to_vec().unwrap(), vec![20_000, 20_001, 20_002]);
    let mut y = x.clone();
    for _ in 0..20_000 {
        y = inc.apply(&y).unwrap();
    }
    drop(y);
    assert_eq!(x.get(0).unwrap(), Some(20_000));
}

/// A user combiner that is associative but does not commute — composing affine maps
/// `x ↦ a·x + b` of wrapping i32, held as `<2 x i32>` `(a, b)` — reduces in the order of the
/// elements, on every device and at sizes spanning runs, segments and levels of the tree.
#[test]
fn user_reductions_keep_the_order_of_the_elements() {
    let compose = weft::dsl::Program::parse(
        "program @compose(%p: <2 x i32>, %q: <2 x i32>) -> (r: <2 x i32>) {
  %pa: i32 = extract %p, [0]
  %pb: i32 = extract %p, [1]
  %qa: i32 = extract %q, [0]
  %qb: i32 = extract %q, [1]
  %a: i32 = mul %pa, %qa
  %t: i32 = mul %pb, %qa
  %b: i32 = add %t, %qb
  %r: <2 x i32> = tuple %a, %b
  return %r
}",
        "compose",
    )
    .unwrap();
    for n in [1usize, 2, 63, 64, 65, 2047, 2048, 2049, 5000, 70_001] {
        let xs: Vec<[i32; 2]> = (0..n)
            .map(|i| [(i as i32 % 5) * 2 + 1, (i as i32 * 7919) % 1000 - 500])
            .collect();
        // (a1, b1) then (a2, b2): x ↦ a2·(a1·x + b1) + b2 = (a1·a2)·x + (b1·a2 + b2).
        let want = xs[1..].iter().fold(xs[0], |p, q| {
            [
                p[0].wrapping_mul(q[0]),
                p[1].wrapping_mul(q[0]).wrapping_add(q[1]),
            ]
        });
        let a = Array::from_vec([n], xs).unwrap();
        for d in devices() {
            let got = d.scope(|| weft::reduce(&compose, &a)).unwrap();
            assert_eq!(got, want, "n = {n} on {d}");
        }
        let cpu = Device::cpu_cranelift();
        let got = weft::collective::with_gpu_plan(|| cpu.scope(|| weft::reduce(&compose, &a)));
        assert_eq!(got.unwrap(), want, "n = {n}, GPU plan on {cpu}");
    }
}

/// Every built-in reduction of every arithmetic element type, at sizes around a column (32),
/// a block (2048) and the CPU's switch from fused blocks to columns (16 blocks), equals the
/// interpreter's bits on every device; floats include NaNs, infinities and signed zeros, so
/// min/max's NaN propagation and arg_min/arg_max's ties are checked too. NaN payloads are
/// unspecified (docs/semantics.md), so every NaN compares as one value.
#[test]
fn every_reduction_of_every_type_equals_the_interpreter() {
    fn bits<T: weft::Scalar>(x: T) -> u64 {
        #[allow(clippy::eq_op)]
        let nan = x != x;
        if nan {
            u64::MAX
        } else {
            x.to_bits()
        }
    }
    fn check<T: weft::Scalar + weft::Elem>(what: &str, gen: impl Fn(usize) -> T) {
        for n in [
            0usize, 1, 2, 31, 33, 1000, 2049, 3072, 40_000, 65_536, 70_001,
        ] {
            let a = Array::from_vec([n], (0..n).map(&gen).collect()).unwrap();
            type Row = (
                u64,
                u64,
                Option<u64>,
                Option<u64>,
                Option<(u64, usize)>,
                Option<(u64, usize)>,
            );
            let all = |d: &Device| -> Row {
                d.scope(|| {
                    (
                        bits(sum(&a).unwrap()),
                        bits(product(&a).unwrap()),
                        minimum(&a).ok().map(bits),
                        maximum(&a).ok().map(bits),
                        arg_min(&a).ok().map(|(x, i)| (bits(x), i)),
                        arg_max(&a).ok().map(|(x, i)| (bits(x), i)),
                    )
                })
            };
            let want = all(&Device::interp());
            assert_eq!(want.2.is_none(), n == 0, "{what}: min of {n} elements");
            for d in devices().iter().skip(1) {
                assert_eq!(all(d), want, "{what}, n = {n} on {d}");
            }
            // The GPU's decomposition (levels down to one element, no fused launch) on the
            // CPU gives the same bits.
            let cpu = Device::cpu_cranelift();
            let levels = weft::collective::with_gpu_plan(|| all(&cpu));
            assert_eq!(levels, want, "{what}, n = {n}, GPU plan on {cpu}");
        }
    }
    let h = |i: usize| (i.wrapping_mul(2_654_435_761) >> 7) % 2001;
    check("i8", |i| (h(i) % 251) as i8);
    check("u8", |i| h(i) as u8);
    check("i16", |i| h(i) as i16 - 1000);
    check("u16", |i| h(i) as u16);
    check("i32", |i| h(i) as i32 - 1000);
    check("u32", |i| (h(i) as u32).wrapping_mul(2_246_822_519));
    check("i64", |i| (h(i) as i64 - 1000) << 20);
    check("u64", |i| h(i) as u64 * 3);
    let special = |i: usize, x: f64| match i % 997 {
        13 => f64::NAN,
        14 => f64::INFINITY,
        15 => -0.0,
        16 => 0.0,
        _ => x,
    };
    check("f64", |i| special(i, (h(i) as f64 - 1000.0) * 0.37));
    check("f32", |i| special(i, (h(i) as f64 - 1000.0) * 0.37) as f32);
    check("f16", |i| {
        half::f16::from_f64(special(i, (h(i) as f64 - 1000.0) * 0.01))
    });
}

/// `count` with a predicate equals the interpreter on every device, also for NaNs.
#[test]
fn counts_equal_the_interpreter() {
    use weft::dsl::{In, Out, Program, Value1f};
    let pos = Program::record(|| {
        let x = In::<Value1f>::new();
        Out::from(x.gt(0.5f32));
    })
    .unwrap();
    for n in [0usize, 1, 33, 2049, 40_000, 140_001] {
        let xs: Vec<f32> = (0..n)
            .map(|i| {
                if i % 101 == 7 {
                    f32::NAN
                } else {
                    ((i * 7919) % 1000) as f32 * 0.001
                }
            })
            .collect();
        let want = xs.iter().filter(|&&x| x > 0.5).count() as u64;
        let a = Array::from_vec([n], xs).unwrap();
        for d in devices() {
            assert_eq!(
                d.scope(|| weft::count(&pos, &a)).unwrap(),
                want,
                "n = {n} on {d}"
            );
        }
        // The GPU's plan (two levels per kernel-mode launch, the map in the first) on the CPU.
        let cpu = Device::cpu_cranelift();
        let got = weft::collective::with_gpu_plan(|| cpu.scope(|| weft::count(&pos, &a)));
        assert_eq!(got.unwrap(), want, "n = {n}, GPU plan on {cpu}");
    }
}

/// Outputs come from memory pools: results kept alive across many later applies of the same
/// size (whose freed outputs the pools reuse) keep their values, on every device.
#[test]
fn pooled_outputs_never_alias_live_arrays() {
    use weft::dsl::{In, Out, Param, Program, Value1f};
    let p = Program::record(|| {
        let x = In::<Value1f>::new();
        let k = Param::uniform::<Value1f>("k");
        Out::from(x * 2.0f32 + k);
    })
    .unwrap();
    let n = 4099;
    let x = Array::from_fn([n], |i| i as f32).unwrap();
    for d in devices() {
        let mut kept = Vec::new();
        for i in 0..60 {
            let y: Array<1, f32> = d.scope(|| p.apply((&x, i as f32))).unwrap();
            y.to_device(&d).unwrap();
            if i % 7 == 0 {
                kept.push((i, y));
            }
        }
        for (i, y) in &kept {
            let v = y.to_vec().unwrap();
            assert!(
                v.iter()
                    .enumerate()
                    .all(|(e, &got)| got == e as f32 * 2.0 + *i as f32),
                "apply {i} on {d}: a later apply overwrote its output"
            );
            assert_eq!(
                d.scope(|| sum(y)).unwrap(),
                Device::interp().scope(|| sum(y)).unwrap(),
                "sum of apply {i} on {d}"
            );
        }
    }
}

/// `sum_array` leaves the sum where it was computed, as a one-element array another launch
/// reads without a host round trip; its bits are `sum`'s on every device.
#[test]
fn sums_stay_on_the_device_as_one_element_arrays() {
    use weft::dsl::{In, InArray, Out, Program, Value1f, Value1i};
    use weft::ir::Boundary;
    let scale = Program::record(|| {
        let x = In::<Value1f>::new();
        let total = InArray::<1, Value1f>::named("total", Boundary::Clamp);
        Out::from(x / total.read(Value1i::splat(0)));
    })
    .unwrap();
    for n in [0usize, 1, 5000] {
        let a = Array::from_fn([n], |i| (i % 13) as f32 + 0.5).unwrap();
        for d in devices() {
            d.scope(|| {
                let s = weft::sum_array(&a).unwrap();
                assert_eq!(s.shape(), [1]);
                let want = sum(&a).unwrap();
                assert_eq!(
                    s.to_vec().unwrap()[0].to_bits(),
                    want.to_bits(),
                    "n = {n} on {d}"
                );
                if n > 0 {
                    let y: Array<1, f32> = scale.apply((&a, &s)).unwrap();
                    assert_eq!(
                        y.get(n - 1).unwrap(),
                        Some(a.get(n - 1).unwrap().unwrap() / want)
                    );
                }
            });
        }
    }
}

/// User combiners of one scalar state run as a kernel-mode level on a GPU (`reduce.runs`:
/// the segment staged through shared memory): an f32 sum written as a user combiner, whose
/// bits depend on the order, and "first nonzero", which is associative but does not
/// commute, give the interpreter's results on every device and with the GPU's plan on the
/// CPU.
#[test]
fn scalar_user_reductions_keep_the_order_on_every_plan() {
    use weft::dsl::{select, In, Out, Program, Value1f, Value1i};
    let add = Program::record(|| {
        let a = In::<Value1f>::new();
        let b = In::<Value1f>::new();
        Out::from(a + b);
    })
    .unwrap();
    let first_nonzero = Program::record(|| {
        let a = In::<Value1i>::new();
        let b = In::<Value1i>::new();
        Out::from(select(a.ne(0i32), &a, b));
    })
    .unwrap();
    for n in [1usize, 2, 63, 64, 65, 2047, 2048, 2049, 70_001] {
        let xs = Array::from_fn([n], |i| ((i * 7919) % 1000) as f32 * 0.001 + 0.1).unwrap();
        let ys = Array::from_fn([n], |i| if i % 977 == 500 { i as i32 } else { 0 }).unwrap();
        let want_x = Device::interp().scope(|| weft::reduce(&add, &xs)).unwrap();
        let want_y = (0..n).find(|i| i % 977 == 500).map_or(0, |i| i as i32);
        let mut runs = Vec::new();
        for d in devices() {
            runs.push((d.to_string(), d.clone(), false));
        }
        runs.push((
            "cpu with the GPU plan".into(),
            Device::cpu_cranelift(),
            true,
        ));
        for (what, d, gpu_plan) in runs {
            let run = || {
                d.scope(|| {
                    (
                        weft::reduce(&add, &xs).unwrap(),
                        weft::reduce(&first_nonzero, &ys).unwrap(),
                    )
                })
            };
            let (x, y) = if gpu_plan {
                weft::collective::with_gpu_plan(run)
            } else {
                run()
            };
            assert_eq!(x.to_bits(), want_x.to_bits(), "sum, n = {n} on {what}");
            assert_eq!(y, want_y, "first nonzero, n = {n} on {what}");
        }
    }
}
