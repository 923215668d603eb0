//! The one integration-test binary of weft (static LLVM makes each test binary large, so
//! every integration test is a module here): filetests, parser fuzzing, CLI behaviour, devices.

mod algebra;
mod algebra_demos;
mod arrays;
mod bad_input;
mod builder;
mod cli;
mod collectives;
mod compile_cache;
mod cpu;
mod cuda;
mod differential;
mod dsl;
mod examples;
mod filetests;
mod fuzz;
mod fuzz_parser;
mod groups;
mod kernels;
mod limits;
mod llvm_cpus;
mod papercuts;
mod sequence;
mod watchdog;
mod workloads;
