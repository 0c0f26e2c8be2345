//! streamstate-core: Kafka Streams' record and state machinery, with no Python in sight.
pub mod admission;
pub mod arrow_build;
pub mod arrow_decode;
pub mod avro;
pub mod civil;
pub mod error;
pub mod json_columns;
pub mod json_path;
pub mod partition_group;
pub mod record_queue;
pub mod restore;
pub mod serde;
pub mod stamp;
pub mod store;
pub mod timestamp;
pub mod value;
pub mod window_count;
