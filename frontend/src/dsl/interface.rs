//! A recorded program's interface (RapidMind's `In<>`, `Out<>`, `InOut<>` declarations;
//! DESIGN §2 parameter kinds): varying inputs, outputs, inputs that are also outputs, open
//! uniform inputs, random-access array inputs, and the `index`/`shape` builtins.

use super::record::{OutDecl, Raw, Top};
use super::value::{AsValue, IntoValue, Value, ValueType};
use crate::error::Error;
use crate::scalar::Scalar;
use std::marker::PhantomData;
use std::panic::Location;
use weft_ir::{Boundary, Opcode, ParamKind, Type};

/// Adds a parameter of `kind` named `name` (or a default name from `prefix` and its
/// position) to the innermost recording; returns its SSA value.
#[track_caller]
pub(crate) fn add_param(
    rec: &mut Top,
    kind: ParamKind,
    name: Option<&str>,
    prefix: &str,
    ty: Type,
) -> Result<weft_ir::Value, Error> {
    let name = match name {
        Some(n) => n.to_string(),
        None => {
            let mut k = rec.b().program().params.len();
            loop {
                let n = format!("{prefix}{k}");
                if !rec.param_names.contains(&n) {
                    break n;
                }
                k += 1;
            }
        }
    };
    // Not `map_err(Error::record)`: through a function pointer `#[track_caller]` sees the
    // standard library's line, not the user's.
    let location = Location::caller();
    rec.check_name(&name, "input")
        .map_err(|message| Error::Record { message, location })?;
    rec.param_names.insert(name.clone());
    let b = rec.b();
    Ok(match kind {
        ParamKind::Varying => b.varying(&name, ty),
        ParamKind::Uniform => b.uniform(&name, ty),
        ParamKind::Array => b.array(&name, ty),
        ParamKind::Buffer => b.buffer(&name, ty),
    })
}

/// A scalar or tuple input parameter of `kind` as a value (a poisoned value outside
/// recording, or a recorded error and a zero on misuse).
#[track_caller]
fn value_param<V: ValueType>(kind: ParamKind, name: Option<&str>, what: &str) -> V {
    let loc = Location::caller();
    let Some(mut rec) = Top::take() else {
        return V::from_raw(Raw::poison(
            format!("{what} is used outside Program::record: inputs exist only while recording"),
            loc,
        ));
    };
    let raw = match add_param(&mut rec, kind, name, "in", V::ir_type()) {
        Ok(v) => rec.new_raw(v),
        Err(e) => {
            rec.fail(e);
            rec.dummy(V::ir_type())
        }
    };
    V::from_raw(raw)
}

/// A varying input (DESIGN §2: one element per invocation, streamed from an array of the
/// launch shape): RapidMind's `In<Value3f> x;`.
///
/// `In::<Value3f>::new()` adds the input to the program being recorded and returns it as
/// a value; inputs come in the order they are declared. Outside recording the returned
/// value carries an error.
pub struct In<V>(PhantomData<V>);

impl<V: ValueType> In<V> {
    /// A new varying input named `in{k}` (k = its position).
    #[track_caller]
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> V {
        value_param::<V>(ParamKind::Varying, None, "In::new")
    }

    /// A new varying input named `name` (an identifier, unique among the inputs; used by
    /// `bind` and the CLI's `--in`).
    #[track_caller]
    pub fn named(name: &str) -> V {
        value_param::<V>(ParamKind::Varying, Some(name), "In::named")
    }
}

/// Open uniform inputs (DESIGN §2: one value per launch), supplied at each apply: Sh's
/// uniform parameters. For a uniform that tracks a host variable, use
/// [`Uniform`](super::Uniform) instead.
pub struct Param;

impl Param {
    /// A new open uniform input named `name`, e.g. `Param::uniform::<Value1f>("dt")`; it is
    /// one of the program's [`open_inputs`](super::Program::open_inputs).
    #[track_caller]
    pub fn uniform<V: ValueType>(name: &str) -> V {
        value_param::<V>(ParamKind::Uniform, Some(name), "Param::uniform")
    }
}

