//! The op table: every opcode's mnemonic, family, operand syntax, type rule and effects,
//! declared once; printer, parser, verifier, builder and interpreter dispatch from it.

use crate::types::{ScalarType, Type, TypeKind};

macro_rules! opcodes {
    ($( $variant:ident = $mn:literal, $family:ident, $syntax:expr, $rule:ident, $doc:literal; )*) => {
        /// An IR operation code. See [`OpInfo`] and docs/ir.md for each op's rule.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode { $( #[doc = $doc] $variant, )* }

        /// The op table, one row per opcode, in declaration order.
        pub const OP_TABLE: &[OpInfo] = &[ $( OpInfo {
            opcode: Opcode::$variant, mnemonic: $mn, family: Family::$family,
            syntax: $syntax, rule: Rule::$rule, doc: $doc,
        }, )* ];
    };
}

/// The family an op belongs to (DESIGN §2), used for docs and coverage accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Constants.
    Constant,
    /// add sub mul div rem neg abs min max fma.
    Arithmetic,
    /// and or xor not shl shr.
    Bitwise,
    /// eq ne lt le gt ge.
    Comparison,
    /// select.
    Select,
    /// cast bitcast.
    Conversion,
    /// sqrt and the transcendental/rounding set.
    Math,
    /// tuple extract insert swizzle.
    Tuple,
    /// dot length normalize cross.
    Geometry,
    /// read extent.
    Array,
    /// index shape.
    Builtin,
    /// call.
    Call,
    /// if for while do yield return.
    Control,
    /// Kernel mode (DESIGN §2): work-item/work-group ids, `shared`, `barrier`, `store`,
    /// atomics and `clock`; only in `kernel` programs.
    Kernel,
}

/// How an op's operands are written in the text format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// Exactly n comma-separated value operands.
    Fixed(usize),
    /// Any number of comma-separated value operands.
    Variadic,
    /// `const LITERAL`.
    Const,
    /// n value operands then a lane list: `extract %t, [1]`, `insert %t, %v, [0, 2]`.
    FixedLanes(usize),
    /// `call @name(%a, ...)`.
    Call,
    /// A structured control-flow op with regions (`if`, `for`, `while`, `do`).
    Control,
}

/// The type rule of an op; see [`infer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Result type given by the literal.
    Const,
    /// Operands of one numeric type; result the same.
    Numeric,
    /// Operands of one signed-int or float type; result the same (abs/neg also accept unsigned).
    NumericUnary,
    /// Three operands of one float type.
    FloatTernary,
    /// Operands of one int or bool type.
    Bits,
    /// Operands of one int type (value, amount).
    Shift,
    /// Two operands of one type; result bool of the same lanes. `eq`/`ne` accept bool.
    Compare,
    /// Operands of one numeric type; result bool of the same lanes.
    Order,
    /// (cond: bool or `<N x bool>`, a, b).
    Select,
    /// Any scalar/tuple to the declared type of the same lane count.
    Cast,
    /// Same lane count and lane width, neither bool.
    Bitcast,
    /// Operands of one float type; result the same.
    Float,
    /// N scalars of one type make `<N x T>`.
    MakeTuple,
    /// One lane of a tuple.
    Extract,
    /// Several lanes of a scalar or tuple, in any order, repeats allowed.
    Swizzle,
    /// Replace the listed lanes of a tuple.
    Insert,
    /// Two float tuples of one type; result the scalar.
    Dot,
    /// One float tuple; result the scalar.
    Length,
    /// Two `<3 x float>`.
    Cross,
    /// (array, coordinates) -> element.
    Read,
    /// array -> its extent per axis, as i32/i64 (tuple of D lanes).
    Extent,
    /// No operands; result an i32/i64 scalar or tuple of 2/3 lanes.
    Launch,
    /// Checked against the callee's signature.
    Call,
    /// Checked by the verifier's region rules.
    Control,
    /// No operands; result `i32` or `<2|3 x i32>` (kernel ids and sizes).
    KernelId,
    /// `shared %n0[, %n1, %n2]`: constant i32 sizes; result the declared array type.
    Shared,
    /// No operands, no results.
    Barrier,
    /// (array, coordinates, value): no results.
    Store,
    /// (array, coordinates, value) -> the old element (integer scalars; `atomic_add` also f32).
    Atomic,
    /// (array, coordinates, expected, value) -> the old element (integer scalars).
    AtomicCas,
    /// No operands; result `u64`.
    Clock,
}

