//! weft-backend-llvm: compiles a verified weft program through LLVM 19 (statically linked)
//! to host code, JIT-loaded by ORC LLJIT in the kernel ABI of docs/abi.md, and to PTX for
//! NVIDIA GPUs (one element per thread, grid-stride loop). A pure compiler: it knows nothing
//! of devices or buffers.
#![warn(missing_docs)]

mod jit;
mod lower;
mod target;

pub use lower::{interleaved_on_gpu, ptx_block_elems, Flavor, LowerError, HOST_WIDTH};
pub use target::{host_target_cpu, is_known_cpu, CPU_ENV, KNOWN_CPUS};
pub use weft_ir::abi::Layout;

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use weft_ir::Module;

/// Why compilation failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// No such program.
    #[error("no program @{0} in the module")]
    UnknownProgram(String),
    /// Lowering failed.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// LLVM rejected the lowered module or failed to generate code (a weft bug).
    #[error("llvm: {0}")]
    Llvm(String),
    /// The host target CPU (`WEFT_LLVM_CPU` or an explicit CPU) is not an x86-64 CPU LLVM
    /// knows ([`KNOWN_CPUS`]).
    #[error(
        "unknown CPU `{0}` (from WEFT_LLVM_CPU or the cpu argument): not an x86-64 CPU LLVM 19 knows, such as x86-64, x86-64-v2, x86-64-v3, x86-64-v4, skylake-avx512, sapphirerapids, znver4 (weft_backend_llvm::KNOWN_CPUS lists them); `native` is this machine"
    )]
    UnknownCpu(String),
}

/// Code generation options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Options {
    /// Fast-math: float ops get `nnan ninf nsz arcp contract afn`; on PTX, f32 `div` and
    /// `sqrt` use the approximate instructions (`div.approx.ftz`, `sqrt.approx.ftz`) and f32
    /// denormals flush to zero, as nvcc `--use_fast_math` does. Results then differ from the
    /// interpreter (bounds: docs/semantics.md, "Fast-math").
    pub fast_math: bool,
    /// How much work LLVM puts into the program: by default chosen from its size, so that
    /// very large programs compile in near-linear time ([`Effort`]).
    pub effort: Effort,
    /// A host map kernel with one output reduced in the kernel instead of stored (a fused
    /// map-reduce: [`HostReduce`]). `None` for every other kernel.
    pub reduce: Option<HostReduce>,
}

/// A host map kernel's output folded inside the kernel instead of stored (issue 22's fused
/// convergence check; the runtime's `CpuDevice::prepare_reduced`): a call over elements
/// `begin .. end` folds the output's elements into [`HOST_WIDTH`] vector lanes and one
/// scalar, each starting at `identity` and combined with `op` in whatever order the call's
/// blocks come, and stores those `HOST_WIDTH + 1` partial states at elements
/// `begin ..= begin + HOST_WIDTH` of the output's planes (docs/abi.md, "Reduced outputs").
/// Only for combiners whose result does not depend on the grouping or order (`min`, `max`,
/// integer `add`, `mul`, `and`, `or`, `xor`): the caller's to ensure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostReduce {
    /// The output's position.
    pub output: usize,
    /// The combining op (binary, on the output's element type).
    pub op: weft_ir::Opcode,
    /// The identity's lane bits in the output's scalar type.
    pub identity: u64,
}

/// How much optimisation LLVM does (docs/abi.md, "Compile time of large programs"). Every
/// level computes the same bits (no level changes floating-point semantics; fast-math is
/// [`Options::fast_math`]); they differ in compile time and in the speed of the code.
///
/// LLVM 19's optimisation and code generation are super-linear in places on very large
/// functions, which a long straight-line program or thousands of sequential loops make:
/// the machine scheduler on a basic block of 10^5 instructions (19 s for a 100,000-op
/// chain), ScalarEvolution, loop unrolling and strength reduction, and `mem2reg`'s
/// dominance frontiers on a dominator tree thousands of loops deep (over 300 s for 10,000
/// loops). Above [`MAX_FULL_BLOCKS`] basic blocks or [`MAX_FULL_LINES`] instructions of
/// lowered IR, [`Effort::Auto`] steps down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Effort {
    /// [`Effort::Minimal`] above [`MAX_FULL_BLOCKS`] basic blocks, [`Effort::Reduced`]
    /// above [`MAX_FULL_LINES`] lines, else [`Effort::Full`].
    #[default]
    Auto,
    /// `default<O3>`, and the code generator at its aggressive level.
    Full,
    /// `default<O1>`; code generation without optimisation (no machine scheduler or loop
    /// strength reduction: linear time on huge basic blocks); on the GPU the driver's PTX
    /// compiler at its lowest level too.
    Reduced,
    /// No IR optimisation at all (loop-carried values stay in stack slots); code generation
    /// as for [`Effort::Reduced`]. Linear time whatever the control flow.
    Minimal,
}

