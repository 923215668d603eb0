//! The reference interpreter: runs verified programs on single elements or over whole
//! arrays (the apply semantics of DESIGN §5), exactly per DESIGN §3, with fuel.

pub mod kernel;
pub mod scalar;

use crate::konst::{canon, lane_i64, Const};
use crate::opcode::Opcode;
use crate::program::{Imm, Module, ParamKind, Program, Region};
use crate::types::{Boundary, ScalarType, Type};
use rayon::prelude::*;
use std::borrow::Cow;

/// Default fuel: ops one element may execute before the run stops with [`RunError::OutOfFuel`].
pub const DEFAULT_FUEL: u64 = 1 << 28;

pub use crate::host::{lanes_of, Arg, HostArray, Input, RunError};

/// The reference interpreter over one module.
///
/// It runs the module with its math functions expanded ([`crate::passes::math`]): when the
/// module has any, [`Interpreter::new`] expands a copy, so that the interpreter computes
/// exactly what every backend computes from the same expansion.
pub struct Interpreter<'m> {
    module: Cow<'m, Module>,
    /// Fuel per element (ops executed, including those of loops and calls).
    pub fuel: u64,
}

pub(crate) type Lanes = [u64; 4];

struct Frame<'a> {
    vals: Vec<Lanes>,
    arrays: Vec<Option<&'a HostArray>>,
    /// A kernel's buffers and shared arrays.
    mems: Vec<Option<&'a kernel::Mem>>,
}

struct Ctx<'a> {
    fuel: u64,
    index: &'a [i64],
    shape: &'a [i64],
    out_of_fuel: bool,
    launch_error: Option<String>,
    /// The work-item a kernel runs as.
    item: Option<&'a kernel::WorkItem<'a>>,
    /// Stopped because another work-item of the group failed.
    aborted: bool,
}

