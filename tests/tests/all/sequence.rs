//! Recorded launch sequences (issue 23): a replay computes what the same applies compute one
//! by one, bit for bit, on every device; wrong inputs and host reads while recording are
//! clear errors; dropping sequences frees what they hold.

use weft::dsl::{In, InArray, Out, Program, Value1f};
use weft::ir::Boundary;
use weft::{sum, sum_array, Array, Device, Sequence};
use weft_workloads::{cg, jacobi};

/// The interpreter, both CPU backends, the tiered default, and CUDA GPU 0 when present.
fn devices() -> Vec<Device> {
    let mut d = vec![
        Device::interp(),
        Device::cpu_cranelift(),
        Device::cpu_llvm(),
        Device::cpu(),
    ];
    match Device::cuda(0) {
        Ok(g) => d.push(g),
        Err(e) => eprintln!("sequence: skipping CUDA ({e})"),
    }
    d
}

fn programs() -> (Program, Program) {
    // y = a·x + b, with a scale read from a one-element array (a device-side scalar).
    let axpb = Program::record_named("axpb", || {
        let x = In::<Value1f>::named("x");
        let b = In::<Value1f>::named("b");
        let s = InArray::<1, Value1f>::named("s", Boundary::Clamp);
        Out::named("y", s.read(0) * x + b);
    })
    .unwrap();
    // z = x − 0.001·s, with s a one-element array.
    let shift = Program::record_named("shift", || {
        let x = In::<Value1f>::named("x");
        let s = InArray::<1, Value1f>::named("s", Boundary::Clamp);
        Out::named("z", x - s.read(0) * 0.001f32);
    })
    .unwrap();
    (axpb, shift)
}

type State = (Array<1, f32>, Array<1, f32>);

/// One step: 2 applies and a reduction left on the device.
fn step(axpb: &Program, shift: &Program, b: &Array<1, f32>, (x, s): State) -> weft::Result<State> {
    let y: Array<1, f32> = axpb.apply((&x, b, &s))?;
    let t = sum_array(&y)?;
    let z: Array<1, f32> = shift.apply((&y, &t))?;
    Ok((z, t))
}

#[test]
fn replays_equal_the_same_applies_one_by_one() {
    let (axpb, shift) = programs();
    for n in [1usize, 17, 1000, 4099] {
        let x0 = Array::from_fn([n], |i| ((i * 37) % 101) as f32 * 0.01 - 0.5).unwrap();
        let b = Array::from_fn([n], |i| ((i * 11) % 7) as f32 * 0.125).unwrap();
        let s0 = Array::from_vec([1], vec![0.5f32]).unwrap();
        for d in devices() {
            d.scope(|| {
                // One by one: 5 steps.
                let mut want = (x0.clone(), s0.clone());
                let mut steps = Vec::new();
                for _ in 0..5 {
                    want = step(&axpb, &shift, &b, want).unwrap();
                    steps.push(want.0.to_vec().unwrap());
                }
                let (seq, first) =
                    Sequence::record(&(x0.clone(), s0.clone()), |st| step(&axpb, &shift, &b, st))
                        .unwrap();
                assert!(seq.launches() >= 3, "{d}: {} launches", seq.launches());
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&first.0.to_vec().unwrap()),
                    bits(&steps[0]),
                    "{d} n={n}"
                );
                // Replayed on the recorded output, step by step and with repeat/until.
                let mut cur = first.clone();
                for (k, w) in steps.iter().enumerate().skip(1) {
                    cur = seq.replay(&cur).unwrap();
                    assert_eq!(
                        bits(&cur.0.to_vec().unwrap()),
                        bits(w),
                        "{d} n={n} step {k}"
                    );
                }
                let r = seq.repeat(4, &first).unwrap();
                assert_eq!(bits(&r.0.to_vec().unwrap()), bits(&steps[4]), "{d} repeat");
                let mut asked = 0;
                let (u, k) = seq
                    .until(&first, 2, 10, |_| {
                        asked += 1;
                        Ok(asked == 2)
                    })
                    .unwrap();
                assert_eq!((k, asked), (4, 2), "{d}: until asks every 2 replays");
                assert_eq!(bits(&u.0.to_vec().unwrap()), bits(&steps[4]), "{d} until");
                // A replay on the original inputs gives the first step again, and leaves
                // the inputs as they were.
                let again = seq.replay(&(x0.clone(), s0.clone())).unwrap();
                assert_eq!(bits(&again.0.to_vec().unwrap()), bits(&steps[0]), "{d}");
                assert_eq!(s0.to_vec().unwrap(), vec![0.5]);
            });
        }
    }
}

