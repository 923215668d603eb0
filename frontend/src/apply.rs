//! Applying recorded programs over arrays (DESIGN §5; RapidMind's `a = p(b, c)`):
//! arguments, typed results (an `Array`, a tuple of arrays, or a `Bundle`), deferred
//! execution, and the collectives that take user programs (`reduce`, `count`).

use crate::array::{Array, ArrayData};
use crate::collective;
use crate::device::Device;
use crate::dsl::Program;
use crate::error::{Error, Result};
use crate::exec::{defer, prepare, ArgVal};
use crate::scalar::{Elem, Scalar};
use weft_ir::Const;

/// One argument of [`Program::apply`]: an array (for a varying or an array input) or one
/// value (for an open uniform input). Made with `From`: `&Array<D, T>`, any [`Scalar`],
/// or a [`Const`].
#[derive(Clone)]
pub struct Arg(pub(crate) ArgVal);

impl<const D: usize, T: Elem> From<&Array<D, T>> for Arg {
    fn from(a: &Array<D, T>) -> Arg {
        Arg(ArgVal::Array(a.data.clone()))
    }
}

impl<S: Scalar> From<S> for Arg {
    fn from(s: S) -> Arg {
        Arg(ArgVal::Uniform(s.to_const()))
    }
}

impl From<Const> for Arg {
    fn from(c: Const) -> Arg {
        Arg(ArgVal::Uniform(c))
    }
}

/// The arguments of an apply: one [`Arg`]-convertible value, a tuple of up to 6, or a
/// `Vec<Arg>`, in the order of the program's open inputs ([`Program::open_inputs`]).
pub trait Args {
    /// The arguments in order.
    fn into_args(self) -> Vec<Arg>;
}

impl<A: Into<Arg>> Args for A {
    fn into_args(self) -> Vec<Arg> {
        vec![self.into()]
    }
}

impl Args for Vec<Arg> {
    fn into_args(self) -> Vec<Arg> {
        self
    }
}

impl Args for () {
    fn into_args(self) -> Vec<Arg> {
        Vec::new()
    }
}

macro_rules! tuple_args {
    ($($t:ident),*) => {
        impl<$($t: Into<Arg>),*> Args for ($($t,)*) {
            #[allow(non_snake_case)]
            fn into_args(self) -> Vec<Arg> {
                let ($($t,)*) = self;
                vec![$($t.into()),*]
            }
        }
    };
}
tuple_args!(A, B);
tuple_args!(A, B, C);
tuple_args!(A, B, C, D);
tuple_args!(A, B, C, D, E);
tuple_args!(A, B, C, D, E, F);

/// The outputs of an apply, untyped: RapidMind's bundle of results. Take them out typed
/// with [`Bundle::get`].
#[derive(Clone)]
pub struct Bundle {
    pub(crate) outs: Vec<ArrayData>,
}

impl Bundle {
    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.outs.len()
    }

    /// True for a program with no output.
    pub fn is_empty(&self) -> bool {
        self.outs.is_empty()
    }

    /// Output `i` as an array of `D` axes of `T`.
    ///
    /// # Errors
    /// No output `i`, or a different element type or number of axes.
    pub fn get<const D: usize, T: Elem>(&self, i: usize) -> Result<Array<D, T>> {
        let d = self.outs.get(i).ok_or_else(|| {
            Error::argument(format!("output {i} of a bundle of {}", self.outs.len()))
        })?;
        Array::from_data(d.clone()).map_err(|e| Error::argument(format!("output {i}: {e}")))
    }
}

/// What [`Program::apply`] can return: an [`Array`] (a program with one output), a tuple
/// of arrays (one per output, in order), or a [`Bundle`].
pub trait Outputs: Sized {
    /// Takes the outputs of an apply; errors name the output whose type differs.
    fn from_bundle(outs: Bundle) -> Result<Self>;
}

impl<const D: usize, T: Elem> Outputs for Array<D, T> {
    fn from_bundle(b: Bundle) -> Result<Self> {
        if b.len() != 1 {
            return Err(Error::argument(format!(
                "the program has {} outputs; take them as a tuple or a Bundle",
                b.len()
            )));
        }
        take_output(&mut b.outs.into_iter(), 0)
    }
}

impl Outputs for Bundle {
    fn from_bundle(b: Bundle) -> Result<Self> {
        Ok(b)
    }
}

