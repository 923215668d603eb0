//! The coin finder (McCool et al., "Shader algebra"/RapidMind's bead tracking, here on
//! scikit-image's coins.png; docs/workloads.md): Sobel edges, then for each radius a sparse
//! circular-mask convolution — one generic ring program whose mask array is tight-bound
//! (`bind_array`), so each radius gets its own program with the ring's offsets folded to
//! constants and the loop unrolled — then peak finding with `arg_max` and a suppression
//! program. Writes a PNG overlay of the found coins.
//!
//! `cargo run --release -p weft-workloads --example coins [DEVICE] [OUT.png]`

use weft::dsl::{for_, index, select, In, InArray, Out, Param, Program, Value1f, Value1i, Value2i};
use weft::ir::{Boundary, ScalarType, Type};
use weft::{arg_max, Array, Device, HostArray, Result};

/// The finder's parameters (pixels and edge-strength units).
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Smallest ring radius tried.
    pub rmin: i32,
    /// Largest ring radius tried.
    pub rmax: i32,
    /// At most this many coins.
    pub npeaks: usize,
    /// A peak's mean edge strength must reach this.
    pub thresh: f32,
}

/// The parameters used for coins.png.
pub const COINS: Params = Params {
    rmin: 14,
    rmax: 34,
    npeaks: 30,
    thresh: 200.0,
};

/// A found coin: centre (row, column) and radius, pixels; score = mean edge strength.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coin {
    /// Row of the centre.
    pub y: usize,
    /// Column of the centre.
    pub x: usize,
    /// Radius.
    pub r: i32,
    /// Mean edge strength on the ring.
    pub score: f32,
}

/// The offsets (dy, dx) with R − 0.5 ≤ √(dy² + dx²) < R + 0.5, row-major.
pub fn ring(r: i32) -> Vec<[i32; 2]> {
    let mut m = Vec::new();
    for dy in -r - 1..=r + 1 {
        for dx in -r - 1..=r + 1 {
            let d = ((dy * dy + dx * dx) as f64).sqrt();
            if d >= r as f64 - 0.5 && d < r as f64 + 0.5 {
                m.push([dy, dx]);
            }
        }
    }
    m
}

/// The generic ring program: `e` (edges, clamped) and `mask` (offsets) → mean of `e` on the
/// offsets around each pixel.
pub fn ring_program() -> Result<Program> {
    Program::record_named("ring", || {
        let e = InArray::<2, Value1f>::named("e", Boundary::Clamp);
        let mask = InArray::<1, Value2i>::named("mask", Boundary::Clamp);
        let p = index::<2>();
        let acc = Value1f::new(0.0);
        for_(0, mask.extent(), |k| {
            acc.assign(&acc + e.read(&p + mask.read(&k)));
        });
        Out::named("s", acc / mask.extent().cast::<f32>());
    })
}

/// Sobel gradient magnitude of `img` (clamped at the border).
pub fn edges_program() -> Result<Program> {
    Program::record_named("edges", || {
        let img = InArray::<2, Value1f>::named("img", Boundary::Clamp);
        let p = index::<2>();
        let at = |dy: i32, dx: i32| img.read(&p + Value2i::from_array([dy, dx]));
        let gx = (at(-1, 1) + at(0, 1) * 2.0f32 + at(1, 1))
            - (at(-1, -1) + at(0, -1) * 2.0f32 + at(1, -1));
        let gy = (at(1, -1) + at(1, 0) * 2.0f32 + at(1, 1))
            - (at(-1, -1) + at(-1, 0) * 2.0f32 + at(-1, 1));
        Out::named("e", (&gx * &gx + &gy * &gy).sqrt());
    })
}

/// The coin finder's programs, specialised once for a set of [`Params`]: the edge
/// detector, one ring program per radius (the generic one with its mask tight-bound), the
/// running maximum over radii and the peak suppression.
pub struct Finder {
    prm: Params,
    edges: Program,
    rings: Vec<(i32, Program)>,
    keep_best: Program,
    /// `keep_best` against zeros (the first radius): no zero arrays to make or upload.
    first_best: Program,
    suppress: Program,
}

