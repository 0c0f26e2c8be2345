//! Bad input at scale: generated payloads through every entry point a record's bytes reach in
//! the core, with no panic and every failure a typed error (`DeserializeError`,
//! `TimestampError`, or a `CoreError` of the kind the binding maps to `DeserializationError` /
//! `InvalidTimestampError`, naming topic, partition and offset where a record is known).
//!
//! Entry points: [`Deserializer::deserialize`] for each of Kafka's serdes, JSON and
//! Confluent-framed Avro; [`extract_json_path`]; [`parse_iso8601_ms`] and every
//! [`TimestampExtractor`]; [`json_to_array`]; [`decode_column`] and [`decode_kafka_batch`];
//! [`BuiltIn::admit_arrow`] (the Python `RecordQueue`'s Arrow path) and [`Stamper::stamp`].
//!
//! Payloads are structure-aware where structure matters (valid JSON and Avro encodings, then
//! mutated, truncated, reframed with a wrong magic byte or schema id, given oversized lengths,
//! invalid UTF-8, deep nesting, NaN/inf/huge numbers as timestamps) plus raw random bytes.
//!
//! Size and seeds, from the environment: `STREAMSTATE_FUZZ_CASES` payloads per target (10,000
//! by default, as `make test` runs it; `make fuzz` runs 1,000,000), `STREAMSTATE_FUZZ_SEED` the
//! base seed. Each case draws from its own seed (derived from the base seed, the target and the
//! case number); a failing case prints it, and `STREAMSTATE_FUZZ_CASE=<seed>` replays that one.
// The per-target counts are this test's report (`make fuzz` shows them with --nocapture).
#![allow(clippy::print_stdout)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use arrow_array::{
    Array, ArrayRef, BinaryArray, Int32Array, Int64Array, LargeBinaryArray, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Fields, TimeUnit as ArrowUnit};
use streamstate_core::admission::{BuiltIn, Handler};
use streamstate_core::arrow_decode::{decode_column, decode_kafka_batch};
use streamstate_core::error::{CoreError, ErrorKind};
use streamstate_core::json_columns::json_to_array;
use streamstate_core::json_path::extract_json_path;
use streamstate_core::serde::{
    AvroDeserializer, AvroSerializer, DeserializeError, Deserializer, Serializer,
};
use streamstate_core::stamp::{StampState, Stamper};
use streamstate_core::timestamp::{
    parse_iso8601_ms, ExtractInput, OnInvalid, TimeUnit, TimestampError, TimestampExtractor,
};
use streamstate_core::value::Value;

// ---------------------------------------------------------------------------------------
// The harness: seeds, counts, panics caught and reported with the seed that replays them.
// ---------------------------------------------------------------------------------------

/// xorshift64*, seeded through splitmix64: deterministic and dependency-free.
struct Rng(u64);

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(splitmix(seed) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    /// A length biased toward the small sizes where fixed-width formats have their edges.
    fn len(&mut self) -> usize {
        match self.below(10) {
            0..=4 => self.below(10),
            5..=8 => self.below(65),
            _ => self.below(1025),
        }
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.len();
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// What one case saw: its payload decoded, or was refused with a typed error.
enum Seen {
    Decoded,
    Refused,
}

/// `Err` is a failure of the contract (an error of the wrong kind, or one not naming its record).
type Case = Result<Seen, String>;

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim().replace('_', "");
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text:?} is not a number")))
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}

/// Runs `case` once per payload of `target`; returns how many payloads ran.
fn fuzz(target: &str, mut case: impl FnMut(&mut Rng) -> Case) -> u64 {
    let base = env_u64("STREAMSTATE_FUZZ_SEED").unwrap_or(0x5eed_2026_1126);
    let cases = env_u64("STREAMSTATE_FUZZ_CASES").unwrap_or(10_000);
    let target_hash = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let seeds: Vec<u64> = match env_u64("STREAMSTATE_FUZZ_CASE") {
        Some(seed) => vec![seed],
        None => (0..cases)
            .map(|i| splitmix(base ^ target_hash ^ splitmix(i)))
            .collect(),
    };
    let (mut decoded, mut refused) = (0u64, 0u64);
    for seed in seeds {
        let mut rng = Rng::new(seed);
        match catch_unwind(AssertUnwindSafe(|| case(&mut rng))) {
            Ok(Ok(Seen::Decoded)) => decoded += 1,
            Ok(Ok(Seen::Refused)) => refused += 1,
            Ok(Err(why)) => panic!(
                "fuzz {target}: case seed {seed:#x}: {why}; replay it with \
                 STREAMSTATE_FUZZ_CASE={seed:#x} cargo test -p streamstate-core --test fuzz"
            ),
            Err(payload) => panic!(
                "fuzz {target}: case seed {seed:#x} PANICKED: {}; replay it with \
                 STREAMSTATE_FUZZ_CASE={seed:#x} cargo test -p streamstate-core --test fuzz",
                panic_text(payload.as_ref())
            ),
        }
    }
    println!(
        "fuzz {target}: {} payloads, {decoded} decoded, {refused} typed errors, 0 panics \
         (base seed {base:#x})",
        decoded + refused
    );
    decoded + refused
}

