//! Reads one partition of a topic from the beginning to its high watermark with librdkafka
//! (the `rdkafka` crate's BaseConsumer, manual assignment), counting records and bytes:
//! the read rate a Rust fetcher built on librdkafka can reach, with no store behind it.
//!
//! usage: rdkafka_read BOOTSTRAP TOPIC [PARTITION]
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bootstrap, topic) = (&args[1], &args[2]);
    let partition: i32 = args.get(3).map(|p| p.parse().unwrap()).unwrap_or(0);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "rdkafka-read")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .set("isolation.level", "read_uncommitted")
        .set("enable.partition.eof", "true")
        .set("max.partition.fetch.bytes", "4194304")
        .create()
        .expect("consumer");
    let started = Instant::now();
    let (_, end) = consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(30))
        .expect("watermarks");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let (mut records, mut bytes, mut position) = (0u64, 0u64, 0i64);
    while position < end {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                records += 1;
                bytes += (m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len)) as u64;
                position = m.offset() + 1;
            }
            Some(Err(KafkaError::PartitionEOF(_))) => {
                let p = consumer.position().unwrap();
                if let Some(Offset::Offset(o)) = p.find_partition(topic, partition).map(|e| e.offset()) {
                    position = position.max(o);
                }
            }
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    let s = started.elapsed().as_secs_f64();
    println!(
        "{{\"client\": \"rdkafka\", \"records\": {records}, \"bytes\": {bytes}, \"seconds\": {s:.3}, \"records_per_s\": {:.0}}}",
        records as f64 / s
    );
}
