//! Recorded control flow (RapidMind's `IF/ELSE/ENDIF`, `FOR/ENDFOR`, `WHILE/ENDWHILE`,
//! `DO/UNTIL`): while recording, each construct runs its closures once to record the IR's
//! structured `if`, `for`, `while` or `do … until` (DESIGN §2); values assigned inside
//! are merged by the builder's SSA construction. In immediate mode the same functions run
//! ordinary Rust control flow on the immediate values.
//!
//! Rust lets a closure borrow a variable mutably only while no other closure borrows it.
//! So that both arms of `if_(c, || x += 1.0).else_(|| x -= 1.0)` can change `x`, the then
//! arm is recorded (or run) by `if_` itself and the else arm by `.else_`, as
//! `if c { … }` followed by `if !c { … }` on the same condition value (equivalent: the
//! condition is computed once, before either arm). A loop's condition and body closures
//! exist together, so a value both use is changed in the body with [`Value::assign`]
//! (which takes `&self`): `while_(|| d.lt(100.0), || d.assign(&d * 2.0))`.

use super::record::{lend, with_recorder, Raw, Top};
use super::value::{IntoValue, Value};
use crate::error::Error;
use std::panic::Location;
use weft_ir::builder::ProgramBuilder;
use weft_ir::Const;

/// The else part of an [`if_`]: [`If::else_`] records (or runs) the else arm. Dropping it
/// without `else_` is a plain `if` (nothing more happens).
///
/// ```
/// # use weft::dsl::*;
/// let p = Program::record(|| {
///     let x = In::<Value1f>::new();
///     let mut y = Value1f::new(0.0);
///     if_(x.gt(1.0), || {
///         y += 1.0;
///     })
///     .else_(|| {
///         y -= 1.0;
///     });
///     Out::from(y);
/// })
/// .unwrap();
/// assert!(p.text().contains("if"));
/// ```
pub struct If {
    state: IfState,
    location: &'static Location<'static>,
}

enum IfState {
    /// Immediate mode: run the else arm?
    Immediate { run_else: bool },
    /// Recorded: the condition's SSA value in recording `id`, made in region `scope`, and
    /// the must-assign state of the outputs at the end of the then arm.
    Recorded {
        id: u64,
        cond: weft_ir::Value,
        scope: u64,
        then_definite: Vec<bool>,
    },
    /// The condition failed (the error is recorded).
    Failed,
}

/// `if cond { then }`: recorded as the IR's `if` while recording (the closure runs once to
/// record the arm), run at once in immediate mode when `cond` is true. `cond` is a
/// `Value<bool, 1>` (or a reference to one, or a host `bool`). The returned [`If`] gives
/// the else arm with `.else_(|| …)`.
#[track_caller]
pub fn if_(cond: impl IntoValue<bool, 1>, then: impl FnOnce()) -> If {
    let location = Location::caller();
    let cond = cond.into_operand();
    let Some(mut rec) = Top::take() else {
        let c = cond.to_const().map(|c| c.lanes[0] != 0).ok();
        if c == Some(true) {
            then();
        }
        return If {
            state: IfState::Immediate {
                run_else: c == Some(false),
            },
            location,
        };
    };
    let c = match rec.value_of(&cond) {
        Ok(c) => c,
        Err(e) => {
            rec.fail(relocate(e, location));
            return If {
                state: IfState::Failed,
                location,
            };
        }
    };
    let id = rec.id;
    let scope = rec.current_scope();
    let state = match record_arm(rec, c, then, location) {
        Some(then_definite) => IfState::Recorded {
            id,
            cond: c,
            scope,
            then_definite,
        },
        None => IfState::Failed,
    };
    drop(cond);
    If { state, location }
}

