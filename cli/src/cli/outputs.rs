//! The files `weft` writes: `weft run --out NAME=PATH` and `-o FILE`. Everything that can
//! be checked is checked before anything is computed — each output's directory exists and
//! is writable, no two outputs name one file, no output replaces an `--in` file — and every
//! file is written atomically ([`weft::data::StagedFile`]): all outputs of a run are
//! written to temporary files first and renamed over their targets only when every one
//! was written, so a failure (a full disk) replaces none of them.

use super::{split_eq, CliError};
use std::io::Write;
use std::path::{Path, PathBuf};
use weft::data::{check_writable, parent_dir, StagedFile};
use weft_ir::HostArray;

/// One `--out NAME=PATH`, checked: the position of the array it saves and its path.
#[derive(Debug)]
pub struct Out {
    /// The argument as given (`r=r.npy`), for messages.
    pub spec: String,
    /// The output's (or buffer's) position.
    pub index: usize,
    /// Where it is written.
    pub path: PathBuf,
}

/// Which file a path names, for comparing paths: the device and inode of an existing file
/// (so links and different spellings of one file compare equal), or the canonical
/// directory and file name of a file yet to be created.
#[derive(Debug, PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(md) = std::fs::metadata(path) {
        return Some(FileId::Inode(md.dev(), md.ino()));
    }
    let dir = std::fs::canonicalize(parent_dir(path)).ok()?;
    Some(FileId::Path(dir.join(path.file_name()?)))
}

/// Checks `-o FILE` (or any single output file) before computing: see
/// [`check_writable`]. `flag` is how the argument is named in the message (`-o`).
///
/// Errors: `error: -o FILE: directory D does not exist` and the like.
pub fn check_file(flag: &str, path: &Path) -> Result<(), CliError> {
    check_writable(path).map_err(|m| CliError(format!("error: {flag} {}: {m}", path.display())))
}

/// Checks every `--out NAME=PATH` of `specs` before computing: `index` finds the output
/// NAME names (or fails with a message naming it); each path must be writable
/// ([`check_writable`]); no two `--out` may name one file, and none may name a file an
/// `--in` reads (`inputs`: the `--in` argument and its path).
///
/// Errors: a message naming the `--out` argument(s) concerned.
pub fn check_outs(
    specs: &[String],
    index: impl Fn(&str) -> Result<usize, CliError>,
    inputs: &[(String, PathBuf)],
) -> Result<Vec<Out>, CliError> {
    let mut outs: Vec<(Out, Option<FileId>)> = Vec::new();
    let in_ids: Vec<(&String, FileId)> = inputs
        .iter()
        .filter_map(|(spec, p)| Some((spec, file_id(p)?)))
        .collect();
    for spec in specs {
        let (name, path) = split_eq(spec, "--out")?;
        let index = index(name)?;
        let path = PathBuf::from(path);
        check_writable(&path).map_err(|m| CliError(format!("error: --out {spec}: {m}")))?;
        let id = file_id(&path);
        if let Some(id) = &id {
            if let Some((other, _)) = outs.iter().find(|(_, o)| o.as_ref() == Some(id)) {
                return Err(format!(
                    "error: --out {} and --out {spec} write the same file; give each output \
                     its own path",
                    other.spec
                )
                .into());
            }
            if let Some((input, _)) = in_ids.iter().find(|(_, i)| i == id) {
                return Err(format!(
                    "error: --out {spec} would replace the file that --in {input} reads; \
                     write the output to another path"
                )
                .into());
            }
        }
        let out = Out {
            spec: spec.clone(),
            index,
            path,
        };
        outs.push((out, id));
    }
    Ok(outs.into_iter().map(|(o, _)| o).collect())
}

/// Writes every output: `.png` paths as heat maps, others as `.npy`; `array(i)` is the
/// array at position `i`. All are staged to temporary files first and renamed over their
/// targets only once every one was written completely.
///
/// Errors: a message naming the `--out` argument whose file could not be written; then no
/// output file is changed.
pub fn write_outs<'a>(
    outs: &[Out],
    array: impl Fn(usize) -> &'a HostArray,
) -> Result<(), CliError> {
    let mut staged = Vec::new();
    for o in outs {
        let a = array(o.index);
        let png = o.path.extension().is_some_and(|e| e == "png");
        let s = StagedFile::new(&o.path, |w: &mut dyn Write| {
            if png {
                super::iteration::encode_png(w, a)
            } else {
                weft::npy::write_npy_to(w, a)
            }
        })
        .map_err(|m| CliError(format!("error: --out {}: {m}", o.spec)))?;
        staged.push((o, s));
    }
    for (o, s) in staged {
        s.commit()
            .map_err(|m| CliError(format!("error: --out {}: {m}", o.spec)))?;
    }
    Ok(())
}

/// Writes `text` to `path` atomically (`-o FILE` of the module transformations).
///
/// Errors: `error: -o FILE: …`.
pub fn write_text(flag: &str, path: &Path, text: &str) -> Result<(), CliError> {
    weft::data::write_atomic(path, |w| {
        w.write_all(text.as_bytes()).map_err(|e| e.to_string())
    })
    .map_err(|m| CliError(format!("error: {flag} {}: {m}", path.display())))
}
