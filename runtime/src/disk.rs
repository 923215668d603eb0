//! The on-disk kernel cache (issue 24; Dr.Jit's `~/.drjit` and Warp's kernel cache): compiled
//! artifacts — LLVM host objects and PTX — kept across processes, keyed by a hash of
//! everything that decides their bits. PTX → SASS is left to the CUDA driver's JIT and its
//! own compute cache (a cubin from the driver's linker ran slower: `cuda/mod.rs`).
//!
//! An entry is one file, `DIR/ab/abcdef….bin` for key `abcdef…`: the magic `WEFTKC01`, the
//! 32-byte key, the payload's length (u64, little-endian), the payload, and the BLAKE3 hash
//! of the payload. A read checks all of them, so a truncated, bit-flipped, foreign or
//! misplaced file is a miss (and is removed), never a wrong kernel. Writes go to a temporary
//! file in the same directory renamed over the entry, so readers in other processes see a
//! whole entry or none. After each write, the least recently used entries (by modification
//! time, which a hit refreshes) are removed until the cache is within its size limit.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::stats;

/// The first bytes of every entry (format version 1).
const MAGIC: &[u8; 8] = b"WEFTKC01";
/// Magic, key, payload length.
const HEADER: usize = 8 + 32 + 8;
/// The payload's BLAKE3 hash.
const TRAILER: usize = 32;

/// The process's cache ([`DiskCache::global`]).
static GLOBAL: OnceLock<Option<DiskCache>> = OnceLock::new();

/// The size limit when `WEFT_CACHE_LIMIT` does not set one: 1 GiB.
pub const DEFAULT_LIMIT: u64 = 1 << 30;

/// The key of one artifact: the BLAKE3 hash of its kind, weft's version, the fingerprint of
/// its code generators' sources (`WEFT_CODEGEN_ID`, runtime/build.rs) and every part that
/// decides its bits (the canonical IR text, backend, target CPU and features or `sm`,
/// options, LLVM and driver versions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key(pub [u8; 32]);

impl Key {
    /// The key of an artifact of `kind` (`"llvm-host"`, `"ptx"`) made from
    /// `parts` (each hashed with its length, so no two lists of parts collide by
    /// concatenation).
    pub fn new(kind: &str, parts: &[&[u8]]) -> Key {
        let mut h = blake3::Hasher::new();
        for p in [
            MAGIC.as_slice(),
            env!("CARGO_PKG_VERSION").as_bytes(),
            // The code generators' sources (runtime/build.rs): a kernel another build's
            // lowering made is a miss, not a hit.
            env!("WEFT_CODEGEN_ID").as_bytes(),
            kind.as_bytes(),
        ]
        .into_iter()
        .chain(parts.iter().copied())
        {
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p);
        }
        Key(*h.finalize().as_bytes())
    }

    /// The key in lowercase hexadecimal (64 characters).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A kernel cache in one directory (shared safely by several processes).
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
    limit: u64,
}

/// What [`DiskCache::usage`] counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Entries.
    pub entries: u64,
    /// Bytes the entries take.
    pub bytes: u64,
}

impl DiskCache {
    /// A cache in `dir` (created on the first write) holding at most `limit` bytes.
    pub fn new(dir: impl Into<PathBuf>, limit: u64) -> DiskCache {
        DiskCache {
            dir: dir.into(),
            limit,
        }
    }