#[test]
fn until_program_equals_until_with_the_same_test_on_the_host() {
    let (axpb, shift) = programs();
    // Stop when the step's sum `t` (output 1, one element) drops below a host uniform.
    let limit = weft::dsl::Uniform::<f32>::new(0.0);
    let stop = {
        let limit = limit.clone();
        Program::record_named("stop", move || {
            let t = In::<Value1f>::named("t");
            Out::named("stop", t.lt(limit.value()));
        })
        .unwrap()
    };
    let n = 1000;
    let x0 = Array::from_fn([n], |i| ((i * 37) % 101) as f32 * 0.01 - 0.5).unwrap();
    let b = Array::from_fn([n], |i| ((i * 11) % 7) as f32 * 0.125 - 0.3).unwrap();
    let s0 = Array::from_vec([1], vec![0.5f32]).unwrap();
    for d in devices() {
        if d.is_cuda() {
            eprintln!(
                "until_program on {d}: device loops {}",
                d.runs_device_loops()
            );
        }
        d.scope(|| {
            let (seq, first) =
                Sequence::record(&(x0.clone(), s0.clone()), |st| step(&axpb, &shift, &b, st))
                    .unwrap();
            let bits = |v: &Array<1, f32>| {
                v.to_vec()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>()
            };
            let t1 = first.1.to_vec().unwrap()[0];
            // A limit reached after some replays, one never reached (max ends the loop), one
            // reached at once, and max of 0, 1 and 2 (odd and even counts of replays).
            for (lim, max) in [
                (t1 - 40.0, 50),
                (t1 - 1e9, 7),
                (t1 + 1.0, 9),
                (t1 - 1e9, 0),
                (t1 - 1e9, 1),
                (t1 - 1e9, 2),
            ] {
                limit.set(lim);
                let (want, k) = seq
                    .until(&first, 1, max, |s| Ok(s.1.to_vec()?[0] < lim))
                    .unwrap();
                let (got, j) = seq.until_program(&first, &stop, 1, max).unwrap();
                assert_eq!(j, k, "{d}: limit {lim}, max {max}: replays");
                assert_eq!(bits(&got.0), bits(&want.0), "{d}: limit {lim}, max {max}");
                assert_eq!(bits(&got.1), bits(&want.1), "{d}: limit {lim}, max {max}");
            }
            // The first case stops before max (the test ran on the device).
            limit.set(t1 - 40.0);
            let (_, j) = seq.until_program(&first, &stop, 1, 50).unwrap();
            assert!(j < 50 && j > 1, "{d}: {j} replays");
            // The inputs are left as they were.
            assert_eq!(bits(&first.1), vec![t1.to_bits()]);
            // Errors: no output 2; output 0 is not one element; a test giving no bool.
            let e = seq.until_program(&first, &stop, 2, 5).unwrap_err();
            assert!(e.to_string().contains("not an output 2"), "{e}");
            let e = seq.until_program(&first, &stop, 0, 5).unwrap_err();
            assert!(e.to_string().contains("one-element"), "{e}");
            let not_bool = Program::record_named("half", || {
                let t = In::<Value1f>::named("t");
                Out::named("h", t * 0.5f32);
            })
            .unwrap();
            let e = seq.until_program(&first, &not_bool, 1, 5).unwrap_err();
            assert!(e.to_string().contains("one bool output"), "{e}");
        });
    }
}

