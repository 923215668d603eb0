//! The builder API: constructs well-formed IR from host code, with SSA construction for
//! mutable variables across structured regions (after cranelift-frontend's declare/def/use).
//!
//! Every method users call is `#[track_caller]`: each op records the Rust call site that
//! made it, so the verifier run by [`ProgramBuilder::finish`] reports misuse at the user's line.

use crate::diag::Errors;
use crate::konst::Const;
use crate::opcode::{infer, Opcode};
use crate::program::{Imm, Loc, Module, Op, Output, ParamKind, Program, Region, Value, ValueDef};
use crate::types::Type;
use std::panic::Location;

/// A mutable variable of the builder; each `def_var` gives it a new SSA value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Variable(u32);

/// Builds one program. See the module docs.
///
/// ```
/// use weft_ir::{builder::ProgramBuilder, Type};
/// let mut b = ProgramBuilder::new("saxpy");
/// let a = b.uniform("a", Type::f32());
/// let x = b.varying("x", Type::f32());
/// let y = b.varying("y", Type::f32());
/// let ax = b.mul(a, x);
/// let r = b.add(ax, y);
/// b.output("r", r);
/// let p = b.finish().unwrap();
/// assert!(weft_ir::print_program(&p).contains("add"));
/// ```
pub struct ProgramBuilder {
    prog: Program,
    cur: Region,
    vars: Vec<(Type, String)>,
    defs: Vec<Option<Value>>,
    outputs: Vec<Value>,
    callees: Module,
}

macro_rules! binary {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("Appends `", stringify!($name), " a, b` (type rule in docs/ir.md).")]
        #[track_caller]
        pub fn $name(&mut self, a: Value, b: Value) -> Value {
            self.op(Opcode::$op, &[a, b])
        }
    )*};
}

macro_rules! unary {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("Appends `", stringify!($name), " a` (type rule in docs/ir.md).")]
        #[track_caller]
        pub fn $name(&mut self, a: Value) -> Value {
            self.op(Opcode::$op, &[a])
        }
    )*};
}

impl ProgramBuilder {
    /// Starts a program named `name` (without `@`).
    pub fn new(name: impl Into<String>) -> ProgramBuilder {
        let prog = Program::new(name);
        let cur = prog.body;
        ProgramBuilder {
            prog,
            cur,
            vars: Vec::new(),
            defs: Vec::new(),
            outputs: Vec::new(),
            callees: Module::new(),
        }
    }

    /// The program built so far (read-only).
    pub fn program(&self) -> &Program {
        &self.prog
    }

    #[track_caller]
    fn param(&mut self, kind: ParamKind, name: &str, ty: Type) -> Value {
        let v = self.prog.add_param(kind, name, ty);
        self.prog.set_value_loc(v, Loc::Rust(Location::caller()));
        v
    }

    /// Adds a varying input (one element per invocation) of scalar or tuple type `ty`.
    #[track_caller]
    pub fn varying(&mut self, name: &str, ty: Type) -> Value {
        self.param(ParamKind::Varying, name, ty)
    }

    /// Adds a uniform input (one value per launch).
    #[track_caller]
    pub fn uniform(&mut self, name: &str, ty: Type) -> Value {
        self.param(ParamKind::Uniform, name, ty)
    }

    /// Adds an array input of array type `ty` (read with [`ProgramBuilder::read`]).
    #[track_caller]
    pub fn array(&mut self, name: &str, ty: Type) -> Value {
        self.param(ParamKind::Array, name, ty)
    }

    /// Adds a buffer parameter of array type `ty` (kernels only: read and written in place
    /// with [`ProgramBuilder::effect`] `store` and the atomics).
    #[track_caller]
    pub fn buffer(&mut self, name: &str, ty: Type) -> Value {
        self.param(ParamKind::Buffer, name, ty)
    }

    /// Makes the program a kernel (DESIGN §2 kernel mode, docs/kernel-mode.md): launched
    /// over a grid of work-groups, with no outputs.
    pub fn make_kernel(&mut self) {
        self.prog.kind = crate::program::ProgramKind::Kernel;
    }

