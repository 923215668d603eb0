//! Kernel mode on the CPU, the MCUDA way (Stratton et al., "MCUDA", LCPC 2008, §3): one call
//! runs a range of work-groups; each group's body is split at its barriers into segments, and
//! each segment is a loop over the group's work-items in SIMD blocks of [`BLOCK`] lanes.
//! Varying values that live from one segment into another are kept in per-group stack slots
//! with one entry per work-item; uniform values stay scalar. Control flow that contains a
//! barrier is group-uniform (the verifier's rule), so it runs once per group around the
//! segment loops.

use super::{elem_of, mem, parts, sty, vflags, Frame, LowerError, Lowerer, LvLane, CV, LV};
use crate::abi::BLOCK;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    self, types as T, AtomicRmwOp, BlockArg, InstBuilder, StackSlot, StackSlotData, StackSlotKind,
};
use std::collections::{HashMap, HashSet};
use weft_ir::opcode::Opcode;
use weft_ir::segment::{self, Piece};
use weft_ir::{Const, Op, Program, Region, ScalarType, Type, Value};

/// The per-kernel state of a group lowering.
pub(super) struct GroupState {
    /// Work-items per group on x, y, z (compiled in).
    pub block: [u32; 3],
    /// Work-items per group.
    pub size: usize,
    /// This group's id on x, y, z (uniform i32, set per group).
    pub gid: [CV; 3],
    /// Groups on x, y, z (uniform i32).
    pub ngroups: [CV; 3],
    /// A scratch slot that masked-off and out-of-range stores and atomics go to.
    pub sink: StackSlot,
    /// Ops that contain a barrier (themselves or in their regions).
    pub barrier_ops: HashSet<Op>,
    /// Bytes of stack slots made so far (shared arrays and per-work-item storage).
    pub bytes: usize,
}

/// The body of a work-item loop: emits code for one block of work-items under a mask.
type SegmentBody<'x, L> = dyn FnMut(&mut L, &[CV]) -> Result<(), LowerError> + 'x;

/// The most stack one group may use for its shared arrays and per-work-item values.
pub(crate) const MAX_GROUP_STACK: usize = 1 << 20;

impl Lowerer<'_, '_> {
    fn g(&self) -> &GroupState {
        self.group.as_ref().expect("group lowering")
    }

    fn g_mut(&mut self) -> &mut GroupState {
        self.group.as_mut().expect("group lowering")
    }

