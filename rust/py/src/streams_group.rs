//! `StreamsGroupMember` for Python: the Streams rebalance protocol's member (KIP-1071) from
//! `streamstate-group`, converted at the boundary. Heartbeats and leaves release the GIL; the
//! Python wrapper (`streamstate.app.streams_group`) gives the tuples their types.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use streamstate_core::error::Location;
use streamstate_group::{
    connector_for, CopartitionGroup, Endpoint, GroupError, MemberConfig, MemberState,
    PartitionOffset, SaslConfig, StreamsGroupMember as CoreMember, Subtopology, TaskId, TaskOffset,
    Tasks, TlsConfig, TopicInfo, Topology,
};

use crate::errors::{guard, streams_error};

/// `(name, partitions, replication_factor, configs)`.
type TopicInfoArg = (String, i32, i16, Vec<(String, String)>);
/// `(source_topics, source_topic_regex, repartition_source_topics)` indexes.
type CopartitionArg = (Vec<i16>, Vec<i16>, Vec<i16>);
/// `(id, source_topics, source_topic_regex, changelogs, repartition_sinks,
///   repartition_sources, copartition_groups)`.
type SubtopologyArg = (
    String,
    Vec<String>,
    Vec<String>,
    Vec<TopicInfoArg>,
    Vec<String>,
    Vec<TopicInfoArg>,
    Vec<CopartitionArg>,
);
type TaskList = Vec<(String, i32)>;
type TasksTuple = (TaskList, TaskList, TaskList);
type TopicPartitionsList = Vec<(String, Vec<i32>)>;
/// A committed offset: `(topic, partition, offset, metadata, error_code)`.
type FetchedTuple = (String, i32, i64, Option<String>, i16);

/// A group error as the `streamstate.errors` class that fits: topology errors are
/// `TopologyError`s, a refused SASL login a `SaslAuthenticationError`, a failed TLS handshake
/// an `SslAuthenticationError` (Kafka's split of `AuthenticationException`), everything else a
/// `StreamsError`. Chosen by the error's variant, never by its text.
fn to_py(py: Python<'_>, err: &GroupError) -> PyErr {
    let class = match err {
        GroupError::Authentication { .. } => "SaslAuthenticationError",
        GroupError::Tls { .. } => "SslAuthenticationError",
        _ => match err.code() {
            Some(130..=132) => "TopologyError",
            // SASL_AUTHENTICATION_FAILED, should a broker send it outside the SASL exchange.
            Some(58) => "SaslAuthenticationError",
            _ => "StreamsError",
        },
    };
    streams_error(py, class, &err.to_string(), &Location::default())
}

fn topic_info((name, partitions, replication_factor, topic_configs): TopicInfoArg) -> TopicInfo {
    TopicInfo {
        name,
        partitions,
        replication_factor,
        topic_configs,
    }
}

fn task_set(tasks: TaskList) -> std::collections::BTreeSet<TaskId> {
    tasks
        .into_iter()
        .map(|(subtopology_id, partition)| TaskId {
            subtopology_id,
            partition,
        })
        .collect()
}

fn task_list(tasks: &std::collections::BTreeSet<TaskId>) -> TaskList {
    tasks
        .iter()
        .map(|t| (t.subtopology_id.clone(), t.partition))
        .collect()
}

fn tasks_tuple(t: &Tasks) -> TasksTuple {
    (
        task_list(&t.active),
        task_list(&t.standby),
        task_list(&t.warmup),
    )
}

/// `(member_epoch, target, revoke, assign, lost, statuses, heartbeat_interval_ms,
///   heartbeat_now, retriable_error)`.
type HeartbeatTuple = (
    i32,
    TasksTuple,
    TasksTuple,
    TasksTuple,
    bool,
    Vec<(String, String)>,
    u64,
    bool,
    Option<String>,
);

/// A described member: `(member_id, epoch, process_id, endpoint, assignment, target)`.
type DescribedMemberTuple = (
    String,
    i32,
    String,
    Option<(String, u16)>,
    TasksTuple,
    TasksTuple,
);
/// `(group_state, group_epoch, assignment_epoch, topology_epoch, members)`.
type DescribeTuple = (String, i32, i32, Option<i32>, Vec<DescribedMemberTuple>);

/// A member of a streams group (see `streamstate.app.streams_group.StreamsGroupMember`).
#[pyclass(frozen, module = "streamstate._core")]
pub struct StreamsGroupMember {
    inner: Mutex<CoreMember>,
}

