//! Kernel mode through LLVM to PTX (DESIGN §2): one work-item per CUDA thread, work-groups as
//! thread blocks. Ids come from the `%tid`/`%ctaid`/`%ntid`/`%nctaid` special registers,
//! `barrier` is `bar.sync 0`, `shared` arrays are `addrspace(3)` globals, and stores and
//! atomics are bounds-checked (an access outside the array does nothing). The stores and
//! atomics serve host kernels too (`group.rs`).

use super::{elem_of, storage_ty, ArrayInfo, Flavor, Frame, Lower, LowerError, Lowered, LV};
use std::fmt::Write as _;
use weft_ir::abi::{storage_bytes, Layout};
use weft_ir::{Opcode, ScalarType};

impl Lower<'_> {
    /// A special register `%<reg>.<axis>` as i32.
    fn sreg(&mut self, reg: &str, axis: usize) -> String {
        let a = ["x", "y", "z"][axis];
        let name = format!("llvm.nvvm.read.ptx.sreg.{reg}.{a}");
        self.intrinsic("", &name, "i32", &[])
    }

    /// The kernel-only ops, one work-item per thread.
    pub(super) fn kernel_op(
        &mut self,
        f: &Frame,
        op: weft_ir::Op,
        args: &[LV],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(op);
        let res_ty = d.results.first().map(|&v| p.ty(v));
        if self.flavor == Flavor::Host {
            return self.host_kernel_op(f, op, args);
        }
        let ids = |me: &mut Self, reg: &str| -> Vec<LV> {
            let (_, n) = elem_of(res_ty.expect("typed"));
            vec![LV::U((0..n).map(|k| me.sreg(reg, k)).collect())]
        };
        match d.opcode {
            Opcode::LocalId => Ok(ids(self, "tid")),
            Opcode::GroupId => Ok(ids(self, "ctaid")),
            Opcode::LocalSize => Ok(ids(self, "ntid")),
            Opcode::NumGroups => Ok(ids(self, "nctaid")),
            Opcode::Clock => Ok(vec![LV::U(vec![self.intrinsic(
                "",
                "llvm.nvvm.read.ptx.sreg.clock64",
                "i64",
                &[],
            )])]),
            Opcode::Barrier => {
                self.declare("declare void @llvm.nvvm.barrier0()".into());
                self.line("call void @llvm.nvvm.barrier0()");
                Ok(Vec::new())
            }
            Opcode::Shared => self.shared(f, op),
            _ => self.access(f, op, args),
        }
    }

    /// A `shared` array: one `addrspace(3)` global per tuple lane.
    fn shared(&mut self, f: &Frame, op: weft_ir::Op) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(op);
        let t = p.ty(d.results[0]);
        let (_, e, boundary) = t.array_parts().expect("shared array type");
        let (s, n) = elem_of(e);
        let dims = weft_ir::segment::shared_dims(p, op);
        let count: usize = dims.iter().product();
        let st = storage_ty(s);
        let mut planes = Vec::new();
        for _ in 0..n {
            self.tmp += 1;
            let g = format!("@shared{}", self.tmp);
            self.declare(format!(
                "{g} = internal addrspace(3) global [{count} x {st}] undef, align 16"
            ));
            planes.push(g);
        }
        self.arrays.push(ArrayInfo {
            planes,
            dims: dims.iter().map(|x| x.to_string()).collect(),
            elem: s,
            boundary,
            space: "ptr addrspace(3)",
            writable: true,
            interleaved: false,
            local: false,
        });
        Ok(vec![LV::Array(self.arrays.len() - 1)])
    }

    /// `store` and the atomics: the element's address when every coordinate is in range,
    /// the access in a branch taken only then; atomics give 0 otherwise.
    pub(super) fn access(
        &mut self,
        f: &Frame,
        op: weft_ir::Op,
        args: &[LV],
    ) -> Result<Vec<LV>, LowerError> {
        let p = f.p;
        let d = p.op(op);
        let LV::Array(ai) = args[0] else {
            return self.err("store or atomic on a non-array");
        };
        let (cs, _) = elem_of(p.ty(d.args[1]));
        let (s, nl) = elem_of(p.ty(d.args[2]));
        let (planes, dims, space, local) = {
            let a = &self.arrays[ai];
            (a.planes.clone(), a.dims.clone(), a.space, a.local)
        };
        let LV::U(coords) = &args[1] else {
            return self.err("internal: varying coordinates on PTX");
        };
        let mut lin = String::from("0");
        let mut ok = String::from("true");
        for (k, n) in dims.iter().enumerate() {
            let (c, inb) = if cs == ScalarType::I64 {
                let c = coords[k].clone();
                let inb = self.def(format!("icmp ult i64 {c}, {n}"));
                (c, inb)
            } else {
                // In 32 bits (one compare, not two): `c <u min(n, 2^31)` as `u32` is
                // `0 ≤ c < n` for an `i32` `c`, and an index in range widens with zeros.
                let c = &coords[k];
                let n32 = self.min_max_i64("umin", n.as_str(), "2147483648");
                let n32 = self.def(format!("trunc i64 {n32} to i32"));
                let inb = self.def(format!("icmp ult i32 {c}, {n32}"));
                (self.def(format!("zext i32 {c} to i64")), inb)
            };
            ok = self.def(format!("and i1 {ok}, {inb}"));
            let t = self.def(format!("mul i64 {lin}, {n}"));
            lin = self.def(format!("add i64 {t}, {c}"));
        }
        if d.opcode == Opcode::Store && self.flavor == Flavor::Ptx && space == "ptr addrspace(1)" {
            return Ok(self.predicated_global_store(&planes[..nl], s, &lin, &ok, &args[2]));
        }
        let go = self.label("access");
        let join = self.label("accessed");
        let from = self.label("skip");
        self.condbr(&ok, &go, &from);
        self.block(&go);
        let st = storage_ty(s);
        let lane = |_: &mut Self, lv: &LV, l: usize| -> String {
            match lv {
                LV::U(x) => x[l].clone(),
                _ => String::from("poison"),
            }
        };
        let align = storage_bytes(s);
        let addr = |me: &mut Self, plane: &str| {
            me.def(format!(
                "getelementptr inbounds {st}, {space} {plane}, i64 {lin}"
            ))
        };
        let mut old = None;
        if d.opcode == Opcode::Store {
            for (l, plane) in planes.iter().enumerate().take(nl) {
                let a = addr(self, plane);
                let v = lane(self, &args[2], l);
                let v = self.store_conv(s, &v, true);
                self.line(format!("store {st} {v}, {space} {a}, align {align}"));
            }
        } else {
            let a = addr(self, &planes[0]);
            // `atomic_cas %a, %c, %expected, %v`: the value stored is the last operand.
            let v = lane(self, args.last().expect("operands"), 0);
            // A host work-group's shared array belongs to the one thread running the group:
            // a plain read-modify-write gives what the atomic gives (work-items run one
            // after another), at a fraction of a `lock`ed instruction's cost (bincount's
            // privatised counts). Float min/max/CAS have no plain form here: atomics.
            let plain = local
                && match s {
                    ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64 => true,
                    ScalarType::F32 | ScalarType::F64 => d.opcode == Opcode::AtomicAdd,
                    _ => false,
                };
            let r = match d.opcode {
                _ if plain => {
                    let old = self.def(format!("load {st}, {space} {a}, align {align}"));
                    let signed = s.is_signed_int();
                    let new = match d.opcode {
                        Opcode::AtomicAdd if s.is_float() => {
                            self.def(format!("fadd {st} {old}, {v}"))
                        }
                        Opcode::AtomicAdd => self.def(format!("add {st} {old}, {v}")),
                        Opcode::AtomicMin | Opcode::AtomicMax => {
                            let n = match (d.opcode, signed) {
                                (Opcode::AtomicMin, true) => "smin",
                                (Opcode::AtomicMin, false) => "umin",
                                (_, true) => "smax",
                                _ => "umax",
                            };
                            let m = format!("llvm.{n}.{st}");
                            self.intrinsic(
                                "",
                                &m,
                                st,
                                &[(st.to_string(), old.clone()), (st.to_string(), v.clone())],
                            )
                        }
                        Opcode::AtomicCas => {
                            let e = lane(self, &args[2], 0);
                            let eq = self.def(format!("icmp eq {st} {old}, {e}"));
                            self.def(format!("select i1 {eq}, {st} {v}, {st} {old}"))
                        }
                        _ => v.clone(),
                    };
                    self.line(format!("store {st} {new}, {space} {a}, align {align}"));
                    old
                }
                Opcode::AtomicCas => {
                    let e = lane(self, &args[2], 0);
                    let pair = self.def(format!(
                        "cmpxchg {space} {a}, {st} {e}, {st} {v} monotonic monotonic"
                    ));
                    self.def(format!("extractvalue {{ {st}, i1 }} {pair}, 0"))
                }
                o => {
                    let signed = s.is_signed_int();
                    let kind = match o {
                        Opcode::AtomicAdd if s.is_float() => "fadd",
                        Opcode::AtomicAdd => "add",
                        Opcode::AtomicMin if signed => "min",
                        Opcode::AtomicMin => "umin",
                        Opcode::AtomicMax if signed => "max",
                        Opcode::AtomicMax => "umax",
                        _ => "xchg",
                    };
                    self.def(format!("atomicrmw {kind} {space} {a}, {st} {v} monotonic"))
                }
            };
            old = Some(r);
        }
        self.br(&join);
        self.block(&from);
        self.br(&join);
        self.block(&join);
        match old {
            None => Ok(Vec::new()),
            Some(r) => {
                let zero = self.konst(s, 0, true);
                let v = self.def(format!("phi {st} [ {r}, %{go} ], [ {zero}, %{from} ]"));
                Ok(vec![LV::U(vec![v])])
            }
        }
    }

    /// A global store on PTX as one predicated `st.global` per plane (inline PTX), not a
    /// branch around it: LLVM sinks the stored value's computation into such a branch, and
    /// ptxas then keeps it as a divergent region (BSSY, BRA, BSYNC) around every store of a
    /// loop (scan.chain's copy-out: 17 instructions an element). The same stores happen:
    /// at `lin` of each plane when `ok`, none otherwise; the `memory` clobber keeps LLVM from
    /// moving other memory accesses across it.
    fn predicated_global_store(
        &mut self,
        planes: &[String],
        s: ScalarType,
        lin: &str,
        ok: &str,
        value: &LV,
    ) -> Vec<LV> {
        let st = storage_ty(s);
        let (reg, kind) = match st {
            "float" => ("f", "f32"),
            "double" => ("d", "f64"),
            "i64" => ("l", "b64"),
            _ => ("r", "b32"),
        };
        let okw = self.def(format!("zext i1 {ok} to i32"));
        for (l, plane) in planes.iter().enumerate() {
            let a = self.def(format!(
                "getelementptr inbounds {st}, ptr addrspace(1) {plane}, i64 {lin}"
            ));
            let ai = self.def(format!("ptrtoint ptr addrspace(1) {a} to i64"));
            let v = match value {
                LV::U(x) => x[l].clone(),
                _ => String::from("poison"),
            };
            let v = self.store_conv(s, &v, true);
            self.line(format!(
                "call void asm sideeffect \"{{ .reg .pred p; setp.ne.b32 p, $2, 0; @p \
                 st.global.{kind} [$0], $1; }}\", \"l,{reg},r,~{{memory}}\"(i64 {ai}, {st} {v}, \
                 i32 {okw})"
            ));
        }
        Vec::new()
    }
}