/// The environment variable that forces an [`Effort`] ([`Effort::from_env`]).
pub const EFFORT_ENV: &str = "WEFT_LLVM_EFFORT";

/// Lowered functions with more basic blocks than this get [`Effort::Minimal`] under
/// [`Effort::Auto`] (about 400 sequential loops: `default<O3>` took 11.6 s on 1,000).
pub const MAX_FULL_BLOCKS: usize = 1_200;

/// Lowered modules with more lines (about one instruction each) than this get
/// [`Effort::Reduced`] under [`Effort::Auto`] (a 30,000-op chain is ~50,000 lines and
/// compiles in 1.7 s at full effort; 100,000 ops took 23 s).
pub const MAX_FULL_LINES: usize = 60_000;

impl Effort {
    /// The level used for lowered IR `text` (resolves [`Effort::Auto`]).
    fn resolve(self, text: &str) -> Effort {
        if self != Effort::Auto {
            return self;
        }
        if let Some(e) = Effort::from_env() {
            return e;
        }
        let (mut blocks, mut lines) = (0usize, 0usize);
        for l in text.lines() {
            lines += 1;
            blocks += usize::from(!l.starts_with(' ') && l.ends_with(':'));
        }
        if blocks > MAX_FULL_BLOCKS {
            Effort::Minimal
        } else if lines > MAX_FULL_LINES {
            Effort::Reduced
        } else {
            Effort::Full
        }
    }

    /// The effort `WEFT_LLVM_EFFORT` forces on compilations that ask for [`Effort::Auto`]
    /// (`full`, `reduced` or `minimal`; anything else, or unset: none), for testing the
    /// reduced levels on ordinary programs (e.g. `weft fuzz` on the GPU).
    pub fn from_env() -> Option<Effort> {
        match std::env::var(EFFORT_ENV).ok()?.trim() {
            "full" => Some(Effort::Full),
            "reduced" => Some(Effort::Reduced),
            "minimal" => Some(Effort::Minimal),
            _ => None,
        }
    }

    /// The code generator's optimisation level at this effort (host and PTX).
    fn codegen(self) -> OptimizationLevel {
        match self {
            Effort::Auto | Effort::Full => OptimizationLevel::Aggressive,
            Effort::Reduced | Effort::Minimal => OptimizationLevel::None,
        }
    }
}

/// Signature of a compiled host kernel: `(ctx, begin, end)` processes elements
/// `[begin, end)`; `begin` is a multiple of [`HOST_WIDTH`] and buffers are padded to whole
/// blocks (docs/abi.md) — the same ABI as the Cranelift backend.
pub type KernelFn = unsafe extern "C" fn(ctx: *const u64, begin: i64, end: i64);

/// A compiled host program: entry point, context layout, and the JIT code holding it
/// (released when the kernel is dropped).
pub struct HostKernel {
    code: jit::Code,
    entry: KernelFn,
    /// Where parameters, outputs and the launch shape go in the context block.
    pub layout: Layout,
    /// Time spent in lowering, LLVM optimisation and code generation.
    pub compile_time: Duration,
}

impl HostKernel {
    /// The entry point.
    ///
    /// # Safety
    /// The caller must pass a context block laid out per [`HostKernel::layout`] whose
    /// pointers address buffers of at least `end` rounded up to a whole block of elements
    /// (arrays: at least one element), and keep them alive for the call.
    pub unsafe fn entry(&self) -> KernelFn {
        let _ = &self.code;
        self.entry
    }
}