    /// Appends an op whose result type is `ty` (the kernel ids, `shared`, `clock`, …): the
    /// declared type where the op's type rule needs one.
    #[track_caller]
    pub fn op_typed(&mut self, opcode: Opcode, args: &[Value], ty: Type) -> Value {
        self.op_full(opcode, args, Imm::None, Some(ty))
    }

    /// Appends an op without results (`barrier`, `store`).
    #[track_caller]
    pub fn effect(&mut self, opcode: Opcode, args: &[Value]) {
        self.push(opcode, args.to_vec(), Imm::None, &[], vec![]);
    }

    /// Adds an output named `name` whose value is `v` (the body's `return` lists outputs in order).
    #[track_caller]
    pub fn output(&mut self, name: &str, v: Value) {
        let ty = self.prog.ty(v);
        self.prog.outputs.push(Output {
            name: Some(name.to_string()),
            ty,
        });
        self.outputs.push(v);
    }

    /// Gives value `v` a name hint for the printer.
    pub fn name(&mut self, v: Value, name: &str) {
        self.prog.value_mut(v).name = Some(name.to_string());
    }

    #[track_caller]
    fn push(
        &mut self,
        opcode: Opcode,
        args: Vec<Value>,
        imm: Imm,
        results: &[Type],
        regions: Vec<Region>,
    ) -> Op {
        let op = self.prog.new_op(opcode, args, imm, results, regions);
        self.prog.set_op_loc(op, Loc::Rust(Location::caller()));
        self.prog.append(self.cur, op);
        op
    }

    /// Appends a pure op whose result type follows from its operands. If the operands
    /// break the op's type rule, the op is still built (typed like its first operand) and
    /// [`ProgramBuilder::finish`] reports the error at the caller's line.
    #[track_caller]
    pub fn op(&mut self, opcode: Opcode, args: &[Value]) -> Value {
        self.op_full(opcode, args, Imm::None, None)
    }

    #[track_caller]
    fn op_full(
        &mut self,
        opcode: Opcode,
        args: &[Value],
        imm: Imm,
        declared: Option<Type>,
    ) -> Value {
        let tys: Vec<Type> = args.iter().map(|&a| self.prog.ty(a)).collect();
        let lanes: &[u8] = match &imm {
            Imm::Lanes(l) => l,
            _ => &[],
        };
        let ty = infer(opcode, &tys, lanes, declared)
            .ok()
            .or(declared)
            .or(tys.first().copied())
            .unwrap_or_else(Type::bool);
        let op = self.push(opcode, args.to_vec(), imm, &[ty], vec![]);
        self.prog.op(op).results[0]
    }

    /// Appends `const c`.
    #[track_caller]
    pub fn constant(&mut self, c: Const) -> Value {
        let op = self.push(Opcode::Const, vec![], Imm::Const(c), &[c.ty], vec![]);
        self.prog.op(op).results[0]
    }

    /// An f32 constant.
    #[track_caller]
    pub fn f32(&mut self, x: f32) -> Value {
        self.constant(Const::f32(x))
    }

    /// An i32 constant.
    #[track_caller]
    pub fn i32(&mut self, x: i32) -> Value {
        self.constant(Const::i32(x))
    }

    /// A bool constant.
    #[track_caller]
    pub fn bool(&mut self, x: bool) -> Value {
        self.constant(Const::bool(x))
    }

    binary!(add => Add, sub => Sub, mul => Mul, div => Div, rem => Rem, min => Min, max => Max,
        and => And, or => Or, xor => Xor, shl => Shl, shr => Shr,
        eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge,
        pow => Pow, atan2 => Atan2, dot => Dot, cross => Cross);
    unary!(neg => Neg, abs => Abs, not => Not, sqrt => Sqrt, rsqrt => Rsqrt, exp => Exp,
        exp2 => Exp2, log => Log, log2 => Log2, sin => Sin, cos => Cos, tan => Tan,
        floor => Floor, ceil => Ceil, round => Round, trunc => Trunc, length => Length,
        normalize => Normalize);

