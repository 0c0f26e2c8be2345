//! `streamstate-group`: the client side of Kafka's Streams rebalance protocol (KIP-1071).
//!
//! librdkafka speaks only the classic and the KIP-848 consumer protocols, and no Rust crate has
//! `StreamsGroupHeartbeat` (API key 88), so this crate writes the protocol itself:
//! - [`wire`]: Kafka's flexible-version primitives (varints, compact strings and arrays, tagged
//!   fields);
//! - [`messages`]: ApiVersions, FindCoordinator and StreamsGroupHeartbeat (v0 and v1, the
//!   version Kafka 4.4 brokers answer);
//! - [`transport`]: blocking TCP behind a small trait (PLAINTEXT only for now);
//! - [`member`]: the member's state machine (join, heartbeat, reconcile, fencing, leave);
//! - [`offsets`]: OffsetCommit v9, the commit a streams group takes from its members only.
//!
//! It is pure Rust; the Python binding lives in `rust/py/src/streams_group.rs`.

pub mod error;
pub mod member;
pub mod messages;
pub mod offsets;
pub mod sasl;
pub mod scram;
pub mod tls;
pub mod transport;
pub mod wire;

pub use error::GroupError;
pub use member::{HeartbeatResult, MemberConfig, MemberState, StreamsGroupMember, TaskId, Tasks};
pub use messages::{
    CopartitionGroup, DescribedGroup, DescribedMember, Endpoint, EndpointToPartitions, Status,
    StatusCode, Subtopology, TaskIds, TaskOffset, TopicInfo, TopicPartitions, Topology,
};
pub use offsets::PartitionOffset;
pub use sasl::{SaslConnector, SaslMechanism};
pub use tls::{TlsConfig, TlsConnector};
pub use transport::{connector_for, Connector, PlaintextConnector, SaslConfig, Transport};
