//! Property tests of the passes and of the program algebra (DESIGN §4, §6) on generated
//! programs ([`weft_tests::gen`]), with the interpreter as the oracle: every pass and the
//! default pipeline keep a program's results; every algebra operation gives a program that
//! verifies, prints and parses back identically, and computes what its definition says
//! (compared bit for bit, any NaN = any NaN).

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use std::cell::Cell;
use weft_ir::algebra::{self, AlgebraError};
use weft_ir::interp::Arg;
use weft_ir::passes::{Pipeline, ALL_PASSES, DEFAULT_PIPELINE};
use weft_ir::{Const, Module, ParamKind, Program};
use weft_tests::gen::{args, module, run_interp, same_results, Args, GenConfig, Generated};

/// Cases per property (each runs in a few milliseconds in a debug build); the environment
/// variable `WEFT_ALGEBRA_CASES` overrides it for longer runs.
fn n_cases() -> u32 {
    std::env::var("WEFT_ALGEBRA_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

fn fail(msg: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(msg.to_string())
}

fn alg_fail(e: AlgebraError) -> TestCaseError {
    fail(format!("algebra error: {e}"))
}

fn show(vs: &[Const]) -> String {
    let v: Vec<String> = vs.iter().map(Const::to_string).collect();
    format!("({})", v.join(", "))
}

fn show_args(a: &[Arg]) -> String {
    format!("{:?}", Args(a.to_vec()))
}

/// Runs `test` on [`n_cases`] cases of `strategy`; panics with the minimal failing case. Returns
/// how many cases `test` reported as applicable (`Ok(true)`).
fn cases<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<bool, TestCaseError>) -> u32 {
    let applied = Cell::new(0u32);
    let mut runner = TestRunner::new(ProptestConfig {
        cases: n_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&strategy, |v| {
        if test(v)? {
            applied.set(applied.get() + 1);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    applied.get()
}

/// A generated module with `n` sets of arguments for its program.
fn with_args(cfg: GenConfig, n: usize) -> impl Strategy<Value = (Generated, Vec<Args>)> {
    module(cfg).prop_flat_map(move |g| {
        let a = prop::collection::vec(args(g.program()), n);
        (Just(g), a)
    })
}

/// The generator's full coverage, on one-axis launches (the element runs of these tests use
/// `index` = [0], `shape` = [1], and composed programs must agree on the launch's axes).
fn p_config() -> GenConfig {
    GenConfig {
        dims: Some(1),
        ..GenConfig::default()
    }
}

/// A second program `@q` (callee `@g`, parameters prefixed `q`) to combine with `@p`.
fn q_config(outputs: Option<Vec<weft_ir::Type>>) -> GenConfig {
    GenConfig {
        name: "q".into(),
        callee: Some("g".into()),
        prefix: "q".into(),
        outputs,
        ..p_config()
    }
}

/// Runs `name` of `m`; a run error fails the case.
fn run(m: &Module, name: &str, a: &[Arg]) -> Result<Vec<Const>, TestCaseError> {
    run_interp(m, name, a).map_err(|e| fail(format!("@{name}{}: {e}", show_args(a))))
}

/// Arguments for `to` taken by parameter name from `a`, the arguments of `from`.
fn by_name(from: &Program, to: &Program, a: &[Arg]) -> Result<Vec<Arg>, TestCaseError> {
    (0..to.params.len())
        .map(|i| {
            let n = to.param_name(i);
            from.param_index(n).map(|k| a[k].clone()).ok_or_else(|| {
                fail(format!(
                    "@{} has an input `{n}` that @{} lacks",
                    to.name, from.name
                ))
            })
        })
        .collect()
}

/// The programs of both modules.
fn merged(a: &Generated, b: &Generated) -> Module {
    let mut m = a.module.clone();
    m.programs.extend(b.module.programs.iter().cloned());
    m
}

/// `m` with the algebra result `r` added as `@r`, after checking that it verifies there and
/// prints and parses back identically.
fn add_result(m: &Module, mut r: Program) -> Result<Module, TestCaseError> {
    r.name = "r".into();
    let text = weft_ir::print_program(&r);
    let mut m = m.clone();
    m.programs.push(r);
    weft_ir::verify_module(&m)
        .map_err(|e| fail(format!("the result does not verify: {e}\n{text}")))?;
    let again = weft_ir::parse_program(&text)
        .map(|p| weft_ir::print_program(&p))
        .map_err(|e| fail(format!("the printed result does not parse: {e}\n{text}")))?;
    prop_assert_eq!(&again, &text, "the result does not round-trip");
    Ok(m)
}

/// `got` equals `want`, or the case fails showing the module.
fn same(m: &Module, what: &str, want: &[Const], got: &[Const]) -> Result<(), TestCaseError> {
    prop_assert!(
        same_results(want, got),
        "{what}: expected {}, got {}\n{}",
        show(want),
        show(got),
        weft_ir::print_module(m)
    );
    Ok(())
}

/// The optimized module computes what the original does (inputs matched by name, so
/// `dce-inputs` may drop some); `lift-uniforms` changes the signature and is only verified.
fn check_pipeline(pipeline: &str) {
    cases(with_args(p_config(), 3), |(g, ins)| {
        let mut o = g.module.clone();
        Pipeline::parse(pipeline)
            .expect("pipeline")
            .run(&mut o)
            .map_err(|e| fail(format!("{e}\n{g:?}")))?;
        let printed = weft_ir::print_module(&o);
        match weft_ir::parse_module(&printed) {
            Ok(m) => {
                let again = weft_ir::print_module(&m);
                prop_assert_eq!(&again, &printed, "after `{}`: no round-trip", pipeline);
            }
            Err(e) => {
                let e = weft_ir::render(&e.0, "printed", &printed);
                return Err(fail(format!(
                    "after `{pipeline}`: does not parse:\n{printed}\n{e}"
                )));
            }
        }
        if pipeline == "lift-uniforms" {
            return Ok(true);
        }
        let (p, q) = (g.program(), o.get(&g.name).expect("program kept"));
        for a in &ins {
            let want = run(&g.module, &g.name, a)?;
            let got = run(&o, &g.name, &by_name(p, q, a)?)?;
            let what = format!("after `{pipeline}`, @{}{}", g.name, show_args(a));
            same(&o, &what, &want, &got)?;
        }
        Ok(true)
    });
}

/// One test per pass (so that each reports on its own), and the list covers every pass.
macro_rules! pass_tests {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[doc = concat!("`", $name, "` keeps results.")]
            #[test]
            fn $test() {
                check_pipeline($name);
            }
        )*

        #[test]
        fn every_pass_is_tested() {
            let tested = [$($name),*];
            for pass in ALL_PASSES {
                assert!(tested.contains(&pass.name()), "no property test for `{}`", pass.name());
            }
        }
    };
}

pass_tests!(
    pass_inline => "inline",
    pass_fold => "fold",
    pass_cse => "cse",
    pass_dce => "dce",
    pass_dce_inputs => "dce-inputs",
    pass_licm => "licm",
    pass_math => "math",
    pass_lift_uniforms => "lift-uniforms",
);

#[test]
fn default_pipeline_keeps_results() {
    check_pipeline(DEFAULT_PIPELINE);
}

/// compose(p, q) = p after q: q's outputs feed p's first varying inputs (q is generated
/// with output types matching a prefix of them, so compose always applies); the result has
/// q's inputs, then p's unfed ones.
#[test]
fn compose_is_p_after_q() {
    let strategy = module(p_config())
        .prop_filter("compose needs a varying input", |p| {
            (p.program().params.iter()).any(|x| x.kind == ParamKind::Varying)
        })
        .prop_flat_map(|p| {
            let n = p
                .program()
                .params
                .iter()
                .filter(|x| x.kind == ParamKind::Varying)
                .count();
            (Just(p), 1..=n)
        })
        .prop_flat_map(|(p, k)| {
            let pp = p.program();
            let tys = pp.params[..k].iter().map(|x| pp.ty(x.value)).collect();
            (Just(p), module(q_config(Some(tys))))
        })
        .prop_flat_map(|(p, q)| {
            let (ap, aq) = (args(p.program()), args(q.program()));
            (Just(p), Just(q), ap, aq)
        });
    cases(strategy, |(p, q, ap, aq)| {
        let (pp, qq) = (p.program(), q.program());
        let m = add_result(&merged(&p, &q), algebra::compose(pp, qq).map_err(alg_fail)?)?;
        let k = qq.outputs.len();
        let fed = run(&m, "q", &aq)?;
        let mut ap2 = ap.0.clone();
        for (i, v) in fed.into_iter().enumerate() {
            ap2[i] = Arg::Value(v);
        }
        let want = run(&m, "p", &ap2)?;
        let mut ar = aq.0.clone();
        ar.extend(ap[k..].iter().cloned());
        let r = m.get("r").expect("r");
        prop_assert_eq!(r.params.len(), ar.len(), "inputs of the composition");
        let got = run(&m, "r", &ar)?;
        same(&m, &format!("@r{}", show_args(&ar)), &want, &got)?;
        Ok(true)
    });
}

/// bundle(p, q): inputs of p then q, outputs of p then q.
#[test]
fn bundle_is_side_by_side() {
    let strategy = (module(p_config()), module(q_config(None))).prop_flat_map(|(p, q)| {
        let (ap, aq) = (args(p.program()), args(q.program()));
        (Just(p), Just(q), ap, aq)
    });
    cases(strategy, |(p, q, ap, aq)| {
        let r = algebra::bundle(&[p.program(), q.program()]).map_err(alg_fail)?;
        let m = add_result(&merged(&p, &q), r)?;
        let mut want = run(&m, "p", &ap)?;
        want.extend(run(&m, "q", &aq)?);
        let ar: Vec<Arg> = ap.iter().chain(aq.iter()).cloned().collect();
        let got = run(&m, "r", &ar)?;
        same(&m, &format!("@r{}", show_args(&ar)), &want, &got)?;
        Ok(true)
    });
}

/// bind(p, x = c) computes p with c for x, before and after the default pipeline; binding an
/// array (bind_array) may be refused when the reads are not at constant coordinates.
#[test]
fn bind_captures_the_value() {
    let strategy = with_args(p_config(), 1).prop_flat_map(|(g, a)| {
        // A program may have no input at all (a launch over an explicit shape).
        let n = g.program().params.len().max(1);
        (Just(g), Just(a.into_iter().next().expect("args")), 0..n)
    });
    let scalar = cases(strategy, |(g, a, i)| {
        let p = g.program();
        if i >= p.params.len() {
            return Ok(false);
        }
        let name = p.param_name(i).to_string();
        let r = match &a[i] {
            Arg::Value(c) => algebra::bind(p, &name, c).map_err(alg_fail)?,
            Arg::Array(arr) => match algebra::bind_array(p, &name, arr) {
                Ok(r) => r,
                Err(_) => return Ok(false),
            },
        };
        let mut m = add_result(&g.module, r)?;
        let r = m.get("r").expect("r");
        prop_assert!(
            r.param_index(&name).is_none(),
            "input `{}` is still there",
            name
        );
        let ar = by_name(p, r, &a)?;
        let want = run(&m, &g.name, &a)?;
        same(&m, "@r (bound)", &want, &run(&m, "r", &ar)?)?;
        Pipeline::parse(DEFAULT_PIPELINE)
            .expect("pipeline")
            .run(&mut m)
            .map_err(fail)?;
        same(&m, "@r (bound, optimized)", &want, &run(&m, "r", &ar)?)?;
        Ok(true)
    });
    assert!(
        scalar >= n_cases() / 2,
        "only {scalar} of {} bindings applied",
        n_cases()
    );
}

/// A varying input of `p` (by selector), with `p`'s arguments.
fn varying_case(kind: ParamKind) -> impl Strategy<Value = (Generated, Args, Option<usize>)> {
    with_args(p_config(), 1).prop_flat_map(move |(g, a)| {
        let p = g.program();
        let of_kind: Vec<usize> = (0..p.params.len())
            .filter(|&i| p.params[i].kind == kind)
            .collect();
        let pick = if of_kind.is_empty() {
            Just(None).boxed()
        } else {
            prop::sample::select(of_kind).prop_map(Some).boxed()
        };
        (Just(g), Just(a.into_iter().next().expect("args")), pick)
    })
}

/// bind_uniform / unbind change the input's kind only: same results.
fn check_kind_change(from: ParamKind, to: ParamKind) -> u32 {
    cases(varying_case(from), |(g, a, i)| {
        let Some(i) = i else { return Ok(false) };
        let p = g.program();
        let name = p.param_name(i).to_string();
        let r = if to == ParamKind::Uniform {
            algebra::bind_uniform(p, &name)
        } else {
            algebra::unbind(p, &name)
        };
        let m = add_result(&g.module, r.map_err(alg_fail)?)?;
        let r = m.get("r").expect("r");
        let k = r
            .param_index(&name)
            .ok_or_else(|| fail(format!("input `{name}` is gone")))?;
        prop_assert_eq!(r.params[k].kind, to);
        let want = run(&m, &g.name, &a)?;
        same(&m, "@r", &want, &run(&m, "r", &by_name(p, r, &a)?)?)?;
        Ok(true)
    })
}

#[test]
fn bind_uniform_keeps_results() {
    // One program in ten has no varying input.
    let n = check_kind_change(ParamKind::Varying, ParamKind::Uniform);
    assert!(n >= n_cases() * 3 / 4, "only {n} cases had a varying input");
}

#[test]
fn unbind_keeps_results() {
    let n = check_kind_change(ParamKind::Uniform, ParamKind::Varying);
    assert!(
        n >= n_cases() / 3,
        "only {n} of {} programs had a uniform",
        n_cases()
    );
}

/// keep(p, outs) / drop(p, outs) return that subset of the outputs (keep: in the given
/// order; drop: the others in order); unused inputs may disappear.
fn check_specialize(keep: bool) {
    let strategy = with_args(p_config(), 1).prop_flat_map(|(g, a)| {
        let n = g.program().outputs.len();
        let subset = prop::sample::subsequence((0..n).collect::<Vec<_>>(), 0..=n).prop_shuffle();
        (Just(g), Just(a.into_iter().next().expect("args")), subset)
    });
    cases(strategy, |(g, a, subset)| {
        let p = g.program();
        let names: Vec<String> = subset.iter().map(|&k| p.output_name(k)).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (r, expected): (_, Vec<usize>) = if keep {
            (algebra::keep(p, &names), subset.clone())
        } else {
            let rest = (0..p.outputs.len())
                .filter(|k| !subset.contains(k))
                .collect();
            (algebra::drop_outputs(p, &names), rest)
        };
        let m = add_result(&g.module, r.map_err(alg_fail)?)?;
        let r = m.get("r").expect("r");
        let all = run(&m, &g.name, &a)?;
        let want: Vec<Const> = expected.iter().map(|&k| all[k]).collect();
        let what = format!("@r ({} {names:?})", if keep { "keep" } else { "drop" });
        same(&m, &what, &want, &run(&m, "r", &by_name(p, r, &a)?)?)?;
        Ok(true)
    });
}

#[test]
fn keep_selects_outputs() {
    check_specialize(true);
}

#[test]
fn drop_removes_outputs() {
    check_specialize(false);
}

/// swizzle_inputs(p, order): varying input k of the result is p's varying input order[k]
/// (the generator puts the varying inputs first; the others follow unchanged).
#[test]
fn swizzle_inputs_permutes() {
    let strategy = with_args(p_config(), 1).prop_flat_map(|(g, a)| {
        let p = g.program();
        let n = p
            .params
            .iter()
            .filter(|x| x.kind == ParamKind::Varying)
            .count();
        let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
        (Just(g), Just(a.into_iter().next().expect("args")), order)
    });
    cases(strategy, |(g, a, order)| {
        let p = g.program();
        let m = add_result(
            &g.module,
            algebra::swizzle_inputs(p, &order).map_err(alg_fail)?,
        )?;
        let r = m.get("r").expect("r");
        let mut ar = a.0.clone();
        for (k, &o) in order.iter().enumerate() {
            prop_assert_eq!(r.param_name(k), p.param_name(o), "input {} of @r", k);
            ar[k] = a[o].clone();
        }
        let want = run(&m, &g.name, &a)?;
        same(
            &m,
            &format!("@r (order {order:?})"),
            &want,
            &run(&m, "r", &ar)?,
        )?;
        Ok(true)
    });
}