fn refused_de(e: &DeserializeError) -> Case {
    if e.reason.trim().is_empty() {
        return Err("a DeserializeError without a reason".to_owned());
    }
    Ok(Seen::Refused)
}

fn refused_ts(e: &TimestampError) -> Case {
    if e.reason.trim().is_empty() {
        return Err("a TimestampError without a reason".to_owned());
    }
    Ok(Seen::Refused)
}

/// A record-level `CoreError`: a deserialization or timestamp failure, naming its record when
/// `located` (the batch paths know topic, partition and offset).
fn refused_core(e: &CoreError, located: bool) -> Case {
    if !matches!(
        e.kind,
        ErrorKind::Deserialization | ErrorKind::InvalidTimestamp
    ) {
        return Err(format!("a {:?} error for a bad record: {e}", e.kind));
    }
    if e.reason.trim().is_empty() {
        return Err(format!("a {:?} error without a reason", e.kind));
    }
    let l = &e.location;
    if located && (l.topic.is_none() || l.partition.is_none() || l.offset.is_none()) {
        return Err(format!("an error that does not name its record: {e}"));
    }
    Ok(Seen::Refused)
}

// ---------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------

const KEYS: &[&str] = &["ts", "meta", "a", "b", "s", "", "a.b", "\u{e9}", "ts\u{0}"];

/// A timestamp-ish JSON literal: huge, negative, fractional, NaN/inf (as text: JSON has none),
/// ISO-8601 strings right and wrong, and other types.
fn ts_literal(rng: &mut Rng) -> String {
    const FIXED: &[&str] = &[
        "0",
        "-1",
        "1700000000000",
        "1700000000.123",
        "-0.0",
        "1.5",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999",
        "1e308",
        "-1e308",
        "1e400",
        "4.9e-324",
        "9.223372036854776e18",
        "9.2233720368547748e15",
        "NaN",
        "-Infinity",
        "Infinity",
        "\"NaN\"",
        "\"inf\"",
        "null",
        "true",
        "[]",
        "{}",
        "\"\"",
        "\"2024-02-29T12:34:56.789Z\"",
        "\"2023-02-29T00:00:00Z\"",
        "\"2024-01-01T00:00:60Z\"",
        "\"9999-12-31T23:59:59.999999999+23:59\"",
        "\"0000-01-01T00:00:00Z\"",
        "\"-0001-01-01T00:00:00Z\"",
        "\"2024-13-01T00:00:00Z\"",
        "\"2024-01-01T00:00:00\"",
        "\"2024-01-01T00:00:00.1234567891234567891234Z\"",
        "\"2024-01-01T00:00:00+99:99\"",
        "\"2024-01-01 00:00:00-0130\"",
        "\"2024-01-01t00:00:00z\"",
    ];
    match rng.below(4) {
        0 => (rng.next() as i64).to_string(),
        1 => format!("{:e}", f64::from_bits(rng.next())).replace("NaN", "1e999"),
        2 => {
            let mut s = (*rng.pick(FIXED)).to_owned().into_bytes();
            if s.len() > 2 && rng.one_in(2) {
                let at = 1 + rng.below(s.len() - 2);
                s[at] = *rng.pick(b"0129:-+.TZ x\\\"");
            }
            String::from_utf8_lossy(&s).into_owned()
        }
        _ => (*rng.pick(FIXED)).to_owned(),
    }
}

fn json_string(rng: &mut Rng) -> String {
    const PARTS: &[&str] = &[
        "a",
        "ts",
        "\\n",
        "\\\"",
        "\\u00e9",
        "\\ud83d\\ude80",
        "\\ud800",
        "\\udc00x",
        "\u{e9}",
        "\u{1f680}",
        "\\u0000",
        "  ",
        "\\x",
        "2024-01-01T00:00:00Z",
    ];
    let n = rng.below(5);
    let body: String = (0..n).map(|_| *rng.pick(PARTS)).collect();
    format!("\"{body}\"")
}

