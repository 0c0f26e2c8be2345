//! The requests and responses this client speaks, encoded as Kafka defines them
//! (`clients/src/main/resources/common/message/*.json` in apache/kafka, checked against the
//! schemas of the kafka-clients 4.4.0 jar).

use crate::error::GroupError;
use crate::wire::{Reader, Writer};

/// API keys of the requests this client sends.
pub mod api {
    /// `FindCoordinator`.
    pub const FIND_COORDINATOR: i16 = 10;
    /// `ApiVersions`.
    pub const API_VERSIONS: i16 = 18;
    /// `StreamsGroupHeartbeat` (KIP-1071).
    pub const STREAMS_GROUP_HEARTBEAT: i16 = 88;
    /// `StreamsGroupDescribe` (KIP-1071).
    pub const STREAMS_GROUP_DESCRIBE: i16 = 89;
}

/// The highest `StreamsGroupHeartbeat` version this client implements (v1 is Kafka 4.4's: the
/// same request, a response with a 64-bit acceptable recovery lag and
/// `TopologyDescriptionRequired`, KIP-1331).
pub const MAX_HEARTBEAT_VERSION: i16 = 1;

/// A request frame: size, request header v2 (flexible: every request this client sends but
/// ApiVersions v3 is flexible, and ApiVersions v3 also takes header v2), then the body.
pub fn frame(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut w = Writer::new();
    w.i16(api_key);
    w.i16(version);
    w.i32(correlation_id);
    // The header's client id is a classic int16-length string even in header v2.
    w.nullable_string(Some(client_id));
    w.no_tagged_fields();
    let header = w.into_bytes();
    let size = i32::try_from(header.len() + body.len()).unwrap_or(i32::MAX);
    let mut out = Vec::with_capacity(4 + header.len() + body.len());
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    out
}

// ---------------------------------------------------------------------------------------------
// ApiVersions (key 18), v3: the first flexible version, answered by every broker since 2.4.

/// The ApiVersions version this client sends.
pub const API_VERSIONS_VERSION: i16 = 3;

/// `ApiVersionsRequest` v3 body.
pub fn encode_api_versions_request() -> Vec<u8> {
    let mut w = Writer::new();
    w.compact_string("streamstate");
    w.compact_string(env!("CARGO_PKG_VERSION"));
    w.no_tagged_fields();
    w.into_bytes()
}

/// What a broker supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersions {
    /// `(api_key, min_version, max_version)` for every API the broker answers.
    pub api_keys: Vec<(i16, i16, i16)>,
    /// Finalized cluster features (`name`, max version level), e.g. `("streams.version", 1)`.
    pub finalized_features: Vec<(String, i16)>,
}

impl ApiVersions {
    /// The `(min, max)` versions of `api_key`, if the broker has it.
    pub fn range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.api_keys
            .iter()
            .find(|(k, _, _)| *k == api_key)
            .map(|(_, lo, hi)| (*lo, *hi))
    }

    /// The finalized level of a cluster feature (0 when the feature is not finalized).
    pub fn feature_level(&self, name: &str) -> i16 {
        self.finalized_features
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, level)| *level)
    }
}

/// Decodes an `ApiVersionsResponse` v3 body (after its v0 response header).
pub fn decode_api_versions_response(body: &[u8]) -> Result<ApiVersions, GroupError> {
    let mut r = Reader::new(body, "ApiVersionsResponse");
    let error_code = r.i16()?;
    if error_code != 0 {
        return Err(GroupError::kafka("ApiVersions", error_code, None));
    }
    let api_keys = r.compact_array(|r| {
        let key = (r.i16()?, r.i16()?, r.i16()?);
        r.skip_tagged_fields()?;
        Ok(key)
    })?;
    let _throttle_time_ms = r.i32()?;
    // The finalized features travel in tagged field 2; they tell whether `streams.version` is on.
    let mut finalized_features = Vec::new();
    for _ in 0..r.uvarint()? {
        let tag = r.uvarint()?;
        let size = r.uvarint()? as usize;
        if tag == 2 {
            finalized_features = r
                .compact_array(|r| {
                    let name = r.compact_string()?;
                    let max_level = r.i16()?;
                    let _min_level = r.i16()?;
                    r.skip_tagged_fields()?;
                    Ok((name, max_level))
                })?
                .into_iter()
                .collect();
        } else {
            for _ in 0..size {
                r.i8()?;
            }
        }
    }
    Ok(ApiVersions {
        api_keys,
        finalized_features,
    })
}

