//! A recorded launch sequence (issue 23; `weft::Sequence`): explicit heat diffusion on an
//! `n × n` plate whose left edge is held at 1, advanced 8 steps per replay until the largest
//! change of a step is below a tolerance. One replay is 8 applies of the 5-point step and a
//! `maximum_array` of the last step's change, recorded once and replayed with no planning
//! or host round trip; the stop test is a program on that change
//! (`Sequence::until_program`), run after every replay — on a GPU with CUDA 12.4+ inside
//! one CUDA graph, so the host waits once.
//!
//! `cargo run --release -p weft-workloads --example heat_sequence [DEVICE] [N] [TOL]`

use weft::dsl::{index, select, shape, In, InArray, Out, Program, Uniform, Value1f, Value2i};
use weft::ir::Boundary;
use weft::{maximum_array, Array, Device, Result, Sequence};

/// Steps per replay.
pub const STEPS: usize = 8;

/// One explicit step, `u + 0.2·(Δu)`, with the left edge held at 1 and the others at 0, and
/// the change `|u' − u|`.
pub fn step() -> Result<Program> {
    Program::record_named("heat_step", || {
        let u = InArray::<2, Value1f>::named("u", Boundary::Clamp);
        let ij = index::<2>();
        let last = shape::<2>() - 1i32;
        let c = u.read(&ij);
        let n = u.read(&ij - Value2i::from_array([1, 0]));
        let s = u.read(&ij + Value2i::from_array([1, 0]));
        let w = u.read(&ij - Value2i::from_array([0, 1]));
        let e = u.read(&ij + Value2i::from_array([0, 1]));
        let lap = (n + s) + (w + e) - &c * 4.0f32;
        let edge = ij.eq(0i32) | ij.eq(&last);
        let left = ij.y().eq(0i32);
        let held = select(left, Value1f::splat(1.0), Value1f::splat(0.0));
        let next = select(edge.x() | edge.y(), held, &c + lap * 0.2f32);
        Out::named("u", next.clone());
        Out::named("change", (next - c).abs());
    })
}

/// The plate after steps of 8 until the largest change of a replay's last step is below
/// `tol` (or `max_replays` replays): (plate, steps run, last change).
///
/// # Errors
/// A device failure.
pub fn heat(
    dev: &Device,
    n: usize,
    tol: f32,
    max_replays: usize,
) -> Result<(Vec<f32>, usize, f32)> {
    let full = step()?;
    let fast = full.keep(&["u"])?;
    dev.scope(|| {
        let u0: Array<2, f32> = Array::from_vec([n, n], vec![0.0; n * n])?;
        let change0: Array<1, f32> = Array::from_vec([1], vec![f32::INFINITY])?;
        // The closure runs once, for real, while its launches are recorded.
        let (seq, first) = Sequence::record(&(u0, change0), |(u, _)| {
            let mut u = u;
            for _ in 1..STEPS {
                u = fast.apply_shape(&[n, n], &u)?;
            }
            let (u, change): (Array<2, f32>, Array<2, f32>) = full.apply_shape(&[n, n], &u)?;
            Ok((u, maximum_array(&change)?))
        })?;
        let done = |s: &(Array<2, f32>, Array<1, f32>)| -> Result<bool> {
            Ok(s.1.get(0)?.unwrap_or(0.0) < tol)
        };
        // The stop test as a program on the replay's change (output 1): on a GPU with CUDA
        // 12.4+ the whole loop then runs on the device, as one graph.
        let limit = Uniform::named("tol", tol);
        let stop = Program::record_named("stop", move || {
            let c = In::<Value1f>::named("change");
            Out::named("stop", c.lt(limit.value()));
        })?;
        let (state, replays) = if done(&first)? || max_replays <= 1 {
            (first, 0)
        } else {
            seq.until_program(&first, &stop, 1, max_replays - 1)?
        };
        let change = state.1.get(0)?.unwrap_or(0.0);
        Ok((state.0.to_vec()?, (replays + 1) * STEPS, change))
    })
}

/// The example's command line (see the module docs).
pub fn main() {
    let dev = crate::example_device();
    let arg = |i: usize| std::env::args().nth(i);
    let n: usize = arg(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let tol: f32 = arg(3).and_then(|s| s.parse().ok()).unwrap_or(1e-4);
    match heat(&dev, n, tol, 100_000) {
        Ok((u, steps, change)) => println!(
            "heat_sequence on {dev}: {n}² plate, {steps} steps ({} replays of a recorded \
             sequence of {STEPS} steps), last change {change:.2e}, centre {:.4}",
            steps / STEPS - 1,
            u[n / 2 * n + n / 2]
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