    /// The cache the environment asks for: `None` when `WEFT_CACHE=off` (or `0`, `false`,
    /// `no`) or no directory can be found; else in `WEFT_CACHE_DIR`, `$XDG_CACHE_HOME/weft`
    /// or `$HOME/.cache/weft`, with the limit `WEFT_CACHE_LIMIT` gives in MiB (default
    /// [`DEFAULT_LIMIT`]).
    pub fn from_env() -> Option<DiskCache> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        if let Some(v) = var("WEFT_CACHE") {
            let v = v.to_string_lossy().to_ascii_lowercase();
            if matches!(v.as_str(), "off" | "0" | "false" | "no") {
                return None;
            }
        }
        let dir = var("WEFT_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("weft")))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache").join("weft")))?;
        let limit = var("WEFT_CACHE_LIMIT")
            .and_then(|v| v.to_string_lossy().trim().parse::<u64>().ok())
            .map_or(DEFAULT_LIMIT, |mib| mib.saturating_mul(1 << 20));
        Some(DiskCache::new(dir, limit))
    }

    /// The process's cache ([`DiskCache::from_env`], read once), which the devices use.
    pub fn global() -> Option<&'static DiskCache> {
        GLOBAL.get_or_init(DiskCache::from_env).as_ref()
    }

    /// Turns the process's cache off if no device has used it yet (the fuzzer's thousands
    /// of one-off programs would only fill it); returns whether it is off.
    pub fn disable_global() -> bool {
        GLOBAL.set(None).is_ok() || GLOBAL.get().is_some_and(Option::is_none)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its size limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    fn path(&self, key: &Key) -> PathBuf {
        let hex = key.hex();
        self.dir.join(&hex[..2]).join(format!("{hex}.bin"))
    }

    /// The payload stored under `key`, if a whole, intact entry of that key is there (a hit
    /// marks it as just used). A damaged or foreign file is removed and counts as a miss.
    pub fn get(&self, key: &Key) -> Option<Vec<u8>> {
        let path = self.path(key);
        let Ok(bytes) = fs::read(&path) else {
            stats::count_disk(stats::Disk::Miss);
            return None;
        };
        match decode(&bytes, key) {
            Some(payload) => {
                stats::count_disk(stats::Disk::Hit);
                // Best effort: the entry is the most recently used one now.
                if let Ok(f) = fs::File::options().append(true).open(&path) {
                    let _ = f.set_modified(SystemTime::now());
                }
                Some(payload.to_vec())
            }
            None => {
                stats::count_disk(stats::Disk::Corrupt);
                stats::count_disk(stats::Disk::Miss);
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `payload` under `key` (atomically: other processes see the whole entry or
    /// none), then evicts least recently used entries past the limit. Best effort: a cache
    /// that cannot be written (a read-only or full disk) only loses the entry.
    pub fn put(&self, key: &Key, payload: &[u8]) {
        if self.write(key, payload).is_ok() {
            stats::count_disk(stats::Disk::Write);
            self.evict();
        }
    }

    fn write(&self, key: &Key, payload: &[u8]) -> std::io::Result<()> {
        let path = self.path(key);
        let dir = path.parent().unwrap_or(&self.dir);
        fs::create_dir_all(dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".bin")
            .tempfile_in(dir)?;
        tmp.write_all(&encode(key, payload))?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Every entry with its size and last use.
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let mut out = Vec::new();
        let Ok(shards) = fs::read_dir(&self.dir) else {
            return out;
        };
        for shard in shards.flatten() {
            let Ok(files) = fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let p = f.path();
                let is_entry = p.extension().is_some_and(|e| e == "bin")
                    && !f.file_name().to_string_lossy().starts_with('.');
                if let (true, Ok(md)) = (is_entry, f.metadata()) {
                    let used = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    out.push((p, md.len(), used));
                }
            }
        }
        out
    }

    /// Removes least recently used entries until the cache holds at most its limit.
    fn evict(&self) {
        let mut es = self.entries();
        let mut total: u64 = es.iter().map(|e| e.1).sum();
        if total <= self.limit {
            return;
        }
        es.sort_by_key(|e| e.2);
        for (p, len, _) in es {
            if total <= self.limit {
                break;
            }
            if fs::remove_file(&p).is_ok() {
                stats::count_disk(stats::Disk::Evicted);
            }
            total = total.saturating_sub(len);
        }
    }

    /// How many entries the cache holds and their bytes.
    pub fn usage(&self) -> Usage {
        let es = self.entries();
        Usage {
            entries: es.len() as u64,
            bytes: es.iter().map(|e| e.1).sum(),
        }
    }

    /// Removes every entry (and temporary files of interrupted writes).
    ///
    /// # Errors
    /// The directory exists but an entry cannot be removed.
    pub fn clear(&self) -> std::io::Result<()> {
        let Ok(shards) = fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for shard in shards.flatten() {
            if shard.file_type().is_ok_and(|t| t.is_dir()) {
                for f in fs::read_dir(shard.path())?.flatten() {
                    if f.path().extension().is_some_and(|e| e == "bin") {
                        fs::remove_file(f.path())?;
                    }
                }
                let _ = fs::remove_dir(shard.path());
            }
        }
        Ok(())
    }
}

/// An entry's bytes: magic, key, payload length, payload, payload hash.
fn encode(key: &Key, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + payload.len() + TRAILER);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&key.0);
    b.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    b.extend_from_slice(payload);
    b.extend_from_slice(blake3::hash(payload).as_bytes());
    b
}

/// The payload of an entry of `key`, or `None` if `bytes` is not exactly such an entry.
fn decode<'a>(bytes: &'a [u8], key: &Key) -> Option<&'a [u8]> {
    let head = bytes.get(..HEADER)?;
    if &head[..8] != MAGIC || head[8..40] != key.0 {
        return None;
    }
    let len = u64::from_le_bytes(head[40..48].try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    if bytes.len() != HEADER.checked_add(len)?.checked_add(TRAILER)? {
        return None;
    }
    let payload = &bytes[HEADER..HEADER + len];
    (blake3::hash(payload).as_bytes() == &bytes[HEADER + len..]).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_a_miss() {
        let key = Key::new("test", &[b"a", b"b"]);
        assert_ne!(key, Key::new("test", &[b"ab"]), "parts are length-prefixed");
        let e = encode(&key, b"payload");
        assert_eq!(decode(&e, &key), Some(b"payload".as_slice()));
        // Truncated, extended, a flipped bit anywhere, another key, another magic.
        assert_eq!(decode(&e[..e.len() - 1], &key), None);
        let mut longer = e.clone();
        longer.push(0);
        assert_eq!(decode(&longer, &key), None);
        for i in 0..e.len() {
            let mut f = e.clone();
            f[i] ^= 0x10;
            assert_eq!(decode(&f, &key), None, "bit flipped in byte {i}");
        }
        assert_eq!(decode(&e, &Key::new("test", &[b"c"])), None);
        assert_eq!(decode(&[], &key), None);
    }
}
