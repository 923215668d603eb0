//! Device groups (issue 27): a launch split across a group's members gives the bits one
//! device gives — maps of every rank reading `index`, `shape` and arrays at any coordinates,
//! chains of applies whose results stay split, reductions — on groups of CPU devices, the
//! interpreter, the same device twice, and one GPU twice when there is one.

use weft::dsl::{index, shape, In, InArray, Out, Program, Value1f, Value1i};
use weft::ir::Boundary;
use weft::{maximum, minimum, sum, Array, Device};
use weft_workloads::jacobi;

/// Groups to compare with one device: mixed backends, the same device twice, three parts.
fn groups() -> Vec<Device> {
    let mut g = vec![
        Device::group(&[Device::cpu_cranelift(), Device::interp()]).unwrap(),
        Device::group(&[Device::cpu_llvm(), Device::cpu_llvm()]).unwrap(),
        Device::group(&[
            Device::cpu_cranelift(),
            Device::cpu_llvm(),
            Device::cpu_cranelift(),
        ])
        .unwrap(),
    ];
    match Device::cuda(0) {
        // Two devices of one GPU: two streams, one context (every split path, one GPU).
        Ok(a) => {
            let b = Device::cuda(0).unwrap();
            g.push(Device::group(&[a, b]).unwrap());
            // Every GPU of the host, when it has several.
            match Device::cuda_all() {
                Ok(all) if all.members().len() > 1 => g.push(all),
                Ok(_) => eprintln!("groups: one GPU, no several-GPU group"),
                Err(e) => panic!("cuda_all failed where cuda(0) opened: {e}"),
            }
        }
        Err(e) => eprintln!("groups: SKIPPED the GPU group ({e})"),
    }
    g
}

/// `y = x·i + (n − i)` with `i` the element's index and `n` the launch length, plus a read of
/// `t` at a coordinate far from `i` (a replicated input).
fn affine() -> Program {
    Program::record_named("affine", || {
        let x = In::<Value1f>::named("x");
        let t = InArray::<1, Value1f>::named("t", Boundary::Repeat);
        let i = index::<1>();
        let n = shape::<1>();
        let far = t.read(&(&n - &i + 7i32));
        let y = &x * i.cast::<f32>() + (&n - &i).cast::<f32>() + far;
        Out::named("y", y);
    })
    .unwrap()
}

#[test]
fn one_dimensional_maps_equal_one_device() {
    let p = affine();
    let t = Array::from_fn([37], |i| i as f32 * 0.25 - 3.0).unwrap();
    for n in [0usize, 1, 2, 1023, 1024, 1025, 5000, 65536, 65537, 200_000] {
        let x = Array::from_fn([n], |i| ((i * 29) % 113) as f32 * 0.37 - 11.0).unwrap();
        let want: Array<1, f32> = p.apply_on(&Device::interp(), (&x, &t)).unwrap();
        let want = want.to_vec().unwrap();
        for g in groups() {
            let got: Array<1, f32> = p.apply_on(&g, (&x, &t)).unwrap();
            let got = got.to_vec().unwrap();
            let same = got.iter().zip(&want).all(|(&a, &b)| canon(a) == canon(b));
            assert!(same && got.len() == n, "{} at n = {n}", g.name());
        }
    }
}

#[test]
fn two_and_three_dimensional_maps_equal_one_device() {
    // A 2-D stencil on clamped reads, with the edge test on `shape`.
    let sweep = jacobi::sweep().unwrap();
    // A 3-D map of the coordinates alone (no varying input: the shape is given).
    let coords = Program::record_named("coords", || {
        let ijk = index::<3>();
        let s = shape::<3>();
        let lin = (ijk.x() * s.y() + ijk.y()) * s.z() + ijk.z();
        Out::named("lin", lin);
    })
    .unwrap();
    for n in [1usize, 3, 17, 64] {
        let u = Array::from_fn([n, n + 2], |k| ((k * 7919) % 1000) as f32 * 0.001).unwrap();
        let s2 = [n, n + 2];
        let want: (Array<2, f32>, Array<2, f32>) =
            sweep.apply_shape_on(&Device::interp(), &s2, &u).unwrap();
        for g in groups() {
            let got: (Array<2, f32>, Array<2, f32>) = sweep.apply_shape_on(&g, &s2, &u).unwrap();
            assert_eq!(bits(&got.0), bits(&want.0), "{} u_next at {n}", g.name());
            assert_eq!(bits(&got.1), bits(&want.1), "{} delta at {n}", g.name());
        }
        let shape3 = [n, 3, n + 1];
        let want: Array<3, i32> = coords
            .apply_shape_on(&Device::interp(), &shape3, ())
            .unwrap();
        for g in groups() {
            let got: Array<3, i32> = coords.apply_shape_on(&g, &shape3, ()).unwrap();
            assert_eq!(
                got.to_vec().unwrap(),
                want.to_vec().unwrap(),
                "{}",
                g.name()
            );
        }
    }
}

/// The elements' bits, every NaN as one (NaN payloads are unspecified: docs/semantics.md).
fn bits<const D: usize>(a: &Array<D, f32>) -> Vec<u32> {
    a.to_vec().unwrap().iter().map(|&x| canon(x)).collect()
}