/// A JSON document, valid but for the rare literal JSON lacks (NaN) or a bad escape.
fn json_doc(rng: &mut Rng, depth: usize) -> String {
    let leaf = depth >= 6 || rng.one_in(3);
    match if leaf { rng.below(4) } else { 4 + rng.below(2) } {
        0 => ts_literal(rng),
        1 => json_string(rng),
        2 => (*rng.pick(&["null", "true", "false", "0", "-0", "1.0e2"])).to_owned(),
        3 => (rng.next() as i32).to_string(),
        4 => {
            let n = rng.below(5);
            let items: Vec<String> = (0..n).map(|_| json_doc(rng, depth + 1)).collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let n = rng.below(6);
            let members: Vec<String> = (0..n)
                .map(|_| {
                    let key = *rng.pick(KEYS);
                    format!("{key:?}:{}", json_doc(rng, depth + 1))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }
}

/// A document shaped like a record with an event-time field.
fn json_record(rng: &mut Rng) -> String {
    format!(
        "{{\"ts\":{},\"meta\":{{\"ts\":{}}},\"s\":{},\"a\":{},\"f\":{},\"ok\":{}}}",
        ts_literal(rng),
        ts_literal(rng),
        json_string(rng),
        json_doc(rng, 4),
        ts_literal(rng),
        rng.pick(&["true", "false", "1", "null", "\"yes\""]),
    )
}

fn deep_nesting(rng: &mut Rng) -> Vec<u8> {
    let depth = rng
        .pick(&[127usize, 128, 129, 200, 1_000, 20_000])
        .to_owned();
    let (open, close): (&[u8], &[u8]) = match rng.below(3) {
        0 => (b"[", b"]"),
        1 => (b"{\"ts\":", b"}"),
        _ => (b"{\"meta\":[", b"]}"),
    };
    let mut out = open.repeat(depth);
    out.extend_from_slice(b"1");
    if !rng.one_in(4) {
        out.extend(close.repeat(depth));
    }
    out
}

const INVALID_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xe2\x82",
    b"\x80",
];

/// One to three mutations: flips, overwrites, insertions, deletions, truncation, duplication,
/// invalid UTF-8, trailing garbage.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let at = if data.is_empty() {
            0
        } else {
            rng.below(data.len() + 1)
        };
        match rng.below(8) {
            0 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] = rng.next() as u8;
            }
            2 => data.insert(at, rng.next() as u8),
            3 => data.truncate(at),
            4 => {
                let end = (at + rng.below(8)).min(data.len());
                data.drain(at..end);
            }
            5 => {
                let end = (at + rng.below(16)).min(data.len());
                let copy = data[at..end].to_vec();
                data.splice(at..at, copy);
            }
            6 => {
                let bad = rng.pick(INVALID_UTF8);
                data.splice(at..at, bad.iter().copied());
            }
            _ => {
                const TAILS: [&[u8]; 5] = [b" x", b",", b"}", b"\x00", b"]]"];
                let tail = *rng.pick(&TAILS);
                data.extend_from_slice(tail);
            }
        }
    }
}

fn json_payload(rng: &mut Rng) -> Vec<u8> {
    let mut doc = match rng.below(3) {
        0 => json_doc(rng, 0).into_bytes(),
        _ => json_record(rng).into_bytes(),
    };
    match rng.below(10) {
        0..=3 => doc,
        4..=7 => {
            mutate(rng, &mut doc);
            doc
        }
        8 => deep_nesting(rng),
        _ => rng.bytes(),
    }
}

/// Bytes around a fixed-width encoding: the exact width (every value is legal there), one off,
/// empty, or random.
fn fixed_payload(rng: &mut Rng, width: usize) -> Vec<u8> {
    let n = match rng.below(4) {
        0 => width,
        1 => width + 1,
        2 => width.saturating_sub(1 + rng.below(width.max(1))),
        _ => return rng.bytes(),
    };
    (0..n).map(|_| rng.next() as u8).collect()
}

fn text_payload(rng: &mut Rng) -> Vec<u8> {
    let mut s = match rng.below(3) {
        0 => "h\u{e9}llo \u{1f680}".as_bytes().to_vec(),
        1 => json_string(rng).into_bytes(),
        _ => rng.bytes(),
    };
    if rng.one_in(2) {
        mutate(rng, &mut s);
    }
    s
}

