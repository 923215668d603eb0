//! The `weft` library's arrays, apply over buffers and collectives on the interpreter, the CPU
//! with Cranelift and with LLVM: results equal the interpreter's, errors are clear `Err`s.

use weft::{arg_max, arg_min, max, min, product, sum, Array, Device};

/// The CPU devices every test runs on, after the interpreter.
fn devices() -> Vec<Device> {
    vec![Device::interp(), Device::cpu(), Device::cpu_llvm()]
}

#[test]
fn sums_agree_with_the_interpreter_bit_for_bit() {
    // Sizes around the fan-in exercise left-overs at several levels of the tree.
    for n in [1usize, 5, 16, 17, 255, 256, 257, 1000, 4099] {
        let xs: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.001 + 0.1)
            .collect();
        let a = Array::from_vec([n], xs.clone()).unwrap();
        let want = Device::interp().scope(|| sum(&a)).unwrap();
        for d in devices() {
            let got = d.scope(|| sum(&a)).unwrap();
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
            assert_eq!(min(&a).unwrap(), *xs.iter().min().unwrap());
            assert_eq!(max(&a).unwrap(), *xs.iter().max().unwrap());
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
    assert!(max(&e).is_err());
    assert!(arg_min(&e).is_err());
}
