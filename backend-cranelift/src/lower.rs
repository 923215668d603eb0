//! Lowering of a verified weft program to one CLIF function in the kernel ABI (docs/abi.md):
//! blocks of 8 elements as SIMD lanes, uniform values kept scalar, divergent control flow as
//! masks, loops that run while any lane is active, gathers with boundary modes.

use crate::abi::{Layout, BLOCK};
use crate::Libs;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{self, types as T, BlockArg, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;
use weft_ir::opcode::Opcode;
use weft_ir::uniform::uniform_values_with;
use weft_ir::{Boundary, Const, Imm, Module, ParamKind, Program, Region, ScalarType, Type, Value};

mod group;

type CV = ir::Value;

/// A lowered weft value.
#[derive(Clone, Debug)]
enum LV {
    /// Uniform: one scalar per tuple lane.
    U(Vec<CV>),
    /// Varying: per tuple lane, one vector (32-bit class) or two (64-bit class).
    V(Vec<Vec<CV>>),
    /// An array parameter (index into [`Lowerer::arrays`]).
    Array(usize),
}

struct ArrayInfo {
    planes: Vec<CV>,
    /// Extents (i64), as given.
    dims: Vec<CV>,
    /// max(extent, 1) and that minus one, computed once in the entry block.
    safe: Vec<(CV, CV)>,
    elem: ScalarType,
    boundary: Boundary,
    /// A work-group's shared array: one thread runs the whole work-group (MCUDA), so its
    /// atomics need no atomic instruction.
    local: bool,
}

struct Frame<'p> {
    p: &'p Program,
    vals: Vec<Option<LV>>,
    uni: Vec<bool>,
    /// Kernels: varying values kept per work-item in stack slots across a barrier.
    spill: std::collections::HashMap<Value, Vec<ir::StackSlot>>,
    /// Consecutive-lane facts for 1-D reads (`coord_roots`): per value, whether it is the
    /// root of a read's coordinate, and once lowered, its flag "lane k is lane 0 + k".
    roots: Vec<bool>,
    consec: Vec<Option<CV>>,
    /// Top-level uniform ops lowered once before the block loop (map programs), by op.
    hoisted: Vec<bool>,
}

impl<'p> Frame<'p> {
    fn new(p: &'p Program, uni: Vec<bool>) -> Frame<'p> {
        let roots = if p.kind == weft_ir::ProgramKind::Map {
            coord_roots(p, &uni)
        } else {
            // Kernels run work-items in loops split at barriers: a flag computed for one
            // work-item must not be used for another.
            vec![false; p.num_values()]
        };
        Frame {
            p,
            vals: vec![None; p.num_values()],
            uni,
            spill: Default::default(),
            roots,
            consec: vec![None; p.num_values()],
            hoisted: vec![false; p.num_ops()],
        }
    }
}

/// The root of a 1-D read coordinate `v`: the varying value it is made from by adding or
/// subtracting uniform values (a varying `v` whose lanes are consecutive makes every value
/// of the chain consecutive, modulo wrap-around, which the read's range check excludes).
fn coord_root(p: &Program, uni: &[bool], mut v: Value) -> Value {
    loop {
        let weft_ir::ValueDef::Result(op, _) = p.value(v).def else {
            return v;
        };
        let d = p.op(op);
        let next = match d.opcode {
            Opcode::Add if uni[d.args[1].index()] => d.args[0],
            Opcode::Add if uni[d.args[0].index()] => d.args[1],
            Opcode::Sub if uni[d.args[1].index()] => d.args[0],
            _ => return v,
        };
        if uni[next.index()] {
            return v;
        }
        v = next;
    }
}

/// Per value of `p`: whether it is the root ([`coord_root`]) of a varying i32 coordinate
/// (scalar or tuple) of a read. A scalar root's flag is computed where it is defined; a
/// tuple's is known only for `index` (its block lies in one row).
fn coord_roots(p: &Program, uni: &[bool]) -> Vec<bool> {
    let mut roots = vec![false; p.num_values()];
    p.walk(&mut |op| {
        let d = p.op(op);
        if d.opcode == Opcode::Read {
            let c = d.args[1];
            if !uni[c.index()] && p.ty(c).elem_scalar() == ScalarType::I32 {
                roots[coord_root(p, uni, c).index()] = true;
            }
        }
    });
    roots
}

/// True if `p` has a `read_offset`.
fn uses_read_offset(p: &Program) -> bool {
    let mut any = false;
    p.walk(&mut |op| any |= p.op(op).opcode == Opcode::ReadOffset);
    any
}

/// The rank of `p`'s `index`, or of a `read_offset`'s offset (0 when it has neither).
fn index_rank(p: &Program) -> usize {
    let mut rank = 0;
    p.walk(&mut |op| {
        let d = p.op(op);
        match d.opcode {
            Opcode::Index => rank = elem_of(p.ty(d.results[0])).1,
            Opcode::ReadOffset => rank = elem_of(p.ty(d.args[1])).1,
            _ => {}
        }
    });
    rank
}

/// Why lowering failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cranelift lowering of @{program}: {message}")]
pub struct LowerError {
    /// The program.
    pub program: String,
    /// What went wrong.
    pub message: String,
}

pub(crate) struct Lowerer<'a, 'b> {
    m: &'a Module,
    b: &'a mut FunctionBuilder<'b>,
    libs: &'a Libs,
    ctx: CV,
    base: CV,
    arrays: Vec<ArrayInfo>,
    program: String,
    launch_word: usize,
    /// The lane numbers [0, 1, …, BLOCK-1] as i32x4 vectors, built once in the entry block.
    iota: Option<Vec<CV>>,
    /// A 2-D/3-D launch that uses `index`: the block base's coordinates (carried by the
    /// block loop, so no block divides) and the launch's extents (each at least 1).
    first: Option<(Vec<CV>, Vec<CV>)>,
    /// In the row loop of the block loop (whole blocks inside one row of the launch): per
    /// `read_offset` op, each plane's address of the element its block's lane 0 reads
    /// (carried by the loop, advanced a block at a time). Empty elsewhere: offset reads then
    /// gather.
    offset_addr: std::collections::HashMap<weft_ir::Op, Vec<CV>>,
    /// Kernels: the work-group being lowered.
    group: Option<group::GroupState>,
    /// The launch watchdog (docs/abi.md): the abort flag's address, loaded in the entry
    /// block, and the cold block that returns; `None` when the program has no loop.
    abort: Option<(CV, ir::Block)>,
}

fn is64(s: ScalarType) -> bool {
    s.bits() == 64
}

/// CLIF type of a uniform scalar of `s`.
fn sty(s: ScalarType) -> ir::Type {
    match s {
        ScalarType::Bool => T::I8,
        ScalarType::F16 | ScalarType::F32 => T::F32,
        ScalarType::F64 => T::F64,
        ScalarType::I64 | ScalarType::U64 => T::I64,
        _ => T::I32,
    }
}

/// CLIF type of one vector part of a varying `s`.
fn vty(s: ScalarType) -> ir::Type {
    match s {
        ScalarType::F16 | ScalarType::F32 => T::F32X4,
        ScalarType::F64 => T::F64X2,
        ScalarType::I64 | ScalarType::U64 => T::I64X2,
        _ => T::I32X4,
    }
}

/// Whether a varying read of `s` may use whole-vector loads: the 32- and 64-bit number types,
/// whose registers hold exactly the stored bits.
fn contiguous_elem(s: ScalarType) -> bool {
    matches!(
        s,
        ScalarType::F32
            | ScalarType::I32
            | ScalarType::U32
            | ScalarType::F64
            | ScalarType::I64
            | ScalarType::U64
    )
}

/// Lanes of `s` one 128-bit vector holds.
fn per_vector(s: ScalarType) -> usize {
    if is64(s) {
        2
    } else {
        4
    }
}

/// 128-bit vectors one varying lane of `s` needs for a block of [`BLOCK`] elements.
fn parts(s: ScalarType) -> usize {
    BLOCK / per_vector(s)
}

fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(ir::Endianness::Little)
}

fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

fn elem_of(t: Type) -> (ScalarType, usize) {
    t.lanes()
        .map_or((ScalarType::F32, 1), |(s, n)| (s, n as usize))
}