fn canon(x: f32) -> u32 {
    if x.is_nan() {
        f32::NAN.to_bits()
    } else {
        x.to_bits()
    }
}

/// The first element where `a` and `b` differ: (position, a's bits, b's bits).
fn first_difference(a: &[u32], b: &[u32]) -> Option<(usize, u32, u32)> {
    if a.len() != b.len() {
        return Some((a.len().min(b.len()), 0, 0));
    }
    let k = a.iter().zip(b).position(|(x, y)| x != y)?;
    Some((k, a[k], b[k]))
}

#[test]
fn chained_results_stay_split_and_reductions_keep_their_bits() {
    let p = affine();
    let t = Array::from_fn([5], |i| i as f32).unwrap();
    // Two parts or more (whole blocks of 65,536 elements but the last), each reduced by two
    // levels where it is.
    let n = 200_003;
    let clean = Array::from_fn([n], |i| ((i * 31) % 97) as f32 * 0.013).unwrap();
    let mut x = clean.clone();
    x.set(123, f32::NAN).unwrap();
    let clean_sum = {
        let y: Array<1, f32> = p.apply_on(&Device::interp(), (&clean, &t)).unwrap();
        Device::cpu_cranelift().scope(|| sum(&y)).unwrap()
    };
    let reference = {
        let y: Array<1, f32> = p.apply_on(&Device::interp(), (&x, &t)).unwrap();
        let z: Array<1, f32> = p.apply_on(&Device::interp(), (&y, &t)).unwrap();
        z
    };
    // `w[i] = v[i] - u[n - 1 - i]`, with `u` read whole.
    let rev = Program::record_named("rev", || {
        let v = In::<Value1f>::named("v");
        let u = InArray::<1, Value1f>::named("u", Boundary::Clamp);
        let i = index::<1>();
        let j = shape::<1>() - 1i32 - &i;
        Out::named("w", &v - u.read(&j));
    })
    .unwrap();
    let want_rev = {
        let w: Array<1, f32> = rev
            .apply_on(&Device::interp(), (&reference, &reference))
            .unwrap();
        bits(&w)
    };
    let dev = Device::cpu_cranelift();
    let (want_sum, want_min, want_max) = dev.scope(|| {
        (
            sum(&reference).unwrap(),
            minimum(&reference).unwrap(),
            maximum(&reference).unwrap(),
        )
    });
    for g in groups() {
        let y: Array<1, f32> = p.apply_on(&g, (&x, &t)).unwrap();
        let parts = y.residency().unwrap().parts;
        assert!(parts >= 2, "{}: result in {parts} parts", g.name());
        // `y` feeds the next launch where each member holds its part.
        let z: Array<1, f32> = p.apply_on(&g, (&y, &t)).unwrap();
        let one: Array<1, f32> = p.apply_on(&g.members()[0], (&y, &t)).unwrap();
        assert_eq!(
            first_difference(&bits(&one), &bits(&reference)),
            None,
            "{} alone",
            g.name()
        );
        assert_eq!(
            first_difference(&bits(&z), &bits(&reference)),
            None,
            "{}",
            g.name()
        );
        g.scope(|| {
            assert_eq!(canon(sum(&z).unwrap()), canon(want_sum), "{}", g.name());
            assert!(minimum(&z).unwrap().is_nan() && want_min.is_nan());
            assert!(maximum(&z).unwrap().is_nan() && want_max.is_nan());
        });
        // A split result read whole at other coordinates by every member (on GPUs, gathered
        // onto each through NCCL).
        let back: Array<1, f32> = rev.apply_on(&g, (&z, &z)).unwrap();
        assert_eq!(
            first_difference(&bits(&back), &want_rev),
            None,
            "{}",
            g.name()
        );
        // A float sum without NaNs: the same bits as one device's.
        let y: Array<1, f32> = p.apply_on(&g, (&clean, &t)).unwrap();
        let s = g.scope(|| sum(&y)).unwrap();
        assert_eq!(s.to_bits(), clean_sum.to_bits(), "{}", g.name());
        // Elements read one at a time come from the part that holds them.
        assert_eq!(z.get(n - 1).unwrap(), reference.get(n - 1).unwrap());
    }
    let ints = Array::from_fn([3000], |i| (i as i32) * 7 - 9000).unwrap();
    let neg = Program::record_named("neg", || {
        let v = In::<Value1i>::named("v");
        Out::named("w", -v);
    })
    .unwrap();
    for g in groups() {
        let w: Array<1, i32> = neg.apply_on(&g, &ints).unwrap();
        let s = g.scope(|| sum(&w)).unwrap();
        assert_eq!(
            s,
            -(0..3000).map(|i| i * 7 - 9000).sum::<i32>(),
            "{}",
            g.name()
        );
    }
}

#[test]
fn groups_reject_nesting_and_emptiness() {
    let e = Device::group(&[]).unwrap_err().to_string();
    assert!(e.contains("at least one device"), "{e}");
    let g = Device::group(&[Device::cpu_cranelift()]).unwrap();
    let e = Device::group(&[g.clone(), Device::interp()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot hold another group"), "{e}");
    assert!(
        g.is_group() && g.name().starts_with("group [cpu"),
        "{}",
        g.name()
    );
}
