//! Host uniforms: RapidMind's non-local variables. A [`Uniform`] is a host cell; a program
//! recorded while reading it gets a uniform input *linked* to the cell (loose binding,
//! DESIGN §4), so each execution reads the cell's value at that time.

use super::record::{Captured, Raw, Recorder, Top};
use super::value::{AsValue, IntoValue, Numeric, Value};
use crate::error::Error;
use crate::scalar::{Elem, Scalar};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use weft_ir::{Const, Type};

static NEXT_UNIFORM: AtomicU64 = AtomicU64::new(0);

/// A host cell a program can be linked to (type-erased [`Uniform`]).
pub(crate) trait HostCell: Send + Sync {
    /// Process-unique id.
    fn id(&self) -> u64;
    /// The name of the uniform input it becomes.
    fn name(&self) -> &str;
    /// The current value.
    fn current(&self) -> Const;
    /// The IR type of its values.
    fn ty(&self) -> Type;
}

struct Cell<E> {
    id: u64,
    name: String,
    value: RwLock<E>,
}

impl<E: Elem> HostCell for Cell<E> {
    fn id(&self) -> u64 {
        self.id
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn current(&self) -> Const {
        let v = *self.value.read().unwrap_or_else(|e| e.into_inner());
        let bits: Vec<u64> = (0..E::LANES).map(|l| v.lane(l).to_bits()).collect();
        Const::from_lanes(E::ir_type(), &bits)
    }
    fn ty(&self) -> Type {
        E::ir_type()
    }
}

/// A host value that recorded programs read as a uniform input (RapidMind's non-local
/// `Value` captured by reference; Sh's uniform parameters; DESIGN §4 loose binding).
///
/// `E` is a [`Scalar`] or `[S; N]` (N = 2..4). Reading it while recording —
/// [`Uniform::value`] or `&u` as an operand — makes it a uniform input of the program,
/// named after the uniform and linked to this cell: [`Program::captured_uniforms`]
/// reports the cell's *current* value, so [`Uniform::set`] changes what the next
/// execution reads without recording again. Outside recording it is an immediate value.
///
/// Cloning gives another handle to the same cell; `Uniform` is `Send + Sync`.
///
/// [`Program::captured_uniforms`]: super::Program::captured_uniforms
pub struct Uniform<E: Elem> {
    cell: Arc<Cell<E>>,
}

impl<E: Elem> Clone for Uniform<E> {
    fn clone(&self) -> Self {
        Uniform {
            cell: self.cell.clone(),
        }
    }
}

impl<E: Elem> fmt::Debug for Uniform<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uniform({} = {:?})", self.cell.name, self.get())
    }
}

impl<E: Elem> Uniform<E> {
    /// A uniform holding `value`; its input is named `u{id}` (unique in the process).
    pub fn new(value: E) -> Uniform<E> {
        let id = NEXT_UNIFORM.fetch_add(1, Ordering::Relaxed);
        Uniform::make(id, format!("u{id}"), value)
    }

    /// A uniform holding `value` whose input is named `name` (e.g. `"dt"`; an identifier,
    /// `[A-Za-z0-9_.]+`). Two different uniforms with one name cannot be captured by one
    /// program (recording fails), nor meet in a composition.
    pub fn named(name: &str, value: E) -> Uniform<E> {
        let id = NEXT_UNIFORM.fetch_add(1, Ordering::Relaxed);
        Uniform::make(id, name.to_string(), value)
    }

    fn make(id: u64, name: String, value: E) -> Uniform<E> {
        Uniform {
            cell: Arc::new(Cell {
                id,
                name,
                value: RwLock::new(value),
            }),
        }
    }

    /// Sets the value the next execution of linked programs reads.
    pub fn set(&self, value: E) {
        *self.cell.value.write().unwrap_or_else(|e| e.into_inner()) = value;
    }