/// A program compiled to PTX: the text, its entry name and its parameter layout.
///
/// The kernel's parameters are the context words of [`Layout`] as `u64` values (device
/// pointers for planes, storage bits for uniforms, extents), then `begin: i64` and
/// `end: i64`; each thread handles blocks of four elements `begin + 4·tid …`, stepping by
/// four times the grid's thread count, or single elements `begin + tid, begin + tid +
/// stride, …` below `end` (docs/abi.md, "The PTX kernel"), so any grid is correct.
#[derive(Clone, Debug)]
pub struct PtxKernel {
    /// PTX assembly.
    pub ptx: String,
    /// The `.entry` name.
    pub entry: String,
    /// Context words (kernel parameters).
    pub layout: Layout,
    /// Time spent in lowering, LLVM optimisation and PTX generation.
    pub compile_time: Duration,
    /// The effort it was compiled with (the CUDA device lowers the driver's PTX optimisation
    /// level to match below [`Effort::Full`]).
    pub effort: Effort,
}

/// What `weft emit` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmitTarget {
    /// Optimised LLVM IR for the host kernel.
    HostIr,
    /// Host assembly (x86-64 for this machine's CPU, or for `WEFT_LLVM_CPU`).
    HostAsm,
    /// Optimised LLVM IR for the NVPTX kernel.
    PtxIr,
    /// PTX assembly.
    Ptx,
}

fn init() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let c = InitializationConfig::default();
        Target::initialize_x86(&c);
        Target::initialize_nvptx(&c);
        target::install_fatal_error_handler();
        disable_slp_vectorizer();
    });
}

/// Turns LLVM's SLP vectorizer off for this process (its `-vectorize-slp=false` option).
///
/// LLVM 19's SLP minimum-bit-width analysis rewrites `uitofp (sext <N x i16> to i64)` as
/// `uitofp <N x i16>`, dropping the sign extension: −10 cast i16 → u64 → f32 gave 65526.0
/// instead of 1.8446744e19 (`weft fuzz --seed 62`, case 1070; `--seed 16`, case 9928;
/// LLVM issues #129057 and #135410; tests/filetests/fuzz/slp_uitofp_sext.weft).
/// `default<O3>` turns SLP on whatever `PassBuilderOptions` say (PassBuilder's
/// `setupOptionsForPipelineAlias`), so the pass's own switch is the one that holds. The host
/// lowering vectorises lanes itself, so SLP only ever widened scalar code: of the 36 programs
/// in examples/ir, workloads and tests/filetests/kernel, two changed (a uniform prologue and a
/// scalar remainder), none in a loop over lanes.
fn disable_slp_vectorizer() {
    let args = [c"weft".as_ptr(), c"-vectorize-slp=false".as_ptr()];
    // SAFETY: two NUL-terminated strings that outlive the call; the overview may be null.
    // Called once, under `init`'s OnceLock, before any pass runs.
    unsafe {
        llvm_sys::support::LLVMParseCommandLineOptions(
            args.len() as i32,
            args.as_ptr(),
            std::ptr::null(),
        );
    }
}

/// The host target machine for code generation at `effort` when its level is not the
/// aggressive one of [`host_machine`]: the same CPU (`cpu` as [`host_machine`] takes it),
/// with the code generator's level lowered; `None` when [`host_machine`]'s serves.
fn host_codegen(cpu: Option<&str>, effort: Effort) -> Result<Option<TargetMachine>, CompileError> {
    match effort.codegen() {
        OptimizationLevel::Aggressive => Ok(None),
        level => host_machine_at(cpu, level).map(|(tm, _)| Some(tm)),
    }
}

fn llvm_err(e: impl ToString) -> CompileError {
    CompileError::Llvm(e.to_string())
}

/// The host target machine and its CPU's name: `cpu` if given, else `WEFT_LLVM_CPU`, else
/// this CPU and its features (see [`target`]).
fn host_machine(cpu: Option<&str>) -> Result<(TargetMachine, String), CompileError> {
    host_machine_at(cpu, OptimizationLevel::Aggressive)
}

/// [`host_machine`] with the code generator at `level`.
fn host_machine_at(
    cpu: Option<&str>,
    level: OptimizationLevel,
) -> Result<(TargetMachine, String), CompileError> {
    init();
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(llvm_err)?;
    let (cpu, features) = target::resolve(cpu)?;
    let tm = target
        .create_target_machine(
            &triple,
            &cpu,
            &features,
            level,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| CompileError::Llvm(format!("no host target machine for {cpu}")))?;
    Ok((tm, cpu))
}

