//! The workloads' data (docs/workloads.md): where fetched files are looked up
//! ([`cache_dir`], [`cached`]), PQR atoms ([`read_pqr`]) and Matrix Market sparse matrices
//! read into CSR ([`read_matrix_market`], [`Csr`]). Every error names the file.

use std::path::{Path, PathBuf};
use weft::data::read_regular;
use weft::{Error, Result};

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}: {e}", path.display()))
}

/// Where the workloads' data files are looked up, first found: `$WEFT_DATA` when set; the
/// nearest `data/cache` in the working directory or one of its ancestors (what
/// `scripts/fetch_data.sh` fills in a checkout, found from any folder inside it); the
/// user's cache, `$XDG_CACHE_HOME/weft/data` or `~/.cache/weft/data`. When none exists, the
/// user's cache (so that a missing file's error names a place to put it). It does not
/// depend on where weft was built.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEFT_DATA") {
        return PathBuf::from(d);
    }
    let in_tree = std::env::current_dir().ok().and_then(|cwd| {
        cwd.ancestors()
            .map(|a| a.join("data").join("cache"))
            .find(|d| d.is_dir())
    });
    in_tree.unwrap_or_else(user_cache_dir)
}

/// `$XDG_CACHE_HOME/weft/data`, else `$HOME/.cache/weft/data`, else `data/cache` (relative).
fn user_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")));
    match base {
        Some(b) => b.join("weft").join("data"),
        None => PathBuf::from("data/cache"),
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

/// The atoms of a PQR file (`ATOM`/`HETATM` lines ending in x y z charge radius, Å and
/// elementary charges) as (x, y, z, charge), in file order.
///
/// Errors: the file cannot be read, or a line's last five fields are not numbers
/// (`file:line`).
pub fn read_pqr(path: &Path) -> Result<Vec<[f32; 4]>> {
    let bytes = read_regular(path).map_err(|e| io_err(path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| io_err(path, "the file is not UTF-8 text"))?;
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
/// Errors: the file cannot be read, is not a regular file, or is not a real coordinate
/// Matrix Market file; its size line claims more rows, columns or entries than fit the CSR
/// (`i32` indices) or more entries than the file's bytes can hold (checked before `sprs`
/// allocates for them).
pub fn read_matrix_market(path: &Path) -> Result<Csr> {
    let bytes = read_regular(path).map_err(|e| io_err(path, e))?;
    check_matrix_market_size(&bytes).map_err(|e| io_err(path, e))?;
    let tri: sprs::TriMat<f64> =
        sprs::io::read_matrix_market_from_bufread(&mut &bytes[..]).map_err(|e| io_err(path, e))?;
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

/// Checks a Matrix Market file's size line (`rows cols entries`, the first line that is
/// not a `%` comment) against the CSR's `i32` indices and the file's length: every entry
/// takes a line of at least three numbers, so a file of `n` bytes holds fewer than `n / 4`
/// entries. A malformed size line is left to `sprs` to report.
fn check_matrix_market_size(bytes: &[u8]) -> std::result::Result<(), String> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 16)]);
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('%'))
    else {
        return Ok(());
    };
    let nums: Vec<u128> = line
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    let &[rows, cols, entries] = nums.as_slice() else {
        return Ok(());
    };
    let max = i32::MAX as u128;
    if rows > max || cols > max || entries > max / 2 {
        return Err(format!(
            "the size line claims {rows} × {cols} with {entries} entries: more than the CSR's \
             32-bit indices hold"
        ));
    }
    if 4 * entries > bytes.len() as u128 {
        return Err(format!(
            "the size line claims {entries} entries but the file has only {} bytes",
            bytes.len()
        ));
    }
    Ok(())
}