    /// A stack slot of `bytes` (16-byte aligned), counted against [`MAX_GROUP_STACK`].
    pub(super) fn slot(&mut self, bytes: usize) -> Result<StackSlot, LowerError> {
        let total = self.g().bytes + bytes.div_ceil(16) * 16;
        if total > MAX_GROUP_STACK {
            return self.err(format!(
                "a work-group needs more than {MAX_GROUP_STACK} bytes of CPU stack for its shared arrays and per-work-item values; use a smaller block"
            ));
        }
        self.g_mut().bytes = total;
        Ok(self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes as u32,
            4,
        )))
    }

    /// Per-work-item storage for a value of type `t`: one plane per tuple lane, one entry per
    /// work-item (padded to whole blocks).
    fn value_slots(&mut self, t: Type) -> Result<Vec<StackSlot>, LowerError> {
        let (s, n) = elem_of(t);
        let len = self.g().size.div_ceil(BLOCK) * BLOCK;
        (0..n)
            .map(|_| self.slot(len * crate::abi::storage_bytes(s)))
            .collect()
    }

    fn slot_addr(&mut self, s: StackSlot) -> CV {
        self.b.ins().stack_addr(T::I64, s, 0)
    }

    /// Reloads a spilled value for the current block of work-items.
    pub(super) fn reload(&mut self, t: Type, slots: &[StackSlot]) -> LV {
        let (s, _) = elem_of(t);
        let lanes = slots
            .iter()
            .copied()
            .map(|sl| {
                let a = self.slot_addr(sl);
                self.load_block(s, a)
            })
            .collect();
        LV::V(lanes)
    }

    /// Stores `lv` (of type `t`) for the current block of work-items into `slots`.
    fn spill(&mut self, t: Type, lv: &LV, slots: &[StackSlot]) {
        let (s, _) = elem_of(t);
        let vals = self.varying(s, lv);
        for (k, &sl) in slots.iter().enumerate() {
            let a = self.slot_addr(sl);
            self.store_block(s, a, &vals[k]);
        }
    }

    /// Emits a loop over the group's work-items in blocks of [`BLOCK`]; `body` runs once per
    /// block with `self.base` the block's first work-item and the tail mask.
    fn work_item_loop(&mut self, body: &mut SegmentBody<'_, Self>) -> Result<(), LowerError> {
        let size = self.g().size as i64;
        let lp = self.b.create_block();
        let wi = self.b.append_block_param(lp, T::I64);
        let exit = self.b.create_block();
        let zero = self.iconst(T::I64, 0);
        self.b.ins().jump(lp, &[BlockArg::Value(zero)]);
        self.b.switch_to_block(lp);
        let saved = self.base;
        self.base = wi;
        let size_v = self.iconst(T::I64, size);
        let left = self.b.ins().isub(size_v, wi);
        let left = self.b.ins().ireduce(T::I32, left);
        let left = self.b.ins().splat(T::I32X4, left);
        let iota = self.iota32();
        let mask: Vec<CV> = iota
            .iter()
            .map(|&x| self.b.ins().icmp(IntCC::SignedLessThan, x, left))
            .collect();
        body(self, &mask)?;
        let next = self.b.ins().iadd_imm_s(wi, BLOCK as i64);
        let more = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, next, size);
        self.b
            .ins()
            .brif(more, lp, &[BlockArg::Value(next)], exit, &[]);
        self.b.switch_to_block(exit);
        self.base = saved;
        Ok(())
    }

    /// Lowers region `r` of a kernel at group level: its segments as work-item loops, its
    /// barrier-containing control ops once per group. The region's arguments must be bound
    /// already. Varying yields are stored into `outs` (one slot set per yield, `None` for
    /// uniform yields); returns the uniform yields (`None` where varying).
    pub(super) fn phased_region(
        &mut self,
        f: &mut Frame,
        r: Region,
        outs: &[Option<Vec<StackSlot>>],
    ) -> Result<Vec<Option<LV>>, LowerError> {
        let p = f.p;
        let term = *p
            .region(r)
            .ops
            .last()
            .expect("region ends with a terminator");
        // Which values each piece uses, to find the varying values that outlive their segment.
        let (items, used) = segment::split(p, r, &self.g().barrier_ops);
        let mut uniform_yields = Vec::new();
        let last = items.len() - 1;
        for (i, it) in items.iter().enumerate() {
            match it {
                Piece::Segment(os) => {
                    let mut live_out: Vec<Value> = Vec::new();
                    for &o in os {
                        for &v in &p.op(o).results {
                            if !f.uni[v.index()]
                                && used
                                    .iter()
                                    .enumerate()
                                    .any(|(j, u)| j != i && u.contains(&v))
                            {
                                live_out.push(v);
                            }
                        }
                    }
                    let mut slots = HashMap::new();
                    for &v in &live_out {
                        let s = self.value_slots(p.ty(v))?;
                        slots.insert(v, s);
                    }
                    let is_last = i == last;
                    let needs_loop = os.len() > 1 || !is_last || outs.iter().any(Option::is_some);
                    if !needs_loop {
                        // Only a terminator with uniform yields: nothing per work-item.
                        for &y in &p.op(term).args {
                            uniform_yields.push(Some(self.get(f, y)?));
                        }
                        continue;
                    }
                    let mut ys: Vec<Option<LV>> = Vec::new();
                    self.work_item_loop(&mut |me: &mut Self, mask: &[CV]| {
                        for &o in os {
                            let d = p.op(o);
                            if d.opcode.is_terminator() {
                                let vals: Vec<LV> = d
                                    .args
                                    .iter()
                                    .map(|&a| me.get(f, a))
                                    .collect::<Result<_, _>>()?;
                                for (k, (lv, &a)) in vals.into_iter().zip(&d.args).enumerate() {
                                    match outs.get(k).and_then(Option::as_ref) {
                                        Some(sl) => {
                                            me.spill(p.ty(a), &lv, sl);
                                            ys.push(None);
                                        }
                                        None => ys.push(Some(lv)),
                                    }
                                }
                                continue;
                            }
                            let res = me.op(f, o, mask)?;
                            for (&v, lv) in d.results.iter().zip(res) {
                                me.set(f, v, lv)?;
                            }
                        }
                        for &v in &live_out {
                            let lv = me.get(f, v)?;
                            let sl = slots[&v].clone();
                            me.spill(p.ty(v), &lv, &sl);
                        }
                        Ok(())
                    })?;
                    if is_last {
                        uniform_yields = ys;
                    }
                    for (v, s) in slots {
                        f.vals[v.index()] = None;
                        f.spill.insert(v, s);
                    }
                }
                Piece::Group(o) => self.group_op(f, *o)?,
            }
        }
        Ok(uniform_yields)
    }

    /// Result storage of a barrier-containing control op: per result, per-work-item slots
    /// when it is varying.
    fn result_slots(
        &mut self,
        f: &Frame,
        vals: &[Value],
    ) -> Result<Vec<Option<Vec<StackSlot>>>, LowerError> {
        vals.iter()
            .map(|&v| {
                if f.uni[v.index()] {
                    Ok(None)
                } else {
                    self.value_slots(f.p.ty(v)).map(Some)
                }
            })
            .collect()
    }

    /// Binds `v` to per-work-item `slots` (varying) or to `lv` (uniform).
    fn bind(f: &mut Frame, v: Value, slots: &Option<Vec<StackSlot>>, lv: Option<LV>) {
        match slots {
            Some(s) => {
                f.vals[v.index()] = None;
                f.spill.insert(v, s.clone());
            }
            None => f.vals[v.index()] = lv,
        }
    }

    /// A uniform scalar condition or bound.
    fn uniform_scalar(&mut self, f: &Frame, v: Value) -> Result<CV, LowerError> {
        match self.get(f, v)? {
            LV::U(u) => Ok(u[0]),
            _ => self.err("internal: barrier under varying control flow"),
        }
    }

    /// A control op that contains a barrier, once per group.
    fn group_op(&mut self, f: &mut Frame, o: Op) -> Result<(), LowerError> {
        let p = f.p;
        let d = p.op(o);
        let res_slots = self.result_slots(f, &d.results)?;
        let uni_tys: Vec<(Type, bool)> = d
            .results
            .iter()
            .zip(&res_slots)
            .filter(|(_, s)| s.is_none())
            .map(|(&v, _)| (p.ty(v), true))
            .collect();
        match d.opcode {
            Opcode::If => {
                let c = self.uniform_scalar(f, d.args[0])?;
                let (tb, eb) = (self.b.create_block(), self.b.create_block());
                let (merge, outs) = self.block_for(&uni_tys);
                self.b.ins().brif(c, tb, &[], eb, &[]);
                for (blk, r) in [(tb, d.regions[0]), (eb, d.regions[1])] {
                    self.b.switch_to_block(blk);
                    let ys = self.phased_region(f, r, &res_slots)?;
                    let uy: Vec<LV> = ys.into_iter().flatten().collect();
                    self.jump_with(merge, &uni_tys, &uy)?;
                }
                self.b.switch_to_block(merge);
                let mut it = outs.into_iter();
                for (&v, s) in d.results.iter().zip(&res_slots) {
                    let lv = if s.is_none() { it.next() } else { None };
                    Self::bind(f, v, s, lv);
                }
                Ok(())
            }
            Opcode::For => self.group_for(f, o, &res_slots, &uni_tys),
            _ => self.group_while(f, o, &res_slots, &uni_tys),
        }
    }

    /// Stores the varying initial values `inits` of a loop into their carried slots, per
    /// work-item; returns the uniform ones.
    fn carry_in(
        &mut self,
        f: &mut Frame,
        inits: &[Value],
        carried: &[Option<Vec<StackSlot>>],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        if carried.iter().any(Option::is_some) {
            self.work_item_loop(&mut |me: &mut Self, _m: &[CV]| {
                for (&a, sl) in inits.iter().zip(carried) {
                    if let Some(sl) = sl {
                        let lv = me.get(f, a)?;
                        me.spill(p.ty(a), &lv, sl);
                    }
                }
                Ok(())
            })?;
        }
        let mut uinit = Vec::new();
        for (&a, sl) in inits.iter().zip(carried) {
            if sl.is_none() {
                uinit.push(self.get(f, a)?);
            }
        }
        Ok(uinit)
    }

    /// Binds the arguments `args` of a loop region: varying ones to the carried slots,
    /// uniform ones to `uniform` in order.
    fn bind_carried(
        f: &mut Frame,
        args: &[Value],
        carried: &[Option<Vec<StackSlot>>],
        uniform: &[LV],
    ) {
        let mut it = uniform.iter().cloned();
        for (&a, sl) in args.iter().zip(carried) {
            let lv = if sl.is_none() { it.next() } else { None };
            Self::bind(f, a, sl, lv);
        }
    }

    /// A `while` or `do` loop with a barrier in a region: its condition is group-uniform;
    /// uniform carried values are block parameters, varying ones per-work-item slots.
    fn group_while(
        &mut self,
        f: &mut Frame,
        o: Op,
        carried: &[Option<Vec<StackSlot>>],
        uni_tys: &[(Type, bool)],
    ) -> Result<(), LowerError> {
        let p = f.p;
        let d = p.op(o);
        let uinit = self.carry_in(f, &d.args, carried)?;
        let (hdr, hv) = self.block_for(uni_tys);
        let (exit, outs) = self.block_for(uni_tys);
        self.jump_with(hdr, uni_tys, &uinit)?;
        self.b.switch_to_block(hdr);
        let (first, second) = (d.regions[0], d.regions[1]);
        let cond_of = |me: &mut Self, ys: Vec<Option<LV>>| -> Result<CV, LowerError> {
            match ys.into_iter().next().flatten() {
                Some(LV::U(c)) => Ok(c[0]),
                _ => me.err("internal: a loop with a barrier has a varying condition"),
            }
        };
        let no_outs = [None];
        if d.opcode == Opcode::While {
            Self::bind_carried(f, &p.region(first).args, carried, &hv);
            let ys = self.phased_region(f, first, &no_outs)?;
            let c = cond_of(self, ys)?;
            let body = self.b.create_block();
            let exit_args = Self::block_args(&hv);
            self.b.ins().brif(c, body, &[], exit, &exit_args);
            self.b.switch_to_block(body);
            Self::bind_carried(f, &p.region(second).args, carried, &hv);
            let ys = self.phased_region(f, second, carried)?;
            let uy: Vec<LV> = ys.into_iter().flatten().collect();
            self.back_edge();
            self.jump_with(hdr, uni_tys, &uy)?;
        } else {
            Self::bind_carried(f, &p.region(first).args, carried, &hv);
            let ys = self.phased_region(f, first, carried)?;
            let uy: Vec<LV> = ys.into_iter().flatten().collect();
            let uy: Vec<LV> = uy
                .into_iter()
                .zip(uni_tys)
                .map(|(v, &(t, u))| self.fix(t, u, v))
                .collect::<Result<_, _>>()?;
            Self::bind_carried(f, &p.region(second).args, carried, &uy);
            let ys = self.phased_region(f, second, &no_outs)?;
            let c = cond_of(self, ys)?;
            let again = self.b.create_block();
            let exit_args = Self::block_args(&uy);
            self.b.ins().brif(c, exit, &exit_args, again, &[]);
            self.b.switch_to_block(again);
            self.back_edge();
            self.jump_with(hdr, uni_tys, &uy)?;
        }
        self.b.switch_to_block(exit);
        let mut it = outs.into_iter();
        for (&v, sl) in d.results.iter().zip(carried) {
            let lv = if sl.is_none() { it.next() } else { None };
            Self::bind(f, v, sl, lv);
        }
        Ok(())
    }

    /// A `for` loop with a barrier in its body: a uniform counter, uniform carried values as
    /// block parameters, varying ones in per-work-item slots.
    fn group_for(
        &mut self,
        f: &mut Frame,
        o: Op,
        carried: &[Option<Vec<StackSlot>>],
        uni_tys: &[(Type, bool)],
    ) -> Result<(), LowerError> {
        let p = f.p;
        let d = p.op(o);
        let r = d.regions[0];
        let ity = p.ty(d.args[0]);
        let (s, _) = elem_of(ity);
        let lo = self.uniform_scalar(f, d.args[0])?;
        let hi = self.uniform_scalar(f, d.args[1])?;
        let step = self.uniform_scalar(f, d.args[2])?;
        let uinit = self.carry_in(f, &d.args[3..], carried)?;
        let zero = self.constant(&Const::zero(ity))[0];
        let u = |x: CV| LvLane::U(x);
        let pos = self.lanewise(Opcode::Gt, s, ScalarType::Bool, &[u(step), u(zero)], true)?;
        let lt = self.lanewise(Opcode::Lt, s, ScalarType::Bool, &[u(lo), u(hi)], true)?;
        let go = self.lanewise(
            Opcode::And,
            ScalarType::Bool,
            ScalarType::Bool,
            &[pos, lt],
            true,
        )?;
        let mut hdr_tys = vec![(ity, true)];
        hdr_tys.extend_from_slice(uni_tys);
        hdr_tys.push((Type::bool(), true));
        let (hdr, hv) = self.block_for(&hdr_tys);
        let (exit, outs) = self.block_for(uni_tys);
        let mut init = vec![LV::U(vec![lo])];
        init.extend(uinit);
        init.push(super::lane_lv(go));
        self.jump_with(hdr, &hdr_tys, &init)?;
        self.b.switch_to_block(hdr);
        let i = hv[0].clone();
        let ucarried = hv[1..1 + uni_tys.len()].to_vec();
        let LV::U(act) = &hv[1 + uni_tys.len()] else {
            return self.err("internal: loop flag");
        };
        let body = self.b.create_block();
        let exit_args = Self::block_args(&ucarried);
        self.b.ins().brif(act[0], body, &[], exit, &exit_args);
        self.b.switch_to_block(body);
        // Region arguments: the counter, then the carried values.
        let rargs = p.region(r).args.clone();
        f.vals[rargs[0].index()] = Some(i.clone());
        Self::bind_carried(f, &rargs[1..], carried, &ucarried);
        let ys = self.phased_region(f, r, carried)?;
        let uy: Vec<LV> = ys.into_iter().flatten().collect();
        let il = super::lane_of(&i, 0);
        let next = self.lanewise(Opcode::Add, s, s, &[il.clone(), u(step)], true)?;
        let (ok, next) = if s.bits() < 32 {
            (None, self.lanewise_raw_add(s, &il, &u(step), true)?)
        } else {
            let gt = self.lanewise(Opcode::Gt, s, ScalarType::Bool, &[next.clone(), il], true)?;
            (Some(gt), next)
        };
        let mut cont = self.lanewise(
            Opcode::Lt,
            s,
            ScalarType::Bool,
            &[next.clone(), u(hi)],
            true,
        )?;
        if let Some(gt) = ok {
            cont = self.lanewise(
                Opcode::And,
                ScalarType::Bool,
                ScalarType::Bool,
                &[cont, gt],
                true,
            )?;
        }
        let mut nv = vec![super::lane_lv(next)];
        nv.extend(uy);
        nv.push(super::lane_lv(cont));
        self.back_edge();
        self.jump_with(hdr, &hdr_tys, &nv)?;
        self.b.switch_to_block(exit);
        let mut it = outs.into_iter();
        for (&v, sl) in d.results.iter().zip(carried) {
            let lv = if sl.is_none() { it.next() } else { None };
            Self::bind(f, v, sl, lv);
        }
        Ok(())
    }

    /// `local_id`: the current block's work-items' ids (x fastest), as `<n x i32>` lanes.
    pub(super) fn local_id(&mut self, n: usize) -> LV {
        let [bx, by, _] = self.g().block;
        let (bx, by) = (bx as i64, by as i64);
        let base = self.base;
        let iota = self.iota32();
        let mut lanes: Vec<Vec<CV>> = Vec::new();
        if bx % BLOCK as i64 == 0 {
            // A block of work-items lies in one row: x = base % bx + lane; y, z uniform.
            let x0 = self.b.ins().srem_imm_s(base, bx);
            let x0 = self.b.ins().ireduce(T::I32, x0);
            let x0 = self.b.ins().splat(T::I32X4, x0);
            lanes.push(iota.iter().map(|&v| self.b.ins().iadd(v, x0)).collect());
            let row = self.b.ins().sdiv_imm_s(base, bx);
            let y = self.b.ins().srem_imm_s(row, by);
            let z = self.b.ins().sdiv_imm_s(row, by);
            for w in [y, z] {
                let w = self.b.ins().ireduce(T::I32, w);
                let v = self.b.ins().splat(T::I32X4, w);
                lanes.push(vec![v; parts(ScalarType::I32)]);
            }
        } else {
            let mut per: [Vec<CV>; 3] = Default::default();
            for j in 0..BLOCK {
                let l = self.b.ins().iadd_imm_s(base, j as i64);
                let x = self.b.ins().srem_imm_s(l, bx);
                let row = self.b.ins().sdiv_imm_s(l, bx);
                let y = self.b.ins().srem_imm_s(row, by);
                let z = self.b.ins().sdiv_imm_s(row, by);
                for (k, w) in [x, y, z].into_iter().enumerate() {
                    per[k].push(self.b.ins().ireduce(T::I32, w));
                }
            }
            for xs in per {
                lanes.push(self.build(ScalarType::I32, &xs));
            }
        }
        lanes.truncate(n);
        LV::V(lanes)
    }

    /// The row-major element number of `coords` (one work-item's, uniform-scalar lanes) in
    /// array `ai`, and whether to access it: in range on every axis and `active`.
    fn element_addr(&mut self, ai: usize, cs: ScalarType, coords: &[CV], active: CV) -> (CV, CV) {
        let dims = self.arrays[ai].dims.clone();
        let mut lin = self.iconst(T::I64, 0);
        let mut ok = active;
        for (&c, &n) in coords.iter().zip(&dims) {
            let c = if cs == ScalarType::I64 {
                c
            } else {
                self.b.ins().sextend(T::I64, c)
            };
            // 0 <= c < n as one unsigned compare.
            let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, c, n);
            ok = self.b.ins().band(ok, inb);
            let t = self.b.ins().imul(lin, n);
            lin = self.b.ins().iadd(t, c);
        }
        (lin, ok)
    }

    /// `store` and the atomics, work-item by work-item under `mask`.
    pub(super) fn memory_op(
        &mut self,
        f: &Frame,
        o: Op,
        args: &[LV],
        mask: &[CV],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(o);
        let LV::Array(ai) = args[0] else {
            return self.err("store or atomic on a non-array");
        };
        let (cs, nc) = elem_of(p.ty(d.args[1]));
        let (s, nl) = elem_of(p.ty(d.args[2]));
        let planes = self.arrays[ai].planes.clone();
        let bytes = crate::abi::storage_bytes(s) as i64;
        let coords: Vec<Vec<CV>> = (0..nc)
            .map(|k| match super::lane_of(&args[1], k) {
                LvLane::U(x) => vec![x; BLOCK],
                LvLane::V(v) => (0..BLOCK).map(|j| self.extract(cs, &v, j)).collect(),
            })
            .collect();
        let lane_vals = |me: &mut Self, lv: &LV, l: usize| -> Vec<CV> {
            match super::lane_of(lv, l) {
                LvLane::U(x) => vec![x; BLOCK],
                LvLane::V(v) => (0..BLOCK).map(|j| me.extract(s, &v, j)).collect(),
            }
        };
        // `atomic_cas %a, %c, %expected, %v`: the value stored is the last operand.
        let cas = d.opcode == Opcode::AtomicCas;
        let stored = if cas { &args[3] } else { &args[2] };
        let vals: Vec<Vec<CV>> = (0..nl).map(|l| lane_vals(self, stored, l)).collect();
        let cmp: Option<Vec<CV>> = cas.then(|| lane_vals(self, &args[2], 0));
        let sink = self.g().sink;
        // Float min/max/CAS keep the atomic forms (no plain float equivalents here).
        let plain = self.arrays[ai].local
            && match s {
                ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64 => true,
                ScalarType::F32 | ScalarType::F64 => d.opcode == Opcode::AtomicAdd,
                _ => false,
            };
        let mut olds = Vec::new();
        for j in 0..BLOCK {
            let m = self.b.ins().extractlane(mask[j / 4], (j % 4) as u8);
            let active = self.b.ins().icmp_imm_s(IntCC::NotEqual, m, 0);
            let cj: Vec<CV> = coords.iter().map(|c| c[j]).collect();
            let (lin, ok) = self.element_addr(ai, cs, &cj, active);
            let off = self.b.ins().imul_imm_s(lin, bytes);
            let sink_addr = self.slot_addr(sink);
            let addr_of = |me: &mut Self, plane: CV| {
                let a = me.b.ins().iadd(plane, off);
                me.b.ins().select(ok, a, sink_addr)
            };
            if d.opcode == Opcode::Store {
                for (l, &plane) in planes.iter().enumerate() {
                    let a = addr_of(self, plane);
                    let v = self.storage_bits(s, vals[l][j]);
                    self.b.ins().store(mem(), v, a, 0);
                }
                continue;
            }
            let a = addr_of(self, planes[0]);
            let v = vals[0][j];
            let old = match d.opcode {
                // A shared array belongs to the one thread running the work-group: a plain
                // read-modify-write gives what the atomic gives (work-items and lanes run one
                // after another), without a `lock`ed instruction (bincount's counts).
                op if plain => {
                    let old = self.b.ins().load(sty(s), mem(), a, 0);
                    let signed = s.is_signed_int();
                    let new = match op {
                        Opcode::AtomicAdd if s.is_float() => self.b.ins().fadd(old, v),
                        Opcode::AtomicAdd => self.b.ins().iadd(old, v),
                        Opcode::AtomicMin if signed => self.b.ins().smin(old, v),
                        Opcode::AtomicMin => self.b.ins().umin(old, v),
                        Opcode::AtomicMax if signed => self.b.ins().smax(old, v),
                        Opcode::AtomicMax => self.b.ins().umax(old, v),
                        Opcode::AtomicCas => {
                            let e = cmp.as_ref().expect("cas")[j];
                            let eq = self.b.ins().icmp(IntCC::Equal, old, e);
                            self.b.ins().select(eq, v, old)
                        }
                        _ => v,
                    };
                    self.b.ins().store(mem(), new, a, 0);
                    old
                }
                Opcode::AtomicAdd if s.is_float() => self.atomic_fadd(s, a, v),
                Opcode::AtomicCas => {
                    let e = cmp.as_ref().expect("cas")[j];
                    self.b.ins().atomic_cas(mem(), a, e, v)
                }
                op => {
                    let signed = s.is_signed_int();
                    let rmw = match op {
                        Opcode::AtomicAdd => AtomicRmwOp::Add,
                        Opcode::AtomicMin if signed => AtomicRmwOp::Smin,
                        Opcode::AtomicMin => AtomicRmwOp::Umin,
                        Opcode::AtomicMax if signed => AtomicRmwOp::Smax,
                        Opcode::AtomicMax => AtomicRmwOp::Umax,
                        _ => AtomicRmwOp::Xchg,
                    };
                    self.b.ins().atomic_rmw(sty(s), mem(), rmw, a, v)
                }
            };
            let zero = self.zero_scalar(sty(s));
            olds.push(self.b.ins().select(ok, old, zero));
        }
        if d.opcode == Opcode::Store {
            return Ok(Vec::new());
        }
        Ok(vec![LV::V(vec![self.build(s, &olds)])])
    }

    /// A uniform-scalar lane as the bits a buffer stores (bool as an i32 0/1).
    fn storage_bits(&mut self, s: ScalarType, v: CV) -> CV {
        if s == ScalarType::Bool {
            self.b.ins().uextend(T::I32, v)
        } else {
            v
        }
    }

    /// Atomic f32 or f64 add by a compare-and-swap loop on the bits; gives the old value.
    fn atomic_fadd(&mut self, s: ScalarType, addr: CV, v: CV) -> CV {
        let (it, ft) = if s == ScalarType::F64 {
            (T::I64, T::F64)
        } else {
            (T::I32, T::F32)
        };
        let lp = self.b.create_block();
        let old = self.b.append_block_param(lp, it);
        let done = self.b.create_block();
        let res = self.b.append_block_param(done, it);
        let first = self.b.ins().load(it, mem(), addr, 0);
        self.b.ins().jump(lp, &[BlockArg::Value(first)]);
        self.b.switch_to_block(lp);
        let of = self.b.ins().bitcast(ft, vflags(), old);
        let sum = self.b.ins().fadd(of, v);
        let sb = self.b.ins().bitcast(it, vflags(), sum);
        let seen = self.b.ins().atomic_cas(mem(), addr, old, sb);
        let same = self.b.ins().icmp(IntCC::Equal, seen, old);
        self.b.ins().brif(
            same,
            done,
            &[BlockArg::Value(old)],
            lp,
            &[BlockArg::Value(seen)],
        );
        self.b.switch_to_block(done);
        self.b.ins().bitcast(ft, vflags(), res)
    }

    /// The kernel-only ops other than `barrier`, `shared`, `store` and the atomics.
    pub(super) fn kernel_id(&mut self, op: Opcode, t: Type) -> Result<LV, LowerError> {
        let (_, n) = elem_of(t);
        let g = self.g();
        let (gid, ng, block) = (g.gid, g.ngroups, g.block);
        Ok(match op {
            Opcode::LocalId => self.local_id(n),
            Opcode::GroupId => LV::U(gid[..n].to_vec()),
            Opcode::NumGroups => LV::U(ng[..n].to_vec()),
            Opcode::LocalSize => LV::U(
                block[..n]
                    .iter()
                    .map(|&x| self.iconst(T::I32, x as i64))
                    .collect(),
            ),
            Opcode::Clock => {
                let c = self.libs.clock;
                LV::U(vec![self.call(c, &[])])
            }
            _ => return self.err(format!("`{}` outside a segment", op.mnemonic())),
        })
    }
}