/// The NVPTX target machine for compute capability `sm` (e.g. 90 for sm_90).
fn ptx_machine(sm: u32) -> Result<TargetMachine, CompileError> {
    ptx_machine_at(sm, OptimizationLevel::Aggressive)
}

/// [`ptx_machine`] with the code generator at `level`.
fn ptx_machine_at(sm: u32, level: OptimizationLevel) -> Result<TargetMachine, CompileError> {
    init();
    let triple = TargetTriple::create("nvptx64-nvidia-cuda");
    let target = Target::from_triple(&triple).map_err(llvm_err)?;
    target
        .create_target_machine(
            &triple,
            &format!("sm_{sm}"),
            "",
            level,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| CompileError::Llvm(format!("no NVPTX target machine for sm_{sm}")))
}

/// The compiled function: its symbol, and the work-group size a kernel is compiled for.
struct Entry<'a> {
    sym: &'a str,
    block: [u32; 3],
}

/// Lowers, parses, verifies and optimises at the effort `opts` asks for; returns the module
/// (in `ctx`), its context layout and the effort used.
fn build<'c>(
    ctx: &'c Context,
    m: &Module,
    name: &str,
    flavor: Flavor,
    opts: Options,
    tm: &TargetMachine,
    entry: Entry<'_>,
) -> Result<(inkwell::module::Module<'c>, Layout, Effort), CompileError> {
    let Entry { sym, block } = entry;
    if m.get(name).is_none() {
        return Err(CompileError::UnknownProgram(name.to_string()));
    }
    let m = weft_ir::passes::for_lowering(m, name);
    let header = format!(
        "target datalayout = \"{}\"\ntarget triple = \"{}\"\n",
        tm.get_target_data()
            .get_data_layout()
            .as_str()
            .to_string_lossy(),
        tm.get_triple().as_str().to_string_lossy()
    );
    let lowered = lower::lower(
        &m,
        name,
        flavor,
        (opts.fast_math, opts.reduce),
        &header,
        sym,
        block,
    )?;
    if std::env::var_os("WEFT_DUMP_LLVM").is_some() {
        eprintln!("{}", lowered.text);
    }
    let buf = MemoryBuffer::create_from_memory_range_copy(lowered.text.as_bytes(), name);
    let module = ctx
        .create_module_from_ir(buf)
        .map_err(|e| CompileError::Llvm(format!("{e}\n{}", numbered(&lowered.text))))?;
    module
        .verify()
        .map_err(|e| CompileError::Llvm(format!("{e}")))?;
    let effort = opts.effort.resolve(&lowered.text);
    let pipeline = match effort {
        Effort::Auto | Effort::Full => Some("default<O3>"),
        Effort::Reduced => Some("default<O1>"),
        Effort::Minimal => None,
    };
    if let Some(pipeline) = pipeline {
        module
            .run_passes(pipeline, tm, PassBuilderOptions::create())
            .map_err(llvm_err)?;
    }
    if flavor == Flavor::Ptx {
        fix_sitofp_i1(ctx, &module).map_err(llvm_err)?;
    }
    Ok((module, lowered.layout, effort))
}

/// NVPTX in LLVM 19 lowers `sitofp i1 %c` as `selp 1, 0` then a signed conversion, giving
/// +1.0 where -1.0 is right (weft fuzz --seed 7, case 17735;
/// tests/filetests/fuzz/sitofp_bool.weft). InstCombine makes such casts out of selects of
/// -1 and 0, so after optimisation each scalar one becomes `select %c, -1.0, 0.0`.
fn fix_sitofp_i1(ctx: &Context, module: &inkwell::module::Module) -> Result<(), String> {
    use inkwell::types::AnyTypeEnum;
    use inkwell::values::{BasicValue, BasicValueEnum, InstructionOpcode, Operand};
    let builder = ctx.create_builder();
    for f in module.get_functions() {
        for bb in f.get_basic_blocks() {
            let mut next = bb.get_first_instruction();
            while let Some(i) = next {
                next = i.get_next_instruction();
                if i.get_opcode() != InstructionOpcode::SIToFP {
                    continue;
                }
                let (Some(Operand::Value(BasicValueEnum::IntValue(c))), AnyTypeEnum::FloatType(ft)) =
                    (i.get_operand(0), i.get_type())
                else {
                    continue;
                };
                if c.get_type().get_bit_width() != 1 {
                    continue;
                }
                builder.position_before(&i);
                let sel = builder
                    .build_select(c, ft.const_float(-1.0), ft.const_float(0.0), "sitofp.i1")
                    .map_err(|e| e.to_string())?;
                let Some(si) = sel.as_instruction_value() else {
                    // Folded to a constant: `c` was constant (LLVM would have folded it too).
                    continue;
                };
                i.replace_all_uses_with(&si);
                i.erase_from_basic_block();
            }
        }
    }
    Ok(())
}

