//! Differential fuzzing of kernel mode (issue 9): random barrier-safe kernels run on the
//! interpreter (the oracle, with exact barrier semantics) and on the compiled backends; every
//! buffer must come back with the same bits.
//!
//! A case wraps a random map program of [`crate::gen`] (any ops, types, control flow, arrays,
//! calls; one not using `index`/`shape`) in a kernel: each work-item reads its varying inputs
//! from buffers at its global id, calls the program, stores the results to group-shared
//! arrays at its local id, and after a barrier reads a partner's slot and stores it to the
//! output buffers. Random structure around that: rounds of a rotation through shared memory
//! in a `for` loop with barriers, a `while` loop with a barrier and a group-uniform halving
//! counter, the final exchange under a group-uniform `if` with a barrier, and integer atomics
//! whose results do not depend on the order work-items run. Every access to shared memory is
//! separated from conflicting ones by a barrier, so the kernels are race-free.

use crate::compare::same_bits;
use crate::gen::GenConfig;
use weft_ir::{Const, HostArray, Input, KernelArg, KernelGrid, Module, ParamKind, Type};

/// Runs kernel `@k` of a module over a grid on one device (a device's `run_kernel`).
pub type RunKernel<'a> =
    dyn Fn(&Module, &mut [KernelArg], &KernelGrid) -> Result<(), String> + Sync + 'a;

/// A kernel argument of a case (owned).
#[derive(Clone, Debug)]
pub enum KernelInput {
    /// A uniform value.
    Value(Const),
    /// A read-only array.
    Array(HostArray),
    /// A buffer's contents before the launch.
    Buffer(HostArray),
}

/// One generated kernel and its launch.
#[derive(Clone, Debug)]
pub struct KernelCase {
    /// The module: the wrapped map program(s) and the kernel `@k`.
    pub module: Module,
    /// One argument per parameter of `@k`.
    pub args: Vec<KernelInput>,
    /// The launch.
    pub grid: KernelGrid,
}

impl KernelCase {
    /// The module's text.
    pub fn text(&self) -> String {
        weft_ir::print_module(&self.module)
    }
}