    /// Appends `fma a, b, c` (a*b+c, one rounding).
    #[track_caller]
    pub fn fma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.op(Opcode::Fma, &[a, b, c])
    }

    /// Appends `select c, a, b`.
    #[track_caller]
    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        self.op(Opcode::Select, &[c, a, b])
    }

    /// Appends a numeric conversion of `v` to `ty`.
    #[track_caller]
    pub fn cast(&mut self, v: Value, ty: Type) -> Value {
        self.op_full(Opcode::Cast, &[v], Imm::None, Some(ty))
    }

    /// Appends a bit reinterpretation of `v` as `ty`.
    #[track_caller]
    pub fn bitcast(&mut self, v: Value, ty: Type) -> Value {
        self.op_full(Opcode::Bitcast, &[v], Imm::None, Some(ty))
    }

    /// Builds a tuple from 2 to 4 scalars.
    #[track_caller]
    pub fn tuple(&mut self, lanes: &[Value]) -> Value {
        self.op(Opcode::Tuple, lanes)
    }

    /// Lane `lane` of tuple `t`.
    #[track_caller]
    pub fn extract(&mut self, t: Value, lane: u8) -> Value {
        self.op_full(Opcode::Extract, &[t], Imm::Lanes(vec![lane]), None)
    }

    /// Lanes `lanes` of `t`, in that order (one lane gives a scalar).
    #[track_caller]
    pub fn swizzle(&mut self, t: Value, lanes: &[u8]) -> Value {
        self.op_full(Opcode::Swizzle, &[t], Imm::Lanes(lanes.to_vec()), None)
    }

    /// `t` with lanes `lanes` replaced by the lanes of `v` (a writemask).
    #[track_caller]
    pub fn insert(&mut self, t: Value, v: Value, lanes: &[u8]) -> Value {
        self.op_full(Opcode::Insert, &[t, v], Imm::Lanes(lanes.to_vec()), None)
    }

    /// Reads array `a` at `coords` under its boundary mode.
    #[track_caller]
    pub fn read(&mut self, a: Value, coords: Value) -> Value {
        self.op(Opcode::Read, &[a, coords])
    }

    /// The extent of array `a` on each axis, as `ty` (i32/i64 lanes, one per axis).
    #[track_caller]
    pub fn extent(&mut self, a: Value, ty: Type) -> Value {
        self.op_full(Opcode::Extent, &[a], Imm::None, Some(ty))
    }

    /// This element's launch coordinates, as `ty` (i32/i64 lanes, one per launch axis).
    #[track_caller]
    pub fn index(&mut self, ty: Type) -> Value {
        self.op_full(Opcode::Index, &[], Imm::None, Some(ty))
    }

    /// The launch shape, as `ty`.
    #[track_caller]
    pub fn shape(&mut self, ty: Type) -> Value {
        self.op_full(Opcode::Shape, &[], Imm::None, Some(ty))
    }

    /// Calls `callee` (which must end up in the same module) with `args`; returns its outputs.
    #[track_caller]
    pub fn call(&mut self, callee: &Program, args: &[Value]) -> Vec<Value> {
        if self.callees.get(&callee.name).is_none() {
            self.callees.programs.push(callee.clone());
        }
        let outs: Vec<Type> = callee.outputs.iter().map(|o| o.ty).collect();
        let op = self.push(
            Opcode::Call,
            args.to_vec(),
            Imm::Callee(callee.name.clone()),
            &outs,
            vec![],
        );
        self.prog.op(op).results.clone()
    }

    // ---- variables ----

    /// Declares a mutable variable of type `ty` (its name becomes the values' name hint).
    pub fn declare_var(&mut self, name: &str, ty: Type) -> Variable {
        self.vars.push((ty, name.to_string()));
        // Variables declared inside a region are local to it: the definitions restored after
        // the region may be shorter than the variable list.
        self.defs.resize(self.vars.len(), None);
        Variable(self.vars.len() as u32 - 1)
    }

    /// Assigns `v` to variable `var` from here on.
    pub fn def_var(&mut self, var: Variable, v: Value) {
        if self.prog.value(v).name.is_none() {
            let name = self.vars[var.0 as usize].1.clone();
            self.prog.value_mut(v).name = Some(name);
        }
        let k = var.0 as usize;
        if self.defs.len() <= k {
            self.defs.resize(k + 1, None);
        }
        self.defs[k] = Some(v);
    }

    /// The current value of `var`. Using a variable never assigned gives an undefined value,
    /// which [`ProgramBuilder::finish`] reports at the caller's line.
    #[track_caller]
    pub fn use_var(&mut self, var: Variable) -> Value {
        match self.defs.get(var.0 as usize).copied().flatten() {
            Some(v) => v,
            None => {
                let ty = self.vars[var.0 as usize].0;
                let v = self.prog.new_value(ty, None, ValueDef::Undefined);
                self.prog.set_value_loc(v, Loc::Rust(Location::caller()));
                v
            }
        }
    }

    // ---- structured control flow ----

    fn in_region<T>(&mut self, r: Region, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = std::mem::replace(&mut self.cur, r);
        let t = f(self);
        self.cur = saved;
        t
    }

    fn yield_in(&mut self, r: Region, vals: Vec<Value>, loc: &'static Location<'static>) {
        let op = self
            .prog
            .new_op(Opcode::Yield, vals, Imm::None, &[], vec![]);
        self.prog.set_op_loc(op, Loc::Rust(loc));
        self.prog.append(r, op);
    }

    /// `if cond { then } else { els }`. Each closure returns the branch's explicit results
    /// (same types in both). Variables assigned in either branch get merged values after.
    #[track_caller]
    pub fn if_else(
        &mut self,
        cond: Value,
        then: impl FnOnce(&mut Self) -> Vec<Value>,
        els: impl FnOnce(&mut Self) -> Vec<Value>,
    ) -> Vec<Value> {
        let loc = Location::caller();
        let before = self.defs.clone();
        let (rt, re) = (self.prog.new_region(), self.prog.new_region());
        let mut ty_then = self.in_region(rt, then);
        let defs_then = std::mem::replace(&mut self.defs, before.clone());
        let mut ty_else = self.in_region(re, els);
        let defs_else = std::mem::replace(&mut self.defs, before.clone());
        let explicit = ty_then.len();
        let mut merged = Vec::new();
        // Only variables declared before the `if` can be merged (those declared in an arm are
        // local to it).
        for (k, &old) in before.iter().enumerate() {
            let (t, e) = (
                defs_then.get(k).copied().flatten(),
                defs_else.get(k).copied().flatten(),
            );
            if let (Some(a), Some(b)) = (t, e) {
                if t != old || e != old {
                    ty_then.push(a);
                    ty_else.push(b);
                    merged.push(k);
                }
            }
        }
        let types: Vec<Type> = ty_then.iter().map(|&v| self.prog.ty(v)).collect();
        self.yield_in(rt, ty_then, loc);
        self.yield_in(re, ty_else, loc);
        let op = self.push(Opcode::If, vec![cond], Imm::None, &types, vec![rt, re]);
        let results = self.prog.op(op).results.clone();
        for (i, &k) in merged.iter().enumerate() {
            self.def_var(Variable(k as u32), results[explicit + i]);
        }
        results[..explicit].to_vec()
    }

    /// `if cond { then }` with no explicit results (variables may be assigned).
    #[track_caller]
    pub fn if_(&mut self, cond: Value, then: impl FnOnce(&mut Self)) {
        self.if_else(
            cond,
            |b| {
                then(b);
                vec![]
            },
            |_| vec![],
        );
    }

    /// Live variables: (index, current value).
    fn live(&self) -> Vec<(usize, Value)> {
        self.defs
            .iter()
            .enumerate()
            .filter_map(|(k, d)| d.map(|v| (k, v)))
            .collect()
    }

    /// Adds one region argument per live variable and points the variables at them.
    fn carry_into(&mut self, r: Region, live: &[(usize, Value)]) -> Vec<Value> {
        live.iter()
            .map(|&(k, v)| {
                let ty = self.prog.ty(v);
                let name = Some(self.vars[k].1.clone());
                let a = self.prog.add_region_arg(r, ty, name);
                self.defs[k] = Some(a);
                a
            })
            .collect()
    }

    /// Removes the region arguments at positions `drop` (counted from `skip`), replacing their
    /// uses inside `r` with the matching outer values.
    fn prune(&mut self, r: Region, skip: usize, args: &[Value], keep: &[bool], outer: &[Value]) {
        for (i, &a) in args.iter().enumerate() {
            if !keep[i] {
                replace_uses(&mut self.prog, r, a, outer[i]);
            }
        }
        let mut new_args: Vec<Value> = self.prog.region(r).args[..skip].to_vec();
        new_args.extend(args.iter().zip(keep).filter(|(_, &k)| k).map(|(&a, _)| a));
        for (i, &a) in new_args.iter().enumerate() {
            self.prog.value_mut(a).def = ValueDef::RegionArg(r, i as u32);
        }
        self.prog.region_mut(r).args = new_args;
    }

    /// Counted loop `for i = lo; i < hi; i += step` (see docs/semantics.md). Variables
    /// assigned in the body are loop-carried.
    #[track_caller]
    pub fn for_range(
        &mut self,
        lo: Value,
        hi: Value,
        step: Value,
        body: impl FnOnce(&mut Self, Value),
    ) {
        let loc = Location::caller();
        let live = self.live();
        let before = self.defs.clone();
        let r = self.prog.new_region();
        let ity = self.prog.ty(lo);
        let iv = self.prog.add_region_arg(r, ity, Some("i".into()));
        let args = self.carry_into(r, &live);
        self.in_region(r, |b| body(b, iv));
        let after = std::mem::replace(&mut self.defs, before);
        let lc = LoopCarried::new(&live, &args, &after);
        self.prune(r, 1, &args, &lc.keep, &lc.outer);
        self.yield_in(r, lc.yields.clone(), loc);
        let mut opargs = vec![lo, hi, step];
        opargs.extend(lc.inits());
        let types: Vec<Type> = lc.inits().map(|v| self.prog.ty(v)).collect();
        let op = self.push(Opcode::For, opargs, Imm::None, &types, vec![r]);
        self.def_loop_results(op, &lc);
    }

    /// After a loop op: each carried variable takes the op's matching result.
    fn def_loop_results(&mut self, op: Op, lc: &LoopCarried) {
        let results = self.prog.op(op).results.clone();
        for (&(k, _), &res) in lc.carried.iter().zip(&results) {
            self.def_var(Variable(k as u32), res);
        }
    }

    /// `while cond { body }`. The condition closure sees the variables' current values;
    /// variables assigned in the body are loop-carried.
    #[track_caller]
    pub fn while_(&mut self, cond: impl FnOnce(&mut Self) -> Value, body: impl FnOnce(&mut Self)) {
        self.two_region_loop(Opcode::While, Location::caller(), cond, body);
    }

    /// `do { body } until cond`: the body runs at least once; the condition sees the
    /// variables' updated values; the loop ends when it is true.
    #[track_caller]
    pub fn do_until(
        &mut self,
        body: impl FnOnce(&mut Self),
        cond: impl FnOnce(&mut Self) -> Value,
    ) {
        self.two_region_loop(Opcode::DoUntil, Location::caller(), cond, body);
    }

    fn two_region_loop(
        &mut self,
        opcode: Opcode,
        loc: &'static Location<'static>,
        cond: impl FnOnce(&mut Self) -> Value,
        body: impl FnOnce(&mut Self),
    ) {
        let live = self.live();
        let before = self.defs.clone();
        let (rb, rc) = (self.prog.new_region(), self.prog.new_region());
        let body_args = self.carry_into(rb, &live);
        self.in_region(rb, body);
        let after = std::mem::replace(&mut self.defs, before.clone());
        let cond_args = self.carry_into(rc, &live);
        let c = self.in_region(rc, cond);
        self.defs = before;
        let lc = LoopCarried::new(&live, &body_args, &after);
        self.prune(rb, 0, &body_args, &lc.keep, &lc.outer);
        self.prune(rc, 0, &cond_args, &lc.keep, &lc.outer);
        self.yield_in(rb, lc.yields.clone(), loc);
        self.yield_in(rc, vec![c], loc);
        let inits: Vec<Value> = lc.inits().collect();
        let types: Vec<Type> = inits.iter().map(|&v| self.prog.ty(v)).collect();
        let regions = if opcode == Opcode::While {
            vec![rc, rb]
        } else {
            vec![rb, rc]
        };
        let op = self.prog.new_op(opcode, inits, Imm::None, &types, regions);
        self.prog.set_op_loc(op, Loc::Rust(loc));
        self.prog.append(self.cur, op);
        self.def_loop_results(op, &lc);
    }

    /// Ends the body with `return` of the outputs and verifies the program (calls are checked
    /// against the programs passed to [`ProgramBuilder::call`]). Errors are located at the
    /// Rust lines that built the offending ops.
    #[track_caller]
    pub fn finish(self) -> Result<Program, Errors> {
        self.finish_module()
            .map(|mut m| m.programs.pop().expect("program"))
    }

    /// Like [`ProgramBuilder::finish`], returning a module of the callees followed by the program.
    #[track_caller]
    pub fn finish_module(mut self) -> Result<Module, Errors> {
        let outs = std::mem::take(&mut self.outputs);
        let body = self.prog.body;
        let op = self
            .prog
            .new_op(Opcode::Return, outs, Imm::None, &[], vec![]);
        self.prog.set_op_loc(op, Loc::Rust(Location::caller()));
        self.prog.append(body, op);
        let mut m = self.callees;
        m.programs.retain(|p| p.name != self.prog.name);
        m.programs.push(self.prog);
        crate::verify::verify_module(&m)?;
        Ok(m)
    }
}