// ---------------------------------------------------------------------------------------------
// FindCoordinator (key 10), v4+: batched keys; key type 0 is a group.

/// `FindCoordinatorRequest` v4+ body for one group.
pub fn encode_find_coordinator_request(group_id: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.i8(0);
    w.compact_array(&[group_id], |w, g| w.compact_string(g));
    w.no_tagged_fields();
    w.into_bytes()
}

/// Decodes a `FindCoordinatorResponse` v4+ body into the coordinator's `(node_id, host, port)`.
pub fn decode_find_coordinator_response(body: &[u8]) -> Result<(i32, String, i32), GroupError> {
    let mut r = Reader::new(body, "FindCoordinatorResponse");
    let _throttle_time_ms = r.i32()?;
    let coordinators = r.compact_array(|r| {
        let _key = r.compact_string()?;
        let node_id = r.i32()?;
        let host = r.compact_string()?;
        let port = r.i32()?;
        let error_code = r.i16()?;
        let error_message = r.compact_nullable_string()?;
        r.skip_tagged_fields()?;
        Ok((node_id, host, port, error_code, error_message))
    })?;
    let Some((node_id, host, port, error_code, error_message)) = coordinators.into_iter().next()
    else {
        return Err(GroupError::Malformed(
            "FindCoordinatorResponse without a coordinator".into(),
        ));
    };
    if error_code != 0 {
        return Err(GroupError::kafka(
            "FindCoordinator",
            error_code,
            error_message,
        ));
    }
    Ok((node_id, host, port))
}

// ---------------------------------------------------------------------------------------------
// StreamsGroupHeartbeat (key 88).

/// An internal topic of a sub-topology (changelog or repartition source), as the broker
/// creates it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic's full name, `<application.id>-<store>-changelog` or `...-repartition`.
    pub name: String,
    /// Partitions to create; 0 lets the broker derive them (always 0 for changelogs).
    pub partitions: i32,
    /// Replication factor; 0 uses the broker's default.
    pub replication_factor: i16,
    /// Topic configs, e.g. `("cleanup.policy", "compact")`.
    pub topic_configs: Vec<(String, String)>,
}

/// Indexes into a sub-topology's topic lists of topics that must be co-partitioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopartitionGroup {
    /// Indexes into `Subtopology::source_topics`.
    pub source_topics: Vec<i16>,
    /// Indexes into `Subtopology::source_topic_regex`.
    pub source_topic_regex: Vec<i16>,
    /// Indexes into `Subtopology::repartition_source_topics`.
    pub repartition_source_topics: Vec<i16>,
}

/// One sub-topology: the unit whose partitions become tasks `<subtopology_id>_<partition>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subtopology {
    /// Its id; Kafka Streams uses the sub-topology's number, `"0"`, `"1"`, ...
    pub subtopology_id: String,
    /// User source topics.
    pub source_topics: Vec<String>,
    /// Source topic patterns.
    pub source_topic_regex: Vec<String>,
    /// Changelog topics of its stores.
    pub state_changelog_topics: Vec<TopicInfo>,
    /// Repartition topics it writes.
    pub repartition_sink_topics: Vec<String>,
    /// Repartition topics it reads.
    pub repartition_source_topics: Vec<TopicInfo>,
    /// Groups of its sources that must be co-partitioned.
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// The topology a member sends when it joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// The topology's epoch: raise it to change the topology of a running group.
    pub epoch: i32,
    /// Its sub-topologies.
    pub subtopologies: Vec<Subtopology>,
}

/// The partitions of one sub-topology: a set of tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct TaskIds {
    /// The sub-topology.
    pub subtopology_id: String,
    /// Its partitions (task `<subtopology_id>_<partition>` each).
    pub partitions: Vec<i32>,
}

