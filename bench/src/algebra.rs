//! The program algebra's benchmark rows (issue 5, DESIGN §4): fusion by composition,
//! partial evaluation of a sparse mask on coins.png, specialization and free adaptation —
//! each variant timed side by side in one run on the Cranelift and LLVM CPU devices.

use crate::{fail, load, median, root, Row};
use std::sync::Arc;
use weft_ir::algebra::{bind_array, compose, keep, swizzle_inputs};
use weft_ir::interp::{HostArray, Input};
use weft_ir::passes::run_pipeline;
use weft_ir::{Module, Program, ScalarType, Type};
use weft_runtime::{CpuDevice, HostCompiler};

const PIPELINE: &str = "inline,fold,cse,licm,dce";

fn alone(p: Program, name: &str) -> Module {
    let mut p = p;
    p.name = name.into();
    let mut m = Module { programs: vec![p] };
    run_pipeline(&mut m, PIPELINE).unwrap_or_else(|e| fail(e.to_string()));
    m
}

fn program(m: &Module, name: &str) -> Program {
    m.get(name)
        .unwrap_or_else(|| fail(format!("no @{name}")))
        .clone()
}

use crate::time_median as time;

/// Seconds of the prepared launch's kernel (inputs already marshalled), median of `reps`.
fn kernel_time(
    dev: &CpuDevice,
    m: &Module,
    name: &str,
    ins: &[Input],
    shape: Option<&[usize]>,
    reps: usize,
) -> f64 {
    let mut l = dev
        .launch(m, name, ins, shape)
        .unwrap_or_else(|e| fail(e.to_string()));
    time(reps, || l.run().unwrap_or_else(|e| fail(e.to_string())))
}

fn particles(n: usize) -> Vec<Input> {
    let t3 = Type::tuple(ScalarType::F32, 3).expect("3 lanes");
    let mut p = HostArray::zeros(t3, &[n]);
    let mut v = HostArray::zeros(t3, &[n]);
    for i in 0..n {
        for l in 0..3 {
            p.data[i * 3 + l] = ((((i * 7 + l * 3) % 11) as f32) * 0.1).to_bits() as u64;
            v.data[i * 3 + l] = ((((i * 5 + l) % 13) as f32) - 6.0).to_bits() as u64;
        }
    }
    let age: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.05).collect();
    vec![
        Input::Array(Arc::new(p)),
        Input::Array(Arc::new(v)),
        Input::Array(Arc::new(HostArray::from_f32(&age))),
        Input::Uniform(weft_ir::Const::f32(0.01)),
    ]
}

/// A ring of radius `r` in a `(2r+1)²` mask (the bead-tracking mask), weights 1/taps.
fn ring_mask(r: usize) -> HostArray {
    let k = 2 * r + 1;
    let on = |i: usize| {
        let (y, x) = ((i / k) as f64 - r as f64, (i % k) as f64 - r as f64);
        ((y * y + x * x).sqrt() - r as f64).abs() < 0.5
    };
    let n = (0..k * k).filter(|&i| on(i)).count();
    let mut m = HostArray::zeros(Type::scalar(ScalarType::F32), &[k, k]);
    for i in (0..k * k).filter(|&i| on(i)) {
        m.data[i] = (1.0f32 / n as f32).to_bits() as u64;
    }
    m
}

/// scikit-image's coins.png (8-bit grey) as a u8 array of shape [rows, cols].
fn coins() -> Option<HostArray> {
    let path = root().join("data/cache/coins.png");
    let file = std::fs::File::open(&path).ok()?;
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::STRIP_16 | png::Transformations::EXPAND);
    let mut reader = dec.read_info().ok()?;
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).ok()?;
    let (w, h) = (info.width as usize, info.height as usize);
    let channels = info.line_size / w;
    let mut a = HostArray::zeros(Type::scalar(ScalarType::U8), &[h, w]);
    for y in 0..h {
        for x in 0..w {
            a.data[y * w + x] = buf[y * info.line_size + x * channels] as u64;
        }
    }
    Some(a)
}

