//! `OffsetCommit` (API key 8) v9: the offset commit of a streams group member; and
//! `OffsetFetch` (key 9) v8, which reads committed offsets with their metadata intact.
//!
//! A streams group's coordinator accepts a non-transactional commit only from a member, with
//! its member id and current member epoch, in OffsetCommit v9 or later
//! (`StreamsGroup.validateOffsetCommit` in Kafka 4.x): a consumer on manual assignment (what
//! librdkafka is for a streams member, since it does not speak the protocol) commits with
//! generation -1 and no member id, which the coordinator refuses with `UNKNOWN_MEMBER_ID` once
//! the group has members. So the member commits its tasks' offsets itself, over the
//! coordinator connection its heartbeats use.
//!
//! v9 is the last version that names topics (v10, Kafka 4.1+, names them by topic id);
//! every broker with streams groups answers it.

use crate::error::GroupError;
use crate::wire::{Reader, Writer};

/// `OffsetCommit`'s API key.
pub const OFFSET_COMMIT: i16 = 8;
/// The version this client sends.
pub const OFFSET_COMMIT_VERSION: i16 = 9;

/// One partition's offset to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The next offset to consume.
    pub offset: i64,
    /// The commit's metadata (Kafka Streams stores the partition time there).
    pub metadata: Option<String>,
}

/// `OffsetCommitRequest` v9 body: the offsets grouped by topic, in the order first seen.
pub fn encode_offset_commit_request(
    group_id: &str,
    member_id: &str,
    member_epoch: i32,
    instance_id: Option<&str>,
    offsets: &[PartitionOffset],
) -> Vec<u8> {
    let mut topics: Vec<(&str, Vec<&PartitionOffset>)> = Vec::new();
    for o in offsets {
        match topics.iter_mut().find(|(t, _)| *t == o.topic) {
            Some((_, ps)) => ps.push(o),
            None => topics.push((&o.topic, vec![o])),
        }
    }
    let mut w = Writer::new();
    w.compact_string(group_id);
    w.i32(member_epoch);
    w.compact_string(member_id);
    w.compact_nullable_string(instance_id);
    w.compact_array(&topics, |w, (topic, partitions)| {
        w.compact_string(topic);
        w.compact_array(partitions, |w, p| {
            w.i32(p.partition);
            w.i64(p.offset);
            // committed_leader_epoch: unknown (the fetch positions do not carry it here).
            w.i32(-1);
            w.compact_nullable_string(p.metadata.as_deref());
            w.no_tagged_fields();
        });
        w.no_tagged_fields();
    });
    w.no_tagged_fields();
    w.into_bytes()
}

/// Decodes an `OffsetCommitResponse` v9 body: `(topic, partition, error_code)` per partition.
pub fn decode_offset_commit_response(body: &[u8]) -> Result<Vec<(String, i32, i16)>, GroupError> {
    let mut r = Reader::new(body, "OffsetCommitResponse");
    let _throttle_time_ms = r.i32()?;
    let topics = r.compact_array(|r| {
        let name = r.compact_string()?;
        let partitions = r.compact_array(|r| {
            let partition = r.i32()?;
            let error_code = r.i16()?;
            r.skip_tagged_fields()?;
            Ok((partition, error_code))
        })?;
        r.skip_tagged_fields()?;
        Ok((name, partitions))
    })?;
    r.skip_tagged_fields()?;
    Ok(topics
        .into_iter()
        .flat_map(|(name, ps)| ps.into_iter().map(move |(p, e)| (name.clone(), p, e)))
        .collect())
}

/// `OffsetFetch`'s API key.
pub const OFFSET_FETCH: i16 = 9;
/// The version this client sends (v8: batched groups, flexible, topics by name; no member id,
/// which a streams group does not require of a fetch).
pub const OFFSET_FETCH_VERSION: i16 = 8;

/// `OffsetFetchRequest` v8 body: the committed offsets of `partitions` in `group_id`, stable
/// ones only (`require_stable`).
pub fn encode_offset_fetch_request(group_id: &str, partitions: &[(String, i32)]) -> Vec<u8> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|(t, _)| t == topic) {
            Some((_, ps)) => ps.push(*partition),
            None => topics.push((topic, vec![*partition])),
        }
    }
    let mut w = Writer::new();
    w.compact_array(&[group_id], |w, group| {
        w.compact_string(group);
        w.compact_nullable_array(Some(topics.as_slice()), |w, (topic, ps)| {
            w.compact_string(topic);
            w.compact_array(ps, |w, p| w.i32(*p));
            w.no_tagged_fields();
        });
        w.no_tagged_fields();
    });
    // require_stable (v7+, KIP-447): under exactly_once_v2 a task must not start from an
    // offset whose transaction is still pending; the broker answers UNSTABLE_OFFSET_COMMIT
    // for such a partition, and the caller retries. Kafka's consumer asks it whenever it reads
    // committed (Kafka Streams' read_committed); at-least-once has no pending offsets, so it
    // costs nothing there.
    w.bool(true);
    w.no_tagged_fields();
    w.into_bytes()
}

/// One partition of an `OffsetFetch` answer: `(topic, partition, offset, metadata,
/// error_code)`; offset -1 when nothing is committed.
pub type FetchedOffset = (String, i32, i64, Option<String>, i16);

