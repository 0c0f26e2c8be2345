//! One librdkafka consumer: its settings, the events it reports, and batch reads off its queue.

use std::ffi::CStr;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;

/// Client settings as librdkafka takes them: `(name, value)` pairs, the same keys a
/// confluent-kafka `Consumer` accepts (`bootstrap.servers`, `security.protocol`, `sasl.*`,
/// `ssl.*`, `isolation.level`, fetch sizes, ...).
pub type Settings = Vec<(String, String)>;

/// Settings the fetcher relies on, set over whatever the caller gave: it assigns partitions
/// itself and never commits; end-of-partition events tell it where a partition's fetch stands
/// (past transaction markers and compaction gaps); `check.crcs` makes a corrupt batch an error
/// naming its offset instead of records applied from damaged bytes.
const FORCED: [(&str, &str); 4] = [
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    ("enable.partition.eof", "true"),
    ("check.crcs", "true"),
];

/// Settings the fetcher starts from, which the caller's override. Each worker's librdkafka
/// queue prefetches up to `queued.max.messages.kbytes` of records (64 MiB by default, counted
/// without librdkafka's ~200 bytes per message, so several times that for small records): a
/// restore applies records as fast as it can and gains nothing from a deep queue, but it was
/// a third of the peak RSS (`docs/PERFORMANCE.md`, the restore section). 4 MiB (one
/// partition fetch, `max.partition.fetch.bytes` of the restore consumer) against 16 MiB: peak
/// RSS 8 partitions x 1M x 100 B 320 -> 218 MB, x 1 kB 632 -> 467 MB, 10M x 100 B 795 -> 476 MB,
/// with CPU and wall time unchanged or lower on 1 and 8 partitions.
const DEFAULTS: [(&str, &str); 1] = [("queued.max.messages.kbytes", "4096")];

/// A setting librdkafka as built here refuses: the caller must read with another client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedSetting {
    /// The setting's name, or `"(client)"` when librdkafka refused the client as a whole (e.g.
    /// a SASL mechanism this build has no provider for).
    pub setting: String,
    pub reason: String,
}

impl fmt::Display for UnsupportedSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "setting {:?}: {}", self.setting, self.reason)
    }
}

/// A failed librdkafka request, with librdkafka's error code (the same numbers as
/// `confluent_kafka.KafkaError`), so callers classify it as they would confluent-kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaFailure {
    pub code: i32,
    pub text: String,
    pub retriable: bool,
    pub fatal: bool,
}

impl KafkaFailure {
    pub(crate) fn from_code(code: i32, text: impl Into<String>) -> Self {
        use RDKafkaRespErr::*;
        let retriable = [
            RD_KAFKA_RESP_ERR__TRANSPORT,
            RD_KAFKA_RESP_ERR__TIMED_OUT,
            RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
            RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
        ]
        .iter()
        .any(|c| *c as i32 == code);
        KafkaFailure {
            code,
            text: text.into(),
            retriable,
            fatal: false,
        }
    }

    pub(crate) fn from_error(e: &KafkaError) -> Self {
        let code = e
            .rdkafka_error_code()
            .map(|c| c as i32)
            .unwrap_or(RDKafkaRespErr::RD_KAFKA_RESP_ERR__FAIL as i32);
        KafkaFailure::from_code(code, e.to_string())
    }
}

impl fmt::Display for KafkaFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// At most this many client events are kept between two reads of them: a broker that stays
/// down makes librdkafka repeat itself, and a summary is all a caller needs.
const MAX_EVENTS: usize = 64;

/// Collects what librdkafka reports outside of any partition (a broker connection lost, all
/// brokers down, a log line at WARNING or worse), for the caller to log where it logs.
#[derive(Default)]
pub(crate) struct Context {
    events: Mutex<Vec<String>>,
}

impl Context {
    fn push(&self, event: String) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.len() < MAX_EVENTS && !events.contains(&event) {
            events.push(event);
        }
    }

    /// Records a client-wide event read off the queue.
    pub(crate) fn note(&self, event: String) {
        self.push(event);
    }

    pub(crate) fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if (level as i32) <= RDKafkaLogLevel::Warning as i32 {
            self.push(format!("{fac}: {log_message}"));
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Context {}

/// A reference to a consumer's queue, released on drop (before its consumer: see `Consumer`).
struct Queue(*mut rdsys::rd_kafka_queue_t);

// SAFETY: librdkafka's queues are thread-safe; the pointer is only used while its consumer
// lives (the queue is dropped first, see `Consumer`).
unsafe impl Send for Queue {}
// SAFETY: as for `Send`: every librdkafka call on a queue may come from any thread.
unsafe impl Sync for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the pointer came from rd_kafka_queue_get_consumer and is released once.
        unsafe { rdsys::rd_kafka_queue_destroy(self.0) }
    }
}

/// One record or event read off a consumer's queue, borrowed from librdkafka until the batch
/// holding it is dropped.
pub(crate) enum Item<'a> {
    Record {
        topic: &'a str,
        partition: i32,
        offset: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
    },
    /// An error or end-of-partition event; `topic` is `None` for client-wide errors.
    Event {
        topic: Option<&'a str>,
        partition: i32,
        offset: i64,
        code: RDKafkaRespErr,
        text: String,
    },
}

/// Messages read in one call, destroyed together on drop.
pub(crate) struct Batch {
    messages: Vec<*mut rdsys::rd_kafka_message_t>,
}

impl Drop for Batch {
    fn drop(&mut self) {
        for m in self.messages.drain(..) {
            // SAFETY: each message came from rd_kafka_consume_batch_queue and is destroyed once.
            unsafe { rdsys::rd_kafka_message_destroy(m) }
        }
    }
}

