//! Programs at the size limits of the compilers (issue 19), as `.weft` text, for the limits
//! tests and `weft-bench limits`: call DAGs with exponentially many call paths, long
//! straight-line chains, and thousands of sequential loops.

use std::fmt::Write;

/// `@p0` … `@p{n}`: each `@p{i}` calls `@p{i+1}` twice with the same argument and adds the
/// results; `@p{n}` multiplies by 1.5. So `@p0(x) = x * 1.5 * 2^n`, through 2^n call paths
/// (exponential time for a compiler that inlines by copying).
pub fn doubling_dag(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let _ = writeln!(
            s,
            "program @p{i}(%x: f32) -> (f32) {{\n  %a: f32 = call @p{j}(%x)\n  %b: f32 = call @p{j}(%x)\n  %r: f32 = add %a, %b\n  return %r\n}}",
            j = i + 1
        );
    }
    let _ = writeln!(
        s,
        "program @p{n}(%x: f32) -> (f32) {{\n  %c: f32 = const 1.5\n  %r: f32 = mul %x, %c\n  return %r\n}}"
    );
    s
}

/// `@p(%x: f32, %y: f32) -> (f32)`: a chain of `n` dependent f32 ops (add, multiply by a
/// constant, subtract, in turn, on `%x` and `%y`): one basic block of `n` SIMD instructions
/// (LLVM's machine scheduler is quadratic on it). `n` ≥ 1.
pub fn straight_line(n: usize) -> String {
    let mut s = String::from("program @p(%x: f32, %y: f32) -> (f32) {\n  %v0: f32 = add %x, %y\n");
    for i in 1..n {
        let other = if i % 2 == 1 { "%x" } else { "%y" };
        let p = i - 1;
        let _ = match i % 3 {
            0 => writeln!(s, "  %v{i}: f32 = add %v{p}, {other}"),
            1 => writeln!(
                s,
                "  %c{i}: f32 = const 0.999\n  %v{i}: f32 = mul %v{p}, %c{i}"
            ),
            _ => writeln!(s, "  %v{i}: f32 = sub %v{p}, {other}"),
        };
    }
    let _ = writeln!(s, "  return %v{}\n}}", n.max(1) - 1);
    s
}

/// `@p(%x: f32) -> (f32)`: `n - 1` sequential `for` loops of 3 iterations, each adding `%x`
/// to what the previous one gave, so `@p(x) = 2x + 3(n-1)x`: a dominator tree thousands of
/// blocks deep (LLVM's loop passes and `mem2reg` are quadratic on it). `n` ≥ 1.
pub fn sequential_loops(n: usize) -> String {
    let mut s = String::from(
        "program @p(%x: f32) -> (f32) {\n  %v0: f32 = add %x, %x\n  %lo: i32 = const 0\n  %hi: i32 = const 3\n  %st: i32 = const 1\n",
    );
    for i in 1..n {
        let _ = writeln!(
            s,
            "  %v{i}: f32 = for %i{i}: i32 = %lo to %hi step %st iter(%a{i}: f32 = %v{p}) {{\n    %b{i}: f32 = add %a{i}, %x\n    yield %b{i}\n  }}",
            p = i - 1
        );
    }
    let _ = writeln!(s, "  return %v{}\n}}", n.max(1) - 1);
    s
}
