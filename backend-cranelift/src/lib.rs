//! weft-backend-cranelift: compiles a verified weft program to host SIMD code through
//! Cranelift (128-bit vectors: blocks of 8 elements), as one function in the kernel ABI of
//! docs/abi.md. A pure compiler: it knows nothing of devices or buffers.
#![warn(missing_docs)]

pub use weft_ir::abi;
mod lower;

pub use abi::Layout;
pub use lower::LowerError;

use cranelift_codegen::ir::{types as T, AbiParam, FuncRef, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module as _};
use half::f16;
use weft_ir::interp::scalar;
use weft_ir::konst::f16_from_f64;
use weft_ir::{Module, Opcode, ScalarType};

/// Why compilation failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// No such program.
    #[error("no program @{0} in the module")]
    UnknownProgram(String),
    /// The host ISA could not be set up.
    #[error("cranelift: host ISA: {0}")]
    Isa(String),
    /// Lowering failed (an op or type this backend does not handle).
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// Cranelift rejected the function.
    #[error("cranelift: {0}")]
    Codegen(String),
}

/// Signature of a compiled kernel: `(ctx, begin, end)` processes elements `[begin, end)`;
/// `begin` is a multiple of [`abi::BLOCK`] and buffers are padded to whole blocks.
pub type KernelFn = unsafe extern "C" fn(ctx: *const u64, begin: i64, end: i64);

/// A compiled program: its entry point, its context layout, and the JIT memory holding it
/// (released when the kernel is dropped).
pub struct Kernel {
    module: Option<JITModule>,
    entry: KernelFn,
    /// Where parameters, outputs and the launch shape go in the context block.
    pub layout: Layout,
    /// The CLIF text of the function, from [`compile_with_clif`] (`weft emit --target
    /// clif`); empty from [`compile`] (formatting a large function took 6–8% of its
    /// compile time).
    pub clif: String,
}

impl Kernel {
    /// The entry point.
    ///
    /// # Safety
    /// The caller must pass a context block laid out per [`Kernel::layout`] whose pointers
    /// address buffers of at least `end` rounded up to a whole block of elements (arrays:
    /// at least one element), and keep them alive for the call.
    pub unsafe fn entry(&self) -> KernelFn {
        self.entry
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the entry pointer dies with `self`; nothing else refers to this memory.
            unsafe { m.free_memory() };
        }
    }
}

// SAFETY: the JIT memory is immutable after finalization and the entry point is a plain
// function; the module is only touched again on drop.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

/// Helper functions compiled code calls for lanes Cranelift has no instruction for.
pub(crate) struct Libs {
    pub fmod32: FuncRef,
    pub fmod64: FuncRef,
    pub fma_f16: FuncRef,
    pub round_f16: FuncRef,
    pub f16_to_bits: FuncRef,
    pub f16_from_bits: FuncRef,
    pub clock: FuncRef,
}

/// `clock`: nanoseconds since the first call in this process (monotonic).
extern "C" fn weft_clock() -> i64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as i64
}

extern "C" fn weft_fmod32(a: f32, b: f32) -> f32 {
    a % b
}
extern "C" fn weft_fmod64(a: f64, b: f64) -> f64 {
    a % b
}
extern "C" fn weft_fma_f16(a: f32, b: f32, c: f32) -> f32 {
    let h = |x: f32| f16_from_f64(x as f64).to_bits() as u64;
    let r = scalar::float_op(Opcode::Fma, ScalarType::F16, h(a), h(b), h(c));
    f16::from_bits(r as u16).to_f32()
}
extern "C" fn weft_round_f16(x: f64) -> f32 {
    f16_from_f64(x).to_f32()
}
extern "C" fn weft_f16_to_bits(x: f32) -> i32 {
    f16_from_f64(x as f64).to_bits() as i32
}
extern "C" fn weft_f16_from_bits(x: i32) -> f32 {
    f16::from_bits(x as u16).to_f32()
}

type Isa = std::sync::Arc<dyn cranelift_codegen::isa::TargetIsa>;

/// Functions of more CLIF instructions than this are register-allocated by Cranelift's
/// single-pass allocator instead of the backtracking one, whose time grows much faster than
/// the function: the coin finder's ring programs (40,000–70,000 instructions, 214 taps)
/// took 0.2–2.9 s each to allocate, 15 s for the 21 of them, and take 1.3 s in all
/// single-pass (docs/performance.md, "Compile time"). The code spills more; such programs
/// are what the tiered JIT (`Backend::Auto`) replaces with LLVM code.
pub const SINGLE_PASS_INSTS: usize = 16_384;