impl If {
    /// The else arm: recorded as `if !cond { els }` right after the then arm's `if` (the
    /// same condition value), or run at once in immediate mode when the condition was false.
    #[track_caller]
    pub fn else_(self, els: impl FnOnce()) {
        let location = self.location;
        match self.state {
            IfState::Immediate { run_else } => {
                if run_else {
                    els();
                }
            }
            IfState::Failed => {}
            IfState::Recorded {
                id,
                cond,
                scope,
                then_definite,
            } => {
                let Some(mut rec) = Top::take() else {
                    return;
                };
                if rec.id != id || !rec.scope_open(scope) {
                    rec.fail(Error::record(
                        "else_ is used outside the recording region of its if_",
                    ));
                    return;
                }
                let before = rec.definite();
                let not_c = rec.b().not(cond);
                let Some(else_definite) = record_arm(rec, not_c, els, location) else {
                    return;
                };
                let after: Vec<bool> = before
                    .iter()
                    .enumerate()
                    .map(|(k, &b)| {
                        b || (then_definite.get(k).copied().unwrap_or(false)
                            && else_definite.get(k).copied().unwrap_or(false))
                    })
                    .collect();
                with_recorder(id, |r| r.set_definite(&after));
            }
        }
    }
}

/// The start of every recorded region: reserves variables, then takes the builder out of
/// the recording (user closures run against the thread-local context while the builder
/// records the region). Returns the recording's id, the outputs' must-assign state before the
/// region, and the builder; `None` (after recording the error) if the region cannot start.
#[track_caller]
fn begin_region(
    mut rec: Top,
    location: &'static Location<'static>,
) -> Option<(u64, Vec<bool>, ProgramBuilder)> {
    if let Err(e) = rec.prepare_region() {
        rec.fail(relocate(e, location));
        return None;
    }
    let id = rec.id;
    let before = rec.definite();
    let b = rec.builder.take()?;
    Some((id, before, b))
}

/// The end of every recorded region: gives the builder back to recording `id` with the
/// outputs' must-assign state `definite`.
fn end_region(id: u64, b: ProgramBuilder, definite: &[bool]) {
    with_recorder(id, |r| {
        r.builder = Some(b);
        r.set_definite(definite);
    });
}

/// Records `if c { arm }` (no else arm); returns the outputs' must-assign state at the end
/// of the arm (the state after the `if` is the one before it).
#[track_caller]
fn record_arm(
    rec: Top,
    c: weft_ir::Value,
    arm: impl FnOnce(),
    location: &'static Location<'static>,
) -> Option<Vec<bool>> {
    let (id, before, mut b) = begin_region(rec, location)?;
    let mut arm_definite = None;
    b.if_else(
        c,
        |bb| {
            lend(id, bb, arm);
            arm_definite = with_recorder(id, |r| r.definite());
            vec![]
        },
        |_| vec![],
    );
    end_region(id, b, &before);
    arm_definite
}

/// A recording error moved to `location` (the line of the construct).
fn relocate(e: Error, location: &'static Location<'static>) -> Error {
    match e {
        Error::Record { message, .. } => Error::Record { message, location },
        e => e,
    }
}

/// Counted loop `for i = lo; i < hi; i += 1 { body(i) }` with an `i32` counter (the IR's
/// `for`, exact trip semantics: no wrap-around). While recording, `body` runs once to
/// record the loop; values assigned in it are loop-carried. In immediate mode it runs
/// `hi − lo` times.
#[track_caller]
pub fn for_(
    lo: impl IntoValue<i32, 1>,
    hi: impl IntoValue<i32, 1>,
    body: impl FnMut(Value<i32, 1>),
) {
    for_step(lo, hi, 1, body);
}

