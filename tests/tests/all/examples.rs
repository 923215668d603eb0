//! The `weft` library's examples (`weft_workloads`, `workloads/src/*.rs`), each run on the interpreter,
//! the CPU with Cranelift and with LLVM, and a CUDA GPU when one is present: every device
//! must give the interpreter's results bit for bit.

use weft::Device;
use weft_workloads::{
    arg_max, compaction, func_arrays, heat_sequence, histogram, mdh, montecarlo, particles,
    reduce_combiner, reflect, vecadd,
};

/// The compiled devices to compare with the interpreter: both CPU backends, and CUDA GPU 0
/// when a driver and GPU are present (else a message says it was skipped).
fn compiled() -> Vec<Device> {
    let mut d = vec![Device::cpu_cranelift(), Device::cpu_llvm()];
    match Device::cuda(0) {
        Ok(g) => d.push(g),
        Err(e) => eprintln!("examples: skipping CUDA ({e})"),
    }
    d
}

/// Bits of f32s, so NaNs and signed zeros compare exactly.
/// Reports on stderr (shown with `--nocapture`, e.g. on the GPU machine) that `what` on `dev`
/// equalled the interpreter.
fn report(what: &str, dev: &Device, detail: impl std::fmt::Debug) {
    eprintln!("example {what} on {dev}: equal to the interpreter; {detail:?}");
}

fn bits(xs: &[f32]) -> Vec<u32> {
    xs.iter().map(|x| x.to_bits()).collect()
}

fn bits3(xs: &[[f32; 3]]) -> Vec<u32> {
    xs.iter().flatten().map(|x| x.to_bits()).collect()
}

#[test]
fn vecadd_matches_the_interpreter() {
    let want = vecadd::vecadd(&Device::interp(), 10_000).unwrap();
    assert_eq!(want[9_999], 9_999.0 + (2 * 9_999 % 7) as f32);
    for d in compiled() {
        let got = vecadd::vecadd(&d, 10_000).unwrap();
        assert_eq!(bits(&got), bits(&want), "on {d}");
        report("vecadd (10,000)", &d, &got[9_998..]);
    }
}

#[test]
fn heat_sequence_matches_the_interpreter() {
    // A recorded sequence replayed until the change is small: same steps and bits.
    let want = heat_sequence::heat(&Device::interp(), 24, 1e-3, 1000).unwrap();
    assert!(
        want.1 > heat_sequence::STEPS && want.2 < 1e-3,
        "{:?}",
        (want.1, want.2)
    );
    for d in compiled() {
        let got = heat_sequence::heat(&d, 24, 1e-3, 1000).unwrap();
        assert_eq!(
            (got.1, got.2.to_bits()),
            (want.1, want.2.to_bits()),
            "on {d}"
        );
        assert_eq!(bits(&got.0), bits(&want.0), "on {d}");
        report("heat_sequence (24², 1e-3)", &d, (got.1, got.2));
    }
}

#[test]
fn func_arrays_matches_the_interpreter() {
    let want = func_arrays::func_arrays(&Device::interp(), 64).unwrap();
    for d in compiled() {
        let got = func_arrays::func_arrays(&d, 64).unwrap();
        assert_eq!(bits3(&got), bits3(&want), "on {d}");
        report("func_arrays (64×64)", &d, got[4095]);
    }
}

#[test]
fn reflect_matches_the_interpreter() {
    let want = reflect::reflect(&Device::interp(), 5_000).unwrap();
    for d in compiled() {
        let got = reflect::reflect(&d, 5_000).unwrap();
        assert_eq!(bits3(&got), bits3(&want), "on {d}");
        report("reflect (5,000)", &d, got[4999]);
    }
}

#[test]
fn particles_match_the_interpreter() {
    let (wp, wv) = particles::particles(&Device::interp(), 100_000, 3).unwrap();
    assert!(
        wp.iter().all(|p| p[1] >= 0.0),
        "every particle bounced back above the floor"
    );
    for d in compiled() {
        let (p, v) = particles::particles(&d, 100_000, 3).unwrap();
        assert_eq!(bits3(&p), bits3(&wp), "positions on {d}");
        assert_eq!(bits3(&v), bits3(&wv), "velocities on {d}");
        report("particles (100,000)", &d, (p[99_999], v[99_999]));
    }
}

#[test]
fn reduce_with_a_user_combiner_matches_the_interpreter() {
    let want = reduce_combiner::reduce_combiner(&Device::interp(), 100_000).unwrap();
    assert_eq!(want.0, [-5000.0, 5006.0]);
    for d in compiled() {
        let got = reduce_combiner::reduce_combiner(&d, 100_000).unwrap();
        assert_eq!(got, want, "on {d}");
        report("reduce_combiner (100,000)", &d, got);
    }
}

#[test]
fn arg_max_matches_the_interpreter() {
    let want = arg_max::arg_max_field(&Device::interp(), 128).unwrap();
    assert_eq!(want.1 / 128, 96, "the peak's row");
    for d in compiled() {
        let got = arg_max::arg_max_field(&d, 128).unwrap();
        assert_eq!(
            (got.0.to_bits(), got.1),
            (want.0.to_bits(), want.1),
            "on {d}"
        );
        report("arg_max (128×128)", &d, got);
    }
}

#[test]
fn mdh_matches_the_interpreter() {
    let atoms = mdh::atoms(64);
    let want = mdh::mdh(&Device::interp(), &atoms, 8).unwrap();
    assert!(want.iter().all(|x| x.is_finite()));
    for d in compiled() {
        let got = mdh::mdh(&d, &atoms, 8).unwrap();
        assert_eq!(bits(&got), bits(&want), "on {d}");
        report("mdh (64 atoms × 8³ points)", &d, &got[..2]);
    }
}

#[test]
fn collective_examples_match_the_interpreter() {
    // Monte-Carlo pricing: the same paths everywhere, close to the closed form.
    let want = montecarlo::price(&Device::interp(), 20_000, 2026).unwrap();
    assert!((want.0 - want.2).abs() < 4.0 * want.1, "{want:?}");
    // Compaction: the values above the threshold, in order.
    let x = weft::Array::from_fn([5000], |i| ((i * 7919) % 1000) as f32 * 0.001).unwrap();
    let host: Vec<f32> = x
        .to_vec()
        .unwrap()
        .into_iter()
        .filter(|&v| v > 0.9)
        .collect();
    let kept = compaction::compact(&Device::interp(), &x, 0.9).unwrap();
    assert_eq!(bits(&kept), bits(&host));
    // The histogram of normals: every draw inside ±4 counted, a bell shape.
    let hist = histogram::normal_histogram(&Device::interp(), 20_000, 7).unwrap();
    assert!(hist.iter().sum::<u32>() > 19_990, "{hist:?}");
    assert!(hist[11] > hist[3] && hist[12] > hist[20], "{hist:?}");
    for d in compiled() {
        let got = montecarlo::price(&d, 20_000, 2026).unwrap();
        assert_eq!(
            (got.0.to_bits(), got.1.to_bits()),
            (want.0.to_bits(), want.1.to_bits()),
            "montecarlo on {d}"
        );
        assert_eq!(
            bits(&compaction::compact(&d, &x, 0.9).unwrap()),
            bits(&host),
            "{d}"
        );
        assert_eq!(
            histogram::normal_histogram(&d, 20_000, 7).unwrap(),
            hist,
            "{d}"
        );
        report("montecarlo, compaction, histogram", &d, got);
    }
}
