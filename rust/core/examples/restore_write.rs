//! Where restoration's write time goes: applies a changelog-shaped workload (100-byte values
//! over 100k keys, each key written about every 100k records) to a `PersistentKeyValueStore`
//! with `process_next`, in write batches of a given size, and reports records/s and CPU time.
//!
//! usage: cargo run --release -p streamstate-core --example restore_write -- [RECORDS] [BATCH]
//! [MODE]; MODE `bulk` (the default: `process_next`, which lets the persistent store write
//! sorted runs into its tables) or `batch` (each batch as one write batch through fjall's
//! memtable and journal, the path before the bulk one).
// The report on stdout is what this example is for.
#![allow(clippy::print_stdout)]
use std::time::Instant;

use streamstate_core::restore::{process_next, ChangelogRecord};
use streamstate_core::store::{KeyValueStore, PersistentKeyValueStore};

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: i64 = args.get(1).map_or(1_000_000, |a| a.parse().unwrap());
    let batch: i64 = args.get(2).map_or(10_000, |a| a.parse().unwrap());
    let mode = args.get(3).map_or("bulk", String::as_str);
    let dir = std::env::temp_dir().join(format!("restore-write-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = PersistentKeyValueStore::open("s", &dir).unwrap();
    let value =
        |i: i64| format!("{i:016x}{}", "0123456789abcdef".repeat(6)).into_bytes()[..100].to_vec();
    let key = |i: i64| format!("key-{:08}", (i * 7919) % 100_000).into_bytes();
    let (t, c) = (Instant::now(), cpu_seconds());
    let mut i = 0;
    while i < n {
        let records: Vec<ChangelogRecord> = (i..(i + batch).min(n))
            .map(|j| (j, Some(key(j)), Some(value(j))))
            .collect();
        if mode == "batch" {
            store
                .apply_batch(
                    records
                        .into_iter()
                        .map(|(_, k, v)| (k.unwrap(), v))
                        .collect(),
                )
                .unwrap();
        } else {
            process_next(&store, records, n).unwrap();
        }
        i += batch;
    }
    let applied = t.elapsed().as_secs_f64();
    store.flush().unwrap();
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    println!(
        "{{\"mode\": \"{mode}\", \"records\": {n}, \"batch\": {batch}, \"apply_s\": {applied:.2}, \"wall_s\": {wall:.2}, \
         \"cpu_s\": {cpu:.2}, \"records_per_s\": {:.0}}}",
        n as f64 / wall
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