fn uuid_payload(rng: &mut Rng) -> Vec<u8> {
    let hex = |rng: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| *rng.pick(b"0123456789abcdefABCDEFg-"))
            .map(char::from)
            .collect()
    };
    let mut s = format!(
        "{}-{}-{}-{}-{}",
        hex(rng, 8),
        hex(rng, 4),
        hex(rng, 4),
        hex(rng, 4),
        hex(rng, 12)
    )
    .into_bytes();
    match rng.below(4) {
        0 => s,
        1 | 2 => {
            mutate(rng, &mut s);
            s
        }
        _ => rng.bytes(),
    }
}

// ---------------------------------------------------------------------------------------
// Avro: valid encodings of several schemas, then broken in every way the framing allows.
// ---------------------------------------------------------------------------------------

const RECORD_SCHEMA: &str = r#"{
    "type": "record", "name": "Fuzz", "namespace": "t",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "b", "type": "bytes"},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "string", "double"]}},
        {"name": "u", "type": ["null", "long", "Fuzz"]},
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
        {"name": "n", "type": {"type": "array", "items": "null"}},
        {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}
    ]
}"#;

/// Schemas where a count, not the bytes, bounds the work: zero-width items, recursion.
const EDGE_SCHEMAS: &[&str] = &[
    r#"{"type": "array", "items": "null"}"#,
    r#"{"type": "map", "values": "null"}"#,
    r#"{"type": "array", "items": {"type": "record", "name": "Empty", "fields": []}}"#,
    r#"{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}"#,
    r#"{"type": "array", "items": {"type": "array", "items": "string"}}"#,
    r#""string""#,
    r#""double""#,
];

fn avro_record_value(rng: &mut Rng, depth: usize) -> Value {
    let long = |rng: &mut Rng| Value::Long(rng.next() as i64 >> rng.below(64));
    let string = |rng: &mut Rng| {
        let n = rng.below(12);
        Value::String(
            (0..n)
                .map(|_| *rng.pick(&['a', '\u{e9}', '\u{1f680}', '\0']))
                .collect(),
        )
    };
    let n_items = rng.below(4);
    let u = if depth < 3 && rng.one_in(3) {
        avro_record_value(rng, depth + 1)
    } else if rng.one_in(2) {
        long(rng)
    } else {
        Value::Null
    };
    Value::Map(vec![
        ("s".into(), string(rng)),
        ("b".into(), Value::Bytes(rng.bytes())),
        (
            "a".into(),
            Value::Array((0..n_items).map(|_| long(rng)).collect()),
        ),
        (
            "m".into(),
            Value::Map(vec![
                ("k".into(), string(rng)),
                ("d".into(), Value::Double(f64::from_bits(rng.next()))),
                ("z".into(), Value::Null),
            ]),
        ),
        ("u".into(), u),
        ("l".into(), long(rng)),
        ("i".into(), Value::Int(rng.next() as i32)),
        ("f".into(), Value::Float(f32::from_bits(rng.next() as u32))),
        ("d".into(), Value::Double(f64::from_bits(rng.next()))),
        ("ok".into(), Value::Bool(rng.one_in(2))),
        ("e".into(), Value::String(rng.pick(&["X", "Y"]).to_string())),
        ("n".into(), Value::Array(vec![Value::Null; rng.below(4)])),
        (
            "fx".into(),
            Value::Bytes((0..4).map(|_| rng.next() as u8).collect()),
        ),
        ("ts".into(), long(rng)),
        ("day".into(), Value::Int(rng.next() as i32)),
        (
            "dec".into(),
            Value::Bytes(vec![rng.next() as u8; 1 + rng.below(3)]),
        ),
        (
            "id".into(),
            Value::Uuid(rng.next().to_be_bytes().repeat(2).try_into().unwrap()),
        ),
    ])
}

/// A zig-zag varint, as Avro writes `long`s (counts and lengths among them).
fn varint(n: i64) -> Vec<u8> {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    let mut out = Vec::new();
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// The serializer of [`RECORD_SCHEMA`] with schema id 1, built once.
fn record_serializer() -> &'static Serializer {
    static SERIALIZER: OnceLock<Serializer> = OnceLock::new();
    SERIALIZER
        .get_or_init(|| Serializer::Avro(AvroSerializer::new(RECORD_SCHEMA, Some(1)).unwrap()))
}

