//! The OpenCL MDH kernel (Stone et al., "OpenCL: A parallel programming standard for
//! heterogeneous computing systems", the electrostatics example): the Coulomb potential at
//! every point of a 3-D grid, summed over the atoms of `mache.pqr` (`scripts/fetch_data.sh`;
//! a small synthetic molecule when it is missing), recorded with a loop over an array input.
//!
//! `cargo run --release -p weft --example mdh [DEVICE] [ATOMS] [SIDE]`

use weft::dsl::{for_, index, InArray, Out, Param, Program, Value1f, Value3f, Value4f};
use weft::ir::Boundary;
use weft::{Array, Device, Result};

/// The first `count` atoms of `data/cache/mache.pqr` as (x, y, z, charge), or a synthetic
/// molecule of `count` atoms when the file is missing.
pub fn atoms(count: usize) -> Vec<[f32; 4]> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/cache/mache.pqr");
    let parsed: Vec<[f32; 4]> = std::fs::read_to_string(root)
        .map(|text| {
            text.lines()
                .filter(|l| l.starts_with("ATOM") || l.starts_with("HETATM"))
                .filter_map(|l| {
                    let f: Vec<f32> = l
                        .split_whitespace()
                        .rev()
                        .take(5)
                        .filter_map(|x| x.parse().ok())
                        .collect();
                    (f.len() == 5).then(|| [f[4], f[3], f[2], f[1]])
                })
                .take(count)
                .collect()
        })
        .unwrap_or_default();
    if !parsed.is_empty() {
        return parsed;
    }
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

/// The potential on a `side³` grid at 1.5 Å spacing around the atoms, on `dev`.
pub fn mdh(dev: &Device, atoms: &[[f32; 4]], side: usize) -> Result<Vec<f32>> {
    let p = Program::record(|| {
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
    })?;
    let n = atoms.len() as f32;
    let c = atoms.iter().fold([0f32; 3], |a, q| {
        [a[0] + q[0] / n, a[1] + q[1] / n, a[2] + q[2] / n]
    });
    let sp = 1.5f32;
    let half = sp * side as f32 / 2.0;
    let origin = [
        c[0] - half + 0.0137,
        c[1] - half + 0.0137,
        c[2] - half + 0.0137,
    ];
    let origin = weft::Const::from_lanes(Value3f::ir_type(), &origin.map(|x| x.to_bits() as u64));
    let arr = Array::from_slice([atoms.len()], atoms)?;
    let out: Array<3, f32> = p.apply_shape_on(dev, &[side, side, side], (origin, sp, &arr))?;
    out.to_vec()
}

#[allow(dead_code)]
fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    let count = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096);
    let side = std::env::args()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let a = atoms(count);
        let t = std::time::Instant::now();
        let pot = mdh(&dev, &a, side)?;
        let dt = t.elapsed().as_secs_f64();
        let pairs = (a.len() * pot.len()) as f64;
        println!(
            "mdh on {dev}: {} atoms × {side}³ points in {:.1} ms ({:.1} GFLOP/s at 20 flop/pair); potential[0] = {}",
            a.len(), dt * 1e3, pairs * 20.0 / dt / 1e9, pot[0]
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