/// The algebra rows on the Cranelift and LLVM CPU devices.
pub fn rows(rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    let devices = [
        CpuDevice::new(),
        CpuDevice::with_compiler(HostCompiler::Llvm(Default::default())),
    ]
    .map(|d| (d.compiler().backend().name(), d));

    // ---- a. Fusion by composition: the particle system, 4 Mi particles.
    let pm = load("examples/ir/algebra/particles.weft");
    let stages = compose(&program(&pm, "position"), &program(&pm, "velocity"))
        .unwrap_or_else(|e| fail(e.to_string()));
    let fused = compose(&program(&pm, "reset"), &stages).unwrap_or_else(|e| fail(e.to_string()));
    let fused = alone(fused, "fused");
    let hand = alone(program(&pm, "evolve"), "evolve");
    let n = 4 << 20;
    let ins = particles(n);
    for (dname, dev) in &devices {
        eprintln!("algebra a ({dname}): particles, {n} ...");
        let apply = |m: &Module, name: &str, ins: &[Input]| {
            dev.apply(m, name, ins, None)
                .unwrap_or_else(|e| fail(e.to_string()))
        };
        let (mut tf, mut th, mut ts) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..5 {
            tf.push(time(1, || drop(apply(&fused, "fused", &ins))));
            th.push(time(1, || drop(apply(&hand, "evolve", &ins))));
            ts.push(time(1, || {
                let mut cur = ins.clone();
                for stage in ["velocity", "position", "reset"] {
                    let outs = apply(&pm, stage, &cur);
                    let dt = cur[3].clone();
                    cur = outs
                        .into_iter()
                        .map(|o| Input::Array(Arc::new(o)))
                        .collect();
                    cur.push(dt);
                }
            }));
        }
        let (tf, th, ts) = (median(tf), median(th), median(ts));
        rows.push(Row {
            workload: format!(
                "a. particles composed (reset << position << velocity), 4 Mi, {dname}"
            ),
            weft: format!("{:.1} ms", tf * 1e3),
            baseline: format!(
                "hand-written one program {:.1} ms; three stages through memory {:.1} ms",
                th * 1e3,
                ts * 1e3
            ),
            ratio: format!(
                "{:.2}× of hand's speed; {:.2}× faster than staged",
                th / tf,
                ts / tf
            ),
            target: "≥ 0.98×; ≥ 1.8×".into(),
        });
    }

    // ---- b. Partial evaluation of a sparse mask on coins.png.
    match coins() {
        None => notes.push(
            "algebra b skipped: run scripts/fetch_data.sh for data/cache/coins.png".to_string(),
        ),
        Some(img) => {
            let cm = load("examples/ir/algebra/conv.weft");
            let mask = ring_mask(7);
            let taps = mask.shape.iter().product::<usize>();
            let nonzero = mask.data.iter().filter(|&&b| b != 0).count();
            let bound = bind_array(&program(&cm, "conv"), "mask", &mask)
                .unwrap_or_else(|e| fail(e.to_string()));
            let bound = alone(bound, "conv");
            let shape = img.shape.clone();
            let img = Arc::new(img);
            for (dname, dev) in &devices {
                eprintln!("algebra b ({dname}): coins.png ...");
                let loose = [
                    Input::Array(img.clone()),
                    Input::Array(Arc::new(mask.clone())),
                ];
                let tight = [Input::Array(img.clone())];
                let (mut tl, mut tt) = (Vec::new(), Vec::new());
                for _ in 0..5 {
                    tl.push(kernel_time(dev, &cm, "conv", &loose, Some(&shape), 5));
                    tt.push(kernel_time(dev, &bound, "conv", &tight, Some(&shape), 5));
                }
                let (tl, tt) = (median(tl), median(tt));
                let want = 0.7 * taps as f64 / nonzero as f64;
                rows.push(Row {
                    workload: format!(
                        "b. ring-mask convolution of coins.png {}×{}, {nonzero} of {taps} taps, bound tightly, {dname}",
                        shape[0], shape[1]
                    ),
                    weft: format!("{:.2} ms", tt * 1e3),
                    baseline: format!("mask bound loosely (array input) {:.2} ms", tl * 1e3),
                    ratio: format!("{:.2}× faster", tl / tt),
                    target: format!("≥ 0.7 × {taps}/{nonzero} = {want:.2}×"),
                });
            }
        }
    }

    // ---- c. Specialization: 3 outputs -> 1.
    let sm = load("examples/ir/algebra/stats.weft");
    let full = alone(program(&sm, "stats"), "stats");
    let one = keep(&program(&sm, "stats"), &["poly"]).unwrap_or_else(|e| fail(e.to_string()));
    let one = alone(one, "stats");
    let n = 1 << 20;
    let t4 = Type::tuple(ScalarType::F32, 4).expect("4 lanes");
    let mut x = HostArray::zeros(t4, &[n]);
    for (i, d) in x.data.iter_mut().enumerate() {
        *d = ((i % 1000) as f32 * 0.001 - 0.5).to_bits() as u64;
    }
    let x = Input::Array(Arc::new(x));
    for (dname, dev) in &devices {
        eprintln!("algebra c ({dname}): specialization ...");
        let (mut tf, mut to) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            tf.push(kernel_time(
                dev,
                &full,
                "stats",
                &[x.clone(), x.clone()],
                None,
                5,
            ));
            to.push(kernel_time(
                dev,
                &one,
                "stats",
                std::slice::from_ref(&x),
                None,
                5,
            ));
        }
        let (tf, to) = (median(tf), median(to));
        rows.push(Row {
            workload: format!(
                "c. 3-output program specialized to 1 output (keep poly), 1 Mi, {dname}"
            ),
            weft: format!("{:.2} ms", to * 1e3),
            baseline: format!("all 3 outputs {:.2} ms", tf * 1e3),
            ratio: format!("{:.2}× faster", tf / to),
            target: "time drops with the cone".into(),
        });
    }

    // ---- d. Interface adaptation: swizzle_inputs vs the hand-reordered program.
    let am = load("examples/ir/algebra/adapt.weft");
    let adapted =
        swizzle_inputs(&program(&am, "lerp"), &[2, 0, 1]).unwrap_or_else(|e| fail(e.to_string()));
    let adapted = alone(adapted, "lerp_tab");
    let hand = alone(program(&am, "lerp_tab"), "lerp_tab");
    let same_clif = weft_backend_cranelift::compile_with_clif(&adapted, "lerp_tab")
        .map(|k| k.clif.clone())
        .ok()
        == weft_backend_cranelift::compile_with_clif(&hand, "lerp_tab")
            .map(|k| k.clif.clone())
            .ok();
    let n = 16 << 20;
    let col = |k: usize| {
        Input::Array(Arc::new(HostArray::from_f32(
            &(0..n)
                .map(|i| ((i * k) % 1000) as f32 * 0.001)
                .collect::<Vec<_>>(),
        )))
    };
    let (t, a, b) = (col(3), col(5), col(7));
    for (dname, dev) in &devices {
        eprintln!("algebra d ({dname}): adaptation ...");
        let ins = [t.clone(), a.clone(), b.clone()];
        let (mut ta, mut th) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            ta.push(kernel_time(dev, &adapted, "lerp_tab", &ins, None, 5));
            th.push(kernel_time(dev, &hand, "lerp_tab", &ins, None, 5));
        }
        let (ta, th) = (median(ta), median(th));
        rows.push(Row {
            workload: format!("d. lerp with inputs reordered by an adapter, 16 Mi, {dname}"),
            weft: format!("{:.2} ms", ta * 1e3),
            baseline: format!("hand-reordered program {:.2} ms", th * 1e3),
            ratio: format!("{:.2}× of hand's speed", th / ta),
            target: if same_clif {
                "identical CLIF: free".into()
            } else {
                "CLIF DIFFERS".into()
            },
        });
    }
}
