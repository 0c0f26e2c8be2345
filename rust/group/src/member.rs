//! A member of a streams group (KIP-1071): join, heartbeat, reconcile, leave.
//!
//! The member does not own tasks itself: the caller (the stream thread) tells each
//! [`StreamsGroupMember::heartbeat`] which tasks it owns, and gets back the broker's target
//! assignment with what to revoke and what to assign. The protocol is then the one KIP-1071 and
//! Kafka's `StreamsMembershipManager` follow:
//! - the broker never gives a task to a member before its previous owner has reported, in a
//!   heartbeat, that it no longer owns it; so a member must revoke (commit and close) the tasks
//!   not in its target and heartbeat at once with its new owned tasks, without waiting for the
//!   heartbeat interval ([`HeartbeatResult::heartbeat_now`]);
//! - `FENCED_MEMBER_EPOCH` and `UNKNOWN_MEMBER_ID` mean the broker has already given this
//!   member's tasks to others: they are lost (closed without committing) and the member rejoins
//!   with epoch 0 and the same member id;
//! - `NOT_COORDINATOR` and `COORDINATOR_NOT_AVAILABLE` mean the group moved: find the
//!   coordinator again and retry.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{codes, GroupError};
use crate::messages::{
    self, api, DescribedGroup, Endpoint, EndpointToPartitions, HeartbeatRequest, HeartbeatResponse,
    Status, StatusCode, TaskIds, TaskOffset, Topology,
};
use crate::offsets::{
    decode_offset_commit_response, decode_offset_fetch_response, encode_offset_commit_request,
    encode_offset_fetch_request, FetchedOffset, PartitionOffset, OFFSET_COMMIT,
    OFFSET_COMMIT_VERSION, OFFSET_FETCH, OFFSET_FETCH_VERSION,
};
use crate::transport::{parse_host_port, Connection, Connector};

/// How long to wait before retrying when the coordinator is loading or moving.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Epoch to leave the group for good.
const LEAVE_EPOCH: i32 = -1;
/// Epoch of a static member leaving to come back (its tasks wait for it).
const STATIC_LEAVE_EPOCH: i32 = -2;

/// Errors after which the coordinator is looked up again and the request retried.
fn is_coordinator_error(code: i16) -> bool {
    matches!(
        code,
        codes::NOT_COORDINATOR
            | codes::COORDINATOR_NOT_AVAILABLE
            | codes::COORDINATOR_LOAD_IN_PROGRESS
    )
}

/// Settings of a member; the names follow Kafka Streams' configs.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    /// `bootstrap.servers`, comma-separated `host:port`.
    pub bootstrap_servers: String,
    /// The group: `application.id`.
    pub group_id: String,
    /// `client.id`, sent in request headers.
    pub client_id: String,
    /// `group.instance.id`: static membership.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// The time the coordinator waits for this member to revoke tasks (`max.poll.interval.ms`
    /// in Kafka Streams).
    pub rebalance_timeout_ms: i32,
    /// The id of this process, shared by its stream threads (a UUID in Kafka Streams).
    pub process_id: String,
    /// `application.server`.
    pub user_endpoint: Option<Endpoint>,
    /// `client.tag.*`.
    pub client_tags: Vec<(String, String)>,
    /// The topology this member runs.
    pub topology: Topology,
    /// Timeout of connects and of each request.
    pub request_timeout: Duration,
}

/// A task: a sub-topology and a partition (`0_3` in Kafka Streams' notation).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId {
    /// The sub-topology.
    pub subtopology_id: String,
    /// The partition.
    pub partition: i32,
}

/// Active, standby and warm-up tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    /// Active tasks: processed here.
    pub active: BTreeSet<TaskId>,
    /// Standby tasks: their stores are kept up to date here.
    pub standby: BTreeSet<TaskId>,
    /// Warm-up tasks: standbys that catch up before an active task moves here.
    pub warmup: BTreeSet<TaskId>,
}

fn to_set(ids: &[TaskIds]) -> BTreeSet<TaskId> {
    ids.iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| TaskId {
                subtopology_id: t.subtopology_id.clone(),
                partition: *p,
            })
        })
        .collect()
}

