//! The library's error type: every fallible call of the `weft` DSL, arrays, apply and
//! collectives returns [`Error`], naming the user's source line or the argument at fault.

use std::panic::Location;

/// Why a `weft` library call failed. Messages name the place: the user's source line for
/// recording misuse (`#[track_caller]`), the argument (`input 2 \`x\``) for apply and
/// collective misuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Misuse while recording a program (an `Out` never assigned, a type mismatch, an
    /// operation outside recording that needs it), at the user's line.
    #[error("{location}: {message}")]
    Record {
        /// What went wrong.
        message: String,
        /// The user's call site.
        location: &'static Location<'static>,
    },
    /// A bad argument to apply, an array operation or a collective (shape, dtype, index
    /// out of range, combiner arity); the message names the argument.
    #[error("{0}")]
    Argument(String),
    /// A program-algebra operation failed (DESIGN §4).
    #[error(transparent)]
    Algebra(#[from] weft_ir::algebra::AlgebraError),
    /// The device failed: compile error, launch error, CUDA driver error or a missing GPU.
    #[error(transparent)]
    Runtime(#[from] weft_runtime::RuntimeError),
    /// A program failed parsing or verification: every diagnostic with its location, and
    /// them rendered as the CLI renders them (`file:line:col`, the source line and a caret,
    /// where the program came from text; the user's Rust line for recorded programs).
    #[error("{rendered}")]
    Invalid {
        /// The diagnostics, in order (empty for an error that has no location).
        diagnostics: Vec<weft_ir::Diagnostic>,
        /// Them rendered.
        rendered: String,
    },
    /// An input file is missing, unreadable or malformed (`weft::data`); the message names
    /// the file (and line where there is one).
    #[error("{0}")]
    Input(String),
}

impl Error {
    /// A recording error at the caller's location.
    #[track_caller]
    pub fn record(message: impl Into<String>) -> Error {
        Error::Record {
            message: message.into(),
            location: Location::caller(),
        }
    }

    /// A verification or parse error: `e`'s diagnostics, rendered without source text.
    pub fn invalid(e: weft_ir::Errors) -> Error {
        Error::Invalid {
            rendered: e.to_string(),
            diagnostics: e.0,
        }
    }

    /// A verification or parse error in the text `src` of `file`: `e`'s diagnostics,
    /// rendered with `file:line:col` and a snippet.
    pub fn invalid_in(e: weft_ir::Errors, file: &str, src: &str) -> Error {
        Error::Invalid {
            rendered: weft_ir::render(&e.0, file, src),
            diagnostics: e.0,
        }
    }

    /// An invalid program with no location to point at.
    pub fn invalid_message(message: impl Into<String>) -> Error {
        Error::Invalid {
            diagnostics: Vec::new(),
            rendered: message.into(),
        }
    }

    /// The diagnostics of an [`Error::Invalid`] (empty for every other error).
    pub fn diagnostics(&self) -> &[weft_ir::Diagnostic] {
        match self {
            Error::Invalid { diagnostics, .. } => diagnostics,
            _ => &[],
        }
    }

    /// An argument error.
    pub fn argument(message: impl Into<String>) -> Error {
        Error::Argument(message.into())
    }
}

impl From<weft_ir::interp::RunError> for Error {
    fn from(e: weft_ir::interp::RunError) -> Error {
        Error::Runtime(e.into())
    }
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
