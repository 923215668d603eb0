//! The CUDA device. Without a driver: errors and empty device lists, never a panic. With one
//! (detected at run time): the devices are listed, results equal the interpreter's bit for
//! bit (any NaN = any NaN) for any launch geometry, inputs stay resident across launches and
//! outputs are downloaded once. Tests that need a GPU print `SKIPPED (…): reason` to stderr
//! and pass on machines without one.

use std::sync::Arc;
use weft_ir::interp::{HostArray, Input, Interpreter};
use weft_ir::konst::canon;
use weft_ir::{Const, Module, Type};
use weft_runtime::{
    cuda_devices, cuda_driver_status, cuda_driver_version, CudaDevice, CudaError, GpuConfig,
};
use weft_tests::filetest::same_bits;

const SAXPY: &str = "
program @saxpy(uniform %a: f32, %x: f32, %y: f32) -> (r: f32) {
  %ax: f32 = mul %a, %x
  %r: f32 = add %ax, %y
  return %r
}
";

const POLY: &str = "
program @poly(uniform %a: f32, %x: f32, %n: i32) -> (y: f32, k: i32) {
  %one: f32 = const 1.0
  %z: i32 = const 0
  %s: i32 = const 1
  %y: f32 = for %i: i32 = %z to %n step %s iter(%acc: f32 = %one) {
    %t: f32 = mul %acc, %x
    %u: f32 = add %t, %a
    yield %u
  }
  %k: i32 = mul %n, %n
  return %y, %k
}
";

/// Tuples of narrow types (f16, i16 stored in 32-bit lanes), a uniform i8, a 2-D array read
/// by the element's 2-D index with wrap-around, and two outputs.
const MIX: &str = "
program @mix(%x: <2 x f16>, uniform %k: i8, %a: array<2 x <2 x i16>, repeat>) -> (s: f32, t: <2 x i32>) {
  %rc: <2 x i32> = index
  %v: <2 x i16> = read %a, %rc
  %w: <2 x i32> = cast %v
  %kk: i32 = cast %k
  %kt: <2 x i32> = tuple %kk, %kk
  %t: <2 x i32> = mul %w, %kt
  %xs: <2 x f32> = cast %x
  %s: f32 = dot %xs, %xs
  return %s, %t
}
";

/// The device tests run on (`WEFT_CUDA_DEVICE`, default 0), or `None` after printing why
/// the test is skipped. A device the driver lists but that cannot be opened is a failure.
fn gpu() -> Option<CudaDevice> {
    if let Err(e) = cuda_driver_status() {
        eprintln!("SKIPPED (no CUDA driver): {e}");
        return None;
    }
    let ordinal: usize = std::env::var("WEFT_CUDA_DEVICE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let devices = cuda_devices().expect("the driver lists its devices");
    if ordinal >= devices.len() {
        eprintln!(
            "SKIPPED (no CUDA device): device {ordinal} asked for, {} present",
            devices.len()
        );
        return None;
    }
    match CudaDevice::new(ordinal) {
        Ok(d) => Some(d),
        Err(e) => panic!("CUDA device {ordinal} is listed but does not open: {e}"),
    }
}

fn parse(src: &str) -> Module {
    weft_ir::parse_and_verify(src).expect("verifies")
}

/// Deterministic pseudo-random bits.
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// An array of `elem` with `shape`, random canonical lanes.
fn random(elem: Type, shape: &[usize], bits: &mut Bits) -> HostArray {
    let (s, nl) = elem
        .lanes()
        .map_or((elem.elem_scalar(), 1), |(s, n)| (s, n as usize));
    let n: usize = shape.iter().product();
    HostArray {
        elem,
        shape: shape.to_vec(),
        data: (0..n * nl).map(|_| canon(s, bits.next() >> 7)).collect(),
    }
}

/// Asserts that `got` equals `want` bit for bit (any NaN = any NaN), naming `what`.
fn assert_same(got: &[HostArray], want: &[HostArray], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.elem, w.elem, "{what}: output {k} type");
        assert_eq!(g.shape, w.shape, "{what}: output {k} shape");
        if !same_bits(w.elem, &g.data, &w.data) {
            let bad = g
                .data
                .iter()
                .zip(&w.data)
                .position(|(a, b)| !same_bits(w.elem, &[*a], &[*b]))
                .unwrap_or(0);
            panic!(
                "{what}: output {k} differs first at lane {bad}: got {:#x}, want {:#x}",
                g.data[bad], w.data[bad]
            );
        }
    }
}