fn to_wire(set: &BTreeSet<TaskId>) -> Vec<TaskIds> {
    let mut out: Vec<TaskIds> = Vec::new();
    for task in set {
        match out.last_mut() {
            Some(last) if last.subtopology_id == task.subtopology_id => {
                last.partitions.push(task.partition);
            }
            _ => out.push(TaskIds {
                subtopology_id: task.subtopology_id.clone(),
                partitions: vec![task.partition],
            }),
        }
    }
    out
}

impl Tasks {
    /// No tasks.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    /// The tasks of `self` that are not in `other`, kind by kind.
    pub fn difference(&self, other: &Tasks) -> Tasks {
        Tasks {
            active: self.active.difference(&other.active).cloned().collect(),
            standby: self.standby.difference(&other.standby).cloned().collect(),
            warmup: self.warmup.difference(&other.warmup).cloned().collect(),
        }
    }
}

/// What one heartbeat returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatResult {
    /// The member's epoch after this heartbeat (0 while rejoining).
    pub member_epoch: i32,
    /// The tasks this member should own now.
    pub target: Tasks,
    /// Owned tasks not in the target: revoke them (commit, close), then heartbeat at once.
    pub revoke: Tasks,
    /// Target tasks not owned yet: open them.
    pub assign: Tasks,
    /// The member was fenced: every owned task is lost (close without committing); it rejoins
    /// on the next heartbeat.
    pub lost: bool,
    /// The group's statuses (e.g. `MISSING_SOURCE_TOPICS`), as last reported.
    pub statuses: Vec<Status>,
    /// When the next heartbeat is due.
    pub heartbeat_interval: Duration,
    /// Heartbeat again now rather than after the interval: a revocation or assignment is to
    /// be acknowledged, or a rejoin is pending.
    pub heartbeat_now: bool,
    /// A retriable coordinator error this heartbeat hit (it is retried after a short backoff).
    pub retriable_error: Option<String>,
}

/// Where the member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Not in the group; the next heartbeat joins with epoch 0.
    Joining,
    /// In the group with a positive epoch.
    Stable,
    /// Left the group; no more heartbeats.
    Left,
}

/// A member of a streams group.
pub struct StreamsGroupMember {
    config: MemberConfig,
    connector: Box<dyn Connector>,
    member_id: String,
    member_epoch: i32,
    state: MemberState,
    coordinator: Option<(Connection, i16)>,
    heartbeat_interval: Duration,
    target: Tasks,
    statuses: Vec<Status>,
    endpoint_epoch: i32,
    endpoints: Vec<EndpointToPartitions>,
    /// Send the join-time fields (process id, endpoint, tags...) with the next heartbeat: on
    /// joining and after a failed heartbeat, when the broker may have missed a change.
    send_full: bool,
    shutdown_requested: bool,
    task_offsets: Option<(Vec<TaskOffset>, Vec<TaskOffset>)>,
    /// When the next heartbeat is due (`None`: now).
    next_due: Option<Instant>,
}

impl std::fmt::Debug for StreamsGroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamsGroupMember")
            .field("group_id", &self.config.group_id)
            .field("member_id", &self.member_id)
            .field("member_epoch", &self.member_epoch)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// A member id as Kafka's clients make one (`Uuid.randomUuid().toString()`): 16 random bytes
/// in URL-safe base64 without padding, never starting with `-` (Kafka avoids that too, so ids
/// are not taken for command-line flags).
pub fn generate_member_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    loop {
        // std's RandomState is seeded from the OS's randomness: enough for an id, and no
        // dependency for it.
        let mut bytes = [0u8; 16];
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            );
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
        let mut out = String::with_capacity(22);
        let mut acc: u32 = 0;
        let mut bits = 0;
        for b in bytes {
            acc = (acc << 8) | u32::from(b);
            bits += 8;
            while bits >= 6 {
                bits -= 6;
                out.push(ALPHABET[((acc >> bits) & 0x3f) as usize] as char);
            }
        }
        out.push(ALPHABET[((acc << (6 - bits)) & 0x3f) as usize] as char);
        if !out.starts_with('-') {
            return out;
        }
    }
}

