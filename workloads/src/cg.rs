//! SpMV in CSR and a conjugate-gradient solve (Lee et al., "OpenMP to GPGPU", SPMUL and CG)
//! in f64 on a real symmetric positive definite matrix, `lund_a.mtx` (Matrix Market, fetched
//! by `scripts/fetch_data.sh`), or the 5-point Poisson matrix of an m × m grid
//! (docs/workloads.md). One CG iteration is three launches and two reductions: SpMV fused
//! with the p·q products, the x/r update with the r·r products, the new direction.
//!
//! `cargo run --release -p weft-workloads --example cg [DEVICE] [lund_a | poisson:M] [TOL] [MAXIT]`

use crate::data::Csr;
use weft::dsl::{for_, index, In, InArray, Out, Param, Program, Uniform, Value1d, Value1i};
use weft::ir::Boundary;
use weft::{sum, sum_array, Array, Device, Result, Sequence};

/// A matrix on a device: the CSR arrays.
pub struct DeviceCsr {
    n: usize,
    rowptr: Array<1, i32>,
    col: Array<1, i32>,
    val: Array<1, f64>,
}

impl DeviceCsr {
    /// Copies `a`'s arrays into weft arrays.
    pub fn new(a: &Csr) -> Result<DeviceCsr> {
        Ok(DeviceCsr {
            n: a.rows,
            rowptr: Array::from_slice([a.rowptr.len()], &a.rowptr)?,
            col: Array::from_slice([a.col.len()], &a.col)?,
            val: Array::from_slice([a.val.len()], &a.val)?,
        })
    }

    /// Row starts (`rows + 1`).
    pub fn rowptr(&self) -> &Array<1, i32> {
        &self.rowptr
    }

    /// Column of each stored entry.
    pub fn col(&self) -> &Array<1, i32> {
        &self.col
    }

    /// Value of each stored entry.
    pub fn val(&self) -> &Array<1, f64> {
        &self.val
    }
}

/// Records row `i` of A times `x` (the stored entries in order).
fn row_times(
    rowptr: &InArray<1, Value1i>,
    col: &InArray<1, Value1i>,
    val: &InArray<1, Value1d>,
    x: &InArray<1, Value1d>,
    i: &Value1i,
) -> Value1d {
    let acc = Value1d::new(0.0);
    for_(rowptr.read(i), rowptr.read(i + 1i32), |k| {
        acc.assign(&acc + val.read(&k) * x.read(col.read(&k)));
    });
    acc
}

fn csr_inputs() -> (
    InArray<1, Value1i>,
    InArray<1, Value1i>,
    InArray<1, Value1d>,
) {
    (
        InArray::named("rowptr", Boundary::Clamp),
        InArray::named("col", Boundary::Clamp),
        InArray::named("val", Boundary::Clamp),
    )
}

/// SpMV: `y = A x`, one row per element.
pub fn spmv_program() -> Result<Program> {
    Program::record_named("spmv", || {
        let (rowptr, col, val) = csr_inputs();
        let x = InArray::<1, Value1d>::named("x", Boundary::Clamp);
        Out::named("y", row_times(&rowptr, &col, &val, &x, &index::<1>()));
    })
}

/// `A x` on `dev`.
pub fn spmv(dev: &Device, a: &DeviceCsr, x: &[f64]) -> Result<Vec<f64>> {
    let p = spmv_program()?;
    let x = Array::from_slice([x.len()], x)?;
    let y: Array<1, f64> = p.apply_shape_on(dev, &[a.n], (&a.rowptr, &a.col, &a.val, &x))?;
    y.to_vec()
}

/// SpMV fused with the products of CG's dot product: `q = A p`, `pq = p ⊙ q`.
fn spmv_dot_program() -> Result<Program> {
    Program::record_named("spmv_dot", || {
        let (rowptr, col, val) = csr_inputs();
        let p = InArray::<1, Value1d>::named("p", Boundary::Clamp);
        let i = index::<1>();
        let q = row_times(&rowptr, &col, &val, &p, &i);
        let pq = p.read(&i) * &q;
        Out::named("q", q);
        Out::named("pq", pq);
    })
}

