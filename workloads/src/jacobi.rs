//! Jacobi (Lee et al., "OpenMP to GPGPU", PPoPP 2009, JACOBI): Laplace's equation on an
//! `n × n` grid of f32 with the top edge held at 1 and the others at 0, swept with the
//! 4-point stencil until the largest change of a sweep is below a tolerance
//! (docs/workloads.md). The change is only needed on every 10th sweep: the other sweeps run
//! the program specialised to its first output (`keep`, dead-code elimination), and the
//! checking sweep reduces it as it goes (`apply_reduce`: on the CPU the change is never
//! stored whole).
//!
//! `cargo run --release -p weft-workloads --example jacobi [DEVICE] [N] [TOL] [MAX_SWEEPS]`

use weft::dsl::{index, select, shape, In, InArray, Out, Program, Uniform, Value1f};
use weft::ir::Boundary;
use weft::{Array, Device, Reduction, Result, Sequence};

/// Sweeps between two convergence checks.
pub const CHECK: usize = 10;

/// The sweep as a program: `u` (read as a clamped array) → (`u_next`, `delta` = |change|).
pub fn sweep() -> Result<Program> {
    Program::record_named("jacobi", || {
        let u = InArray::<2, Value1f>::named("u", Boundary::Clamp);
        let ij = index::<2>();
        let last = shape::<2>() - 1i32;
        let edge = ij.eq(0i32) | ij.eq(&last);
        let edge = edge.x() | edge.y();
        let c = u.read(&ij);
        let up = u.read(&ij - weft::dsl::Value2i::from_array([1, 0]));
        let down = u.read(&ij + weft::dsl::Value2i::from_array([1, 0]));
        let left = u.read(&ij - weft::dsl::Value2i::from_array([0, 1]));
        let right = u.read(&ij + weft::dsl::Value2i::from_array([0, 1]));
        let avg = ((up + down) + (left + right)) * 0.25f32;
        let next = select(edge, &c, avg);
        let delta = (&next - &c).abs();
        Out::named("u_next", next);
        Out::named("delta", delta);
    })
}

/// The initial grid: 1 on the top row, 0 elsewhere (row-major).
pub fn initial(n: usize) -> Vec<f32> {
    (0..n * n).map(|k| if k < n { 1.0 } else { 0.0 }).collect()
}

/// Sweeps until a check finds the largest change below `tol` or `max_sweeps` have run:
/// (grid, sweeps run, last checked change). Each check period is recorded and replayed
/// ([`jacobi_recorded`]: the sweeps and bits of [`jacobi_arrays`]).
pub fn jacobi(
    dev: &Device,
    n: usize,
    tol: f32,
    max_sweeps: usize,
) -> Result<(Vec<f32>, usize, f32)> {
    let u0: Array<2, f32> = Array::from_vec([n, n], initial(n))?;
    let (u, sweeps, delta) = jacobi_recorded(dev, &u0, tol, max_sweeps)?;
    Ok((u.to_vec()?, sweeps, delta))
}

/// [`jacobi`] on arrays: the initial grid `u0` (`n × n`) is read where it is (resident on a
/// GPU after its first use) and the result stays on the device, as in the hand CUDA
/// baseline (docs/workloads.md).
pub fn jacobi_arrays(
    dev: &Device,
    u0: &Array<2, f32>,
    tol: f32,
    max_sweeps: usize,
) -> Result<(Array<2, f32>, usize, f32)> {
    let full = sweep()?;
    let fast = full.keep(&["u_next"])?;
    let shape = u0.shape();
    let mut u = u0.clone();
    let (mut sweeps, mut delta) = (0, f32::INFINITY);
    dev.scope(|| -> Result<()> {
        while sweeps < max_sweeps {
            sweeps += 1;
            if sweeps % CHECK == 0 {
                let (next, d): (Array<2, f32>, Array<1, f32>) =
                    full.apply_reduce_shape(&shape, "delta", Reduction::Max, &u)?;
                u = next;
                delta = d.get(0)?.unwrap_or(f32::INFINITY);
                if delta < tol {
                    break;
                }
            } else {
                u = fast.apply_shape(&shape, &u)?;
            }
        }
        Ok(())
    })?;
    Ok((u, sweeps, delta))
}