impl StreamsGroupMember {
    /// A member that has not joined yet; nothing is sent before the first heartbeat.
    pub fn new(config: MemberConfig, connector: Box<dyn Connector>) -> Self {
        StreamsGroupMember {
            config,
            connector,
            member_id: generate_member_id(),
            member_epoch: 0,
            state: MemberState::Joining,
            coordinator: None,
            heartbeat_interval: Duration::from_secs(5),
            target: Tasks::default(),
            statuses: Vec::new(),
            endpoint_epoch: 0,
            endpoints: Vec::new(),
            send_full: true,
            shutdown_requested: false,
            task_offsets: None,
            next_due: None,
        }
    }

    /// How long until the next heartbeat is due at `now` (zero: heartbeat now).
    pub fn time_until_next_heartbeat(&self, now: Instant) -> Duration {
        self.next_due
            .map_or(Duration::ZERO, |due| due.saturating_duration_since(now))
    }

    /// This member's id (kept for the life of the member, across rejoins).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The current member epoch (0 before joining or while rejoining).
    pub fn member_epoch(&self) -> i32 {
        self.member_epoch
    }

    /// Where the member is.
    pub fn state(&self) -> MemberState {
        self.state
    }

    /// Every instance's endpoint and partitions, as last received.
    pub fn endpoints(&self) -> &[EndpointToPartitions] {
        &self.endpoints
    }

    /// The epoch of [`Self::endpoints`].
    pub fn endpoint_information_epoch(&self) -> i32 {
        self.endpoint_epoch
    }

    /// The `StreamsGroupHeartbeat` version in use (after the first heartbeat).
    pub fn heartbeat_version(&self) -> Option<i16> {
        self.coordinator.as_ref().map(|(_, v)| *v)
    }

    /// Overrides the epoch sent with the next heartbeat. For tests and diagnostics only: a wrong
    /// epoch gets the member fenced, which is how fencing is tested against a real broker.
    pub fn set_member_epoch_for_test(&mut self, epoch: i32) {
        self.member_epoch = epoch;
    }

    /// Asks every member of the group to shut down (sent with the next heartbeat).
    pub fn request_shutdown(&mut self) {
        self.shutdown_requested = true;
    }

    /// Task changelog offsets and end offsets to send with the next heartbeat.
    pub fn set_task_offsets(&mut self, offsets: Vec<TaskOffset>, end_offsets: Vec<TaskOffset>) {
        self.task_offsets = Some((offsets, end_offsets));
    }

    /// Checks that a broker speaks the streams group protocol, and finds the coordinator.
    fn discover(&mut self) -> Result<(), GroupError> {
        let mut last_err = None;
        for server in self.config.bootstrap_servers.split(',') {
            let (host, port) = parse_host_port(server)?;
            let attempt = (|| {
                let mut bootstrap = Connection::open(
                    self.connector.as_ref(),
                    &host,
                    port,
                    &self.config.client_id,
                    self.config.request_timeout,
                )?;
                bootstrap.heartbeat_version()?;
                let (c_host, c_port) = bootstrap.find_coordinator(&self.config.group_id)?;
                let conn = if (c_host.as_str(), c_port) == (host.as_str(), port) {
                    bootstrap
                } else {
                    Connection::open(
                        self.connector.as_ref(),
                        &c_host,
                        c_port,
                        &self.config.client_id,
                        self.config.request_timeout,
                    )?
                };
                let version = conn.heartbeat_version()?;
                Ok((conn, version))
            })();
            match attempt {
                Ok(found) => {
                    self.coordinator = Some(found);
                    return Ok(());
                }
                // A broker without the protocol will not grow it: say so at once.
                Err(e @ GroupError::Unsupported(_)) => return Err(e),
                // Nor will a wrong password or a mechanism the listener lacks: fail fast.
                Err(e @ GroupError::Authentication { .. }) => return Err(e),
                // Nor will a certificate either side does not trust.
                Err(e @ GroupError::Tls { .. }) => return Err(e),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| GroupError::Config("bootstrap.servers is empty".to_owned())))
    }

