//! Kernel mode on the host through LLVM, the MCUDA way (Stratton et al., "MCUDA", LCPC 2008,
//! §3), as the Cranelift backend does it (docs/kernel-mode.md): one call runs work-groups
//! `[begin, end)`; each group's body is split at its barriers into segments, and each segment
//! is a loop over the group's work-items, one work-item per iteration (scalar code, which
//! LLVM's loop vectorizer may widen). Varying values that live from one segment into another
//! are kept in per-work-item stack arrays; group-uniform values stay SSA values, since each
//! work-item loop runs at least once and its body dominates what follows. Control flow that
//! contains a barrier is group-uniform (the verifier's rule), so it runs once per group
//! around the segment loops.

use super::{elem_of, lty, storage_ty, ArrayInfo, Frame, Lane, Lower, LowerError, Lowered, LV};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use weft_ir::abi::{storage_bytes, Layout};
use weft_ir::segment::{self, Piece};
use weft_ir::{Op, Opcode, Region, ScalarType, Type, Value};

/// The most stack one work-group may use for its shared arrays and per-work-item values (the
/// Cranelift backend's limit too).
pub(crate) const MAX_GROUP_STACK: usize = 1 << 20;

/// The per-kernel state of a host group lowering.
pub(super) struct Group {
    /// Work-items per group on x, y, z (compiled in).
    block: [u32; 3],
    /// Work-items per group.
    size: usize,
    /// This group's id on x, y, z (i32 operands).
    gid: [String; 3],
    /// Groups on x, y, z (i32 operands).
    ngroups: [String; 3],
    /// The current work-item's number in its group (i64), inside a segment.
    wi: String,
    /// Ops that contain a barrier (themselves or in their regions).
    barrier_ops: HashSet<Op>,
    /// Which values are the same for every work-item of a group.
    guni: Vec<bool>,
    /// Varying values kept per work-item: one `[size x T]` stack array per tuple lane.
    spill: HashMap<Value, Vec<String>>,
    /// Bytes of stack used so far.
    bytes: usize,
}

/// Where a barrier-containing control op keeps one result (or carried value).
#[derive(Clone)]
enum Carry {
    /// Group-uniform: one scalar stack slot per tuple lane.
    U(Vec<String>),
    /// Varying: one per-work-item array per tuple lane.
    V(Vec<String>),
}

impl Carry {
    fn varying(&self) -> Option<Vec<String>> {
        match self {
            Carry::V(s) => Some(s.clone()),
            Carry::U(_) => None,
        }
    }
}

/// An open work-item loop.
struct WorkItemLoop {
    counter: String,
    head: String,
    exit: String,
    saved: String,
}