/// A payload for the Avro deserializer of [`RECORD_SCHEMA`] (writer schema id 1): a valid
/// encoding of a random value, or one broken in the framing or the datum.
fn avro_payload(rng: &mut Rng) -> Vec<u8> {
    let v = avro_record_value(rng, 0);
    let mut body = record_serializer()
        .serialize(&v)
        .expect("a value of the schema encodes")
        .expect("not null");
    match rng.below(9) {
        0 => body,
        // Wrong magic byte.
        1 => {
            if let Some(first) = body.first_mut() {
                *first = 1 + rng.below(255) as u8;
            }
            body
        }
        // Wrong schema id.
        2 => {
            if body.len() >= 5 {
                body[1..5].copy_from_slice(&(rng.next() as i32).to_be_bytes());
            }
            body
        }
        // Truncated anywhere, the framing included.
        3 => {
            let n = rng.below(body.len() + 1);
            body.truncate(n);
            body
        }
        // Oversized or negative counts and lengths, after a valid prefix of the datum.
        4 | 5 => {
            let cut = 5 + rng.below(body.len().saturating_sub(5) + 1);
            body.truncate(cut.min(body.len()));
            let n = *rng.pick(&[
                i64::MAX,
                i64::MIN,
                -1,
                1 << 31,
                1 << 20,
                (1 << 20) + 1,
                1 << 40,
                -(1 << 40),
            ]);
            body.extend(varint(n));
            if rng.one_in(2) {
                body.extend(varint(n));
            }
            body.extend((0..rng.below(16)).map(|_| rng.next() as u8));
            body
        }
        // Varints longer than 64 bits.
        6 => {
            body.extend(std::iter::repeat_n(0xff, 10 + rng.below(10)));
            body
        }
        7 => {
            mutate(rng, &mut body);
            body
        }
        _ => {
            let id = if rng.one_in(2) { 1 } else { rng.next() as i32 };
            let mut b = vec![0u8];
            b.extend_from_slice(&id.to_be_bytes());
            b.extend(rng.bytes());
            b
        }
    }
}

// ---------------------------------------------------------------------------------------
// Targets: one test per entry point (each deserializer its own target).
// ---------------------------------------------------------------------------------------

fn deserializer_target(
    target: &str,
    de: &Deserializer,
    payload: impl Fn(&mut Rng) -> Vec<u8>,
) -> u64 {
    fuzz(target, |rng| {
        let data = payload(rng);
        match de.deserialize(Some(&data)) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_de(&e),
        }
    })
}

/// Any payload at all: the payload kinds of every deserializer, for each deserializer.
fn any_payload(rng: &mut Rng) -> Vec<u8> {
    match rng.below(6) {
        0 => rng.bytes(),
        1 => json_payload(rng),
        2 => {
            let width = *rng.pick(&[2, 4, 8]);
            fixed_payload(rng, width)
        }
        3 => text_payload(rng),
        4 => uuid_payload(rng),
        _ => avro_payload(rng),
    }
}

/// Bytes, strings and fixed-width numbers are so simple that an "any payload" mix covers them;
/// their own payload kind comes up half of the time.
#[test]
fn kafka_serdes() {
    let own = |width: usize| {
        move |rng: &mut Rng| {
            if rng.one_in(2) {
                fixed_payload(rng, width)
            } else {
                any_payload(rng)
            }
        }
    };
    deserializer_target("ByteArrayDeserializer", &Deserializer::Bytes, any_payload);
    deserializer_target("StringDeserializer", &Deserializer::String, |rng| {
        if rng.one_in(2) {
            text_payload(rng)
        } else {
            any_payload(rng)
        }
    });
    deserializer_target("ShortDeserializer", &Deserializer::Short, own(2));
    deserializer_target("IntegerDeserializer", &Deserializer::Integer, own(4));
    deserializer_target("LongDeserializer", &Deserializer::Long, own(8));
    deserializer_target("FloatDeserializer", &Deserializer::Float, own(4));
    deserializer_target("DoubleDeserializer", &Deserializer::Double, own(8));
    deserializer_target("UUIDDeserializer", &Deserializer::Uuid, |rng| {
        if rng.one_in(2) {
            uuid_payload(rng)
        } else {
            any_payload(rng)
        }
    });
}

#[test]
fn json_deserializer() {
    deserializer_target("JsonDeserializer", &Deserializer::Json, json_payload);
}