impl<'m> Interpreter<'m> {
    /// An interpreter with [`DEFAULT_FUEL`] per element. The module must verify. If it has
    /// math function ops, the interpreter runs an expanded copy (each expanded op costs fuel);
    /// identical calls (same callee and arguments in one scope) run once.
    pub fn new(module: &'m Module) -> Interpreter<'m> {
        let has_math = crate::passes::math::has_math(module);
        let repeated_calls = module.programs.iter().any(|p| {
            let mut calls = 0;
            p.walk(&mut |op| calls += usize::from(p.op(op).opcode == Opcode::Call));
            calls > 1
        });
        let module = if has_math || repeated_calls {
            let mut m = module.clone();
            if has_math {
                crate::passes::math::expand_math(&mut m);
            }
            // Identical calls run once (programs are pure): a program calling another twice
            // with the same arguments, down a chain, costs linear time, not exponential.
            for p in &mut m.programs {
                crate::passes::cse::cse_calls(p);
            }
            Cow::Owned(m)
        } else {
            Cow::Borrowed(module)
        };
        Interpreter {
            module,
            fuel: DEFAULT_FUEL,
        }
    }

    /// The module the interpreter runs (math functions expanded).
    pub fn module(&self) -> &Module {
        &self.module
    }

    fn program(&self, name: &str) -> Result<&Program, RunError> {
        self.module
            .get(name)
            .ok_or_else(|| RunError::UnknownProgram(name.to_string()))
    }

    /// Runs `program` on one element with coordinates `index` in a launch of `shape`
    /// (both as many axes as the program's `index`/`shape` ops expect; `[0]` and `[1]`
    /// for a plain call). Returns the outputs.
    pub fn run_element(
        &self,
        program: &str,
        args: &[Arg],
        index: &[i64],
        shape: &[i64],
    ) -> Result<Vec<Const>, RunError> {
        let p = self.program(program)?;
        if p.kind == crate::program::ProgramKind::Kernel {
            return Err(RunError::Launch {
                program: p.name.clone(),
                message: "is a kernel: run it with a grid and block".into(),
            });
        }
        if args.len() != p.params.len() {
            return Err(RunError::ArgCount {
                program: p.name.clone(),
                expected: p.params.len(),
                got: args.len(),
            });
        }
        let mut frame = Frame::new(p);
        for (i, (par, a)) in p.params.iter().zip(args).enumerate() {
            let ty = p.ty(par.value);
            let bad = |m: String| RunError::BadInput {
                program: p.name.clone(),
                param: p.param_name(i).to_string(),
                message: m,
            };
            match (par.kind, a) {
                (ParamKind::Array, Arg::Array(arr)) => {
                    check_array(ty, arr).map_err(bad)?;
                    frame.arrays[par.value.index()] = Some(arr);
                }
                (ParamKind::Array, Arg::Value(_)) => return Err(bad("expects an array".into())),
                (_, Arg::Value(c)) if c.ty == ty => frame.vals[par.value.index()] = c.lanes,
                (_, Arg::Value(c)) => return Err(bad(format!("expects {ty}, got {}", c.ty))),
                (_, Arg::Array(_)) => {
                    return Err(bad(format!("expects a {ty} value, got an array")))
                }
            }
        }
        let outs = self.run_body(p, &mut frame, index, shape, 0)?;
        Ok(p.outputs
            .iter()
            .zip(outs)
            .map(|(o, l)| Const { ty: o.ty, lanes: l })
            .collect())
    }

    /// Applies `program` over arrays (DESIGN §5): every varying input has the launch shape
    /// (an error names the first that does not), uniforms broadcast, and each output is an
    /// array of that shape. With no varying input, `shape` gives the launch shape.
    /// Elements run in parallel on the rayon pool.
    pub fn apply(
        &self,
        program: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostArray>, RunError> {
        let p = self.program(program)?;
        let (launch, n) = crate::launch::plan_launch(p, inputs, shape)?;
        let too_big = || RunError::Launch {
            program: p.name.clone(),
            message: format!("launch shape {launch:?} is too large to allocate its outputs"),
        };
        let mut outs = Vec::with_capacity(p.outputs.len());
        for o in &p.outputs {
            let len = n * lanes_of(o.ty);
            let mut data = Vec::new();
            data.try_reserve_exact(len).map_err(|_| too_big())?;
            data.resize(len, 0);
            outs.push(HostArray {
                elem: o.ty,
                shape: launch.clone(),
                data,
            });
        }
        let shape_i: Vec<i64> = launch.iter().map(|&x| x as i64).collect();
        let chunk = 256usize;
        let chunks: Vec<(usize, usize)> = (0..n.div_ceil(chunk))
            .map(|c| (c * chunk, ((c + 1) * chunk).min(n)))
            .collect();
        let results: Result<Vec<Vec<Lanes>>, RunError> = chunks
            .par_iter()
            .map(|&(lo, hi)| self.run_chunk(p, inputs, &launch, &shape_i, lo, hi))
            .collect();
        let results = results?;
        let no = p.outputs.len();
        let mut e = 0usize;
        for chunk in results {
            for row in chunk.chunks(no.max(1)) {
                for (k, out) in outs.iter_mut().enumerate() {
                    let l = lanes_of(out.elem);
                    out.data[e * l..(e + 1) * l].copy_from_slice(&row[k][..l]);
                }
                e += 1;
            }
        }
        Ok(outs)
    }

    fn run_chunk(
        &self,
        p: &Program,
        inputs: &[Input],
        launch: &[usize],
        shape_i: &[i64],
        lo: usize,
        hi: usize,
    ) -> Result<Vec<Lanes>, RunError> {
        let mut frame = Frame::new(p);
        for (par, inp) in p.params.iter().zip(inputs) {
            match (par.kind, inp) {
                (ParamKind::Array, Input::Array(a)) => frame.arrays[par.value.index()] = Some(a),
                (_, Input::Uniform(c)) => frame.vals[par.value.index()] = c.lanes,
                _ => {}
            }
        }
        let mut out = Vec::with_capacity((hi - lo) * p.outputs.len());
        let mut index = vec![0i64; launch.len()];
        for e in lo..hi {
            let mut rem = e;
            for ax in (0..launch.len()).rev() {
                index[ax] = (rem % launch[ax].max(1)) as i64;
                rem /= launch[ax].max(1);
            }
            for (par, inp) in p.params.iter().zip(inputs) {
                if let (ParamKind::Varying, Input::Array(a)) = (par.kind, inp) {
                    let l = lanes_of(a.elem);
                    let mut lanes = [0u64; 4];
                    lanes[..l].copy_from_slice(&a.data[e * l..(e + 1) * l]);
                    frame.vals[par.value.index()] = lanes;
                }
            }
            out.extend(self.run_body(p, &mut frame, &index, shape_i, e)?);
        }
        Ok(out)
    }

    /// Runs the body of `p` for one element (row-major number `element`, for messages)
    /// with fresh fuel; returns the outputs.
    fn run_body(
        &self,
        p: &Program,
        frame: &mut Frame,
        index: &[i64],
        shape: &[i64],
        element: usize,
    ) -> Result<Vec<Lanes>, RunError> {
        let mut ctx = Ctx {
            fuel: self.fuel,
            index,
            shape,
            out_of_fuel: false,
            launch_error: None,
            item: None,
            aborted: false,
        };
        let outs = self.exec_region(p, frame, &mut ctx, p.body);
        if let Some(message) = ctx.launch_error.take() {
            return Err(RunError::Launch {
                program: p.name.clone(),
                message,
            });
        }
        if ctx.out_of_fuel {
            return Err(RunError::OutOfFuel {
                program: p.name.clone(),
                fuel: self.fuel,
                element,
            });
        }
        Ok(outs)
    }

    /// Runs region `r`; returns its terminator's operand values.
    fn exec_region<'a>(
        &self,
        p: &Program,
        f: &mut Frame<'a>,
        ctx: &mut Ctx,
        r: Region,
    ) -> Vec<Lanes> {
        for &op in &p.region(r).ops {
            if ctx.fuel == 0 {
                ctx.out_of_fuel = true;
                return vec![[0; 4]; 8];
            }
            ctx.fuel -= 1;
            let d = p.op(op);
            if d.opcode.is_terminator() {
                return d.args.iter().map(|&a| f.vals[a.index()]).collect();
            }
            if let Some(res) = self.exec_op(p, f, ctx, op) {
                for (&v, l) in d.results.iter().zip(res) {
                    f.vals[v.index()] = l;
                }
            }
            if ctx.out_of_fuel {
                return vec![[0; 4]; 8];
            }
        }
        Vec::new()
    }

    fn set_args(f: &mut Frame, p: &Program, r: Region, vals: &[Lanes]) {
        for (&a, &v) in p.region(r).args.iter().zip(vals) {
            f.vals[a.index()] = v;
        }
    }

    fn exec_op<'a>(
        &self,
        p: &Program,
        f: &mut Frame<'a>,
        ctx: &mut Ctx,
        op: crate::Op,
    ) -> Option<Vec<Lanes>> {
        let d = p.op(op);
        let arg = |i: usize| f.vals[d.args[i].index()];
        let aty = |i: usize| p.ty(d.args[i]);
        let single = |l: Lanes| Some(vec![l]);
        let rty = d.results.first().map(|&v| p.ty(v));
        match d.opcode {
            Opcode::If => {
                let branch = if arg(0)[0] != 0 {
                    d.regions[0]
                } else {
                    d.regions[1]
                };
                Some(self.exec_region(p, f, ctx, branch))
            }
            Opcode::For => {
                let s = aty(0).elem_scalar();
                let val = |l: Lanes| -> i128 {
                    if s.is_signed_int() {
                        lane_i64(s, l[0]) as i128
                    } else {
                        l[0] as i128
                    }
                };
                let (lo, hi, step) = (val(arg(0)), val(arg(1)), val(arg(2)));
                let max = if s.is_signed_int() {
                    (1i128 << (s.bits() - 1)) - 1
                } else {
                    (1i128 << s.bits()) - 1
                };
                let r = d.regions[0];
                let mut carried: Vec<Lanes> =
                    d.args[3..].iter().map(|a| f.vals[a.index()]).collect();
                let mut i = lo;
                while step > 0 && i < hi {
                    let mut rargs = vec![[canon(s, i as u64), 0, 0, 0]];
                    rargs.extend_from_slice(&carried);
                    Self::set_args(f, p, r, &rargs);
                    carried = self.exec_region(p, f, ctx, r);
                    if ctx.out_of_fuel {
                        return None;
                    }
                    i += step;
                    if i > max {
                        break;
                    }
                }
                Some(carried)
            }
            Opcode::While | Opcode::DoUntil => {
                let mut carried: Vec<Lanes> = d.args.iter().map(|a| f.vals[a.index()]).collect();
                let (first, second) = (d.regions[0], d.regions[1]);
                loop {
                    Self::set_args(f, p, first, &carried);
                    let a = self.exec_region(p, f, ctx, first);
                    if ctx.out_of_fuel {
                        return None;
                    }
                    if d.opcode == Opcode::While {
                        if a.first().is_none_or(|c| c[0] == 0) {
                            return Some(carried);
                        }
                        Self::set_args(f, p, second, &carried);
                        carried = self.exec_region(p, f, ctx, second);
                    } else {
                        carried = a;
                        Self::set_args(f, p, second, &carried);
                        let c = self.exec_region(p, f, ctx, second);
                        if c.first().is_none_or(|c| c[0] != 0) {
                            return Some(carried);
                        }
                    }
                    if ctx.out_of_fuel {
                        return None;
                    }
                }
            }
            Opcode::Call => {
                let Imm::Callee(name) = &d.imm else {
                    return None;
                };
                let callee = self.module.get(name)?;
                let mut cf = Frame::new(callee);
                for (par, &a) in callee.params.iter().zip(&d.args) {
                    if par.kind.is_array() {
                        cf.arrays[par.value.index()] = f.arrays[a.index()];
                        cf.mems[par.value.index()] = f.mems[a.index()];
                    } else {
                        cf.vals[par.value.index()] = f.vals[a.index()];
                    }
                }
                Some(self.exec_region(callee, &mut cf, ctx, callee.body))
            }
            Opcode::Const => match &d.imm {
                Imm::Const(c) => single(c.lanes),
                _ => None,
            },
            Opcode::Index | Opcode::Shape => {
                let src = if d.opcode == Opcode::Index {
                    ctx.index
                } else {
                    ctx.shape
                };
                let t = rty?;
                if lanes_of(t) != src.len() {
                    ctx.launch_error = Some(format!(
                        "`{}` has {} lane(s) but the launch has {} axes",
                        d.opcode.mnemonic(),
                        lanes_of(t),
                        src.len()
                    ));
                    ctx.out_of_fuel = true;
                    return None;
                }
                let s = t.elem_scalar();
                let mut l = [0u64; 4];
                for (k, x) in l.iter_mut().zip(src) {
                    *k = canon(s, *x as u64);
                }
                single(l)
            }
            Opcode::Extent => {
                let a = f.arrays[d.args[0].index()]?;
                let t = rty?;
                let s = t.elem_scalar();
                let mut l = [0u64; 4];
                for (k, &x) in l.iter_mut().zip(&a.shape) {
                    let x = if s == ScalarType::I32 {
                        x.min(i32::MAX as usize)
                    } else {
                        x
                    };
                    *k = canon(s, x as u64);
                }
                single(l)
            }
            Opcode::Read => {
                let (_, elem, boundary) = aty(0).array_parts()?;
                let cs = aty(1).elem_scalar();
                let c = arg(1);
                if let Some(mem) = f.mems[d.args[0].index()] {
                    return single(mem.read(boundary, cs, &c));
                }
                let a = f.arrays[d.args[0].index()]?;
                single(read(a, elem, boundary, cs, &c))
            }
            Opcode::ReadOffset => {
                let (_, elem, _) = aty(0).array_parts()?;
                let cs = aty(1).elem_scalar();
                let off = arg(1);
                let a = match f.mems[d.args[0].index()] {
                    Some(_) => None,
                    None => f.arrays[d.args[0].index()],
                };
                let Some(a) = a else {
                    ctx.launch_error = Some("`read_offset` of a kernel's buffer".into());
                    return None;
                };
                if ctx.index.len() != a.shape.len() {
                    ctx.launch_error = Some(format!(
                        "`read_offset` of a {}-D array in a launch of {} axes",
                        a.shape.len(),
                        ctx.index.len()
                    ));
                    return None;
                }
                // index + off per axis, in i64 (no wrap-around: extents are below 2^63).
                let at: Vec<i64> = (0..a.shape.len())
                    .map(|ax| ctx.index[ax].saturating_add(lane_i64(cs, off[ax])))
                    .collect();
                let inside = at
                    .iter()
                    .zip(&a.shape)
                    .all(|(&x, &n)| x >= 0 && x < n as i64);
                if !inside {
                    ctx.launch_error = Some(format!(
                        "`read_offset` at {at:?} is outside its array's shape {:?} (a wrong interior partition)",
                        a.shape
                    ));
                    return None;
                }
                let mut c = [0u64; 4];
                for (k, &x) in c.iter_mut().zip(&at) {
                    *k = x as u64;
                }
                single(read(a, elem, Boundary::Clamp, ScalarType::I64, &c))
            }
            o if o.is_kernel_only() => {
                let item = ctx.item?;
                let r = kernel::exec(item, d, &|i| arg(i), &|i| aty(i), rty, &|v| {
                    f.mems[v.index()]
                });
                if r.stop {
                    ctx.out_of_fuel = true;
                    ctx.aborted = true;
                }
                r.value.map(|l| vec![l])
            }
            _ => {
                let t = rty?;
                single(pure(d, &|i| arg(i), &|i| aty(i), t))
            }
        }
    }
}