/// Finishes the PTX text of a kernel whose parameters are bound: the body once per thread.
pub(super) fn finish(
    mut l: Lower,
    mut f: Frame,
    fast: bool,
    header: &str,
    sym: &str,
    layout: Layout,
) -> Result<Lowered, LowerError> {
    let p = f.p;
    l.block("body");
    l.region(&mut f, p.body, &[], None)?;
    l.line("ret void");
    let mut text = super::ptx_define(header, sym, &layout);
    text.push_str(&l.prelude);
    text.push_str("  br label %body\n");
    text.push_str(&l.body);
    text.push_str("}\n");
    let _ = writeln!(
        text,
        "attributes #0 = {{ nounwind convergent{} }}",
        if fast {
            " \"no-nans-fp-math\"=\"true\" \"no-infs-fp-math\"=\"true\" \"no-signed-zeros-fp-math\"=\"true\" \"approx-func-fp-math\"=\"true\" \"denormal-fp-math-f32\"=\"preserve-sign\""
        } else {
            ""
        }
    );
    let _ = writeln!(
        text,
        "!nvvm.annotations = !{{!1}}\n!1 = !{{ptr @{sym}, !\"kernel\", i32 1}}"
    );
    super::finish_text(&mut l, &mut text);
    Ok(Lowered { text, layout })
}