#[test]
fn avro_deserializer() {
    let with_id = Deserializer::Avro(AvroDeserializer::new(RECORD_SCHEMA, Some(1)).unwrap());
    let any_id = Deserializer::Avro(AvroDeserializer::new(RECORD_SCHEMA, None).unwrap());
    deserializer_target("KafkaAvroDeserializer(record, id 1)", &with_id, |rng| {
        avro_payload(rng)
    });
    deserializer_target("KafkaAvroDeserializer(record, any id)", &any_id, |rng| {
        avro_payload(rng)
    });
    let edges: Vec<Deserializer> = EDGE_SCHEMAS
        .iter()
        .map(|s| Deserializer::Avro(AvroDeserializer::new(s, None).unwrap()))
        .collect();
    // Hand-made bodies: huge counts of zero-width items, long recursion chains, random tails.
    fuzz("KafkaAvroDeserializer(edge schemas)", |rng| {
        let i = rng.below(edges.len());
        let mut data = vec![0, 0, 0, 0, 7];
        match rng.below(4) {
            0 => {
                for _ in 0..1 + rng.below(3) {
                    // Counts past the decoder's limit on zero-width items (2^20), which must be
                    // refused before any work; a count right at the limit is slow to decode
                    // (a million items), so it comes up rarely.
                    let count = if rng.one_in(500) {
                        1 << 20
                    } else {
                        *rng.pick(&[i64::MAX, -i64::MAX, (1 << 20) + 1, 1 << 30, -(1 << 30)])
                    };
                    data.extend(varint(count));
                    if rng.one_in(2) {
                        data.extend(varint(rng.below(1 << 12) as i64));
                    }
                }
                data.push(0);
            }
            1 => data.extend(std::iter::repeat_n(
                2u8,
                rng.pick(&[255usize, 256, 257, 100_000]).to_owned(),
            )),
            2 => data.extend(rng.bytes()),
            _ => {
                data.extend(varint(rng.below(64) as i64));
                data.extend(rng.bytes());
                mutate(rng, &mut data);
            }
        }
        match edges[i].deserialize(Some(&data)) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_de(&e),
        }
    });
}

fn paths(rng: &mut Rng) -> Vec<String> {
    let n = 1 + rng.below(3);
    (0..n).map(|_| (*rng.pick(KEYS)).to_owned()).collect()
}

#[test]
fn json_path() {
    fuzz("extract_json_path", |rng| {
        let data = json_payload(rng);
        let path = paths(rng);
        match extract_json_path(&data, &path) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_de(&e),
        }
    });
}

#[test]
fn iso8601() {
    fuzz("parse_iso8601_ms", |rng| {
        let lit = ts_literal(rng);
        let mut text = lit.trim_matches('"').as_bytes().to_vec();
        if rng.one_in(2) {
            mutate(rng, &mut text);
        }
        let text = String::from_utf8_lossy(&text);
        match parse_iso8601_ms(&text) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_ts(&e),
        }
    });
}

const POLICIES: [OnInvalid; 3] = [OnInvalid::Fail, OnInvalid::Skip, OnInvalid::PartitionTime];

fn extractor(rng: &mut Rng) -> TimestampExtractor {
    match rng.below(6) {
        0 => TimestampExtractor::RecordTimestamp(*rng.pick(&POLICIES)),
        1 => TimestampExtractor::WallClock,
        _ => TimestampExtractor::json_field(
            [&"ts", &"meta.ts", &"a.b.c"][rng.below(3)],
            *rng.pick(&[TimeUnit::Millis, TimeUnit::Seconds, TimeUnit::Iso8601]),
            *rng.pick(&POLICIES),
        )
        .unwrap(),
    }
}

fn record_timestamp(rng: &mut Rng) -> i64 {
    let random = rng.next() as i64;
    *rng.pick(&[random, -1, 0, i64::MIN, i64::MAX, 1_700_000_000_000])
}

/// Every extractor, on every shape of value it can be handed: a decoded JSON value (when the
/// payload decodes), raw bytes, text, a non-JSON value, null; with and without the raw bytes.
#[test]
fn timestamp_extractors() {
    fuzz("TimestampExtractor::extract", |rng| {
        let x = extractor(rng);
        let data = json_payload(rng);
        let decoded = Deserializer::Json.deserialize(Some(&data)).ok();
        let value = match rng.below(5) {
            0 => decoded.unwrap_or(Value::Null),
            1 => Value::Bytes(data.clone()),
            2 => Value::String(String::from_utf8_lossy(&data).into_owned()),
            3 => Value::Long(rng.next() as i64),
            _ => Value::Null,
        };
        let input = ExtractInput {
            record_timestamp: record_timestamp(rng),
            value: &value,
            raw_value: rng.one_in(2).then_some(&data[..]),
        };
        let partition_time = *rng.pick(&[-1, 0, i64::MAX, 1_700_000_000_000]);
        match x.extract(&input, partition_time) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_ts(&e),
        }
    });
}