/// Which live variables a loop body assigned (those are loop-carried) and their values.
struct LoopCarried {
    /// Per live variable: carried (assigned in the body) or not.
    keep: Vec<bool>,
    /// Per live variable: its value before the loop.
    outer: Vec<Value>,
    /// Carried variables: (variable index, value before the loop).
    carried: Vec<(usize, Value)>,
    /// Carried variables' values at the end of the body.
    yields: Vec<Value>,
}

impl LoopCarried {
    /// `live`: variables live before the loop; `args`: their region arguments in the body;
    /// `after`: every variable's value at the end of the body.
    fn new(live: &[(usize, Value)], args: &[Value], after: &[Option<Value>]) -> LoopCarried {
        let keep: Vec<bool> = live
            .iter()
            .zip(args)
            .map(|(&(k, _), &a)| after[k] != Some(a))
            .collect();
        let carried: Vec<(usize, Value)> = live
            .iter()
            .zip(&keep)
            .filter(|(_, &k)| k)
            .map(|(&l, _)| l)
            .collect();
        LoopCarried {
            outer: live.iter().map(|&(_, v)| v).collect(),
            yields: carried.iter().filter_map(|&(k, _)| after[k]).collect(),
            keep,
            carried,
        }
    }

    /// The carried variables' initial values.
    fn inits(&self) -> impl Iterator<Item = Value> + '_ {
        self.carried.iter().map(|&(_, v)| v)
    }
}

/// Replaces every use of `from` by `to` in region `r` and the regions nested in it.
pub fn replace_uses(p: &mut Program, r: Region, from: Value, to: Value) {
    let mut stack = vec![r];
    while let Some(r) = stack.pop() {
        let ops = p.region(r).ops.clone();
        for op in ops {
            let d = p.op_mut(op);
            for a in &mut d.args {
                if *a == from {
                    *a = to;
                }
            }
            stack.extend(d.regions.iter().copied());
        }
    }
}