#[test]
fn inputs_sharing_storage_are_told_apart() {
    let add = Program::record_named("add2", || {
        let a = In::<Value1f>::named("a");
        let b = In::<Value1f>::named("b");
        Out::named("c", a + b * 2.0f32);
    })
    .unwrap();
    for d in devices() {
        d.scope(|| {
            let x = Array::from_fn([33], |i| i as f32).unwrap();
            // Both inputs are the same storage when recorded; a replay gives them apart.
            let (seq, first) = Sequence::record(&(x.clone(), x.clone()), |(a, b)| {
                let c: Array<1, f32> = add.apply((&a, &b))?;
                Ok((c, b))
            })
            .unwrap();
            assert_eq!(first.0.get(3).unwrap(), Some(9.0), "{d}");
            let y = Array::from_fn([33], |i| -(i as f32)).unwrap();
            let (c, b) = seq.replay(&(x.clone(), y.clone())).unwrap();
            assert_eq!(c.get(3).unwrap(), Some(3.0 - 6.0), "{d}");
            assert!(
                b.shares_storage(&y),
                "{d}: an input given back is the input"
            );
        });
    }
}

#[test]
fn recorded_cg_equals_the_one_by_one_solve() {
    let a = cg::matrix("poisson:12").unwrap();
    let b = a.mul(&vec![1.0; a.cols]);
    for d in devices() {
        let da = cg::DeviceCsr::new(&a).unwrap();
        let bb = Array::from_slice([b.len()], &b).unwrap();
        let want = cg::cg_arrays(&d, &da, &bb, 1e-10, 10_000).unwrap();
        let got = cg::cg_recorded(&d, &da, &bb, 1e-10, 10_000, 1).unwrap();
        assert_eq!(got.iterations, want.iterations, "{d}");
        assert_eq!(got.residual.to_bits(), want.residual.to_bits(), "{d}");
        let bits = |x: &Array<1, f64>| {
            x.to_vec()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&got.x), bits(&want.x), "{d}: the same bits");
        // Checked every 8 iterations: at most 7 more, and converged.
        let late = cg::cg_recorded(&d, &da, &bb, 1e-10, 10_000, 8).unwrap();
        assert!(late.iterations >= want.iterations && late.iterations < want.iterations + 8);
        assert!(late.residual < 1e-10, "{d}: {}", late.residual);
    }
}

#[test]
fn recorded_jacobi_equals_the_one_by_one_sweeps() {
    for d in devices() {
        let u0: Array<2, f32> = Array::from_vec([40, 40], jacobi::initial(40)).unwrap();
        // 35 sweeps: three recorded periods and 5 sweeps one by one; then to a tolerance.
        for (tol, max) in [(0.0f32, 35usize), (1e-3, 10_000)] {
            let (want, ws, wd) = jacobi::jacobi_arrays(&d, &u0, tol, max).unwrap();
            let (got, gs, gd) = jacobi::jacobi_recorded(&d, &u0, tol, max).unwrap();
            assert_eq!((gs, gd.to_bits()), (ws, wd.to_bits()), "{d} tol {tol}");
            let bits = |u: &Array<2, f32>| {
                u.to_vec()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&got), bits(&want), "{d} tol {tol}");
        }
    }
}