    fn request(&self, owned: &Tasks, epoch: i32) -> HeartbeatRequest {
        let joining = epoch == 0;
        let full = joining || self.send_full;
        let c = &self.config;
        let (task_offsets, task_end_offsets) = match &self.task_offsets {
            Some((o, e)) => (Some(o.clone()), Some(e.clone())),
            None => (None, None),
        };
        HeartbeatRequest {
            group_id: c.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            endpoint_information_epoch: self.endpoint_epoch,
            instance_id: c.instance_id.clone().filter(|_| full),
            rack_id: c.rack_id.clone().filter(|_| full),
            rebalance_timeout_ms: if full { c.rebalance_timeout_ms } else { -1 },
            // The topology goes with the join only (the broker refuses it otherwise).
            topology: joining.then(|| c.topology.clone()),
            // Owned tasks go with every heartbeat: they are what acknowledges a revocation,
            // and a full list never confuses a broker that missed an earlier one.
            active_tasks: Some(to_wire(&owned.active)),
            standby_tasks: Some(to_wire(&owned.standby)),
            warmup_tasks: Some(to_wire(&owned.warmup)),
            process_id: full.then(|| c.process_id.clone()),
            user_endpoint: c.user_endpoint.clone().filter(|_| full),
            client_tags: full.then(|| c.client_tags.clone()),
            task_offsets,
            task_end_offsets,
            shutdown_application: self.shutdown_requested,
        }
    }

    fn send(&mut self, request: &HeartbeatRequest) -> Result<HeartbeatResponse, GroupError> {
        if self.coordinator.is_none() {
            self.discover()?;
        }
        let Some((conn, version)) = self.coordinator.as_mut() else {
            return Err(GroupError::State("no coordinator".to_owned()));
        };
        let version = *version;
        let body = conn.send(
            api::STREAMS_GROUP_HEARTBEAT,
            version,
            &request.encode(version),
        );
        match body {
            Ok(body) => HeartbeatResponse::decode(&body, version),
            Err(e) => {
                // A broken connection: find the coordinator again next time.
                self.coordinator = None;
                Err(e)
            }
        }
    }

    /// Sends one heartbeat reporting `owned` (the tasks the caller holds now) and returns the
    /// target assignment with what to revoke and assign. Joins the group on the first call and
    /// after being fenced. Fatal errors (authorization, invalid topology, ...) are returned.
    pub fn heartbeat(
        &mut self,
        now: Instant,
        owned: &Tasks,
    ) -> Result<HeartbeatResult, GroupError> {
        if self.state == MemberState::Left {
            return Err(GroupError::State(format!(
                "member {} of group {} has left the group",
                self.member_id, self.config.group_id
            )));
        }
        let mut retriable = None;
        for _attempt in 0..2 {
            let request = self.request(owned, self.member_epoch);
            let response = match self.send(&request) {
                Ok(r) => r,
                // FindCoordinator says the same while the offsets topic is being created.
                Err(e) if e.code().is_some_and(is_coordinator_error) => {
                    self.coordinator = None;
                    self.send_full = true;
                    retriable = Some(e);
                    continue;
                }
                Err(e) => {
                    self.send_full = true;
                    return Err(e);
                }
            };
            match response.error_code {
                codes::NONE => {
                    let result = self.apply(response, owned);
                    let wait = if result.heartbeat_now {
                        Duration::ZERO
                    } else {
                        result.heartbeat_interval
                    };
                    self.next_due = Some(now + wait);
                    return Ok(result);
                }
                codes::NOT_COORDINATOR | codes::COORDINATOR_NOT_AVAILABLE => {
                    self.coordinator = None;
                    self.send_full = true;
                    retriable = Some(GroupError::kafka(
                        "StreamsGroupHeartbeat",
                        response.error_code,
                        response.error_message,
                    ));
                }
                // Kafka 4.4's coordinator throws (NoSuchElementException in
                // EndpointToPartitionsManager) when a member with an endpoint joins before a
                // just-created source topic is in its metadata image; it passes once it is.
                codes::COORDINATOR_LOAD_IN_PROGRESS | codes::UNKNOWN_SERVER_ERROR => {
                    self.send_full = true;
                    retriable = Some(GroupError::kafka(
                        "StreamsGroupHeartbeat",
                        response.error_code,
                        response.error_message,
                    ));
                    break;
                }
                codes::FENCED_MEMBER_EPOCH | codes::UNKNOWN_MEMBER_ID => {
                    self.next_due = Some(now);
                    return Ok(self.fenced(owned));
                }
                code => {
                    self.send_full = true;
                    return Err(GroupError::kafka(
                        "StreamsGroupHeartbeat",
                        code,
                        response.error_message,
                    ));
                }
            }
        }
        self.next_due = Some(now + RETRY_BACKOFF);
        Ok(HeartbeatResult {
            member_epoch: self.member_epoch,
            target: self.target.clone(),
            revoke: owned.difference(&self.target),
            assign: self.target.difference(owned),
            lost: false,
            statuses: self.statuses.clone(),
            heartbeat_interval: RETRY_BACKOFF,
            heartbeat_now: false,
            retriable_error: retriable.map(|e| e.to_string()),
        })
    }