impl<'a, 'b> Lowerer<'a, 'b> {
    /// Lowers kernel `p` for work-groups of `block` work-items into the builder's function
    /// `(ctx, first_group, end_group)`: the groups' ids come from their row-major number (x
    /// fastest) and the grid in the context's launch words.
    pub(crate) fn lower_group_kernel(
        m: &'a weft_ir::Module,
        p: &'a Program,
        b: &'a mut cranelift_frontend::FunctionBuilder<'b>,
        libs: &'a crate::Libs,
        layout: &crate::abi::Layout,
        block: [u32; 3],
    ) -> Result<(), LowerError> {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (ctx, begin, end) = (params[0], params[1], params[2]);
        let mut l = Lowerer {
            m,
            b,
            libs,
            ctx,
            base: begin,
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
        let size: usize = block.iter().map(|&x| x as usize).product();
        let zero = l.iconst(T::I32, 0);
        l.group = Some(GroupState {
            block,
            size,
            gid: [zero; 3],
            ngroups: [zero; 3],
            sink: ir::StackSlot::from_u32(0),
            barrier_ops: segment::barrier_ops(p),
            bytes: 0,
        });
        let sink = l.slot(64)?;
        l.g_mut().sink = sink;
        let mut frame = Frame::new(p, weft_ir::uniform::uniform_values(m, p));
        l.bind_params(p, &mut frame, layout);
        let mut ng64 = Vec::new();
        for k in 0..3 {
            let w = l.word(layout.launch + 1 + k);
            ng64.push(w);
            let n32 = l.b.ins().ireduce(T::I32, w);
            l.g_mut().ngroups[k] = n32;
        }
        // Shared arrays: one stack slot per tuple lane, reused by every group of the call.
        for &o in &p.region(p.body).ops {
            let d = p.op(o);
            if d.opcode != Opcode::Shared {
                continue;
            }
            let t = p.ty(d.results[0]);
            let (_, e, boundary) = t.array_parts().expect("shared array type");
            let (s, n) = elem_of(e);
            let dims = segment::shared_dims(p, o);
            let count: usize = dims.iter().product();
            let mut planes = Vec::new();
            for _ in 0..n {
                let sl = l.slot(count * crate::abi::storage_bytes(s))?;
                planes.push(l.slot_addr(sl));
            }
            let dims_cv: Vec<CV> = dims.iter().map(|&x| l.iconst(T::I64, x as i64)).collect();
            let safe = dims
                .iter()
                .map(|&x| {
                    let a = l.iconst(T::I64, x as i64);
                    let b = l.iconst(T::I64, x as i64 - 1);
                    (a, b)
                })
                .collect();
            l.arrays.push(super::ArrayInfo {
                planes,
                dims: dims_cv,
                safe,
                elem: s,
                boundary,
                local: true,
            });
            frame.vals[d.results[0].index()] = Some(LV::Array(l.arrays.len() - 1));
        }
        let iota = l.iota32();
        l.iota = Some(iota);
        let hdr = l.b.create_block();
        let g = l.b.append_block_param(hdr, T::I64);
        let body = l.b.create_block();
        let exit = l.b.create_block();
        l.b.ins().jump(hdr, &[BlockArg::Value(begin)]);
        l.b.switch_to_block(hdr);
        let more = l.b.ins().icmp(IntCC::SignedLessThan, g, end);
        l.b.ins().brif(more, body, &[], exit, &[]);
        l.b.switch_to_block(body);
        let gx = l.b.ins().urem(g, ng64[0]);
        let row = l.b.ins().udiv(g, ng64[0]);
        let gy = l.b.ins().urem(row, ng64[1]);
        let gz = l.b.ins().udiv(row, ng64[1]);
        for (k, v) in [gx, gy, gz].into_iter().enumerate() {
            let v32 = l.b.ins().ireduce(T::I32, v);
            l.g_mut().gid[k] = v32;
        }
        l.phased_region(&mut frame, p.body, &[])?;
        let next = l.b.ins().iadd_imm_s(g, 1);
        l.b.ins().jump(hdr, &[BlockArg::Value(next)]);
        l.b.switch_to_block(exit);
        l.b.ins().return_(&[]);
        l.finish_watchdog();
        l.b.seal_all_blocks();
        Ok(())
    }
}