fn value_types() -> Vec<DataType> {
    let meta = DataType::Struct(Fields::from(vec![Field::new("ts", DataType::Utf8, true)]));
    vec![
        DataType::Struct(Fields::from(vec![
            Field::new("ts", DataType::Int64, true),
            Field::new("meta", meta.clone(), true),
            Field::new("s", DataType::Utf8, true),
            Field::new("a", DataType::new_list(DataType::Int64, true), true),
            Field::new("f", DataType::Float64, true),
            Field::new("ok", DataType::Boolean, true),
        ])),
        DataType::Struct(Fields::from(vec![
            Field::new(
                "ts",
                DataType::Timestamp(ArrowUnit::Millisecond, None),
                true,
            ),
            Field::new("meta", DataType::Utf8, true),
            Field::new("a", DataType::Date32, true),
            Field::new("s", DataType::Int8, true),
            Field::new("f", DataType::Float32, true),
            Field::new("b", DataType::Binary, true),
        ])),
        DataType::Int64,
        DataType::Utf8,
        DataType::Boolean,
        DataType::new_list(meta, true),
    ]
}

#[test]
fn json_columns() {
    let types = value_types();
    fuzz("json_to_array", |rng| {
        let t = rng.pick(&types);
        let data = json_payload(rng);
        match json_to_array(&[Some(&data)], t) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_core(&e, false),
        }
    });
}