    /// Fenced: the broker has moved this member's tasks; they are lost, and the member
    /// rejoins with epoch 0 under the same member id.
    fn fenced(&mut self, owned: &Tasks) -> HeartbeatResult {
        self.member_epoch = 0;
        self.state = MemberState::Joining;
        self.target = Tasks::default();
        self.send_full = true;
        HeartbeatResult {
            member_epoch: 0,
            target: Tasks::default(),
            revoke: owned.clone(),
            assign: Tasks::default(),
            lost: true,
            statuses: self.statuses.clone(),
            heartbeat_interval: Duration::ZERO,
            heartbeat_now: true,
            retriable_error: None,
        }
    }

    fn apply(&mut self, response: HeartbeatResponse, owned: &Tasks) -> HeartbeatResult {
        self.member_epoch = response.member_epoch;
        self.state = MemberState::Stable;
        self.send_full = false;
        self.task_offsets = None;
        if response.heartbeat_interval_ms > 0 {
            self.heartbeat_interval =
                Duration::from_millis(u64::from(response.heartbeat_interval_ms.unsigned_abs()));
        }
        // Null fields mean "unchanged since the last heartbeat": keep what we had.
        if let Some(status) = response.status {
            self.statuses = status;
        }
        // A shutdown request goes with every heartbeat until the coordinator answers with the
        // status it gives every member (Kafka's member sends it as long as it lives); a
        // heartbeat lost on the way, or answered by a coordinator that moved, does not drop it.
        if self
            .statuses
            .iter()
            .any(|s| s.code == StatusCode::ShutdownApplication)
        {
            self.shutdown_requested = false;
        }
        if let Some(active) = response.active_tasks {
            self.target.active = to_set(&active);
        }
        if let Some(standby) = response.standby_tasks {
            self.target.standby = to_set(&standby);
        }
        if let Some(warmup) = response.warmup_tasks {
            self.target.warmup = to_set(&warmup);
        }
        if let Some(endpoints) = response.partitions_by_user_endpoint {
            self.endpoints = endpoints;
            self.endpoint_epoch = response.endpoint_information_epoch;
        }
        let revoke = owned.difference(&self.target);
        let assign = self.target.difference(owned);
        let heartbeat_now = !revoke.is_empty() || !assign.is_empty();
        HeartbeatResult {
            member_epoch: self.member_epoch,
            target: self.target.clone(),
            revoke,
            assign,
            lost: false,
            statuses: self.statuses.clone(),
            heartbeat_interval: self.heartbeat_interval,
            heartbeat_now,
            retriable_error: None,
        }
    }

