#[path = "../../common.rs"]
mod common;
use common::*;
use fjall::{Database, KeyspaceCreateOptions, PersistMode};
use std::time::Instant;

fn dir_size(p: &std::path::Path) -> u64 {
    let mut s = 0;
    for e in std::fs::read_dir(p).unwrap() { let e = e.unwrap(); let m = e.metadata().unwrap(); s += if m.is_dir() { dir_size(&e.path()) } else { m.len() }; }
    s
}

fn load(path: &str, durable_each: bool) -> f64 {
    let _ = std::fs::remove_dir_all(path);
    let db = Database::builder(path).open().unwrap();
    let ks = db.keyspace("kv", KeyspaceCreateOptions::default).unwrap();
    let t = Instant::now();
    let mut i = 0;
    while i < N {
        let mut b = db.batch();
        if durable_each { b = b.durability(Some(PersistMode::SyncAll)); }
        for j in i..i + BATCH { b.insert(&ks, key(j).to_vec(), value(j).to_vec()); }
        b.commit().unwrap();
        i += BATCH;
    }
    db.persist(PersistMode::SyncAll).unwrap();
    secs(t)
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or("/tmp/engbench/data".into());
    std::fs::create_dir_all(&dir).unwrap();
    let path = format!("{dir}/fjall");
    let durable = load(&path, true);
    let nondurable = load(&path, false);
    let size = dir_size(std::path::Path::new(&path));
    let t = Instant::now();
    let db = Database::builder(&path).open().unwrap();
    let ks = db.keyspace("kv", KeyspaceCreateOptions::default).unwrap();
    let reopen = secs(t);
    let t = Instant::now();
    let mut n = 0u64;
    for kv in ks.iter() { let (k, v) = kv.into_inner().unwrap(); n += (k.len() + v.len()) as u64 / 108; }
    let full = secs(t);
    assert_eq!(n, N);
    let t = Instant::now();
    let mut m = 0;
    for s in 0..100u32 {
        let from = (s * 40_000_000u32).to_be_bytes();
        let to = (s * 40_000_000u32 + 400_000u32).to_be_bytes();
        let lo = [&[0u8; 4][..], &from[..]].concat();
        let hi = [&[0u8; 4][..], &to[..]].concat();
        for kv in ks.range(lo..=hi) { kv.into_inner().unwrap(); m += 1; }
    }
    let ranges = secs(t);
    let t = Instant::now();
    let mut hits = 0;
    for i in (0..N).step_by(10) { if ks.get(key(i)).unwrap().is_some() { hits += 1; } }
    let gets = secs(t);
    println!("fjall: load_durable_each_batch={durable:.2}s load_nondurable_then_flush={nondurable:.2}s dir={:.0}MB reopen={reopen:.3}s full_scan={full:.2}s 100_ranges({m} rows)={ranges:.3}s 100k_gets({hits})={gets:.2}s", size as f64 / 1e6);
}