/// `host:port` of an instance, its `application.server`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// Host name.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// A task's cumulative changelog offset (for the broker's placement of warm-up tasks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskOffset {
    /// The sub-topology.
    pub subtopology_id: String,
    /// The partition.
    pub partition: i32,
    /// The sum of the task's changelog offsets.
    pub offset: i64,
}

/// A `StreamsGroupHeartbeatRequest`; `None` fields are sent as null ("unchanged").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// The group, `application.id`.
    pub group_id: String,
    /// The member id this process generated.
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member leaving to come back.
    pub member_epoch: i32,
    /// The endpoint-information epoch this member last received.
    pub endpoint_information_epoch: i32,
    /// `group.instance.id` for static membership.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// -1 if unchanged; otherwise the time the coordinator waits for revocations.
    pub rebalance_timeout_ms: i32,
    /// The topology; sent on joining only.
    pub topology: Option<Topology>,
    /// Active tasks this member owns.
    pub active_tasks: Option<Vec<TaskIds>>,
    /// Standby tasks this member owns.
    pub standby_tasks: Option<Vec<TaskIds>>,
    /// Warm-up tasks this member owns.
    pub warmup_tasks: Option<Vec<TaskIds>>,
    /// The process (instance) id shared by the members of one process.
    pub process_id: Option<String>,
    /// `application.server`.
    pub user_endpoint: Option<Endpoint>,
    /// Client tags for rack-aware assignment.
    pub client_tags: Option<Vec<(String, String)>>,
    /// Cumulative changelog offsets of tasks.
    pub task_offsets: Option<Vec<TaskOffset>>,
    /// Changelog end offsets of tasks.
    pub task_end_offsets: Option<Vec<TaskOffset>>,
    /// Asks every member of the group to shut down.
    pub shutdown_application: bool,
}

fn write_key_values(w: &mut Writer, kv: &(String, String)) {
    w.compact_string(&kv.0);
    w.compact_string(&kv.1);
    w.no_tagged_fields();
}

fn write_topic_info(w: &mut Writer, t: &TopicInfo) {
    w.compact_string(&t.name);
    w.i32(t.partitions);
    w.i16(t.replication_factor);
    w.compact_array(&t.topic_configs, write_key_values);
    w.no_tagged_fields();
}

fn write_task_ids(w: &mut Writer, t: &TaskIds) {
    w.compact_string(&t.subtopology_id);
    w.compact_array(&t.partitions, |w, p| w.i32(*p));
    w.no_tagged_fields();
}

fn write_task_offset(w: &mut Writer, t: &TaskOffset) {
    w.compact_string(&t.subtopology_id);
    w.i32(t.partition);
    w.i64(t.offset);
    w.no_tagged_fields();
}

fn write_subtopology(w: &mut Writer, s: &Subtopology) {
    w.compact_string(&s.subtopology_id);
    w.compact_array(&s.source_topics, |w, t| w.compact_string(t));
    w.compact_array(&s.source_topic_regex, |w, t| w.compact_string(t));
    w.compact_array(&s.state_changelog_topics, write_topic_info);
    w.compact_array(&s.repartition_sink_topics, |w, t| w.compact_string(t));
    w.compact_array(&s.repartition_source_topics, write_topic_info);
    w.compact_array(&s.copartition_groups, |w, g| {
        w.compact_array(&g.source_topics, |w, i| w.i16(*i));
        w.compact_array(&g.source_topic_regex, |w, i| w.i16(*i));
        w.compact_array(&g.repartition_source_topics, |w, i| w.i16(*i));
        w.no_tagged_fields();
    });
    w.no_tagged_fields();
}

