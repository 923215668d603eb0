//! IR entities: modules of named programs; values, ops and regions in per-program arenas.

use crate::konst::Const;
use crate::opcode::Opcode;
use crate::types::Type;
use std::fmt;

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            /// The arena index.
            pub fn index(self) -> usize { self.0 as usize }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An SSA value of a program (parameter, op result or region argument).
    Value,
    "v"
);
entity!(
    /// An op of a program.
    Op,
    "op"
);
entity!(
    /// A region (ordered list of ops with arguments) of a program.
    Region,
    "r"
);

/// How a parameter receives its data at a launch (DESIGN §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// One element per invocation, streamed from an array of the launch shape.
    Varying,
    /// One value for the whole launch.
    Uniform,
    /// A random-access array read with `read` (type must be an array type).
    Array,
    /// A kernel's read-write global array (type an array type; text `buffer %a: array<…>`):
    /// read with `read`, written with `store` and atomics, updated in place by a launch.
    Buffer,
}

impl ParamKind {
    /// True for the kinds whose type is an array type (`Array`, `Buffer`).
    pub fn is_array(self) -> bool {
        matches!(self, ParamKind::Array | ParamKind::Buffer)
    }
}

/// What a program is (DESIGN §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ProgramKind {
    /// A map program: applied once per element of a launch shape, with outputs.
    #[default]
    Map,
    /// A kernel: run by a grid of work-groups of work-items (OpenCL/CUDA), no outputs; it
    /// writes through `buffer` parameters.
    Kernel,
}

/// Where a value is defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The n-th program parameter.
    Param(u32),
    /// The n-th result of an op.
    Result(Op, u32),
    /// The n-th argument of a region.
    RegionArg(Region, u32),
    /// Not defined (only while parsing, or after a builder misuse the verifier reports).
    Undefined,
}

/// A value's type, optional name hint and definition.
#[derive(Clone, Debug)]
pub struct ValueData {
    /// Its type.
    pub ty: Type,
    /// Name hint (printed as `%name` when unique, without the `%`).
    pub name: Option<String>,
    /// Its definition.
    pub def: ValueDef,
}

/// An op's non-value operand.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Imm {
    /// None.
    None,
    /// The literal of `const`.
    Const(Const),
    /// The lane list of `extract`, `insert`, `swizzle`.
    Lanes(Vec<u8>),
    /// The callee name of `call` (without `@`).
    Callee(String),
}

/// An op: opcode, value operands, immediate, results and owned regions.
///
/// Region conventions (arguments / what they yield):
/// - `if %c`: regions [then, else]; both yield the results.
/// - `for`: operands [lo, hi, step, inits...]; one region with args [i, carried...] yielding carried.
/// - `while`: operands [inits...]; regions [cond(carried) yields one bool, body(carried) yields carried].
/// - `do`: operands [inits...]; regions [body(carried) yields carried, until(carried) yields one bool].
#[derive(Clone, Debug)]
pub struct OpData {
    /// The opcode.
    pub opcode: Opcode,
    /// Value operands.
    pub args: Vec<Value>,
    /// Immediate operand.
    pub imm: Imm,
    /// Result values.
    pub results: Vec<Value>,
    /// Owned regions.
    pub regions: Vec<Region>,
}

/// A region: arguments and an ordered list of ops, the last of which is a terminator.
#[derive(Clone, Debug, Default)]
pub struct RegionData {
    /// Region arguments (loop induction variable and loop-carried values).
    pub args: Vec<Value>,
    /// Ops in order.
    pub ops: Vec<Op>,
}

/// A program parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// How it is bound at a launch.
    pub kind: ParamKind,
    /// The SSA value it defines (its name is the parameter's name).
    pub value: Value,
}

/// A program output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Optional name (the CLI's `--out NAME=...`); unnamed outputs are addressed by position.
    pub name: Option<String>,
    /// Its type (scalar or tuple).
    pub ty: Type,
}

/// A source location for diagnostics, kept in a side table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Loc {
    /// Unknown.
    #[default]
    None,
    /// A byte range in the parsed text.
    Span(u32, u32),
    /// The Rust call site that built it (builder methods are `#[track_caller]`).
    Rust(&'static std::panic::Location<'static>),
}