    /// Commits `offsets` as this member, with its id and current epoch (`OffsetCommit` v9, see
    /// [`crate::offsets`]); returns each partition's error code. A member not in the group
    /// (joining, fenced, left) has nothing to commit with: a [`GroupError::State`].
    pub fn commit_offsets(
        &mut self,
        offsets: &[PartitionOffset],
    ) -> Result<Vec<(String, i32, i16)>, GroupError> {
        if self.state != MemberState::Stable || self.member_epoch <= 0 {
            return Err(GroupError::State(format!(
                "member {} of group {} is not in the group (epoch {})",
                self.member_id, self.config.group_id, self.member_epoch
            )));
        }
        if self.coordinator.is_none() {
            self.discover()?;
        }
        let Some((conn, _)) = self.coordinator.as_mut() else {
            return Err(GroupError::State("no coordinator".to_owned()));
        };
        match conn.versions.range(OFFSET_COMMIT) {
            Some((lo, hi)) if lo <= OFFSET_COMMIT_VERSION && OFFSET_COMMIT_VERSION <= hi => {}
            _ => {
                return Err(GroupError::Unsupported(format!(
                    "the broker at {} lacks OffsetCommit v{OFFSET_COMMIT_VERSION}",
                    conn.broker
                )))
            }
        }
        let body = encode_offset_commit_request(
            &self.config.group_id,
            &self.member_id,
            self.member_epoch,
            self.config.instance_id.as_deref(),
            offsets,
        );
        let result = conn
            .send(OFFSET_COMMIT, OFFSET_COMMIT_VERSION, &body)
            .and_then(|b| decode_offset_commit_response(&b));
        match &result {
            // The group moved, or the connection broke: find the coordinator again next time.
            Ok(codes) if codes.iter().any(|(_, _, c)| is_coordinator_error(*c)) => {
                self.coordinator = None;
            }
            Err(_) => self.coordinator = None,
            Ok(_) => {}
        }
        result
    }

    /// The committed offsets of `partitions` in this member's group (`OffsetFetch` v8):
    /// `(topic, partition, offset, metadata, error_code)`, offset -1 when none is committed.
    pub fn committed_offsets(
        &mut self,
        partitions: &[(String, i32)],
    ) -> Result<Vec<FetchedOffset>, GroupError> {
        if self.coordinator.is_none() {
            self.discover()?;
        }
        let Some((conn, _)) = self.coordinator.as_mut() else {
            return Err(GroupError::State("no coordinator".to_owned()));
        };
        let body = encode_offset_fetch_request(&self.config.group_id, partitions);
        let result = conn
            .send(OFFSET_FETCH, OFFSET_FETCH_VERSION, &body)
            .and_then(|b| decode_offset_fetch_response(&b));
        match result {
            Ok((offsets, codes::NONE)) => Ok(offsets),
            Ok((_, code)) => {
                if is_coordinator_error(code) {
                    self.coordinator = None;
                }
                Err(GroupError::kafka("OffsetFetch", code, None))
            }
            Err(e) => {
                self.coordinator = None;
                Err(e)
            }
        }
    }

    /// The coordinator's view of the group (StreamsGroupDescribe), for tests and diagnostics.
    pub fn describe(&mut self) -> Result<DescribedGroup, GroupError> {
        if self.coordinator.is_none() {
            self.discover()?;
        }
        let Some((conn, _)) = self.coordinator.as_mut() else {
            return Err(GroupError::State("no coordinator".to_owned()));
        };
        if conn.versions.range(api::STREAMS_GROUP_DESCRIBE).is_none() {
            return Err(GroupError::Unsupported(format!(
                "the broker at {} lacks StreamsGroupDescribe",
                conn.broker
            )));
        }
        let body = conn.send(
            api::STREAMS_GROUP_DESCRIBE,
            messages::DESCRIBE_VERSION,
            &messages::encode_describe_request(&self.config.group_id),
        )?;
        messages::decode_describe_response(&body)
    }

