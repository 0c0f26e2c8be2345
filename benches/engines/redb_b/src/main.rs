#[path = "../../common.rs"]
mod common;
use common::*;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::time::Instant;
const T: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

fn load(path: &str, durable_each: bool) -> f64 {
    let _ = std::fs::remove_file(path);
    let db = Database::create(path).unwrap();
    let t = Instant::now();
    let mut i = 0;
    while i < N {
        let mut tx = db.begin_write().unwrap();
        if !durable_each { tx.set_durability(Durability::None).unwrap(); }
        {
            let mut table = tx.open_table(T).unwrap();
            if std::env::var("SORTED").is_ok() {
                let mut b: Vec<(u64, [u8; 8])> = (i..i + BATCH).map(|j| (j, key(j))).collect();
                b.sort_by(|x, y| x.1.cmp(&y.1));
                for (j, k) in b { table.insert(&k[..], &value(j)[..]).unwrap(); }
            } else {
                for j in i..i + BATCH { table.insert(&key(j)[..], &value(j)[..]).unwrap(); }
            }
        }
        tx.commit().unwrap();
        i += BATCH;
    }
    // final durable commit (what flush() does)
    let tx = db.begin_write().unwrap();
    tx.commit().unwrap();
    secs(t)
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or("/tmp/engbench/data".into());
    std::fs::create_dir_all(&dir).unwrap();
    let path = format!("{dir}/redb.db");
    match std::env::args().nth(2).as_deref() {
        Some("crash") => {
            // Load, then die mid-way through unflushed batches: the next open must repair.
            load(&path, false);
            let db = Database::create(&path).unwrap();
            for b in 0..5u64 {
                let mut tx = db.begin_write().unwrap();
                tx.set_durability(Durability::None).unwrap();
                {
                    let mut table = tx.open_table(T).unwrap();
                    for j in 0..BATCH { table.insert(&key(N + b * BATCH + j)[..], &value(j)[..]).unwrap(); }
                }
                tx.commit().unwrap();
            }
            std::process::abort();
        }
        Some("reopen") => {
            let t = Instant::now();
            let db = Database::create(&path).unwrap();
            let open = secs(t);
            let rtx = db.begin_read().unwrap();
            let n = rtx.open_table(T).unwrap().len().unwrap();
            println!("redb: reopen_after_abort={open:.3}s entries={n}");
            return;
        }
        _ => {}
    }
    let durable = load(&path, true);
    let nondurable = load(&path, false);
    let size = std::fs::metadata(&path).unwrap().len();
    let t = Instant::now();
    let db = Database::create(&path).unwrap();
    let reopen = secs(t);
    let t = Instant::now();
    let rtx = db.begin_read().unwrap();
    let table = rtx.open_table(T).unwrap();
    let mut n = 0u64;
    for kv in table.range::<&[u8]>(..).unwrap() { let (k, v) = kv.unwrap(); n += (k.value().len() + v.value().len()) as u64 / 108; }
    let full = secs(t);
    assert_eq!(n, N);
    let t = Instant::now();
    let mut m = 0;
    for s in 0..100u32 {
        let from = (s * 40_000_000u32).to_be_bytes();
        let to = (s * 40_000_000u32 + 400_000u32).to_be_bytes();
        let lo = [&[0u8; 4][..], &from[..]].concat();
        let hi = [&[0u8; 4][..], &to[..]].concat();
        for kv in table.range(&lo[..]..=&hi[..]).unwrap() { kv.unwrap(); m += 1; }
    }
    let ranges = secs(t);
    let t = Instant::now();
    let mut hits = 0;
    for i in (0..N).step_by(10) { if table.get(&key(i)[..]).unwrap().is_some() { hits += 1; } }
    let gets = secs(t);
    println!("redb: load_durable_each_batch={durable:.2}s load_nondurable_then_flush={nondurable:.2}s file={:.0}MB reopen={reopen:.3}s full_scan={full:.2}s 100_ranges({m} rows)={ranges:.3}s 100k_gets({hits})={gets:.2}s", size as f64 / 1e6);
}