/// CG's x/r update with the r·r products: inputs x, r, p, q, then whatever `alpha` records
/// (a uniform, or one-element arrays it reads α from).
fn update_program(name: &str, alpha: impl Fn() -> Value1d) -> Result<Program> {
    Program::record_named(name, || {
        let x = In::<Value1d>::named("x");
        let r = In::<Value1d>::named("r");
        let p = In::<Value1d>::named("p");
        let q = In::<Value1d>::named("q");
        let alpha = alpha();
        let r2 = &r - &alpha * q;
        Out::named("x", x + &alpha * p);
        Out::named("rr", &r2 * &r2);
        Out::named("r", r2);
    })
}

/// CG's new direction `r + β p`: inputs r, p, then whatever `beta` records.
fn direction_program(name: &str, beta: impl Fn() -> Value1d) -> Result<Program> {
    Program::record_named(name, || {
        let r = In::<Value1d>::named("r");
        let p = In::<Value1d>::named("p");
        let beta = beta();
        Out::named("p", r + beta * p);
    })
}

/// CG's convergence test on the device: `√rr / bnorm < tol` in f64, the host's expression
/// (square root and division correctly rounded, so the same answer).
fn stop_program(bnorm: f64, tol: f64) -> Result<Program> {
    let (bnorm, tol) = (Uniform::named("bnorm", bnorm), Uniform::named("tol", tol));
    Program::record_named("cg_stop", move || {
        let rr = In::<Value1d>::named("rr");
        Out::named("stop", (rr.sqrt() / bnorm.value()).lt(tol.value()));
    })
}

/// `bb = b ⊙ b` (for ‖b‖).
fn square_program() -> Result<Program> {
    Program::record_named("square", || {
        let b = In::<Value1d>::named("b");
        Out::named("bb", &b * &b);
    })
}

/// `x = 0` (x₀, made where the solve runs).
fn zeros_program() -> Result<Program> {
    Program::record_named("zeros", || {
        Out::named("x", Value1d::splat(0.0));
    })
}

/// The result of a CG solve.
pub struct Solve {
    /// The solution.
    pub x: Vec<f64>,
    /// Iterations run.
    pub iterations: usize,
    /// ‖r‖/‖b‖ of the recurrence at exit.
    pub residual: f64,
}

/// Solves `A x = b` from `x = 0` until ‖r‖/‖b‖ < `tol` or `maxit` iterations, one
/// iteration recorded and replayed ([`cg_recorded`], checking every iteration: the
/// iterations and bits of [`cg_arrays`]).
pub fn cg(dev: &Device, a: &DeviceCsr, b: &[f64], tol: f64, maxit: usize) -> Result<Solve> {
    let b = Array::from_slice([b.len()], b)?;
    let s = cg_recorded(dev, a, &b, tol, maxit, 1)?;
    Ok(Solve {
        x: s.x.to_vec()?,
        iterations: s.iterations,
        residual: s.residual,
    })
}

/// The result of [`cg_arrays`]: the solution where the device left it.
pub struct SolveArrays {
    /// The solution (`n` elements, resident on the device).
    pub x: Array<1, f64>,
    /// Iterations run.
    pub iterations: usize,
    /// ‖r‖/‖b‖ of the recurrence at exit.
    pub residual: f64,
}

