//! The recording context (RapidMind's retained mode): a thread-local stack of recorders, each
//! holding the `ProgramBuilder` of the program being recorded, the values user code holds,
//! and the program's interface; plus [`Raw`], the untyped value every DSL value wraps, and
//! the one function ([`op`]) through which every operation is recorded or, outside
//! recording, computed at once (immediate mode).
//!
//! # How values map onto the builder's SSA construction
//!
//! A recorded value is a *slot* of its recorder. A slot starts as a plain SSA value (the
//! result of an op). When a structured region (`if_`, `for_`, `while_`, `do_until`) is
//! entered, every slot that user code still holds and that belongs to an enclosing region
//! becomes a builder `Variable` defined with its current value, so that assignments inside
//! the region (`x.assign(…)`, `x += …`) redefine the variable and the builder merges the
//! definitions after the region (if results, loop-carried values). Values made and changed
//! within one region stay plain SSA values, so temporaries never become variables.
//!
//! The builder requires every variable to be declared outside all regions, so recorders
//! keep a reserve of declared, never-defined variables, topped up each time a top-level
//! region is entered, and recycle the variables of dropped values.

use crate::error::Error;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use weft_ir::builder::{ProgramBuilder, Variable};
use weft_ir::opcode::infer;
use weft_ir::{Const, Opcode, Type};

use super::uniform::HostCell;

/// Unique ids of recordings (0 is never used).
static NEXT_RECORDING: AtomicU64 = AtomicU64::new(1);

/// Reserve of never-defined variables kept for regions (grown when a program needs more).
const RESERVE: usize = 256;

thread_local! {
    // Boxed so that taking the top recorder off the stack and back moves a pointer.
    #[allow(clippy::vec_box)]
    static STACK: RefCell<Vec<Box<Recorder>>> = const { RefCell::new(Vec::new()) };
}

/// An error carried by a value (immediate mode has nowhere else to put it).
#[derive(Debug)]
pub(crate) struct Poisoned {
    message: String,
    location: &'static Location<'static>,
}

impl Poisoned {
    /// The error, at the line where the poisoned value was made.
    pub(crate) fn error(&self) -> Error {
        Error::Record {
            message: self.message.clone(),
            location: self.location,
        }
    }

    /// The error of a poisoned value used at `used`: at the line where it was made, unless
    /// that line is inside the standard library (a value copied by `Option::clone` or
    /// `Vec::clone`, where `#[track_caller]` cannot see the user's line): then at `used`.
    pub(crate) fn error_at(&self, used: &'static Location<'static>) -> Error {
        Error::Record {
            message: self.message.clone(),
            location: if in_std(self.location) {
                used
            } else {
                self.location
            },
        }
    }
}

/// Whether a caller location is inside Rust's standard library rather than user code.
pub(crate) fn in_std(l: &Location<'_>) -> bool {
    let f = l.file();
    f.starts_with("/rustc/")
        || [
            "library/core/src/",
            "library/alloc/src/",
            "library/std/src/",
        ]
        .iter()
        .any(|p| f.contains(p))
}

/// The untyped representation of a DSL value (not part of the public API: public only
/// because typed values are built from it inside this crate's generic code). Interior
/// mutability lets [`Value::assign`](super::Value::assign) take `&self`, so that two
/// closures (a loop's condition and body) can both use one value.
#[doc(hidden)]
#[derive(Debug)]
pub struct Raw(Mutex<Repr>);

#[derive(Clone, Debug)]
pub(crate) enum Repr {
    /// Immediate mode: a constant.
    Imm(Const),
    /// A value owned by slot `slot` of recording `ctx`.
    Rec { ctx: u64, slot: u32 },
    /// A borrowed view of a slot (operands only; dropping it frees nothing).
    Alias { ctx: u64, slot: u32 },
    /// A failed immediate-mode operation.
    Poison(Arc<Poisoned>),
}

impl Raw {
    pub(crate) fn new(r: Repr) -> Raw {
        Raw(Mutex::new(r))
    }

    /// The current representation.
    pub(crate) fn repr(&self) -> Repr {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the representation; returns the old one as a value for the caller to drop
    /// (dropping frees its slot, which needs the recorder on the stack).
    pub(crate) fn replace(&self, r: Repr) -> Raw {
        let old = std::mem::replace(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()), r);
        Raw::new(old)
    }