/// The host ISA with the backtracking register allocator (`single_pass: false`) or the
/// single-pass one, each built once per process (from `cranelift-native`'s detection of the
/// host's features, so `fma` is a real FMA instruction).
fn isa_with(single_pass: bool) -> Result<Isa, CompileError> {
    static ISA: [std::sync::OnceLock<Result<Isa, String>>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    ISA[usize::from(single_pass)]
        .get_or_init(|| {
            let mut flags = settings::builder();
            let mut set = |k: &str, v: &str| flags.set(k, v).map_err(|e| e.to_string());
            // `none` by default: at `speed`, Cranelift's e-graph elaboration sinks the per-block
            // vector setup of a program into its inner loops (MDH ran 2x slower,
            // docs/performance.md); the lowering emits straight-line code itself.
            // WEFT_CL_OPT=speed restores it.
            let opt = std::env::var("WEFT_CL_OPT").unwrap_or_else(|_| "none".into());
            set("opt_level", &opt)?;
            let regalloc = match std::env::var("WEFT_CL_REGALLOC") {
                Ok(r) => r,
                Err(_) if single_pass => "single_pass".into(),
                Err(_) => "backtracking".into(),
            };
            set("regalloc_algorithm", &regalloc)?;
            // Cranelift's IR verifier: always in debug builds (tests), on demand in release.
            let verify = cfg!(debug_assertions) || std::env::var_os("WEFT_CL_VERIFY").is_some();
            set("enable_verifier", if verify { "true" } else { "false" })?;
            cranelift_native::builder()?
                .finish(settings::Flags::new(flags))
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(CompileError::Isa)
}

/// Compiles program `name` of the verified module `m` to host code.
pub fn compile(m: &Module, name: &str) -> Result<Kernel, CompileError> {
    compile_impl(m, name, None, false, false)
}

/// [`compile`], keeping the function's CLIF text in [`Kernel::clif`].
pub fn compile_with_clif(m: &Module, name: &str) -> Result<Kernel, CompileError> {
    compile_impl(m, name, None, true, false)
}

/// Compiles the interior variant `name` of a stencil program
/// (`weft_ir::passes::partition::interior_variant`) for ranges of whole blocks each inside
/// one row of the launch — what `partition::split` gives for an alignment of
/// [`abi::BLOCK`]: its offset reads are only the row loop's vector loads, without the
/// gathers a block across rows needs (the coin finder's ring kernels shrink from about
/// 40,000 CLIF instructions to a fraction). The caller must run it over such ranges only.
pub fn compile_interior(m: &Module, name: &str) -> Result<Kernel, CompileError> {
    compile_impl(m, name, None, false, true)
}

/// Compiles kernel `name` of the verified module `m` for work-groups of `block` work-items
/// (x, y, z) to host code, the MCUDA way (docs/kernel-mode.md): the entry's `(ctx, begin,
/// end)` runs work-groups `[begin, end)` (row-major numbers, x fastest), the grid's extents
/// in the context's launch words.
///
/// # Errors
/// As [`compile`]; also a map program, or a group needing more than 1 MiB of stack for its
/// shared arrays and per-work-item values.
pub fn compile_kernel(m: &Module, name: &str, block: [u32; 3]) -> Result<Kernel, CompileError> {
    compile_impl(m, name, Some(block), false, false)
}

fn compile_impl(
    m: &Module,
    name: &str,
    block: Option<[u32; 3]>,
    with_clif: bool,
    whole_rows: bool,
) -> Result<Kernel, CompileError> {
    // Math functions become basic ops first (the interpreter runs the same expansion), so
    // compiled code computes the interpreter's bits, in SIMD.
    // Calls are inlined too (callees first, identical calls merged), so the lowering never
    // meets a call.
    let m = &*weft_ir::passes::for_lowering(m, name);
    let p = m
        .get(name)
        .ok_or_else(|| CompileError::UnknownProgram(name.to_string()))?;
    let isa = isa_with(false)?;
    let mut jb = JITBuilder::with_isa(isa.clone(), default_libcall_names());
    let syms: [(&str, *const u8); 7] = [
        ("weft_clock", weft_clock as *const u8),
        ("weft_fmod32", weft_fmod32 as *const u8),
        ("weft_fmod64", weft_fmod64 as *const u8),
        ("weft_fma_f16", weft_fma_f16 as *const u8),
        ("weft_round_f16", weft_round_f16 as *const u8),
        ("weft_f16_to_bits", weft_f16_to_bits as *const u8),
        ("weft_f16_from_bits", weft_f16_from_bits as *const u8),
    ];
    for (n, ptr) in syms {
        jb.symbol(n, ptr);
    }
    let mut jit = JITModule::new(jb);
    let cg = |e: cranelift_module::ModuleError| CompileError::Codegen(e.to_string());
    let declare = |jit: &mut JITModule,
                   n: &str,
                   params: &[T::Type],
                   ret: T::Type|
     -> Result<FuncId, CompileError> {
        let mut sig = jit.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns.push(AbiParam::new(ret));
        jit.declare_function(n, Linkage::Import, &sig).map_err(cg)
    };
    let clock_id = {
        let mut sig = jit.make_signature();
        sig.returns.push(AbiParam::new(T::I64));
        jit.declare_function("weft_clock", Linkage::Import, &sig)
            .map_err(cg)?
    };
    let ids = [
        declare(&mut jit, "weft_fmod32", &[T::F32, T::F32], T::F32)?,
        declare(&mut jit, "weft_fmod64", &[T::F64, T::F64], T::F64)?,
        declare(&mut jit, "weft_fma_f16", &[T::F32, T::F32, T::F32], T::F32)?,
        declare(&mut jit, "weft_round_f16", &[T::F64], T::F32)?,
        declare(&mut jit, "weft_f16_to_bits", &[T::F32], T::I32)?,
        declare(&mut jit, "weft_f16_from_bits", &[T::I32], T::F32)?,
    ];
    let mut sig = jit.make_signature();
    sig.params.push(AbiParam::new(T::I64));
    sig.params.push(AbiParam::new(T::I64));
    sig.params.push(AbiParam::new(T::I64));
    let kid = jit
        .declare_function(&format!("weft_kernel_{}", p.name), Linkage::Local, &sig)
        .map_err(cg)?;
    let mut ctx = Context::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, kid.as_u32());
    let layout = Layout::new(p);
    let mut fbc = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let refs: Vec<FuncRef> = ids
            .iter()
            .map(|&id| jit.declare_func_in_func(id, b.func))
            .collect();
        let libs = Libs {
            fmod32: refs[0],
            fmod64: refs[1],
            fma_f16: refs[2],
            round_f16: refs[3],
            f16_to_bits: refs[4],
            f16_from_bits: refs[5],
            clock: jit.declare_func_in_func(clock_id, b.func),
        };
        let is_kernel = p.kind == weft_ir::ProgramKind::Kernel;
        match block {
            Some(block) if is_kernel => {
                lower::Lowerer::lower_group_kernel(m, p, &mut b, &libs, &layout, block)?
            }
            None if !is_kernel => {
                lower::Lowerer::lower_kernel(m, p, &mut b, &libs, &layout, whole_rows)?
            }
            _ => {
                return Err(CompileError::Lower(LowerError {
                    program: p.name.clone(),
                    message: if is_kernel {
                        "is a kernel: compile it with a work-group size (compile_kernel)".into()
                    } else {
                        "is a map program, not a kernel".into()
                    },
                }))
            }
        }
        b.finalize(isa.frontend_config());
    }
    let clif = if with_clif {
        ctx.func.display().to_string()
    } else {
        String::new()
    };
    let disasm = std::env::var_os("WEFT_DUMP_ASM").is_some();
    ctx.set_disasm(disasm);
    if ctx.func.dfg.num_insts() > SINGLE_PASS_INSTS {
        // The module's ISA allocates with backtracking: compile with the single-pass one and
        // hand the module the bytes (as `define_function` does).
        let fast = isa_with(true)?;
        ctx.compile(&*fast, &mut Default::default())
            .map_err(|e| CompileError::Codegen(format!("{:?}", e.inner)))?;
        let code = ctx
            .compiled_code()
            .ok_or_else(|| CompileError::Codegen("no compiled code".into()))?;
        let align = (code.buffer.alignment as u64)
            .max(fast.function_alignment().minimum as u64)
            .max(fast.symbol_alignment());
        let relocs: Vec<cranelift_module::ModuleReloc> = code
            .buffer
            .relocs()
            .iter()
            .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, kid))
            .collect();
        let bytes = code.buffer.data().to_vec();
        jit.define_function_bytes(kid, align, &bytes, &relocs)
            .map_err(cg)?;
    } else {
        jit.define_function(kid, &mut ctx)
            .map_err(|e| CompileError::Codegen(format!("{e:?}")))?;
    }
    if disasm {
        if let Some(v) = ctx.compiled_code().and_then(|c| c.vcode.clone()) {
            eprintln!("{v}");
        }
    }
    jit.finalize_definitions().map_err(cg)?;
    let ptr = jit.get_finalized_function(kid);
    // SAFETY: the function was compiled with exactly the `KernelFn` signature (three i64
    // parameters, no result, the platform's default call convention).
    let entry: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
    Ok(Kernel {
        module: Some(jit),
        entry,
        layout,
        clif,
    })
}