/// A declared output (RapidMind's `Out<Value1f> r;`), given its value later with
/// [`Out::assign`] — once or several times, also inside `if_` arms and loops (an output is
/// a variable; its value at the end of recording is the output). Outputs come in the
/// order they are declared.
///
/// Recording fails, naming the line of the declaration, if an output is never assigned or
/// is assigned on some paths only (one arm of an `if_`, only inside a loop). Outputs must
/// be declared outside control-flow regions. Outside recording an `Out` does nothing.
pub struct Out<V> {
    ctx: u64,
    idx: usize,
    _v: PhantomData<V>,
}

impl<V: ValueType> Out<V> {
    /// A new unnamed output (addressed by position).
    #[track_caller]
    pub fn new() -> Out<V> {
        Out::declare(None)
    }

    /// A new output named `name` (an identifier, used by `keep`/`drop` and `--out`).
    #[track_caller]
    pub fn new_named(name: &str) -> Out<V> {
        Out::declare(Some(name))
    }

    #[track_caller]
    fn declare(name: Option<&str>) -> Out<V> {
        let location = Location::caller();
        let inert = Out {
            ctx: 0,
            idx: 0,
            _v: PhantomData,
        };
        let Some(mut rec) = Top::take() else {
            return inert;
        };
        if let Some(n) = name {
            if let Err(m) = rec.check_name(n, "output") {
                rec.fail(Error::record(m));
                return inert;
            }
            if rec.outs.iter().any(|o| o.name.as_deref() == Some(n)) {
                rec.fail(Error::record(format!(
                    "an output named `{n}` is already declared"
                )));
                return inert;
            }
        }
        if !rec.at_top_level() {
            rec.fail(Error::record(
                "outputs must be declared outside if_/for_/while_/do_until regions",
            ));
            return inert;
        }
        let var = rec.new_undefined_var(V::ir_type());
        rec.outs.push(OutDecl {
            name: name.map(str::to_string),
            ty: V::ir_type(),
            var,
            assigned: false,
            definite: false,
            has_def: false,
            location,
        });
        Out {
            ctx: rec.id,
            idx: rec.outs.len() - 1,
            _v: PhantomData,
        }
    }
}

impl<V: ValueType> Default for Out<V> {
    /// [`Out::new`].
    #[track_caller]
    fn default() -> Self {
        Out::new()
    }
}

impl<T: Scalar, const N: usize> Out<Value<T, N>> {
    /// A new output named `name` with value `v` (shorthand for `new_named` + `assign`).
    #[track_caller]
    pub fn named(name: &str, v: impl AsValue<T, N>) -> Self {
        let o = Out::new_named(name);
        o.assign(v);
        o
    }

    /// A new unnamed output with value `v` (RapidMind's `Out<…> r = v;`).
    #[track_caller]
    #[allow(clippy::should_implement_trait)]
    pub fn from(v: impl AsValue<T, N>) -> Self {
        let o = Out::new();
        o.assign(v);
        o
    }

    /// Sets the output's value to `v` (from here on; a later `assign` replaces it).
    #[track_caller]
    pub fn assign(&self, v: impl IntoValue<T, N>) {
        let src = v.into_operand();
        let Some(mut rec) = Top::take() else {
            return;
        };
        if self.ctx == 0 {
            return;
        }
        if rec.id != self.ctx {
            rec.fail(Error::record(
                "this Out belongs to another program's recording",
            ));
            return;
        }
        match rec.value_of(&src) {
            Ok(v) => {
                let var = rec.outs[self.idx].var;
                rec.b().def_var(var, v);
                let o = &mut rec.outs[self.idx];
                o.assigned = true;
                o.definite = true;
                o.has_def = true;
            }
            Err(e) => rec.fail(e),
        }
    }
}

impl<T: Scalar, const N: usize> From<Value<T, N>> for Out<Value<T, N>> {
    /// A new unnamed output with value `v`.
    #[track_caller]
    fn from(v: Value<T, N>) -> Self {
        let o = Out::new();
        o.assign(v);
        o
    }
}