/// [`cg`] on arrays: `b` is read where it is (resident on a GPU after its first use) and the
/// solution stays on the device, as in the hand CUDA baseline (docs/workloads.md). ‖b‖ is
/// computed on the device too.
pub fn cg_arrays(
    dev: &Device,
    a: &DeviceCsr,
    b: &Array<1, f64>,
    tol: f64,
    maxit: usize,
) -> Result<SolveArrays> {
    let spmv_dot = spmv_dot_program()?;
    let update = update_program("update", || Param::uniform::<Value1d>("alpha"))?;
    let direction = direction_program("direction", || Param::uniform::<Value1d>("beta"))?;
    let (square, zeros) = (square_program()?, zeros_program()?);
    let n = a.n;
    dev.scope(|| {
        let bb: Array<1, f64> = square.apply(b)?;
        let mut rr = sum(&bb)?;
        let bnorm = rr.sqrt();
        // x₀ = 0, made where the solve runs (no upload).
        let mut x: Array<1, f64> = zeros.apply_shape(&[n], ())?;
        let mut r = b.clone();
        let mut p = r.clone();
        let mut it = 0;
        let mut res = rr.sqrt() / bnorm;
        // `WEFT_CG_PROFILE=1`: host time of each step, summed over the iterations, on stderr.
        let mut prof = std::env::var_os("WEFT_CG_PROFILE").map(|_| [0f64; 5]);
        let mut t = std::time::Instant::now();
        let mut lap = |k: usize, prof: &mut Option<[f64; 5]>| {
            if let Some(p) = prof {
                p[k] += t.elapsed().as_secs_f64();
                t = std::time::Instant::now();
            }
        };
        while it < maxit && res >= tol {
            it += 1;
            let (q, pq): (Array<1, f64>, Array<1, f64>) =
                spmv_dot.apply_shape(&[n], (&a.rowptr, &a.col, &a.val, &p))?;
            lap(0, &mut prof);
            let alpha = rr / sum(&pq)?;
            lap(1, &mut prof);
            let (x2, rr_e, r2): (Array<1, f64>, Array<1, f64>, Array<1, f64>) =
                update.apply((&x, &r, &p, &q, alpha))?;
            lap(2, &mut prof);
            let rr2 = sum(&rr_e)?;
            lap(3, &mut prof);
            (x, r) = (x2, r2);
            res = rr2.sqrt() / bnorm;
            if res < tol {
                break;
            }
            p = direction.apply((&r, &p, rr2 / rr))?;
            lap(4, &mut prof);
            rr = rr2;
        }
        if let Some(p) = prof {
            let per = |k: usize| p[k] / it.max(1) as f64 * 1e6;
            eprintln!(
                "cg: {it} iterations, µs per iteration: spmv {:.1}, sum {:.1}, update {:.1}, \
                 sum {:.1}, direction {:.1}",
                per(0),
                per(1),
                per(2),
                per(3),
                per(4)
            );
        }
        Ok(SolveArrays {
            x,
            iterations: it,
            residual: res,
        })
    })
}

/// [`cg_arrays`] with one iteration recorded as a [`Sequence`] (issue 23) and replayed until
/// the residual is below `tol`: the step sizes α = r·r / p·q and β = r'·r' / r·r stay on the
/// device as one-element arrays ([`sum_array`]) that the update and direction programs read,
/// so an iteration makes no host round trip; ‖r‖ is read every `every` iterations (`every` =
/// 1 stops at the same iteration as [`cg_arrays`], with the same bits). The host reads of
/// the convergence test are the only ones.
///
/// # Errors
/// A device failure.
pub fn cg_recorded(
    dev: &Device,
    a: &DeviceCsr,
    b: &Array<1, f64>,
    tol: f64,
    maxit: usize,
    every: usize,
) -> Result<SolveArrays> {
    let spmv_dot = spmv_dot_program()?;
    // α = r·r / p·q and β = r'·r' / r·r from one-element arrays, in the host's order.
    let ratio = |num: &str, den: &str| {
        let n = InArray::<1, Value1d>::named(num, Boundary::Clamp);
        let d = InArray::<1, Value1d>::named(den, Boundary::Clamp);
        n.read(0) / d.read(0)
    };
    let update = update_program("update_dev", || ratio("rr", "pq"))?;
    let direction = direction_program("direction_dev", || ratio("rr2", "rr"))?;
    let (square, zeros) = (square_program()?, zeros_program()?);
    let n = a.n;
    dev.scope(|| {
        let bb: Array<1, f64> = square.apply(b)?;
        let rr = sum_array(&bb)?;
        let bnorm = rr.get(0)?.unwrap_or(0.0).sqrt();
        let x: Array<1, f64> = zeros.apply_shape(&[n], ())?;
        let res =
            |rr: &Array<1, f64>| -> Result<f64> { Ok(rr.get(0)?.unwrap_or(0.0).sqrt() / bnorm) };
        if maxit == 0 || res(&rr)? < tol {
            return Ok(SolveArrays {
                x,
                iterations: 0,
                residual: res(&rr)?,
            });
        }
        type State = (Array<1, f64>, Array<1, f64>, Array<1, f64>, Array<1, f64>);
        let step = |(x, r, p, rr): State| -> Result<State> {
            let (q, pq): (Array<1, f64>, Array<1, f64>) =
                spmv_dot.apply_shape(&[n], (&a.rowptr, &a.col, &a.val, &p))?;
            let pqs = sum_array(&pq)?;
            let (x2, rr_e, r2): (Array<1, f64>, Array<1, f64>, Array<1, f64>) =
                update.apply((&x, &r, &p, &q, &rr, &pqs))?;
            let rr2 = sum_array(&rr_e)?;
            let p2: Array<1, f64> = direction.apply((&r2, &p, &rr2, &rr))?;
            Ok((x2, r2, p2, rr2))
        };
        // The first iteration runs while it is recorded.
        let (seq, first) = Sequence::record(&(x, b.clone(), b.clone(), rr), step)?;
        let mut it = 1;
        let mut state = first;
        if res(&state.3)? >= tol && maxit > 1 {
            let (s, k) = if dev.runs_device_loops() {
                // On a GPU with conditional graph nodes the convergence test runs on the
                // device after every iteration, the whole loop one CUDA graph: the host's
                // test in f64, so the same iterations.
                let stop = stop_program(bnorm, tol)?;
                seq.until_program(&state, &stop, 3, maxit - 1)?
            } else {
                seq.until(&state, every.max(1), maxit - 1, |s| Ok(res(&s.3)? < tol))?
            };
            state = s;
            it += k;
        }
        let residual = res(&state.3)?;
        Ok(SolveArrays {
            x: state.0,
            iterations: it,
            residual,
        })
    })
}