impl Outputs for () {
    fn from_bundle(b: Bundle) -> Result<Self> {
        if !b.is_empty() {
            return Err(Error::argument(format!(
                "the program has {} outputs, the result takes none",
                b.len()
            )));
        }
        Ok(())
    }
}

/// A built-in reduction of one output of a launch ([`Program::apply_reduce`]): the
/// combinations of [`crate::sum`], [`crate::product`], [`crate::minimum`] and
/// [`crate::maximum`] (docs/semantics.md, "Reductions").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The sum (integers wrap; floats in the reduction tree's order).
    Sum,
    /// The product.
    Product,
    /// The least element (NaN-propagating for floats).
    Min,
    /// The greatest element (NaN-propagating for floats).
    Max,
}

impl Reduction {
    fn opcode(self) -> weft_ir::Opcode {
        match self {
            Reduction::Sum => weft_ir::Opcode::Add,
            Reduction::Product => weft_ir::Opcode::Mul,
            Reduction::Min => weft_ir::Opcode::Min,
            Reduction::Max => weft_ir::Opcode::Max,
        }
    }
}

/// Output `i` of a bundle, the next of `outs` (moved out: no copy of its view).
fn take_output<const D: usize, T: Elem>(
    outs: &mut impl Iterator<Item = ArrayData>,
    i: usize,
) -> Result<Array<D, T>> {
    let d = outs
        .next()
        .ok_or_else(|| Error::argument(format!("no output {i} in the bundle")))?;
    Array::from_data(d).map_err(|e| Error::argument(format!("output {i}: {e}")))
}

macro_rules! tuple_outputs {
    ($n:literal; $($t:ident $d:ident $i:tt),*) => {
        impl<$(const $d: usize, $t: Elem),*> Outputs for ($(Array<$d, $t>,)*) {
            fn from_bundle(b: Bundle) -> Result<Self> {
                if b.len() != $n {
                    return Err(Error::argument(format!(
                        "the program has {} outputs, the result takes {}",
                        b.len(),
                        $n
                    )));
                }
                let mut outs = b.outs.into_iter();
                Ok(($(take_output::<$d, $t>(&mut outs, $i)?,)*))
            }
        }
    };
}
tuple_outputs!(2; A DA 0, B DB 1);
tuple_outputs!(3; A DA 0, B DB 1, C DC 2);
tuple_outputs!(4; A DA 0, B DB 1, C DC 2, E DE 3);

impl Program {
    /// Applies the program over arrays on the current device ([`Device::current`]; the CPU
    /// unless a [`Device::scope`] says otherwise): element `i` of every varying input gives
    /// element `i` of every output (DESIGN §5). Array arguments fill varying and array
    /// inputs, values fill open uniform inputs, in the order of [`Program::open_inputs`];
    /// captured host [`crate::dsl::Uniform`]s are read now (loose binding).
    ///
    /// The inputs are taken by value: an array passed in and assigned the result
    /// (`x = p.apply(&x)?`) reads its old contents (double buffering is automatic). The
    /// launch is deferred until a result is read (or used by a launch on another device);
    /// argument errors are reported here, at once, and errors of the launch itself (a
    /// runaway loop stopped by the time budget of [`Device::open`]) by the read, naming the
    /// line of this call.
    ///
    /// # Errors
    /// Wrong argument count; varying inputs of different shapes; element types or axes not
    /// matching the program ("input 1 `y` … expects elements of type f32, got f64"); a
    /// result type that does not match the outputs.
    #[track_caller]
    pub fn apply<R: Outputs>(&self, args: impl Args) -> Result<R> {
        self.apply_on(&Device::current(), args)
    }

    /// [`Program::apply`] on `dev`.
    ///
    /// # Errors
    /// As [`Program::apply`].
    #[track_caller]
    pub fn apply_on<R: Outputs>(&self, dev: &Device, args: impl Args) -> Result<R> {
        self.launch(dev, args, None)
    }

    /// [`Program::apply`] with an explicit launch shape, for programs with no varying input
    /// (DESIGN §5), e.g. one reading only `index` and array inputs.
    ///
    /// # Errors
    /// As [`Program::apply`]; a shape that differs from the varying inputs'.
    #[track_caller]
    pub fn apply_shape<R: Outputs>(&self, shape: &[usize], args: impl Args) -> Result<R> {
        self.launch(&Device::current(), args, Some(shape))
    }