    /// The representation, without freeing a slot (ownership moves to the caller).
    pub(crate) fn into_repr(self) -> Repr {
        std::mem::replace(
            &mut *self.0.lock().unwrap_or_else(|e| e.into_inner()),
            Repr::Imm(Const::bool(false)),
        )
    }

    /// An immediate constant (as an operand; see [`Raw::constant`] for a value).
    pub(crate) fn imm(c: Const) -> Raw {
        Raw::new(Repr::Imm(c))
    }

    /// A poisoned value with an error at `location`.
    pub(crate) fn poison(message: impl Into<String>, location: &'static Location<'static>) -> Raw {
        Raw::new(Repr::Poison(Arc::new(Poisoned {
            message: message.into(),
            location,
        })))
    }

    /// A borrowed view of `self`, for use as an operand.
    pub(crate) fn alias(&self) -> Raw {
        Raw::new(match self.repr() {
            Repr::Rec { ctx, slot } | Repr::Alias { ctx, slot } => Repr::Alias { ctx, slot },
            r => r,
        })
    }

    /// A value holding constant `c`: recorded (a `const` op) while recording, so that it
    /// can be assigned inside regions; immediate otherwise.
    #[track_caller]
    pub(crate) fn constant(c: Const) -> Raw {
        match Top::take() {
            Some(mut rec) => {
                let v = rec.b().constant(c);
                rec.new_raw(v)
            }
            None => Raw::imm(c),
        }
    }

    /// The constant of an immediate value; the error of a poisoned one; an error naming
    /// the caller for a recorded one.
    #[track_caller]
    pub(crate) fn to_const(&self) -> Result<Const, Error> {
        match self.repr() {
            Repr::Imm(c) => Ok(c),
            Repr::Poison(p) => Err(p.error_at(Location::caller())),
            Repr::Rec { .. } | Repr::Alias { .. } => Err(Error::record(
                "this value is recorded (symbolic): it has no value on the host; \
                 apply the recorded program to compute it",
            )),
        }
    }

    /// True for a value recorded into a program (not immediate).
    pub(crate) fn is_recorded(&self) -> bool {
        matches!(self.repr(), Repr::Rec { .. } | Repr::Alias { .. })
    }
}

impl Clone for Raw {
    /// A copy with value semantics (RapidMind's `Value` copy constructor): a recorded value
    /// is snapshotted, so assigning to the copy later never changes the original.
    #[track_caller]
    fn clone(&self) -> Raw {
        let (ctx, slot) = match self.repr() {
            Repr::Imm(c) => return Raw::imm(c),
            Repr::Poison(p) => return Raw::new(Repr::Poison(p)),
            Repr::Rec { ctx, slot } | Repr::Alias { ctx, slot } => (ctx, slot),
        };
        let loc = Location::caller();
        let r = STACK.try_with(|s| {
            let mut st = s.try_borrow_mut().ok()?;
            let rec = st.iter_mut().find(|r| r.id == ctx)?;
            rec.builder.as_ref()?;
            Some(match rec.read_slot(slot, loc) {
                Ok(v) => rec.new_raw(v),
                Err(e) => {
                    let p = Raw::poison(e.to_string(), loc);
                    rec.fail(e);
                    p
                }
            })
        });
        r.ok().flatten().unwrap_or_else(|| {
            Raw::poison(
                "a recorded value was copied after its recording ended (values of a \
                 recording live only inside Program::record)",
                loc,
            )
        })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Repr::Rec { ctx, slot } = *self.0.get_mut().unwrap_or_else(|e| e.into_inner()) {
            let _ = STACK.try_with(|s| {
                if let Ok(mut st) = s.try_borrow_mut() {
                    if let Some(rec) = st.iter_mut().find(|r| r.id == ctx) {
                        rec.free_slot(slot);
                    }
                }
            });
        }
    }
}

/// The state of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    Ssa(weft_ir::Value),
    Var(Variable),
}

#[derive(Debug)]
struct Slot {
    state: SlotState,
    /// The region instance (scope) where the Rust value was made.
    scope: u64,
    /// The slot's variable outlives the value (an `InOut`, read at the end).
    pinned: bool,
}

/// An output declared with `Out`/`InOut`: read from its variable when recording ends.
pub(crate) struct OutDecl {
    pub name: Option<String>,
    pub ty: Type,
    pub var: Variable,
    /// Assigned somewhere.
    pub assigned: bool,
    /// Assigned on every path to the current point (the must-assign state).
    pub definite: bool,
    /// The variable has a definition (before the first region it gets a zero, so that
    /// assignments inside regions merge).
    pub has_def: bool,
    pub location: &'static Location<'static>,
}

