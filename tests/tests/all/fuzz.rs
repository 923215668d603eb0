//! The differential fuzzer's CI budget (DESIGN §6, issue 7): 2,000 generated programs, each
//! run on the interpreter, on every pass pipeline and algebra row, on Cranelift and on LLVM
//! (and on CUDA when `WEFT_FUZZ_CUDA=1` and a GPU is present), with no mismatch; every
//! feature of the generator exercised; and mismatch filetests that the filetest runner reads.

use weft_fuzz::case::all_features;
use weft_fuzz::oracle::{oracle, Oracle};
use weft_fuzz::{case_at, FuzzConfig, Target};
use weft_tests::filetest::run_filetest;

/// Cases of the CI budget (`WEFT_FUZZ_CASES` overrides).
fn budget() -> u64 {
    std::env::var("WEFT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

#[test]
fn fuzz_budget_has_no_mismatch() {
    let mut backends = vec!["interp", "cranelift", "llvm", "llvm-fast"];
    if std::env::var("WEFT_FUZZ_CUDA").is_ok_and(|v| v == "1") {
        backends.extend(["cuda", "cuda-fast"]);
    }
    let out = std::env::temp_dir().join("weft-fuzz-ci");
    let cfg = FuzzConfig {
        seed: 2026,
        cases: Some(budget()),
        targets: backends
            .iter()
            .flat_map(|b| Target::of_backend(b).expect("backend"))
            .collect(),
        out_dir: Some(out.clone()),
        ..FuzzConfig::default()
    };
    let s = weft_fuzz::run(&cfg, &|_| {}).expect("fuzz run");
    println!("{s}");
    let mut problems: Vec<String> = s
        .errors
        .iter()
        .map(|(i, e)| format!("case {i}: {e}"))
        .collect();
    for m in &s.mismatches {
        problems.push(format!("case {}: {}\n{}", m.case, m.detail, m.filetest));
    }
    assert!(
        problems.is_empty(),
        "{} problems (filetests in {}):\n{}",
        problems.len(),
        out.display(),
        problems.join("\n")
    );
    assert_eq!(s.cases, budget());
    for t in [Target::Cranelift, Target::Llvm, Target::Pipeline("default")] {
        let checked = s.per_target.get(&t).map_or(0, |c| c.0);
        assert!(
            checked + s.discarded >= budget(),
            "{t}: only {checked} cases checked"
        );
    }
    let missing: Vec<String> = all_features()
        .into_iter()
        .filter(|k| !s.features.contains_key(k))
        .collect();
    assert!(missing.is_empty(), "the budget never exercised {missing:?}");
}

#[test]
fn generated_cases_become_filetests_that_pass() {
    let mut checked = 0;
    for i in 0..150 {
        let c = case_at(99, i).expect("case");
        let Ok(Oracle::Outputs(want)) = oracle(&c) else {
            continue;
        };
        let text = c.filetest(&format!("case {i}"), &want);
        let out = run_filetest(&format!("case-{i}.weft"), &text, false);
        assert!(
            out.failures.is_empty(),
            "case {i}:\n{}\n{text}",
            out.failures.join("\n")
        );
        checked += 1;
    }
    assert!(checked >= 140, "only {checked} cases");
}
