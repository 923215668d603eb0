//! Readers and writers of images and arrays (docs/workloads.md): 8-bit PNG images,
//! colour-mapped PNGs with a colour bar, `.npy` files of f32. Every error names the file.
//! (The workloads' own data — PQR atoms, Matrix Market matrices, the data cache — is read
//! by the `weft-workloads` crate.)
//!
//! The file helpers every reader and writer of weft (and the `weft` CLI) goes through are
//! here too: [`open_regular`] and [`read_regular`] refuse what is not a regular file (a
//! FIFO, `/dev/zero`, a directory) and never read past the size the file had when opened;
//! [`write_atomic`] and [`StagedFile`] write through a temporary file in the target's
//! directory that is renamed over the target only once it is complete, so a failed write
//! (a full disk) never leaves a truncated file behind.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

// ---- file helpers: regular files only, bounded reads, atomic writes

/// What kind of non-regular file `t` is, for messages.
fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The error for a path that exists but is not a regular file.
fn not_regular(t: std::fs::FileType) -> String {
    match file_kind(t) {
        "not a regular file" => "is not a regular file".to_string(),
        k => format!("is not a regular file (it is {k})"),
    }
}

/// Opens `path` for reading if it is a regular file (symbolic links are followed) and
/// returns it with its size at the time it was opened. The type is checked before opening,
/// so a FIFO is refused without blocking on it, and again on the opened file.
///
/// Errors (the message does not repeat the path): the file does not exist or cannot be
/// opened (the system's message), or it `is not a regular file (it is a FIFO)` etc.
pub fn open_regular(path: &Path) -> std::result::Result<(File, u64), String> {
    let md = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !md.is_file() {
        return Err(not_regular(md.file_type()));
    }
    let file = File::open(path).map_err(|e| e.to_string())?;
    let md = file.metadata().map_err(|e| e.to_string())?;
    if !md.is_file() {
        return Err(not_regular(md.file_type()));
    }
    Ok((file, md.len()))
}

/// Reads up to `len` bytes of `r` (the size of the file it reads), allocating fallibly: a
/// reader that has more (a file that grew) is cut at `len`.
///
/// Errors: the memory cannot be allocated, or reading fails (messages without the path).
pub fn read_bounded(r: impl Read, len: u64) -> std::result::Result<Vec<u8>, String> {
    let n = usize::try_from(len).map_err(|_| format!("the file's {len} bytes do not fit"))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(n)
        .map_err(|_| format!("cannot allocate {len} bytes to read the file"))?;
    r.take(len)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// Reads a whole regular file ([`open_regular`]), at most the size it had when opened.
///
/// Errors: as [`open_regular`] and [`read_bounded`] (messages without the path).
pub fn read_regular(path: &Path) -> std::result::Result<Vec<u8>, String> {
    let (file, len) = open_regular(path)?;
    read_bounded(file, len)
}

/// The file a write to `path` replaces: `path` itself, or the file a symbolic link at
/// `path` points to (so writing through a link updates its target, as `File::create` would).
fn write_target(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// The directory `path` is written in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates a new, empty temporary file next to `target` (same directory, so that renaming
/// it over `target` is atomic): `.NAME.weft-PID-N.tmp`.
fn create_temp(target: &Path) -> std::io::Result<(File, PathBuf)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent_dir(target);
    let name = target
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let mut tries = 0;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.weft-{}-{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Checks, before anything is computed, that a file can be written at `path`: its
/// directory exists and is a directory that we can create files in, and `path` is not
/// something other than a regular file (a directory, `/dev/null`, a FIFO) — writes replace
/// the target by renaming, which must never happen to those.
///
/// Errors (the message does not repeat the path): `directory D does not exist`,
/// `D is not a directory`, `directory D is not writable (…)`, `P exists and is not a
/// regular file (it is a directory)`.
pub fn check_writable(path: &Path) -> std::result::Result<(), String> {
    if path.file_name().is_none() {
        return Err(format!("{} does not name a file", path.display()));
    }
    let target = write_target(path);
    if let Ok(md) = std::fs::metadata(&target) {
        if !md.is_file() {
            return Err(format!(
                "{} exists and {}",
                path.display(),
                not_regular(md.file_type())
            ));
        }
    }
    let dir = parent_dir(&target);
    match std::fs::metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("directory {} does not exist", dir.display()))
        }
        Err(e) => return Err(format!("directory {}: {e}", dir.display())),
        Ok(md) if !md.is_dir() => return Err(format!("{} is not a directory", dir.display())),
        Ok(_) => {}
    }
    match create_temp(&target) {
        Ok((f, tmp)) => {
            drop(f);
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) => Err(format!("directory {} is not writable ({e})", dir.display())),
    }
}

