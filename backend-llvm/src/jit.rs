//! The host JIT: one ORC LLJIT per process (llvm-sys `orc2`; inkwell has no ORC wrapper)
//! into which each kernel's object file is linked under its own resource tracker, so that
//! dropping a kernel frees its code. Symbols the code calls (`fmod`, `fmodf`) resolve
//! against the process.

use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::orc2::lljit::*;
use llvm_sys::orc2::*;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

struct Jit {
    j: LLVMOrcLLJITRef,
    /// The objects linked now, by entry symbol: each under its own resource tracker, with
    /// the entry's address and the number of [`Code`] handles using it. An object whose
    /// symbol is linked already is not linked again (a cached kernel loaded by two devices
    /// shares one copy); its code is removed when the last handle goes.
    loaded: HashMap<String, Loaded>,
}

struct Loaded {
    rt: LLVMOrcResourceTrackerRef,
    addr: usize,
    users: usize,
}

// SAFETY: LLJIT is internally synchronised for adding objects and looking up symbols; we
// additionally serialise every call (and the table of loaded objects) through the mutex
// around it.
unsafe impl Send for Jit {}

/// A kernel's code in the JIT; removed from it when the last handle of its symbol drops.
pub(crate) struct Code(String);

impl Drop for Code {
    fn drop(&mut self) {
        let Ok(j) = jit() else { return };
        let mut j = j.lock().unwrap_or_else(|e| e.into_inner());
        let Some(l) = j.loaded.get_mut(&self.0) else {
            return;
        };
        l.users -= 1;
        if l.users > 0 {
            return;
        }
        let rt = l.rt;
        j.loaded.remove(&self.0);
        // SAFETY: the tracker was created by this JIT and is released exactly once, when its
        // last user is gone (under the JIT mutex, so no load can reuse it meanwhile).
        unsafe {
            let e = LLVMOrcResourceTrackerRemove(rt);
            let _ = take(e);
            LLVMOrcReleaseResourceTracker(rt);
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
            Ok(Mutex::new(Jit {
                j,
                loaded: HashMap::new(),
            }))
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Links object file `obj`, whose entry is `sym`, into the JIT and returns its code handle
/// and the address of `sym`. If an object with that entry is linked already, `obj` is not
/// linked again: its code is shared (objects of one entry symbol must be the same code).
pub(crate) fn load(obj: &[u8], sym: &str) -> Result<(Code, usize), String> {
    let mut j = jit()?.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = j.loaded.get_mut(sym) {
        l.users += 1;
        return Ok((Code(sym.to_string()), l.addr));
    }
    let name = CString::new(sym).map_err(|e| e.to_string())?;
    // SAFETY: the buffer is copied and owned by the JIT after the call; the tracker belongs
    // to the main dylib of this JIT.
    unsafe {
        let rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(j.j));
        let buf = llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(
            obj.as_ptr().cast(),
            obj.len(),
            name.as_ptr(),
        );
        let fail = |rt, m: String| {
            let _ = take(LLVMOrcResourceTrackerRemove(rt));
            LLVMOrcReleaseResourceTracker(rt);
            Err(m)
        };
        if let Some(e) = take(LLVMOrcLLJITAddObjectFileWithRT(j.j, rt, buf)) {
            return fail(rt, format!("ORC: adding {sym}: {e}"));
        }
        let mut addr: LLVMOrcExecutorAddress = 0;
        if let Some(e) = take(LLVMOrcLLJITLookup(j.j, &mut addr, name.as_ptr())) {
            return fail(rt, format!("ORC: looking up {sym}: {e}"));
        }
        let addr = addr as usize;
        j.loaded
            .insert(sym.to_string(), Loaded { rt, addr, users: 1 });
        Ok((Code(sym.to_string()), addr))
    }
}
