//! The lexer of the text format: bytes to tokens with byte spans; `;` starts a comment.

use crate::diag::Diagnostic;
use crate::program::Loc;

/// A token kind; the token's text is the source slice of its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokKind {
    /// `%name` (text excludes the `%`).
    ValueName,
    /// `@name` (text excludes the `@`).
    ProgName,
    /// An identifier or keyword: `[A-Za-z_][A-Za-z0-9_]*`.
    Word,
    /// A number: starts with a digit; may contain letters, `_`, `.`, and `e+`/`e-`.
    Number,
    /// `->`.
    Arrow,
    /// One of `( ) { } [ ] < > , : = -`.
    Punct(u8),
    /// End of input.
    Eof,
}

/// A token with its byte span `[start, end)`; for names the span covers the sigil too.
#[derive(Clone, Copy, Debug)]
pub struct Tok {
    /// Its kind.
    pub kind: TokKind,
    /// Start byte.
    pub start: usize,
    /// End byte.
    pub end: usize,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.'
}

/// Splits `src` into tokens. Errors on a character that starts no token.
pub fn lex(src: &str) -> Result<Vec<Tok>, Diagnostic> {
    let b = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b';' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'%' | b'@' => {
                i += 1;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                if i == start + 1 {
                    return Err(Diagnostic::new(
                        Loc::span(start..start + 1),
                        format!("`{}` must be followed by a name", c as char),
                    ));
                }
                if c == b'%' {
                    TokKind::ValueName
                } else {
                    TokKind::ProgName
                }
            }
            b'-' if b.get(i + 1) == Some(&b'>') => {
                i += 2;
                TokKind::Arrow
            }
            b'(' | b')' | b'{' | b'}' | b'[' | b']' | b'<' | b'>' | b',' | b':' | b'=' | b'-' => {
                i += 1;
                TokKind::Punct(c)
            }
            b'0'..=b'9' => {
                let hex = b.get(i + 1).is_some_and(|&x| x == b'x' || x == b'X') && c == b'0';
                i += 1;
                while i < b.len() {
                    let x = b[i];
                    let exp_sign =
                        !hex && (x == b'+' || x == b'-') && matches!(b[i - 1], b'e' | b'E');
                    if is_ident(x) || exp_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                TokKind::Number
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                TokKind::Word
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(Diagnostic::new(
                    Loc::span(i..i + ch.len_utf8()),
                    format!("unexpected character {ch:?}"),
                ));
            }
        };
        toks.push(Tok {
            kind,
            start,
            end: i,
        });
    }
    toks.push(Tok {
        kind: TokKind::Eof,
        start: b.len(),
        end: b.len(),
    });
    Ok(toks)
}
