//! Build script: a fingerprint of the code generators' sources (`WEFT_CODEGEN_ID`), part of
//! every on-disk kernel cache key, so that a kernel compiled by other lowering code — an
//! older or newer weft of the same version number — is never loaded (runtime `disk.rs`).

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

/// Every file under `dir`, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = here
        .parent()
        .expect("the runtime crate sits in the workspace");
    let mut h = DefaultHasher::new();
    for dir in [
        "ir/src",
        "backend-cranelift/src",
        "backend-llvm/src",
        "runtime/src",
    ] {
        let d = root.join(dir);
        println!("cargo:rerun-if-changed={}", d.display());
        let mut all = Vec::new();
        files(&d, &mut all);
        for f in all {
            h.write(
                f.strip_prefix(root)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .as_bytes(),
            );
            h.write(&std::fs::read(&f).unwrap_or_default());
        }
    }
    println!("cargo:rustc-env=WEFT_CODEGEN_ID={:016x}", h.finish());
}