    /// Leaves the group: epoch -1, or -2 for a static member (`group.instance.id`), whose tasks
    /// the broker keeps for it until its session times out. The caller has closed its tasks.
    pub fn leave(&mut self) -> Result<(), GroupError> {
        if self.state == MemberState::Left {
            return Ok(());
        }
        let was_member = self.member_epoch > 0;
        self.state = MemberState::Left;
        if !was_member {
            // Never joined (or fenced): there is no membership to end.
            return Ok(());
        }
        let epoch = if self.config.instance_id.is_some() {
            STATIC_LEAVE_EPOCH
        } else {
            LEAVE_EPOCH
        };
        let request = HeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            endpoint_information_epoch: self.endpoint_epoch,
            instance_id: self.config.instance_id.clone(),
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        let response = self.send(&request)?;
        self.member_epoch = epoch;
        self.target = Tasks::default();
        match response.error_code {
            // Already gone from the broker's view: the leave has nothing left to do.
            codes::NONE | codes::UNKNOWN_MEMBER_ID | codes::FENCED_MEMBER_EPOCH => Ok(()),
            code => Err(GroupError::kafka(
                "StreamsGroupHeartbeat",
                code,
                response.error_message,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(s: &str, p: i32) -> TaskId {
        TaskId {
            subtopology_id: s.to_owned(),
            partition: p,
        }
    }

    /// A broker that answers any request with the same canned frame.
    struct Canned(std::io::Cursor<Vec<u8>>);

    impl std::io::Read for Canned {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.read(buf)
        }
    }

    impl std::io::Write for Canned {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl crate::transport::Transport for Canned {}

    struct CannedConnector(Vec<u8>);

    impl Connector for CannedConnector {
        fn connect(
            &self,
            _host: &str,
            _port: u16,
            _timeout: Duration,
        ) -> Result<Box<dyn crate::transport::Transport>, GroupError> {
            Ok(Box::new(Canned(std::io::Cursor::new(self.0.clone()))))
        }
    }

    #[test]
    fn a_broker_without_streams_groups_gets_a_clear_error() {
        // ApiVersions v3 response (header v0, correlation id 0): only ApiVersions itself, as
        // a pre-4.2 broker (or one with streams.version=0) lists no key 88.
        let mut w = crate::wire::Writer::new();
        w.i32(0);
        w.i16(0);
        w.compact_array(&[(18i16, 0i16, 4i16)], |w, (k, lo, hi)| {
            w.i16(*k);
            w.i16(*lo);
            w.i16(*hi);
            w.no_tagged_fields();
        });
        w.i32(0);
        w.no_tagged_fields();
        let body = w.into_bytes();
        let mut frame = i32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let config = test_config();
        let mut member = StreamsGroupMember::new(config, Box::new(CannedConnector(frame)));
        let err = member
            .heartbeat(Instant::now(), &Tasks::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the broker at old-broker:9092 does not support the streams rebalance protocol \
             (KIP-1071; Kafka 4.2+ with streams groups enabled, its streams.version feature is \
             0): set group.protocol=classic"
        );
    }

    fn test_config() -> MemberConfig {
        MemberConfig {
            bootstrap_servers: "old-broker:9092".into(),
            group_id: "app".into(),
            client_id: "c".into(),
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: 1000,
            process_id: "p".into(),
            user_endpoint: None,
            client_tags: Vec::new(),
            topology: Topology::default(),
            request_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn null_fields_keep_the_previous_assignment_and_changes_ask_for_a_prompt_heartbeat() {
        let mut member = StreamsGroupMember::new(test_config(), Box::new(CannedConnector(vec![])));
        let ids = |p: Vec<i32>| {
            Some(vec![TaskIds {
                subtopology_id: "0".into(),
                partitions: p,
            }])
        };
        let first = member.apply(
            HeartbeatResponse {
                member_epoch: 3,
                heartbeat_interval_ms: 5000,
                active_tasks: ids(vec![0, 1]),
                standby_tasks: ids(vec![2]),
                warmup_tasks: Some(vec![]),
                ..Default::default()
            },
            &Tasks::default(),
        );
        assert_eq!(first.assign.active.len(), 2);
        assert!(first.heartbeat_now, "an assignment is acknowledged at once");
        // Active tasks change, the rest is null ("unchanged"): the standby stays.
        let owned = first.target.clone();
        let second = member.apply(
            HeartbeatResponse {
                member_epoch: 4,
                heartbeat_interval_ms: 5000,
                active_tasks: ids(vec![1]),
                ..Default::default()
            },
            &owned,
        );
        assert_eq!(second.revoke.active, [task("0", 0)].into_iter().collect());
        assert_eq!(second.target.standby, [task("0", 2)].into_iter().collect());
        assert!(second.heartbeat_now);
        let third = member.apply(
            HeartbeatResponse {
                member_epoch: 4,
                heartbeat_interval_ms: 5000,
                ..Default::default()
            },
            &second.target,
        );
        assert!(
            !third.heartbeat_now,
            "nothing to acknowledge: wait the interval"
        );
        assert_eq!(third.heartbeat_interval, Duration::from_secs(5));
        // Fenced: everything owned is lost and the next heartbeat rejoins with epoch 0.
        let fenced = member.fenced(&third.target);
        assert!(fenced.lost && fenced.heartbeat_now);
        assert_eq!(fenced.revoke, third.target);
        assert_eq!(member.member_epoch(), 0);
        let rejoin = member.request(&Tasks::default(), member.member_epoch());
        assert!(rejoin.topology.is_some() && rejoin.process_id.is_some());
        assert_eq!(rejoin.rebalance_timeout_ms, 1000);
    }

    #[test]
    fn a_shutdown_request_is_sent_until_the_coordinator_answers_with_the_status() {
        let mut member = StreamsGroupMember::new(test_config(), Box::new(CannedConnector(vec![])));
        let stable = |status: Option<Vec<Status>>| HeartbeatResponse {
            member_epoch: 2,
            heartbeat_interval_ms: 5000,
            status,
            ..Default::default()
        };
        member.apply(stable(None), &Tasks::default());
        assert!(!member.request(&Tasks::default(), 2).shutdown_application);
        member.request_shutdown();
        assert!(member.request(&Tasks::default(), 2).shutdown_application);
        // Answered without the status (another status, or none): the request stays.
        member.apply(
            stable(Some(vec![Status {
                code: StatusCode::MissingSourceTopics,
                detail: "t".into(),
            }])),
            &Tasks::default(),
        );
        assert!(member.request(&Tasks::default(), 2).shutdown_application);
        member.apply(stable(Some(vec![])), &Tasks::default());
        assert!(member.request(&Tasks::default(), 2).shutdown_application);
        // Fenced: the rejoin carries it too.
        member.fenced(&Tasks::default());
        assert!(member.request(&Tasks::default(), 0).shutdown_application);
        let seen = member.apply(
            stable(Some(vec![Status {
                code: StatusCode::ShutdownApplication,
                detail: "member m requested a shutdown".into(),
            }])),
            &Tasks::default(),
        );
        assert_eq!(seen.statuses[0].code, StatusCode::ShutdownApplication);
        assert!(!member.request(&Tasks::default(), 2).shutdown_application);
    }

    #[test]
    fn member_ids_are_22_url_safe_chars_and_distinct() {
        let a = generate_member_id();
        let b = generate_member_id();
        assert_eq!(a.len(), 22, "{a}");
        assert_ne!(a, b);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(!a.starts_with('-'));
    }

    #[test]
    fn task_sets_group_by_subtopology_on_the_wire() {
        let set: BTreeSet<_> = [task("1", 0), task("0", 3), task("0", 1)]
            .into_iter()
            .collect();
        let wire = to_wire(&set);
        assert_eq!(
            wire,
            vec![
                TaskIds {
                    subtopology_id: "0".into(),
                    partitions: vec![1, 3]
                },
                TaskIds {
                    subtopology_id: "1".into(),
                    partitions: vec![0]
                },
            ]
        );
        assert_eq!(to_set(&wire), set);
    }

    #[test]
    fn difference_is_per_kind() {
        let owned = Tasks {
            active: [task("0", 0), task("0", 1)].into_iter().collect(),
            standby: [task("0", 2)].into_iter().collect(),
            warmup: BTreeSet::new(),
        };
        let target = Tasks {
            active: [task("0", 1)].into_iter().collect(),
            standby: BTreeSet::new(),
            warmup: BTreeSet::new(),
        };
        let revoke = owned.difference(&target);
        assert_eq!(revoke.active, [task("0", 0)].into_iter().collect());
        assert_eq!(revoke.standby, [task("0", 2)].into_iter().collect());
        assert!(target.difference(&owned).is_empty());
    }
}
