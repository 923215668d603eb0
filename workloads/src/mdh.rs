//! The OpenCL MDH kernel (Stone et al., "OpenCL: A parallel programming standard for
//! heterogeneous computing systems", the electrostatics example): the Coulomb potential at
//! every point of a 3-D grid, summed over the atoms of `mache.pqr` (`scripts/fetch_data.sh`;
//! a small synthetic molecule when it is missing), recorded with a loop over an array input.
//!
//! Writes the potential as `.npy` and a PNG of its middle slice with a colour bar.
//!
//! `cargo run --release -p weft-workloads --example mdh [DEVICE] [ATOMS] [SIDE] [OUT_DIR]`

use weft::dsl::{for_, index, InArray, Out, Param, Program, Value1f, Value3f, Value4f};
use weft::ir::Boundary;
use weft::{Array, Device, Result};

/// The first `count` atoms of `mache.pqr` (data cache) as (x, y, z, charge), or a
/// synthetic molecule of `count` atoms (4,096 if `count` is `usize::MAX`) when it is missing.
pub fn atoms(count: usize) -> Vec<[f32; 4]> {
    if let Ok(a) = crate::data::cached("mache.pqr").and_then(|p| crate::data::read_pqr(&p)) {
        return a.into_iter().take(count).collect();
    }
    let count = if count == usize::MAX { 4096 } else { count };
    (0..count)
        .map(|i| {
            let t = i as f32 * 0.37;
            [
                10.0 * t.cos(),
                10.0 * t.sin(),
                0.1 * i as f32,
                if i % 2 == 0 { 0.5 } else { -0.4 },
            ]
        })
        .collect()
}

/// The grid's origin for `side³` points at [`SPACING`] around the atoms' centroid (Å).
pub fn origin(atoms: &[[f32; 4]], side: usize) -> [f32; 3] {
    let n = atoms.len() as f32;
    let c = atoms.iter().fold([0f32; 3], |a, q| {
        [a[0] + q[0] / n, a[1] + q[1] / n, a[2] + q[2] / n]
    });
    let half = SPACING * side as f32 / 2.0;
    [
        c[0] - half + 0.0137,
        c[1] - half + 0.0137,
        c[2] - half + 0.0137,
    ]
}

/// Grid spacing (Å).
pub const SPACING: f32 = 1.5;

/// The potential on a `side³` grid at [`SPACING`] around the atoms, on `dev`; element
/// (k, j, i) is the point `origin + (i, j, k) · SPACING`.
pub fn mdh(dev: &Device, atoms: &[[f32; 4]], side: usize) -> Result<Vec<f32>> {
    let p = program()?;
    let arr = Array::from_slice([atoms.len()], atoms)?;
    let out = dev.scope(|| mdh_array(&p, &arr, origin(atoms, side), side))?;
    out.to_vec()
}

/// The MDH program: uniform `origin` (Å), `spacing` (Å), array `atoms` of (x, y, z, q) →
/// `potential` at the grid point of this element's index (k, j, i).
pub fn program() -> Result<Program> {
    Program::record_named("mdh", || {
        let origin = Param::uniform::<Value3f>("origin");
        let spacing = Param::uniform::<Value1f>("spacing");
        let atoms = InArray::<1, Value4f>::named("atoms", Boundary::Clamp);
        // Grid index (k, j, i) addresses axes (z, y, x).
        let idx = index::<3>().cast::<f32>().swizzle([2, 1, 0]);
        let pos = origin + idx * spacing;
        let mut e = Value1f::new(0.0f32);
        for_(0, atoms.extent(), |a| {
            let atom = atoms.read(a);
            let d = &pos - atom.swizzle([0, 1, 2]);
            e += atom.w() / d.dot(&d).sqrt();
        });
        Out::named("potential", e);
    })
}