/// Evaluates one pure op on constants with the interpreter's lane semantics (DESIGN §3):
/// the DSL's immediate mode, where operations outside recording compute at once.
///
/// `lanes` is the lane list of `extract`, `insert` and `swizzle` (empty otherwise);
/// `declared` is the result type that `cast` and `bitcast` need (`None` otherwise). Math
/// functions give the bits of their expansion, as everywhere else.
///
/// Errors (messages): an op that is not pure on scalars and tuples (`const`, control ops,
/// `call`, `read`, `extent`, `index`, `shape`), or operands that break the op's type rule.
pub fn eval_op(
    opcode: Opcode,
    lanes: &[u8],
    declared: Option<Type>,
    args: &[Const],
) -> Result<Const, String> {
    use crate::opcode::Family;
    let family = opcode.info().family;
    if matches!(
        family,
        Family::Constant | Family::Array | Family::Builtin | Family::Call | Family::Control
    ) {
        return Err(format!(
            "`{}` is not a pure op on values",
            opcode.mnemonic()
        ));
    }
    let tys: Vec<Type> = args.iter().map(|c| c.ty).collect();
    let rty = crate::opcode::infer(opcode, &tys, lanes, declared)?;
    let d = crate::OpData {
        opcode,
        args: (0..args.len() as u32).map(crate::Value).collect(),
        imm: if lanes.is_empty() {
            Imm::None
        } else {
            Imm::Lanes(lanes.to_vec())
        },
        results: Vec::new(),
        regions: Vec::new(),
    };
    let out = pure(&d, &|i| args[i].lanes, &|i| args[i].ty, rty);
    Ok(Const::from_lanes(rty, &out[..lanes_of(rty)]))
}