impl<T: Scalar, const N: usize> From<&Value<T, N>> for Out<Value<T, N>> {
    /// A new unnamed output with the current value of `v`.
    #[track_caller]
    fn from(v: &Value<T, N>) -> Self {
        let o = Out::new();
        o.assign(v);
        o
    }
}

/// A varying input that is also an output (RapidMind's `InOut<Value3f> p;`): the value
/// returned is the input; assign to it (`p += v * dt`), and its value at the end of
/// recording is the output. The output has the input's name.
pub struct InOut<V>(PhantomData<V>);

impl<V: ValueType> InOut<V> {
    /// A new input/output named `in{k}` (its output is unnamed).
    #[track_caller]
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> V {
        InOut::<V>::declare(None)
    }

    /// A new input/output named `name` (input and output both).
    #[track_caller]
    pub fn named(name: &str) -> V {
        InOut::<V>::declare(Some(name))
    }

    #[track_caller]
    fn declare(name: Option<&str>) -> V {
        let location = Location::caller();
        let Some(mut rec) = Top::take() else {
            return V::from_raw(Raw::poison(
                "InOut is used outside Program::record: inputs exist only while recording",
                location,
            ));
        };
        if !rec.at_top_level() {
            rec.fail(Error::record(
                "InOut values must be declared outside if_/for_/while_/do_until regions",
            ));
            return V::from_raw(rec.dummy(V::ir_type()));
        }
        if let Some(n) = name {
            if rec.outs.iter().any(|o| o.name.as_deref() == Some(n)) {
                rec.fail(Error::record(format!(
                    "an output named `{n}` is already declared"
                )));
                return V::from_raw(rec.dummy(V::ir_type()));
            }
        }
        let p = match add_param(&mut rec, ParamKind::Varying, name, "in", V::ir_type()) {
            Ok(p) => p,
            Err(e) => {
                rec.fail(e);
                return V::from_raw(rec.dummy(V::ir_type()));
            }
        };
        let var = rec.new_undefined_var(V::ir_type());
        rec.b().def_var(var, p);
        rec.outs.push(OutDecl {
            name: name.map(str::to_string),
            ty: V::ir_type(),
            var,
            assigned: true,
            definite: true,
            has_def: true,
            location,
        });
        V::from_raw(rec.new_pinned_raw(var))
    }
}

/// A random-access array input (DESIGN §2: `array<D x T, boundary>`, read with gathers at
/// any coordinates; RapidMind's `Array` accessed by `[]`): `D` = 1, 2 or 3 axes, elements
/// of value type `V`, and a boundary mode for reads out of range.
///
/// ```
/// # use weft::dsl::*;
/// let p = Program::record(|| {
///     let a = InArray::<1, Value1f>::new(Boundary::Clamp);
///     let i = index::<1>();
///     Out::from(a.read(&i - 1) + a.read(&i + 1));
/// })
/// .unwrap();
/// assert!(p.text().contains("read"));
/// ```
pub struct InArray<const D: usize, V> {
    ctx: u64,
    value: weft_ir::Value,
    ty: Type,
    _v: PhantomData<V>,
}

impl<const D: usize, V: ValueType> InArray<D, V> {
    /// A new array input named `a{k}` (k = its position).
    #[track_caller]
    pub fn new(boundary: Boundary) -> Self {
        InArray::declare(None, boundary)
    }

    /// A new array input named `name`.
    #[track_caller]
    pub fn named(name: &str, boundary: Boundary) -> Self {
        InArray::declare(Some(name), boundary)
    }

    /// The IR type `array<D x elem, boundary>` (`None` unless D is 1, 2 or 3).
    fn array_type(boundary: Boundary) -> Option<Type> {
        Type::array(D as u8, V::ir_type(), boundary)
    }