impl Finder {
    /// Records the programs and specialises the ring program to each radius of `prm`.
    pub fn new(prm: Params) -> Result<Finder> {
        let generic = ring_program()?;
        let pair = Type::tuple(ScalarType::I32, 2).expect("tuple type");
        let rings = (prm.rmin..=prm.rmax)
            .map(|r| {
                let offsets = ring(r);
                let mask = HostArray {
                    elem: pair,
                    shape: vec![offsets.len()],
                    data: offsets.iter().flatten().map(|&v| v as u32 as u64).collect(),
                };
                Ok((r, generic.bind_array("mask", &mask)?))
            })
            .collect::<Result<_>>()?;
        let keep_best = Program::record_named("keep_best", || {
            let s = In::<Value1f>::named("s");
            let radius = Param::uniform::<Value1i>("radius");
            let best = In::<Value1f>::named("best");
            let rad = In::<Value1i>::named("rad");
            let gt = s.gt(&best);
            Out::named("best", select(&gt, &s, &best));
            Out::named("rad", select(&gt, radius, rad));
        })?;
        let first_best = Program::record_named("first_best", || {
            let s = In::<Value1f>::named("s");
            let radius = Param::uniform::<Value1i>("radius");
            let gt = s.gt(0.0f32);
            Out::named("best", select(&gt, &s, 0.0f32));
            Out::named("rad", select(&gt, radius, 0i32));
        })?;
        let suppress = Program::record_named("suppress", || {
            let best = In::<Value1f>::named("best");
            let rad = InArray::<2, Value1i>::named("rad", Boundary::Clamp);
            let cy = Param::uniform::<Value1i>("cy");
            let cx = Param::uniform::<Value1i>("cx");
            // The peak's radius, read on the device (no download per peak).
            let r = rad.read(Value2i::from_lanes([cy.clone(), cx.clone()]));
            let p = index::<2>();
            let (dy, dx) = (p.x() - cy, p.y() - cx);
            Out::named(
                "best",
                select((&dy * &dy + &dx * &dx).lt(&r * &r), 0.0f32, best),
            );
        })?;
        Ok(Finder {
            prm,
            edges: edges_program()?,
            rings,
            keep_best,
            first_best,
            suppress,
        })
    }

    /// Finds the coins in `img` (`h × w` grey levels) on the current device.
    pub fn run(&self, img: &Array<2, f32>) -> Result<Vec<Coin>> {
        let [h, w] = img.shape();
        let e: Array<2, f32> = self.edges.apply_shape(&[h, w], img)?;
        let mut best_rad: Option<(Array<2, f32>, Array<2, i32>)> = None;
        for (r, ring_r) in &self.rings {
            let s: Array<2, f32> = ring_r.apply_shape(&[h, w], &e)?;
            best_rad = Some(match &best_rad {
                None => self.first_best.apply((&s, *r))?,
                Some((best, rad)) => self.keep_best.apply((&s, *r, best, rad))?,
            });
        }
        let Some((mut best, rad)) = best_rad else {
            return Ok(Vec::new());
        };
        let mut coins = Vec::new();
        while coins.len() < self.prm.npeaks {
            let (v, i) = arg_max(&best)?;
            if v < self.prm.thresh {
                break;
            }
            let (y, x) = (i / w, i % w);
            coins.push(Coin {
                y,
                x,
                r: 0,
                score: v,
            });
            best = self.suppress.apply((&best, &rad, y as i32, x as i32))?;
        }
        // The peaks' radii: one gather and one small read.
        if !coins.is_empty() {
            let at: Vec<[i32; 2]> = coins.iter().map(|c| [c.y as i32, c.x as i32]).collect();
            let at = Array::from_vec([at.len()], at)?;
            for (c, r) in coins.iter_mut().zip(rad.gather(&at)?.to_vec()?) {
                c.r = r;
            }
        }
        Ok(coins)
    }
}