/// A host uniform captured by the program: its parameter value.
pub(crate) struct Captured {
    pub cell: Arc<dyn HostCell>,
    pub param: weft_ir::Value,
}

/// One recording in progress.
pub(crate) struct Recorder {
    pub id: u64,
    pub name: String,
    /// `None` only while a control-flow op of the builder runs (it is lent back to the
    /// recorder around each user closure).
    pub builder: Option<ProgramBuilder>,
    scopes: Vec<u64>,
    next_scope: u64,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    /// Declared, never-defined variables (safe to use anywhere).
    fresh: Vec<Variable>,
    /// Variables of dropped values (they hold old definitions).
    stale: Vec<Variable>,
    /// Fresh variables taken inside a region, by that region: they are fresh again once it ends.
    fresh_in: HashMap<Variable, u64>,
    /// Fresh variables freed while their region is still open.
    pending: Vec<(u64, Variable)>,
    /// Variables taken inside regions since the last top-level region (sizes the reserve).
    inner_taken: usize,
    reserve: usize,
    /// The first error recorded (returned by `Program::record`).
    pub error: Option<Error>,
    pub outs: Vec<OutDecl>,
    pub param_names: HashSet<String>,
    pub captured: Vec<Captured>,
    /// Programs called (full modules of the callees), by name.
    pub callees: Vec<weft_ir::Program>,
}

impl Recorder {
    pub(crate) fn new(name: String) -> Recorder {
        Recorder {
            id: NEXT_RECORDING.fetch_add(1, Ordering::Relaxed),
            builder: Some(ProgramBuilder::new(name.clone())),
            name,
            scopes: vec![0],
            next_scope: 1,
            slots: Vec::new(),
            free_slots: Vec::new(),
            fresh: Vec::new(),
            stale: Vec::new(),
            fresh_in: HashMap::new(),
            pending: Vec::new(),
            inner_taken: 0,
            reserve: RESERVE,
            error: None,
            outs: Vec::new(),
            param_names: HashSet::new(),
            captured: Vec::new(),
            callees: Vec::new(),
        }
    }

    /// The builder (present whenever user code runs).
    pub(crate) fn b(&mut self) -> &mut ProgramBuilder {
        self.builder
            .as_mut()
            .expect("weft DSL: the recorder's builder is lent out (internal error)")
    }

    /// Keeps the first error.
    pub(crate) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// True when no control-flow region is open.
    pub(crate) fn at_top_level(&self) -> bool {
        self.scopes.len() == 1
    }

    /// The must-assign state of the outputs at the current point.
    pub(crate) fn definite(&self) -> Vec<bool> {
        self.outs.iter().map(|o| o.definite).collect()
    }

    /// Restores a must-assign state (outputs declared since keep theirs).
    pub(crate) fn set_definite(&mut self, d: &[bool]) {
        for (o, &x) in self.outs.iter_mut().zip(d) {
            o.definite = x;
        }
    }

    /// True while region instance `scope` is open.
    pub(crate) fn scope_open(&self, scope: u64) -> bool {
        self.scopes.contains(&scope)
    }

    pub(crate) fn current_scope(&self) -> u64 {
        *self.scopes.last().expect("body scope")
    }

