//! The IR emitter: runs the math algorithms by appending their basic ops to a region of a
//! program (constants shared within a region scope, `if` ops for the rare slow paths).

use super::emit::Emit;
use crate::konst::{canon, Const};
use crate::opcode::Opcode;
use crate::program::{Imm, Loc, Program, Region, Value};
use crate::types::{ScalarType, Type};
use std::collections::HashMap;

/// Appends ops to region `cur` of a program; every op gets location `loc`.
///
/// Constants are emitted once per scope: a scope is a region being filled (see
/// [`IrEmitter::push_scope`]); a constant emitted in an enclosing region is reused inside
/// nested regions, where it is visible.
pub struct IrEmitter<'p> {
    prog: &'p mut Program,
    cur: Region,
    loc: Loc,
    consts: Vec<HashMap<(ScalarType, u64), Value>>,
}

impl<'p> IrEmitter<'p> {
    /// An emitter appending to region `r` of `prog`, with one constant scope open.
    pub fn new(prog: &'p mut Program, r: Region, loc: Loc) -> IrEmitter<'p> {
        IrEmitter {
            prog,
            cur: r,
            loc,
            consts: vec![HashMap::new()],
        }
    }

    /// The program being appended to.
    pub fn program(&mut self) -> &mut Program {
        self.prog
    }

    /// Sets the region new ops are appended to (a region nested in or equal to the current
    /// scope's; open a scope with [`IrEmitter::push_scope`] when entering a nested region).
    pub fn set_region(&mut self, r: Region) {
        self.cur = r;
    }

    /// Sets the location given to new ops.
    pub fn set_loc(&mut self, loc: Loc) {
        self.loc = loc;
    }

    /// Opens a constant scope (on entering a nested region).
    pub fn push_scope(&mut self) {
        self.consts.push(HashMap::new());
    }

    /// Closes the innermost constant scope (on leaving a nested region).
    pub fn pop_scope(&mut self) {
        self.consts.pop();
    }

    fn emit(&mut self, opcode: Opcode, args: Vec<Value>, imm: Imm, ty: ScalarType) -> Value {
        let op = self
            .prog
            .new_op(opcode, args, imm, &[Type::scalar(ty)], vec![]);
        self.prog.set_op_loc(op, self.loc);
        self.prog.append(self.cur, op);
        self.prog.op(op).results[0]
    }

    /// Extracts lane `lane` of tuple `t`.
    pub fn extract(&mut self, t: Value, lane: u8) -> Value {
        let s = self.prog.ty(t).elem_scalar();
        self.emit(Opcode::Extract, vec![t], Imm::Lanes(vec![lane]), s)
    }

    /// Builds a tuple of the scalar values `lanes` (2 to 4 of one type).
    pub fn tuple(&mut self, lanes: &[Value]) -> Value {
        let s = self.prog.ty(lanes[0]).elem_scalar();
        let ty = Type::tuple(s, lanes.len() as u8).expect("2 to 4 lanes");
        let op = self
            .prog
            .new_op(Opcode::Tuple, lanes.to_vec(), Imm::None, &[ty], vec![]);
        self.prog.set_op_loc(op, self.loc);
        self.prog.append(self.cur, op);
        self.prog.op(op).results[0]
    }
}

impl Emit for IrEmitter<'_> {
    type V = Value;

    fn ty(&self, v: Value) -> ScalarType {
        self.prog.ty(v).elem_scalar()
    }

    fn konst(&mut self, s: ScalarType, bits: u64) -> Value {
        let bits = canon(s, bits);
        if let Some(&v) = self.consts.iter().rev().find_map(|m| m.get(&(s, bits))) {
            return v;
        }
        let v = self.emit(Opcode::Const, vec![], Imm::Const(Const::scalar(s, bits)), s);
        if let Some(top) = self.consts.last_mut() {
            top.insert((s, bits), v);
        }
        v
    }

    fn op(&mut self, op: Opcode, args: &[Value]) -> Value {
        let ty = match op {
            Opcode::Eq | Opcode::Ne | Opcode::Lt | Opcode::Le | Opcode::Gt | Opcode::Ge => {
                ScalarType::Bool
            }
            _ => self.ty(args[0]),
        };
        self.emit(op, args.to_vec(), Imm::None, ty)
    }

    fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.emit(Opcode::Select, vec![c, a, b], Imm::None, ty)
    }

    fn cast(&mut self, a: Value, to: ScalarType) -> Value {
        self.emit(Opcode::Cast, vec![a], Imm::None, to)
    }

    fn bitcast(&mut self, a: Value, to: ScalarType) -> Value {
        self.emit(Opcode::Bitcast, vec![a], Imm::None, to)
    }

    fn if_else<const N: usize>(
        &mut self,
        c: Value,
        then: impl FnOnce(&mut Self) -> [Value; N],
        els: impl FnOnce(&mut Self) -> [Value; N],
    ) -> [Value; N] {
        let outer = self.cur;
        let arm = |e: &mut Self, f: &mut dyn FnMut(&mut Self) -> [Value; N]| {
            let r = e.prog.new_region();
            e.cur = r;
            e.push_scope();
            let vals = f(e);
            e.pop_scope();
            let y = e
                .prog
                .new_op(Opcode::Yield, vals.to_vec(), Imm::None, &[], vec![]);
            e.prog.set_op_loc(y, e.loc);
            e.prog.append(r, y);
            (r, vals)
        };
        let mut then = Some(then);
        let mut els = Some(els);
        let (rt, tv) = arm(self, &mut |e| (then.take().expect("once"))(e));
        let (re, _) = arm(self, &mut |e| (els.take().expect("once"))(e));
        self.cur = outer;
        let types: Vec<Type> = tv.iter().map(|&v| self.prog.ty(v)).collect();
        let op = self
            .prog
            .new_op(Opcode::If, vec![c], Imm::None, &types, vec![rt, re]);
        self.prog.set_op_loc(op, self.loc);
        self.prog.append(outer, op);
        let res = self.prog.op(op).results.clone();
        std::array::from_fn(|i| res[i])
    }
}
