//! Parser + verifier fuzzing as a proptest over token streams and mutated corpus files:
//! no input may panic, and anything that parses must print and parse back identically.
//! Cases: `WEFT_FUZZ_CASES` (default 50,000 per strategy; docs/testing.md has the 1,000,000 run).

use proptest::prelude::*;
use std::path::Path;

const TOKENS: &[&str] = &[
    "program",
    "@f",
    "@g",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    ",",
    ":",
    "=",
    "-",
    "->",
    "uniform",
    "%x",
    "%y",
    "%r",
    "%i",
    "%c",
    "%0",
    "f32",
    "f64",
    "f16",
    "i32",
    "i64",
    "u8",
    "bool",
    "x",
    "2",
    "3",
    "4",
    "0",
    "1",
    "1.5",
    "-1",
    "1e309",
    "0x10",
    "nan",
    "nan:0x7fc00001",
    "inf",
    "true",
    "false",
    "array",
    "clamp",
    "repeat",
    "constant",
    "add",
    "mul",
    "fma",
    "const",
    "tuple",
    "extract",
    "insert",
    "swizzle",
    "read",
    "extent",
    "index",
    "shape",
    "call",
    "if",
    "else",
    "for",
    "to",
    "step",
    "iter",
    "while",
    "do",
    "until",
    "yield",
    "return",
    "select",
    "cast",
    "bitcast",
    "dot",
    "\n",
    " ",
    "; comment\n",
    "\u{e9}",
    "\0",
    "%",
    "@",
    "99999999999999999999999",
    "1e",
    "0x",
];

/// The corpus, read once: every filetest and example.
fn corpus() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(read_corpus)
}

fn read_corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = Vec::new();
    for dir in [root.join("filetests"), root.join("../examples/ir")] {
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(s) = std::fs::read_to_string(&p) {
                    v.push(s);
                }
            }
        }
    }
    v.sort();
    v
}

fn check(src: &str) {
    if let Ok(m) = weft_ir::parse_module(src) {
        let printed = weft_ir::print_module(&m);
        let m2 = weft_ir::parse_module(&printed).expect("printed text parses");
        assert_eq!(weft_ir::print_module(&m2), printed, "round trip");
    }
    let _ = weft_ir::parse_and_verify(src);
}

fn cases() -> u32 {
    std::env::var("WEFT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Random token streams.
    #[test]
    fn token_streams(toks in prop::collection::vec(prop::sample::select(TOKENS), 0..120)) {
        check(&toks.join(" "));
    }

    /// Corpus files with random byte-level edits (delete, insert, replace, truncate).
    #[test]
    fn mutated_corpus(file in any::<prop::sample::Index>(),
                      edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..8)) {
        let corpus = corpus();
        let mut bytes = corpus[file.index(corpus.len())].clone().into_bytes();
        for (at, kind, b) in edits {
            if bytes.is_empty() { break; }
            let i = at.index(bytes.len());
            match kind {
                0 => { bytes.remove(i); }
                1 => bytes.insert(i, b & 0x7f),
                2 => bytes[i] = b & 0x7f,
                _ => bytes.truncate(i),
            }
        }
        // Edits may split a multi-byte character; such text is checked as the CLI would
        // (it rejects invalid UTF-8 up front), so feed the parser the lossy conversion.
        check(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for open in ["(", "{", "[", "<"] {
        let src = open.repeat(100_000);
        assert!(weft_ir::parse_and_verify(&src).is_err());
    }
    // Deeply nested ifs: rejected past the parser's depth limit.
    let mut src = String::from("program @f(%c: bool) -> () {\n");
    for _ in 0..100_000 {
        src.push_str("if %c {\n");
    }
    let e = weft_ir::parse_and_verify(&src).expect_err("too deep");
    assert!(
        e.0[0].message.contains("nested deeper"),
        "{}",
        e.0[0].message
    );
}