fn saxpy_inputs(n: usize, bits: &mut Bits) -> Vec<Input> {
    let x = random(Type::f32(), &[n], bits);
    let y = random(Type::f32(), &[n], bits);
    vec![
        Input::Uniform(Const::f32(2.5)),
        Input::Array(Arc::new(x)),
        Input::Array(Arc::new(y)),
    ]
}

#[test]
fn without_a_driver_everything_is_an_error_not_a_panic() {
    match cuda_driver_status() {
        Err(CudaError::NoDriver) => {
            eprintln!("no CUDA driver: checking the errors");
            assert_eq!(cuda_devices(), Ok(Vec::new()));
            let e = match CudaDevice::new(0) {
                Ok(_) => panic!("a device without a driver"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains("driver"), "{e}");
            assert!(e.contains("libcuda"), "{e}");
            assert!(cuda_driver_version().is_err());
            let f = weft_tests::filetest::cuda_device()
                .err()
                .expect("no filetest device without a driver");
            assert!(f.contains("cuda requested but no CUDA driver"), "{f}");
        }
        Err(e) => {
            // A driver library without a usable GPU (or a stub library).
            eprintln!("CUDA driver present but unusable: {e}");
            assert!(!e.to_string().is_empty());
            if let Ok(d) = cuda_devices() {
                assert!(d.is_empty(), "{d:?}");
            }
            assert!(CudaDevice::new(0).is_err());
        }
        Ok(()) => {
            let devices = cuda_devices().expect("devices");
            eprintln!(
                "CUDA driver {:?}, {} device(s)",
                cuda_driver_version(),
                devices.len()
            );
            for d in &devices {
                eprintln!("  {d}");
                assert!(d.multiprocessors > 0 && d.memory_bytes > 0, "{d:?}");
            }
            let e = match CudaDevice::new(devices.len()) {
                Ok(_) => panic!("device {} should not exist", devices.len()),
                Err(e) => e.to_string(),
            };
            assert!(
                e.contains(&format!("reports {} device", devices.len())),
                "{e}"
            );
        }
    }
}

#[test]
fn saxpy_matches_the_interpreter_bit_for_bit() {
    let Some(dev) = gpu() else { return };
    eprintln!("{} (PTX for sm_{})", dev.info(), dev.sm());
    let m = parse(SAXPY);
    let mut bits = Bits(0x9e37_79b9_7f4a_7c15);
    for n in [0usize, 1, 7, 1000, (1 << 20) + 3] {
        let ins = saxpy_inputs(n, &mut bits);
        let want = Interpreter::new(&m)
            .apply("saxpy", &ins, None)
            .expect("interp");
        let got = dev.apply(&m, "saxpy", &ins, None).expect("cuda");
        assert_same(&got, &want, &format!("saxpy, {n} elements"));
    }
    assert_eq!(dev.cached(), 1);
    let k = dev.kernel(&m, "saxpy").expect("cached kernel");
    eprintln!(
        "saxpy: LLVM {:?}, driver load {:?}, {} registers, block {} × {} per SM",
        k.llvm_time, k.load_time, k.registers, k.auto_block, k.blocks_per_sm
    );
}

/// The CPU stencil cases (`cpu::stencil_cases`: every boundary mode, offsets up to ±3,
/// rank 1–3, every storage class) on the GPU: per-element interior/border dispatch with the
/// default geometry, and whole blocks of four elements per thread (vector loads and stores,
/// the interior variant per block) with a grid of 2 × 32 threads, bit for bit.
#[test]
fn partitioned_stencils_match_the_interpreter_on_the_gpu() {
    let Some(mut dev) = gpu() else { return };
    for c in crate::cpu::stencil_cases() {
        for cfg in [
            GpuConfig::default(),
            GpuConfig {
                block: Some(32),
                grid: Some(2),
                ..Default::default()
            },
        ] {
            dev.set_config(cfg);
            let mut l = dev
                .launch(&c.module, "s", &c.inputs, Some(&c.shape))
                .expect("launch");
            let got = l.outputs().expect("outputs");
            assert_same(&got, &c.want, &format!("{cfg:?} {}", c.what));
        }
    }
}

#[test]
fn loops_and_several_outputs_match_for_any_geometry() {
    let Some(mut dev) = gpu() else { return };
    let m = parse(POLY);
    let mut bits = Bits(0x2545_f491_4f6c_dd1d);
    let configs = [
        GpuConfig::default(),
        GpuConfig {
            block: Some(32),
            grid: Some(1),
            ..Default::default()
        },
        GpuConfig {
            block: Some(1024),
            grid: Some(3),
            ..Default::default()
        },
        GpuConfig {
            block: Some(100_000),
            grid: None,
            ..Default::default()
        },
    ];
    for n in [0usize, 1, 3, 63, 1000, 50_001] {
        let x: Vec<f32> = (0..n).map(|i| (i as f32) * 0.37 - 5.0).collect();
        let trips = HostArray {
            elem: Type::i32(),
            shape: vec![n],
            data: (0..n).map(|_| bits.next() % 23).collect(),
        };
        let ins = vec![
            Input::Uniform(Const::f32(0.5)),
            Input::Array(Arc::new(HostArray::from_f32(&x))),
            Input::Array(Arc::new(trips)),
        ];
        let want = Interpreter::new(&m)
            .apply("poly", &ins, None)
            .expect("interp");
        for c in configs {
            dev.set_config(c);
            let mut l = dev.launch(&m, "poly", &ins, None).expect("launch");
            assert!(l.block() >= 1 && l.block() <= l.kernel().max_block);
            assert!(l.grid() >= 1);
            l.run().expect("run");
            let got = l.outputs().expect("outputs");
            assert_same(&got, &want, &format!("poly, {n} elements, {c:?}"));
        }
    }
    assert_eq!(dev.cached(), 1, "one kernel for every launch");
}

#[test]
fn tuples_narrow_types_arrays_and_2d_launches_match() {
    let Some(dev) = gpu() else { return };
    let m = parse(MIX);
    let p = m.get("mix").expect("program");
    let x_ty = p.ty(p.params[0].value);
    let a_elem = p
        .ty(p.params[2].value)
        .array_parts()
        .map(|(_, e, _)| e)
        .expect("array");
    let mut bits = Bits(0x1234_5678_9abc_def1);
    for (shape, ashape) in [
        (vec![3usize, 5], vec![2usize, 4]),
        (vec![1, 1], vec![1, 1]),
        (vec![300, 257], vec![17, 3]),
        (vec![4, 0], vec![2, 2]),
        (vec![2, 3], vec![0, 0]),
    ] {
        let ins = vec![
            Input::Array(Arc::new(random(x_ty, &shape, &mut bits))),
            Input::Uniform(Const::from_lanes(
                Type::scalar(weft_ir::ScalarType::I8),
                &[canon(weft_ir::ScalarType::I8, bits.next())],
            )),
            Input::Array(Arc::new(random(a_elem, &ashape, &mut bits))),
        ];
        let want = Interpreter::new(&m)
            .apply("mix", &ins, None)
            .expect("interp");
        let got = dev.apply(&m, "mix", &ins, None).expect("cuda");
        assert_same(
            &got,
            &want,
            &format!("mix over {shape:?}, array {ashape:?}"),
        );
    }
}

#[test]
fn inputs_stay_resident_and_outputs_download_once() {
    let Some(dev) = gpu() else { return };
    let m = parse(SAXPY);
    let n = 4096usize;
    let mut bits = Bits(7);
    let ins = saxpy_inputs(n, &mut bits);
    let t0 = dev.transfers();
    let mut l1 = dev.launch(&m, "saxpy", &ins, None).expect("launch 1");
    let t1 = dev.transfers().since(&t0);
    assert_eq!(
        (t1.uploads, t1.upload_bytes),
        (2, 2 * n as u64 * 4),
        "{t1:?}"
    );
    l1.run().expect("run 1");
    let mut l2 = dev.launch(&m, "saxpy", &ins, None).expect("launch 2");
    l2.run().expect("run 2");
    l2.run().expect("run 2 again");
    let t2 = dev.transfers().since(&t0);
    assert_eq!(t2.uploads, 2, "the second launch uploads nothing: {t2:?}");
    assert_eq!(t2.downloads, 0, "nothing is read before outputs(): {t2:?}");
    let a = l2.outputs().expect("outputs");
    let b = l2.outputs().expect("outputs again");
    assert_eq!(a, b);
    let t3 = dev.transfers().since(&t0);
    assert_eq!(
        (t3.downloads, t3.download_bytes),
        (1, n as u64 * 4),
        "{t3:?}"
    );
    let want = Interpreter::new(&m)
        .apply("saxpy", &ins, None)
        .expect("interp");
    assert_same(&a, &want, "resident saxpy");
    assert_same(&l1.outputs().expect("outputs 1"), &want, "first launch");

    // The host changing an input (`Arc::make_mut` copies a shared array) makes a new array,
    // which is uploaded afresh; the unchanged one stays resident.
    let Input::Array(x) = &ins[1] else {
        unreachable!()
    };
    let mut x2 = x.clone();
    Arc::make_mut(&mut x2).data[0] = 1.0f32.to_bits() as u64;
    let ins2 = vec![ins[0].clone(), Input::Array(x2), ins[2].clone()];
    let before = dev.transfers();
    let got = dev.apply(&m, "saxpy", &ins2, None).expect("changed input");
    let t4 = dev.transfers().since(&before);
    assert_eq!((t4.uploads, t4.downloads), (1, 1), "{t4:?}");
    let want2 = Interpreter::new(&m)
        .apply("saxpy", &ins2, None)
        .expect("interp");
    assert_same(&got, &want2, "after make_mut");

    // Arrays the host dropped leave the device at the next launch.
    assert_eq!(dev.resident_inputs(), 3);
    drop((ins, ins2, l1, l2));
    let fresh = saxpy_inputs(8, &mut bits);
    dev.apply(&m, "saxpy", &fresh, None).expect("fresh");
    assert_eq!(dev.resident_inputs(), 2);

    // Timing back-to-back runs.
    let mut l = dev.launch(&m, "saxpy", &fresh, None).expect("launch");
    let t = l.time_runs(5).expect("time");
    eprintln!("5 saxpy launches of 8 elements: {t:?}");
    assert_same(
        &l.outputs().expect("outputs"),
        &Interpreter::new(&m)
            .apply("saxpy", &fresh, None)
            .expect("interp"),
        "after time_runs",
    );
}

#[test]
fn empty_launches_transfer_nothing_and_errors_match_the_interpreter() {
    let Some(dev) = gpu() else { return };
    let m = parse(SAXPY);
    let mut bits = Bits(11);
    let before = dev.transfers();
    let mut l = dev
        .launch(&m, "saxpy", &saxpy_inputs(0, &mut bits), None)
        .expect("empty launch");
    assert!(l.is_empty());
    l.run().expect("run");
    let outs = l.outputs().expect("outputs");
    assert_eq!(outs[0].shape, vec![0]);
    assert!(outs[0].data.is_empty());
    assert_eq!(dev.transfers().since(&before), Default::default());

    let mut ins = saxpy_inputs(4, &mut bits);
    ins[2] = Input::Array(Arc::new(HostArray::from_f32(&[1.0; 5])));
    let e = match dev.launch(&m, "saxpy", &ins, None) {
        Ok(_) => panic!("shape mismatch accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("input `y`"), "{e}");
    let e = match dev.launch(&m, "nope", &ins, None) {
        Ok(_) => panic!("unknown program accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("nope"), "{e}");
}
