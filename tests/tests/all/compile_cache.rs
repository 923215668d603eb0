//! Compile once, ever (issue 24): the on-disk kernel cache (hits, misses, damaged and foreign
//! entries, several processes filling one cache, eviction), a second process compiling
//! nothing the first compiled, and the tiered CPU JIT (`Backend::Auto`) computing the same
//! bits before and after it switches to LLVM code, on every workload.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use weft::{Backend, Device, DeviceOptions};
use weft_runtime::disk::{DiskCache, Key};
use weft_runtime::stats::{self, Compiler};
use weft_workloads::{blackscholes, cg, coins, ep, jacobi, mdh};

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn entry_files(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for shard in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.path().extension().is_some_and(|e| e == "bin") {
                v.push(f.path());
            }
        }
    }
    v
}

#[test]
fn hits_misses_and_damaged_entries() {
    let dir = tmp_dir("damage");
    let c = DiskCache::new(&dir, 1 << 30);
    let key = Key::new("test", &[b"program text", b"options"]);
    assert_eq!(c.get(&key), None, "an empty cache misses");
    c.put(&key, b"object bytes");
    assert_eq!(c.get(&key).as_deref(), Some(b"object bytes".as_slice()));
    let path = entry_files(&dir).pop().expect("one entry");
    let good = std::fs::read(&path).expect("entry");

    // Each damage is a miss, and the damaged file is removed (then rewritten by a put).
    let other_key = Key::new("test", &[b"another program"]);
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x01;
    let mut wrong_key = good.clone();
    wrong_key[8..40].copy_from_slice(&other_key.0);
    let mut other_version = good.clone();
    other_version[..8].copy_from_slice(b"WEFTKC99");
    let cases: [(&str, Vec<u8>); 5] = [
        ("truncated", good[..good.len() - 7].to_vec()),
        ("flipped bit", flipped),
        ("wrong key", wrong_key),
        ("another format version", other_version),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).expect("write damage");
        assert_eq!(c.get(&key), None, "{what}: a miss");
        assert!(!path.exists(), "{what}: the damaged entry is removed");
        c.put(&key, b"object bytes");
        assert_eq!(
            c.get(&key).as_deref(),
            Some(b"object bytes".as_slice()),
            "{what}"
        );
    }
    // Another weft version computes other keys, so its entries are never found.
    assert_ne!(key, Key::new("test", &[b"program text", b"options2"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eviction_keeps_the_cache_within_its_limit() {
    let dir = tmp_dir("evict");
    // Room for about three entries of 1,000 bytes (plus 80 bytes of framing each).
    let c = DiskCache::new(&dir, 3_300);
    let keys: Vec<Key> = (0..6u8).map(|i| Key::new("test", &[&[i]])).collect();
    for (i, k) in keys.iter().enumerate() {
        c.put(k, &[i as u8; 1000]);
        // Distinct modification times, so that "least recently used" is well defined.
        std::thread::sleep(std::time::Duration::from_millis(20));
        if i == 3 {
            // A hit makes entry 2 the most recently used one.
            assert!(c.get(&keys[2]).is_some());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let u = c.usage();
    assert!(u.bytes <= 3_300 && u.entries == 3, "{u:?}");
    assert!(c.get(&keys[5]).is_some() && c.get(&keys[4]).is_some());
    assert!(c.get(&keys[2]).is_some(), "recently used entries stay");
    assert!(c.get(&keys[0]).is_none() && c.get(&keys[1]).is_none());
    c.clear().expect("clear");
    assert_eq!(c.usage().entries, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a child process of this test binary does, set by the parent.
const CHILD: &str = "WEFT_CACHE_TEST_CHILD";

/// The programs the children compile: one per child index and a shared one.
fn child_programs(k: usize) -> Vec<weft::dsl::Program> {
    use weft::dsl::*;
    let scale = k as f32 + 2.0;
    vec![
        Program::record_named("shared", || {
            let x = In::<Value1f>::named("x");
            Out::named("y", &x * &x + 1.0f32);
        })
        .expect("record"),
        Program::record_named("own", || {
            let x = In::<Value1f>::named("x");
            Out::named("y", &x * scale);
        })
        .expect("record"),
    ]
}

/// The child: compiles its programs with LLVM and prints the compile statistics.
#[test]
fn child() {
    let Ok(k) = std::env::var(CHILD) else {
        return;
    };
    let k: usize = k.parse().expect("child index");
    let dev = Device::open(Backend::Llvm, &DeviceOptions::default()).expect("llvm");
    let x = weft::Array::from_vec([5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0]).expect("x");
    for p in child_programs(k) {
        let y: weft::Array<1, f32> = p.apply_on(&dev, &x).expect("apply");
        let want: Vec<f32> = if p.name() == "shared" {
            vec![2.0, 5.0, 10.0, 17.0, 26.0]
        } else {
            (1..=5).map(|i| i as f32 * (k as f32 + 2.0)).collect()
        };
        assert_eq!(y.to_vec().expect("read"), want);
    }
    let s = stats::snapshot();
    println!(
        "CHILD compiled {} loaded {}",
        s.compiled(Compiler::LlvmHost).count,
        s.loaded(Compiler::LlvmHost).count
    );
}

/// Runs `child` in a new process with the cache in `dir`: (LLVM compiles, cache loads).
fn run_child(dir: &Path, k: usize) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["compile_cache::child", "--exact", "--nocapture", "-q"])
        .env(CHILD, k.to_string())
        .env("WEFT_CACHE_DIR", dir)
        .env_remove("WEFT_CACHE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the test binary")
}

fn counts(c: std::process::Child) -> (u64, u64) {
    let o = c.wait_with_output().expect("child output");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("CHILD compiled "))
        .unwrap_or_else(|| panic!("no counts in:\n{out}"));
    let (c, l) = line.split_once(" loaded ").expect("counts");
    (c.trim().parse().expect("n"), l.trim().parse().expect("n"))
}

/// A second process compiles nothing the first compiled; four processes filling one cache
/// at once all get correct code, and a fifth then loads everything from it.
#[test]
fn later_processes_load_what_earlier_ones_compiled() {
    let dir = tmp_dir("procs");
    assert_eq!(counts(run_child(&dir, 0)), (2, 0), "cold: both compiled");
    assert_eq!(counts(run_child(&dir, 0)), (0, 2), "warm: both loaded");
    let kids: Vec<_> = (1..=4).map(|k| run_child(&dir, k)).collect();
    for c in kids {
        let (compiled, loaded) = counts(c);
        assert_eq!(compiled + loaded, 2);
        assert!(compiled >= 1, "its own program is new");
    }
    for k in 1..=4 {
        assert_eq!(counts(run_child(&dir, k)), (0, 2), "child {k} again");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("cache dir")
        .flatten()
        .flat_map(|s| std::fs::read_dir(s.path()).into_iter().flatten().flatten())
        .filter(|f| f.file_name().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary files left");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every workload gives the same bits on the tiered device before its programs switch to
/// LLVM code (Cranelift's), after (LLVM's), and on the two plain devices. In a child process
/// without the on-disk cache, so that the tiered device compiles with Cranelift first (a
/// warm cache would hand it the LLVM code at once).
#[test]
fn tiered_switch_computes_the_same_bits_on_every_workload() {
    let o = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "compile_cache::tiered_child",
            "--exact",
            "--nocapture",
            "-q",
        ])
        .env(TIER_CHILD, "1")
        .env("WEFT_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .expect("run the test binary");
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("TIERED OK"), "{out}\n{err}");
}

/// What [`tiered_switch_computes_the_same_bits_on_every_workload`]'s child does.
const TIER_CHILD: &str = "WEFT_TIER_TEST_CHILD";

#[test]
fn tiered_child() {
    if std::env::var_os(TIER_CHILD).is_none() {
        return;
    }
    let auto = Device::open(Backend::Auto, &DeviceOptions::default()).expect("auto");
    let cpu = auto.as_cpu().expect("a CPU device");
    let devs = [Device::cpu_cranelift(), Device::cpu_llvm(), auto.clone()];
    // Each workload's results as bits: on the plain devices, then on `auto` before and after
    // the switch.
    let check = |what: &str, run: &dyn Fn(&Device) -> Vec<u64>| {
        let want = run(&devs[0]);
        assert_eq!(run(&devs[1]), want, "{what}: LLVM");
        assert_eq!(run(&auto), want, "{what}: auto, first launches");
        cpu.wait_for_upper_tier();
        assert_eq!(run(&auto), want, "{what}: auto, LLVM code");
    };
    let bits32 = |v: &[f32]| v.iter().map(|x| x.to_bits() as u64).collect::<Vec<_>>();
    let bits64 = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let atoms = mdh::atoms(128);
    check("mdh", &|d| bits32(&mdh::mdh(d, &atoms, 8).expect("mdh")));
    let (s, x, t) = blackscholes::options(5_000);
    check("blackscholes", &|d| {
        let (c, p) = blackscholes::price(d, &s, &x, &t).expect("bs");
        [bits32(&c), bits32(&p)].concat()
    });
    check("jacobi", &|d| {
        let (u, sweeps, _) = jacobi::jacobi(d, 24, 1e-3, 10_000).expect("jacobi");
        [bits32(&u), vec![sweeps as u64]].concat()
    });
    check("ep", &|d| {
        let (sx, sy, q) = ep::ep(d, 16, 1024).expect("ep");
        [bits64(&[sx, sy]), q.to_vec()].concat()
    });
    let a = weft_workloads::data::read_matrix_market(
        &weft_workloads::data::cached("lund_a.mtx").expect("lund_a"),
    )
    .expect("lund_a");
    let b = a.mul(&vec![1.0; a.cols]);
    check("cg", &|d| {
        let da = cg::DeviceCsr::new(&a).expect("csr");
        let s = cg::cg(d, &da, &b, 1e-10, 10_000).expect("cg");
        [bits64(&s.x), vec![s.iterations as u64]].concat()
    });
    let (h, w, img) = coins::load().expect("coins.png");
    check("coins", &|d| {
        let found = coins::find_coins(d, h, w, &img, coins::COINS).expect("coins");
        found
            .iter()
            .flat_map(|c| [c.y as u64, c.x as u64, c.r as u64, c.score.to_bits() as u64])
            .collect()
    });
    let s = stats::snapshot();
    assert_eq!(s.disk_hits + s.disk_writes, 0, "no on-disk cache: {s}");
    assert!(s.tier_switches >= 6, "programs switched: {s}");
    println!("TIERED OK: {} switches", s.tier_switches);
}