/// A batch in Spark's Kafka source schema, offsets strictly increasing per partition.
fn kafka_batch(
    rng: &mut Rng,
    keys: Vec<Option<Vec<u8>>>,
    values: Vec<Option<Vec<u8>>>,
) -> RecordBatch {
    let n = keys.len();
    let partitions: Vec<i32> = (0..n).map(|_| rng.below(2) as i32).collect();
    let offsets: Vec<i64> = (0..n as i64)
        .map(|i| 10 * i + rng.below(5) as i64)
        .collect();
    let timestamps: Vec<Option<i64>> = (0..n)
        .map(|_| (!rng.one_in(10)).then(|| record_timestamp(rng).clamp(-1 << 50, 1 << 50)))
        .collect();
    let binary = |col: Vec<Option<Vec<u8>>>, large: bool| -> ArrayRef {
        let refs: Vec<Option<&[u8]>> = col.iter().map(Option::as_deref).collect();
        if large {
            Arc::new(LargeBinaryArray::from(refs))
        } else {
            Arc::new(BinaryArray::from(refs))
        }
    };
    let large = rng.one_in(4);
    let timestamp: ArrayRef = if rng.one_in(2) {
        Arc::new(Int64Array::from(timestamps))
    } else {
        Arc::new(
            TimestampMicrosecondArray::from(
                timestamps
                    .iter()
                    .map(|t| t.map(|t| t.saturating_mul(1000)))
                    .collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        )
    };
    RecordBatch::try_from_iter(vec![
        ("key", binary(keys, large)),
        ("value", binary(values, large)),
        (
            "topic",
            Arc::new(StringArray::from(vec!["orders"; n])) as ArrayRef,
        ),
        (
            "partition",
            Arc::new(Int32Array::from(partitions)) as ArrayRef,
        ),
        ("offset", Arc::new(Int64Array::from(offsets)) as ArrayRef),
        ("timestamp", timestamp),
    ])
    .unwrap()
}

/// The deserializers a batch path is configured with, and payloads that suit each.
/// Makes one payload.
type Payload = fn(&mut Rng) -> Vec<u8>;

fn batch_serdes() -> Vec<(Deserializer, Payload)> {
    vec![
        (Deserializer::Bytes, any_payload),
        (Deserializer::String, text_payload),
        (Deserializer::Short, |rng| fixed_payload(rng, 2)),
        (Deserializer::Integer, |rng| fixed_payload(rng, 4)),
        (Deserializer::Long, |rng| fixed_payload(rng, 8)),
        (Deserializer::Float, |rng| fixed_payload(rng, 4)),
        (Deserializer::Double, |rng| fixed_payload(rng, 8)),
        (Deserializer::Uuid, uuid_payload),
        (Deserializer::Json, json_payload),
        (
            Deserializer::Avro(AvroDeserializer::new(RECORD_SCHEMA, Some(1)).unwrap()),
            |rng| avro_payload(rng),
        ),
    ]
}

/// Rows per batch on the batch paths; the counts report payloads (rows), not batches.
const ROWS: usize = 8;

fn column(rng: &mut Rng, payload: Payload) -> Vec<Option<Vec<u8>>> {
    (0..ROWS)
        .map(|_| (!rng.one_in(8)).then(|| payload(rng)))
        .collect()
}

#[test]
fn arrow_decode() {
    let serdes = batch_serdes();
    let flat = &serdes[..8];
    let mut rows = 0;
    fuzz("decode_column", |rng| {
        let (de, payload) = rng.pick(flat);
        let col = column(rng, *payload);
        rows += col.len();
        let refs: Vec<Option<&[u8]>> = col.iter().map(Option::as_deref).collect();
        let array = BinaryArray::from(refs);
        match decode_column(&array, de) {
            Ok(out) if out.len() == ROWS => Ok(Seen::Decoded),
            Ok(out) => Err(format!("{} rows in, {} out", ROWS, out.len())),
            Err(e) if !e.reason.starts_with("row ") => Err(format!("no row named: {e}")),
            Err(e) => refused_core(&e, false),
        }
    });
    println!("fuzz decode_column: {rows} rows in all");
    let mut rows = 0;
    fuzz("decode_kafka_batch", |rng| {
        let (kd, kp) = rng.pick(flat);
        let (vd, vp) = rng.pick(flat);
        let keys = column(rng, *kp);
        let values = column(rng, *vp);
        rows += keys.len();
        let batch = kafka_batch(rng, keys, values);
        match decode_kafka_batch(&batch, kd, vd) {
            Ok(_) => Ok(Seen::Decoded),
            Err(e) => refused_core(&e, true),
        }
    });
    println!("fuzz decode_kafka_batch: {rows} rows in all");
}

/// The Python `RecordQueue`'s Arrow path: every built-in deserializer, extractor and handler.
#[test]
fn admission() {
    let serdes = batch_serdes();
    let mut rows = 0;
    fuzz("BuiltIn::admit_arrow", |rng| {
        let (key, kp) = rng.pick(&serdes);
        let (value, vp) = rng.pick(&serdes);
        let parts = BuiltIn {
            key: key.clone(),
            value: value.clone(),
            extractor: extractor(rng),
            handler: *rng.pick(&[Handler::Fail, Handler::Continue]),
        };
        let keys = column(rng, *kp);
        let values = column(rng, *vp);
        rows += keys.len();
        let batch = kafka_batch(rng, keys, values);
        let out = parts.admit_arrow(&batch, "orders", 0, *rng.pick(&[-1, 0, 1 << 40]));
        if out.admitted.len() + out.dropped.len() > ROWS {
            return Err("more records admitted and dropped than given".to_owned());
        }
        match &out.error {
            None => Ok(Seen::Decoded),
            Some(e) => refused_core(e, true),
        }
    });
    println!("fuzz BuiltIn::admit_arrow: {rows} rows in all");
}

/// `stamp`, Spark's path: flat serdes to their natural columns, JSON and Avro to text or to a
/// struct column given a value schema.
#[test]
fn stamp() {
    let serdes = batch_serdes();
    let types = value_types();
    let mut rows = 0;
    fuzz("Stamper::stamp", |rng| {
        let (key, kp) = rng.pick(&serdes);
        let (value, vp) = rng.pick(&serdes);
        let value_type = match value {
            Deserializer::Json | Deserializer::Avro(_) if !rng.one_in(3) => {
                Some(rng.pick(&types[..2]).clone())
            }
            _ => None,
        };
        let stamper = Stamper::new(
            key.clone(),
            value.clone(),
            extractor(rng),
            *rng.pick(&[Handler::Fail, Handler::Continue]),
            value_type,
        )
        .map_err(|e| format!("a supported configuration refused: {e}"))?;
        let keys = column(rng, *kp);
        let values = column(rng, *vp);
        rows += keys.len();
        let batch = kafka_batch(rng, keys, values);
        let mut state = StampState::new();
        match stamper.stamp(&batch, &mut state) {
            Ok(out) if out.num_rows() <= ROWS => Ok(Seen::Decoded),
            Ok(out) => Err(format!("{ROWS} rows in, {} out", out.num_rows())),
            Err(e) => refused_core(&e, true),
        }
    });
    println!("fuzz Stamper::stamp: {rows} rows in all");
}

/// The harness itself: a panic inside a case is caught, and reported with the seed that
/// replays it (so a failure in the targets above is reproducible from its message).
#[test]
fn a_panicking_case_is_reported_with_its_seed() {
    let caught = catch_unwind(|| {
        fuzz("harness", |rng| {
            if rng.one_in(3) {
                panic!("deliberate");
            }
            Ok(Seen::Decoded)
        })
    });
    let message = panic_text(caught.expect_err("the harness must fail").as_ref());
    assert!(message.contains("PANICKED: deliberate"), "{message}");
    assert!(message.contains("STREAMSTATE_FUZZ_CASE=0x"), "{message}");
}