#[test]
fn wrong_inputs_and_host_reads_are_errors() {
    let (axpb, shift) = programs();
    let b = Array::from_fn([64], |i| i as f32).unwrap();
    let x = Array::from_fn([64], |i| i as f32 * 0.5).unwrap();
    let s = Array::from_vec([1], vec![1.0f32]).unwrap();
    let (seq, _) =
        Sequence::record(&(x.clone(), s.clone()), |st| step(&axpb, &shift, &b, st)).unwrap();
    let short = Array::from_fn([63], |i| i as f32).unwrap();
    let Err(e) = seq.replay(&(short, s.clone())) else {
        panic!("a shorter input replayed")
    };
    let msg = e.to_string();
    assert!(
        msg.contains("input 0") && msg.contains("[64]") && msg.contains("[63]"),
        "{msg}"
    );
    // Another element type: the typed API rules it out at compile time for tuples of
    // arrays; a Bundle-shaped mismatch is the shape case above.

    // A host read of a recorded result while recording.
    let e = Sequence::record(&(x.clone(), s.clone()), |(x, s)| {
        let y: Array<1, f32> = axpb.apply((&x, &b, &s))?;
        let total = sum(&y)?;
        let z: Array<1, f32> = shift.apply((&y, &Array::from_vec([1], vec![total])?))?;
        Ok((z, s))
    })
    .err()
    .expect("sum returns to the host");
    assert!(e.to_string().contains("sum_array"), "{e}");
    let e = Sequence::record(&(x.clone(), s.clone()), |(x, s)| {
        let _ = x.to_vec()?;
        Ok((x, s))
    })
    .err()
    .expect("an input read on the host");
    assert!(e.to_string().contains("Array::to_vec"), "{e}");
    // Recordings do not nest; the thread records again after an error.
    let e = Sequence::record(&(x.clone(), s.clone()), |st| {
        Sequence::record(&st, Ok).map(|(_, o)| o)
    })
    .err()
    .expect("nested");
    assert!(e.to_string().contains("do not nest"), "{e}");
    assert!(Sequence::record(&(x.clone(), s.clone()), |st| step(&axpb, &shift, &b, st)).is_ok());
    // A program reading a host Uniform (loose binding) is not recorded.
    let gain = weft::dsl::Uniform::new(2.0f32);
    let scaled = Program::record_named("scaled", || {
        let x = In::<Value1f>::named("x");
        Out::named("y", x * gain.value());
    })
    .unwrap();
    let e = Sequence::record(&x, |x| scaled.apply::<Array<1, f32>>(&x))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("loose binding") && e.contains("@scaled"), "{e}");
    // Reading inputs outside a recording is fine.
    assert_eq!(x.get(2).unwrap(), Some(1.0));
}

/// Resident set size in KiB (Linux), if known.
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

#[test]
fn dropping_sequences_frees_what_they_hold() {
    let (axpb, shift) = programs();
    // The CPU (bound launches) and, on a GPU machine, CUDA (a graph per sequence: its
    // executables are host memory of the driver, freed with the sequence).
    let mut devs = vec![Device::cpu_cranelift()];
    devs.extend(Device::cuda(0).ok());
    for d in devs {
        d.scope(|| {
            let b = Array::from_fn([4096], |i| i as f32).unwrap();
            let x = Array::from_fn([4096], |i| i as f32 * 0.5).unwrap();
            let s = Array::from_vec([1], vec![1.0f32]).unwrap();
            let cycle = || {
                let (seq, first) =
                    Sequence::record(&(x.clone(), s.clone()), |st| step(&axpb, &shift, &b, st))
                        .unwrap();
                let out = seq.replay(&first).unwrap();
                let out = seq.replay(&out).unwrap();
                assert_eq!(out.0.len(), 4096);
            };
            for _ in 0..500 {
                cycle();
            }
            let before = rss_kib();
            for _ in 0..10_000 {
                cycle();
            }
            if let (Some(a), Some(b)) = (before, rss_kib()) {
                // Each cycle makes 6 arrays of 16 KiB (and on a GPU a graph): 10⁴ cycles
                // kept would be about 1 GiB.
                assert!(b < a + 32 * 1024, "{d}: RSS grew from {a} KiB to {b} KiB");
            }
        });
    }
}
