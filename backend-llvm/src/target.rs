//! The host target CPU and LLVM's fatal-error handler.
//!
//! Host code is compiled for this machine's CPU and features unless `WEFT_LLVM_CPU` (or the
//! `cpu` argument of [`crate::compile_object_for_cpu`]) names another CPU: then for LLVM's
//! default features of that CPU. Names are checked against the x86-64 CPUs LLVM 19 knows,
//! because LLVM itself only prints a warning for an unknown name and compiles for a generic
//! CPU, and stops the process for a CPU without 64-bit mode.
//!
//! LLVM reports what it cannot recover from (an instruction it cannot select, say) through
//! `report_fatal_error`, which aborts the process. [`install_fatal_error_handler`] makes that
//! print which program was being compiled for which CPU, then exit with status 1; LLVM's
//! contract does not allow returning into the caller.

use crate::CompileError;
use inkwell::targets::TargetMachine;
use std::cell::RefCell;
use std::ffi::{c_char, CStr};
use std::io::Write as _;

/// The environment variable that sets the host target CPU (an LLVM CPU name such as
/// `sapphirerapids`, `znver4` or `x86-64-v3`; `native` or unset: this machine's CPU and
/// features).
pub const CPU_ENV: &str = "WEFT_LLVM_CPU";

/// The x86-64 CPU names LLVM 19 knows, any of which [`CPU_ENV`] may name: those of
/// `llc -mtriple=x86_64 -mcpu=help` less the 37 CPUs without 64-bit mode (`i686`,
/// `pentium4`, `athlon`, …), for which LLVM's code generation stops the process ("64-bit code
/// requested on a subtarget that doesn't support it").
pub const KNOWN_CPUS: &[&str] = &[
    "alderlake",
    "amdfam10",
    "arrowlake",
    "arrowlake-s",
    "arrowlake_s",
    "athlon-fx",
    "athlon64",
    "athlon64-sse3",
    "atom",
    "atom_sse4_2",
    "atom_sse4_2_movbe",
    "barcelona",
    "bdver1",
    "bdver2",
    "bdver3",
    "bdver4",
    "bonnell",
    "broadwell",
    "btver1",
    "btver2",
    "cannonlake",
    "cascadelake",
    "clearwaterforest",
    "cooperlake",
    "core-avx-i",
    "core-avx2",
    "core2",
    "core_2_duo_sse4_1",
    "core_2_duo_ssse3",
    "core_2nd_gen_avx",
    "core_3rd_gen_avx",
    "core_4th_gen_avx",
    "core_4th_gen_avx_tsx",
    "core_5th_gen_avx",
    "core_5th_gen_avx_tsx",
    "core_aes_pclmulqdq",
    "core_i7_sse4_2",
    "corei7",
    "corei7-avx",
    "emeraldrapids",
    "generic",
    "goldmont",
    "goldmont-plus",
    "goldmont_plus",
    "gracemont",
    "grandridge",
    "graniterapids",
    "graniterapids-d",
    "graniterapids_d",
    "haswell",
    "icelake-client",
    "icelake-server",
    "icelake_client",
    "icelake_server",
    "ivybridge",
    "k8",
    "k8-sse3",
    "knl",
    "knm",
    "lunarlake",
    "meteorlake",
    "mic_avx512",
    "nehalem",
    "nocona",
    "opteron",
    "opteron-sse3",
    "pantherlake",
    "penryn",
    "raptorlake",
    "rocketlake",
    "sandybridge",
    "sapphirerapids",
    "sierraforest",
    "silvermont",
    "skx",
    "skylake",
    "skylake-avx512",
    "skylake_avx512",
    "slm",
    "tigerlake",
    "tremont",
    "westmere",
    "x86-64",
    "x86-64-v2",
    "x86-64-v3",
    "x86-64-v4",
    "znver1",
    "znver2",
    "znver3",
    "znver4",
    "znver5",
];

/// Whether `name` is an x86-64 CPU LLVM 19 knows ([`KNOWN_CPUS`]) or `native`.
pub fn is_known_cpu(name: &str) -> bool {
    name == "native" || KNOWN_CPUS.contains(&name)
}