/// One row of the op table.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    /// The opcode.
    pub opcode: Opcode,
    /// Its text mnemonic.
    pub mnemonic: &'static str,
    /// Its family.
    pub family: Family,
    /// How its operands are written.
    pub syntax: Syntax,
    /// Its type rule.
    pub rule: Rule,
    /// One line of documentation.
    pub doc: &'static str,
}

opcodes! {
    Const = "const", Constant, Syntax::Const, Const, "A scalar or tuple constant.";
    Add = "add", Arithmetic, Syntax::Fixed(2), Numeric, "Addition (integers wrap).";
    Sub = "sub", Arithmetic, Syntax::Fixed(2), Numeric, "Subtraction (integers wrap).";
    Mul = "mul", Arithmetic, Syntax::Fixed(2), Numeric, "Multiplication (integers wrap).";
    Div = "div", Arithmetic, Syntax::Fixed(2), Numeric, "Division; integer x/0 = all ones, MIN/-1 = MIN.";
    Rem = "rem", Arithmetic, Syntax::Fixed(2), Numeric, "Remainder (sign of dividend); integer x%0 = x; float is fmod.";
    Neg = "neg", Arithmetic, Syntax::Fixed(1), NumericUnary, "Negation (integers wrap; floats flip the sign bit).";
    Abs = "abs", Arithmetic, Syntax::Fixed(1), NumericUnary, "Absolute value (abs(MIN) = MIN; floats clear the sign bit).";
    Min = "min", Arithmetic, Syntax::Fixed(2), Numeric, "Minimum; floats NaN-propagating with -0 < +0.";
    Max = "max", Arithmetic, Syntax::Fixed(2), Numeric, "Maximum; floats NaN-propagating with -0 < +0.";
    Fma = "fma", Arithmetic, Syntax::Fixed(3), FloatTernary, "Fused a*b+c with one rounding.";
    And = "and", Bitwise, Syntax::Fixed(2), Bits, "Bitwise/logical and.";
    Or = "or", Bitwise, Syntax::Fixed(2), Bits, "Bitwise/logical or.";
    Xor = "xor", Bitwise, Syntax::Fixed(2), Bits, "Bitwise/logical exclusive or.";
    Not = "not", Bitwise, Syntax::Fixed(1), Bits, "Bitwise/logical complement.";
    Shl = "shl", Bitwise, Syntax::Fixed(2), Shift, "Shift left; amount modulo the bit width.";
    Shr = "shr", Bitwise, Syntax::Fixed(2), Shift, "Shift right (arithmetic if signed, logical if unsigned); amount modulo the bit width.";
    Eq = "eq", Comparison, Syntax::Fixed(2), Compare, "Equal (floats: ordered, NaN != anything).";
    Ne = "ne", Comparison, Syntax::Fixed(2), Compare, "Not equal (floats: true if either is NaN).";
    Lt = "lt", Comparison, Syntax::Fixed(2), Order, "Less than (floats ordered; signedness from the type).";
    Le = "le", Comparison, Syntax::Fixed(2), Order, "Less or equal.";
    Gt = "gt", Comparison, Syntax::Fixed(2), Order, "Greater than.";
    Ge = "ge", Comparison, Syntax::Fixed(2), Order, "Greater or equal.";
    Select = "select", Select, Syntax::Fixed(3), Select, "select c, a, b: a where c, else b (per lane for a bool tuple).";
    Cast = "cast", Conversion, Syntax::Fixed(1), Cast, "Numeric conversion: ints wrap, float->int saturates (NaN->0), rounding to nearest even.";
    Bitcast = "bitcast", Conversion, Syntax::Fixed(1), Bitcast, "Reinterpret the bits of each lane.";
    Sqrt = "sqrt", Math, Syntax::Fixed(1), Float, "Square root (correctly rounded).";
    Rsqrt = "rsqrt", Math, Syntax::Fixed(1), Float, "1/sqrt(x).";
    Exp = "exp", Math, Syntax::Fixed(1), Float, "e^x.";
    Exp2 = "exp2", Math, Syntax::Fixed(1), Float, "2^x.";
    Log = "log", Math, Syntax::Fixed(1), Float, "Natural logarithm.";
    Log2 = "log2", Math, Syntax::Fixed(1), Float, "Base-2 logarithm.";
    Sin = "sin", Math, Syntax::Fixed(1), Float, "Sine (radians).";
    Cos = "cos", Math, Syntax::Fixed(1), Float, "Cosine (radians).";
    Tan = "tan", Math, Syntax::Fixed(1), Float, "Tangent (radians).";
    Pow = "pow", Math, Syntax::Fixed(2), Float, "x^y per C99 pow.";
    Atan2 = "atan2", Math, Syntax::Fixed(2), Float, "atan2(y, x) per C99.";
    Floor = "floor", Math, Syntax::Fixed(1), Float, "Round toward -inf.";
    Ceil = "ceil", Math, Syntax::Fixed(1), Float, "Round toward +inf.";
    Round = "round", Math, Syntax::Fixed(1), Float, "Round to nearest, ties away from zero (C99 round).";
    Trunc = "trunc", Math, Syntax::Fixed(1), Float, "Round toward zero.";
    Tuple = "tuple", Tuple, Syntax::Variadic, MakeTuple, "Build `<N x T>` from N scalars.";
    Extract = "extract", Tuple, Syntax::FixedLanes(1), Extract, "One lane of a tuple: `extract %t, [i]`.";
    Insert = "insert", Tuple, Syntax::FixedLanes(2), Insert, "Replace lanes (writemask): insert %t, %v, [i, j].";
    Swizzle = "swizzle", Tuple, Syntax::FixedLanes(1), Swizzle, "Pick lanes in any order: swizzle %t, [2, 1, 0].";
    Dot = "dot", Geometry, Syntax::Fixed(2), Dot, "Dot product, summed left to right, no fusion.";
    Length = "length", Geometry, Syntax::Fixed(1), Length, "sqrt(dot(a, a)).";
    Normalize = "normalize", Geometry, Syntax::Fixed(1), Float, "a / length(a), lane by lane.";
    Cross = "cross", Geometry, Syntax::Fixed(2), Cross, "Cross product of two <3 x float>.";
    Read = "read", Array, Syntax::Fixed(2), Read, "Gather: read %array, %coords under the array's boundary mode.";
    ReadOffset = "read_offset", Array, Syntax::Fixed(2), Read, "read_offset %array, %off: the element at `index + %off` (%off uniform, one lane per axis), known in range: a partitioned launch's interior (passes::partition); no boundary handling; out of range is an error in the interpreter.";
    Extent = "extent", Array, Syntax::Fixed(1), Extent, "An array's size on each axis.";
    Index = "index", Builtin, Syntax::Fixed(0), Launch, "This element's coordinates in the launch.";
    Shape = "shape", Builtin, Syntax::Fixed(0), Launch, "The launch shape.";
    LocalId = "local_id", Kernel, Syntax::Fixed(0), KernelId, "This work-item's id within its work-group (x fastest), i32 or <2|3 x i32>.";
    GroupId = "group_id", Kernel, Syntax::Fixed(0), KernelId, "This work-group's id within the grid.";
    LocalSize = "local_size", Kernel, Syntax::Fixed(0), KernelId, "Work-items per work-group on each axis.";
    NumGroups = "num_groups", Kernel, Syntax::Fixed(0), KernelId, "Work-groups in the grid on each axis.";
    Shared = "shared", Kernel, Syntax::Variadic, Shared, "Group-shared array of constant size: %s: array<1 x f32> = shared %n (contents undefined until stored).";
    Barrier = "barrier", Kernel, Syntax::Fixed(0), Barrier, "Work-group barrier: waits for every work-item of the group; orders memory.";
    Store = "store", Kernel, Syntax::Fixed(3), Store, "store %a, %coords, %v into a buffer or shared array; out-of-range stores do nothing.";
    AtomicAdd = "atomic_add", Kernel, Syntax::Fixed(3), Atomic, "Atomic add (ints wrap; f32 and f64 round); gives the old element (0 out of range, no effect).";
    AtomicMin = "atomic_min", Kernel, Syntax::Fixed(3), Atomic, "Atomic minimum of an integer element; gives the old element.";
    AtomicMax = "atomic_max", Kernel, Syntax::Fixed(3), Atomic, "Atomic maximum of an integer element; gives the old element.";
    AtomicXchg = "atomic_xchg", Kernel, Syntax::Fixed(3), Atomic, "Atomic exchange of an integer element; gives the old element.";
    AtomicCas = "atomic_cas", Kernel, Syntax::Fixed(4), AtomicCas, "atomic_cas %a, %c, %expected, %v: store %v if the element equals %expected; gives the old element.";
    Clock = "clock", Kernel, Syntax::Fixed(0), Clock, "A u64 tick count (nondeterministic; never compared by tests).";
    Call = "call", Call, Syntax::Call, Call, "Call a program of the same module: call @p(%a, ...).";
    If = "if", Control, Syntax::Control, Control, "if %c { ... yield } else { ... yield }, with results.";
    For = "for", Control, Syntax::Control, Control, "Counted loop with loop-carried values.";
    While = "while", Control, Syntax::Control, Control, "while loop: condition region, then body region.";
    DoUntil = "do", Control, Syntax::Control, Control, "do { body } until { condition }: body runs at least once.";
    Yield = "yield", Control, Syntax::Variadic, Control, "Ends a region, passing its values on.";
    Return = "return", Control, Syntax::Variadic, Control, "Ends a program body with its outputs.";
}