impl<'a, 'b> Lowerer<'a, 'b> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, LowerError> {
        Err(LowerError {
            program: self.program.clone(),
            message: message.into(),
        })
    }

    // ---------------------------------------------------------------- small helpers

    fn iconst(&mut self, ty: ir::Type, v: i64) -> CV {
        self.b.ins().iconst(ty, v)
    }

    fn word(&mut self, w: usize) -> CV {
        let ctx = self.ctx;
        self.b.ins().load(T::I64, mem(), ctx, (w * 8) as i32)
    }

    /// Canonicalizes a 32-bit-class integer (scalar I32 or vector I32X4) to the width and
    /// signedness of `s` (narrow types are kept sign- or zero-extended).
    fn canon(&mut self, s: ScalarType, v: CV) -> CV {
        let w = s.bits();
        if !s.is_int() || w >= 32 {
            return v;
        }
        let sh = 32 - w as i64;
        if s.is_signed_int() {
            let t = self.b.ins().ishl_imm_s(v, sh);
            self.b.ins().sshr_imm_s(t, sh)
        } else {
            let ty = self.b.func.dfg.value_type(v);
            let mask = (1i64 << w) - 1;
            if ty.is_vector() {
                let k = self.iconst(T::I32, mask);
                let k = self.b.ins().splat(ty, k);
                self.b.ins().band(v, k)
            } else {
                self.b.ins().band_imm_s(v, mask)
            }
        }
    }

    fn zero_scalar(&mut self, ty: ir::Type) -> CV {
        match ty {
            T::F32 => self.b.ins().f32const(0.0),
            T::F64 => self.b.ins().f64const(0.0),
            t => self.iconst(t, 0),
        }
    }

    fn zero_of(&mut self, ty: ir::Type) -> CV {
        if ty.is_vector() {
            let z = self.zero_scalar(ty.lane_type());
            self.b.ins().splat(ty, z)
        } else {
            self.zero_scalar(ty)
        }
    }

    /// A uniform scalar lane of `s` made into a varying lane (splat; bool 0/1 → mask).
    fn splat_lane(&mut self, s: ScalarType, v: CV) -> Vec<CV> {
        let v = if s == ScalarType::Bool {
            let w = self.b.ins().uextend(T::I32, v);
            self.b.ins().ineg(w)
        } else {
            v
        };
        let vec = self.b.ins().splat(vty(s), v);
        vec![vec; parts(s)]
    }

    fn varying(&mut self, s: ScalarType, lv: &LV) -> Vec<Vec<CV>> {
        match lv {
            LV::V(v) => v.clone(),
            LV::U(u) => u
                .clone()
                .into_iter()
                .map(|x| self.splat_lane(s, x))
                .collect(),
            LV::Array(_) => Vec::new(),
        }
    }

    /// Converts `lv` to the representation the analysis chose (uniform or varying).
    fn fix(&mut self, ty: Type, uniform: bool, lv: LV) -> Result<LV, LowerError> {
        match (&lv, uniform) {
            (LV::U(_), false) => {
                let (s, _) = elem_of(ty);
                Ok(LV::V(self.varying(s, &lv)))
            }
            (LV::V(_), true) => self.err("internal: a uniform value was computed as varying"),
            _ => Ok(lv),
        }
    }

    /// Scalar lane `j` (0..BLOCK) of a varying lane of `s`, in uniform-scalar representation.
    fn extract(&mut self, s: ScalarType, lane: &[CV], j: usize) -> CV {
        let (part, idx) = (j / per_vector(s), j % per_vector(s));
        let x = self.b.ins().extractlane(lane[part], idx as u8);
        if s == ScalarType::Bool {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
        } else {
            x
        }
    }

    /// Builds a varying lane of `s` from [`BLOCK`] uniform-representation scalars.
    fn build(&mut self, s: ScalarType, xs: &[CV]) -> Vec<CV> {
        let xs: Vec<CV> = xs
            .iter()
            .map(|&x| {
                if s == ScalarType::Bool {
                    let w = self.b.ins().uextend(T::I32, x);
                    self.b.ins().ineg(w)
                } else {
                    x
                }
            })
            .collect();
        xs.chunks(per_vector(s))
            .map(|c| {
                let mut v = self.b.ins().splat(vty(s), c[0]);
                for (k, &x) in c.iter().enumerate().skip(1) {
                    v = self.b.ins().insertlane(v, x, k as u8);
                }
                v
            })
            .collect()
    }

    fn call(&mut self, f: ir::FuncRef, args: &[CV]) -> CV {
        let inst = self.b.ins().call(f, args);
        self.b.inst_results(inst)[0]
    }

    /// Rounds an f32 (scalar) holding any value to the nearest f16 value (as f32).
    fn round_f16_scalar(&mut self, v: CV) -> CV {
        let ty = self.b.func.dfg.value_type(v);
        let d = if ty == T::F64 {
            v
        } else {
            self.b.ins().fpromote(T::F64, v)
        };
        let f = self.libs.round_f16;
        self.call(f, &[d])
    }

    // ---------------------------------------------------------------- scalar semantics

    /// One lane of a pure op on uniform-representation scalars (exact DESIGN §3 semantics).
    fn scalar_op(
        &mut self,
        op: Opcode,
        s: ScalarType,
        to: ScalarType,
        a: &[CV],
    ) -> Result<CV, LowerError> {
        use Opcode as O;
        let ins_cmp = |op: Opcode, signed: bool| -> IntCC {
            match (op, signed) {
                (O::Eq, _) => IntCC::Equal,
                (O::Ne, _) => IntCC::NotEqual,
                (O::Lt, true) => IntCC::SignedLessThan,
                (O::Lt, false) => IntCC::UnsignedLessThan,
                (O::Le, true) => IntCC::SignedLessThanOrEqual,
                (O::Le, false) => IntCC::UnsignedLessThanOrEqual,
                (O::Gt, true) => IntCC::SignedGreaterThan,
                (O::Gt, false) => IntCC::UnsignedGreaterThan,
                (O::Ge, true) => IntCC::SignedGreaterThanOrEqual,
                _ => IntCC::UnsignedGreaterThanOrEqual,
            }
        };
        if s.is_float() {
            let basic = if op == O::Fma && s == ScalarType::F16 {
                None // f16 fma rounds once, from the exact value: a helper does it
            } else {
                self.float_basic(op, a)
            };
            let r = if let Some(r) = basic {
                r
            } else {
                match op {
                    O::Fma => {
                        let f = self.libs.fma_f16;
                        return Ok(self.call(f, a));
                    }
                    O::Rem => {
                        let f = if s == ScalarType::F64 {
                            self.libs.fmod64
                        } else {
                            self.libs.fmod32
                        };
                        self.call(f, a)
                    }
                    O::Round => {
                        let ty = sty(s);
                        let t = self.b.ins().trunc(a[0]);
                        let d = self.b.ins().fsub(a[0], t);
                        let d = self.b.ins().fabs(d);
                        let half = if ty == T::F64 {
                            self.b.ins().f64const(0.5)
                        } else {
                            self.b.ins().f32const(0.5)
                        };
                        let big = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, d, half);
                        let one = if ty == T::F64 {
                            self.b.ins().f64const(1.0)
                        } else {
                            self.b.ins().f32const(1.0)
                        };
                        let one = self.b.ins().fcopysign(one, a[0]);
                        let up = self.b.ins().fadd(t, one);
                        self.b.ins().select(big, up, t)
                    }
                    O::Eq | O::Ne | O::Lt | O::Le | O::Gt | O::Ge => {
                        let cc = float_cc(op);
                        return Ok(self.b.ins().fcmp(cc, a[0], a[1]));
                    }
                    O::Cast => return Ok(self.cast(s, to, a[0])),
                    O::Bitcast => return Ok(self.bitcast(s, to, a[0])),
                    O::Exp
                    | O::Exp2
                    | O::Log
                    | O::Log2
                    | O::Sin
                    | O::Cos
                    | O::Tan
                    | O::Pow
                    | O::Atan2
                    | O::Rsqrt => {
                        return self.err(format!(
                            "`{}` reached lowering: math functions are expanded first",
                            op.mnemonic()
                        ))
                    }
                    _ => return self.err(format!("`{}` on {s} is not lowered", op.mnemonic())),
                }
            };
            // f16 arithmetic is computed in f32 and rounded once (exact for + - * / sqrt).
            return Ok(
                if s == ScalarType::F16
                    && !matches!(
                        op,
                        O::Neg
                            | O::Abs
                            | O::Floor
                            | O::Ceil
                            | O::Trunc
                            | O::Round
                            | O::Min
                            | O::Max
                            | O::Rem
                    )
                {
                    self.round_f16_scalar(r)
                } else {
                    r
                },
            );
        }
        if s == ScalarType::Bool {
            return Ok(match op {
                O::And | O::Min => self.b.ins().band(a[0], a[1]),
                O::Or | O::Max => self.b.ins().bor(a[0], a[1]),
                O::Xor | O::Ne => self.b.ins().bxor(a[0], a[1]),
                O::Eq => self.b.ins().icmp(IntCC::Equal, a[0], a[1]),
                O::Not => self.b.ins().bxor_imm_s(a[0], 1),
                O::Cast => self.cast(s, to, a[0]),
                _ => return self.err(format!("`{}` on bool is not lowered", op.mnemonic())),
            });
        }
        // Integers.
        let signed = s.is_signed_int();
        let ty = sty(s);
        let w = s.bits() as i64;
        let r = match op {
            O::Add => self.b.ins().iadd(a[0], a[1]),
            O::Sub => self.b.ins().isub(a[0], a[1]),
            O::Mul => self.b.ins().imul(a[0], a[1]),
            O::Neg => self.b.ins().ineg(a[0]),
            O::Abs if signed => self.b.ins().iabs(a[0]),
            O::Abs => a[0],
            O::Min if signed => self.b.ins().smin(a[0], a[1]),
            O::Min => self.b.ins().umin(a[0], a[1]),
            O::Max if signed => self.b.ins().smax(a[0], a[1]),
            O::Max => self.b.ins().umax(a[0], a[1]),
            O::And => self.b.ins().band(a[0], a[1]),
            O::Or => self.b.ins().bor(a[0], a[1]),
            O::Xor => self.b.ins().bxor(a[0], a[1]),
            O::Not => self.b.ins().bnot(a[0]),
            O::Shl | O::Shr => {
                let amt = self.b.ins().band_imm_s(a[1], w - 1);
                match (op, signed) {
                    (O::Shl, _) => self.b.ins().ishl(a[0], amt),
                    (_, true) => self.b.ins().sshr(a[0], amt),
                    _ => self.b.ins().ushr(a[0], amt),
                }
            }
            O::Div | O::Rem => {
                // RISC-V rules: x/0 = all ones, x%0 = x, MIN/-1 = MIN, MIN%-1 = 0; the divisor
                // is made safe first so the hardware never traps.
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, a[1], 0);
                let full = w == ty.bits() as i64;
                let ovf = if signed && full {
                    let min = if w == 64 { i64::MIN } else { i32::MIN as i64 };
                    let is_min = self.b.ins().icmp_imm_s(IntCC::Equal, a[0], min);
                    let is_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, a[1], -1);
                    Some(self.b.ins().band(is_min, is_m1))
                } else {
                    None
                };
                let bad = match ovf {
                    Some(o) => self.b.ins().bor(zero, o),
                    None => zero,
                };
                let one = self.iconst(ty, 1);
                let d = self.b.ins().select(bad, one, a[1]);
                let q = match (op, signed) {
                    (O::Div, true) => self.b.ins().sdiv(a[0], d),
                    (O::Div, false) => self.b.ins().udiv(a[0], d),
                    (_, true) => self.b.ins().srem(a[0], d),
                    _ => self.b.ins().urem(a[0], d),
                };
                // With divisor 1: q = a (the MIN/-1 answer for div), r = 0 (for rem).
                let by_zero = if op == O::Div {
                    self.iconst(ty, -1)
                } else {
                    a[0]
                };
                self.b.ins().select(zero, by_zero, q)
            }
            O::Eq | O::Ne | O::Lt | O::Le | O::Gt | O::Ge => {
                return Ok(self.b.ins().icmp(ins_cmp(op, signed), a[0], a[1]));
            }
            O::Cast => return Ok(self.cast(s, to, a[0])),
            O::Bitcast => return Ok(self.bitcast(s, to, a[0])),
            _ => return self.err(format!("`{}` on {s} is not lowered", op.mnemonic())),
        };
        Ok(self.canon(s, r))
    }

    fn f16_to_bits(&mut self, x: CV) -> CV {
        let f = self.libs.f16_to_bits;
        self.call(f, &[x])
    }

    fn f16_from_bits(&mut self, x: CV) -> CV {
        let f = self.libs.f16_from_bits;
        self.call(f, &[x])
    }

    /// Integer (uniform repr) of `s` widened to i64 by its signedness.
    fn int_to_i64(&mut self, s: ScalarType, v: CV) -> CV {
        match sty(s) {
            T::I64 => v,
            T::I8 => self.b.ins().uextend(T::I64, v),
            _ if s.is_signed_int() => self.b.ins().sextend(T::I64, v),
            _ => self.b.ins().uextend(T::I64, v),
        }
    }

    /// `cast` of one uniform-representation lane.
    fn cast(&mut self, from: ScalarType, to: ScalarType, v: CV) -> CV {
        use ScalarType as S;
        if from == to {
            return v;
        }
        if to == S::Bool {
            return if from.is_float() {
                let z = self.zero_scalar(sty(from));
                self.b.ins().fcmp(FloatCC::NotEqual, v, z)
            } else {
                self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
            };
        }
        if from.is_float() {
            if to.is_float() {
                return match (sty(from), to) {
                    (T::F32, S::F64) => self.b.ins().fpromote(T::F64, v),
                    (T::F64, S::F32) => self.b.ins().fdemote(T::F32, v),
                    (_, S::F16) => self.round_f16_scalar(v),
                    _ => v, // f16 -> f32: the value is already exact
                };
            }
            let r = match (to.bits(), to.is_signed_int()) {
                (64, true) => self.b.ins().fcvt_to_sint_sat(T::I64, v),
                (64, false) => self.b.ins().fcvt_to_uint_sat(T::I64, v),
                (_, true) => self.b.ins().fcvt_to_sint_sat(T::I32, v),
                (_, false) => self.b.ins().fcvt_to_uint_sat(T::I32, v),
            };
            if to.bits() < 32 {
                let (lo, hi) = if to.is_signed_int() {
                    (-(1i64 << (to.bits() - 1)), (1i64 << (to.bits() - 1)) - 1)
                } else {
                    (0, (1i64 << to.bits()) - 1)
                };
                let lo = self.iconst(T::I32, lo);
                let hi = self.iconst(T::I32, hi);
                if to.is_signed_int() {
                    let r = self.b.ins().smax(r, lo);
                    return self.b.ins().smin(r, hi);
                }
                return self.b.ins().umin(r, hi);
            }
            return r;
        }
        // From an integer or bool.
        let wide = self.int_to_i64(from, v);
        let src_signed = from.is_signed_int();
        match to {
            S::F32 | S::F64 => {
                let ft = if to == S::F32 { T::F32 } else { T::F64 };
                if src_signed {
                    self.b.ins().fcvt_from_sint(ft, wide)
                } else {
                    self.b.ins().fcvt_from_uint(ft, wide)
                }
            }
            S::F16 => {
                // Exact in f64 below 2^53; larger values are infinite in f16 either way.
                let d = if src_signed {
                    self.b.ins().fcvt_from_sint(T::F64, wide)
                } else {
                    self.b.ins().fcvt_from_uint(T::F64, wide)
                };
                self.round_f16_scalar(d)
            }
            _ if to.bits() == 64 => wide,
            _ => {
                let n = self.b.ins().ireduce(T::I32, wide);
                self.canon(to, n)
            }
        }
    }

    /// `bitcast` of one uniform-representation lane (same lane width).
    fn bitcast(&mut self, from: ScalarType, to: ScalarType, v: CV) -> CV {
        use ScalarType as S;
        match (from, to) {
            (S::F16, _) => {
                let b = self.f16_to_bits(v);
                self.canon(to, b)
            }
            (_, S::F16) => {
                let b = self.b.ins().band_imm_s(v, 0xffff);
                self.f16_from_bits(b)
            }
            _ if from.is_float() || to.is_float() => {
                self.b.ins().bitcast(sty(to), MemFlagsData::new(), v)
            }
            _ => self.canon(to, v),
        }
    }

    // ---------------------------------------------------------------- vector fast paths

    /// Float ops that are one CLIF instruction on scalars and vectors alike.
    fn float_basic(&mut self, op: Opcode, a: &[CV]) -> Option<CV> {
        use Opcode as O;
        Some(match op {
            O::Add => self.b.ins().fadd(a[0], a[1]),
            O::Sub => self.b.ins().fsub(a[0], a[1]),
            O::Mul => self.b.ins().fmul(a[0], a[1]),
            O::Div => self.b.ins().fdiv(a[0], a[1]),
            O::Neg => self.b.ins().fneg(a[0]),
            O::Abs => self.b.ins().fabs(a[0]),
            O::Min => self.b.ins().fmin(a[0], a[1]),
            O::Max => self.b.ins().fmax(a[0], a[1]),
            O::Sqrt => self.b.ins().sqrt(a[0]),
            O::Fma => self.b.ins().fma(a[0], a[1], a[2]),
            O::Floor => self.b.ins().floor(a[0]),
            O::Ceil => self.b.ins().ceil(a[0]),
            O::Trunc => self.b.ins().trunc(a[0]),
            _ => return None,
        })
    }

    /// One part of a varying op on vectors, where Cranelift has the operation; `None` asks
    /// for per-lane scalar code.
    fn vector_op(&mut self, op: Opcode, s: ScalarType, to: ScalarType, a: &[CV]) -> Option<CV> {
        use Opcode as O;
        if matches!(s, ScalarType::F32 | ScalarType::F64) {
            if let Some(r) = self.float_basic(op, a) {
                return Some(r);
            }
            return Some(match op {
                O::Eq | O::Ne | O::Lt | O::Le | O::Gt | O::Ge if s == ScalarType::F32 => {
                    let cc = float_cc(op);
                    self.b.ins().fcmp(cc, a[0], a[1])
                }
                O::Cast if s == ScalarType::F32 && to == ScalarType::I32 => {
                    self.b.ins().fcvt_to_sint_sat(T::I32X4, a[0])
                }
                _ => return None,
            });
        }
        let int32 = matches!(
            s,
            ScalarType::I8
                | ScalarType::I16
                | ScalarType::I32
                | ScalarType::U8
                | ScalarType::U16
                | ScalarType::U32
        );
        if int32 {
            let signed = s.is_signed_int();
            let r = match op {
                O::Add => self.b.ins().iadd(a[0], a[1]),
                O::Sub => self.b.ins().isub(a[0], a[1]),
                O::Mul => self.b.ins().imul(a[0], a[1]),
                O::Neg => self.b.ins().ineg(a[0]),
                O::Abs if signed => self.b.ins().iabs(a[0]),
                O::Abs => a[0],
                O::And => self.b.ins().band(a[0], a[1]),
                O::Or => self.b.ins().bor(a[0], a[1]),
                O::Xor => self.b.ins().bxor(a[0], a[1]),
                O::Not => self.b.ins().bnot(a[0]),
                O::Min if signed => self.b.ins().smin(a[0], a[1]),
                O::Min => self.b.ins().umin(a[0], a[1]),
                O::Max if signed => self.b.ins().smax(a[0], a[1]),
                O::Max => self.b.ins().umax(a[0], a[1]),
                O::Eq => return Some(self.b.ins().icmp(IntCC::Equal, a[0], a[1])),
                O::Ne => return Some(self.b.ins().icmp(IntCC::NotEqual, a[0], a[1])),
                O::Lt | O::Le | O::Gt | O::Ge if signed => {
                    let cc = match op {
                        O::Lt => IntCC::SignedLessThan,
                        O::Le => IntCC::SignedLessThanOrEqual,
                        O::Gt => IntCC::SignedGreaterThan,
                        _ => IntCC::SignedGreaterThanOrEqual,
                    };
                    return Some(self.b.ins().icmp(cc, a[0], a[1]));
                }
                O::Cast if s == ScalarType::I32 && to == ScalarType::F32 => {
                    return Some(self.b.ins().fcvt_from_sint(T::F32X4, a[0]))
                }
                _ => return None,
            };
            return Some(self.canon(s, r));
        }
        if s == ScalarType::Bool {
            return Some(match op {
                O::And | O::Min => self.b.ins().band(a[0], a[1]),
                O::Or | O::Max => self.b.ins().bor(a[0], a[1]),
                O::Xor | O::Ne => self.b.ins().bxor(a[0], a[1]),
                O::Not => self.b.ins().bnot(a[0]),
                _ => return None,
            });
        }
        if matches!(s, ScalarType::I64 | ScalarType::U64) {
            return Some(match op {
                O::Add => self.b.ins().iadd(a[0], a[1]),
                O::Sub => self.b.ins().isub(a[0], a[1]),
                O::And => self.b.ins().band(a[0], a[1]),
                O::Or => self.b.ins().bor(a[0], a[1]),
                O::Xor => self.b.ins().bxor(a[0], a[1]),
                O::Not => self.b.ins().bnot(a[0]),
                _ => return None,
            });
        }
        None
    }

    /// An element-wise op on one tuple lane: scalar when all inputs are uniform, else vector
    /// fast path or per-lane scalar code.
    fn lanewise(
        &mut self,
        op: Opcode,
        s: ScalarType,
        to: ScalarType,
        args: &[LvLane],
        uniform: bool,
    ) -> Result<LvLane, LowerError> {
        if uniform {
            let xs: Vec<CV> = args
                .iter()
                .map(|a| match a {
                    LvLane::U(x) => *x,
                    LvLane::V(v) => v[0],
                })
                .collect();
            return Ok(LvLane::U(self.scalar_op(op, s, to, &xs)?));
        }
        let vs: Vec<Vec<CV>> = args
            .iter()
            .map(|a| match a {
                LvLane::U(x) => self.splat_lane(s, *x),
                LvLane::V(v) => v.clone(),
            })
            .collect();
        // Same vector count in and out (bool masks count as 32-bit lanes): try the vector
        // fast path on each part.
        if parts(s) == parts(to) {
            let mut out = Vec::new();
            for k in 0..parts(s) {
                let a: Vec<CV> = vs.iter().map(|v| v[k]).collect();
                match self.vector_op(op, s, to, &a) {
                    Some(r) => out.push(r),
                    None => break,
                }
            }
            if out.len() == parts(s) {
                return Ok(LvLane::V(out));
            }
        }
        // Per-lane scalar code.
        let mut res = Vec::with_capacity(BLOCK);
        for j in 0..BLOCK {
            let xs: Vec<CV> = vs.iter().map(|v| self.extract(s, v, j)).collect();
            res.push(self.scalar_op(op, s, to, &xs)?);
        }
        Ok(LvLane::V(self.build(to, &res)))
    }

    // ---------------------------------------------------------------- program lowering

    /// Lowers program `p` as the kernel body; writes the CLIF function into the builder.
    pub(crate) fn lower_kernel(
        m: &'a Module,
        p: &'a Program,
        b: &'a mut FunctionBuilder<'b>,
        libs: &'a Libs,
        layout: &Layout,
        whole_rows: bool,
    ) -> Result<(), LowerError> {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (ctx, begin, end) = (params[0], params[1], params[2]);
        let header = b.create_block();
        let base = b.append_block_param(header, T::I64);
        let body = b.create_block();
        let exit = b.create_block();
        let mut l = Lowerer {
            m,
            b,
            libs,
            ctx,
            base,
            arrays: Vec::new(),
            program: p.name.clone(),
            launch_word: layout.launch,
            iota: None,
            first: None,
            offset_addr: Default::default(),
            group: None,
            abort: None,
        };
        l.watchdog(p, layout);
        // Uniform parameters and array descriptors are loaded once, in the entry block.
        let uni_params: Vec<bool> = p
            .params
            .iter()
            .map(|x| x.kind != ParamKind::Varying)
            .collect();
        let uni = uniform_values_with(m, p, &uni_params);
        let mut frame = Frame::new(p, uni);
        l.bind_params(p, &mut frame, layout);
        // Loop-invariant setup: plane pointers and the lane numbers 0..4.
        let in_planes: Vec<Vec<CV>> = p
            .params
            .iter()
            .enumerate()
            .map(|(i, par)| match par.kind {
                ParamKind::Varying => {
                    let n = elem_of(p.ty(par.value)).1;
                    (0..n).map(|k| l.word(layout.params[i] + k)).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        let out_planes: Vec<Vec<CV>> = p
            .outputs
            .iter()
            .enumerate()
            .map(|(k, o)| {
                (0..elem_of(o.ty).1)
                    .map(|lane| l.word(layout.outputs[k] + lane))
                    .collect()
            })
            .collect();
        let iota = l.iota32();
        l.iota = Some(iota.clone());
        // Uniform top-level ops without regions (constants, `shape`, extents, arithmetic on
        // uniform parameters) are the same for every block: lowered once, here.
        for &op in &p.region(p.body).ops {
            let d = p.op(op);
            let ready = d.args.iter().all(|a| frame.vals[a.index()].is_some());
            let uniform = !d.results.is_empty() && d.results.iter().all(|r| frame.uni[r.index()]);
            if d.opcode.is_terminator() || !d.regions.is_empty() || !uniform || !ready {
                continue;
            }
            let results = l.op(&mut frame, op, &iota)?;
            for (&v, lv) in d.results.iter().zip(results) {
                l.set(&mut frame, v, lv)?;
            }
            frame.hoisted[op.index()] = true;
        }
        // Offset reads with a uniform offset known here: the offset's bytes, once.
        let mut offset_arrays = Vec::new();
        // Per offset read: its op, its array, and the offset's distance in bytes.
        let mut offset_reads: Vec<(weft_ir::Op, usize, CV)> = Vec::new();
        let mut offset_ops = Vec::new();
        p.walk(&mut |op| {
            if p.op(op).opcode == Opcode::ReadOffset {
                offset_ops.push(op);
            }
        });
        for op in offset_ops {
            let d = p.op(op);
            let (Some(LV::Array(ai)), Some(LV::U(offs))) = (
                frame.vals[d.args[0].index()].clone(),
                frame.vals[d.args[1].index()].clone(),
            ) else {
                continue;
            };
            let cs = elem_of(p.ty(d.args[1])).0;
            let delta = l.offset_bytes(ai, cs, &offs);
            offset_reads.push((op, ai, delta));
            if !offset_arrays.contains(&ai) {
                offset_arrays.push(ai);
            }
        }
        // A 2-D/3-D `index`: the coordinates of `begin`, divided once, then carried.
        let rank = index_rank(p);
        let (dims, wide) = if rank > 1 {
            let dims = l.launch_dims(rank);
            let wide = l.b.ins().icmp_imm_u(
                IntCC::UnsignedGreaterThanOrEqual,
                dims[rank - 1],
                BLOCK as i64,
            );
            (dims, Some(wide))
        } else {
            (Vec::new(), None)
        };
        let start = l.coords_of(begin, &dims);
        let carried: Vec<CV> = (0..start.len())
            .map(|_| l.b.append_block_param(header, T::I64))
            .collect();
        let mut args = vec![BlockArg::Value(begin)];
        args.extend(start.iter().map(|&c| BlockArg::Value(c)));
        l.b.ins().jump(header, &args);
        if rank > 1 {
            l.first = Some((carried.clone(), dims.clone()));
        }
        // Block loop: for base in (begin..end).step_by(BLOCK).
        l.b.switch_to_block(header);
        let more = l.b.ins().icmp(IntCC::SignedLessThan, base, end);
        l.b.ins().brif(more, body, &[], exit, &[]);
        l.b.switch_to_block(body);
        let control = has_control_flow(m, p);
        // A launch with offset reads: the body twice. Whole blocks inside one row of the
        // launch run a loop along the row (offset reads are plain vector loads at the row's
        // address, no test per block); the other blocks run the general body.
        // Per version: whether it is the row loop.
        // `whole_rows` (a stencil's interior variant run over ranges of whole blocks inside
        // one row each, `compile_interior`): the row loop alone.
        let versions: &[bool] = match (uses_read_offset(p), whole_rows) {
            (true, true) => &[true],
            (true, false) => &[true, false],
            (false, _) => &[false],
        };
        let joined = l.b.create_block();
        let blocks: Vec<ir::Block> = versions.iter().map(|_| l.b.create_block()).collect();
        // Where the block's row ends (the launch's end for a 1-D launch), for the row loop.
        let mut row_end = end;
        if versions[0] && rank > 1 {
            let left = l.b.ins().isub(dims[rank - 1], carried[rank - 1]);
            let in_row = l.b.ins().iadd(base, left);
            row_end = l.b.ins().smin(in_row, end);
        }
        if let [row_blk, other_blk] = blocks[..] {
            let last = l.b.ins().iadd_imm_s(base, BLOCK as i64);
            let ok = l.b.ins().icmp(IntCC::SignedLessThanOrEqual, last, row_end);
            l.b.ins().brif(ok, row_blk, &[], other_blk, &[]);
        } else {
            l.b.ins().jump(blocks[0], &[]);
        }
        for (&row, &blk) in versions.iter().zip(&blocks) {
            l.b.switch_to_block(blk);
            l.offset_addr.clear();
            // Facts computed while lowering one version name its values: none carry over.
            frame.consec.iter_mut().for_each(|c| *c = None);
            let (outer_base, outer_first) = (l.base, l.first.clone());
            let mut row_loop = None;
            if row {
                // The row loop: `b` from `base` by whole blocks while they fit in the row,
                // carrying each offset read's addresses (one per plane).
                let first = if rank > 1 {
                    carried.clone()
                } else {
                    vec![base]
                };
                let mut rows = std::collections::HashMap::new();
                for &ai in &offset_arrays {
                    rows.insert(ai, l.block_rows(ai, &first));
                }
                let mut start = vec![BlockArg::Value(base)];
                let inner = l.b.create_block();
                let b = l.b.append_block_param(inner, T::I64);
                let mut steps = Vec::new();
                let mut params: Vec<(weft_ir::Op, Vec<CV>)> = Vec::new();
                for &(op, ai, delta) in &offset_reads {
                    let step = BLOCK as i64 * crate::abi::storage_bytes(l.arrays[ai].elem) as i64;
                    let mut ps = Vec::new();
                    for &row in &rows[&ai] {
                        let at = l.b.ins().iadd(row, delta);
                        start.push(BlockArg::Value(at));
                        ps.push(l.b.append_block_param(inner, T::I64));
                        steps.push(step);
                    }
                    params.push((op, ps));
                }
                l.b.ins().jump(inner, &start);
                l.b.switch_to_block(inner);
                l.base = b;
                if rank > 1 {
                    let moved = l.b.ins().isub(b, base);
                    let mut first = carried.clone();
                    first[rank - 1] = l.b.ins().iadd(carried[rank - 1], moved);
                    l.first = Some((first, dims.clone()));
                }
                let carried_addrs: Vec<CV> = params.iter().flat_map(|(_, ps)| ps.clone()).collect();
                l.offset_addr = params.into_iter().collect();
                row_loop = Some((inner, b, carried_addrs, steps));
            }
            let mask = l.tail_mask(control, end, &iota);
            for (i, par) in p.params.iter().enumerate() {
                if par.kind == ParamKind::Varying {
                    let t = p.ty(par.value);
                    let (s, _) = elem_of(t);
                    let lanes_v = in_planes[i]
                        .iter()
                        .map(|&plane| l.load_block(s, plane))
                        .collect();
                    frame.vals[par.value.index()] = Some(LV::V(lanes_v));
                }
            }
            let outs = l.region(&mut frame, p.body, &[], &mask)?;
            let mut stores = Vec::new();
            for (k, (o, lv)) in p.outputs.iter().zip(outs).enumerate() {
                let (s, n) = elem_of(o.ty);
                let vals = l.varying(s, &lv);
                for (lane, v) in vals.into_iter().enumerate().take(n) {
                    stores.push((s, out_planes[k][lane], v));
                }
            }
            if row_loop.is_some() {
                for (s, plane, v) in &stores {
                    l.store_block(*s, *plane, v);
                }
            } else {
                l.store_outputs(&stores, end);
            }
            match row_loop {
                None => {
                    l.b.ins().jump(joined, &[]);
                }
                Some((inner, b, addrs, steps)) => {
                    let nb = l.b.ins().iadd_imm_s(b, BLOCK as i64);
                    let last = l.b.ins().iadd_imm_s(nb, BLOCK as i64);
                    let more = l.b.ins().icmp(IntCC::SignedLessThanOrEqual, last, row_end);
                    let after = l.b.create_block();
                    let mut next = vec![BlockArg::Value(nb)];
                    for (&a, &step) in addrs.iter().zip(&steps) {
                        next.push(BlockArg::Value(l.b.ins().iadd_imm_s(a, step)));
                    }
                    l.b.ins().brif(more, inner, &next, after, &[]);
                    l.b.switch_to_block(after);
                    // The next block's coordinates: at most one carry (the loop stopped
                    // at the row's end or before).
                    let mut args = vec![BlockArg::Value(nb)];
                    if rank > 1 {
                        let moved = l.b.ins().isub(nb, base);
                        let coords = l.advance(&carried, &dims, moved);
                        args.extend(coords.iter().map(|&c| BlockArg::Value(c)));
                    }
                    l.b.ins().jump(header, &args);
                }
            }
            l.base = outer_base;
            l.first = outer_first;
        }
        l.offset_addr.clear();
        l.b.switch_to_block(joined);
        let next = l.b.ins().iadd_imm_s(base, BLOCK as i64);
        match wide {
            None => {
                l.b.ins().jump(header, &[BlockArg::Value(next)]);
            }
            Some(wide) => {
                // At least a block per row: the next block's coordinates by one carry per
                // axis; narrower rows divide.
                let (inc, div) = (l.b.create_block(), l.b.create_block());
                l.b.ins().brif(wide, inc, &[], div, &[]);
                l.b.switch_to_block(inc);
                let step = l.iconst(T::I64, BLOCK as i64);
                let coords = l.advance(&carried, &dims, step);
                let mut args = vec![BlockArg::Value(next)];
                args.extend(coords.iter().map(|&c| BlockArg::Value(c)));
                l.b.ins().jump(header, &args);
                l.b.switch_to_block(div);
                let coords = l.coords_of(next, &dims);
                let mut args = vec![BlockArg::Value(next)];
                args.extend(coords.iter().map(|&c| BlockArg::Value(c)));
                l.b.ins().jump(header, &args);
            }
        }
        l.b.switch_to_block(exit);
        l.b.ins().return_(&[]);
        l.finish_watchdog();
        l.b.seal_all_blocks();
        Ok(())
    }

    /// The coordinates `by` elements after `coords` in a launch of extents `dims`, for `by`
    /// no larger than the last axis's extent less its coordinate plus one row (one carry per
    /// axis at most).
    fn advance(&mut self, coords: &[CV], dims: &[CV], by: CV) -> Vec<CV> {
        let mut coords = coords.to_vec();
        let rank = coords.len();
        let mut carry = by;
        for k in (1..rank).rev() {
            let t = self.b.ins().iadd(coords[k], carry);
            let wrap = self
                .b
                .ins()
                .icmp(IntCC::UnsignedGreaterThanOrEqual, t, dims[k]);
            let less = self.b.ins().isub(t, dims[k]);
            coords[k] = self.b.ins().select(wrap, less, t);
            carry = self.b.ins().uextend(T::I64, wrap);
        }
        coords[0] = self.b.ins().iadd(coords[0], carry);
        coords
    }

    /// The tail mask of the block at `self.base` (lanes `base + j < end`), which matters only
    /// to control flow (`control`); otherwise the lane numbers `iota`, unused.
    fn tail_mask(&mut self, control: bool, end: CV, iota: &[CV]) -> Vec<CV> {
        if !control {
            return iota.to_vec();
        }
        let left = self.b.ins().isub(end, self.base);
        let four = self.iconst(T::I64, BLOCK as i64);
        let left = self.b.ins().smin(left, four);
        let left = self.b.ins().ireduce(T::I32, left);
        let left = self.b.ins().splat(T::I32X4, left);
        iota.iter()
            .map(|&x| self.b.ins().icmp(IntCC::SignedLessThan, x, left))
            .collect()
    }

    /// Sets up the launch watchdog (docs/abi.md) for program `p` when it has a loop: loads
    /// the abort flag's address from the context (in the current, entry, block) and makes
    /// the cold block that returns. [`Lowerer::back_edge`] then checks the flag.
    fn watchdog(&mut self, p: &Program, layout: &Layout) {
        if crate::abi::has_loop(self.m, p) {
            let flag = self.word(layout.abort);
            let abort = self.b.create_block();
            self.b.set_cold_block(abort);
            self.abort = Some((flag, abort));
        }
    }

    /// Ends the watchdog's abort block with a return (after the function's other blocks).
    fn finish_watchdog(&mut self) {
        if let Some((_, abort)) = self.abort {
            self.b.switch_to_block(abort);
            self.b.ins().return_(&[]);
        }
    }

    /// The watchdog check at a loop back-edge: loads the launch's abort flag (relaxed) and
    /// returns from the function when it is set; code after this runs in a new block.
    fn back_edge(&mut self) {
        let Some((flag, abort)) = self.abort else {
            return;
        };
        let raised = self.b.ins().atomic_load(T::I32, mem(), flag);
        let go_on = self.b.create_block();
        self.b.ins().brif(raised, abort, &[], go_on, &[]);
        self.b.switch_to_block(go_on);
    }

    /// Loads the uniform parameters and array descriptors (in the current block) and binds
    /// them in `frame`; varying parameters are left to the caller.
    fn bind_params(&mut self, p: &Program, frame: &mut Frame, layout: &Layout) {
        for (i, par) in p.params.iter().enumerate() {
            let t = p.ty(par.value);
            let w = layout.params[i];
            match par.kind {
                ParamKind::Uniform => {
                    let (s, n) = elem_of(t);
                    let ctx = self.ctx;
                    let xs = (0..n)
                        .map(|k| self.b.ins().load(sty(s), mem(), ctx, ((w + k) * 8) as i32))
                        .collect();
                    frame.vals[par.value.index()] = Some(LV::U(xs));
                }
                ParamKind::Array | ParamKind::Buffer => {
                    let (d, e, boundary) = t.array_parts().expect("array param");
                    let (s, n) = elem_of(e);
                    let planes: Vec<CV> = (0..n).map(|k| self.word(w + k)).collect();
                    let dims: Vec<CV> = (0..d as usize).map(|k| self.word(w + n + k)).collect();
                    let safe = dims
                        .iter()
                        .map(|&x| {
                            let one = self.iconst(T::I64, 1);
                            let n_safe = self.b.ins().umax(x, one);
                            (n_safe, self.b.ins().iadd_imm_s(n_safe, -1))
                        })
                        .collect();
                    self.arrays.push(ArrayInfo {
                        planes,
                        dims,
                        safe,
                        elem: s,
                        boundary,
                        local: false,
                    });
                    frame.vals[par.value.index()] = Some(LV::Array(self.arrays.len() - 1));
                }
                ParamKind::Varying => {}
            }
        }
    }

    /// The lane numbers 0..BLOCK as i32x4 vectors.
    fn iota32(&mut self) -> Vec<CV> {
        if let Some(v) = &self.iota {
            return v.clone();
        }
        (0..BLOCK / 4)
            .map(|p| {
                let x = self.iconst(T::I32, (p * 4) as i64);
                let mut v = self.b.ins().splat(T::I32X4, x);
                for j in 1..4 {
                    let x = self.iconst(T::I32, (p * 4 + j) as i64);
                    v = self.b.ins().insertlane(v, x, j as u8);
                }
                v
            })
            .collect()
    }

    /// Lane-wise `a & b` of two masks.
    fn mask_and(&mut self, a: &[CV], b: &[CV]) -> Vec<CV> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().band(x, y))
            .collect()
    }

    /// Lane-wise `a & !b` of two masks.
    fn mask_andnot(&mut self, a: &[CV], b: &[CV]) -> Vec<CV> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| {
                let ny = self.b.ins().bnot(y);
                self.b.ins().band(x, ny)
            })
            .collect()
    }

    /// True (i8) if any lane of the mask is set.
    fn mask_any(&mut self, m: &[CV]) -> CV {
        let mut acc = m[0];
        for &x in &m[1..] {
            acc = self.b.ins().bor(acc, x);
        }
        self.b.ins().vany_true(acc)
    }

    /// Stores a block's outputs (`(type, plane, vectors)`): whole vectors when the block ends
    /// at or before `end`, else only its lanes before `end`, one by one (a launch's ranges
    /// may end anywhere, and the next range may be another thread's).
    fn store_outputs(&mut self, stores: &[(ScalarType, CV, Vec<CV>)], end: CV) {
        let last = self.b.ins().iadd_imm_s(self.base, BLOCK as i64);
        let full = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, last, end);
        let (whole, part, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(full, whole, &[], part, &[]);
        self.b.switch_to_block(whole);
        for (s, plane, v) in stores {
            self.store_block(*s, *plane, v);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(part);
        let left = self.b.ins().isub(end, self.base);
        for j in 0..BLOCK {
            // Lane j, if it is before `end` (lane 0 always is).
            if j > 0 {
                let go = self.b.create_block();
                let more = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThan, left, j as i64);
                self.b.ins().brif(more, go, &[], done, &[]);
                self.b.switch_to_block(go);
            }
            for (s, plane, v) in stores {
                let bytes = crate::abi::storage_bytes(*s) as i64;
                let at = self.b.ins().iadd_imm_s(self.base, j as i64);
                let off = self.b.ins().imul_imm_s(at, bytes);
                let addr = self.b.ins().iadd(*plane, off);
                let (k, idx) = (j / per_vector(*s), j % per_vector(*s));
                let mut x = self.b.ins().extractlane(v[k], idx as u8);
                if *s == ScalarType::Bool {
                    x = self.b.ins().band_imm_s(x, 1);
                }
                self.b.ins().store(mem(), x, addr, 0);
            }
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// Loads [`BLOCK`] consecutive elements of a plane (storage type of `s`) at the block base.
    fn load_block(&mut self, s: ScalarType, plane: CV) -> Vec<CV> {
        let bytes = crate::abi::storage_bytes(s) as i64;
        let off = self.b.ins().imul_imm_s(self.base, bytes);
        let addr = self.b.ins().iadd(plane, off);
        let v: Vec<CV> = (0..parts(s))
            .map(|k| self.b.ins().load(vty(s), mem(), addr, (k * 16) as i32))
            .collect();
        if s == ScalarType::Bool {
            let z = self.iconst(T::I32, 0);
            let z = self.b.ins().splat(T::I32X4, z);
            v.iter()
                .map(|&x| self.b.ins().icmp(IntCC::NotEqual, x, z))
                .collect()
        } else {
            v
        }
    }

    fn store_block(&mut self, s: ScalarType, plane: CV, v: &[CV]) {
        let bytes = crate::abi::storage_bytes(s) as i64;
        let off = self.b.ins().imul_imm_s(self.base, bytes);
        let addr = self.b.ins().iadd(plane, off);
        let v: Vec<CV> = if s == ScalarType::Bool {
            let one = self.iconst(T::I32, 1);
            let one = self.b.ins().splat(T::I32X4, one);
            v.iter().map(|&x| self.b.ins().band(x, one)).collect()
        } else {
            v.to_vec()
        };
        for (k, &x) in v.iter().enumerate() {
            self.b.ins().store(mem(), x, addr, (k * 16) as i32);
        }
    }

    fn get(&mut self, f: &Frame, v: Value) -> Result<LV, LowerError> {
        match f.vals.get(v.index()).cloned().flatten() {
            Some(x) => Ok(x),
            None => match f.spill.get(&v) {
                Some(slots) => Ok(self.reload(f.p.ty(v), slots)),
                None => self.err(format!("internal: value {v:?} has no lowering")),
            },
        }
    }

    fn set(&mut self, f: &mut Frame, v: Value, lv: LV) -> Result<(), LowerError> {
        let ty = f.p.ty(v);
        let lv = if ty.is_array() {
            lv
        } else {
            self.fix(ty, f.uni[v.index()], lv)?
        };
        if f.roots[v.index()] && f.consec[v.index()].is_none() {
            if let LV::V(lanes) = &lv {
                if lanes.len() == 1 {
                    let flag = self.lanes_follow(&lanes[0], true);
                    f.consec[v.index()] = Some(flag);
                }
            }
        }
        f.vals[v.index()] = Some(lv);
        Ok(())
    }

    /// Whether the i32 lanes `v` (a varying lane's vectors) are lane 0's value plus 0, 1, …
    /// (`step`), or all equal to it (an i8 flag).
    fn lanes_follow(&mut self, v: &[CV], step: bool) -> CV {
        let iota = self.iota32();
        let first = self.b.ins().extractlane(v[0], 0);
        let splat = self.b.ins().splat(T::I32X4, first);
        let mut ok = self.iconst(T::I8, 1);
        for (p, &x) in v.iter().enumerate() {
            let want = if step {
                self.b.ins().iadd(splat, iota[p])
            } else {
                splat
            };
            let eq = self.b.ins().icmp(IntCC::Equal, x, want);
            let all = self.b.ins().vall_true(eq);
            ok = self.b.ins().band(ok, all);
        }
        ok
    }

    /// Lowers region `r` with its arguments bound to `args` under `mask`; returns the values
    /// its terminator passes on.
    fn region(
        &mut self,
        f: &mut Frame,
        r: Region,
        args: &[LV],
        mask: &[CV],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        for (&a, lv) in p.region(r).args.iter().zip(args) {
            self.set(f, a, lv.clone())?;
        }
        for &op in &p.region(r).ops {
            let d = p.op(op);
            if d.opcode.is_terminator() {
                return d.args.iter().map(|&a| self.get(f, a)).collect();
            }
            if f.hoisted[op.index()] {
                continue;
            }
            let results = self.op(f, op, mask)?;
            for (&v, lv) in d.results.iter().zip(results) {
                self.set(f, v, lv)?;
            }
        }
        Ok(Vec::new())
    }

    fn op(&mut self, f: &mut Frame, op: weft_ir::Op, mask: &[CV]) -> Result<Vec<LV>, LowerError> {
        use Opcode as O;
        let p = f.p;
        let d = p.op(op);
        let res_ty = d.results.first().map(|&v| p.ty(v));
        let res_uni = d.results.first().is_some_and(|&v| f.uni[v.index()]);
        let args: Vec<LV> = d
            .args
            .iter()
            .map(|&a| self.get(f, a))
            .collect::<Result<_, _>>()?;
        let aty = |i: usize| p.ty(d.args[i]);
        match d.opcode {
            O::Const => {
                let Imm::Const(c) = &d.imm else {
                    return self.err("const without literal");
                };
                Ok(vec![LV::U(self.constant(c))])
            }
            O::Index => {
                let (lv, inrow) = self.index(res_ty.expect("typed"));
                f.consec[d.results[0].index()] = inrow;
                Ok(vec![lv])
            }
            O::Shape => {
                let t = res_ty.expect("typed");
                let (s, n) = elem_of(t);
                let lw = self.layout_launch();
                let xs = (0..n)
                    .map(|k| {
                        let x = self.word(lw + 1 + k);
                        self.narrow_extent(s, x)
                    })
                    .collect();
                Ok(vec![LV::U(xs)])
            }
            O::Extent => {
                let LV::Array(ai) = args[0] else {
                    return self.err("extent of a non-array");
                };
                let (s, _) = elem_of(res_ty.expect("typed"));
                let dims = self.arrays[ai].dims.clone();
                let xs = dims.iter().map(|&x| self.narrow_extent(s, x)).collect();
                Ok(vec![LV::U(xs)])
            }
            O::Read => {
                let LV::Array(ai) = args[0] else {
                    return self.err("read of a non-array");
                };
                let (cs, _) = elem_of(aty(1));
                let root = coord_root(p, &f.uni, d.args[1]);
                let known = f.consec[root.index()];
                Ok(vec![self.read(ai, cs, &args[1], res_uni, known)?])
            }
            O::ReadOffset => {
                let LV::Array(ai) = args[0] else {
                    return self.err("read of a non-array");
                };
                Ok(vec![self.read_offset(op, ai, aty(1), &args[1])?])
            }
            O::Tuple => {
                let (s, _) = elem_of(res_ty.expect("typed"));
                if res_uni {
                    Ok(vec![LV::U(args.iter().map(|a| lane_u(a, 0)).collect())])
                } else {
                    Ok(vec![LV::V(
                        args.iter().map(|a| self.varying(s, a).remove(0)).collect(),
                    )])
                }
            }
            O::Extract | O::Swizzle => {
                let Imm::Lanes(ls) = &d.imm else {
                    return self.err("lanes missing");
                };
                Ok(vec![pick(&args[0], ls)])
            }
            O::Insert => {
                let Imm::Lanes(ls) = &d.imm else {
                    return self.err("lanes missing");
                };
                let (s, _) = elem_of(aty(0));
                if res_uni {
                    let (LV::U(mut t), LV::U(v)) = (args[0].clone(), args[1].clone()) else {
                        return self.err("internal: uniform insert of varying values");
                    };
                    for (k, &l) in ls.iter().enumerate() {
                        t[l as usize] = v[k];
                    }
                    Ok(vec![LV::U(t)])
                } else {
                    let mut t = self.varying(s, &args[0]);
                    let v = self.varying(s, &args[1]);
                    for (k, &l) in ls.iter().enumerate() {
                        t[l as usize] = v[k].clone();
                    }
                    Ok(vec![LV::V(t)])
                }
            }
            O::Select => {
                let (s, n) = elem_of(aty(1));
                let per_lane = elem_of(aty(0)).1 > 1;
                let mut out = Vec::new();
                for l in 0..n {
                    let c = lane_of(&args[0], if per_lane { l } else { 0 });
                    let (a, b) = (lane_of(&args[1], l), lane_of(&args[2], l));
                    out.push(self.select(s, c, a, b, res_uni));
                }
                Ok(vec![collect_lanes(out, res_uni)])
            }
            O::Dot | O::Length | O::Normalize | O::Cross => {
                let (s, n) = elem_of(aty(0));
                let a: Vec<LvLane> = (0..n).map(|l| lane_of(&args[0], l)).collect();
                let bv: Vec<LvLane> = if matches!(d.opcode, O::Dot | O::Cross) {
                    (0..n).map(|l| lane_of(&args[1], l)).collect()
                } else {
                    a.clone()
                };
                let u = res_uni;
                let mut mul = |me: &mut Self, x: &LvLane, y: &LvLane| {
                    me.lanewise(O::Mul, s, s, &[x.clone(), y.clone()], u)
                };
                let out: Vec<LvLane> = match d.opcode {
                    O::Cross => {
                        let m = |me: &mut Self,
                                 i: usize,
                                 j: usize,
                                 mul: &mut dyn FnMut(
                            &mut Self,
                            &LvLane,
                            &LvLane,
                        )
                            -> Result<LvLane, LowerError>| {
                            mul(me, &a[i], &bv[j])
                        };
                        let mut r = Vec::new();
                        for (i, j) in [(1, 2), (2, 0), (0, 1)] {
                            let x = m(self, i, j, &mut mul)?;
                            let y = m(self, j, i, &mut mul)?;
                            r.push(self.lanewise(O::Sub, s, s, &[x, y], u)?);
                        }
                        r
                    }
                    _ => {
                        let mut acc = mul(self, &a[0], &bv[0])?;
                        for l in 1..n {
                            let t = mul(self, &a[l], &bv[l])?;
                            acc = self.lanewise(O::Add, s, s, &[acc, t], u)?;
                        }
                        match d.opcode {
                            O::Dot => vec![acc],
                            O::Length => vec![self.lanewise(O::Sqrt, s, s, &[acc], u)?],
                            _ => {
                                let len = self.lanewise(O::Sqrt, s, s, &[acc], u)?;
                                let mut r = Vec::new();
                                for x in &a {
                                    r.push(self.lanewise(
                                        O::Div,
                                        s,
                                        s,
                                        &[x.clone(), len.clone()],
                                        u,
                                    )?);
                                }
                                r
                            }
                        }
                    }
                };
                Ok(vec![collect_lanes(out, u)])
            }
            O::If => self.lower_if(f, op, &args, mask),
            O::For | O::While | O::DoUntil => self.lower_loop(f, op, &args, mask),
            O::Call => {
                let Imm::Callee(name) = &d.imm else {
                    return self.err("call without callee");
                };
                let Some(callee) = self.m.get(name) else {
                    return self.err(format!("unknown callee @{name}"));
                };
                let arg_uni: Vec<bool> = args.iter().map(|a| !matches!(a, LV::V(_))).collect();
                let uni = uniform_values_with(self.m, callee, &arg_uni);
                let mut cf = Frame::new(callee, uni);
                for (par, a) in callee.params.iter().zip(&args) {
                    cf.vals[par.value.index()] = Some(a.clone());
                }
                self.region(&mut cf, callee.body, &[], mask)
            }
            O::Yield | O::Return => Ok(Vec::new()),
            O::LocalId | O::GroupId | O::LocalSize | O::NumGroups | O::Clock => {
                Ok(vec![self.kernel_id(d.opcode, res_ty.expect("typed"))?])
            }
            O::Store
            | O::AtomicAdd
            | O::AtomicMin
            | O::AtomicMax
            | O::AtomicXchg
            | O::AtomicCas => self.memory_op(f, op, &args, mask),
            O::Shared => Ok(vec![self.get(f, d.results[0])?]),
            O::Barrier => self.err("internal: a barrier inside a work-item segment"),
            _ => {
                // Element-wise ops on scalars and tuples.
                let t_in = aty(d
                    .args
                    .len()
                    .saturating_sub(1)
                    .min(if d.opcode == O::Select { 1 } else { 0 }));
                let (s, n) = elem_of(t_in);
                let (to, _) = elem_of(res_ty.expect("typed"));
                let mut out = Vec::with_capacity(n);
                for l in 0..n {
                    let ls: Vec<LvLane> = args.iter().map(|a| lane_of(a, l)).collect();
                    out.push(self.lanewise(d.opcode, s, to, &ls, res_uni)?);
                }
                Ok(vec![collect_lanes(out, res_uni)])
            }
        }
    }

    fn layout_launch(&self) -> usize {
        self.launch_word
    }
}

/// One tuple lane of a lowered value.
#[derive(Clone, Debug)]
enum LvLane {
    U(CV),
    V(Vec<CV>),
}

fn lane_of(lv: &LV, l: usize) -> LvLane {
    match lv {
        LV::U(u) => LvLane::U(u[l]),
        LV::V(v) => LvLane::V(v[l].clone()),
        LV::Array(_) => LvLane::U(u_dummy()),
    }
}

fn u_dummy() -> CV {
    CV::from_u32(0)
}

fn lane_u(lv: &LV, l: usize) -> CV {
    match lane_of(lv, l) {
        LvLane::U(x) => x,
        LvLane::V(v) => v[0],
    }
}

/// A single-lane value (its representation fixed later by [`Lowerer::fix`]).
fn lane_lv(l: LvLane) -> LV {
    match l {
        LvLane::U(x) => LV::U(vec![x]),
        LvLane::V(v) => LV::V(vec![v]),
    }
}

fn collect_lanes(lanes: Vec<LvLane>, uniform: bool) -> LV {
    if uniform {
        LV::U(
            lanes
                .into_iter()
                .map(|l| match l {
                    LvLane::U(x) => x,
                    LvLane::V(v) => v[0],
                })
                .collect(),
        )
    } else {
        LV::V(
            lanes
                .into_iter()
                .map(|l| match l {
                    LvLane::V(v) => v,
                    LvLane::U(x) => vec![x],
                })
                .collect(),
        )
    }
}

/// Lanes `ls` of a value (one lane gives a scalar).
fn pick(lv: &LV, ls: &[u8]) -> LV {
    match lv {
        LV::U(u) => LV::U(ls.iter().map(|&l| u[l as usize]).collect()),
        LV::V(v) => LV::V(ls.iter().map(|&l| v[l as usize].clone()).collect()),
        LV::Array(a) => LV::Array(*a),
    }
}

impl Lowerer<'_, '_> {
    fn constant(&mut self, c: &Const) -> Vec<CV> {
        let (s, _) = elem_of(c.ty);
        c.lane_bits()
            .iter()
            .map(|&bits| match s {
                ScalarType::Bool => self.iconst(T::I8, bits as i64),
                ScalarType::F32 => self.b.ins().f32const(Ieee32::with_bits(bits as u32)),
                ScalarType::F16 => {
                    let v = half::f16::from_bits(bits as u16).to_f32();
                    self.b.ins().f32const(Ieee32::with_bits(v.to_bits()))
                }
                ScalarType::F64 => self.b.ins().f64const(Ieee64::with_bits(bits)),
                ScalarType::I64 | ScalarType::U64 => self.iconst(T::I64, bits as i64),
                _ => {
                    let v = weft_ir::konst::lane_i64(s, bits);
                    self.iconst(T::I32, v)
                }
            })
            .collect()
    }

    /// An extent (i64 word) as an i32 (saturated) or i64 lane.
    fn narrow_extent(&mut self, s: ScalarType, x: CV) -> CV {
        if s == ScalarType::I64 {
            return x;
        }
        let max = self.iconst(T::I64, i32::MAX as i64);
        let x = self.b.ins().umin(x, max);
        self.b.ins().ireduce(T::I32, x)
    }

    /// The launch's first `rank` extents, each at least 1 (i64).
    fn launch_dims(&mut self, rank: usize) -> Vec<CV> {
        let lw = self.launch_word;
        (0..rank)
            .map(|k| {
                let d = self.word(lw + 1 + k);
                let one = self.iconst(T::I64, 1);
                self.b.ins().umax(d, one)
            })
            .collect()
    }

    /// The coordinates of element `e` (i64) in a launch of extents `dims` (none when `dims`
    /// is empty).
    fn coords_of(&mut self, e: CV, dims: &[CV]) -> Vec<CV> {
        let mut c = vec![e; dims.len()];
        let mut e = e;
        for k in (1..dims.len()).rev() {
            c[k] = self.b.ins().urem(e, dims[k]);
            e = self.b.ins().udiv(e, dims[k]);
        }
        if let Some(c0) = c.first_mut() {
            *c0 = e;
        }
        c
    }

    /// `index`: this block's elements' coordinates, and for a 2-D/3-D launch the flag "the
    /// block lies in one row" (its lanes then differ only by 0, 1, … on the last axis).
    fn index(&mut self, t: Type) -> (LV, Option<CV>) {
        let (s, rank) = elem_of(t);
        if rank == 1 {
            if s == ScalarType::I32 {
                let b32 = self.b.ins().ireduce(T::I32, self.base);
                let v = self.b.ins().splat(T::I32X4, b32);
                let iota = self.iota32();
                return (
                    LV::V(vec![iota
                        .iter()
                        .map(|&x| self.b.ins().iadd(v, x))
                        .collect()]),
                    None,
                );
            }
            let xs: Vec<CV> = (0..BLOCK)
                .map(|j| self.b.ins().iadd_imm_s(self.base, j as i64))
                .collect();
            return (LV::V(vec![self.build(s, &xs)]), None);
        }
        let (first, dims) = match self.first.clone() {
            Some(f) if f.0.len() == rank => f,
            _ => {
                let dims = self.launch_dims(rank);
                (self.coords_of(self.base, &dims), dims)
            }
        };
        // When the last axis holds at least a block, lane j's coordinates follow from lane
        // 0's by adding j with at most one carry per axis: one division per block instead of
        // one per lane and axis. Narrower launches divide per lane.
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let merge = self.b.create_block();
        // The merge takes each axis's vectors (of the index's element type).
        let parts = BLOCK / per_vector(s);
        let params: Vec<Vec<CV>> = (0..rank)
            .map(|_| {
                (0..parts)
                    .map(|_| self.b.append_block_param(merge, vty(s)))
                    .collect()
            })
            .collect();
        let wide = self.b.ins().icmp_imm_u(
            IntCC::UnsignedGreaterThanOrEqual,
            dims[rank - 1],
            BLOCK as i64,
        );
        // One row: lane j is (first…, first[last] + j).
        let last = rank - 1;
        let end = self.b.ins().iadd_imm_s(first[last], BLOCK as i64);
        let inrow = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, end, dims[last]);
        let row = self.b.create_block();
        let carry_blk = self.b.create_block();
        self.b.ins().brif(inrow, row, &[], carry_blk, &[]);
        self.b.switch_to_block(row);
        let mut args = Vec::new();
        for (k, &c) in first.iter().enumerate() {
            if s == ScalarType::I32 {
                let c32 = self.b.ins().ireduce(T::I32, c);
                let v = self.b.ins().splat(T::I32X4, c32);
                if k == last {
                    for x in self.iota32() {
                        args.push(BlockArg::Value(self.b.ins().iadd(v, x)));
                    }
                } else {
                    args.extend((0..parts).map(|_| BlockArg::Value(v)));
                }
            } else {
                let xs: Vec<CV> = (0..BLOCK)
                    .map(|j| {
                        if k == last {
                            self.b.ins().iadd_imm_s(c, j as i64)
                        } else {
                            c
                        }
                    })
                    .collect();
                args.extend(self.build(s, &xs).into_iter().map(BlockArg::Value));
            }
        }
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(carry_blk);
        self.b.ins().brif(wide, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        let mut per_axis: Vec<Vec<CV>> = vec![Vec::new(); rank];
        for j in 0..BLOCK {
            let mut carry = self.iconst(T::I64, j as i64);
            for k in (1..rank).rev() {
                let t = self.b.ins().iadd(first[k], carry);
                let wrap = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, t, dims[k]);
                let less = self.b.ins().isub(t, dims[k]);
                per_axis[k].push(self.b.ins().select(wrap, less, t));
                carry = self.b.ins().uextend(T::I64, wrap);
            }
            per_axis[0].push(self.b.ins().iadd(first[0], carry));
        }
        let args = self.index_vectors(s, &per_axis);
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(slow);
        let mut per_axis: Vec<Vec<CV>> = vec![Vec::new(); rank];
        for j in 0..BLOCK {
            let mut e = self.b.ins().iadd_imm_s(self.base, j as i64);
            for k in (0..rank).rev() {
                let c = self.b.ins().urem(e, dims[k]);
                e = self.b.ins().udiv(e, dims[k]);
                per_axis[k].push(c);
            }
        }
        let args = self.index_vectors(s, &per_axis);
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(merge);
        (LV::V(params), Some(inrow))
    }

    /// Per-axis, per-lane i64 coordinates as the merge arguments of [`Self::index`]: each
    /// axis's vectors of `s` (i32 lanes reduced from i64).
    fn index_vectors(&mut self, s: ScalarType, per_axis: &[Vec<CV>]) -> Vec<BlockArg> {
        let mut args = Vec::new();
        for xs in per_axis {
            let xs: Vec<CV> = xs
                .iter()
                .map(|&c| {
                    if s == ScalarType::I32 {
                        self.b.ins().ireduce(T::I32, c)
                    } else {
                        c
                    }
                })
                .collect();
            args.extend(self.build(s, &xs).into_iter().map(BlockArg::Value));
        }
        args
    }

    /// One gather: coordinates (i64 scalars, one per axis) to the element's lanes, with the
    /// array's boundary mode applied.
    fn gather_one(&mut self, ai: usize, coords: &[CV]) -> Vec<CV> {
        let (dims, safe, planes, s, boundary) = {
            let a = &self.arrays[ai];
            (
                a.dims.clone(),
                a.safe.clone(),
                a.planes.clone(),
                a.elem,
                a.boundary,
            )
        };
        let mut lin = self.iconst(T::I64, 0);
        let mut inb_all = self.iconst(T::I8, 1);
        for (k, ((&c, &n), &(n_safe, hi))) in coords.iter().zip(&dims).zip(&safe).enumerate() {
            let c = match boundary {
                Boundary::Clamp => {
                    let zero = self.iconst(T::I64, 0);
                    let c = self.b.ins().smin(c, hi);
                    self.b.ins().smax(c, zero)
                }
                Boundary::Repeat => {
                    let r = self.b.ins().srem(c, n_safe);
                    let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                    let up = self.b.ins().iadd(r, n_safe);
                    self.b.ins().select(neg, up, r)
                }
                Boundary::Constant(_) => {
                    // 0 ≤ c < n as one unsigned comparison (n ≥ 0).
                    let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, c, n);
                    inb_all = self.b.ins().band(inb_all, inb);
                    let zero = self.iconst(T::I64, 0);
                    self.b.ins().select(inb, c, zero)
                }
            };
            lin = if k == 0 {
                c
            } else {
                let t = self.b.ins().imul(lin, n_safe);
                self.b.ins().iadd(t, c)
            };
        }
        let bytes = crate::abi::storage_bytes(s) as i64;
        let off = self.b.ins().imul_imm_s(lin, bytes);
        let mut out = Vec::new();
        for (l, &plane) in planes.iter().enumerate() {
            let addr = self.b.ins().iadd(plane, off);
            let raw_ty = if is64(s) {
                sty(s)
            } else if s.is_float() {
                T::F32
            } else {
                T::I32
            };
            let mut v = self.b.ins().load(raw_ty, mem(), addr, 0);
            if s == ScalarType::Bool {
                v = self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0);
            }
            let fallback = match boundary {
                Boundary::Constant(k) => {
                    let c = Const::from_lanes(Type::scalar(s), &[k[l]]);
                    Some((self.constant(&c)[0], inb_all))
                }
                _ => None,
            };
            // An empty array's planes hold one zero element (docs/abi.md), which clamp and
            // repeat read; constant mode finds every coordinate out of range.
            if let Some((c, inb)) = fallback {
                v = self.b.ins().select(inb, v, c);
            }
            out.push(v);
        }
        out
    }

    fn read(
        &mut self,
        ai: usize,
        cs: ScalarType,
        coords: &LV,
        uniform: bool,
        consecutive: Option<CV>,
    ) -> Result<LV, LowerError> {
        let s = self.arrays[ai].elem;
        let n = self.arrays[ai].planes.len();
        let to64 = |me: &mut Self, x: CV| {
            if cs == ScalarType::I64 {
                x
            } else {
                me.b.ins().sextend(T::I64, x)
            }
        };
        match coords {
            LV::U(cu) => {
                let cu: Vec<CV> = cu.iter().map(|&x| to64(self, x)).collect();
                let v = self.gather_one(ai, &cu);
                self.fix_read(uniform, s, LV::U(v))
            }
            LV::V(cv) if cs == ScalarType::I32 && contiguous_elem(s) => {
                // A stencil's reads (`read %a, index + c`) usually fall on consecutive
                // elements inside the array: then two (or four) vector loads replace the
                // eight bounds-handled scalar loads. Lanes are consecutive and in range
                // exactly when the result cannot depend on the boundary mode.
                let fast = self.b.create_block();
                let slow = self.b.create_block();
                let merge = self.b.create_block();
                let parts = BLOCK / per_vector(s);
                let params: Vec<Vec<CV>> = (0..n)
                    .map(|_| {
                        (0..parts)
                            .map(|_| self.b.append_block_param(merge, vty(s)))
                            .collect()
                    })
                    .collect();
                let (ok, lin) = match consecutive {
                    // Lanes known consecutive (or not) from the coordinate's root: only lane
                    // 0 and the range are checked here.
                    Some(flag) if cv.len() == 1 => {
                        let (inr, lin) = self.first_in_range(ai, &cv[0]);
                        (self.b.ins().band(flag, inr), lin)
                    }
                    Some(flag) => {
                        let (inr, lin) = self.consecutive_in_range(ai, cv, false);
                        (self.b.ins().band(flag, inr), lin)
                    }
                    None => self.consecutive_in_range(ai, cv, true),
                };
                self.b.ins().brif(ok, fast, &[], slow, &[]);
                self.b.switch_to_block(fast);
                let bytes = crate::abi::storage_bytes(s) as i64;
                let off = self.b.ins().imul_imm_s(lin, bytes);
                let planes = self.arrays[ai].planes.clone();
                let mut args = Vec::new();
                for &plane in &planes {
                    let addr = self.b.ins().iadd(plane, off);
                    for p in 0..parts {
                        let v = self.b.ins().load(vty(s), mem(), addr, (p * 16) as i32);
                        args.push(BlockArg::Value(v));
                    }
                }
                self.b.ins().jump(merge, &args);
                self.b.switch_to_block(slow);
                let v = self.gather_lanes(ai, cs, cv);
                let args: Vec<BlockArg> = v.iter().flatten().map(|&x| BlockArg::Value(x)).collect();
                self.b.ins().jump(merge, &args);
                self.b.switch_to_block(merge);
                Ok(LV::V(params))
            }
            LV::V(cv) => Ok(LV::V(self.gather_lanes(ai, cs, cv))),
            LV::Array(_) => self.err("array used as coordinates"),
        }
    }

    /// `read_offset`: the block's elements at `index + off` (`off` of type `ot`), in range.
    /// In the block loop's row loop (whole blocks inside one row of the launch) with the
    /// offset known before the loop: whole-vector loads at the address the loop carries.
    /// Otherwise `index + off` lane by lane and a gather under the array's boundary mode,
    /// which changes no lane inside the launch (they are in range) and keeps a partial
    /// block's lanes past the launch inside the array.
    fn read_offset(
        &mut self,
        op: weft_ir::Op,
        ai: usize,
        ot: Type,
        off: &LV,
    ) -> Result<LV, LowerError> {
        let cs = elem_of(ot).0;
        let s = self.arrays[ai].elem;
        if let Some(addrs) = self.offset_addr.get(&op).cloned() {
            if contiguous_elem(s) {
                let parts = BLOCK / per_vector(s);
                let v: Vec<Vec<CV>> = addrs
                    .iter()
                    .map(|&addr| {
                        (0..parts)
                            .map(|p| self.b.ins().load(vty(s), mem(), addr, (p * 16) as i32))
                            .collect()
                    })
                    .collect();
                return Ok(LV::V(v));
            }
        }
        // `index` has the offset's type.
        let (ix, _) = self.index(ot);
        let ix = self.varying(cs, &ix);
        let o = self.varying(cs, off);
        let cv: Vec<Vec<CV>> = ix
            .iter()
            .zip(&o)
            .map(|(a, b)| {
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| self.b.ins().iadd(x, y))
                    .collect()
            })
            .collect();
        Ok(LV::V(self.gather_lanes(ai, cs, &cv)))
    }

    /// The distance in bytes of offset `offs` (uniform, of `cs`) in array `ai`: row-major
    /// over its extents (each at least 1), times the element's storage size.
    fn offset_bytes(&mut self, ai: usize, cs: ScalarType, offs: &[CV]) -> CV {
        let safe = self.arrays[ai].safe.clone();
        let bytes = crate::abi::storage_bytes(self.arrays[ai].elem) as i64;
        let mut lin = self.iconst(T::I64, 0);
        for (k, &o) in offs.iter().enumerate() {
            let o = if cs == ScalarType::I64 {
                o
            } else {
                self.b.ins().sextend(T::I64, o)
            };
            lin = if k == 0 {
                o
            } else {
                let t = self.b.ins().imul(lin, safe[k].0);
                self.b.ins().iadd(t, o)
            };
        }
        self.b.ins().imul_imm_s(lin, bytes)
    }

    /// Each plane's address of the element of array `ai` at coordinates `first` (i64, the
    /// block's lane 0), row-major over the array's extents.
    fn block_rows(&mut self, ai: usize, first: &[CV]) -> Vec<CV> {
        let (safe, planes) = (self.arrays[ai].safe.clone(), self.arrays[ai].planes.clone());
        let bytes = crate::abi::storage_bytes(self.arrays[ai].elem) as i64;
        let mut at = first[0];
        for k in 1..first.len() {
            let t = self.b.ins().imul(at, safe[k].0);
            at = self.b.ins().iadd(t, first[k]);
        }
        let off = self.b.ins().imul_imm_s(at, bytes);
        planes.iter().map(|&p| self.b.ins().iadd(p, off)).collect()
    }

    /// For a 1-D read whose lanes are consecutive: whether lanes 0 .. BLOCK − 1 from lane 0 of
    /// `c` are inside the array, and lane 0's position (i64).
    fn first_in_range(&mut self, ai: usize, c: &[CV]) -> (CV, CV) {
        let dim = self.arrays[ai].dims[0];
        let first = self.b.ins().extractlane(c[0], 0);
        let lin = self.b.ins().sextend(T::I64, first);
        let ge0 = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, lin, 0);
        let last = self.b.ins().iadd_imm_s(lin, BLOCK as i64 - 1);
        let lt = self.b.ins().icmp(IntCC::SignedLessThan, last, dim);
        (self.b.ins().band(ge0, lt), lin)
    }

    /// Whether the block's `i32` coordinates `cv` (one varying lane per axis) address
    /// consecutive elements along the last axis, the same index on the others, all inside
    /// the array; and the linear position of lane 0 (i64). Without `follow` the lanes are
    /// known to follow (only the range is checked).
    fn consecutive_in_range(&mut self, ai: usize, cv: &[Vec<CV>], follow: bool) -> (CV, CV) {
        let (dims, safe) = {
            let a = &self.arrays[ai];
            (a.dims.clone(), a.safe.clone())
        };
        let rank = cv.len();
        let mut ok = self.iconst(T::I8, 1);
        let mut lin = self.iconst(T::I64, 0);
        for (k, lane) in cv.iter().enumerate() {
            if follow {
                let follows = self.lanes_follow(lane, k + 1 == rank);
                ok = self.b.ins().band(ok, follows);
            }
            let first = self.b.ins().extractlane(lane[0], 0);
            let c = self.b.ins().sextend(T::I64, first);
            let ge0 = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, c, 0);
            ok = self.b.ins().band(ok, ge0);
            let last = if k + 1 == rank {
                self.b.ins().iadd_imm_s(c, BLOCK as i64 - 1)
            } else {
                c
            };
            let lt = self.b.ins().icmp(IntCC::SignedLessThan, last, dims[k]);
            ok = self.b.ins().band(ok, lt);
            lin = if k == 0 {
                c
            } else {
                let t = self.b.ins().imul(lin, safe[k].0);
                self.b.ins().iadd(t, c)
            };
        }
        (ok, lin)
    }

    /// A varying read, one gather per lane: per tuple lane, its vectors.
    fn gather_lanes(&mut self, ai: usize, cs: ScalarType, cv: &[Vec<CV>]) -> Vec<Vec<CV>> {
        let s = self.arrays[ai].elem;
        let n = self.arrays[ai].planes.len();
        {
            {
                let mut per_lane: Vec<Vec<CV>> = vec![Vec::new(); n];
                for j in 0..BLOCK {
                    let c: Vec<CV> = cv
                        .iter()
                        .map(|lane| {
                            let x = self.extract(cs, lane, j);
                            if cs == ScalarType::I64 {
                                x
                            } else {
                                self.b.ins().sextend(T::I64, x)
                            }
                        })
                        .collect();
                    for (l, v) in self.gather_one(ai, &c).into_iter().enumerate() {
                        per_lane[l].push(v);
                    }
                }
                per_lane.iter().map(|xs| self.build(s, xs)).collect()
            }
        }
    }

    fn fix_read(&mut self, uniform: bool, s: ScalarType, lv: LV) -> Result<LV, LowerError> {
        if uniform {
            Ok(lv)
        } else {
            Ok(LV::V(self.varying(s, &lv)))
        }
    }

    /// `select` on one tuple lane.
    fn select(&mut self, s: ScalarType, c: LvLane, a: LvLane, b: LvLane, uniform: bool) -> LvLane {
        if uniform {
            let (LvLane::U(c), LvLane::U(a), LvLane::U(b)) = (c, a, b) else {
                return LvLane::U(u_dummy());
            };
            return LvLane::U(self.b.ins().select(c, a, b));
        }
        let cm = match c {
            LvLane::U(x) => self.splat_lane(ScalarType::Bool, x),
            LvLane::V(v) => v,
        };
        let a = match a {
            LvLane::U(x) => self.splat_lane(s, x),
            LvLane::V(v) => v,
        };
        let b = match b {
            LvLane::U(x) => self.splat_lane(s, x),
            LvLane::V(v) => v,
        };
        LvLane::V(self.blend(s, &cm, &a, &b))
    }

    /// Per element: `a` where the mask (i32x4 vectors) is set, else `b` (varying lanes of `s`).
    fn blend(&mut self, s: ScalarType, mask: &[CV], a: &[CV], b: &[CV]) -> Vec<CV> {
        // One i32x4 mask covers 4 elements: two 64-bit vectors' worth.
        let masks: Vec<CV> = if is64(s) {
            mask.iter()
                .flat_map(|&m| [self.b.ins().swiden_low(m), self.b.ins().swiden_high(m)])
                .collect()
        } else {
            mask.to_vec()
        };
        (0..a.len())
            .map(|k| {
                let ty = vty(s);
                let m = if self.b.func.dfg.value_type(masks[k]) == ty {
                    masks[k]
                } else {
                    self.b.ins().bitcast(ty, vflags(), masks[k])
                };
                self.b.ins().bitselect(m, a[k], b[k])
            })
            .collect()
    }

    fn blend_lv(&mut self, ty: Type, mask: &[CV], a: &LV, b: &LV) -> LV {
        let (s, _) = elem_of(ty);
        let av = self.varying(s, a);
        let bv = self.varying(s, b);
        LV::V(
            av.iter()
                .zip(&bv)
                .map(|(x, y)| self.blend(s, mask, x, y))
                .collect(),
        )
    }

    /// A divergent loop's update: each carried value takes the body's new value in the
    /// lanes of `mask` and keeps its old value elsewhere.
    fn blend_carried(
        &mut self,
        tys: &[(Type, bool)],
        mask: &[CV],
        new: &[LV],
        old: &[LV],
    ) -> Vec<LV> {
        tys.iter()
            .zip(new.iter().zip(old))
            .map(|(&(t, _), (n, o))| self.blend_lv(t, mask, n, o))
            .collect()
    }

    /// Block parameter types for a value of `ty` in the given representation.
    fn param_types(ty: Type, uniform: bool) -> Vec<ir::Type> {
        let (s, n) = elem_of(ty);
        if uniform {
            vec![sty(s); n]
        } else {
            (0..n).flat_map(|_| vec![vty(s); parts(s)]).collect()
        }
    }

    /// Block-call arguments passing `vals` (flattened to CLIF values).
    fn block_args(vals: &[LV]) -> Vec<BlockArg> {
        vals.iter()
            .flat_map(Self::flatten)
            .map(BlockArg::Value)
            .collect()
    }

    /// A loop condition as a mask (a uniform condition is splatted; `m` if it is neither).
    fn cond_mask(&mut self, c: &LV, m: &[CV]) -> Vec<CV> {
        match c {
            LV::V(v) => v[0].clone(),
            LV::U(u) => self.splat_lane(ScalarType::Bool, u[0]),
            LV::Array(_) => m.to_vec(),
        }
    }

    fn flatten(lv: &LV) -> Vec<CV> {
        match lv {
            LV::U(u) => u.clone(),
            LV::V(v) => v.iter().flatten().copied().collect(),
            LV::Array(_) => Vec::new(),
        }
    }

    fn unflatten(ty: Type, uniform: bool, vals: &[CV]) -> LV {
        let (s, _) = elem_of(ty);
        if uniform {
            LV::U(vals.to_vec())
        } else {
            LV::V(vals.chunks(parts(s)).map(<[CV]>::to_vec).collect())
        }
    }

    /// Creates a block whose parameters hold values of `tys` (with `uni` representations).
    fn block_for(&mut self, tys: &[(Type, bool)]) -> (ir::Block, Vec<LV>) {
        let blk = self.b.create_block();
        let mut lvs = Vec::new();
        for &(t, u) in tys {
            let ps: Vec<CV> = Self::param_types(t, u)
                .into_iter()
                .map(|pt| self.b.append_block_param(blk, pt))
                .collect();
            lvs.push(Self::unflatten(t, u, &ps));
        }
        (blk, lvs)
    }

    fn jump_with(
        &mut self,
        blk: ir::Block,
        tys: &[(Type, bool)],
        vals: &[LV],
    ) -> Result<(), LowerError> {
        let mut args = Vec::new();
        for (&(t, u), v) in tys.iter().zip(vals) {
            let v = self.fix(t, u, v.clone())?;
            args.extend(Self::flatten(&v).into_iter().map(BlockArg::Value));
        }
        self.b.ins().jump(blk, &args);
        Ok(())
    }

    fn zeros(&mut self, tys: &[(Type, bool)]) -> Vec<LV> {
        tys.iter()
            .map(|&(t, u)| {
                let vals: Vec<CV> = Self::param_types(t, u)
                    .into_iter()
                    .map(|pt| self.zero_of(pt))
                    .collect();
                Self::unflatten(t, u, &vals)
            })
            .collect()
    }

    fn result_reprs(f: &Frame, op: weft_ir::Op) -> Vec<(Type, bool)> {
        let d = f.p.op(op);
        d.results
            .iter()
            .map(|&v| (f.p.ty(v), f.uni[v.index()]))
            .collect()
    }

    fn lower_if(
        &mut self,
        f: &mut Frame,
        op: weft_ir::Op,
        args: &[LV],
        mask: &[CV],
    ) -> Result<Vec<LV>, LowerError> {
        let d = f.p.op(op);
        let reprs = Self::result_reprs(f, op);
        let (rt, re) = (d.regions[0], d.regions[1]);
        match &args[0] {
            LV::U(c) => {
                let c = c[0];
                let (tb, eb) = (self.b.create_block(), self.b.create_block());
                let (merge, outs) = self.block_for(&reprs);
                self.b.ins().brif(c, tb, &[], eb, &[]);
                for (blk, r) in [(tb, rt), (eb, re)] {
                    self.b.switch_to_block(blk);
                    let ys = self.region(f, r, &[], mask)?;
                    self.jump_with(merge, &reprs, &ys)?;
                }
                self.b.switch_to_block(merge);
                Ok(outs)
            }
            LV::V(c) => {
                let c = c[0].clone();
                let m_t = self.mask_and(mask, &c);
                let m_e = self.mask_andnot(mask, &c);
                let var_reprs: Vec<(Type, bool)> = reprs.iter().map(|&(t, _)| (t, false)).collect();
                let mut branch_vals = Vec::new();
                for (r, m) in [(rt, m_t), (re, m_e)] {
                    let any = self.mask_any(&m);
                    let run = self.b.create_block();
                    let (merge, outs) = self.block_for(&var_reprs);
                    let skip = self.zeros(&var_reprs);
                    let mut skip_args = Vec::new();
                    for v in &skip {
                        skip_args.extend(Self::flatten(v).into_iter().map(BlockArg::Value));
                    }
                    self.b.ins().brif(any, run, &[], merge, &skip_args);
                    self.b.switch_to_block(run);
                    let ys = self.region(f, r, &[], &m)?;
                    self.jump_with(merge, &var_reprs, &ys)?;
                    self.b.switch_to_block(merge);
                    branch_vals.push(outs);
                }
                let mut res = Vec::new();
                for (k, &(t, _)) in reprs.iter().enumerate() {
                    res.push(self.blend_lv(t, &c, &branch_vals[0][k], &branch_vals[1][k]));
                }
                Ok(res)
            }
            LV::Array(_) => self.err("array as a condition"),
        }
    }

    /// Per-lane `i < hi` / `next > i` comparisons for a loop counter of integer type `s`.
    fn lower_loop(
        &mut self,
        f: &mut Frame,
        op: weft_ir::Op,
        args: &[LV],
        mask: &[CV],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(op);
        let reprs = Self::result_reprs(f, op);
        let (inits, ctl): (&[LV], &[LV]) = match d.opcode {
            Opcode::For => (&args[3..], &args[..3]),
            _ => (args, &[]),
        };
        // Is the loop's control uniform? (The analysis made every result varying if not.)
        let control_uniform = match d.opcode {
            Opcode::For => ctl.iter().all(|c| matches!(c, LV::U(_))),
            _ => {
                let cond_r = if d.opcode == Opcode::While {
                    d.regions[0]
                } else {
                    d.regions[1]
                };
                let y = p.region(cond_r).ops.last().map(|&o| p.op(o).args[0]);
                y.is_some_and(|v| f.uni[v.index()])
            }
        };
        if d.opcode == Opcode::For {
            return self.lower_for(f, op, ctl, inits, &reprs, mask, control_uniform);
        }
        let (first, second) = (d.regions[0], d.regions[1]);
        let carried_tys = reprs.clone();
        // Header block: carried values (+ the active mask when divergent).
        let mut hdr_tys = carried_tys.clone();
        if !control_uniform {
            hdr_tys.push((Type::bool(), false));
        }
        let (hdr, hvals) = self.block_for(&hdr_tys);
        let (exit, outs) = self.block_for(&carried_tys);
        let mut init_vals = inits.to_vec();
        if !control_uniform {
            init_vals.push(LV::V(vec![mask.to_vec()]));
        }
        self.jump_with(hdr, &hdr_tys, &init_vals)?;
        self.b.switch_to_block(hdr);
        let carried = hvals[..carried_tys.len()].to_vec();
        // Divergent loops carry their active mask as the last header parameter.
        let m: Vec<CV> = match (control_uniform, &hvals[carried_tys.len()..]) {
            (false, [LV::V(v)]) => v[0].clone(),
            _ => mask.to_vec(),
        };
        if d.opcode == Opcode::While {
            let c = self.region(f, first, &carried, &m)?;
            let body = self.b.create_block();
            if control_uniform {
                let LV::U(cv) = &c[0] else {
                    return self.err("internal: uniform while condition is varying");
                };
                let exit_args: Vec<BlockArg> = Self::block_args(&carried);
                self.b.ins().brif(cv[0], body, &[], exit, &exit_args);
                self.b.switch_to_block(body);
                let ys = self.region(f, second, &carried, &m)?;
                self.back_edge();
                self.jump_with(hdr, &hdr_tys, &ys)?;
            } else {
                let cm = self.cond_mask(&c[0], &m);
                let m2 = self.mask_and(&m, &cm);
                let any = self.mask_any(&m2);
                let exit_args: Vec<BlockArg> = Self::block_args(&carried);
                self.b.ins().brif(any, body, &[], exit, &exit_args);
                self.b.switch_to_block(body);
                let ys = self.region(f, second, &carried, &m2)?;
                let mut next = self.blend_carried(&carried_tys, &m2, &ys, &carried);
                next.push(LV::V(vec![m2]));
                self.back_edge();
                self.jump_with(hdr, &hdr_tys, &next)?;
            }
        } else {
            // do { first } until { second }
            let ys = self.region(f, first, &carried, &m)?;
            let new: Vec<LV> = if control_uniform {
                ys
            } else {
                self.blend_carried(&carried_tys, &m, &ys, &carried)
            };
            let new: Vec<LV> = new
                .into_iter()
                .zip(&carried_tys)
                .map(|(v, &(t, u))| self.fix(t, u, v))
                .collect::<Result<_, _>>()?;
            let c = self.region(f, second, &new, &m)?;
            let exit_args: Vec<BlockArg> = Self::block_args(&new);
            if control_uniform {
                let LV::U(cv) = &c[0] else {
                    return self.err("internal: uniform until condition is varying");
                };
                let again = self.b.create_block();
                self.b.ins().brif(cv[0], exit, &exit_args, again, &[]);
                self.b.switch_to_block(again);
                self.back_edge();
                self.jump_with(hdr, &hdr_tys, &new)?;
            } else {
                let cm = self.cond_mask(&c[0], &m);
                let m2 = self.mask_andnot(&m, &cm);
                let any = self.mask_any(&m2);
                let again = self.b.create_block();
                self.b.ins().brif(any, again, &[], exit, &exit_args);
                self.b.switch_to_block(again);
                self.back_edge();
                let mut next = new.clone();
                next.push(LV::V(vec![m2]));
                self.jump_with(hdr, &hdr_tys, &next)?;
            }
        }
        self.b.switch_to_block(exit);
        Ok(outs)
    }

    #[allow(clippy::too_many_arguments)]
    fn lower_for(
        &mut self,
        f: &mut Frame,
        op: weft_ir::Op,
        ctl: &[LV],
        inits: &[LV],
        reprs: &[(Type, bool)],
        mask: &[CV],
        uniform: bool,
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(op);
        let r = d.regions[0];
        let ity = p.ty(d.args[0]);
        let (s, _) = elem_of(ity);
        let (lo, hi, step) = (
            lane_of(&ctl[0], 0),
            lane_of(&ctl[1], 0),
            lane_of(&ctl[2], 0),
        );
        let zero_c = Const::zero(ity);
        let zero = LvLane::U(self.constant(&zero_c)[0]);
        // Entry condition: step > 0 && lo < hi.
        let pos = self.lanewise(
            Opcode::Gt,
            s,
            ScalarType::Bool,
            &[step.clone(), zero],
            uniform,
        )?;
        let lt = self.lanewise(
            Opcode::Lt,
            s,
            ScalarType::Bool,
            &[lo.clone(), hi.clone()],
            uniform,
        )?;
        let go = self.lanewise(
            Opcode::And,
            ScalarType::Bool,
            ScalarType::Bool,
            &[pos.clone(), lt],
            uniform,
        )?;
        let mut hdr_tys: Vec<(Type, bool)> = vec![(ity, uniform)];
        hdr_tys.extend_from_slice(reprs);
        let active = (Type::bool(), uniform);
        hdr_tys.push(active);
        let (hdr, hv) = self.block_for(&hdr_tys);
        let (exit, outs) = self.block_for(reprs);
        let mut init = vec![lane_lv(lo)];
        init.extend(inits.iter().cloned());
        let go_lv = if uniform {
            collect_lanes(vec![go], true)
        } else {
            let LvLane::V(g) = go else {
                return self.err("internal: for entry");
            };
            LV::V(vec![self.mask_and(&g, mask)])
        };
        init.push(go_lv);
        self.jump_with(hdr, &hdr_tys, &init)?;
        self.b.switch_to_block(hdr);
        let i = hv[0].clone();
        let carried = hv[1..1 + reprs.len()].to_vec();
        let act = hv[1 + reprs.len()].clone();
        let body = self.b.create_block();
        let exit_args: Vec<BlockArg> = Self::block_args(&carried);
        let m: Vec<CV> = match &act {
            LV::U(a) => {
                self.b.ins().brif(a[0], body, &[], exit, &exit_args);
                mask.to_vec()
            }
            LV::V(a) => {
                let any = self.mask_any(&a[0]);
                self.b.ins().brif(any, body, &[], exit, &exit_args);
                a[0].clone()
            }
            LV::Array(_) => mask.to_vec(),
        };
        self.b.switch_to_block(body);
        let mut rargs = vec![i.clone()];
        rargs.extend(carried.iter().cloned());
        let ys = self.region(f, r, &rargs, &m)?;
        let new: Vec<LV> = if uniform {
            ys
        } else {
            self.blend_carried(reprs, &m, &ys, &carried)
        };
        // next = i + step; continue while next > i (no overflow) && next < hi.
        let il = lane_of(&i, 0);
        let next = self.lanewise(Opcode::Add, s, s, &[il.clone(), step], uniform)?;
        let (s_ok, next) = if s.bits() < 32 {
            // Narrow counters are computed in 32 bits: no wrap before `next < hi` fails.
            let raw = self.lanewise_raw_add(s, &il, &lane_of(&ctl[2], 0), uniform)?;
            (None, raw)
        } else {
            let gt = self.lanewise(
                Opcode::Gt,
                s,
                ScalarType::Bool,
                &[next.clone(), il.clone()],
                uniform,
            )?;
            (Some(gt), next)
        };
        let lt = self.lanewise(
            Opcode::Lt,
            s,
            ScalarType::Bool,
            &[next.clone(), hi.clone()],
            uniform,
        )?;
        let mut cont = lt;
        if let Some(gt) = s_ok {
            cont = self.lanewise(
                Opcode::And,
                ScalarType::Bool,
                ScalarType::Bool,
                &[cont, gt],
                uniform,
            )?;
        }
        let cont_lv = if uniform {
            collect_lanes(vec![cont], true)
        } else {
            let LvLane::V(c) = cont else {
                return self.err("internal: for continue");
            };
            LV::V(vec![self.mask_and(&c, &m)])
        };
        let mut nv = vec![lane_lv(next)];
        nv.extend(new);
        nv.push(cont_lv);
        self.back_edge();
        self.jump_with(hdr, &hdr_tys, &nv)?;
        self.b.switch_to_block(exit);
        Ok(outs)
    }

    /// `i + step` for a narrow (8/16-bit) counter without wrapping to the type's width.
    fn lanewise_raw_add(
        &mut self,
        s: ScalarType,
        a: &LvLane,
        b: &LvLane,
        uniform: bool,
    ) -> Result<LvLane, LowerError> {
        // Adding as i32 keeps the true sum (both operands are sign- or zero-extended);
        // comparing it with `hi` (same extension) then ends the loop correctly.
        let wide = if s.is_signed_int() {
            ScalarType::I32
        } else {
            ScalarType::U32
        };
        self.lanewise(Opcode::Add, wide, wide, &[a.clone(), b.clone()], uniform)
    }
}

/// True if `p` or a program it calls has an `if` or a loop (only then does the tail mask
/// matter).
fn has_control_flow(m: &Module, p: &Program) -> bool {
    m.reaches_op(p, Opcode::has_regions)
}

/// The IEEE comparison of a comparison op (ordered; `ne` is unordered-or-not-equal).
fn float_cc(op: Opcode) -> FloatCC {
    match op {
        Opcode::Eq => FloatCC::Equal,
        Opcode::Ne => FloatCC::NotEqual,
        Opcode::Lt => FloatCC::LessThan,
        Opcode::Le => FloatCC::LessThanOrEqual,
        Opcode::Gt => FloatCC::GreaterThan,
        _ => FloatCC::GreaterThanOrEqual,
    }
}