impl Batch {
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// The items, in the order librdkafka delivered them.
    pub(crate) fn items(&self) -> impl Iterator<Item = Item<'_>> {
        self.messages.iter().map(|&m| {
            // SAFETY: the messages live as long as `self`; librdkafka fills every field read.
            unsafe { item(&*m) }
        })
    }
}

/// # Safety
/// `ptr` is null or points to `len` readable bytes that outlive `'a`.
unsafe fn bytes<'a>(ptr: *const std::ffi::c_void, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: the caller guarantees `len` readable bytes at `ptr` for `'a`.
        Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
    }
}

/// # Safety
/// `m` is a message librdkafka delivered and has not destroyed.
unsafe fn item(m: &rdsys::rd_kafka_message_t) -> Item<'_> {
    let topic = if m.rkt.is_null() {
        None
    } else {
        // SAFETY: a live message's topic handle has a NUL-terminated name that lives as long.
        unsafe { CStr::from_ptr(rdsys::rd_kafka_topic_name(m.rkt)) }
            .to_str()
            .ok()
    };
    if m.err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        // SAFETY: librdkafka returns a NUL-terminated text for any message with an error.
        let text = unsafe { CStr::from_ptr(rdsys::rd_kafka_message_errstr(m)) }
            .to_string_lossy()
            .into_owned();
        return Item::Event {
            topic,
            partition: m.partition,
            offset: m.offset,
            code: m.err,
            text,
        };
    }
    Item::Record {
        topic: topic.unwrap_or(""),
        partition: m.partition,
        offset: m.offset,
        // SAFETY: key and payload are null or `key_len` / `len` bytes owned by the message.
        key: unsafe { bytes(m.key, m.key_len) },
        // SAFETY: as above.
        value: unsafe { bytes(m.payload, m.len) },
    }
}

/// A librdkafka consumer with manual assignment, and its queue read in batches.
pub(crate) struct Consumer {
    // Declared first so it is dropped first: the queue reference must go before the client.
    queue: Queue,
    pub(crate) inner: BaseConsumer<Context>,
}

impl Consumer {
    /// Creates a consumer with `settings` over `DEFAULTS`, and the fetcher's own (`FORCED`); a
    /// setting librdkafka refuses is reported by name.
    pub(crate) fn new(settings: &Settings) -> Result<Consumer, UnsupportedSetting> {
        let mut config = ClientConfig::new();
        for (k, v) in DEFAULTS {
            config.set(k, v);
        }
        for (k, v) in settings {
            config.set(k, v);
        }
        // confluent-kafka insists on a group.id; librdkafka needs one for its consumer queue.
        // The consumer never joins the group (partitions are assigned manually).
        if config.get("group.id").is_none() {
            config.set("group.id", "streamstate-restore");
        }
        for (k, v) in FORCED {
            config.set(k, v);
        }
        // librdkafka's warnings (a broker connection refused, ...) reach `Context::log`, which
        // keeps them for the caller to log; the rdkafka crate would otherwise follow the `log`
        // crate's level, which nothing sets here.
        config.set_log_level(RDKafkaLogLevel::Warning);
        let inner: BaseConsumer<Context> =
            config
                .create_with_context(Context::default())
                .map_err(|e| match e {
                    KafkaError::ClientConfig(_, reason, key, _) => UnsupportedSetting {
                        setting: key,
                        reason,
                    },
                    other => {
                        let reason = other.to_string();
                        UnsupportedSetting {
                            setting: setting_of_creation_error(&reason).into(),
                            reason,
                        }
                    }
                })?;
        // SAFETY: the client is valid; the returned reference is released by `Queue`'s drop.
        let queue = unsafe { rdsys::rd_kafka_queue_get_consumer(inner.client().native_ptr()) };
        if queue.is_null() {
            return Err(UnsupportedSetting {
                setting: "group.id".into(),
                reason: "librdkafka gave the consumer no queue".into(),
            });
        }
        Ok(Consumer {
            queue: Queue(queue),
            inner,
        })
    }

    /// Reads up to `max` messages, waiting at most `wait` for the first.
    pub(crate) fn read(&self, wait: Duration, max: usize) -> Batch {
        let mut messages: Vec<*mut rdsys::rd_kafka_message_t> = Vec::with_capacity(max);
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `messages` has room for `max` pointers; librdkafka writes `n` of them.
        let n = unsafe {
            rdsys::rd_kafka_consume_batch_queue(self.queue.0, ms, messages.as_mut_ptr(), max)
        };
        if n > 0 {
            // SAFETY: librdkafka initialized the first `n` slots.
            unsafe { messages.set_len(n as usize) };
        }
        Batch { messages }
    }

    /// Client-wide events since the last call.
    pub(crate) fn take_events(&self) -> Vec<String> {
        self.inner.context().take_events()
    }
}

/// The setting a client-creation error of librdkafka is about, as far as its text tells:
/// librdkafka checks combinations of settings (a SASL mechanism without a provider in this
/// build, say) only when the client is created, and names none.
fn setting_of_creation_error(reason: &str) -> &'static str {
    if reason.contains("SASL mechanism") {
        "sasl.mechanisms"
    } else if reason.contains("ssl") || reason.contains("SSL") {
        "security.protocol"
    } else {
        "(client)"
    }
}

/// The name of librdkafka's error code, e.g. `_PARTITION_EOF`.
pub(crate) fn code_name(code: RDKafkaRespErr) -> String {
    // SAFETY: rd_kafka_err2name returns a static string for every code.
    unsafe { CStr::from_ptr(rdsys::rd_kafka_err2name(code)) }
        .to_string_lossy()
        .into_owned()
}