fn numbered(text: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| format!("{:5} {l}\n", i + 1))
        .collect()
}

/// Compiles program `name` of the verified module `m` to host code and loads it with ORC.
/// The code is for this machine's CPU and features, or for the CPU `WEFT_LLVM_CPU` names
/// ([`CPU_ENV`]; code for a CPU with features this machine lacks dies of SIGILL when run).
/// A kernel is compiled for work-groups of [`EMIT_BLOCK`] work-items; see
/// [`compile_host_kernel`].
pub fn compile_host(m: &Module, name: &str, opts: Options) -> Result<HostKernel, CompileError> {
    compile_host_impl(m, name, opts, EMIT_BLOCK)
}

/// Compiles kernel `name` of the verified module `m` for work-groups of `block` work-items
/// (x, y, z) to host code, the MCUDA way (docs/kernel-mode.md): the entry's `(ctx, begin,
/// end)` runs work-groups `[begin, end)` (row-major numbers, x fastest), the grid's extents
/// in the context's launch words; the same ABI as `weft_backend_cranelift::compile_kernel`.
///
/// # Errors
/// As [`compile_host`]; also a group needing more than 1 MiB of stack for its shared
/// arrays and per-work-item values.
pub fn compile_host_kernel(
    m: &Module,
    name: &str,
    block: [u32; 3],
    opts: Options,
) -> Result<HostKernel, CompileError> {
    compile_host_impl(m, name, opts, block)
}

/// The work-group size a kernel is compiled for when none is given (`weft emit`).
pub const EMIT_BLOCK: [u32; 3] = [64, 1, 1];

fn compile_host_impl(
    m: &Module,
    name: &str,
    opts: Options,
    block: [u32; 3],
) -> Result<HostKernel, CompileError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t0 = Instant::now();
    let sym = format!("weft_kernel_{}", COUNTER.fetch_add(1, Ordering::Relaxed));
    let (obj, layout) = host_object(m, name, opts, None, Entry { sym: &sym, block })?;
    let mut k = load_host_object(obj.as_slice(), &sym, layout)?;
    k.compile_time = t0.elapsed();
    Ok(k)
}

/// The object file of program (or kernel, for work-groups of `block` work-items) `name` of
/// the verified module `m` for this machine's CPU (or `WEFT_LLVM_CPU`'s), with entry symbol
/// `sym`: what [`compile_host`] links, as bytes that [`load_host_object`] links later, in
/// this process or another (the runtime's on-disk kernel cache keeps them).
///
/// # Errors
/// As [`compile_host`].
pub fn host_object_bytes(
    m: &Module,
    name: &str,
    opts: Options,
    block: Option<[u32; 3]>,
    sym: &str,
) -> Result<Vec<u8>, CompileError> {
    let entry = Entry {
        sym,
        block: block.unwrap_or(EMIT_BLOCK),
    };
    let (obj, _) = host_object(m, name, opts, None, entry)?;
    Ok(obj.as_slice().to_vec())
}

/// Links a host object made by [`host_object_bytes`] with entry `sym` and context layout
/// `layout` (`Layout::new` of the program). An object whose entry symbol is linked already
/// in this process is shared, not linked twice.
///
/// # Errors
/// [`CompileError::Llvm`] when ORC rejects the object (a damaged or foreign file).
pub fn load_host_object(obj: &[u8], sym: &str, layout: Layout) -> Result<HostKernel, CompileError> {
    let t0 = Instant::now();
    let (code, addr) = jit::load(obj, sym).map_err(CompileError::Llvm)?;
    // SAFETY: the symbol is a kernel entry with this signature: objects come from
    // `host_object`, whose entry is `sym` (the runtime's cache checks a hash of every
    // entry and the key it was stored under before handing bytes here).
    let entry: KernelFn = unsafe { std::mem::transmute::<usize, KernelFn>(addr) };
    Ok(HostKernel {
        code,
        entry,
        layout,
        compile_time: t0.elapsed(),
    })
}