impl Opcode {
    /// This opcode's row of the op table.
    pub fn info(self) -> &'static OpInfo {
        &OP_TABLE[self as usize]
    }

    /// The text mnemonic.
    pub fn mnemonic(self) -> &'static str {
        self.info().mnemonic
    }

    /// Looks up an opcode by mnemonic.
    pub fn from_mnemonic(s: &str) -> Option<Opcode> {
        OP_TABLE.iter().find(|i| i.mnemonic == s).map(|i| i.opcode)
    }

    /// True for ops whose value depends on the element's launch coordinates: `index` and
    /// `read_offset` (which reads at `index` plus an offset).
    pub fn reads_index(self) -> bool {
        matches!(self, Opcode::Index | Opcode::ReadOffset)
    }

    /// True for `yield` and `return`.
    pub fn is_terminator(self) -> bool {
        matches!(self, Opcode::Yield | Opcode::Return)
    }

    /// True for ops with effects beyond their results (`barrier`, `store`, atomics, `clock`):
    /// never removed, moved or merged by passes.
    pub fn has_effects(self) -> bool {
        matches!(
            self,
            Opcode::Barrier
                | Opcode::Store
                | Opcode::AtomicAdd
                | Opcode::AtomicMin
                | Opcode::AtomicMax
                | Opcode::AtomicXchg
                | Opcode::AtomicCas
                | Opcode::Clock
        )
    }

    /// True for the ops only kernels may use (the [`Family::Kernel`] family).
    pub fn is_kernel_only(self) -> bool {
        self.info().family == Family::Kernel
    }

    /// True for ops that own regions.
    pub fn has_regions(self) -> bool {
        matches!(
            self,
            Opcode::If | Opcode::For | Opcode::While | Opcode::DoUntil
        )
    }
}

