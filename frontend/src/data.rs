//! Readers and writers for the workloads' real inputs and outputs (docs/workloads.md): PQR
//! atoms, Matrix Market sparse matrices (CSR), 8-bit PNG images, colour-mapped PNGs with a
//! colour bar. Every error names the file.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The directory `scripts/fetch_data.sh` fills (`data/cache` in the source tree), or
/// `$WEFT_DATA` when set.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("WEFT_DATA") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/cache"),
    }
}

/// `cache_dir()/name`, or an error telling how to fetch it when it is missing.
pub fn cached(name: &str) -> Result<PathBuf> {
    let p = cache_dir().join(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(Error::Input(format!(
            "{}: missing; run scripts/fetch_data.sh to fetch it",
            p.display()
        )))
    }
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}: {e}", path.display()))
}

/// The atoms of a PQR file (`ATOM`/`HETATM` lines ending in x y z charge radius, Å and
/// elementary charges) as (x, y, z, charge), in file order.
///
/// Errors: the file cannot be read, or a line's last five fields are not numbers
/// (`file:line`).
pub fn read_pqr(path: &Path) -> Result<Vec<[f32; 4]>> {
    let text = std::fs::read_to_string(path).map_err(|e| io_err(path, e))?;
    let mut atoms = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if !(line.starts_with("ATOM") || line.starts_with("HETATM")) {
            continue;
        }
        let f: Vec<f32> = line
            .split_whitespace()
            .rev()
            .take(5)
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| {
                Error::Input(format!(
                    "{}:{}: expected x y z charge radius at the end of the line: {e}",
                    path.display(),
                    n + 1
                ))
            })?;
        if f.len() < 5 {
            return Err(Error::Input(format!(
                "{}:{}: expected x y z charge radius at the end of the line",
                path.display(),
                n + 1
            )));
        }
        atoms.push([f[4], f[3], f[2], f[1]]);
    }
    Ok(atoms)
}

/// A sparse matrix in compressed sparse row form: row `i`'s entries are
/// `val[rowptr[i]..rowptr[i+1]]` in columns `col[..]` (ascending).
#[derive(Clone, Debug, PartialEq)]
pub struct Csr {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row starts, `rows + 1` entries, from 0 to `nnz`.
    pub rowptr: Vec<i32>,
    /// Column of each stored entry.
    pub col: Vec<i32>,
    /// Value of each stored entry.
    pub val: Vec<f64>,
}

impl Csr {
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// `A · x` in f64, each row summed in storage order (the reference for SpMV).
    ///
    /// Panics if `x.len() != cols`.
    pub fn mul(&self, x: &[f64]) -> Vec<f64> {
        assert_eq!(x.len(), self.cols, "x has the wrong length");
        (0..self.rows)
            .map(|i| {
                (self.rowptr[i] as usize..self.rowptr[i + 1] as usize)
                    .map(|k| self.val[k] * x[self.col[k] as usize])
                    .sum()
            })
            .collect()
    }

    /// The 5-point Laplacian of an `m × m` grid with Dirichlet boundary (4 on the diagonal,
    /// −1 for each grid neighbour): symmetric positive definite, `m²` rows.
    pub fn poisson2d(m: usize) -> Csr {
        let n = m * m;
        let (mut rowptr, mut col, mut val) = (vec![0i32], Vec::new(), Vec::new());
        for i in 0..m {
            for j in 0..m {
                let mut push = |c: usize, v: f64| {
                    col.push(c as i32);
                    val.push(v);
                };
                if i > 0 {
                    push((i - 1) * m + j, -1.0);
                }
                if j > 0 {
                    push(i * m + j - 1, -1.0);
                }
                push(i * m + j, 4.0);
                if j + 1 < m {
                    push(i * m + j + 1, -1.0);
                }
                if i + 1 < m {
                    push((i + 1) * m + j, -1.0);
                }
                rowptr.push(col.len() as i32);
            }
        }
        Csr {
            rows: n,
            cols: n,
            rowptr,
            col,
            val,
        }
    }
}

/// A real Matrix Market file (`coordinate`, `general` or `symmetric`: both triangles are
/// stored) as CSR, read with the `sprs` crate; duplicate entries are summed.
///
/// Errors: the file cannot be read or is not a real coordinate Matrix Market file.
pub fn read_matrix_market(path: &Path) -> Result<Csr> {
    let tri: sprs::TriMat<f64> = sprs::io::read_matrix_market(path).map_err(|e| io_err(path, e))?;
    let m: sprs::CsMat<f64> = tri.to_csr();
    let ip = m.indptr();
    Ok(Csr {
        rows: m.rows(),
        cols: m.cols(),
        rowptr: ip.raw_storage().iter().map(|&x| x as i32).collect(),
        col: m.indices().iter().map(|&x| x as i32).collect(),
        val: m.data().to_vec(),
    })
}

/// An 8-bit greyscale PNG (grey or grey+alpha; colour images are converted with the
/// Rec. 601 luma weights) as `(height, width, pixels)`, row-major, top row first.
///
/// Errors: the file cannot be read or decoded, or is not 8 bits per channel.
pub fn read_png_gray(path: &Path) -> Result<(usize, usize, Vec<u8>)> {
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut reader = dec.read_info().map_err(|e| io_err(path, e))?;
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).map_err(|e| io_err(path, e))?;
    if info.bit_depth != png::BitDepth::Eight {
        return Err(io_err(path, "only 8-bit PNG images are supported"));
    }
    let (w, h) = (info.width as usize, info.height as usize);
    let ch = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(ch)
        .map(|p| match ch {
            1 | 2 => p[0],
            _ => (0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32).round() as u8,
        })
        .collect();
    Ok((h, w, px))
}