/// [`jacobi_arrays`] with one check period — [`CHECK`] − 1 sweeps of the specialised
/// program, one full sweep and its largest change left on the device (`apply_reduce`) —
/// recorded as a [`Sequence`] (issue 23) and replayed until the change is below `tol`: the
/// same sweeps and bits, with one host read per period. Sweeps past the last whole period
/// run one by one.
///
/// # Errors
/// A device failure.
pub fn jacobi_recorded(
    dev: &Device,
    u0: &Array<2, f32>,
    tol: f32,
    max_sweeps: usize,
) -> Result<(Array<2, f32>, usize, f32)> {
    let full = sweep()?;
    let fast = full.keep(&["u_next"])?;
    let shape = u0.shape();
    let periods = max_sweeps / CHECK;
    dev.scope(|| -> Result<(Array<2, f32>, usize, f32)> {
        let mut u = u0.clone();
        let mut sweeps = 0;
        let mut delta = f32::INFINITY;
        if periods > 0 {
            let period = |u: Array<2, f32>| -> Result<(Array<2, f32>, Array<1, f32>)> {
                let mut u = u;
                for _ in 1..CHECK {
                    u = fast.apply_shape(&shape, &u)?;
                }
                full.apply_reduce_shape(&shape, "delta", Reduction::Max, &u)
            };
            // The first period runs while it is recorded; its state is (grid, change).
            let inf = Array::from_vec([1], vec![f32::INFINITY])?;
            let (seq, first) = Sequence::record(&(u.clone(), inf), |(u, _)| period(u))?;
            sweeps = CHECK;
            delta = first.1.get(0)?.unwrap_or(f32::INFINITY);
            let mut state = first;
            if delta >= tol && periods > 1 {
                let (s, k) = if dev.runs_device_loops() {
                    // The test on the device: the loop is one CUDA graph.
                    let limit = Uniform::named("tol", tol);
                    let stop = Program::record_named("jacobi_stop", move || {
                        let d = In::<Value1f>::named("delta");
                        Out::named("stop", d.lt(limit.value()));
                    })?;
                    seq.until_program(&state, &stop, 1, periods - 1)?
                } else {
                    seq.until(&state, 1, periods - 1, |s| {
                        Ok(s.1.get(0)?.unwrap_or(f32::INFINITY) < tol)
                    })?
                };
                state = s;
                sweeps += k * CHECK;
                delta = state.1.get(0)?.unwrap_or(f32::INFINITY);
            }
            u = state.0;
            if delta < tol {
                return Ok((u, sweeps, delta));
            }
        }
        while sweeps < max_sweeps {
            sweeps += 1;
            u = fast.apply_shape(&shape, &u)?;
        }
        Ok((u, sweeps, delta))
    })
}

/// The f64 reference: `sweeps` sweeps of the same stencil.
pub fn reference(n: usize, sweeps: usize) -> Vec<f64> {
    let mut u: Vec<f64> = initial(n).iter().map(|&x| x as f64).collect();
    let mut v = u.clone();
    for _ in 0..sweeps {
        for i in 1..n - 1 {
            for j in 1..n - 1 {
                v[i * n + j] = 0.25
                    * ((u[(i - 1) * n + j] + u[(i + 1) * n + j])
                        + (u[i * n + j - 1] + u[i * n + j + 1]));
            }
        }
        std::mem::swap(&mut u, &mut v);
    }
    u
}

/// Largest |a − b| over the grid.
pub fn max_error(a: &[f32], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .fold(0.0, |m, (&x, &y)| f64::max(m, (x as f64 - y).abs()))
}

/// The example's command line (see the module docs).
pub fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let name = crate::device_arg();
    let n = arg(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let tol = arg(3).and_then(|s| s.parse().ok()).unwrap_or(1e-4);
    let max_sweeps = arg(4).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let t = std::time::Instant::now();
        let (u, sweeps, delta) = jacobi(&dev, n, tol, max_sweeps)?;
        let dt = t.elapsed().as_secs_f64();
        let err = max_error(&u, &reference(n, sweeps));
        println!(
            "jacobi on {dev}: {n}×{n} grid, {sweeps} sweeps in {:.1} ms (last change {delta:e}, tolerance {tol:e}); max |u − u_f64| = {err:.2e} (tolerance 1e-4) {}",
            dt * 1e3,
            if err <= 1e-4 { "ok" } else { "FAILED" }
        );
        if err > 1e-4 {
            std::process::exit(1);
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
