//! The text-format printer: canonical `.weft` text for modules and programs.

use crate::opcode::{Opcode, Syntax};
use crate::program::{Imm, Module, ParamKind, Program, ProgramKind, Region, Value, ValueDef};
use std::collections::HashSet;
use std::fmt::Write;

/// Prints a module: its programs separated by a blank line, each in canonical form.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    for (i, p) in m.programs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&print_program(p));
    }
    out
}

/// Prints one program in canonical form. Value names are the values' name hints, made
/// unique and valid; unnamed values get numbers. `parse(print(p))` prints identically.
pub fn print_program(p: &Program) -> String {
    let names = Names::new(p);
    let mut out = String::new();
    let kw = match p.kind {
        ProgramKind::Map => "program",
        ProgramKind::Kernel => "kernel",
    };
    let _ = write!(out, "{kw} @{}(", p.name);
    for (i, par) in p.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match par.kind {
            ParamKind::Uniform => out.push_str("uniform "),
            ParamKind::Buffer => out.push_str("buffer "),
            _ => {}
        }
        let _ = write!(out, "%{}: {}", names.get(p, par.value), p.ty(par.value));
    }
    out.push(')');
    if p.kind == ProgramKind::Map {
        out.push_str(" -> (");
    }
    for (i, o) in p.outputs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if let Some(n) = &o.name {
            let _ = write!(out, "{n}: ");
        }
        let _ = write!(out, "{}", o.ty);
    }
    if p.kind == ProgramKind::Map {
        out.push(')');
    }
    out.push_str(" {\n");
    print_region_ops(p, &names, p.body, 1, &mut out);
    out.push_str("}\n");
    out
}

struct Names(Vec<String>);

impl Names {
    fn new(p: &Program) -> Names {
        let mut order: Vec<Value> = p.params.iter().map(|x| x.value).collect();
        p.walk(&mut |op| {
            for &r in &p.op(op).regions {
                order.extend(p.region(r).args.iter().copied());
            }
            order.extend(p.op(op).results.iter().copied());
        });
        let mut names = vec![String::new(); p.num_values()];
        let mut used = HashSet::new();
        let mut counter = 0usize;
        for v in order {
            let hint = p.value(v).name.as_deref().map(sanitize);
            let name = match hint {
                Some(h) if !h.is_empty() && !used.contains(&h) => h,
                Some(h) if !h.is_empty() => (1..)
                    .map(|k| format!("{h}.{k}"))
                    .find(|n| !used.contains(n))
                    .unwrap_or_default(),
                _ => loop {
                    let n = counter.to_string();
                    counter += 1;
                    if !used.contains(&n) {
                        break n;
                    }
                },
            };
            used.insert(name.clone());
            names[v.index()] = name;
        }
        Names(names)
    }

    fn get<'p>(&'p self, p: &'p Program, v: Value) -> &'p str {
        match self.0.get(v.index()) {
            Some(n) if !n.is_empty() => n,
            _ => p
                .value(v)
                .name
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or("undefined"),
        }
    }
}