impl Loc {
    /// A byte span.
    pub fn span(r: std::ops::Range<usize>) -> Loc {
        Loc::Span(r.start as u32, r.end as u32)
    }
}

/// A named program: parameters, outputs, a body region and its arenas.
#[derive(Clone, Debug)]
pub struct Program {
    /// Name without the `@`.
    pub name: String,
    /// Map program or kernel.
    pub kind: ProgramKind,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// Outputs in order.
    pub outputs: Vec<Output>,
    /// The body region (no arguments; ends with `return`).
    pub body: Region,
    values: Vec<ValueData>,
    ops: Vec<OpData>,
    regions: Vec<RegionData>,
    /// Location of the program header.
    pub loc: Loc,
    value_locs: Vec<Loc>,
    op_locs: Vec<Loc>,
}

impl Program {
    /// An empty program (no parameters, outputs, or ops).
    pub fn new(name: impl Into<String>) -> Program {
        Program {
            name: name.into(),
            kind: ProgramKind::Map,
            params: Vec::new(),
            outputs: Vec::new(),
            body: Region(0),
            values: Vec::new(),
            ops: Vec::new(),
            regions: vec![RegionData::default()],
            loc: Loc::None,
            value_locs: Vec::new(),
            op_locs: Vec::new(),
        }
    }

    /// Creates a value (not yet attached to a definition unless `def` says so).
    pub fn new_value(&mut self, ty: Type, name: Option<String>, def: ValueDef) -> Value {
        self.values.push(ValueData { ty, name, def });
        self.value_locs.push(Loc::None);
        Value(self.values.len() as u32 - 1)
    }

    /// Adds a parameter and returns its value.
    pub fn add_param(&mut self, kind: ParamKind, name: impl Into<String>, ty: Type) -> Value {
        let v = self.new_value(
            ty,
            Some(name.into()),
            ValueDef::Param(self.params.len() as u32),
        );
        self.params.push(Param { kind, value: v });
        v
    }

    /// Creates an empty region (not yet owned by an op).
    pub fn new_region(&mut self) -> Region {
        self.regions.push(RegionData::default());
        Region(self.regions.len() as u32 - 1)
    }

    /// Appends an argument of type `ty` to region `r`.
    pub fn add_region_arg(&mut self, r: Region, ty: Type, name: Option<String>) -> Value {
        let n = self.regions[r.index()].args.len() as u32;
        let v = self.new_value(ty, name, ValueDef::RegionArg(r, n));
        self.regions[r.index()].args.push(v);
        v
    }

    /// Creates an op whose results are fresh values of `result_types`; not yet placed in a region.
    pub fn new_op(
        &mut self,
        opcode: Opcode,
        args: Vec<Value>,
        imm: Imm,
        result_types: &[Type],
        regions: Vec<Region>,
    ) -> Op {
        let results = result_types
            .iter()
            .map(|&t| self.new_value(t, None, ValueDef::Undefined))
            .collect();
        self.new_op_with_results(opcode, args, imm, results, regions)
    }

    /// Creates an op whose results are the given existing (so far undefined) values.
    pub fn new_op_with_results(
        &mut self,
        opcode: Opcode,
        args: Vec<Value>,
        imm: Imm,
        results: Vec<Value>,
        regions: Vec<Region>,
    ) -> Op {
        let op = Op(self.ops.len() as u32);
        for (i, &v) in results.iter().enumerate() {
            self.values[v.index()].def = ValueDef::Result(op, i as u32);
        }
        self.ops.push(OpData {
            opcode,
            args,
            imm,
            results,
            regions,
        });
        self.op_locs.push(Loc::None);
        op
    }

    /// Appends `op` to the end of region `r`.
    pub fn append(&mut self, r: Region, op: Op) {
        self.regions[r.index()].ops.push(op);
    }

    /// A value's data.
    pub fn value(&self, v: Value) -> &ValueData {
        &self.values[v.index()]
    }

    /// A value's data, mutably.
    pub fn value_mut(&mut self, v: Value) -> &mut ValueData {
        &mut self.values[v.index()]
    }

    /// A value's type.
    pub fn ty(&self, v: Value) -> Type {
        self.values[v.index()].ty
    }

    /// An op's data.
    pub fn op(&self, o: Op) -> &OpData {
        &self.ops[o.index()]
    }

    /// An op's data, mutably.
    pub fn op_mut(&mut self, o: Op) -> &mut OpData {
        &mut self.ops[o.index()]
    }