/// A pure op on scalars/tuples (not a control op, call, `read`, `extent`, `index`, `shape`
/// or a math function, which the interpreter runs expanded): its result lanes from its
/// operands' lanes and types. Constant folding evaluates with it too.
pub(crate) fn pure(
    d: &crate::OpData,
    arg: &dyn Fn(usize) -> Lanes,
    aty: &dyn Fn(usize) -> Type,
    rty: Type,
) -> Lanes {
    use Opcode as O;
    let mut out = [0u64; 4];
    let n = lanes_of(rty);
    let op = d.opcode;
    match op {
        O::Tuple => {
            for (i, o) in out.iter_mut().enumerate().take(d.args.len()) {
                *o = arg(i)[0];
            }
        }
        O::Extract | O::Swizzle => {
            if let Imm::Lanes(ls) = &d.imm {
                let a = arg(0);
                for (o, &l) in out.iter_mut().zip(ls) {
                    *o = a[l as usize];
                }
            }
        }
        O::Insert => {
            out = arg(0);
            if let Imm::Lanes(ls) = &d.imm {
                let v = arg(1);
                for (k, &l) in ls.iter().enumerate() {
                    out[l as usize] = v[k];
                }
            }
        }
        O::Select => {
            let (c, a, b) = (arg(0), arg(1), arg(2));
            let per_lane = lanes_of(aty(0)) > 1;
            for i in 0..n {
                let ci = if per_lane { c[i] } else { c[0] };
                out[i] = if ci != 0 { a[i] } else { b[i] };
            }
        }
        O::Cast | O::Bitcast => {
            let (fs, ts) = (aty(0).elem_scalar(), rty.elem_scalar());
            let a = arg(0);
            for i in 0..n {
                out[i] = if op == O::Bitcast {
                    a[i]
                } else {
                    scalar::cast(fs, ts, a[i])
                };
            }
        }
        O::Eq | O::Ne | O::Lt | O::Le | O::Gt | O::Ge => {
            let s = aty(0).elem_scalar();
            let (a, b) = (arg(0), arg(1));
            for i in 0..n {
                out[i] = if s.is_float() {
                    scalar::float_compare(op, s, a[i], b[i])
                } else {
                    scalar::int_compare(op, s, a[i], b[i])
                } as u64;
            }
        }
        O::Dot | O::Length | O::Normalize | O::Cross => {
            let s = aty(0).elem_scalar();
            let a = arg(0);
            let b = if op == O::Dot || op == O::Cross {
                arg(1)
            } else {
                a
            };
            let k = lanes_of(aty(0));
            let fop = |o: Opcode, x: u64, y: u64| scalar::float_op(o, s, x, y, 0);
            let dot = || {
                let mut acc = fop(O::Mul, a[0], b[0]);
                for i in 1..k {
                    acc = fop(O::Add, acc, fop(O::Mul, a[i], b[i]));
                }
                acc
            };
            match op {
                O::Dot => out[0] = dot(),
                O::Length => out[0] = fop(O::Sqrt, dot(), 0),
                O::Normalize => {
                    let len = fop(O::Sqrt, dot(), 0);
                    for i in 0..k {
                        out[i] = fop(O::Div, a[i], len);
                    }
                }
                _ => {
                    let m = |i: usize, j: usize| fop(O::Mul, a[i], b[j]);
                    out[0] = fop(O::Sub, m(1, 2), m(2, 1));
                    out[1] = fop(O::Sub, m(2, 0), m(0, 2));
                    out[2] = fop(O::Sub, m(0, 1), m(1, 0));
                }
            }
        }
        _ => {
            let s = rty.elem_scalar();
            let get = |i: usize| if i < d.args.len() { arg(i) } else { [0; 4] };
            let (a, b, c) = (get(0), get(1), get(2));
            for i in 0..n {
                out[i] = if s.is_float() {
                    scalar::float_op(op, s, a[i], b[i], c[i])
                } else if d.args.len() == 1 {
                    scalar::int_unary(op, s, a[i])
                } else {
                    scalar::int_binary(op, s, a[i], b[i])
                };
            }
        }
    }
    out
}