impl StreamsGroupMember {
    fn lock(&self) -> MutexGuard<'_, CoreMember> {
        // A panic inside a heartbeat leaves no half-updated state worth refusing: recover.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl StreamsGroupMember {
    #[new]
    #[pyo3(signature = (
        bootstrap_servers, group_id, process_id, topology_epoch, subtopologies, *,
        client_id = "streamstate".to_owned(), instance_id = None, rack_id = None,
        rebalance_timeout_ms = 300_000, user_endpoint = None, client_tags = Vec::new(),
        request_timeout_ms = 30_000, security_protocol = "PLAINTEXT".to_owned(),
        sasl_mechanism = None, sasl_username = None, sasl_password = None,
        ssl_ca_location = None, ssl_certificate_location = None, ssl_key_location = None,
        ssl_key_password = None, ssl_verify_hostname = true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        bootstrap_servers: String,
        group_id: String,
        process_id: String,
        topology_epoch: i32,
        subtopologies: Vec<SubtopologyArg>,
        client_id: String,
        instance_id: Option<String>,
        rack_id: Option<String>,
        rebalance_timeout_ms: i32,
        user_endpoint: Option<(String, u16)>,
        client_tags: Vec<(String, String)>,
        request_timeout_ms: u64,
        security_protocol: String,
        sasl_mechanism: Option<String>,
        sasl_username: Option<String>,
        sasl_password: Option<String>,
        ssl_ca_location: Option<String>,
        ssl_certificate_location: Option<String>,
        ssl_key_location: Option<String>,
        ssl_key_password: Option<String>,
        ssl_verify_hostname: bool,
    ) -> PyResult<Self> {
        guard(py, || {
            let sasl = SaslConfig {
                mechanism: sasl_mechanism,
                username: sasl_username,
                password: sasl_password,
            };
            let tls = TlsConfig {
                ca_location: ssl_ca_location,
                certificate_location: ssl_certificate_location,
                key_location: ssl_key_location,
                key_password: ssl_key_password,
                verify_hostname: ssl_verify_hostname,
            };
            let connector =
                connector_for(&security_protocol, &sasl, &tls).map_err(|e| to_py(py, &e))?;
            let subtopologies = subtopologies
                .into_iter()
                .map(
                    |(id, sources, regex, changelogs, sinks, rsources, groups)| Subtopology {
                        subtopology_id: id,
                        source_topics: sources,
                        source_topic_regex: regex,
                        state_changelog_topics: changelogs.into_iter().map(topic_info).collect(),
                        repartition_sink_topics: sinks,
                        repartition_source_topics: rsources.into_iter().map(topic_info).collect(),
                        copartition_groups: groups
                            .into_iter()
                            .map(|(s, r, p)| CopartitionGroup {
                                source_topics: s,
                                source_topic_regex: r,
                                repartition_source_topics: p,
                            })
                            .collect(),
                    },
                )
                .collect();
            let config = MemberConfig {
                bootstrap_servers,
                group_id,
                client_id,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                process_id,
                user_endpoint: user_endpoint.map(|(host, port)| Endpoint { host, port }),
                client_tags,
                topology: Topology {
                    epoch: topology_epoch,
                    subtopologies,
                },
                request_timeout: Duration::from_millis(request_timeout_ms),
            };
            Ok(StreamsGroupMember {
                inner: Mutex::new(CoreMember::new(config, connector)),
            })
        })
    }

    /// The member id (generated here, kept across rejoins).
    #[getter]
    fn member_id(&self) -> String {
        self.lock().member_id().to_owned()
    }

    /// The member epoch (0 before joining and while rejoining).
    #[getter]
    fn member_epoch(&self) -> i32 {
        self.lock().member_epoch()
    }

    /// `"joining"`, `"stable"` or `"left"`.
    #[getter]
    fn state(&self) -> &'static str {
        match self.lock().state() {
            MemberState::Joining => "joining",
            MemberState::Stable => "stable",
            MemberState::Left => "left",
        }
    }

    /// The StreamsGroupHeartbeat version in use, once connected.
    #[getter]
    fn heartbeat_version(&self) -> Option<i16> {
        self.lock().heartbeat_version()
    }

    /// One heartbeat reporting the owned tasks; see `HeartbeatTuple`.
    fn heartbeat(
        &self,
        py: Python<'_>,
        active: TaskList,
        standby: TaskList,
        warmup: TaskList,
    ) -> PyResult<HeartbeatTuple> {
        guard(py, || {
            let owned = Tasks {
                active: task_set(active),
                standby: task_set(standby),
                warmup: task_set(warmup),
            };
            let result = py
                .detach(|| self.lock().heartbeat(Instant::now(), &owned))
                .map_err(|e| to_py(py, &e))?;
            Ok((
                result.member_epoch,
                tasks_tuple(&result.target),
                tasks_tuple(&result.revoke),
                tasks_tuple(&result.assign),
                result.lost,
                result
                    .statuses
                    .iter()
                    .map(|s| (s.code.name().to_owned(), s.detail.clone()))
                    .collect(),
                u64::try_from(result.heartbeat_interval.as_millis()).unwrap_or(u64::MAX),
                result.heartbeat_now,
                result.retriable_error,
            ))
        })
    }

    /// Sets the `TaskOffsets` and `TaskEndOffsets` (`[(subtopology, partition, offset)]`, the
    /// sums of each task's changelog offsets) the next heartbeat carries, once.
    fn set_task_offsets(
        &self,
        offsets: Vec<(String, i32, i64)>,
        end_offsets: Vec<(String, i32, i64)>,
    ) {
        let wire = |v: Vec<(String, i32, i64)>| -> Vec<TaskOffset> {
            v.into_iter()
                .map(|(subtopology_id, partition, offset)| TaskOffset {
                    subtopology_id,
                    partition,
                    offset,
                })
                .collect()
        };
        self.lock()
            .set_task_offsets(wire(offsets), wire(end_offsets));
    }

    /// Commits `[(topic, partition, offset, metadata)]` as this member (OffsetCommit v9 with
    /// its id and epoch); returns `[(topic, partition, error_code)]`.
    fn commit_offsets(
        &self,
        py: Python<'_>,
        offsets: Vec<(String, i32, i64, Option<String>)>,
    ) -> PyResult<Vec<(String, i32, i16)>> {
        guard(py, || {
            let offsets: Vec<PartitionOffset> = offsets
                .into_iter()
                .map(|(topic, partition, offset, metadata)| PartitionOffset {
                    topic,
                    partition,
                    offset,
                    metadata,
                })
                .collect();
            py.detach(|| self.lock().commit_offsets(&offsets))
                .map_err(|e| to_py(py, &e))
        })
    }

    /// The committed offsets of `[(topic, partition)]`: `[(topic, partition, offset, metadata,
    /// error_code)]` (offset -1: none committed).
    fn committed_offsets(
        &self,
        py: Python<'_>,
        partitions: Vec<(String, i32)>,
    ) -> PyResult<Vec<FetchedTuple>> {
        guard(py, || {
            py.detach(|| self.lock().committed_offsets(&partitions))
                .map_err(|e| to_py(py, &e))
        })
    }

    /// Leaves the group (epoch -1, or -2 for a static member).
    fn leave(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            py.detach(|| self.lock().leave()).map_err(|e| to_py(py, &e))
        })
    }

    /// `[((host, port), active [(topic, partitions)], standby [(topic, partitions)])]`.
    fn endpoints(&self) -> Vec<((String, u16), TopicPartitionsList, TopicPartitionsList)> {
        let tp = |list: &[streamstate_group::TopicPartitions]| -> TopicPartitionsList {
            list.iter()
                .map(|t| (t.topic.clone(), t.partitions.clone()))
                .collect()
        };
        self.lock()
            .endpoints()
            .iter()
            .map(|e| {
                (
                    (e.endpoint.host.clone(), e.endpoint.port),
                    tp(&e.active_partitions),
                    tp(&e.standby_partitions),
                )
            })
            .collect()
    }

    /// The coordinator's view: `(group_state, group_epoch, assignment_epoch, topology_epoch,
    /// [(member_id, member_epoch, process_id, endpoint, assignment, target_assignment)])`.
    fn describe(&self, py: Python<'_>) -> PyResult<DescribeTuple> {
        guard(py, || {
            let group = py
                .detach(|| self.lock().describe())
                .map_err(|e| to_py(py, &e))?;
            let tasks = |t: &[Vec<streamstate_group::TaskIds>; 3]| -> TasksTuple {
                let list = |ids: &Vec<streamstate_group::TaskIds>| -> TaskList {
                    ids.iter()
                        .flat_map(|t| t.partitions.iter().map(|p| (t.subtopology_id.clone(), *p)))
                        .collect()
                };
                (list(&t[0]), list(&t[1]), list(&t[2]))
            };
            let members = group
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.clone(),
                        m.member_epoch,
                        m.process_id.clone(),
                        m.user_endpoint.as_ref().map(|e| (e.host.clone(), e.port)),
                        tasks(&m.assignment),
                        tasks(&m.target_assignment),
                    )
                })
                .collect();
            Ok((
                group.group_state,
                group.group_epoch,
                group.assignment_epoch,
                group.topology_epoch,
                members,
            ))
        })
    }

    /// Asks every member of the group to shut down, with the next heartbeats until the
    /// coordinator answers with the `SHUTDOWN_APPLICATION` status. The GIL is released while
    /// waiting for the member, which a heartbeat in flight holds for a round trip.
    fn request_shutdown(&self, py: Python<'_>) {
        py.detach(|| self.lock().request_shutdown());
    }

    /// Sets the epoch of the next heartbeat: tests use it to get the member fenced.
    fn _set_member_epoch_for_test(&self, epoch: i32) {
        self.lock().set_member_epoch_for_test(epoch);
    }
}

/// Adds the class to `_core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StreamsGroupMember>()
}