/// A small deterministic generator for the kernel's structure (SplitMix64).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Case `index` of `seed`: `None` when the wrapped program uses `index`/`shape` (discarded).
///
/// # Errors
/// When the generated kernel does not verify (a generator bug), with the text.
pub fn kernel_case(seed: u64, index: u64) -> Result<Option<KernelCase>, String> {
    let case = crate::runner::case_with(
        seed ^ 0x6b65_726e_656c,
        index,
        GenConfig {
            dims: Some(1),
            ..GenConfig::default()
        },
    )?;
    let m = &case.gen.module;
    let p = case.gen.program();
    if weft_ir::verify::uses_launch(m, p) {
        return Ok(None);
    }
    let mut r = Mix(seed.wrapping_mul(31).wrapping_add(index).wrapping_add(1));
    let block = [1u32, 2, 3, 5, 8, 13, 16, 32, 64][r.below(9) as usize];
    let groups = 1 + r.below(3) as u32;
    let n = (block * groups) as usize;
    let rounds = r.below(3);
    let shift = 1 + r.below(block as u64);
    let with_while = r.below(2) == 0;
    let with_if = r.below(2) == 0;
    let mut params = Vec::new();
    let mut body = String::new();
    let mut args = Vec::new();
    let mut call_args = Vec::new();
    let w = |body: &mut String, line: String| {
        body.push_str("  ");
        body.push_str(&line);
        body.push('\n');
    };
    w(&mut body, format!("%cap: i32 = const {block}"));
    for (x, c) in [("c0", 0), ("c1", 1), ("c3", 3), ("c4", 4), ("c5", 5)] {
        w(&mut body, format!("%{x}: i32 = const {c}"));
    }
    w(&mut body, "%l: i32 = local_id".into());
    w(&mut body, "%g: i32 = group_id".into());
    w(&mut body, "%n: i32 = local_size".into());
    w(&mut body, "%gn: i32 = mul %g, %n".into());
    w(&mut body, "%gid: i32 = add %gn, %l".into());
    for (i, (par, inp)) in p.params.iter().zip(&case.inputs).enumerate() {
        let t = p.ty(par.value);
        match (par.kind, inp) {
            (ParamKind::Uniform, Input::Uniform(c)) => {
                params.push(format!("uniform %ku{i}: {t}"));
                args.push(KernelInput::Value(*c));
                call_args.push(format!("%ku{i}"));
            }
            (ParamKind::Array, Input::Array(a)) => {
                params.push(format!("%ka{i}: {t}"));
                args.push(KernelInput::Array((**a).clone()));
                call_args.push(format!("%ka{i}"));
            }
            (ParamKind::Varying, Input::Array(a)) => {
                params.push(format!("buffer %kx{i}: array<1 x {t}>"));
                args.push(KernelInput::Buffer((**a).clone()));
                w(&mut body, format!("%vx{i}: {t} = read %kx{i}, %gid"));
                call_args.push(format!("%vx{i}"));
            }
            _ => return Err("internal: a parameter and its input disagree".into()),
        }
    }
    let outs: Vec<Type> = p.outputs.iter().map(|o| o.ty).collect();
    for (j, &t) in outs.iter().enumerate() {
        params.push(format!("buffer %ko{j}: array<1 x {t}>"));
        args.push(KernelInput::Buffer(HostArray::zeros(t, &[n])));
        w(&mut body, format!("%sh{j}: array<1 x {t}> = shared %cap"));
    }
    params.push("buffer %cnt: array<1 x i32>".into());
    args.push(KernelInput::Buffer(HostArray::zeros(Type::i32(), &[8])));
    let results: Vec<String> = outs
        .iter()
        .enumerate()
        .map(|(j, t)| format!("%r{j}: {t}"))
        .collect();
    w(
        &mut body,
        format!(
            "{} = call @{}({})",
            results.join(", "),
            p.name,
            call_args.join(", ")
        ),
    );
    for j in 0..outs.len() {
        w(&mut body, format!("store %sh{j}, %l, %r{j}"));
    }
    w(&mut body, "barrier".into());
    // Rotation rounds: read the next slot, barrier, write it to one's own, barrier.
    w(&mut body, format!("%rounds: i32 = const {rounds}"));
    w(
        &mut body,
        "%rot: i32 = for %it: i32 = %c0 to %rounds step %c1 iter(%acc: i32 = %c0) {".into(),
    );
    w(&mut body, "  %l1: i32 = add %l, %c1".into());
    w(&mut body, "  %nb: i32 = rem %l1, %n".into());
    for (j, t) in outs.iter().enumerate() {
        w(&mut body, format!("  %t{j}: {t} = read %sh{j}, %nb"));
    }
    w(&mut body, "  barrier".into());
    for j in 0..outs.len() {
        w(&mut body, format!("  store %sh{j}, %l, %t{j}"));
    }
    w(&mut body, "  barrier".into());
    w(&mut body, "  %acc2: i32 = add %acc, %c1".into());
    w(&mut body, "  yield %acc2".into());
    w(&mut body, "}".into());
    if with_while {
        w(&mut body, "%hw: i32 = while iter(%h: i32 = %n) {".into());
        w(&mut body, "  %more: bool = gt %h, %c1".into());
        w(&mut body, "  yield %more".into());
        w(&mut body, "} do (%hh: i32) {".into());
        w(&mut body, "  barrier".into());
        w(&mut body, "  %half: i32 = shr %hh, %c1".into());
        w(&mut body, "  yield %half".into());
        w(&mut body, "}".into());
    }
    // The exchange: a partner's slot to the output buffers.
    w(&mut body, format!("%sh_k: i32 = const {shift}"));
    w(&mut body, "%ls: i32 = add %l, %sh_k".into());
    w(&mut body, "%q: i32 = rem %ls, %n".into());
    if with_if {
        w(&mut body, "%gb: i32 = and %g, %c1".into());
        w(&mut body, "%even: bool = eq %gb, %c0".into());
        w(&mut body, "if %even {".into());
        for (j, t) in outs.iter().enumerate() {
            w(&mut body, format!("  %e{j}: {t} = read %sh{j}, %q"));
        }
        w(&mut body, "  barrier".into());
        for j in 0..outs.len() {
            w(&mut body, format!("  store %ko{j}, %gid, %e{j}"));
        }
        w(&mut body, "} else {".into());
        for (j, t) in outs.iter().enumerate() {
            w(&mut body, format!("  %o{j}: {t} = read %sh{j}, %l"));
            w(&mut body, format!("  store %ko{j}, %gid, %o{j}"));
        }
        w(&mut body, "}".into());
    } else {
        for (j, t) in outs.iter().enumerate() {
            w(&mut body, format!("%e{j}: {t} = read %sh{j}, %q"));
            w(&mut body, format!("store %ko{j}, %gid, %e{j}"));
        }
    }
    // Order-free integer atomics.
    w(&mut body, "%k3: i32 = and %gid, %c3".into());
    w(&mut body, "%a1: i32 = atomic_add %cnt, %k3, %c1".into());
    w(&mut body, "%a2: i32 = atomic_max %cnt, %c4, %gid".into());
    w(&mut body, "%ngid: i32 = neg %gid".into());
    w(&mut body, "%a3: i32 = atomic_min %cnt, %c5, %ngid".into());
    w(&mut body, "return".into());
    let text = format!(
        "{}kernel @k({}) {{\n{body}}}\n",
        weft_ir::print_module(m),
        params.join(", ")
    );
    let module = weft_ir::parse_and_verify(&text).map_err(|e| {
        format!(
            "generated kernel does not verify:\n{text}\n{}",
            weft_ir::render(&e.0, "kernel", &text)
        )
    })?;
    let grid = KernelGrid::new(&[groups], &[block])?;
    Ok(Some(KernelCase { module, args, grid }))
}