    /// A new slot (in the current scope) holding SSA value `v`.
    pub(crate) fn new_raw(&mut self, v: weft_ir::Value) -> Raw {
        let slot = Slot {
            state: SlotState::Ssa(v),
            scope: self.current_scope(),
            pinned: false,
        };
        let i = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() as u32 - 1
            }
        };
        Raw::new(Repr::Rec {
            ctx: self.id,
            slot: i,
        })
    }

    /// A new slot holding variable `var`, whose variable is never recycled (`InOut`).
    pub(crate) fn new_pinned_raw(&mut self, var: Variable) -> Raw {
        let raw = self.new_raw(weft_ir::Value(0));
        if let Repr::Rec { slot, .. } = raw.repr() {
            let s = &mut self.slots[slot as usize];
            s.state = SlotState::Var(var);
            s.pinned = true;
        }
        raw
    }

    fn free_slot(&mut self, slot: u32) {
        let Some(s) = self.slots.get_mut(slot as usize) else {
            return;
        };
        let state = std::mem::replace(&mut s.state, SlotState::Free);
        let pinned = s.pinned;
        if state == SlotState::Free {
            return;
        }
        if let SlotState::Var(var) = state {
            if !pinned {
                self.release_var(var);
            }
        }
        self.free_slots.push(slot);
    }

    fn release_var(&mut self, var: Variable) {
        match self.fresh_in.get(&var) {
            Some(&scope) if self.scopes.contains(&scope) => self.pending.push((scope, var)),
            Some(_) => {
                self.fresh_in.remove(&var);
                self.fresh.push(var);
            }
            None => self.stale.push(var),
        }
    }

    /// A variable never defined so far (for outputs): declared now, at top level.
    pub(crate) fn new_undefined_var(&mut self, ty: Type) -> Variable {
        self.b().declare_var("", ty)
    }

    /// A variable to define now.
    fn take_var(&mut self, loc: &'static Location<'static>) -> Result<Variable, Error> {
        if self.at_top_level() {
            if let Some(v) = self.stale.pop().or_else(|| self.fresh.pop()) {
                return Ok(v);
            }
            return Ok(self.b().declare_var("", Type::bool()));
        }
        self.inner_taken += 1;
        if let Some(v) = self.fresh.pop() {
            self.fresh_in.insert(v, self.current_scope());
            return Ok(v);
        }
        self.stale.pop().ok_or_else(|| Error::Record {
            message: format!(
                "more than {} values are live across nested control flow in this program \
                 (weft declares variables before the outermost region; split the program \
                 with calls)",
                self.reserve
            ),
            location: loc,
        })
    }

    /// The SSA value of a value operand: a constant is emitted; a recorded value must belong
    /// to this recording and to a region still open.
    #[track_caller]
    pub(crate) fn value_of(&mut self, raw: &Raw) -> Result<weft_ir::Value, Error> {
        let loc = Location::caller();
        match raw.repr() {
            Repr::Imm(c) => Ok(self.b().constant(c)),
            Repr::Rec { ctx, slot } | Repr::Alias { ctx, slot } if ctx == self.id => {
                self.read_slot(slot, loc)
            }
            Repr::Rec { .. } | Repr::Alias { .. } => Err(Error::Record {
                message: format!(
                    "a value recorded for another program is used while recording @{}: values \
                     cannot cross programs (make it an input, or call the other program)",
                    self.name
                ),
                location: loc,
            }),
            Repr::Poison(p) => Err(p.error_at(loc)),
        }
    }

    #[track_caller]
    fn read_slot(
        &mut self,
        slot: u32,
        loc: &'static Location<'static>,
    ) -> Result<weft_ir::Value, Error> {
        let s = &self.slots[slot as usize];
        if !self.scopes.contains(&s.scope) {
            return Err(out_of_scope(loc));
        }
        match s.state {
            SlotState::Ssa(v) => Ok(v),
            SlotState::Var(var) => Ok(self.b().use_var(var)),
            SlotState::Free => Err(Error::Record {
                message: "internal error: a value's slot was freed".into(),
                location: loc,
            }),
        }
    }

    /// Assigns SSA value `v` to the recorded value `raw` (a slot of this recording). An
    /// immediate or poisoned value becomes a recorded one from here on (the old
    /// representation is returned, to be dropped once the recorder is back on the stack).
    #[track_caller]
    pub(crate) fn write(&mut self, raw: &Raw, v: weft_ir::Value) -> Result<Option<Raw>, Error> {
        let loc = Location::caller();
        let slot = match raw.repr() {
            Repr::Rec { ctx, slot } if ctx == self.id => slot,
            Repr::Rec { .. } | Repr::Alias { .. } => {
                return Err(Error::Record {
                    message: format!(
                        "a value recorded for another program is assigned while recording @{}",
                        self.name
                    ),
                    location: loc,
                })
            }
            Repr::Imm(_) | Repr::Poison(_) => {
                let r = self.new_raw(v).into_repr();
                return Ok(Some(raw.replace(r)));
            }
        };
        let cur = self.current_scope();
        let s = &mut self.slots[slot as usize];
        if !self.scopes.contains(&s.scope) {
            return Err(out_of_scope(loc));
        }
        match s.state {
            SlotState::Ssa(_) if s.scope == cur => {
                s.state = SlotState::Ssa(v);
                Ok(None)
            }
            SlotState::Var(var) => {
                self.b().def_var(var, v);
                Ok(None)
            }
            _ => Err(Error::Record {
                message: "internal error: assignment to a value of an enclosing region that \
                          is not a variable"
                    .into(),
                location: loc,
            }),
        }
    }

    /// Before a region: tops up the reserve at top level and turns every value that user
    /// code holds from an open region into a variable.
    #[track_caller]
    pub(crate) fn prepare_region(&mut self) -> Result<(), Error> {
        let loc = Location::caller();
        if self.at_top_level() {
            self.reserve = self.reserve.max(2 * self.inner_taken);
            self.inner_taken = 0;
            while self.fresh.len() < self.reserve {
                let v = self.b().declare_var("", Type::bool());
                self.fresh.push(v);
            }
        }
        for k in 0..self.outs.len() {
            if !self.outs[k].has_def {
                let ty = self.outs[k].ty;
                let zero = self.b().constant(Const::zero(ty));
                let var = self.outs[k].var;
                self.b().def_var(var, zero);
                self.outs[k].has_def = true;
            }
        }
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if let SlotState::Ssa(v) = s.state {
                if self.scopes.contains(&s.scope) {
                    let var = self.take_var(loc)?;
                    self.b().def_var(var, v);
                    self.slots[i].state = SlotState::Var(var);
                }
            }
        }
        Ok(())
    }

    fn push_scope(&mut self) {
        self.scopes.push(self.next_scope);
        self.next_scope += 1;
    }

    fn pop_scope(&mut self) {
        if let Some(s) = self.scopes.pop() {
            let mut k = 0;
            while k < self.pending.len() {
                if self.pending[k].0 == s {
                    let (_, var) = self.pending.swap_remove(k);
                    self.fresh_in.remove(&var);
                    self.fresh.push(var);
                } else {
                    k += 1;
                }
            }
        }
    }

    /// A zero of type `ty` standing for the result of a failed operation.
    #[track_caller]
    pub(crate) fn dummy(&mut self, ty: Type) -> Raw {
        let v = self.b().constant(Const::zero(ty));
        self.new_raw(v)
    }

    /// Records op `opcode` on `args`, whose result must have type `rty`. Misuse is recorded
    /// as an error at the caller and gives a zero.
    #[track_caller]
    fn record_op(
        &mut self,
        opcode: Opcode,
        lanes: &[u8],
        declared: Option<Type>,
        args: &[&Raw],
        rty: Type,
    ) -> Raw {
        let loc = Location::caller();
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            match self.value_of(a) {
                Ok(v) => vals.push(v),
                Err(e) => {
                    self.fail(e);
                    return self.dummy(rty);
                }
            }
        }
        let tys: Vec<Type> = vals.iter().map(|&v| self.b().program().ty(v)).collect();
        match infer(opcode, &tys, lanes, declared) {
            Ok(t) if t == rty => {}
            Ok(t) => {
                self.fail(Error::Record {
                    message: format!("`{}` gives {t} here, not {rty}", opcode.mnemonic()),
                    location: loc,
                });
                return self.dummy(rty);
            }
            Err(m) => {
                self.fail(Error::Record {
                    message: m,
                    location: loc,
                });
                return self.dummy(rty);
            }
        }
        let b = self.b();
        let v = match opcode {
            Opcode::Cast => b.cast(vals[0], rty),
            Opcode::Bitcast => b.bitcast(vals[0], rty),
            Opcode::Extract => b.extract(vals[0], lanes[0]),
            Opcode::Swizzle => b.swizzle(vals[0], lanes),
            Opcode::Insert => b.insert(vals[0], vals[1], lanes),
            _ => b.op(opcode, &vals),
        };
        self.new_raw(v)
    }

    /// Checks a parameter or output name: a valid, unused identifier.
    pub(crate) fn check_name(&self, name: &str, what: &str) -> Result<(), String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return Err(format!(
                "{what} name `{name}` is not an identifier ([A-Za-z0-9_.]+)"
            ));
        }
        if what == "input" && self.param_names.contains(name) {
            return Err(format!(
                "@{} already has an input named `{name}`",
                self.name
            ));
        }
        Ok(())
    }
}

