//! A fuzz case: a generated module and the inputs of one launch of its program (varying
//! arrays of the launch shape, uniform values, array inputs), and its form as a `.weft`
//! filetest.

use crate::compare::{fmt_array, fmt_value};
use crate::gen::{array, array_shape, module, value, GenConfig, Generated};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::fmt;
use weft_ir::{Boundary, HostArray, Input, ParamKind, ScalarType, OP_TABLE};

/// One generated program and the inputs of one launch of it.
#[derive(Clone)]
pub struct Case {
    /// The module and the program's name.
    pub gen: Generated,
    /// One input per parameter, in order.
    pub inputs: Vec<Input>,
    /// The launch shape (1–3 axes, what the program's `index`/`shape` expect).
    pub shape: Vec<usize>,
}

impl Case {
    /// The explicit launch shape to pass to an apply: `Some` when the program has no varying
    /// input (DESIGN §5), `None` when the varying inputs give it.
    pub fn explicit_shape(&self) -> Option<&[usize]> {
        let p = self.gen.program();
        let varying = p.params.iter().any(|par| par.kind == ParamKind::Varying);
        (!varying).then_some(self.shape.as_slice())
    }

    /// The `; run:` line of this case expecting `outputs` (the interpreter's results).
    pub fn run_line(&self, outputs: &[HostArray]) -> String {
        let args: Vec<String> = (self.inputs.iter())
            .map(|i| match i {
                Input::Array(a) => fmt_array(a),
                Input::Uniform(c) => fmt_value(c),
            })
            .collect();
        let over = self
            .explicit_shape()
            .map(|s| {
                let s: Vec<String> = s.iter().map(usize::to_string).collect();
                format!(" over [{}]", s.join(", "))
            })
            .unwrap_or_default();
        let outs: Vec<String> = outputs.iter().map(fmt_array).collect();
        format!(
            "; run: @{}({}){over} == {}",
            self.gen.name,
            args.join(", "),
            outs.join(", ")
        )
    }

    /// A ready `test interpret` filetest: `comment` lines (each prefixed `; `), the module,
    /// and the run line expecting `outputs`.
    pub fn filetest(&self, comment: &str, outputs: &[HostArray]) -> String {
        let mut s = String::new();
        for l in comment.lines() {
            s.push_str("; ");
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("test interpret\n\n");
        s.push_str(&weft_ir::print_module(&self.gen.module));
        s.push('\n');
        s.push_str(&self.run_line(outputs));
        s.push('\n');
        s
    }
}

/// The features a case exercises, as `kind:name` keys: `op:MNEMONIC` for every op of its
/// module, `scalar:S` and `lanes:N` for the types of its values, `boundary:MODE` and
/// `array-dims:D` for its array inputs, `launch-dims:D`, and `no-varying` for a launch over
/// an explicit shape. [`all_features`] lists every key.
pub fn features(c: &Case) -> BTreeSet<String> {
    let mut f = BTreeSet::new();
    for p in &c.gen.module.programs {
        p.walk(&mut |op| {
            let d = p.op(op);
            f.insert(format!("op:{}", d.opcode.mnemonic()));
            for &v in d.results.iter().chain(&d.args) {
                if let Some((s, n)) = p.ty(v).lanes() {
                    f.insert(format!("scalar:{}", s.name()));
                    f.insert(format!("lanes:{n}"));
                }
            }
        });
        for par in &p.params {
            if let Some((d, _, b)) = p.ty(par.value).array_parts() {
                let b = match b {
                    Boundary::Clamp => "clamp",
                    Boundary::Repeat => "repeat",
                    Boundary::Constant(_) => "constant",
                };
                f.insert(format!("boundary:{b}"));
                f.insert(format!("array-dims:{d}"));
            }
        }
    }
    f.insert(format!("launch-dims:{}", c.shape.len()));
    if c.explicit_shape().is_some() {
        f.insert("no-varying".into());
    }
    f
}

/// Every key [`features`] can give. Kernel-only ops are not among them: map programs cannot
/// hold them; the kernel fuzzer ([`crate::kernel`]) exercises them. Nor is `read_offset`:
/// the CPU devices make it from stencil reads (`passes::partition`), which the generator
/// writes as `read` at `index` plus offsets.
pub fn all_features() -> BTreeSet<String> {
    let mut f: BTreeSet<String> = OP_TABLE
        .iter()
        .filter(|i| !i.opcode.is_kernel_only() && i.opcode != weft_ir::Opcode::ReadOffset)
        .map(|i| format!("op:{}", i.mnemonic))
        .collect();
    f.extend(
        ScalarType::ALL
            .iter()
            .map(|s| format!("scalar:{}", s.name())),
    );
    for n in 1..=4 {
        f.insert(format!("lanes:{n}"));
    }
    for b in ["clamp", "repeat", "constant"] {
        f.insert(format!("boundary:{b}"));
    }
    for d in 1..=3 {
        f.insert(format!("array-dims:{d}"));
        f.insert(format!("launch-dims:{d}"));
    }
    f.insert("no-varying".into());
    f
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<String> = (self.inputs.iter())
            .map(|i| match i {
                Input::Array(a) => fmt_array(a),
                Input::Uniform(c) => fmt_value(c),
            })
            .collect();
        write!(
            f,
            "{:?}\n; launch {:?}: @{}({})",
            self.gen,
            self.shape,
            self.gen.name,
            args.join(", ")
        )
    }
}

/// A launch shape of `dims` axes: up to 48 elements on one axis (so that SIMD remainders and
/// several blocks occur), 7×7 on two, 4×4×4 on three.
pub fn launch_shape(dims: u8) -> BoxedStrategy<Vec<usize>> {
    let max = [48, 7, 4][dims as usize - 1];
    prop::collection::vec(1usize..=max, dims as usize).boxed()
}

/// Cases of programs generated from `cfg`, with their inputs.
pub fn case(cfg: GenConfig) -> impl Strategy<Value = Case> {
    module(cfg).prop_flat_map(|gen| {
        let dims = gen.dims;
        let g2 = gen.clone();
        launch_shape(dims).prop_flat_map(move |shape| {
            let p = g2.program();
            let inputs: Vec<BoxedStrategy<Input>> = (p.params.iter())
                .map(|par| {
                    let t = p.ty(par.value);
                    match (par.kind, t.array_parts()) {
                        (ParamKind::Array, Some((d, elem, _))) => array_shape(d)
                            .prop_flat_map(move |s| array(elem, s))
                            .prop_map(Input::Array)
                            .boxed(),
                        (ParamKind::Uniform, _) => value(t).prop_map(Input::Uniform).boxed(),
                        _ => array(t, shape.clone()).prop_map(Input::Array).boxed(),
                    }
                })
                .collect();
            let (g3, s2) = (g2.clone(), shape.clone());
            inputs.prop_map(move |inputs| Case {
                gen: g3.clone(),
                inputs,
                shape: s2.clone(),
            })
        })
    })
}