/// The CPU host code is compiled for: [`CPU_ENV`] when it is set (and not `native`), else
/// this machine's CPU as LLVM names it.
///
/// # Errors
/// [`CompileError::UnknownCpu`] when [`CPU_ENV`] names no CPU LLVM knows.
pub fn host_target_cpu() -> Result<String, CompileError> {
    resolve(None).map(|(cpu, _)| cpu)
}

/// The CPU name and feature string for host code: `explicit` if given, else [`CPU_ENV`] if
/// set and not empty; `native` (or neither): this machine's CPU and its features; a named
/// CPU: LLVM's default features for it. Surrounding blanks are ignored.
pub(crate) fn resolve(explicit: Option<&str>) -> Result<(String, String), CompileError> {
    let named = match explicit {
        Some(c) => Some(c.trim().to_string()),
        None => std::env::var_os(CPU_ENV).map(|v| v.to_string_lossy().trim().to_string()),
    };
    match named.as_deref() {
        Some("") if explicit.is_some() => Err(CompileError::UnknownCpu(String::new())),
        None | Some("") | Some("native") => Ok((
            TargetMachine::get_host_cpu_name().to_string(),
            TargetMachine::get_host_cpu_features().to_string(),
        )),
        Some(c) if KNOWN_CPUS.contains(&c) => Ok((c.to_string(), String::new())),
        Some(c) => Err(CompileError::UnknownCpu(c.to_string())),
    }
}

thread_local! {
    /// What this thread is compiling: (program, CPU or `sm_XX`), for the fatal-error handler.
    static COMPILING: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Marks the current thread as compiling program `name` for `cpu` until dropped (restoring
/// what it was compiling before).
pub(crate) struct Compiling {
    prev: Option<(String, String)>,
}

impl Compiling {
    /// Starts compiling `name` for `cpu`.
    pub(crate) fn enter(name: &str, cpu: &str) -> Compiling {
        let now = Some((name.to_string(), cpu.to_string()));
        let prev = COMPILING
            .try_with(|c| {
                c.try_borrow_mut()
                    .map(|mut c| std::mem::replace(&mut *c, now))
            })
            .ok()
            .and_then(Result::ok)
            .flatten();
        Compiling { prev }
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = COMPILING.try_with(|c| c.try_borrow_mut().map(|mut c| *c = prev));
    }
}

/// LLVM's fatal errors end here: the message names the program and CPU, then the process
/// exits with status 1 (LLVM does not allow the handler to return into the compilation)
/// without running destructors.
extern "C" fn on_fatal_error(reason: *const c_char) {
    let reason = if reason.is_null() {
        "(no reason given)".into()
    } else {
        // SAFETY: LLVM passes a NUL-terminated string that lives for the call.
        unsafe { CStr::from_ptr(reason) }.to_string_lossy()
    };
    let what = COMPILING
        .try_with(|c| c.try_borrow().ok().and_then(|c| c.clone()))
        .ok()
        .flatten();
    let msg = match what {
        Some((p, cpu)) => format!("error: LLVM failed while compiling @{p} for {cpu}: {reason}"),
        None => format!("error: LLVM failed: {reason}"),
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{msg}");
    let _ = err.flush();
    extern "C" {
        fn _exit(status: std::ffi::c_int) -> !;
    }
    // SAFETY: `_exit` ends the process at once. Not `exit`: its atexit handlers and static
    // destructors would tear down LLVM's global state while other threads may be compiling.
    unsafe { _exit(1) }
}

/// Installs [`on_fatal_error`] as LLVM's fatal-error handler (once per process; called by
/// the backend's initialisation).
pub(crate) fn install_fatal_error_handler() {
    // SAFETY: the handler is a plain `extern "C"` function that never unwinds; LLVM keeps
    // the pointer for the life of the process. Called once, from the backend's `init`.
    unsafe { llvm_sys::error_handling::LLVMInstallFatalErrorHandler(Some(on_fatal_error)) }
}