fn out_of_scope(loc: &'static Location<'static>) -> Error {
    Error::Record {
        message: "a value made inside an if_/for_/while_/do_until region is used after the \
                  region ended (to change a value inside a region, declare it before and use \
                  `assign` or `+=`, not `=`)"
            .into(),
        location: loc,
    }
}

/// The top recorder, taken off the thread-local stack while this crate works on it (so
/// that builder calls are made directly from `#[track_caller]` code); pushed back on drop.
pub(crate) struct Top(Option<Box<Recorder>>);

impl Top {
    /// The innermost recording of this thread, if any.
    pub(crate) fn take() -> Option<Top> {
        STACK
            .try_with(|s| s.try_borrow_mut().ok()?.pop())
            .ok()
            .flatten()
            .map(|r| Top(Some(r)))
    }
}

impl std::ops::Deref for Top {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        self.0.as_ref().expect("recorder")
    }
}

impl std::ops::DerefMut for Top {
    fn deref_mut(&mut self) -> &mut Recorder {
        self.0.as_mut().expect("recorder")
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            let _ = STACK.try_with(|s| s.borrow_mut().push(r));
        }
    }
}

/// True while a recording is in progress on this thread.
pub fn is_recording() -> bool {
    STACK.try_with(|s| !s.borrow().is_empty()).unwrap_or(false)
}