    /// [`Program::apply_shape`] on `dev`.
    ///
    /// # Errors
    /// As [`Program::apply_shape`].
    #[track_caller]
    pub fn apply_shape_on<R: Outputs>(
        &self,
        dev: &Device,
        shape: &[usize],
        args: impl Args,
    ) -> Result<R> {
        self.launch(dev, args, Some(shape))
    }

    /// The launch of this program on the array `d` alone (its one open input; captured
    /// uniforms at their values now), prepared but not run: a device loop's stop test
    /// ([`crate::Sequence::until_program`]).
    pub(crate) fn prepare_on(&self, d: ArrayData) -> Result<crate::exec::Prepared> {
        self.check_recordable()?;
        let all = self.inputs(vec![Arg(ArgVal::Array(d))])?;
        prepare(self.module_arc(), self.name(), all, None)
    }

    #[track_caller]
    fn launch<R: Outputs>(
        &self,
        dev: &Device,
        args: impl Args,
        shape: Option<&[usize]>,
    ) -> Result<R> {
        self.check_recordable()?;
        let all = self.inputs(args.into_args())?;
        if shape.is_none() && !self.has_varying_input() {
            return Err(Error::argument(format!(
                "@{} has no varying input, so its launch shape cannot come from the \
                 arguments: give it with `apply_shape(&[n], args)` (or `apply_shape_on`)",
                self.name()
            )));
        }
        let l = prepare(self.module_arc(), self.name(), all, shape)?;
        R::from_bundle(Bundle {
            outs: defer(dev, l, Some(std::panic::Location::caller()))?,
        })
    }

    /// Applies the program like [`Program::apply`] and reduces its output named `output`
    /// with `reduction` — a map-reduce, such as a solver's largest change per sweep — giving
    /// the other outputs (taken as `apply` gives them: an array, a tuple, a [`Bundle`], or
    /// `()` when there is none) and the reduction as a one-element array left where the
    /// device computed it, as [`crate::maximum_array`] leaves it.
    ///
    /// The reduced output is not kept. On a CPU device the reduction's first level runs
    /// inside the launch, chunk by chunk, while each chunk's values are in cache, so they
    /// are never stored whole (issue 22's fused convergence check); elsewhere — the
    /// interpreter, a GPU, a device group, or while a [`crate::Sequence`] is recorded — the
    /// launch runs, then the reduction. Either way the bits are those of the apply followed
    /// by [`crate::sum_array`], [`crate::minimum_array`] or [`crate::maximum_array`] (or
    /// [`crate::product`]). The launch runs now, not deferred. An empty launch gives `[0]`
    /// for a sum and `[1]` for a product.
    ///
    /// # Errors
    /// No output named `output`; its elements not of type `T`, or `bool`; a `Min` or `Max`
    /// of an empty launch; as [`Program::apply`], the launch's own errors included.
    pub fn apply_reduce<R: Outputs, T: Elem>(
        &self,
        output: &str,
        reduction: Reduction,
        args: impl Args,
    ) -> Result<(R, Array<1, T>)> {
        self.launch_reduce(&Device::current(), None, (output, reduction), args)
    }

    /// [`Program::apply_reduce`] with an explicit launch shape ([`Program::apply_shape`]).
    ///
    /// # Errors
    /// As [`Program::apply_reduce`]; a shape that differs from the varying inputs'.
    pub fn apply_reduce_shape<R: Outputs, T: Elem>(
        &self,
        shape: &[usize],
        output: &str,
        reduction: Reduction,
        args: impl Args,
    ) -> Result<(R, Array<1, T>)> {
        self.launch_reduce(&Device::current(), Some(shape), (output, reduction), args)
    }