/// What host objects depend on besides the program and options: the target triple, CPU
/// and features ([`CPU_ENV`] included) and LLVM's version — part of the on-disk cache's key.
///
/// # Errors
/// An unknown CPU in [`CPU_ENV`].
pub fn host_target_id() -> Result<String, CompileError> {
    // Read once per process, as the host CPU (and `WEFT_LLVM_CPU`) does not change.
    static ID: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        init();
        let (cpu, features) = target::resolve(None).map_err(|e| e.to_string())?;
        Ok(format!(
            "{} {cpu} {features} llvm {}",
            TargetMachine::get_default_triple()
                .as_str()
                .to_string_lossy(),
            llvm_version()
        ))
    })
    .clone()
    .map_err(CompileError::Llvm)
}

/// LLVM's version (`19.1.7`), as linked.
pub fn llvm_version() -> String {
    let (mut a, mut b, mut c) = (0u32, 0u32, 0u32);
    // SAFETY: writes three integers.
    unsafe { llvm_sys::core::LLVMGetVersion(&mut a, &mut b, &mut c) };
    format!("{a}.{b}.{c}")
}

/// The `.entry` name of every PTX kernel [`compile_ptx`] makes.
pub const PTX_ENTRY: &str = "weft_kernel";

/// Compiles program `name` of `m` to PTX for compute capability `sm` (70 … 90).
pub fn compile_ptx(
    m: &Module,
    name: &str,
    sm: u32,
    opts: Options,
) -> Result<PtxKernel, CompileError> {
    let t0 = Instant::now();
    let tm = ptx_machine(sm)?;
    let _compiling = target::Compiling::enter(name, &format!("sm_{sm}"));
    let ctx = Context::create();
    let entry = PTX_ENTRY.to_string();
    let (module, layout, effort) = build(
        &ctx,
        m,
        name,
        Flavor::Ptx,
        opts,
        &tm,
        Entry {
            sym: &entry,
            block: EMIT_BLOCK,
        },
    )?;
    let reduced = match effort.codegen() {
        OptimizationLevel::Aggressive => None,
        level => Some(ptx_machine_at(sm, level)?),
    };
    let buf = reduced
        .as_ref()
        .unwrap_or(&tm)
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(llvm_err)?;
    let ptx = widen_16bit_min_max(&String::from_utf8_lossy(buf.as_slice()));
    if let Some(dir) = std::env::var_os("WEFT_DUMP_PTX") {
        // A developer's switch (docs/testing.md): a failed write only loses the dump.
        let _ = std::fs::write(std::path::Path::new(&dir).join(format!("{name}.ptx")), &ptx);
    }
    Ok(PtxKernel {
        ptx,
        entry,
        layout,
        compile_time: t0.elapsed(),
        effort,
    })
}

/// `text` with every 16-bit `min`/`max` (`min.u16 %d, %a, b;` and the `s16` forms) done in
/// 32 bits: widened, compared, narrowed. ptxas for sm_90 (CUDA 12–13) fuses a 16-bit `max`
/// that feeds a compare into `VIMNMX.U16x2` with both halves' predicates written to one
/// register, so the compare reads the high half's: `1 / x` of a `u8` (LLVM's `max(x, 1)
/// == 1`) gave 1 for x = 222 (`weft fuzz --seed 101`, case 1977). The same values either way.
pub fn widen_16bit_min_max(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match widened(line) {
            Some(w) => out.push_str(&w),
            None => out.push_str(line),
        }
    }
    out
}