impl Lower<'_> {
    fn g(&self) -> &Group {
        self.group.as_ref().expect("group lowering")
    }

    fn g_mut(&mut self) -> &mut Group {
        self.group.as_mut().expect("group lowering")
    }

    /// A stack array of type `ty` taking `bytes`, counted against [`MAX_GROUP_STACK`].
    fn group_alloca(&mut self, ty: &str, bytes: usize) -> Result<String, LowerError> {
        let total = self.g().bytes + bytes.div_ceil(16) * 16;
        if total > MAX_GROUP_STACK {
            return self.err(format!(
                "a work-group needs more than {MAX_GROUP_STACK} bytes of CPU stack for its shared arrays and per-work-item values; use a smaller block"
            ));
        }
        self.g_mut().bytes = total;
        self.tmp += 1;
        let a = format!("%gmem{}", self.tmp);
        let _ = writeln!(self.prelude, "  {a} = alloca {ty}, align 16");
        Ok(a)
    }

    /// Per-work-item storage for a value of type `t`: one array per tuple lane.
    fn work_item_slots(&mut self, t: Type) -> Result<Vec<String>, LowerError> {
        let (s, n) = elem_of(t);
        let size = self.g().size;
        let ty = format!("[{size} x {}]", lty(s));
        let bytes = size * (s.bits() as usize).div_ceil(8);
        (0..n).map(|_| self.group_alloca(&ty, bytes)).collect()
    }

    /// The current work-item's entry of a per-work-item array of `s`.
    fn work_item_addr(&mut self, s: ScalarType, slot: &str) -> String {
        let size = self.g().size;
        let wi = self.g().wi.clone();
        self.def(format!(
            "getelementptr inbounds [{size} x {}], ptr {slot}, i64 0, i64 {wi}",
            lty(s)
        ))
    }

    /// Stores `lv` (of type `t`) for the current work-item into `slots`.
    fn spill(&mut self, t: Type, lv: &LV, slots: &[String]) {
        let (s, _) = elem_of(t);
        for (l, slot) in slots.iter().enumerate() {
            let x = super::lane_of(lv, l).v;
            let a = self.work_item_addr(s, slot);
            self.line(format!("store {} {x}, ptr {a}", lty(s)));
        }
    }

    /// Loads the current work-item's value of type `t` from `slots`.
    fn reload(&mut self, t: Type, slots: &[String]) -> LV {
        let (s, _) = elem_of(t);
        LV::U(
            slots
                .iter()
                .map(|slot| {
                    let a = self.work_item_addr(s, slot);
                    self.def(format!("load {}, ptr {a}", lty(s)))
                })
                .collect(),
        )
    }

    /// Reloads, for the current work-item, the kept values among `used`.
    fn reload_used(&mut self, f: &mut Frame, used: &HashSet<Value>) {
        let mut vs: Vec<Value> = used
            .iter()
            .copied()
            .filter(|v| self.g().spill.contains_key(v))
            .collect();
        vs.sort_by_key(|v| v.index());
        for v in vs {
            let slots = self.g().spill[&v].clone();
            f.vals[v.index()] = Some(self.reload(f.p.ty(v), &slots));
        }
    }

    /// Opens a loop over the group's work-items (bottom-tested: it runs at least once).
    fn work_item_loop(&mut self) -> WorkItemLoop {
        let counter = self.alloca("i64");
        self.line(format!("store i64 0, ptr {counter}"));
        let (head, exit) = (self.label("workitem"), self.label("workitems_done"));
        self.br(&head);
        self.block(&head);
        let wi = self.def(format!("load i64, ptr {counter}"));
        let saved = std::mem::replace(&mut self.g_mut().wi, wi);
        WorkItemLoop {
            counter,
            head,
            exit,
            saved,
        }
    }

    /// Closes a work-item loop.
    fn end_work_item_loop(&mut self, w: WorkItemLoop) {
        let wi = std::mem::replace(&mut self.g_mut().wi, w.saved);
        let size = self.g().size;
        let next = self.def(format!("add i64 {wi}, 1"));
        self.line(format!("store i64 {next}, ptr {}", w.counter));
        let more = self.def(format!("icmp slt i64 {next}, {size}"));
        self.condbr(&more, &w.head, &w.exit);
        self.block(&w.exit);
    }

    /// Lowers region `r` of a kernel at group level: its segments as work-item loops, its
    /// barrier-containing control ops once per group. The region's arguments must be bound
    /// already. Varying yields are stored into `outs` (`None` for uniform yields); returns
    /// the uniform yields (`None` where varying).
    fn phased_region(
        &mut self,
        f: &mut Frame,
        r: Region,
        outs: &[Option<Vec<String>>],
    ) -> Result<Vec<Option<LV>>, LowerError> {
        let p = f.p;
        let term = *p
            .region(r)
            .ops
            .last()
            .expect("region ends with a terminator");
        let (items, used) = segment::split(p, r, &self.g().barrier_ops);
        let mut uniform_yields = Vec::new();
        let last = items.len() - 1;
        for (i, it) in items.iter().enumerate() {
            let os = match it {
                Piece::Group(o) => {
                    self.group_op(f, *o)?;
                    continue;
                }
                Piece::Segment(os) => os,
            };
            // Varying values that outlive this segment (constants are literals: they need
            // no storage).
            let mut live_out: Vec<Value> = Vec::new();
            for &o in os {
                if p.op(o).opcode == Opcode::Const {
                    continue;
                }
                for &v in &p.op(o).results {
                    let elsewhere = used
                        .iter()
                        .enumerate()
                        .any(|(j, u)| j != i && u.contains(&v));
                    if !self.g().guni[v.index()] && !p.ty(v).is_array() && elsewhere {
                        live_out.push(v);
                    }
                }
            }
            let mut slots = Vec::new();
            for &v in &live_out {
                slots.push(self.work_item_slots(p.ty(v))?);
            }
            let is_last = i == last;
            if os.len() == 1 && is_last && outs.iter().all(Option::is_none) {
                // Only a terminator with uniform yields: nothing per work-item.
                for &y in &p.op(term).args {
                    uniform_yields.push(Some(self.get(f, y)?));
                }
                continue;
            }
            let w = self.work_item_loop();
            self.reload_used(f, &used[i]);
            let mut ys: Vec<Option<LV>> = Vec::new();
            for &o in os {
                let d = p.op(o);
                if d.opcode.is_terminator() {
                    for (k, &a) in d.args.iter().enumerate() {
                        let lv = self.get(f, a)?;
                        match outs.get(k).and_then(Option::as_ref) {
                            Some(sl) => {
                                self.spill(p.ty(a), &lv, sl);
                                ys.push(None);
                            }
                            None => ys.push(Some(lv)),
                        }
                    }
                    continue;
                }
                let res = self.op(f, o, None)?;
                for (&v, lv) in d.results.iter().zip(res) {
                    self.set(f, v, lv)?;
                }
            }
            for (&v, sl) in live_out.iter().zip(&slots) {
                let lv = self.get(f, v)?;
                self.spill(p.ty(v), &lv, sl);
            }
            self.end_work_item_loop(w);
            if is_last {
                uniform_yields = ys;
            }
            for (v, s) in live_out.into_iter().zip(slots) {
                f.vals[v.index()] = None;
                self.g_mut().spill.insert(v, s);
            }
        }
        Ok(uniform_yields)
    }

    /// Storage for the results (or carried values) `vals` of a barrier-containing op.
    fn carries(&mut self, f: &Frame, vals: &[Value]) -> Result<Vec<Carry>, LowerError> {
        vals.iter()
            .map(|&v| {
                let t = f.p.ty(v);
                if self.g().guni[v.index()] {
                    let (s, n) = elem_of(t);
                    Ok(Carry::U((0..n).map(|_| self.alloca(lty(s))).collect()))
                } else {
                    self.work_item_slots(t).map(Carry::V)
                }
            })
            .collect()
    }

    /// Binds `vals` (results or region arguments) to their storage: uniform ones loaded,
    /// varying ones kept per work-item.
    fn bind(&mut self, f: &mut Frame, vals: &[Value], carries: &[Carry]) {
        for (&v, c) in vals.iter().zip(carries) {
            match c {
                Carry::U(slots) => {
                    let (s, _) = elem_of(f.p.ty(v));
                    let xs = slots
                        .iter()
                        .map(|a| self.def(format!("load {}, ptr {a}", lty(s))))
                        .collect();
                    f.vals[v.index()] = Some(LV::U(xs));
                }
                Carry::V(slots) => {
                    f.vals[v.index()] = None;
                    self.g_mut().spill.insert(v, slots.clone());
                }
            }
        }
    }

    /// Stores the uniform yields `ys` (in order, `None` for varying ones) of type `tys`.
    fn store_uniform(&mut self, tys: &[Type], carries: &[Carry], ys: &[Option<LV>]) {
        for ((c, y), &t) in carries.iter().zip(ys).zip(tys) {
            if let (Carry::U(slots), Some(lv)) = (c, y) {
                let (s, _) = elem_of(t);
                for (l, a) in slots.iter().enumerate() {
                    let x = super::lane_of(lv, l).v;
                    self.line(format!("store {} {x}, ptr {a}", lty(s)));
                }
            }
        }
    }

    /// Stores a loop's initial values `inits` into their storage: varying ones per
    /// work-item (in a work-item loop), uniform ones once.
    fn carry_in(
        &mut self,
        f: &mut Frame,
        inits: &[Value],
        carries: &[Carry],
    ) -> Result<(), LowerError> {
        let p = f.p;
        if carries.iter().any(|c| matches!(c, Carry::V(_))) {
            let w = self.work_item_loop();
            let used: HashSet<Value> = inits.iter().copied().collect();
            self.reload_used(f, &used);
            for (&a, c) in inits.iter().zip(carries) {
                if let Carry::V(sl) = c {
                    let lv = self.get(f, a)?;
                    self.spill(p.ty(a), &lv, sl);
                }
            }
            self.end_work_item_loop(w);
        }
        let mut ys = Vec::new();
        for (&a, c) in inits.iter().zip(carries) {
            ys.push(match c {
                Carry::U(_) => Some(self.get(f, a)?),
                Carry::V(_) => None,
            });
        }
        let tys: Vec<Type> = inits.iter().map(|&a| p.ty(a)).collect();
        self.store_uniform(&tys, carries, &ys);
        Ok(())
    }

    /// A group-uniform scalar (a condition or loop bound).
    fn uniform_scalar(&mut self, f: &Frame, v: Value) -> Result<Lane, LowerError> {
        match self.get(f, v)? {
            LV::U(u) => Ok(Lane {
                v: u[0].clone(),
                u: true,
            }),
            _ => self.err("internal: barrier under varying control flow"),
        }
    }

    /// The condition a region yields first.
    fn condition(&self, ys: Vec<Option<LV>>) -> Result<String, LowerError> {
        match ys.into_iter().next().flatten() {
            Some(LV::U(c)) => Ok(c[0].clone()),
            _ => self.err("internal: a loop with a barrier has a varying condition"),
        }
    }

    /// A control op that contains a barrier, once per group.
    fn group_op(&mut self, f: &mut Frame, o: Op) -> Result<(), LowerError> {
        let p = f.p;
        let d = p.op(o);
        let carries = self.carries(f, &d.results)?;
        let outs: Vec<Option<Vec<String>>> = carries.iter().map(Carry::varying).collect();
        let tys: Vec<Type> = d.results.iter().map(|&v| p.ty(v)).collect();
        let no_outs = [None];
        match d.opcode {
            Opcode::If => {
                let c = self.uniform_scalar(f, d.args[0])?;
                let (lt, le, lj) = (self.label("then"), self.label("else"), self.label("endif"));
                self.condbr(&c.v, &lt, &le);
                for (l, r) in [(&lt, d.regions[0]), (&le, d.regions[1])] {
                    self.block(l);
                    let ys = self.phased_region(f, r, &outs)?;
                    self.store_uniform(&tys, &carries, &ys);
                    self.br(&lj);
                }
                self.block(&lj);
            }
            Opcode::For => {
                let (s, _) = elem_of(p.ty(d.args[0]));
                let lo = self.uniform_scalar(f, d.args[0])?;
                let hi = self.uniform_scalar(f, d.args[1])?;
                let step = self.uniform_scalar(f, d.args[2])?;
                self.carry_in(f, &d.args[3..], &carries)?;
                let zero = Lane {
                    v: super::literal(s, 0),
                    u: true,
                };
                let bool_ = ScalarType::Bool;
                let pos = self.lanewise(Opcode::Gt, s, bool_, &[step.clone(), zero], true)?;
                let lt = self.lanewise(Opcode::Lt, s, bool_, &[lo.clone(), hi.clone()], true)?;
                let go = self.and(true, &pos.v, &lt.v);
                let counter = self.alloca(lty(s));
                self.line(format!("store {} {}, ptr {counter}", lty(s), lo.v));
                let (body, exit) = (self.label("groupfor"), self.label("groupfor_done"));
                self.condbr(&go, &body, &exit);
                self.block(&body);
                let i = self.def(format!("load {}, ptr {counter}", lty(s)));
                let rargs = p.region(d.regions[0]).args.clone();
                f.vals[rargs[0].index()] = Some(LV::U(vec![i.clone()]));
                self.bind(f, &rargs[1..], &carries);
                let ys = self.phased_region(f, d.regions[0], &outs)?;
                self.store_uniform(&tys, &carries, &ys);
                let il = Lane { v: i, u: true };
                let next = self.lanewise(Opcode::Add, s, s, &[il.clone(), step], true)?;
                let gt = self.lanewise(Opcode::Gt, s, bool_, &[next.clone(), il], true)?;
                let lt = self.lanewise(Opcode::Lt, s, bool_, &[next.clone(), hi], true)?;
                let cont = self.and(true, &gt.v, &lt.v);
                self.line(format!("store {} {}, ptr {counter}", lty(s), next.v));
                self.back_edge();
                self.condbr(&cont, &body, &exit);
                self.block(&exit);
            }
            Opcode::While => {
                self.carry_in(f, &d.args, &carries)?;
                let (hdr, body, exit) = (
                    self.label("groupwhile"),
                    self.label("groupwhile_body"),
                    self.label("groupwhile_done"),
                );
                self.br(&hdr);
                self.block(&hdr);
                let (first, second) = (d.regions[0], d.regions[1]);
                let args = p.region(first).args.clone();
                self.bind(f, &args, &carries);
                let ys = self.phased_region(f, first, &no_outs)?;
                let c = self.condition(ys)?;
                self.condbr(&c, &body, &exit);
                self.block(&body);
                let args = p.region(second).args.clone();
                self.bind(f, &args, &carries);
                let ys = self.phased_region(f, second, &outs)?;
                self.store_uniform(&tys, &carries, &ys);
                self.back_edge();
                self.br(&hdr);
                self.block(&exit);
            }
            _ => {
                // do … until
                self.carry_in(f, &d.args, &carries)?;
                let (body, exit) = (self.label("groupdo"), self.label("groupdo_done"));
                self.br(&body);
                self.block(&body);
                let (first, second) = (d.regions[0], d.regions[1]);
                let args = p.region(first).args.clone();
                self.bind(f, &args, &carries);
                let ys = self.phased_region(f, first, &outs)?;
                self.store_uniform(&tys, &carries, &ys);
                let args = p.region(second).args.clone();
                self.bind(f, &args, &carries);
                let ys = self.phased_region(f, second, &no_outs)?;
                let c = self.condition(ys)?;
                self.back_edge();
                self.condbr(&c, &exit, &body);
                self.block(&exit);
            }
        }
        self.bind(f, &d.results, &carries);
        Ok(())
    }

    /// The kernel-only ops of a host kernel other than `barrier` and `shared` (both handled
    /// by the segmentation): ids from the group and work-item loops, `clock` as the CPU's
    /// cycle counter, stores and atomics as on PTX.
    pub(super) fn host_kernel_op(
        &mut self,
        f: &Frame,
        op: Op,
        args: &[LV],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(op);
        let n = d.results.first().map_or(1, |&v| elem_of(p.ty(v)).1);
        let ids = match d.opcode {
            Opcode::LocalId => self.local_id(),
            Opcode::GroupId => self.g().gid.to_vec(),
            Opcode::NumGroups => self.g().ngroups.to_vec(),
            Opcode::LocalSize => self.g().block.iter().map(|b| b.to_string()).collect(),
            Opcode::Clock => vec![self.intrinsic("", "llvm.readcyclecounter", "i64", &[])],
            Opcode::Barrier | Opcode::Shared => {
                return self.err(format!(
                    "internal: `{}` inside a work-item loop",
                    d.opcode.mnemonic()
                ))
            }
            _ => return self.access(f, op, args),
        };
        Ok(vec![LV::U(ids.into_iter().take(n).collect())])
    }

    /// The current work-item's id on x, y, z (i32, x fastest).
    fn local_id(&mut self) -> Vec<String> {
        let [bx, by, bz] = self.g().block;
        let wi = self.g().wi.clone();
        if by == 1 && bz == 1 {
            let x = self.def(format!("trunc i64 {wi} to i32"));
            return vec![x, "0".into(), "0".into()];
        }
        let x = self.def(format!("urem i64 {wi}, {bx}"));
        let row = self.def(format!("udiv i64 {wi}, {bx}"));
        let y = self.def(format!("urem i64 {row}, {by}"));
        let z = self.def(format!("udiv i64 {row}, {by}"));
        [x, y, z]
            .iter()
            .map(|v| self.def(format!("trunc i64 {v} to i32")))
            .collect()
    }
}