/// Writes an RGB image (`height × width`, row-major, 3 bytes per pixel) as an 8-bit PNG.
///
/// Errors: the file cannot be written; panics if `rgb.len() != 3·height·width`.
pub fn write_png_rgb(path: &Path, height: usize, width: usize, rgb: &[u8]) -> Result<()> {
    assert_eq!(rgb.len(), 3 * height * width, "rgb has the wrong length");
    let file = std::fs::File::create(path).map_err(|e| io_err(path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), width as u32, height as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(|e| io_err(path, e))?;
    w.write_image_data(rgb).map_err(|e| io_err(path, e))
}

/// 3 × 5 pixel glyphs for the colour bar's labels: the rows of each glyph, 3 bits each.
const GLYPHS: &[(char, [u8; 5])] = &[
    ('0', [7, 5, 5, 5, 7]),
    ('1', [2, 6, 2, 2, 7]),
    ('2', [7, 1, 7, 4, 7]),
    ('3', [7, 1, 7, 1, 7]),
    ('4', [5, 5, 7, 1, 1]),
    ('5', [7, 4, 7, 1, 7]),
    ('6', [7, 4, 7, 5, 7]),
    ('7', [7, 1, 1, 1, 1]),
    ('8', [7, 5, 7, 5, 7]),
    ('9', [7, 5, 7, 1, 7]),
    ('-', [0, 0, 7, 0, 0]),
    ('+', [0, 2, 7, 2, 0]),
    ('.', [0, 0, 0, 0, 2]),
    ('e', [0, 7, 7, 4, 7]),
];

/// Draws `text` (digits, `-+.e`) in black at (`y`, `x`), each glyph pixel `px × px`.
fn draw_text(rgb: &mut [u8], w: usize, (y, x): (usize, usize), text: &str, px: usize) {
    for (n, ch) in text.chars().enumerate() {
        let Some((_, rows)) = GLYPHS.iter().find(|(c, _)| *c == ch) else {
            continue;
        };
        for (r, bits) in rows.iter().enumerate() {
            for c in 0..3 {
                if bits >> (2 - c) & 1 == 1 {
                    for dy in 0..px {
                        for dx in 0..px {
                            let (yy, xx) = (y + r * px + dy, x + (n * 4 + c) * px + dx);
                            if xx < w && 3 * (yy * w + xx) + 3 <= rgb.len() {
                                rgb[3 * (yy * w + xx)..3 * (yy * w + xx) + 3].fill(0);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Writes `values` (`height × width`, row-major) as a PNG heat map in the viridis colour
/// map (colorous), clipped to `[lo, hi]`, with a labelled colour bar on the right (`hi` at
/// the top, `lo` at the bottom, the middle value between); each pixel is drawn
/// `scale × scale`. NaNs are grey.
///
/// Errors: the file cannot be written.
pub fn write_heatmap_png(
    path: &Path,
    height: usize,
    width: usize,
    values: &[f32],
    (lo, hi): (f32, f32),
    scale: usize,
) -> Result<()> {
    let (bar, gap, px) = (24, 12, 2);
    let label = |v: f32| format!("{v:.3e}");
    let text_w = 4
        * px
        * [lo, hi, (lo + hi) / 2.0]
            .map(|v| label(v).len())
            .iter()
            .max()
            .unwrap_or(&0);
    let h = (height * scale).max(40);
    let w = width * scale + gap + bar + 6 + text_w;
    let mut rgb = vec![255u8; 3 * h * w];
    let colour = |v: f32| -> [u8; 3] {
        if v.is_nan() {
            return [128, 128, 128];
        }
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        let c = colorous::VIRIDIS.eval_continuous(t.clamp(0.0, 1.0) as f64);
        [c.r, c.g, c.b]
    };
    let x_bar = width * scale + gap;
    for y in 0..h {
        if y < height * scale {
            for x in 0..width * scale {
                let c = colour(values[(y / scale) * width + x / scale]);
                rgb[3 * (y * w + x)..3 * (y * w + x) + 3].copy_from_slice(&c);
            }
        }
        let t = 1.0 - y as f32 / (h - 1) as f32;
        let c = colour(lo + t * (hi - lo));
        for x in x_bar..x_bar + bar {
            rgb[3 * (y * w + x)..3 * (y * w + x) + 3].copy_from_slice(&c);
        }
    }
    let x_text = x_bar + bar + 6;
    draw_text(&mut rgb, w, (0, x_text), &label(hi), px);
    draw_text(
        &mut rgb,
        w,
        (h / 2 - 5, x_text),
        &label((lo + hi) / 2.0),
        px,
    );
    draw_text(&mut rgb, w, (h - 5 * px, x_text), &label(lo), px);
    write_png_rgb(path, h, w, &rgb)
}

/// Writes an f32 array of shape `shape` as a `.npy` file (readable by numpy.load).
///
/// Errors: the file cannot be written; panics if `values.len()` is not the product of
/// `shape`.
pub fn write_npy_f32(path: &Path, shape: &[usize], values: &[f32]) -> Result<()> {
    assert_eq!(
        values.len(),
        shape.iter().product::<usize>(),
        "shape mismatch"
    );
    let a = weft_ir::HostArray {
        elem: weft_ir::Type::scalar(weft_ir::ScalarType::F32),
        shape: shape.to_vec(),
        data: values.iter().map(|x| x.to_bits() as u64).collect(),
    };
    crate::npy::write_npy(path, &a).map_err(|e| io_err(path, e))
}
