#[path = "../../common.rs"]
mod common;
use common::*;
use rocksdb::{Options, WriteBatch, WriteOptions, DB};
use std::time::Instant;

fn load(path: &str, durable_each: bool) -> f64 {
    let _ = std::fs::remove_dir_all(path);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let db = DB::open(&opts, path).unwrap();
    let mut wo = WriteOptions::default();
    wo.set_sync(durable_each);
    let t = Instant::now();
    let mut i = 0;
    while i < N {
        let mut b = WriteBatch::default();
        for j in i..i + BATCH { b.put(key(j), value(j)); }
        db.write_opt(b, &wo).unwrap();
        i += BATCH;
    }
    db.flush().unwrap();
    secs(t)
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or("/tmp/engbench/data".into());
    std::fs::create_dir_all(&dir).unwrap();
    let path = format!("{dir}/rocks");
    let durable = load(&path, true);
    let nondurable = load(&path, false);
    let t = Instant::now();
    let db = DB::open_default(&path).unwrap();
    let reopen = secs(t);
    let t = Instant::now();
    let mut n = 0u64;
    for kv in db.iterator(rocksdb::IteratorMode::Start) { let (k, v) = kv.unwrap(); n += (k.len() + v.len()) as u64 / 108; }
    let full = secs(t);
    assert_eq!(n, N);
    let t = Instant::now();
    let mut hits = 0;
    for i in (0..N).step_by(10) { if db.get(key(i)).unwrap().is_some() { hits += 1; } }
    let gets = secs(t);
    println!("rocksdb: load_durable_each_batch={durable:.2}s load_nondurable_then_flush={nondurable:.2}s reopen={reopen:.3}s full_scan={full:.2}s 100k_gets({hits})={gets:.2}s");
}