/// The result type of a pure (non-control, non-call) op from its operand types.
///
/// `lanes` is the op's lane list (extract/insert/swizzle), `declared` the result type
/// written in the text or asked for by the builder (needed by `const`, `cast`, `bitcast`,
/// `index` and `shape`, where the operands do not determine it).
/// Errors are messages naming the rule broken.
pub fn infer(
    op: Opcode,
    args: &[Type],
    lanes: &[u8],
    declared: Option<Type>,
) -> Result<Type, String> {
    let rule = op.info().rule;
    let mn = op.mnemonic();
    if let Syntax::Fixed(n) | Syntax::FixedLanes(n) = op.info().syntax {
        if args.len() != n {
            return Err(format!("`{mn}` takes {n} operand(s), got {}", args.len()));
        }
    }
    for (i, t) in args.iter().enumerate() {
        let array_ok = matches!(
            rule,
            Rule::Read | Rule::Extent | Rule::Store | Rule::Atomic | Rule::AtomicCas
        ) && i == 0;
        if t.is_array() && !array_ok {
            return Err(format!(
                "`{mn}` operand {} is an array ({t}); arrays are only read",
                i + 1
            ));
        }
    }
    let same = |what: &str, ok: &dyn Fn(ScalarType) -> bool| -> Result<Type, String> {
        let t = args[0];
        if let Some(u) = args.iter().find(|u| **u != t) {
            return Err(format!(
                "`{mn}` operands must have one type, got {t} and {u}"
            ));
        }
        if !ok(t.elem_scalar()) {
            return Err(format!("`{mn}` needs {what} operands, got {t}"));
        }
        Ok(t)
    };
    let need_declared = || declared.ok_or_else(|| format!("`{mn}` needs an explicit result type"));
    match rule {
        Rule::Const => need_declared(),
        Rule::Numeric => same("numeric", &|s| s.is_numeric()),
        Rule::NumericUnary => same("numeric", &|s| s.is_numeric()),
        Rule::FloatTernary | Rule::Float => same("float", &|s| s.is_float()),
        Rule::Bits => same("integer or bool", &|s| !s.is_float()),
        Rule::Shift => same("integer", &|s| s.is_int()),
        Rule::Compare => same("scalar or tuple", &|_| true).map(|t| t.with_elem(ScalarType::Bool)),
        Rule::Order => same("numeric", &|s| s.is_numeric()).map(|t| t.with_elem(ScalarType::Bool)),
        Rule::Select => {
            let (c, a, b) = (args[0], args[1], args[2]);
            if a != b {
                return Err(format!("`select` arms must have one type, got {a} and {b}"));
            }
            let (cs, cn) = c.lanes().unwrap_or((ScalarType::F32, 0));
            let (_, an) = a.lanes().unwrap_or((ScalarType::F32, 0));
            if cs != ScalarType::Bool || (cn != 1 && cn != an) {
                return Err(format!(
                    "`select` condition must be bool or <{an} x bool>, got {c}"
                ));
            }
            Ok(a)
        }
        Rule::Cast | Rule::Bitcast => {
            let to = need_declared()?;
            let (fs, fnl) = args[0].lanes().ok_or("cast of an array")?;
            let (ts, tnl) = to
                .lanes()
                .ok_or_else(|| format!("`{mn}` result must be a scalar or tuple, got {to}"))?;
            if fnl != tnl {
                return Err(format!("`{mn}` keeps the lane count: {} to {to}", args[0]));
            }
            if rule == Rule::Bitcast
                && (fs.bits() != ts.bits() || fs == ScalarType::Bool || ts == ScalarType::Bool)
            {
                return Err(format!(
                    "`bitcast` needs lanes of one width, not bool: {} to {to}",
                    args[0]
                ));
            }
            Ok(to)
        }
        Rule::MakeTuple => {
            if !(2..=4).contains(&args.len()) {
                return Err(format!("`tuple` takes 2 to 4 operands, got {}", args.len()));
            }
            let t = same("scalar", &|_| true)?;
            match t.kind() {
                TypeKind::Scalar(s) => Ok(Type::tuple(s, args.len() as u8).expect("2..=4")),
                _ => Err(format!("`tuple` operands must be scalars, got {t}")),
            }
        }
        Rule::Extract | Rule::Swizzle | Rule::Insert => {
            let (s, n) = args[0].lanes().ok_or("array operand")?;
            if n == 1 && rule != Rule::Swizzle {
                return Err(format!("`{mn}` needs a tuple, got {}", args[0]));
            }
            if let Some(&l) = lanes.iter().find(|&&l| l >= n) {
                return Err(format!("lane {l} out of range for {}", args[0]));
            }
            match rule {
                Rule::Extract if lanes.len() != 1 => Err("`extract` takes one lane".into()),
                Rule::Extract => Ok(Type::scalar(s)),
                Rule::Swizzle => Type::tuple(s, lanes.len() as u8)
                    .filter(|_| !lanes.is_empty())
                    .ok_or_else(|| format!("`swizzle` takes 1 to 4 lanes, got {}", lanes.len())),
                _ => {
                    let want = Type::tuple(s, lanes.len() as u8)
                        .filter(|_| !lanes.is_empty())
                        .ok_or("`insert` takes 1 to 4 lanes")?;
                    if args[1] != want {
                        return Err(format!(
                            "`insert` of {} lane(s) into {} needs a {want} value, got {}",
                            lanes.len(),
                            args[0],
                            args[1]
                        ));
                    }
                    let mut seen = [false; 4];
                    for &l in lanes {
                        if std::mem::replace(&mut seen[l as usize], true) {
                            return Err(format!("`insert` lists lane {l} twice"));
                        }
                    }
                    Ok(args[0])
                }
            }
        }
        Rule::Dot | Rule::Length => {
            let t = same("float", &|s| s.is_float())?;
            match t.kind() {
                TypeKind::Tuple(s, _) => Ok(Type::scalar(s)),
                _ => Err(format!("`{mn}` needs a float tuple, got {t}")),
            }
        }
        Rule::Cross => {
            let t = same("float", &|s| s.is_float())?;
            match t.kind() {
                TypeKind::Tuple(_, 3) => Ok(t),
                _ => Err(format!("`cross` needs <3 x float> operands, got {t}")),
            }
        }
        Rule::Read => {
            let (dims, elem, _) = args[0]
                .array_parts()
                .ok_or_else(|| format!("`read` needs an array, got {}", args[0]))?;
            match args[1].lanes() {
                Some((ScalarType::I32 | ScalarType::I64, n)) if n == dims => Ok(elem),
                _ => Err(format!(
                    "`read` of a {dims}-D array needs {}, got {}",
                    coord_desc(dims),
                    args[1]
                )),
            }
        }
        Rule::Extent => {
            let (dims, _, _) = args[0]
                .array_parts()
                .ok_or_else(|| format!("`extent` needs an array, got {}", args[0]))?;
            let to = need_declared()?;
            check_coord_type(mn, to, Some(dims))
        }
        Rule::Launch => check_coord_type(mn, need_declared()?, None),
        Rule::KernelId => {
            let t = need_declared()?;
            match t.lanes() {
                Some((ScalarType::I32, _)) => Ok(t),
                _ => Err(format!(
                    "`{mn}` result must be i32, <2 x i32> or <3 x i32>, got {t}"
                )),
            }
        }
        Rule::Shared => {
            let t = need_declared()?;
            let (dims, _, _) = t
                .array_parts()
                .ok_or_else(|| format!("`shared` result must be an array type, got {t}"))?;
            if args.len() != dims as usize || args.iter().any(|&a| a != Type::i32()) {
                return Err(format!(
                    "`shared` of a {dims}-D array takes {dims} i32 size(s), got ({})",
                    args.iter()
                        .map(Type::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok(t)
        }
        Rule::Clock => Ok(Type::scalar(ScalarType::U64)),
        Rule::Atomic | Rule::AtomicCas => {
            let elem = access_elem(op, args)?;
            let s = elem.elem_scalar();
            let int = elem.lanes().is_some_and(|(_, n)| n == 1)
                && matches!(
                    s,
                    ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64
                );
            let float_add = op == Opcode::AtomicAdd
                && (elem == Type::f32() || elem == Type::scalar(ScalarType::F64));
            if !(int || float_add) {
                return Err(format!(
                    "`{mn}` works on i32, u32, i64 or u64 elements{}, got {elem}",
                    if op == Opcode::AtomicAdd {
                        " (and f32, f64)"
                    } else {
                        ""
                    }
                ));
            }
            Ok(elem)
        }
        Rule::Store => Err(format!("`{mn}` has no result")),
        Rule::Barrier => Err(format!("`{mn}` has no result")),
        Rule::Call | Rule::Control => Err(format!("`{mn}` is typed by the verifier")),
    }
}

/// Checks an op without results (`barrier`, `store`) against its operand types.
pub fn check_no_result(op: Opcode, args: &[Type]) -> Result<(), String> {
    let mn = op.mnemonic();
    match op.info().rule {
        Rule::Barrier if args.is_empty() => Ok(()),
        Rule::Barrier => Err(format!("`{mn}` takes no operands")),
        Rule::Store if args.len() == 3 => access_elem(op, args).map(|_| ()),
        Rule::Store => Err(format!("`{mn}` takes 3 operands, got {}", args.len())),
        _ => Err(format!("`{mn}` has one result, got none")),
    }
}

/// The element type of a `store` or atomic's array operand, after checking its coordinates
/// and that every value operand has that type.
fn access_elem(op: Opcode, args: &[Type]) -> Result<Type, String> {
    let mn = op.mnemonic();
    let (dims, elem, _) = args[0]
        .array_parts()
        .ok_or_else(|| format!("`{mn}` needs an array, got {}", args[0]))?;
    match args[1].lanes() {
        Some((ScalarType::I32 | ScalarType::I64, n)) if n == dims => {}
        _ => {
            return Err(format!(
                "`{mn}` on a {dims}-D array needs {}, got {}",
                coord_desc(dims),
                args[1]
            ))
        }
    }
    for (k, &t) in args[2..].iter().enumerate() {
        if t != elem {
            return Err(format!(
                "`{mn}` operand {} must be the element type {elem}, got {t}",
                k + 3
            ));
        }
    }
    Ok(elem)
}

fn coord_desc(dims: u8) -> String {
    if dims == 1 {
        "an i32 or i64 coordinate".into()
    } else {
        format!("<{dims} x i32> or <{dims} x i64> coordinates")
    }
}

/// Checks an index/shape/extent type: i32 or i64 lanes, 1..=3 of them (exactly `dims` if given).
fn check_coord_type(mn: &str, t: Type, dims: Option<u8>) -> Result<Type, String> {
    match t.lanes() {
        Some((ScalarType::I32 | ScalarType::I64, n)) if n <= 3 && dims.is_none_or(|d| d == n) => {
            Ok(t)
        }
        _ => Err(format!(
            "`{mn}` result must be {}, got {t}",
            dims.map_or("i32/i64 with 1 to 3 lanes".into(), |d| match d {
                1 => "i32 or i64".into(),
                d => format!("<{d} x i32> or <{d} x i64>"),
            })
        )),
    }
}
