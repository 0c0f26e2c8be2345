//! streamstate-fetch: changelog restoration's fetch, in Rust.
//!
//! A [`ChangelogFetcher`] reads changelog partitions with librdkafka (manual assignment, no
//! consumer group) and applies what it reads to each partition's store with the core's
//! [`process_next`](streamstate_core::restore::process_next), so changelog records never leave
//! Rust. It is the fetch half of Kafka Streams' `StoreChangelogReader`; the protocol half
//! (end offsets taken once, checkpoint + 1 or the log start, completion by position, wipes on
//! an invalid offset, listener callbacks, checkpoints) stays with the caller, which drives it
//! with the same calls it makes on a confluent-kafka consumer (watermarks, assign, position,
//! pause) plus one call, [`ChangelogFetcher::restore`], in place of poll-then-apply.
//!
//! Partitions are spread over up to `parallelism` librdkafka consumers, each read and applied on
//! its own thread during a `restore` call: librdkafka decompresses a consumer's fetches on one
//! broker thread, so one consumer per worker is what lets partitions restore in parallel.

mod client;
mod fetcher;

pub use client::{KafkaFailure, Settings, UnsupportedSetting};
pub use fetcher::{
    ChangelogFetcher, FetchError, PartitionRestore, RestoreTarget, OFFSET_BEGINNING,
};

/// The version of the librdkafka linked in, e.g. `2.12.1`.
pub fn librdkafka_version() -> String {
    rdkafka::util::get_rdkafka_version().1
}