    fn launch_reduce<R: Outputs, T: Elem>(
        &self,
        dev: &Device,
        shape: Option<&[usize]>,
        (output, reduction): (&str, Reduction),
        args: impl Args,
    ) -> Result<(R, Array<1, T>)> {
        let p = self.ir();
        let names: Vec<String> = p
            .outputs
            .iter()
            .enumerate()
            .map(|(k, o)| o.name.clone().unwrap_or_else(|| format!("{k}")))
            .collect();
        let k = names.iter().position(|n| n == output).ok_or_else(|| {
            Error::argument(format!(
                "apply_reduce: @{} has no output `{output}` (its outputs: {})",
                self.name(),
                names.join(", ")
            ))
        })?;
        if p.outputs[k].ty != T::ir_type() {
            return Err(Error::argument(format!(
                "apply_reduce: output `{output}` of @{} has elements of type {}, the result \
                 takes {}",
                self.name(),
                p.outputs[k].ty,
                T::ir_type()
            )));
        }
        self.check_recordable()?;
        let all = self.inputs(args.into_args())?;
        if shape.is_none() && !self.has_varying_input() {
            return Err(Error::argument(format!(
                "@{} has no varying input, so its launch shape cannot come from the \
                 arguments: give it with `apply_reduce_shape(&[n], …)`",
                self.name()
            )));
        }
        let l = prepare(self.module_arc(), self.name(), all, shape)?;
        let (rest, r) = collective::apply_reduced(dev, l, k, reduction.opcode())?;
        let r = match (r, reduction) {
            (Some(d), _) => Array::from_data(d)?,
            (None, Reduction::Sum) => crate::sum_array(&Array::<1, T>::from_vec([0], vec![])?)?,
            (None, Reduction::Product) => {
                let one = crate::product(&Array::<1, T>::from_vec([0], vec![])?)?;
                Array::from_vec([1], vec![one])?
            }
            (None, Reduction::Min | Reduction::Max) => {
                return Err(Error::argument(format!(
                    "apply_reduce: the {} of output `{output}` of an empty launch",
                    if reduction == Reduction::Min {
                        "minimum"
                    } else {
                        "maximum"
                    }
                )))
            }
        };
        Ok((R::from_bundle(Bundle { outs: rest })?, r))
    }

    /// An error while a sequence is recorded if the program reads host `Uniform`s.
    fn check_recordable(&self) -> Result<()> {
        if crate::sequence::recording() && self.has_captured_uniforms() {
            return Err(Error::argument(format!(
                "@{} reads host `Uniform`s (loose binding), whose values a replay of the \
                 sequence being recorded would not read again: pass them as arguments (fixed \
                 when recorded) or as one-element arrays",
                self.name()
            )));
        }
        Ok(())
    }

    /// Every input of the program in order: the `given` arguments in the open inputs, the
    /// captured uniforms' current values in theirs.
    fn inputs(&self, given: Vec<Arg>) -> Result<Vec<ArgVal>> {
        let p = self.ir();
        if !self.has_captured_uniforms() && given.len() == p.params.len() {
            // Every input open: the arguments as they are.
            return Ok(given.into_iter().map(|a| a.0).collect());
        }
        let open = self.open_inputs();
        if given.len() != open.len() {
            let names: Vec<String> = open
                .iter()
                .map(|&i| format!("`{}`", p.param_name(i)))
                .collect();
            return Err(Error::argument(format!(
                "@{} takes {} inputs ({}), {} were given",
                self.name(),
                open.len(),
                names.join(", "),
                given.len()
            )));
        }
        let mut all: Vec<Option<ArgVal>> = vec![None; p.params.len()];
        for (&i, a) in open.iter().zip(given) {
            all[i] = Some(a.0);
        }
        for (i, c) in self.captured_uniforms() {
            all[i] = Some(ArgVal::Uniform(c));
        }
        all.into_iter()
            .enumerate()
            .map(|(i, a)| {
                a.ok_or_else(|| {
                    Error::argument(format!("input {i} `{}` has no value", p.param_name(i)))
                })
            })
            .collect()
    }
}

/// Reduces all elements of `a` with the user combiner program (2 inputs, 1 output, all of
/// `a`'s element type; assumed associative, DESIGN §5) on the current device, in parallel:
/// see [`crate::collective`] for the order of combination. A combiner reading host
/// [`Uniform`](crate::dsl::Uniform)s uses their values at the call.
///
/// # Errors
/// A combiner of the wrong arity or type; an empty array (a combiner has no identity); a
/// device failure.
pub fn reduce<const D: usize, T: Elem>(combiner: &Program, a: &Array<D, T>) -> Result<T> {
    let combiner = combiner.with_current_uniforms()?;
    collective::reduce_with(combiner.module(), combiner.name(), a)
}

/// Counts the elements of `a` for which the predicate program (1 input of `a`'s element
/// type, 1 bool output) is true, on the current device. A predicate reading host
/// [`Uniform`](crate::dsl::Uniform)s uses their values at the call.
///
/// # Errors
/// A predicate of the wrong signature; a device failure.
pub fn count<const D: usize, T: Elem>(pred: &Program, a: &Array<D, T>) -> Result<u64> {
    let pred = pred.with_current_uniforms()?;
    collective::count_with(pred.module(), pred.name(), a)
}