impl<'a> Frame<'a> {
    fn new(p: &Program) -> Frame<'a> {
        Frame {
            vals: vec![[0; 4]; p.num_values()],
            arrays: vec![None; p.num_values()],
            mems: vec![None; p.num_values()],
        }
    }
}

pub(crate) fn check_array(ty: Type, a: &HostArray) -> Result<(), String> {
    let Some((dims, elem, _)) = ty.array_parts() else {
        return Err(format!("has non-array type {ty}"));
    };
    if a.shape.len() != dims as usize {
        return Err(format!(
            "expects a {dims}-D array, got {} axes (shape {:?})",
            a.shape.len(),
            a.shape
        ));
    }
    if a.elem != elem {
        return Err(format!("expects elements of type {elem}, got {}", a.elem));
    }
    a.check()
}

/// Reads element `coords` of `a` under `boundary` (DESIGN §2). Empty arrays read as zero
/// under clamp and repeat.
pub(crate) fn read(
    a: &HostArray,
    elem: Type,
    boundary: Boundary,
    cs: ScalarType,
    coords: &Lanes,
) -> Lanes {
    let l = lanes_of(elem);
    match linear(&a.shape, boundary, cs, coords) {
        Ok(lin) => {
            let mut out = [0u64; 4];
            out[..l].copy_from_slice(&a.data[lin * l..(lin + 1) * l]);
            out
        }
        Err(k) => k,
    }
}

/// The row-major element number that `coords` reads in an array of `shape` under
/// `boundary`, or the lanes the read gives without touching memory (a constant boundary's
/// value, or zero for an empty array).
pub(crate) fn linear(
    shape: &[usize],
    boundary: Boundary,
    cs: ScalarType,
    coords: &Lanes,
) -> Result<usize, Lanes> {
    let mut lin = 0usize;
    for (ax, &n) in shape.iter().enumerate() {
        let c = lane_i64(cs, coords[ax]);
        let n = n as i64;
        let c = match boundary {
            _ if n == 0 => {
                return Err(match boundary {
                    Boundary::Constant(k) => k,
                    _ => [0; 4],
                })
            }
            Boundary::Clamp => c.clamp(0, n - 1),
            Boundary::Repeat => c.rem_euclid(n),
            Boundary::Constant(k) => {
                if c < 0 || c >= n {
                    return Err(k);
                }
                c
            }
        };
        lin = lin * n as usize + c as usize;
    }
    Ok(lin)
}