impl HeartbeatRequest {
    /// The body at `version` (0 and 1 are the same request).
    pub fn encode(&self, _version: i16) -> Vec<u8> {
        let mut w = Writer::new();
        w.compact_string(&self.group_id);
        w.compact_string(&self.member_id);
        w.i32(self.member_epoch);
        w.i32(self.endpoint_information_epoch);
        w.compact_nullable_string(self.instance_id.as_deref());
        w.compact_nullable_string(self.rack_id.as_deref());
        w.i32(self.rebalance_timeout_ms);
        w.nullable_struct(self.topology.as_ref(), |w, t| {
            w.i32(t.epoch);
            w.compact_array(&t.subtopologies, write_subtopology);
            w.no_tagged_fields();
        });
        w.compact_nullable_array(self.active_tasks.as_deref(), write_task_ids);
        w.compact_nullable_array(self.standby_tasks.as_deref(), write_task_ids);
        w.compact_nullable_array(self.warmup_tasks.as_deref(), write_task_ids);
        w.compact_nullable_string(self.process_id.as_deref());
        w.nullable_struct(self.user_endpoint.as_ref(), |w, e| {
            w.compact_string(&e.host);
            w.u16(e.port);
            w.no_tagged_fields();
        });
        w.compact_nullable_array(self.client_tags.as_deref(), write_key_values);
        w.compact_nullable_array(self.task_offsets.as_deref(), write_task_offset);
        w.compact_nullable_array(self.task_end_offsets.as_deref(), write_task_offset);
        w.bool(self.shutdown_application);
        w.no_tagged_fields();
        w.into_bytes()
    }
}

/// A group status the coordinator reports in a heartbeat response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// The member's topology epoch is lower than the group's.
    StaleTopology,
    /// Source topics are missing (or a regex matches none).
    MissingSourceTopics,
    /// Topics are not co-partitioned as they must be.
    IncorrectlyPartitionedTopics,
    /// Internal topics are missing; the coordinator is creating them.
    MissingInternalTopics,
    /// A member asked the whole application to shut down.
    ShutdownApplication,
    /// No assignment yet: the broker delays the first one (Kafka 4.4,
    /// `group.streams.initial.rebalance.delay.ms`).
    AssignmentDelayed,
    /// Client tags that rack-aware standby placement needs are missing (Kafka 4.4, v1 only).
    MissingClientTags,
    /// A code this client does not know.
    Unknown(i8),
}

impl StatusCode {
    /// The status for a wire code.
    pub fn from_code(code: i8) -> Self {
        match code {
            0 => StatusCode::StaleTopology,
            1 => StatusCode::MissingSourceTopics,
            2 => StatusCode::IncorrectlyPartitionedTopics,
            3 => StatusCode::MissingInternalTopics,
            4 => StatusCode::ShutdownApplication,
            5 => StatusCode::AssignmentDelayed,
            6 => StatusCode::MissingClientTags,
            other => StatusCode::Unknown(other),
        }
    }

    /// Kafka's name, e.g. `MISSING_SOURCE_TOPICS`.
    pub fn name(self) -> &'static str {
        match self {
            StatusCode::StaleTopology => "STALE_TOPOLOGY",
            StatusCode::MissingSourceTopics => "MISSING_SOURCE_TOPICS",
            StatusCode::IncorrectlyPartitionedTopics => "INCORRECTLY_PARTITIONED_TOPICS",
            StatusCode::MissingInternalTopics => "MISSING_INTERNAL_TOPICS",
            StatusCode::ShutdownApplication => "SHUTDOWN_APPLICATION",
            StatusCode::AssignmentDelayed => "ASSIGNMENT_DELAYED",
            StatusCode::MissingClientTags => "MISSING_CLIENT_TAGS",
            StatusCode::Unknown(_) => "UNKNOWN_STATUS",
        }
    }
}

/// A status with the coordinator's detail (e.g. which topics are missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// What it is.
    pub code: StatusCode,
    /// The coordinator's description.
    pub detail: String,
}

/// The partitions of one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic.
    pub topic: String,
    /// Its partitions.
    pub partitions: Vec<i32>,
}

/// The partitions one instance's tasks hold, for interactive queries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointToPartitions {
    /// The instance's `application.server`.
    pub endpoint: Endpoint,
    /// Partitions of its active tasks.
    pub active_partitions: Vec<TopicPartitions>,
    /// Partitions of its standby tasks.
    pub standby_partitions: Vec<TopicPartitions>,
}