/// Applies the MDH program `p` on the current device to an atom array: the `side³` grid of
/// potentials, left where it was computed.
pub fn mdh_array(
    p: &Program,
    atoms: &Array<1, [f32; 4]>,
    origin: [f32; 3],
    side: usize,
) -> Result<Array<3, f32>> {
    let o = weft::Const::from_lanes(Value3f::ir_type(), &origin.map(|x| x.to_bits() as u64));
    p.apply_shape(&[side, side, side], (o, SPACING, atoms))
}

/// The f64 reference at grid point `(k, j, i)`: (potential, Σ |q| / r, the scale of its
/// rounding error).
pub fn reference(atoms: &[[f32; 4]], side: usize, (k, j, i): (usize, usize, usize)) -> (f64, f64) {
    let o = origin(atoms, side);
    let sp = SPACING as f64;
    let p = [
        o[0] as f64 + i as f64 * sp,
        o[1] as f64 + j as f64 * sp,
        o[2] as f64 + k as f64 * sp,
    ];
    atoms.iter().fold((0.0, 0.0), |(v, s), a| {
        let d = [p[0] - a[0] as f64, p[1] - a[1] as f64, p[2] - a[2] as f64];
        let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        (v + a[3] as f64 / r, s + (a[3] as f64).abs() / r)
    })
}

/// The largest error relative to the tolerance, |V − V₆₄| / (1e-5 · Σ|q|/r), over every
/// `stride`-th grid point (≤ 1 passes; docs/workloads.md).
pub fn check(atoms: &[[f32; 4]], side: usize, pot: &[f32], stride: usize) -> f64 {
    (0..pot.len())
        .step_by(stride.max(1))
        .map(|p| {
            let (v, s) = reference(atoms, side, (p / (side * side), p / side % side, p % side));
            (pot[p] as f64 - v).abs() / (1e-5 * s)
        })
        .fold(0.0, f64::max)
}

/// Writes the potential as `DIR/potential.npy` (side × side × side, axes z, y, x) and its
/// middle z slice as `DIR/slice.png` (viridis, 2nd–98th percentile, with a colour bar);
/// returns the PNG's path.
pub fn save(dir: &std::path::Path, side: usize, pot: &[f32]) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| weft::Error::Input(format!("{}: {e}", dir.display())))?;
    weft::data::write_npy_f32(&dir.join("potential.npy"), &[side, side, side], pot)?;
    let z = side / 2;
    let slice = &pot[z * side * side..(z + 1) * side * side];
    let mut sorted: Vec<f32> = slice.iter().copied().filter(|x| x.is_finite()).collect();
    sorted.sort_by(f32::total_cmp);
    let pct = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    let png = dir.join("slice.png");
    let scale = (512 / side).max(1);
    weft::data::write_heatmap_png(&png, side, side, slice, (pct(0.02), pct(0.98)), scale)?;
    Ok(png)
}

/// The example's command line (see the module docs).
pub fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let name = crate::device_arg();
    let count = arg(2).and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
    let side = arg(3).and_then(|s| s.parse().ok()).unwrap_or(64);
    let dir = std::path::PathBuf::from(arg(4).unwrap_or_else(|| "target/mdh".into()));
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let a = atoms(count);
        let t = std::time::Instant::now();
        let pot = mdh(&dev, &a, side)?;
        let first = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let pot2 = mdh(&dev, &a, side)?;
        let dt = t.elapsed().as_secs_f64();
        assert_eq!(pot, pot2, "two runs differ");
        let pairs = (a.len() * pot.len()) as f64;
        let err = check(&a, side, &pot, 97);
        let png = save(&dir, side, &pot)?;
        println!(
            "mdh on {dev}: {} atoms × {side}³ points in {:.1} ms ({:.1} GFLOP/s at 20 flop/pair; first run with compilation {:.1} ms); error vs f64 at every 97th point: {:.3} of the tolerance {}",
            a.len(), dt * 1e3, pairs * 20.0 / dt / 1e9, first * 1e3, err,
            if err <= 1.0 { "ok" } else { "FAILED" }
        );
        println!(
            "mdh: potential {}, slice z = {} as {}",
            dir.join("potential.npy").display(),
            side / 2,
            png.display()
        );
        if err > 1.0 {
            std::process::exit(1);
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