/// Makes a name hint a valid identifier (`[A-Za-z0-9_.]+`).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn list(p: &Program, names: &Names, vals: &[Value]) -> String {
    vals.iter()
        .map(|&v| format!("%{}", names.get(p, v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn typed_args(p: &Program, names: &Names, r: Region, inits: &[Value]) -> String {
    p.region(r)
        .args
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let init = inits
                .get(i)
                .map(|&v| format!(" = %{}", names.get(p, v)))
                .unwrap_or_default();
            format!("%{}: {}{init}", names.get(p, a), p.ty(a))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_region_ops(p: &Program, names: &Names, r: Region, depth: usize, out: &mut String) {
    for &op in &p.region(r).ops {
        let d = p.op(op);
        // An empty `yield` closing a region is implicit.
        if d.opcode == Opcode::Yield && d.args.is_empty() {
            continue;
        }
        indent(out, depth);
        if !d.results.is_empty() {
            let lhs: Vec<String> = d
                .results
                .iter()
                .map(|&v| format!("%{}: {}", names.get(p, v), p.ty(v)))
                .collect();
            let _ = write!(out, "{} = ", lhs.join(", "));
        }
        out.push_str(d.opcode.mnemonic());
        match (d.opcode.info().syntax, &d.imm) {
            (Syntax::Const, Imm::Const(c)) => {
                let _ = write!(out, " {c}");
            }
            (Syntax::FixedLanes(_), Imm::Lanes(l)) => {
                let lanes: Vec<String> = l.iter().map(u8::to_string).collect();
                let _ = write!(out, " {}, [{}]", list(p, names, &d.args), lanes.join(", "));
            }
            (Syntax::Call, Imm::Callee(c)) => {
                let _ = write!(out, " @{c}({})", list(p, names, &d.args));
            }
            (Syntax::Control, _) => print_control(p, names, op, depth, out),
            _ => {
                if !d.args.is_empty() {
                    let _ = write!(out, " {}", list(p, names, &d.args));
                }
            }
        }
        out.push('\n');
    }
}

fn block(p: &Program, names: &Names, r: Region, depth: usize, out: &mut String) {
    out.push_str("{\n");
    print_region_ops(p, names, r, depth + 1, out);
    indent(out, depth);
    out.push('}');
}

fn print_control(p: &Program, names: &Names, op: crate::Op, depth: usize, out: &mut String) {
    let d = p.op(op);
    let arg = |i: usize| d.args.get(i).map_or("undefined", |&v| names.get(p, v));
    let region = |i: usize| d.regions.get(i).copied();
    match d.opcode {
        Opcode::If => {
            let _ = write!(out, " %{} ", arg(0));
            if let Some(t) = region(0) {
                block(p, names, t, depth, out);
            }
            if let Some(e) = region(1) {
                let ops = &p.region(e).ops;
                let trivial = ops.len() == 1 && p.op(ops[0]).args.is_empty();
                if !trivial || !d.results.is_empty() {
                    out.push_str(" else ");
                    block(p, names, e, depth, out);
                }
            }
        }
        Opcode::For => {
            if let Some(r) = region(0) {
                let rargs = &p.region(r).args;
                let iv = rargs
                    .first()
                    .map(|&v| format!("%{}: {}", names.get(p, v), p.ty(v)))
                    .unwrap_or_default();
                let _ = write!(out, " {iv} = %{} to %{} step %{}", arg(0), arg(1), arg(2));
                if rargs.len() > 1 {
                    let carried: Vec<String> = rargs[1..]
                        .iter()
                        .zip(d.args.iter().skip(3))
                        .map(|(&a, &i)| {
                            format!("%{}: {} = %{}", names.get(p, a), p.ty(a), names.get(p, i))
                        })
                        .collect();
                    let _ = write!(out, " iter({})", carried.join(", "));
                }
                out.push(' ');
                block(p, names, r, depth, out);
            }
        }
        Opcode::While | Opcode::DoUntil => {
            let (first, second, kw) = match d.opcode {
                Opcode::While => (region(0), region(1), "do"),
                _ => (region(0), region(1), "until"),
            };
            if let (Some(a), Some(b)) = (first, second) {
                let _ = write!(out, " iter({}) ", typed_args(p, names, a, &d.args));
                block(p, names, a, depth, out);
                let _ = write!(out, " {kw} ({}) ", typed_args(p, names, b, &[]));
                block(p, names, b, depth, out);
            }
        }
        _ => {}
    }
}

/// The name a value would be printed with, for messages (`%x`, or `%v12` if unnamed).
pub fn value_label(p: &Program, v: Value) -> String {
    match p.value(v).name.as_deref() {
        Some(n) => format!("%{n}"),
        None => match p.value(v).def {
            ValueDef::Undefined => format!("%<undefined {}>", v.0),
            _ => format!("%<{}>", v.0),
        },
    }
}