/// Decodes an `OffsetFetchResponse` v8 body for one group; a group-level error is returned
/// as the error code of every partition asked.
pub fn decode_offset_fetch_response(body: &[u8]) -> Result<(Vec<FetchedOffset>, i16), GroupError> {
    let mut r = Reader::new(body, "OffsetFetchResponse");
    let _throttle_time_ms = r.i32()?;
    let groups = r.compact_array(|r| {
        let _group = r.compact_string()?;
        let topics = r.compact_array(|r| {
            let name = r.compact_string()?;
            let partitions = r.compact_array(|r| {
                let partition = r.i32()?;
                let offset = r.i64()?;
                let _leader_epoch = r.i32()?;
                let metadata = r.compact_nullable_string()?;
                let error_code = r.i16()?;
                r.skip_tagged_fields()?;
                Ok((partition, offset, metadata, error_code))
            })?;
            r.skip_tagged_fields()?;
            Ok((name, partitions))
        })?;
        let error_code = r.i16()?;
        r.skip_tagged_fields()?;
        Ok((topics, error_code))
    })?;
    r.skip_tagged_fields()?;
    let Some((topics, error_code)) = groups.into_iter().next() else {
        return Err(GroupError::Malformed(
            "OffsetFetchResponse without a group".into(),
        ));
    };
    let offsets = topics
        .into_iter()
        .flat_map(|(name, ps)| {
            ps.into_iter()
                .map(move |(p, o, m, e)| (name.clone(), p, o, m, e))
        })
        .collect();
    Ok((offsets, error_code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(topic: &str, partition: i32, offset: i64) -> PartitionOffset {
        PartitionOffset {
            topic: topic.into(),
            partition,
            offset,
            metadata: None,
        }
    }

    #[test]
    fn the_request_groups_partitions_by_topic() {
        let body = encode_offset_commit_request(
            "g",
            "m",
            7,
            None,
            &[offset("a", 0, 5), offset("b", 1, 6), offset("a", 2, 7)],
        );
        let mut r = Reader::new(&body, "test");
        assert_eq!(r.compact_string().unwrap(), "g");
        assert_eq!(r.i32().unwrap(), 7);
        assert_eq!(r.compact_string().unwrap(), "m");
        assert_eq!(r.compact_nullable_string().unwrap(), None);
        let topics = r
            .compact_array(|r| {
                let name = r.compact_string()?;
                let ps = r.compact_array(|r| {
                    let p = r.i32()?;
                    let o = r.i64()?;
                    let _leader_epoch = r.i32()?;
                    let _metadata = r.compact_nullable_string()?;
                    r.skip_tagged_fields()?;
                    Ok((p, o))
                })?;
                r.skip_tagged_fields()?;
                Ok((name, ps))
            })
            .unwrap();
        r.skip_tagged_fields().unwrap();
        assert_eq!(
            topics,
            vec![
                ("a".to_owned(), vec![(0, 5), (2, 7)]),
                ("b".to_owned(), vec![(1, 6)])
            ]
        );
        assert_eq!(r.position(), body.len());
    }

    #[test]
    fn an_offset_fetch_round_trips() {
        let body = encode_offset_fetch_request("g", &[("a".into(), 0), ("a".into(), 3)]);
        let mut r = Reader::new(&body, "test");
        let groups = r
            .compact_array(|r| {
                let g = r.compact_string()?;
                let topics = r.compact_nullable_array(|r| {
                    let t = r.compact_string()?;
                    let ps = r.compact_array(|r| r.i32())?;
                    r.skip_tagged_fields()?;
                    Ok((t, ps))
                })?;
                r.skip_tagged_fields()?;
                Ok((g, topics))
            })
            .unwrap();
        assert_eq!(
            groups,
            vec![("g".to_owned(), Some(vec![("a".to_owned(), vec![0, 3])]))]
        );
        assert!(r.bool().unwrap(), "require_stable must be set (KIP-447)");
        r.skip_tagged_fields().unwrap();
        assert_eq!(r.position(), body.len());

        let mut w = Writer::new();
        w.i32(0);
        w.compact_array(&["g"], |w, g| {
            w.compact_string(g);
            w.compact_array(&["a"], |w, t| {
                w.compact_string(t);
                w.compact_array(
                    &[(0i32, 42i64, Some("m")), (3, -1, None)],
                    |w, (p, o, m)| {
                        w.i32(*p);
                        w.i64(*o);
                        w.i32(-1);
                        w.compact_nullable_string(*m);
                        w.i16(0);
                        w.no_tagged_fields();
                    },
                );
                w.no_tagged_fields();
            });
            w.i16(0);
            w.no_tagged_fields();
        });
        w.no_tagged_fields();
        let (got, error) = decode_offset_fetch_response(&w.into_bytes()).unwrap();
        assert_eq!(error, 0);
        assert_eq!(
            got,
            vec![
                ("a".into(), 0, 42, Some("m".into()), 0),
                ("a".into(), 3, -1, None, 0)
            ]
        );
    }

    #[test]
    fn the_response_lists_each_partitions_error() {
        let mut w = Writer::new();
        w.i32(0);
        w.compact_array(&[("t", [(0i32, 0i16), (1, 113)])], |w, (name, ps)| {
            w.compact_string(name);
            w.compact_array(ps, |w, (p, e)| {
                w.i32(*p);
                w.i16(*e);
                w.no_tagged_fields();
            });
            w.no_tagged_fields();
        });
        w.no_tagged_fields();
        let got = decode_offset_commit_response(&w.into_bytes()).unwrap();
        assert_eq!(got, vec![("t".into(), 0, 0), ("t".into(), 1, 113)]);
    }
}