/// Pushes a new recorder; the returned guard removes it (also on panic).
pub(crate) fn begin(name: String) -> Session {
    let rec = Box::new(Recorder::new(name));
    let id = rec.id;
    STACK.with(|s| s.borrow_mut().push(rec));
    Session { id }
}

/// A recording in progress (see [`begin`]).
pub(crate) struct Session {
    id: u64,
}

impl Session {
    /// Ends the recording and gives its recorder.
    pub(crate) fn end(self) -> Option<Box<Recorder>> {
        let id = self.id;
        std::mem::forget(self);
        STACK
            .try_with(|s| {
                let mut st = s.borrow_mut();
                let pos = st.iter().rposition(|r| r.id == id)?;
                Some(st.remove(pos))
            })
            .ok()
            .flatten()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let id = self.id;
        let _ = STACK.try_with(|s| {
            if let Ok(mut st) = s.try_borrow_mut() {
                if let Some(pos) = st.iter().rposition(|r| r.id == id) {
                    st.remove(pos);
                }
            }
        });
    }
}

/// Records (while recording) or computes (immediate mode) op `opcode` on `args`; the result
/// has type `rty`. Errors are recorded at the caller's line (recording) or carried by the
/// result (immediate mode).
#[track_caller]
pub(crate) fn op(
    opcode: Opcode,
    lanes: &[u8],
    declared: Option<Type>,
    args: &[&Raw],
    rty: Type,
) -> Raw {
    match Top::take() {
        Some(mut rec) => rec.record_op(opcode, lanes, declared, args, rty),
        None => immediate(opcode, lanes, declared, args),
    }
}

#[track_caller]
fn immediate(opcode: Opcode, lanes: &[u8], declared: Option<Type>, args: &[&Raw]) -> Raw {
    let loc = Location::caller();
    let mut cs = Vec::with_capacity(args.len());
    for a in args {
        match a.repr() {
            Repr::Imm(c) => cs.push(c),
            Repr::Poison(p) => return Raw::new(Repr::Poison(p)),
            Repr::Rec { .. } | Repr::Alias { .. } => {
                return Raw::poison(
                    "a recorded value is used outside recording: it has no value here \
                     (values of a recording live only inside Program::record)",
                    loc,
                )
            }
        }
    }
    match weft_ir::interp::eval_op(opcode, lanes, declared, &cs) {
        Ok(c) => Raw::imm(c),
        Err(m) => Raw::poison(m, loc),
    }
}

/// Runs `f` with the builder `bb` (lent by a control-flow op of the builder) put back into
/// recording `id`, inside a new scope. Returns `f`'s result.
pub(crate) fn lend<R>(id: u64, bb: &mut ProgramBuilder, f: impl FnOnce() -> R) -> R {
    let real = std::mem::replace(bb, ProgramBuilder::new(""));
    with_recorder(id, |r| {
        r.builder = Some(real);
        r.push_scope();
    });
    let out = f();
    let real = with_recorder(id, |r| {
        r.pop_scope();
        r.builder.take()
    })
    .flatten();
    if let Some(real) = real {
        *bb = real;
    }
    out
}

/// Runs `f` on recording `id` of this thread's stack (None if it is not there).
pub(crate) fn with_recorder<R>(id: u64, f: impl FnOnce(&mut Recorder) -> R) -> Option<R> {
    STACK
        .try_with(|s| {
            let mut st = s.borrow_mut();
            st.iter_mut().rfind(|r| r.id == id).map(|r| f(r))
        })
        .ok()
        .flatten()
}