/// A `StreamsGroupHeartbeatResponse`; `None` fields mean "unchanged since the last heartbeat".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code, 0 for none.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// The member id (the one the member sent).
    pub member_id: String,
    /// The member's epoch.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The lag under which a warm-up task counts as caught up.
    pub acceptable_recovery_lag: i64,
    /// How often to send task offsets.
    pub task_offset_interval_ms: i32,
    /// Group statuses.
    pub status: Option<Vec<Status>>,
    /// Target active tasks.
    pub active_tasks: Option<Vec<TaskIds>>,
    /// Target standby tasks.
    pub standby_tasks: Option<Vec<TaskIds>>,
    /// Target warm-up tasks.
    pub warmup_tasks: Option<Vec<TaskIds>>,
    /// v1: the broker wants the topology's description (KIP-1331); false in v0.
    pub topology_description_required: bool,
    /// The epoch of the endpoint information below.
    pub endpoint_information_epoch: i32,
    /// Every instance's endpoint with its partitions.
    pub partitions_by_user_endpoint: Option<Vec<EndpointToPartitions>>,
}

fn read_task_ids(r: &mut Reader<'_>) -> Result<TaskIds, GroupError> {
    let subtopology_id = r.compact_string()?;
    let partitions = r.compact_array(Reader::i32)?;
    r.skip_tagged_fields()?;
    Ok(TaskIds {
        subtopology_id,
        partitions,
    })
}

fn read_endpoint(r: &mut Reader<'_>) -> Result<Endpoint, GroupError> {
    let host = r.compact_string()?;
    let port = r.u16()?;
    r.skip_tagged_fields()?;
    Ok(Endpoint { host, port })
}

fn read_topic_partitions(r: &mut Reader<'_>) -> Result<TopicPartitions, GroupError> {
    let topic = r.compact_string()?;
    let partitions = r.compact_array(Reader::i32)?;
    r.skip_tagged_fields()?;
    Ok(TopicPartitions { topic, partitions })
}

