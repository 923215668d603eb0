//! The kernel ABI shared by the compiled CPU backends (docs/abi.md): the context block a compiled
//! kernel reads its parameter, output and launch data from, and how element data is laid out.

use crate::{Imm, Module, Opcode, Program, ScalarType, Type};

/// Elements processed per SIMD block: two 128-bit vectors of 32-bit lanes, or four of 64-bit
/// lanes. Two vectors per value give the core independent work to overlap (e.g. two
/// `sqrt`/`div` chains) and halve the per-block cost of uniform work.
pub const BLOCK: usize = 8;

/// Varying and output planes are padded to a multiple of this many elements, and a launch
/// is split into ranges that begin at multiples of it: a multiple of every CPU backend's
/// block (Cranelift's [`BLOCK`], LLVM's 16-lane blocks), so any of them may read and write
/// whole blocks.
pub const PAD: usize = 16;

/// Bytes one lane of `s` occupies in a kernel buffer: 32-bit-class types (bool, 8/16/32-bit
/// integers, f16, f32) are stored in 4 bytes, 64-bit types in 8.
///
/// Storage: bool is 0/1; narrow integers are sign- or zero-extended to 32 bits by their type's
/// signedness; f16 is stored as the f32 of the same value.
pub fn storage_bytes(s: ScalarType) -> usize {
    if s.bits() == 64 {
        8
    } else {
        4
    }
}

/// Where each parameter, output and the launch shape live in the context block, in 64-bit
/// words from its start.
///
/// Per parameter, in order: varying — one plane pointer per tuple lane (structure of arrays:
/// lane `l` of element `e` is at `plane[l] + e * storage_bytes`); uniform — one word per tuple
/// lane holding the lane's storage bits (low bytes first); array and buffer — one plane
/// pointer per tuple lane, then one word per axis with its extent. Per output: one plane
/// pointer per tuple lane. Then the launch: its rank, then 3 extents (outermost first); for a
/// kernel, rank 3 and the work-groups on the x, y and z axes. Last, the abort word: the
/// address of the launch's 32-bit abort flag, which host code loads at every loop back-edge
/// and returns as soon as it is nonzero (the launch watchdog, docs/abi.md); PTX ignores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Word offset of each parameter's first word.
    pub params: Vec<usize>,
    /// Word offset of each output's first word.
    pub outputs: Vec<usize>,
    /// Word offset of the launch rank (extents follow).
    pub launch: usize,
    /// Word offset of the abort word: the address of a 4-byte-aligned `u32` that compiled
    /// host code loads (relaxed) at every loop back-edge; nonzero makes it return at once.
    pub abort: usize,
    /// Total words.
    pub words: usize,
}

/// Tuple lanes of a scalar/tuple/array element type (1 for a scalar).
pub fn lanes(t: Type) -> usize {
    match t.array_parts() {
        Some((_, e, _)) => lanes(e),
        None => t.lanes().map_or(1, |(_, n)| n as usize),
    }
}

impl Layout {
    /// The layout for program `p`.
    pub fn new(p: &Program) -> Layout {
        let mut w = 0;
        let mut params = Vec::new();
        for par in &p.params {
            params.push(w);
            let t = p.ty(par.value);
            w += lanes(t);
            if par.kind.is_array() {
                w += t.array_parts().map_or(0, |(d, _, _)| d as usize);
            }
        }
        let mut outputs = Vec::new();
        for o in &p.outputs {
            outputs.push(w);
            w += lanes(o.ty);
        }
        let launch = w;
        Layout {
            params,
            outputs,
            launch,
            abort: launch + 4,
            words: launch + 5,
        }
    }
}

/// True if program `p` of `m`, or a program it calls (transitively), has a loop (`for`,
/// `while`, `do`): only then does its compiled host code check the abort word at loop
/// back-edges (docs/abi.md, "The launch watchdog"); code without loops always ends. Each
/// program is walked once.
pub fn has_loop(m: &Module, p: &Program) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![p];
    let mut found = false;
    while let Some(q) = todo.pop() {
        if found || !seen.insert(q.name.as_str()) {
            continue;
        }
        q.walk(&mut |op| {
            let d = q.op(op);
            found |= matches!(d.opcode, Opcode::For | Opcode::While | Opcode::DoUntil);
            if let Imm::Callee(n) = &d.imm {
                todo.extend(m.get(n));
            }
        });
    }
    found
}