/// Finishes the host text of a kernel whose parameters are bound, for work-groups of
/// `block` work-items: `void(ptr ctx, i64 begin, i64 end)` runs groups `[begin, end)`
/// (row-major numbers, x fastest), the grid's extents in the context's launch words.
pub(super) fn finish(
    mut l: Lower,
    mut f: Frame,
    fast: bool,
    header: &str,
    sym: &str,
    layout: Layout,
    block: [u32; 3],
) -> Result<Lowered, LowerError> {
    let p = f.p;
    let size: usize = block.iter().map(|&b| b as usize).product();
    l.group = Some(Group {
        block,
        size,
        gid: Default::default(),
        ngroups: Default::default(),
        wi: String::new(),
        barrier_ops: segment::barrier_ops(p),
        guni: weft_ir::uniform::uniform_values(l.m, p),
        spill: HashMap::new(),
        bytes: 0,
    });
    // Shared arrays: stack arrays, one per tuple lane, reused by every group of the call.
    for &o in &p.region(p.body).ops {
        let d = p.op(o);
        if d.opcode != Opcode::Shared {
            continue;
        }
        let (_, e, boundary) = p.ty(d.results[0]).array_parts().expect("shared array type");
        let (s, n) = elem_of(e);
        let dims = segment::shared_dims(p, o);
        let count: usize = dims.iter().product();
        let planes = (0..n)
            .map(|_| {
                l.group_alloca(
                    &format!("[{count} x {}]", storage_ty(s)),
                    count * storage_bytes(s),
                )
            })
            .collect::<Result<_, _>>()?;
        l.arrays.push(ArrayInfo {
            planes,
            dims: dims.iter().map(|x| x.to_string()).collect(),
            elem: s,
            boundary,
            space: "ptr",
            writable: true,
            interleaved: false,
            local: true,
        });
        f.vals[d.results[0].index()] = Some(LV::Array(l.arrays.len() - 1));
    }
    l.block("body");
    let ng: Vec<String> = (0..3).map(|k| l.word(layout.launch + 1 + k)).collect();
    let gx = l.def(format!("urem i64 %group, {}", ng[0]));
    let row = l.def(format!("udiv i64 %group, {}", ng[0]));
    let gy = l.def(format!("urem i64 {row}, {}", ng[1]));
    let gz = l.def(format!("udiv i64 {row}, {}", ng[1]));
    let mut gid: [String; 3] = Default::default();
    let mut ngroups: [String; 3] = Default::default();
    for k in 0..3 {
        gid[k] = l.def(format!("trunc i64 {} to i32", [&gx, &gy, &gz][k]));
        ngroups[k] = l.def(format!("trunc i64 {} to i32", ng[k]));
    }
    l.g_mut().gid = gid;
    l.g_mut().ngroups = ngroups;
    l.phased_region(&mut f, p.body, &[])?;
    l.br("latch");
    let mut text = String::new();
    text.push_str(header);
    let _ = writeln!(
        text,
        "define void @{sym}(ptr noalias nocapture readonly %ctx, i64 %begin, i64 %end) #0 {{\nentry:"
    );
    text.push_str(&l.prelude);
    text.push_str("  br label %head\nhead:\n  %group = phi i64 [ %begin, %entry ], [ %next, %latch ]\n  %more = icmp slt i64 %group, %end\n  br i1 %more, label %body, label %exit\n");
    text.push_str(&l.body);
    text.push_str("latch:\n  %next = add i64 %group, 1\n  br label %head\nexit:\n  ret void\n");
    text.push_str(super::abort_block(&l));
    text.push_str("}\n");
    let _ = writeln!(
        text,
        "attributes #0 = {{ nounwind{} }}",
        super::host_fn_attrs(fast)
    );
    super::finish_text(&mut l, &mut text);
    Ok(Lowered { text, layout })
}