impl HeartbeatResponse {
    /// Decodes a response body (after its v1 header) at `version`.
    pub fn decode(body: &[u8], version: i16) -> Result<Self, GroupError> {
        let mut r = Reader::new(body, "StreamsGroupHeartbeatResponse");
        let mut out = HeartbeatResponse {
            throttle_time_ms: r.i32()?,
            error_code: r.i16()?,
            error_message: r.compact_nullable_string()?,
            member_id: r.compact_string()?,
            member_epoch: r.i32()?,
            heartbeat_interval_ms: r.i32()?,
            ..Default::default()
        };
        // v1 moved the recovery lag after the offset interval and widened it to int64.
        if version >= 1 {
            out.task_offset_interval_ms = r.i32()?;
            out.acceptable_recovery_lag = r.i64()?;
        } else {
            out.acceptable_recovery_lag = i64::from(r.i32()?);
            out.task_offset_interval_ms = r.i32()?;
        }
        out.status = r.compact_nullable_array(|r| {
            let code = StatusCode::from_code(r.i8()?);
            let detail = r.compact_string()?;
            r.skip_tagged_fields()?;
            Ok(Status { code, detail })
        })?;
        out.active_tasks = r.compact_nullable_array(read_task_ids)?;
        out.standby_tasks = r.compact_nullable_array(read_task_ids)?;
        out.warmup_tasks = r.compact_nullable_array(read_task_ids)?;
        if version >= 1 {
            out.topology_description_required = r.bool()?;
        }
        out.endpoint_information_epoch = r.i32()?;
        out.partitions_by_user_endpoint = r.compact_nullable_array(|r| {
            let endpoint = read_endpoint(r)?;
            let active_partitions = r.compact_array(read_topic_partitions)?;
            let standby_partitions = r.compact_array(read_topic_partitions)?;
            r.skip_tagged_fields()?;
            Ok(EndpointToPartitions {
                endpoint,
                active_partitions,
                standby_partitions,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// StreamsGroupDescribe (key 89), v0: the coordinator's view of a group, for tests and diagnostics.

/// The StreamsGroupDescribe version this client sends (v1 adds the topology description).
pub const DESCRIBE_VERSION: i16 = 0;

/// `StreamsGroupDescribeRequest` v0 body for one group.
pub fn encode_describe_request(group_id: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.compact_array(&[group_id], |w, g| w.compact_string(g));
    w.bool(false);
    w.no_tagged_fields();
    w.into_bytes()
}

/// A member as the coordinator sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedMember {
    /// Its member id.
    pub member_id: String,
    /// Its epoch.
    pub member_epoch: i32,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its process id.
    pub process_id: String,
    /// Its `application.server`.
    pub user_endpoint: Option<Endpoint>,
    /// Tasks it owns: active, standby, warm-up.
    pub assignment: [Vec<TaskIds>; 3],
    /// Tasks it is to own: active, standby, warm-up.
    pub target_assignment: [Vec<TaskIds>; 3],
}

/// A streams group as the coordinator sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedGroup {
    /// The group id.
    pub group_id: String,
    /// `Empty`, `NotReady`, `Assigning`, `Reconciling`, `Stable` or `Dead`.
    pub group_state: String,
    /// The group's epoch.
    pub group_epoch: i32,
    /// The epoch of the last computed target assignment.
    pub assignment_epoch: i32,
    /// The topology's epoch, if the group has one.
    pub topology_epoch: Option<i32>,
    /// Its members.
    pub members: Vec<DescribedMember>,
}

fn read_nullable_struct<T>(
    r: &mut Reader<'_>,
    each: impl FnOnce(&mut Reader<'_>) -> Result<T, GroupError>,
) -> Result<Option<T>, GroupError> {
    if r.i8()? < 0 {
        Ok(None)
    } else {
        each(r).map(Some)
    }
}

fn skip_key_value(r: &mut Reader<'_>) -> Result<(), GroupError> {
    r.compact_string()?;
    r.compact_string()?;
    r.skip_tagged_fields()
}

fn skip_topic_info(r: &mut Reader<'_>) -> Result<(), GroupError> {
    r.compact_string()?;
    r.i32()?;
    r.i16()?;
    r.compact_array(skip_key_value)?;
    r.skip_tagged_fields()
}

fn skip_task_offset(r: &mut Reader<'_>) -> Result<(), GroupError> {
    r.compact_string()?;
    r.i32()?;
    r.i64()?;
    r.skip_tagged_fields()
}

fn read_assignment(r: &mut Reader<'_>) -> Result<[Vec<TaskIds>; 3], GroupError> {
    let out = [
        r.compact_array(read_task_ids)?,
        r.compact_array(read_task_ids)?,
        r.compact_array(read_task_ids)?,
    ];
    r.skip_tagged_fields()?;
    Ok(out)
}

fn read_described_member(r: &mut Reader<'_>) -> Result<DescribedMember, GroupError> {
    let member_id = r.compact_string()?;
    let member_epoch = r.i32()?;
    let instance_id = r.compact_nullable_string()?;
    let _rack_id = r.compact_nullable_string()?;
    let _client_id = r.compact_string()?;
    let _client_host = r.compact_string()?;
    let _topology_epoch = r.i32()?;
    let process_id = r.compact_string()?;
    let user_endpoint = read_nullable_struct(r, read_endpoint)?;
    r.compact_array(skip_key_value)?;
    r.compact_array(skip_task_offset)?;
    r.compact_array(skip_task_offset)?;
    let assignment = read_assignment(r)?;
    let target_assignment = read_assignment(r)?;
    let _is_classic = r.bool()?;
    r.skip_tagged_fields()?;
    Ok(DescribedMember {
        member_id,
        member_epoch,
        instance_id,
        process_id,
        user_endpoint,
        assignment,
        target_assignment,
    })
}

/// Decodes a `StreamsGroupDescribeResponse` v0 body for one group.
pub fn decode_describe_response(body: &[u8]) -> Result<DescribedGroup, GroupError> {
    let mut r = Reader::new(body, "StreamsGroupDescribeResponse");
    let _throttle_time_ms = r.i32()?;
    let groups = r.compact_array(|r| {
        let error_code = r.i16()?;
        let error_message = r.compact_nullable_string()?;
        let group_id = r.compact_string()?;
        let group_state = r.compact_string()?;
        let group_epoch = r.i32()?;
        let assignment_epoch = r.i32()?;
        let topology_epoch = read_nullable_struct(r, |r| {
            let epoch = r.i32()?;
            r.compact_nullable_array(|r| {
                r.compact_string()?;
                r.compact_array(Reader::compact_string)?;
                r.compact_array(Reader::compact_string)?;
                r.compact_array(skip_topic_info)?;
                r.compact_array(skip_topic_info)?;
                r.skip_tagged_fields()
            })?;
            r.skip_tagged_fields()?;
            Ok(epoch)
        })?;
        let members = r.compact_array(read_described_member)?;
        let _authorized_operations = r.i32()?;
        r.skip_tagged_fields()?;
        Ok((
            error_code,
            error_message,
            DescribedGroup {
                group_id,
                group_state,
                group_epoch,
                assignment_epoch,
                topology_epoch,
                members,
            },
        ))
    })?;
    let Some((error_code, error_message, group)) = groups.into_iter().next() else {
        return Err(GroupError::Malformed(
            "StreamsGroupDescribeResponse without a group".into(),
        ));
    };
    if error_code != 0 {
        return Err(GroupError::kafka(
            "StreamsGroupDescribe",
            error_code,
            error_message,
        ));
    }
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // The golden bytes below were printed by Kafka 4.4.0's own generated classes
    // (`StreamsGroupHeartbeatRequestData.write` from kafka-clients-4.4.0.jar, through a
    // ten-line Java program) for the same field values.

    #[test]
    fn heartbeat_request_matches_kafkas_serialization() {
        let request = HeartbeatRequest {
            group_id: "app".into(),
            member_id: "m1".into(),
            member_epoch: 0,
            endpoint_information_epoch: 3,
            instance_id: Some("i1".into()),
            rack_id: None,
            rebalance_timeout_ms: 300_000,
            topology: Some(Topology {
                epoch: 2,
                subtopologies: vec![Subtopology {
                    subtopology_id: "0".into(),
                    source_topics: vec!["in".into()],
                    source_topic_regex: vec!["in.*".into()],
                    state_changelog_topics: vec![TopicInfo {
                        name: "app-s-changelog".into(),
                        partitions: 0,
                        replication_factor: 3,
                        topic_configs: vec![("cleanup.policy".into(), "compact".into())],
                    }],
                    repartition_sink_topics: vec!["app-r-repartition".into()],
                    repartition_source_topics: vec![TopicInfo {
                        name: "app-q-repartition".into(),
                        partitions: 4,
                        ..Default::default()
                    }],
                    copartition_groups: vec![CopartitionGroup {
                        source_topics: vec![0],
                        source_topic_regex: vec![],
                        repartition_source_topics: vec![0],
                    }],
                }],
            }),
            active_tasks: Some(vec![TaskIds {
                subtopology_id: "0".into(),
                partitions: vec![1, 3],
            }]),
            standby_tasks: Some(vec![]),
            warmup_tasks: None,
            process_id: Some("p1".into()),
            user_endpoint: Some(Endpoint {
                host: "h".into(),
                port: 8080,
            }),
            client_tags: Some(vec![("zone".into(), "a".into())]),
            task_offsets: Some(vec![TaskOffset {
                subtopology_id: "0".into(),
                partition: 1,
                offset: 42,
            }]),
            task_end_offsets: None,
            shutdown_application: true,
        };
        assert_eq!(
            hex(&request.encode(1)),
            "04617070036d31000000000000000303693100000493e001000000020202300203696e0205696e2e2a02\
             106170702d732d6368616e67656c6f67000000000003020f636c65616e75702e706f6c69637908636f\
             6d70616374000002126170702d722d7265706172746974696f6e02126170702d712d72657061727469\
             74696f6e000000040000010002020000010200000000000202300300000001000000030001000370310\
             102681f900002057a6f6e6502610002023000000001000000000000002a00000100"
        );
        let minimal = HeartbeatRequest {
            group_id: "g".into(),
            member_id: "m".into(),
            member_epoch: 5,
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        assert_eq!(
            hex(&minimal.encode(0)),
            "0267026d00000005000000000000ffffffffff00000000ff0000000000"
        );
    }

    fn expected_response(version: i16) -> HeartbeatResponse {
        HeartbeatResponse {
            throttle_time_ms: 1,
            error_code: 0,
            error_message: None,
            member_id: "m1".into(),
            member_epoch: 7,
            heartbeat_interval_ms: 5000,
            acceptable_recovery_lag: 10_000,
            task_offset_interval_ms: 60_000,
            status: Some(vec![Status {
                code: StatusCode::MissingSourceTopics,
                detail: "in".into(),
            }]),
            active_tasks: Some(vec![TaskIds {
                subtopology_id: "0".into(),
                partitions: vec![0, 2],
            }]),
            standby_tasks: Some(vec![]),
            warmup_tasks: None,
            topology_description_required: version >= 1,
            endpoint_information_epoch: 4,
            partitions_by_user_endpoint: Some(vec![EndpointToPartitions {
                endpoint: Endpoint {
                    host: "h".into(),
                    port: 8080,
                },
                active_partitions: vec![TopicPartitions {
                    topic: "in".into(),
                    partitions: vec![0, 2],
                }],
                standby_partitions: vec![],
            }]),
        }
    }

    #[test]
    fn heartbeat_responses_of_both_versions_decode_as_kafka_wrote_them() {
        let v0 = unhex(
            "00000001000000036d310000000700001388000027100000ea60020103696e00020230030000000000\
             000002000100000000040202681f90000203696e03000000000000000200010000",
        );
        let v1 = unhex(
            "00000001000000036d3100000007000013880000ea600000000000002710020103696e000202300300\
             0000000000000200010001000000040202681f90000203696e03000000000000000200010000",
        );
        assert_eq!(
            HeartbeatResponse::decode(&v0, 0).unwrap(),
            expected_response(0)
        );
        assert_eq!(
            HeartbeatResponse::decode(&v1, 1).unwrap(),
            expected_response(1)
        );
        // Read at the wrong version, the v1 bytes do not pass for a valid response.
        assert_ne!(
            HeartbeatResponse::decode(&v1, 0).ok(),
            Some(expected_response(0))
        );
    }

    #[test]
    fn request_frames_carry_header_v2() {
        let framed = frame(api::STREAMS_GROUP_HEARTBEAT, 1, 7, "c", &[0xaa]);
        // size 13 | key 88 | version 1 | correlation 7 | client id "c" (int16 length) | no tags | body
        assert_eq!(hex(&framed), "0000000d005800010000000700016300aa");
    }

    #[test]
    fn api_versions_response_yields_ranges_and_features() {
        let mut w = Writer::new();
        w.i16(0);
        w.compact_array(&[(88i16, 0i16, 1i16)], |w, (k, lo, hi)| {
            w.i16(*k);
            w.i16(*lo);
            w.i16(*hi);
            w.no_tagged_fields();
        });
        w.i32(0);
        // One tagged field, 2 (finalized features): [("streams.version", max 1, min 1)].
        let mut features = Writer::new();
        features.compact_array(&["streams.version"], |w, n| {
            w.compact_string(n);
            w.i16(1);
            w.i16(1);
            w.no_tagged_fields();
        });
        let features = features.into_bytes();
        w.uvarint(1);
        w.uvarint(2);
        w.uvarint(u32::try_from(features.len()).unwrap());
        let mut bytes = w.into_bytes();
        bytes.extend_from_slice(&features);
        let versions = decode_api_versions_response(&bytes).unwrap();
        assert_eq!(versions.range(api::STREAMS_GROUP_HEARTBEAT), Some((0, 1)));
        assert_eq!(versions.range(api::STREAMS_GROUP_DESCRIBE), None);
        assert_eq!(versions.feature_level("streams.version"), 1);
    }
}