/// Counted loop `for i = lo; i < hi; i += step { body(i) }` (a step ≤ 0 runs nothing; the
/// loop stops before the counter would pass `i32::MAX`). See [`for_`].
#[track_caller]
pub fn for_step(
    lo: impl IntoValue<i32, 1>,
    hi: impl IntoValue<i32, 1>,
    step: impl IntoValue<i32, 1>,
    mut body: impl FnMut(Value<i32, 1>),
) {
    let location = Location::caller();
    let (lo, hi, step) = (lo.into_operand(), hi.into_operand(), step.into_operand());
    let Some(mut rec) = Top::take() else {
        let get = |r: &Raw| r.to_const().map(|c| c.lanes[0] as u32 as i32);
        if let (Ok(lo), Ok(hi), Ok(step)) = (get(&lo), get(&hi), get(&step)) {
            let mut i = lo;
            while step > 0 && i < hi {
                body(Value::from_raw(Raw::imm(Const::i32(i))));
                match i.checked_add(step) {
                    Some(n) => i = n,
                    None => break,
                }
            }
        }
        return;
    };
    let mut vals = Vec::new();
    for r in [&lo, &hi, &step] {
        match rec.value_of(r) {
            Ok(v) => vals.push(v),
            Err(e) => {
                rec.fail(relocate(e, location));
                return;
            }
        }
    }
    let Some((id, before, mut b)) = begin_region(rec, location) else {
        return;
    };
    b.for_range(vals[0], vals[1], vals[2], |bb, iv| {
        lend(id, bb, || {
            if let Some(i) = with_recorder(id, |r| r.new_raw(iv)) {
                body(Value::from_raw(i));
            }
        });
    });
    end_region(id, b, &before);
}

/// `while cond() { body() }` (the IR's `while`): the condition closure gives a
/// `Value<bool, 1>` and sees the loop-carried values; values assigned in `body` are
/// loop-carried (change a value the condition also reads with [`Value::assign`], see the
/// module docs). Immediate mode runs the loop on the host (stopping if the condition fails
/// to compute).
#[track_caller]
pub fn while_<C: IntoValue<bool, 1>>(mut cond: impl FnMut() -> C, mut body: impl FnMut()) {
    let location = Location::caller();
    let Some(rec) = Top::take() else {
        while cond()
            .into_operand()
            .to_const()
            .is_ok_and(|c| c.lanes[0] != 0)
        {
            body();
        }
        return;
    };
    let Some((id, before, mut b)) = begin_region(rec, location) else {
        return;
    };
    b.while_(
        |bb| lend(id, bb, || condition(id, cond(), location)),
        |bb| lend(id, bb, &mut body),
    );
    end_region(id, b, &before);
}

/// `do { body() } until cond()` (the IR's `do … until`): the body runs at least once; the
/// condition sees the values the body assigned; the loop ends when it is true. Immediate
/// mode runs the loop on the host.
#[track_caller]
pub fn do_until<C: IntoValue<bool, 1>>(mut body: impl FnMut(), mut cond: impl FnMut() -> C) {
    let location = Location::caller();
    let Some(rec) = Top::take() else {
        loop {
            body();
            let c = cond().into_operand().to_const();
            if !c.is_ok_and(|c| c.lanes[0] == 0) {
                break;
            }
        }
        return;
    };
    let Some((id, before, mut b)) = begin_region(rec, location) else {
        return;
    };
    let mut after_body = None;
    b.do_until(
        |bb| {
            lend(id, bb, &mut body);
            after_body = with_recorder(id, |r| r.definite());
        },
        |bb| lend(id, bb, || condition(id, cond(), location)),
    );
    // The body runs at least once: what it assigns on every path is assigned after.
    let after = after_body.unwrap_or(before);
    end_region(id, b, &after);
}

/// The SSA value of a loop condition (a `false` constant after an error).
fn condition(
    id: u64,
    c: impl IntoValue<bool, 1>,
    location: &'static Location<'static>,
) -> weft_ir::Value {
    let c = c.into_operand();
    let v = with_recorder(id, |r| match r.value_of(&c) {
        Ok(v) => v,
        Err(e) => {
            r.fail(relocate(e, location));
            r.b().bool(false)
        }
    });
    drop(c);
    v.unwrap_or(weft_ir::Value(0))
}