    /// A region's data.
    pub fn region(&self, r: Region) -> &RegionData {
        &self.regions[r.index()]
    }

    /// A region's data, mutably.
    pub fn region_mut(&mut self, r: Region) -> &mut RegionData {
        &mut self.regions[r.index()]
    }

    /// Number of values in the arena.
    pub fn num_values(&self) -> usize {
        self.values.len()
    }

    /// Number of ops in the arena (including any no longer placed in a region).
    pub fn num_ops(&self) -> usize {
        self.ops.len()
    }

    /// Number of regions in the arena.
    pub fn num_regions(&self) -> usize {
        self.regions.len()
    }

    /// Location of a value's definition.
    pub fn value_loc(&self, v: Value) -> Loc {
        self.value_locs.get(v.index()).copied().unwrap_or_default()
    }

    /// Sets the location of a value's definition.
    pub fn set_value_loc(&mut self, v: Value, loc: Loc) {
        self.value_locs[v.index()] = loc;
    }

    /// Location of an op.
    pub fn op_loc(&self, o: Op) -> Loc {
        self.op_locs.get(o.index()).copied().unwrap_or_default()
    }

    /// Sets the location of an op.
    pub fn set_op_loc(&mut self, o: Op, loc: Loc) {
        self.op_locs[o.index()] = loc;
    }

    /// Looks up a parameter by name.
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params
            .iter()
            .position(|p| self.value(p.value).name.as_deref() == Some(name))
    }

    /// A parameter's name.
    pub fn param_name(&self, i: usize) -> &str {
        self.value(self.params[i].value)
            .name
            .as_deref()
            .unwrap_or("")
    }

    /// An output's name: its given name, or its position as text.
    pub fn output_name(&self, i: usize) -> String {
        self.outputs[i]
            .name
            .clone()
            .unwrap_or_else(|| i.to_string())
    }

    /// Looks up an output by name or position.
    pub fn output_index(&self, name: &str) -> Option<usize> {
        (0..self.outputs.len()).find(|&i| self.output_name(i) == name)
    }

    /// Calls `f` on every op reachable from the body, parents before children, in order.
    pub fn walk(&self, f: &mut impl FnMut(Op)) {
        let mut stack = vec![(self.body, 0usize)];
        while let Some((r, i)) = stack.pop() {
            let ops = &self.regions[r.index()].ops;
            if let Some(&op) = ops.get(i) {
                stack.push((r, i + 1));
                f(op);
                for &child in self.ops[op.index()].regions.iter().rev() {
                    stack.push((child, 0));
                }
            }
        }
    }
}

/// A module: named programs that may call each other.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// The programs, in order.
    pub programs: Vec<Program>,
}

impl Module {
    /// An empty module.
    pub fn new() -> Module {
        Module::default()
    }

    /// Finds a program by name (without `@`).
    pub fn get(&self, name: &str) -> Option<&Program> {
        self.programs.iter().find(|p| p.name == name)
    }

    /// Index of a program by name.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.programs.iter().position(|p| p.name == name)
    }

    /// `p` and every program it calls, directly or not, each once (`p` first). Walks each
    /// program once, without recursion, so a call DAG of any depth and any number of paths
    /// costs time linear in its size.
    pub fn reachable<'a>(&'a self, p: &'a Program) -> Vec<&'a Program> {
        let mut seen = vec![false; self.programs.len()];
        let mut out = vec![p];
        let mut i = 0;
        while let Some(&q) = out.get(i) {
            i += 1;
            q.walk(&mut |op| {
                if let Imm::Callee(name) = &q.op(op).imm {
                    if let Some(k) = self.position(name) {
                        if !seen[k] && !std::ptr::eq(&self.programs[k], p) {
                            seen[k] = true;
                            out.push(&self.programs[k]);
                        }
                    }
                }
            });
        }
        out
    }

    /// True if `p` or a program it calls (directly or not) has an op whose opcode satisfies
    /// `f` ([`Module::reachable`]).
    pub fn reaches_op(&self, p: &Program, f: impl Fn(Opcode) -> bool) -> bool {
        self.reachable(p).into_iter().any(|q| {
            let mut found = false;
            q.walk(&mut |op| found |= f(q.op(op).opcode));
            found
        })
    }
}