/// The f64 reference: the same CG on the host.
pub fn reference(a: &Csr, b: &[f64], tol: f64, maxit: usize) -> Solve {
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let mut x = vec![0.0; a.rows];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    let bnorm = rr.sqrt();
    let (mut it, mut res) = (0, 1.0);
    while it < maxit && res >= tol {
        it += 1;
        let q = a.mul(&p);
        let alpha = rr / dot(&p, &q);
        for i in 0..a.rows {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let rr2 = dot(&r, &r);
        res = rr2.sqrt() / bnorm;
        if res < tol {
            break;
        }
        for i in 0..a.rows {
            p[i] = r[i] + rr2 / rr * p[i];
        }
        rr = rr2;
    }
    Solve {
        x,
        iterations: it,
        residual: res,
    }
}

/// ‖b − A x‖ / ‖b‖ in f64.
pub fn true_residual(a: &Csr, x: &[f64], b: &[f64]) -> f64 {
    let ax = a.mul(x);
    let num: f64 = ax.iter().zip(b).map(|(u, v)| (v - u) * (v - u)).sum();
    let den: f64 = b.iter().map(|v| v * v).sum();
    (num / den).sqrt()
}

/// The matrix named on the command line: `lund_a` (from the data cache) or `poisson:M`.
pub fn matrix(spec: &str) -> Result<Csr> {
    match spec.strip_prefix("poisson:") {
        Some(m) => m.parse().map(Csr::poisson2d).map_err(|_| {
            weft::Error::argument(format!("matrix `{spec}`: poisson:M needs a number"))
        }),
        None => crate::data::read_matrix_market(&crate::data::cached(&format!("{spec}.mtx"))?),
    }
}

/// The example's command line (see the module docs).
pub fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let name = crate::device_arg();
    let spec = arg(2).unwrap_or_else(|| "lund_a".into());
    let tol: f64 = arg(3).and_then(|s| s.parse().ok()).unwrap_or(1e-10);
    let maxit: usize = arg(4).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let a = matrix(&spec)?;
        let b = a.mul(&vec![1.0; a.cols]);
        let da = DeviceCsr::new(&a)?;
        let y = spmv(&dev, &da, &b)?;
        let y64 = a.mul(&b);
        let scale = y64.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let spmv_err = y
            .iter()
            .zip(&y64)
            .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()))
            / scale;
        let t = std::time::Instant::now();
        let s = cg(&dev, &da, &b, tol, maxit)?;
        let dt = t.elapsed().as_secs_f64();
        let true_res = true_residual(&a, &s.x, &b);
        let r = reference(&a, &b, tol, maxit);
        let ok = spmv_err <= 1e-12 && true_res <= 1e-9;
        println!(
            "cg on {dev}: {spec} ({} rows, {} nonzeros); SpMV max relative error {spmv_err:.1e} (tolerance 1e-12); CG {} iterations in {:.1} ms, residual {:.2e} (true {true_res:.2e}, tolerance 1e-9); f64 host reference: {} iterations, residual {:.2e} {}",
            a.rows, a.nnz(), s.iterations, dt * 1e3, s.residual, r.iterations, r.residual,
            if ok { "ok" } else { "FAILED" }
        );
        if !ok {
            std::process::exit(1);
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