/// Finds coins in a grey image (`h × w`, levels 0…255) on `dev`.
pub fn find_coins(dev: &Device, h: usize, w: usize, img: &[f32], prm: Params) -> Result<Vec<Coin>> {
    let finder = Finder::new(prm)?;
    let img = Array::from_slice([h, w], img)?;
    dev.scope(|| finder.run(&img))
}

/// Loads `coins.png` from the data cache as (h, w, grey levels as f32).
pub fn load() -> Result<(usize, usize, Vec<f32>)> {
    let (h, w, px) = weft::data::read_png_gray(&crate::data::cached("coins.png")?)?;
    Ok((h, w, px.iter().map(|&g| g as f32).collect()))
}

/// The hand-marked coin centres of coins.png, (row, column): `examples/data/coins_centres.txt`.
pub fn centres() -> Vec<(f64, f64)> {
    include_str!("../../examples/data/coins_centres.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .map(|x| x.parse().expect("number"))
                .collect();
            (v[0], v[1])
        })
        .collect()
}

/// (centres with a coin within 8 px, coins more than 8 px from every centre).
pub fn score(coins: &[Coin]) -> (usize, usize) {
    let c = centres();
    let near = |(y, x): (f64, f64), k: &Coin| {
        ((k.y as f64 - y).powi(2) + (k.x as f64 - x).powi(2)).sqrt() <= 8.0
    };
    let found = c
        .iter()
        .filter(|&&p| coins.iter().any(|k| near(p, k)))
        .count();
    let false_pos = coins
        .iter()
        .filter(|k| !c.iter().any(|&p| near(p, k)))
        .count();
    (found, false_pos)
}

/// The image in grey with each coin's circle drawn in red and its centre in yellow (RGB).
pub fn overlay(h: usize, w: usize, img: &[f32], coins: &[Coin]) -> Vec<u8> {
    let mut rgb: Vec<u8> = img.iter().flat_map(|&g| [g as u8; 3]).collect();
    let mut put = |y: i64, x: i64, c: [u8; 3]| {
        if y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w {
            let k = 3 * (y as usize * w + x as usize);
            rgb[k..k + 3].copy_from_slice(&c);
        }
    };
    for k in coins {
        for t in 0..720 {
            let a = t as f64 * std::f64::consts::PI / 360.0;
            for dr in [-0.5, 0.0, 0.5] {
                let rr = k.r as f64 + dr;
                put(
                    (k.y as f64 + rr * a.sin()).round() as i64,
                    (k.x as f64 + rr * a.cos()).round() as i64,
                    [255, 40, 40],
                );
            }
        }
        for d in -2..=2 {
            put(k.y as i64 + d, k.x as i64, [255, 230, 0]);
            put(k.y as i64, k.x as i64 + d, [255, 230, 0]);
        }
    }
    rgb
}

/// The example's command line (see the module docs).
pub fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let name = crate::device_arg();
    let out = arg(2).unwrap_or_else(|| "target/coins_found.png".into());
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let (h, w, img) = load()?;
        let t = std::time::Instant::now();
        let coins = find_coins(&dev, h, w, &img, COINS)?;
        let dt = t.elapsed().as_secs_f64();
        for k in &coins {
            println!(
                "coin at row {:3}, column {:3}, radius {:2}, score {:.1}",
                k.y, k.x, k.r, k.score
            );
        }
        let (found, false_pos) = score(&coins);
        weft::data::write_png_rgb(
            std::path::Path::new(&out),
            h,
            w,
            &overlay(h, w, &img, &coins),
        )?;
        let ok = found >= 22 && false_pos == 0;
        println!(
            "coins on {dev}: {w}×{h} image, radii {}…{}, {} coins in {:.1} ms (with compilation); {found} of 24 hand-marked centres found, {false_pos} false; overlay: {out} {}",
            COINS.rmin, COINS.rmax, coins.len(), dt * 1e3, if ok { "ok" } else { "FAILED" }
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
