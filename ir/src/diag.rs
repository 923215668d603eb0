//! Diagnostics: located error messages and their rendering with a source snippet and caret.

use crate::program::Loc;
use codespan_reporting::diagnostic::{Diagnostic as CsDiag, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::NoColor};
use std::fmt;

/// One error with its location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where it is.
    pub loc: Loc,
    /// What is wrong.
    pub message: String,
    /// The program it is in, when known (without `@`).
    pub program: Option<String>,
}

impl Diagnostic {
    /// A diagnostic at `loc`.
    pub fn new(loc: Loc, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            loc,
            message: message.into(),
            program: None,
        }
    }
}

/// A non-empty list of diagnostics: the error type of parsing and verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Errors(pub Vec<Diagnostic>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", render_one(d, "<input>", None))?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

/// 1-based (line, column) of byte offset `pos` in `src` (columns count chars).
pub fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(src.len());
    let mut pos = pos;
    while !src.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &src[..pos];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn render_one(d: &Diagnostic, file: &str, src: Option<&str>) -> String {
    let prog = d
        .program
        .as_ref()
        .map(|p| format!(" (in @{p})"))
        .unwrap_or_default();
    match (d.loc, src) {
        (Loc::Span(s, e), Some(src)) => {
            let (line, col) = line_col(src, s as usize);
            let files = SimpleFile::new(file, src);
            let lo = (s as usize).min(src.len());
            let hi = (e as usize).clamp(lo, src.len());
            let diag = CsDiag::error()
                .with_message(format!("{}{prog}", d.message))
                .with_labels(vec![Label::primary((), lo..hi)]);
            let header = format!("{file}:{line}:{col}: error: {}{prog}\n", d.message);
            let line_text = src[lo..].split('\n').next().unwrap_or("");
            let line_start = src[..lo].rfind('\n').map_or(0, |i| i + 1);
            if lo - line_start > 120 || line_text.len() > 200 {
                // A very long line: show a window around the column instead of the whole line.
                let mut a = lo.saturating_sub(40);
                while !src.is_char_boundary(a) {
                    a -= 1;
                }
                a = a.max(line_start);
                let mut b = (lo + 40).min(src.len());
                while !src.is_char_boundary(b) {
                    b += 1;
                }
                let window: String = src[a..b].split('\n').next().unwrap_or("").to_string();
                let caret = " ".repeat(src[a..lo].chars().count());
                return format!("{header}   | ...{window}...\n   |    {caret}^\n");
            }
            let mut out = NoColor::new(Vec::new());
            let config = term::Config::default();
            if term::emit(&mut out, &config, &files, &diag).is_err() {
                return header;
            }
            let body = String::from_utf8_lossy(&out.into_inner()).into_owned();
            // Our header replaces codespan's first line (`error: message`).
            let snippet = body.split_once('\n').map_or("", |(_, rest)| rest);
            format!("{header}{snippet}")
        }
        (Loc::Span(s, _), None) => format!("{file}@{s}: error: {}{prog}\n", d.message),
        (Loc::Rust(l), _) => format!(
            "{}:{}:{}: error: {}{prog}\n",
            l.file(),
            l.line(),
            l.column(),
            d.message
        ),
        (Loc::None, _) => format!("{file}: error: {}{prog}\n", d.message),
    }
}

/// Renders diagnostics for source `src` named `file`: each starts with `file:line:col: error:`,
/// followed by a snippet with a caret under the offending text.
pub fn render(diags: &[Diagnostic], file: &str, src: &str) -> String {
    diags
        .iter()
        .map(|d| render_one(d, file, Some(src)))
        .collect::<Vec<_>>()
        .join("")
}
