//! weft-cli: the `weft` command-line tool (check, format, optimise, compose, run and fuzz
//! `.weft` IR files) as a library, so that tests run it in-process ([`cli::run_args`]); the
//! binary is `src/main.rs`. It is its own crate so that the `weft` library does not pull in
//! clap, indicatif or the fuzzer (issue 20).
#![warn(missing_docs)]

pub mod cli;
