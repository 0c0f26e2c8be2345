//! Reads one partition of a topic from the beginning to its high watermark with rskafka, a
//! pure-Rust client, counting records and bytes: the read rate of the pure-Rust alternative.
//!
//! usage: rskafka_read BOOTSTRAP TOPIC [PARTITION]
use std::time::Instant;

use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use rskafka::client::ClientBuilder;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bootstrap, topic) = (args[1].clone(), args[2].clone());
    let partition: i32 = args.get(3).map(|p| p.parse().unwrap()).unwrap_or(0);
    let started = Instant::now();
    let client = ClientBuilder::new(vec![bootstrap]).build().await.expect("client");
    let pc = client
        .partition_client(topic, partition, UnknownTopicHandling::Error)
        .await
        .expect("partition client");
    let end = pc.get_offset(OffsetAt::Latest).await.expect("end offset");
    let mut position = pc.get_offset(OffsetAt::Earliest).await.expect("start offset");
    let (mut records, mut bytes) = (0u64, 0u64);
    while position < end {
        // 4 MiB per fetch, as streamstate's restore consumer asks librdkafka for.
        let (batch, _high) = pc.fetch_records(position, 1..4 * 1024 * 1024, 500).await.expect("fetch");
        for r in &batch {
            records += 1;
            bytes += (r.record.key.as_ref().map_or(0, Vec::len) + r.record.value.as_ref().map_or(0, Vec::len)) as u64;
            position = r.offset + 1;
        }
        // rskafka drops control batches without telling where they end: a fetch that returned
        // only a transaction marker would leave the position where it is (a stall).
        if batch.is_empty() { break; }
    }
    let s = started.elapsed().as_secs_f64();
    println!(
        "{{\"client\": \"rskafka\", \"records\": {records}, \"bytes\": {bytes}, \"seconds\": {s:.3}, \"records_per_s\": {:.0}}}",
        records as f64 / s
    );
}
