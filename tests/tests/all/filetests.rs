//! Runs every `tests/filetests/**/*.weft` file (DESIGN §6); `WEFT_BLESS=1` rewrites run results.

use std::path::{Path, PathBuf};
use weft_tests::filetest::run_filetest;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("filetests dir")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "weft") {
            out.push(p);
        }
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests"),
        &mut v,
    );
    v
}

#[test]
fn filetests() {
    let bless = std::env::var("WEFT_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut passed = 0;
    let files = all_files();
    for f in &files {
        let src = std::fs::read_to_string(f).expect("read filetest");
        let name = f
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(f)
            .display()
            .to_string();
        let out = run_filetest(&name, &src, bless);
        passed += out.passed;
        failures.extend(out.failures);
        if let Some(text) = out.blessed {
            std::fs::write(f, text).expect("bless");
        }
    }
    println!(
        "filetests: {} files, {passed} checks passed, {} failed",
        files.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} filetest failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        files.len() >= 60,
        "expected at least 60 filetests, found {}",
        files.len()
    );
}

/// Every opcode of the op table is exercised by at least one `test interpret` file.
#[test]
fn every_op_is_interpreted_somewhere() {
    let mut seen = std::collections::HashSet::new();
    for f in all_files() {
        let src = std::fs::read_to_string(&f).expect("read");
        if !src.lines().any(|l| l.trim() == "test interpret") {
            continue;
        }
        for info in weft_ir::OP_TABLE {
            let pat_eq = format!("= {} ", info.mnemonic);
            let pat_eol = format!("= {}\n", info.mnemonic);
            let ctl = format!(" {} ", info.mnemonic);
            if src.contains(&pat_eq)
                || src.contains(&pat_eol)
                || (info.opcode.has_regions() && src.contains(&ctl))
                || src.contains(&format!("{} ", info.mnemonic)) && info.opcode.is_terminator()
                || src.lines().any(|l| {
                    let t = l.trim();
                    t == info.mnemonic || t.starts_with(&format!("{} %", info.mnemonic))
                })
            {
                seen.insert(info.mnemonic);
            }
        }
    }
    let missing: Vec<&str> = weft_ir::OP_TABLE
        .iter()
        .map(|i| i.mnemonic)
        .filter(|m| !seen.contains(m))
        .collect();
    assert!(
        missing.is_empty(),
        "ops with no interpret filetest: {missing:?}"
    );
}

/// docs/ir.md's op reference lists every op of the table.
#[test]
fn op_reference_is_complete() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ir.md"))
        .expect("docs/ir.md");
    let missing: Vec<&str> = weft_ir::OP_TABLE
        .iter()
        .map(|i| i.mnemonic)
        .filter(|m| !doc.contains(&format!("| `{m}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "ops missing from docs/ir.md: {missing:?}"
    );
}
