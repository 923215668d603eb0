//! The host JIT: one ORC LLJIT per process (llvm-sys `orc2`; inkwell has no ORC wrapper)
//! into which each kernel's object file is linked under its own resource tracker, so that
//! dropping a kernel frees its code. Symbols the code calls (`fmod`, `fmodf`) resolve
//! against the process.

use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::orc2::lljit::*;
use llvm_sys::orc2::*;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

struct Jit(LLVMOrcLLJITRef);
// SAFETY: LLJIT is internally synchronised for adding objects and looking up symbols; we
// additionally serialise every call through the mutex around it.
unsafe impl Send for Jit {}

/// A kernel's code in the JIT; removed from it on drop.
pub(crate) struct Code(LLVMOrcResourceTrackerRef);
// SAFETY: resource trackers are only used under the JIT mutex.
unsafe impl Send for Code {}
unsafe impl Sync for Code {}

impl Drop for Code {
    fn drop(&mut self) {
        let _guard = jit().map(|j| j.lock().unwrap_or_else(|e| e.into_inner()));
        // SAFETY: the tracker was created by this JIT and is released exactly once.
        unsafe {
            let e = LLVMOrcResourceTrackerRemove(self.0);
            let _ = take(e);
            LLVMOrcReleaseResourceTracker(self.0);
        }
    }
}

/// Converts an LLVM error to a message (consuming it); None for success.
fn take(e: LLVMErrorRef) -> Option<String> {
    if e.is_null() {
        return None;
    }
    // SAFETY: a non-null error is consumed by LLVMGetErrorMessage; the message is freed.
    unsafe {
        let m = LLVMGetErrorMessage(e);
        let s = CStr::from_ptr(m).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(m);
        Some(s)
    }
}

fn jit() -> Result<&'static Mutex<Jit>, String> {
    static JIT: OnceLock<Result<Mutex<Jit>, String>> = OnceLock::new();
    JIT.get_or_init(|| {
        // SAFETY: plain LLJIT construction through the C API; the builder is consumed.
        unsafe {
            let builder = LLVMOrcCreateLLJITBuilder();
            let mut j: LLVMOrcLLJITRef = std::ptr::null_mut();
            if let Some(e) = take(LLVMOrcCreateLLJIT(&mut j, builder)) {
                return Err(format!("ORC LLJIT: {e}"));
            }
            let mut gen: LLVMOrcDefinitionGeneratorRef = std::ptr::null_mut();
            let prefix = LLVMOrcLLJITGetGlobalPrefix(j);
            if let Some(e) = take(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                &mut gen,
                prefix,
                None,
                std::ptr::null_mut(),
            )) {
                return Err(format!("ORC process symbols: {e}"));
            }
            LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j), gen);
            Ok(Mutex::new(Jit(j)))
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Links object file `obj` into the JIT and returns its code handle and the address of
/// `sym`.
pub(crate) fn load(obj: &[u8], sym: &str) -> Result<(Code, usize), String> {
    let j = jit()?.lock().unwrap_or_else(|e| e.into_inner());
    let name = CString::new(sym).map_err(|e| e.to_string())?;
    // SAFETY: the buffer is copied and owned by the JIT after the call; the tracker belongs
    // to the main dylib of this JIT.
    unsafe {
        let rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(j.0));
        let code = Code(rt);
        let buf = llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(
            obj.as_ptr().cast(),
            obj.len(),
            name.as_ptr(),
        );
        if let Some(e) = take(LLVMOrcLLJITAddObjectFileWithRT(j.0, rt, buf)) {
            return Err(format!("ORC: adding {sym}: {e}"));
        }
        let mut addr: LLVMOrcExecutorAddress = 0;
        if let Some(e) = take(LLVMOrcLLJITLookup(j.0, &mut addr, name.as_ptr())) {
            return Err(format!("ORC: looking up {sym}: {e}"));
        }
        drop(j);
        Ok((code, addr as usize))
    }
}