    #[track_caller]
    fn declare(name: Option<&str>, boundary: Boundary) -> Self {
        let inert = InArray {
            ctx: 0,
            value: weft_ir::Value(0),
            ty: Type::bool(),
            _v: PhantomData,
        };
        let Some(mut rec) = Top::take() else {
            return inert;
        };
        let Some(ty) = Self::array_type(boundary) else {
            rec.fail(Error::record(format!("arrays have 1 to 3 axes, not {D}")));
            return inert;
        };
        match add_param(&mut rec, ParamKind::Array, name, "a", ty) {
            Ok(v) => InArray {
                ctx: rec.id,
                value: v,
                ty,
                _v: PhantomData,
            },
            Err(e) => {
                rec.fail(e);
                inert
            }
        }
    }

    /// The array parameter in recording `ctx` (or the error to record).
    #[track_caller]
    fn param_in(&self, rec: &Top) -> Result<weft_ir::Value, Error> {
        if self.ctx == 0 {
            return Err(Error::record(
                "this array input was not declared while recording (or its declaration failed)",
            ));
        }
        if self.ctx != rec.id {
            return Err(Error::record(
                "this array input belongs to another program's recording",
            ));
        }
        Ok(self.value)
    }

    pub(crate) fn handle(&self) -> (u64, weft_ir::Value, Type) {
        (self.ctx, self.value, self.ty)
    }
}

impl<const D: usize, T: Scalar, const N: usize> InArray<D, Value<T, N>> {
    /// The element at `coords` (one `i32` per axis: a `Value<i32, 1>` for D = 1, a
    /// `Value<i32, D>` otherwise), under the array's boundary mode (the IR's `read`).
    #[track_caller]
    pub fn read(&self, coords: impl AsValue<i32, D>) -> Value<T, N> {
        let loc = Location::caller();
        let c = coords.into_operand();
        let rty = Value::<T, N>::ir_type();
        let Some(mut rec) = Top::take() else {
            return Value::from_raw(Raw::poison("an array input is read outside recording", loc));
        };
        let arr = match self.param_in(&rec) {
            Ok(a) => a,
            Err(e) => {
                rec.fail(e);
                return Value::from_raw(rec.dummy(rty));
            }
        };
        let cv = match rec.value_of(&c) {
            Ok(v) => v,
            Err(e) => {
                rec.fail(e);
                return Value::from_raw(rec.dummy(rty));
            }
        };
        let v = rec.b().read(arr, cv);
        Value::from_raw(rec.new_raw(v))
    }

    /// The array's size on each axis as `i32` lanes (the IR's `extent`).
    #[track_caller]
    pub fn extent(&self) -> Value<i32, D> {
        let loc = Location::caller();
        let rty = Value::<i32, D>::ir_type();
        let Some(mut rec) = Top::take() else {
            return Value::from_raw(Raw::poison(
                "an array input's extent is read outside recording",
                loc,
            ));
        };
        let arr = match self.param_in(&rec) {
            Ok(a) => a,
            Err(e) => {
                rec.fail(e);
                return Value::from_raw(rec.dummy(rty));
            }
        };
        let v = rec.b().extent(arr, rty);
        Value::from_raw(rec.new_raw(v))
    }
}

/// This element's coordinates in the launch, as `D` `i32` lanes (`D` must be the launch's
/// rank: 1 for a 1-D apply). The IR's `index` builtin; has no value outside recording.
#[track_caller]
pub fn index<const D: usize>() -> Value<i32, D> {
    builtin(Opcode::Index)
}

/// The launch shape, as `D` `i32` lanes (the IR's `shape` builtin).
#[track_caller]
pub fn shape<const D: usize>() -> Value<i32, D> {
    builtin(Opcode::Shape)
}

#[track_caller]
fn builtin<const D: usize>(opcode: Opcode) -> Value<i32, D> {
    let loc = Location::caller();
    let ty = Value::<i32, D>::ir_type();
    let Some(mut rec) = Top::take() else {
        return Value::from_raw(Raw::poison(
            format!("`{}` has no value outside recording", opcode.mnemonic()),
            loc,
        ));
    };
    if D > 3 {
        rec.fail(Error::record(format!("launches have 1 to 3 axes, not {D}")));
        return Value::from_raw(rec.dummy(ty));
    }
    let v = if opcode == Opcode::Index {
        rec.b().index(ty)
    } else {
        rec.b().shape(ty)
    };
    Value::from_raw(rec.new_raw(v))
}