/// A file written completely to a temporary file next to its target, waiting to be renamed
/// over it ([`StagedFile::commit`]). Dropped without committing, the temporary file is
/// removed and the target is untouched: stage every output first, then commit them all,
/// and a failure while writing any (a full disk) changes none.
#[derive(Debug)]
pub struct StagedFile {
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl StagedFile {
    /// Writes `write`'s bytes to a new temporary file in `path`'s directory (through a
    /// buffer), flushes it and syncs it to disk. The temporary file gets the permissions of
    /// an existing target.
    ///
    /// Errors (the message does not repeat the path): the temporary file cannot be created,
    /// `write` fails, or flushing or syncing fails (a full disk).
    pub fn new(
        path: &Path,
        write: impl FnOnce(&mut dyn Write) -> std::result::Result<(), String>,
    ) -> std::result::Result<StagedFile, String> {
        let target = write_target(path);
        let (file, tmp) = create_temp(&target).map_err(|e| {
            format!(
                "cannot create a file in directory {}: {e}",
                parent_dir(&target).display()
            )
        })?;
        let staged = StagedFile {
            tmp,
            target,
            committed: false,
        };
        let mut w = BufWriter::new(file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| e.error().to_string())?;
        file.sync_all().map_err(|e| e.to_string())?;
        if let Ok(md) = std::fs::metadata(&staged.target) {
            let _ = std::fs::set_permissions(&staged.tmp, md.permissions());
        }
        Ok(staged)
    }

    /// Renames the temporary file over the target (atomically, on one file system).
    ///
    /// Errors: the rename fails (the message does not repeat the path).
    pub fn commit(mut self) -> std::result::Result<(), String> {
        std::fs::rename(&self.tmp, &self.target).map_err(|e| e.to_string())?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes a file atomically: [`StagedFile::new`] then [`StagedFile::commit`]. Either the
/// whole new contents replace `path`, or (on any error) `path` is left as it was.
///
/// Errors: as [`StagedFile`] (the message does not repeat the path).
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::result::Result<(), String>,
) -> std::result::Result<(), String> {
    StagedFile::new(path, write)?.commit()
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}: {e}", path.display()))
}

/// The largest factor by which deflate (zlib) data expands: a PNG's image data can be at
/// most this many times larger than the file.
const DEFLATE_MAX_RATIO: u128 = 1032;

/// An 8-bit greyscale PNG (grey or grey+alpha; colour images are converted with the
/// Rec. 601 luma weights) as `(height, width, pixels)`, row-major, top row first.
///
/// Errors: the file cannot be read, is not a regular file, or cannot be decoded; it is not
/// 8 bits per channel; its header claims more pixels than its compressed data can hold
/// (deflate expands at most 1032:1) or than can be allocated — checked before the image is
/// allocated.
pub fn read_png_gray(path: &Path) -> Result<(usize, usize, Vec<u8>)> {
    let (file, len) = open_regular(path).map_err(|e| io_err(path, e))?;
    let mut dec = png::Decoder::new(std::io::BufReader::new(file.take(len)));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut reader = dec.read_info().map_err(|e| match e {
        png::DecodingError::LimitsExceeded => io_err(
            path,
            "the header claims an image too large to decode (its size in bytes overflows, \
             or a chunk exceeds the decoder's memory limit)",
        ),
        e => io_err(path, e),
    })?;
    let (color, depth) = reader.output_color_type();
    if depth != png::BitDepth::Eight {
        return Err(io_err(path, "only 8-bit PNG images are supported"));
    }
    let (w, h) = reader.info().size();
    let ch = color.samples();
    let raw_bits = reader.info().bits_per_pixel() as u128;
    // Compressed rows: a filter byte and the packed pixels of the file's own format.
    let raw = h as u128 * (1 + (w as u128 * raw_bits).div_ceil(8));
    let out = w as u128 * h as u128 * ch as u128;
    if raw > DEFLATE_MAX_RATIO * len as u128 + 1024 {
        return Err(io_err(
            path,
            format!(
                "the header claims {w} × {h} pixels, more than the file's {len} bytes can hold"
            ),
        ));
    }
    let alloc = |n: u128| -> Result<Vec<u8>> {
        let mut v = Vec::new();
        usize::try_from(n)
            .ok()
            .and_then(|n| v.try_reserve_exact(n).ok())
            .ok_or_else(|| {
                io_err(
                    path,
                    format!("the {w} × {h} image ({n} bytes) cannot be allocated"),
                )
            })?;
        Ok(v)
    };
    let mut buf = alloc(out)?;
    buf.resize(out as usize, 0);
    let info = reader.next_frame(&mut buf).map_err(|e| io_err(path, e))?;
    if info.bit_depth != png::BitDepth::Eight {
        return Err(io_err(path, "only 8-bit PNG images are supported"));
    }
    let (w, h) = (info.width as usize, info.height as usize);
    let ch = info.color_type.samples();
    let mut px = alloc((w * h) as u128)?;
    px.extend(buf[..info.buffer_size()].chunks(ch).map(|p| match ch {
        1 | 2 => p[0],
        _ => (0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32).round() as u8,
    }));
    Ok((h, w, px))
}

/// Encodes an RGB image (`height × width`, row-major, 3 bytes per pixel) as an 8-bit PNG
/// to `w`.
///
/// Errors: the size does not fit a PNG or writing fails; panics if
/// `rgb.len() != 3·height·width`.
pub fn encode_png_rgb(
    w: &mut dyn Write,
    height: usize,
    width: usize,
    rgb: &[u8],
) -> std::result::Result<(), String> {
    assert_eq!(rgb.len(), 3 * height * width, "rgb has the wrong length");
    let (Ok(wd), Ok(ht)) = (u32::try_from(width), u32::try_from(height)) else {
        return Err(format!("a {height} × {width} image is too large for a PNG"));
    };
    let mut enc = png::Encoder::new(w, wd, ht);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc.write_header().map_err(|e| e.to_string())?;
    wr.write_image_data(rgb).map_err(|e| e.to_string())?;
    wr.finish().map_err(|e| e.to_string())
}

/// Writes an RGB image (`height × width`, row-major, 3 bytes per pixel) as an 8-bit PNG,
/// atomically ([`write_atomic`]).
///
/// Errors: the file cannot be written; panics if `rgb.len() != 3·height·width`.
pub fn write_png_rgb(path: &Path, height: usize, width: usize, rgb: &[u8]) -> Result<()> {
    write_atomic(path, |w| encode_png_rgb(w, height, width, rgb)).map_err(|e| io_err(path, e))
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
/// Errors: the file cannot be written (atomically, [`write_atomic`]).
pub fn write_heatmap_png(
    path: &Path,
    height: usize,
    width: usize,
    values: &[f32],
    range: (f32, f32),
    scale: usize,
) -> Result<()> {
    write_atomic(path, |w| {
        encode_heatmap_png(w, height, width, values, range, scale)
    })
    .map_err(|e| io_err(path, e))
}

/// Encodes the heat map of [`write_heatmap_png`] to `w`.
///
/// Errors: writing fails.
pub fn encode_heatmap_png(
    out: &mut dyn Write,
    height: usize,
    width: usize,
    values: &[f32],
    (lo, hi): (f32, f32),
    scale: usize,
) -> std::result::Result<(), String> {
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
    encode_png_rgb(out, h, w, &rgb)
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