    /// The current value.
    pub fn get(&self) -> E {
        *self.cell.value.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The name of the uniform input it becomes.
    pub fn name(&self) -> &str {
        &self.cell.name
    }

    /// The current value as an IR constant.
    pub fn to_const(&self) -> Const {
        self.cell.current()
    }

    pub(crate) fn cell(&self) -> Arc<dyn HostCell> {
        self.cell.clone()
    }

    #[track_caller]
    fn operand(&self) -> Raw {
        capture(self.cell(), Location::caller())
    }
}

impl<T: Scalar> Uniform<T> {
    /// The uniform as a value: while recording, the program's uniform input linked to this
    /// cell (one input per cell and program); otherwise its current value.
    #[track_caller]
    pub fn value(&self) -> Value<T, 1> {
        Value::from_raw(self.operand())
    }
}

/// `uniform op value`: a scalar host uniform on the left of an arithmetic operator (captured
/// while recording, its current value otherwise), broadcast to the value's lanes.
macro_rules! uniform_lhs {
    ($($Trait:ident, $method:ident, $opc:ident;)*) => {$(
        impl<T: Numeric, const N: usize> std::ops::$Trait<Value<T, N>> for &Uniform<T> {
            type Output = Value<T, N>;
            #[track_caller]
            fn $method(self, rhs: Value<T, N>) -> Value<T, N> {
                let l = self.lanes_operand::<N>();
                super::value::binary(weft_ir::Opcode::$opc, &l, &rhs.raw)
            }
        }
        impl<T: Numeric, const N: usize> std::ops::$Trait<&Value<T, N>> for &Uniform<T> {
            type Output = Value<T, N>;
            #[track_caller]
            fn $method(self, rhs: &Value<T, N>) -> Value<T, N> {
                let l = self.lanes_operand::<N>();
                super::value::binary(weft_ir::Opcode::$opc, &l, &rhs.raw)
            }
        }
    )*};
}
uniform_lhs! {
    Add, add, Add;
    Sub, sub, Sub;
    Mul, mul, Mul;
    Div, div, Div;
    Rem, rem, Rem;
}

impl<T: Scalar> Uniform<T> {
    /// The scalar uniform as an operand of `N` lanes.
    #[track_caller]
    fn lanes_operand<const N: usize>(&self) -> Raw {
        let s = self.operand();
        if N == 1 {
            s
        } else {
            super::value::broadcast_raw::<T, N>(&s)
        }
    }
}

macro_rules! broadcast_uniform {
    ($($n:literal),*) => {$(
        impl<T: Scalar> IntoValue<T, $n> for &Uniform<T> {
            /// The scalar uniform broadcast to the lanes of a tuple operand.
            #[track_caller]
            fn into_operand(self) -> Raw {
                let s = self.operand();
                super::value::broadcast_raw::<T, $n>(&s)
            }
        }
    )*};
}
broadcast_uniform!(2, 3, 4);

macro_rules! tuple_uniform {
    ($($n:literal),*) => {$(
        impl<T: Scalar> Uniform<[T; $n]> {
            /// The uniform as a tuple value (see [`Uniform::value`] for scalars).
            #[track_caller]
            pub fn value(&self) -> Value<T, $n> {
                Value::from_raw(self.operand())
            }
        }

        impl<T: Scalar> AsValue<T, $n> for &Uniform<[T; $n]> {}

        impl<T: Scalar> IntoValue<T, $n> for &Uniform<[T; $n]> {
            #[track_caller]
            fn into_operand(self) -> Raw {
                self.operand()
            }
        }
    )*};
}
tuple_uniform!(2, 3, 4);

impl<T: Scalar> AsValue<T, 1> for &Uniform<T> {}

impl<T: Scalar> IntoValue<T, 1> for &Uniform<T> {
    #[track_caller]
    fn into_operand(self) -> Raw {
        self.operand()
    }
}

/// The innermost recording's uniform input linked to `cell` (added on first use), or the
/// cell's current value outside recording.
pub(crate) fn capture(cell: Arc<dyn HostCell>, location: &'static Location<'static>) -> Raw {
    let Some(mut rec) = Top::take() else {
        return Raw::imm(cell.current());
    };
    match captured_param(&mut rec, cell.clone(), location) {
        Ok(p) => rec.new_raw(p),
        Err(e) => {
            rec.fail(e);
            rec.dummy(cell.ty())
        }
    }
}

/// The parameter of `rec` linked to `cell`, added on first use. Errors: the name is taken
/// by another input.
pub(crate) fn captured_param(
    rec: &mut Recorder,
    cell: Arc<dyn HostCell>,
    location: &'static Location<'static>,
) -> Result<weft_ir::Value, Error> {
    if let Some(p) = rec.captured.iter().find(|c| c.cell.id() == cell.id()) {
        return Ok(p.param);
    }
    let name = cell.name().to_string();
    if let Err(m) = rec.check_name(&name, "input") {
        return Err(Error::Record {
            message: format!("cannot capture uniform `{name}`: {m}"),
            location,
        });
    }
    rec.param_names.insert(name.clone());
    let param = rec.b().uniform(&name, cell.ty());
    rec.captured.push(Captured { cell, param });
    Ok(param)
}
