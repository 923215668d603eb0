//! Interpreter vs Cranelift and LLVM on every element-wise op and scalar type, over arrays of random
//! bit patterns mixed with special values (NaN, ±inf, ±0, subnormals, MIN/MAX, zero divisors,
//! shift amounts past the width): results must be bit-identical (any NaN = any NaN).

use std::sync::Arc;
use weft_ir::interp::{HostArray, Input, Interpreter};
use weft_ir::konst::canon;
use weft_ir::{ScalarType, Type};
use weft_runtime::{CpuDevice, HostCompiler};

fn specials(s: ScalarType) -> Vec<u64> {
    let w = s.bits();
    let mut v: Vec<u64> = vec![0, 1, 2, 3, 7, 8, 31, 32, 33, 63, 64, 65];
    if s.is_int() {
        let max = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        v.extend([max, max - 1, max >> 1, (max >> 1) + 1, (max >> 1) + 2]);
    }
    match s {
        ScalarType::F32 => v.extend([
            0x7fc0_0000,
            0x7f80_0000,
            0xff80_0000,
            0x8000_0000,
            1,
            0x0080_0000,
            0x3f80_0000,
            0xbf80_0000,
            0x4b80_0000,
            0x3f00_0000,
        ]),
        ScalarType::F64 => v.extend([
            0x7ff8 << 48,
            0x7ff0 << 48,
            0xfff0 << 48,
            1 << 63,
            1,
            0x3ff0 << 48,
            0xbff0 << 48,
            0x4330 << 48,
        ]),
        ScalarType::F16 => v.extend([
            0x7e00, 0x7c00, 0xfc00, 0x8000, 1, 0x3c00, 0xbc00, 0x7bff, 0x3800,
        ]),
        _ => {}
    }
    v.into_iter().map(|b| canon(s, b)).collect()
}

fn inputs(s: ScalarType, n: usize, seed: u64) -> Vec<u64> {
    let sp = specials(s);
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 3 == 0 {
                sp[(x % sp.len() as u64) as usize]
            } else {
                canon(s, x)
            }
        })
        .collect()
}

fn same(s: ScalarType, a: &[u64], b: &[u64]) -> bool {
    weft_tests::filetest::same_bits(Type::scalar(s), a, b)
}

#[test]
fn every_elementwise_op_matches_the_interpreter() {
    let devs = [
        ("cranelift", CpuDevice::new()),
        (
            "llvm",
            CpuDevice::with_compiler(HostCompiler::Llvm(Default::default())),
        ),
    ];
    let n = 517; // not a whole number of blocks
    let mut checked = 0;
    let mut failures = Vec::new();
    for s in ScalarType::ALL {
        let t = s.name();
        let mut progs: Vec<(String, usize, Type)> = Vec::new();
        let bin: &[&str] = if s == ScalarType::Bool {
            &["and", "or", "xor", "eq", "ne"]
        } else if s.is_float() {
            &[
                "add", "sub", "mul", "div", "rem", "min", "max", "eq", "ne", "lt", "le", "gt",
                "ge", "pow", "atan2",
            ]
        } else {
            &[
                "add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
                "eq", "ne", "lt", "le", "gt", "ge",
            ]
        };
        for op in bin {
            let rt = if ["eq", "ne", "lt", "le", "gt", "ge"].contains(op) {
                "bool"
            } else {
                t
            };
            progs.push((format!("program @p(%a: {t}, %b: {t}) -> ({rt}) {{\n  %r: {rt} = {op} %a, %b\n  return %r\n}}\n"), 2, Type::scalar(ScalarType::from_name(rt).expect("type"))));
        }
        let un: &[&str] = if s == ScalarType::Bool {
            &["not"]
        } else if s.is_float() {
            &[
                "neg", "abs", "sqrt", "floor", "ceil", "round", "trunc", "exp", "log", "sin",
                "rsqrt",
            ]
        } else {
            &["neg", "abs", "not"]
        };
        for op in un {
            progs.push((
                format!("program @p(%a: {t}) -> ({t}) {{\n  %r: {t} = {op} %a\n  return %r\n}}\n"),
                1,
                Type::scalar(s),
            ));
        }
        if s.is_float() {
            progs.push((format!("program @p(%a: {t}, %b: {t}, %c: {t}) -> ({t}) {{\n  %r: {t} = fma %a, %b, %c\n  return %r\n}}\n"), 3, Type::scalar(s)));
        }
        for to in ScalarType::ALL {
            progs.push((
                format!(
                    "program @p(%a: {t}) -> ({to}) {{\n  %r: {to} = cast %a\n  return %r\n}}\n",
                    to = to.name()
                ),
                1,
                Type::scalar(to),
            ));
        }
        for (k, (src, arity, rty)) in progs.iter().enumerate() {
            let m = weft_ir::parse_and_verify(src).unwrap_or_else(|e| panic!("{src}\n{e}"));
            let ins: Vec<Input> = (0..*arity)
                .map(|i| {
                    Input::Array(Arc::new(HostArray {
                        elem: Type::scalar(s),
                        shape: vec![n],
                        data: inputs(s, n, (k * 7 + i + 1) as u64 * 0x9E37_79B9),
                    }))
                })
                .collect();
            let want = Interpreter::new(&m).apply("p", &ins, None).expect("interp");
            for (backend, dev) in &devs {
                let got = dev.apply(&m, "p", &ins, None).expect(backend);
                checked += 1;
                if !same(rty.elem_scalar(), &want[0].data, &got[0].data) {
                    let i = (0..n)
                        .find(|&i| {
                            !same(
                                rty.elem_scalar(),
                                &want[0].data[i..i + 1],
                                &got[0].data[i..i + 1],
                            )
                        })
                        .unwrap_or(0);
                    let args: Vec<String> = ins
                        .iter()
                        .map(|x| match x {
                            Input::Array(a) => format!("{:#x}", a.data[i]),
                            _ => String::new(),
                        })
                        .collect();
                    failures.push(format!(
                        "{}: element {i} args {args:?}: interp {:#x}, {backend} {:#x}",
                        src.lines().nth(1).unwrap_or("").trim(),
                        want[0].data[i],
                        got[0].data[i]
                    ));
                }
            }
        }
    }
    println!("differential: {checked} (program, backend) pairs x {n} elements");
    assert!(checked >= 780, "only {checked} (program, backend) pairs");
    assert!(
        failures.is_empty(),
        "{} of {checked} programs differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