/// Runs a case with `run` (one of the devices' `run_kernel`s), on fresh copies of the
/// buffers; returns the buffers afterwards, in parameter order.
pub fn run_case(c: &KernelCase, run: &RunKernel<'_>) -> Result<Vec<HostArray>, String> {
    let mut owned = c.args.clone();
    let mut args: Vec<KernelArg> = owned
        .iter_mut()
        .map(|a| match a {
            KernelInput::Value(v) => KernelArg::Value(*v),
            KernelInput::Array(h) => KernelArg::Array(h),
            KernelInput::Buffer(h) => KernelArg::Buffer(h),
        })
        .collect();
    run(&c.module, &mut args, &c.grid)?;
    drop(args);
    Ok(owned
        .into_iter()
        .filter_map(|a| match a {
            KernelInput::Buffer(h) => Some(h),
            _ => None,
        })
        .collect())
}

/// Whether two runs' buffers have the same bits (any NaN equals any NaN).
pub fn same_buffers(a: &[HostArray], b: &[HostArray]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.shape == y.shape && same_bits(x.elem, &x.data, &y.data))
}

/// What a kernel fuzzing run found.
#[derive(Debug, Default)]
pub struct KernelSummary {
    /// Cases run on every backend.
    pub checked: u64,
    /// Cases discarded (the wrapped program used `index`/`shape`, or ran out of fuel).
    pub discarded: u64,
    /// Mismatches: the kernel's text and what differed.
    pub mismatches: Vec<String>,
}

/// Checks kernel cases `first ..` of `seed` until `checked` cases ran, on each of `backends`
/// (name, run function) against the interpreter.
pub fn fuzz_kernels(
    seed: u64,
    first: u64,
    cases: u64,
    backends: &[(&str, &RunKernel<'_>)],
    progress: &(dyn Fn(&KernelSummary) + Sync),
) -> KernelSummary {
    let mut s = KernelSummary::default();
    let mut i = first;
    while s.checked < cases {
        let c = match kernel_case(seed, i) {
            Ok(Some(c)) => c,
            Ok(None) => {
                s.discarded += 1;
                i += 1;
                continue;
            }
            Err(e) => {
                s.mismatches.push(format!("case {i}: {e}"));
                s.checked += 1;
                i += 1;
                continue;
            }
        };
        let interp = |m: &Module, a: &mut [KernelArg], g: &KernelGrid| {
            let mut it = weft_ir::Interpreter::new(m);
            it.fuel = 1 << 20;
            it.run_kernel("k", a, g).map_err(|e| e.to_string())
        };
        match run_case(&c, &interp) {
            Err(e) if e.contains("fuel") => s.discarded += 1,
            Err(e) => s.mismatches.push(format!(
                "case {i}: the interpreter failed: {e}\n{}",
                c.text()
            )),
            Ok(want) => {
                for (name, run) in backends {
                    match run_case(&c, *run) {
                        Ok(got) if same_buffers(&got, &want) => {}
                        Ok(got) => s.mismatches.push(format!(
                            "case {i} (seed {seed}): {name} differs from the interpreter\n{}\n; interpreter: {want:?}\n; {name}: {got:?}",
                            c.text()
                        )),
                        Err(e) => s.mismatches.push(format!(
                            "case {i} (seed {seed}): {name} failed: {e}\n{}",
                            c.text()
                        )),
                    }
                }
                s.checked += 1;
            }
        }
        i += 1;
        progress(&s);
    }
    s
}