/// [`widen_16bit_min_max`] of one line: `None` when it is not a 16-bit `min`/`max`.
fn widened(line: &str) -> Option<String> {
    let body = line.trim_start();
    let (op, rest) = body.split_once(char::is_whitespace)?;
    let (name, ty) = op.split_once('.')?;
    if !matches!(name, "min" | "max") || !matches!(ty, "u16" | "s16") {
        return None;
    }
    let args = rest.trim().strip_suffix(';')?;
    let parts: Vec<&str> = args.split(',').map(str::trim).collect();
    let [d, a, b] = parts[..] else {
        return None;
    };
    let wide = if ty == "u16" { "u32" } else { "s32" };
    let load = |r: &str, x: &str| {
        if x.starts_with('%') {
            format!("cvt.{wide}.{ty} {r}, {x};")
        } else {
            format!("mov.b32 {r}, {x};")
        }
    };
    Some(format!(
        "\t{{ .reg .b32 %wmm<2>; {} {} {name}.{wide} %wmm0, %wmm0, %wmm1; cvt.u16.u32 {d}, %wmm0; }}\n",
        load("%wmm0", a),
        load("%wmm1", b)
    ))
}

/// The text of one compilation stage for `weft emit` (`sm` for the PTX targets); a kernel
/// on the host is compiled for work-groups of [`EMIT_BLOCK`] work-items.
pub fn emit(
    m: &Module,
    name: &str,
    target: EmitTarget,
    sm: u32,
    opts: Options,
) -> Result<String, CompileError> {
    let (tm, flavor, cpu) = match target {
        EmitTarget::HostIr | EmitTarget::HostAsm => {
            let (tm, cpu) = host_machine(None)?;
            (tm, Flavor::Host, cpu)
        }
        EmitTarget::PtxIr | EmitTarget::Ptx => (ptx_machine(sm)?, Flavor::Ptx, format!("sm_{sm}")),
    };
    let _compiling = target::Compiling::enter(name, &cpu);
    let ctx = Context::create();
    let (module, _, effort) = build(
        &ctx,
        m,
        name,
        flavor,
        opts,
        &tm,
        Entry {
            sym: "weft_kernel",
            block: EMIT_BLOCK,
        },
    )?;
    let codegen = match flavor {
        Flavor::Host => host_codegen(None, effort)?,
        Flavor::Ptx => None,
    };
    match target {
        EmitTarget::HostIr | EmitTarget::PtxIr => Ok(module.print_to_string().to_string()),
        _ => {
            let buf = codegen
                .as_ref()
                .unwrap_or(&tm)
                .write_to_memory_buffer(&module, FileType::Assembly)
                .map_err(llvm_err)?;
            let text = String::from_utf8_lossy(buf.as_slice());
            Ok(match target {
                // What the driver is given (`compile_ptx`).
                EmitTarget::Ptx => widen_16bit_min_max(&text),
                _ => text.into_owned(),
            })
        }
    }
}

/// Compiles program `name` of the verified module `m` to a host object file (ELF on Linux)
/// for the x86-64 CPU `cpu` (an LLVM name such as `sapphirerapids`, `znver4`, `x86-64-v2`, with
/// LLVM's default features for it; `native`: this machine), without loading it: the same
/// lowering, optimisation and code generation as [`compile_host`], so a CPU this machine is
/// not can be checked for compile failures. A kernel is compiled for work-groups of
/// [`EMIT_BLOCK`] work-items. `WEFT_LLVM_CPU` is not consulted.
///
/// # Errors
/// [`CompileError::UnknownCpu`] when LLVM does not know `cpu`; otherwise as
/// [`compile_host`].
pub fn compile_object_for_cpu(
    m: &Module,
    name: &str,
    cpu: &str,
    opts: Options,
) -> Result<Vec<u8>, CompileError> {
    let entry = Entry {
        sym: "weft_kernel",
        block: EMIT_BLOCK,
    };
    let (obj, _) = host_object(m, name, opts, Some(cpu), entry)?;
    Ok(obj.as_slice().to_vec())
}

/// Lowers, optimises and generates the host object file of program `name` of `m` for the CPU
/// `cpu` (as [`host_machine`] takes it), at the effort `opts` asks for; returns the object
/// and the context layout.
fn host_object(
    m: &Module,
    name: &str,
    opts: Options,
    cpu: Option<&str>,
    entry: Entry<'_>,
) -> Result<(MemoryBuffer<'static>, Layout), CompileError> {
    let (tm, resolved) = host_machine(cpu)?;
    let _compiling = target::Compiling::enter(name, &resolved);
    let ctx = Context::create();
    let (module, layout, effort) = build(&ctx, m, name, Flavor::Host, opts, &tm, entry)?;
    let obj = host_codegen(cpu, effort)?
        .as_ref()
        .unwrap_or(&tm)
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(llvm_err)?;
    Ok((obj, layout))
}
