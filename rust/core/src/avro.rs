//! Confluent-framed Avro (`KafkaAvroSerializer`/`KafkaAvroDeserializer` wire format) with one
//! fixed writer schema.
//!
//! Framing: byte 0 is the magic byte `0`, bytes 1..5 the big-endian schema-registry id, then the
//! Avro binary encoding of one datum.
//!
//! The schema is parsed and validated by the `apache-avro` crate, then compiled into a flat
//! node table with every named reference resolved to an index. Datums are decoded by our own
//! walker over that table, straight into [`Value`], rather than through `apache-avro`'s reader,
//! because that reader (0.22): resolves every named type again for each datum, decodes maps into
//! a `HashMap` (losing source order), returns `Null` instead of an error for some truncated
//! inputs, and bounds a corrupt length prefix only by a 512 MiB global limit. Ours bounds every
//! length by the bytes that remain, limits nesting depth, and rejects trailing bytes.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use apache_avro::schema::{
    DecimalSchema, InnerDecimalSchema, Name, NamesRef, RecordSchema, ResolvedSchema, UuidSchema,
};
use apache_avro::Schema;

use crate::serde::{preview, DeserializeError, SerializeError};
use crate::value::{format_uuid, parse_uuid, Value};

/// Maximum nesting of records, arrays, maps and unions in one datum; recursive schemas could
/// otherwise recurse once per input byte and overflow the stack.
const MAX_DEPTH: usize = 256;

/// Most items a datum may hold in arrays whose items take no bytes (e.g. `null`); a 2-byte block
/// count could otherwise ask for billions of them.
const MAX_ZERO_WIDTH_ITEMS: usize = 1 << 20;

/// Decodes Confluent-framed Avro records written with one known schema.
///
/// Cheap to clone: the compiled schema is shared.
#[derive(Clone)]
pub struct AvroDeserializer {
    codec: Arc<Codec>,
}

/// Encodes [`Value`]s as Confluent-framed Avro with one known schema.
///
/// Cheap to clone: the compiled schema is shared.
#[derive(Clone)]
pub struct AvroSerializer {
    codec: Arc<Codec>,
}

impl AvroDeserializer {
    /// Parses `schema_json` (the writer schema) once, so that a bad schema fails at
    /// configuration time instead of on the first record.
    ///
    /// With `schema_id = Some(id)`, every record must carry that id: a record written with
    /// another schema would otherwise be decoded as garbage or, worse, as plausible values.
    pub fn new(schema_json: &str, schema_id: Option<i32>) -> Result<Self, DeserializeError> {
        Ok(AvroDeserializer {
            codec: Arc::new(Codec::new(schema_json, schema_id)?),
        })
    }

    /// The id records must carry, if one was configured.
    pub fn schema_id(&self) -> Option<i32> {
        self.codec.schema_id
    }

    /// The parsed writer schema (canonical form is available through `apache-avro`).
    pub fn schema(&self) -> &Schema {
        &self.codec.schema
    }

    /// Decodes one framed datum; every malformed input is an error, never a panic.
    pub fn deserialize(&self, data: &[u8]) -> Result<Value, DeserializeError> {
        self.codec.decode_framed(data)
    }
}

impl AvroSerializer {
    /// Parses `schema_json` once; records are framed with `schema_id` (0 when `None`).
    pub fn new(schema_json: &str, schema_id: Option<i32>) -> Result<Self, SerializeError> {
        Codec::new(schema_json, schema_id)
            .map(|c| AvroSerializer { codec: Arc::new(c) })
            .map_err(|e| SerializeError::new(e.reason))
    }

    /// The id written into every record's framing.
    pub fn schema_id(&self) -> i32 {
        self.codec.schema_id.unwrap_or(0)
    }

    /// Encodes one value as a framed datum.
    pub fn serialize(&self, v: &Value) -> Result<Vec<u8>, SerializeError> {
        let mut out = Vec::with_capacity(64);
        out.push(0);
        out.extend_from_slice(&self.schema_id().to_be_bytes());
        self.codec.encode(self.codec.root, v, &mut out, 0)?;
        Ok(out)
    }
}

impl From<&AvroDeserializer> for AvroSerializer {
    /// Shares the compiled schema, so a round-trip pair costs one parse.
    fn from(d: &AvroDeserializer) -> Self {
        AvroSerializer {
            codec: Arc::clone(&d.codec),
        }
    }
}

impl From<&AvroSerializer> for AvroDeserializer {
    /// Shares the compiled schema, so a round-trip pair costs one parse.
    fn from(s: &AvroSerializer) -> Self {
        AvroDeserializer {
            codec: Arc::clone(&s.codec),
        }
    }
}

impl fmt::Debug for AvroDeserializer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AvroDeserializer")
            .field("schema_id", &self.codec.schema_id)
            .field("schema", &self.codec.schema.canonical_form())
            .finish()
    }
}

impl fmt::Debug for AvroSerializer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AvroSerializer")
            .field("schema_id", &self.codec.schema_id)
            .field("schema", &self.codec.schema.canonical_form())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------
// Compiled schema
// ---------------------------------------------------------------------------------------

#[derive(Debug)]
enum Node {
    Null,
    Boolean,
    /// `int`, `date`, `time-millis`.
    Int,
    /// `long`, `time-micros`, all timestamp logical types.
    Long,
    Float,
    Double,
    /// `bytes`, `decimal` over bytes, `big-decimal`.
    Bytes,
    String,
    /// `uuid` over `string`: decoded to `Value::Uuid`.
    UuidString,
    /// `uuid` over 16-byte `bytes` (apache-avro's legacy layout).
    UuidBytes,
    /// `uuid` over `fixed(16)`.
    UuidFixed,
    /// `fixed`, `decimal` over fixed, `duration`.
    Fixed(usize),
    Enum(Box<[String]>),
    Array(usize),
    Map(usize),
    Union(Box<[usize]>),
    Record(Box<[Field]>),
}

#[derive(Debug)]
struct Field {
    name: String,
    node: usize,
    /// The schema default, used by the serializer when a map lacks the field.
    default: Option<Value>,
}

struct Codec {
    schema: Schema,
    schema_id: Option<i32>,
    nodes: Vec<Node>,
    /// Lower bound of each node's encoded size, used to reject impossible item counts.
    min_size: Vec<usize>,
    root: usize,
}

impl Codec {
    fn new(schema_json: &str, schema_id: Option<i32>) -> Result<Self, DeserializeError> {
        let schema = Schema::parse_str(schema_json)
            .map_err(|e| DeserializeError::new(format!("invalid Avro schema: {e}")))?;
        let resolved = ResolvedSchema::new(&schema)
            .map_err(|e| DeserializeError::new(format!("invalid Avro schema: {e}")))?;
        let mut compiler = Compiler {
            nodes: Vec::new(),
            named: HashMap::new(),
            known: resolved.get_names(),
        };
        let root = compiler.compile(&schema, None)?;
        let nodes = compiler.nodes;
        let min_size = min_sizes(&nodes);
        Ok(Codec {
            schema,
            schema_id,
            nodes,
            min_size,
            root,
        })
    }
}

struct Compiler<'s> {
    nodes: Vec<Node>,
    named: HashMap<Name, usize>,
    known: &'s NamesRef<'s>,
}

impl Compiler<'_> {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Registers a named type before compiling its children, so recursive references resolve
    /// to the node being built.
    fn named(&mut self, name: &Name, ns: Option<&str>, node: Node) -> usize {
        let idx = self.push(node);
        self.named
            .insert(name.fully_qualified_name(ns).into_owned(), idx);
        idx
    }

    fn compile(&mut self, schema: &Schema, ns: Option<&str>) -> Result<usize, DeserializeError> {
        let node = match schema {
            Schema::Null => Node::Null,
            Schema::Boolean => Node::Boolean,
            Schema::Int | Schema::Date | Schema::TimeMillis => Node::Int,
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => Node::Long,
            Schema::Float => Node::Float,
            Schema::Double => Node::Double,
            Schema::Bytes | Schema::BigDecimal => Node::Bytes,
            Schema::String => Node::String,
            Schema::Uuid(UuidSchema::String) => Node::UuidString,
            Schema::Uuid(UuidSchema::Bytes) => Node::UuidBytes,
            Schema::Uuid(UuidSchema::Fixed(f)) => {
                if f.size != 16 {
                    return Err(DeserializeError::new(format!(
                        "invalid Avro schema: uuid over fixed must have size 16, got {}",
                        f.size
                    )));
                }
                return Ok(self.named(&f.name, ns, Node::UuidFixed));
            }
            Schema::Decimal(DecimalSchema { inner, .. }) => match inner {
                InnerDecimalSchema::Bytes => Node::Bytes,
                InnerDecimalSchema::Fixed(f) => {
                    return Ok(self.named(&f.name, ns, Node::Fixed(f.size)));
                }
            },
            Schema::Duration(f) | Schema::Fixed(f) => {
                return Ok(self.named(&f.name, ns, Node::Fixed(f.size)));
            }
            Schema::Enum(e) => {
                let symbols = e.symbols.clone().into_boxed_slice();
                return Ok(self.named(&e.name, ns, Node::Enum(symbols)));
            }
            Schema::Array(a) => {
                let idx = self.push(Node::Null);
                let items = self.compile(&a.items, ns)?;
                self.nodes[idx] = Node::Array(items);
                return Ok(idx);
            }
            Schema::Map(m) => {
                let idx = self.push(Node::Null);
                let values = self.compile(&m.types, ns)?;
                self.nodes[idx] = Node::Map(values);
                return Ok(idx);
            }
            Schema::Union(u) => {
                let idx = self.push(Node::Null);
                let branches = u
                    .variants()
                    .iter()
                    .map(|s| self.compile(s, ns))
                    .collect::<Result<Vec<_>, _>>()?;
                self.nodes[idx] = Node::Union(branches.into_boxed_slice());
                return Ok(idx);
            }
            Schema::Record(RecordSchema { name, fields, .. }) => {
                let full = name.fully_qualified_name(ns).into_owned();
                let idx = self.named(&full, None, Node::Null);
                let record_ns = full.namespace();
                let mut compiled = Vec::with_capacity(fields.len());
                for f in fields {
                    compiled.push(Field {
                        name: f.name.clone(),
                        node: self.compile(&f.schema, record_ns)?,
                        default: f.default.as_ref().map(json_to_value),
                    });
                }
                self.nodes[idx] = Node::Record(compiled.into_boxed_slice());
                return Ok(idx);
            }
            Schema::Ref { name } => {
                let full = name.fully_qualified_name(ns);
                if let Some(&idx) = self.named.get(&*full) {
                    return Ok(idx);
                }
                // Defined elsewhere in the schema but not yet visited in our walk.
                let known = self.known;
                let Some(target) = known.get(&*full).copied() else {
                    return Err(DeserializeError::new(format!(
                        "invalid Avro schema: unknown type '{full}'"
                    )));
                };
                return self.compile(target, full.namespace());
            }
        };
        Ok(self.push(node))
    }
}

/// Converts a schema default (JSON) into a `Value` for the serializer.
fn json_to_value(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Long(i)
            } else if let Some(u) = n.as_u64() {
                Value::UnsignedLong(u)
            } else {
                Value::Double(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(a) => Value::Array(a.iter().map(json_to_value).collect()),
        serde_json::Value::Object(o) => Value::Map(
            o.iter()
                .map(|(k, v)| (k.clone(), json_to_value(v)))
                .collect(),
        ),
    }
}

/// A lower bound of each node's encoded size; recursion (a record reaching itself) counts as 0,
/// which keeps the bound valid.
fn min_sizes(nodes: &[Node]) -> Vec<usize> {
    fn size(nodes: &[Node], i: usize, memo: &mut [Option<usize>], busy: &mut [bool]) -> usize {
        if let Some(s) = memo[i] {
            return s;
        }
        if busy[i] {
            return 0;
        }
        busy[i] = true;
        let s = match &nodes[i] {
            Node::Null => 0,
            Node::Float => 4,
            Node::Double => 8,
            Node::Fixed(n) => *n,
            Node::UuidFixed => 16,
            Node::UuidBytes => 17,
            Node::UuidString => 37,
            Node::Record(fields) => fields.iter().fold(0usize, |acc, f| {
                acc.saturating_add(size(nodes, f.node, memo, busy))
            }),
            // Every other encoding starts with at least one byte (a varint or a boolean).
            _ => 1,
        };
        busy[i] = false;
        memo[i] = Some(s);
        s
    }
    let mut memo = vec![None; nodes.len()];
    let mut busy = vec![false; nodes.len()];
    (0..nodes.len())
        .map(|i| size(nodes, i, &mut memo, &mut busy))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Items already produced for zero-width array elements (see `MAX_ZERO_WIDTH_ITEMS`).
    zero_width_items: usize,
}

fn truncated(what: &str, pos: usize) -> DeserializeError {
    DeserializeError::new(format!(
        "Avro data ends early while reading {what} at byte {pos} of the datum"
    ))
}

impl<'a> Reader<'a> {
    #[inline]
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DeserializeError> {
        if n > self.remaining() {
            return Err(DeserializeError::new(format!(
                "Avro {what} at byte {} of the datum claims {n} bytes but only {} remain",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn long(&mut self, what: &str) -> Result<i64, DeserializeError> {
        let start = self.pos;
        let mut acc: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(truncated(what, start));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(DeserializeError::new(format!(
                    "Avro {what} at byte {start} of the datum is a varint longer than 64 bits"
                )));
            }
            acc |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        Ok(((acc >> 1) as i64) ^ -((acc & 1) as i64))
    }

    #[inline]
    fn int(&mut self, what: &str) -> Result<i32, DeserializeError> {
        let start = self.pos;
        let v = self.long(what)?;
        i32::try_from(v).map_err(|_| {
            DeserializeError::new(format!(
                "Avro {what} at byte {start} of the datum is {v}, out of range for an int"
            ))
        })
    }

    /// A `bytes`/`string` length, bounded by the remaining input before anything is allocated.
    #[inline]
    fn len(&mut self, what: &str) -> Result<usize, DeserializeError> {
        let start = self.pos;
        let n = self.long(what)?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or_else(|| {
                DeserializeError::new(format!(
                    "Avro {what} length at byte {start} of the datum is {n} but only {} bytes remain",
                    self.remaining()
                ))
            })
    }

    fn string(&mut self, what: &str) -> Result<&'a str, DeserializeError> {
        let start = self.pos;
        let n = self.len(what)?;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|e| {
            DeserializeError::new(format!(
                "Avro {what} at byte {start} of the datum is not valid UTF-8: {e}"
            ))
        })
    }

    /// The item count of the next array/map block; 0 ends the sequence.
    fn block_count(&mut self, what: &str, item_min: usize) -> Result<usize, DeserializeError> {
        let start = self.pos;
        let raw = self.long(what)?;
        let count = if raw < 0 {
            // A negative count is followed by the block's size in bytes (for skipping).
            let size = self.long(what)?;
            if size < 0 || size as u64 > self.remaining() as u64 {
                return Err(DeserializeError::new(format!(
                    "Avro {what} block at byte {start} of the datum has an invalid byte size {size}"
                )));
            }
            raw.unsigned_abs()
        } else {
            raw as u64
        };
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let possible = self
            .remaining()
            .checked_div(item_min)
            .unwrap_or(MAX_ZERO_WIDTH_ITEMS - self.zero_width_items);
        if count > possible {
            return Err(DeserializeError::new(format!(
                "Avro {what} block at byte {start} of the datum claims {count} items, \
                 more than the {} remaining bytes can hold",
                self.remaining()
            )));
        }
        if item_min == 0 {
            self.zero_width_items += count;
        }
        Ok(count)
    }
}

impl Codec {
    fn decode_framed(&self, data: &[u8]) -> Result<Value, DeserializeError> {
        if data.len() < 5 {
            return Err(DeserializeError::new(format!(
                "Confluent Avro data needs at least 5 bytes (magic byte 0 and a 4-byte schema id), got {}",
                data.len()
            )));
        }
        if data[0] != 0 {
            return Err(DeserializeError::new(format!(
                "unknown magic byte {} (Confluent Avro framing starts with 0): {}",
                data[0],
                preview(data)
            )));
        }
        let id = i32::from_be_bytes([data[1], data[2], data[3], data[4]]);
        if let Some(expected) = self.schema_id {
            if id != expected {
                return Err(DeserializeError::new(format!(
                    "Avro schema id {id} does not match the configured schema id {expected}"
                )));
            }
        }
        self.decode_datum(&data[5..])
    }

    fn decode_datum(&self, datum: &[u8]) -> Result<Value, DeserializeError> {
        let mut r = Reader {
            buf: datum,
            pos: 0,
            zero_width_items: 0,
        };
        let v = self.decode(self.root, &mut r, 0)?;
        if r.pos != datum.len() {
            return Err(DeserializeError::new(format!(
                "Avro datum has {} unexpected trailing bytes after byte {} \
                 (was it written with a different schema?)",
                datum.len() - r.pos,
                r.pos
            )));
        }
        Ok(v)
    }

    fn decode(&self, idx: usize, r: &mut Reader, depth: usize) -> Result<Value, DeserializeError> {
        Ok(match &self.nodes[idx] {
            Node::Null => Value::Null,
            Node::Boolean => match r.take(1, "boolean")?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => {
                    return Err(DeserializeError::new(format!(
                        "Avro boolean at byte {} of the datum is {b}, not 0 or 1",
                        r.pos - 1
                    )))
                }
            },
            Node::Int => Value::Int(r.int("int")?),
            Node::Long => Value::Long(r.long("long")?),
            Node::Float => Value::Float(f32::from_le_bytes(
                r.take(4, "float")?.try_into().expect("4 bytes"),
            )),
            Node::Double => Value::Double(f64::from_le_bytes(
                r.take(8, "double")?.try_into().expect("8 bytes"),
            )),
            Node::Bytes => {
                let n = r.len("bytes")?;
                Value::Bytes(r.take(n, "bytes")?.to_vec())
            }
            Node::String => Value::String(r.string("string")?.to_owned()),
            Node::UuidString => {
                let s = r.string("uuid")?;
                Value::Uuid(parse_uuid(s.as_bytes()).ok_or_else(|| {
                    DeserializeError::new(format!("Avro uuid {s:?} is not a UUID string"))
                })?)
            }
            Node::UuidBytes => {
                let n = r.len("uuid")?;
                let b = r.take(n, "uuid")?;
                Value::Uuid(b.try_into().map_err(|_| {
                    DeserializeError::new(format!("Avro uuid has {n} bytes, expected 16"))
                })?)
            }
            Node::UuidFixed => Value::Uuid(r.take(16, "uuid")?.try_into().expect("16 bytes")),
            Node::Fixed(n) => Value::Bytes(r.take(*n, "fixed")?.to_vec()),
            Node::Enum(symbols) => {
                let start = r.pos;
                let i = r.int("enum index")?;
                let sym = usize::try_from(i).ok().and_then(|i| symbols.get(i));
                match sym {
                    Some(s) => Value::String(s.clone()),
                    None => {
                        return Err(DeserializeError::new(format!(
                            "Avro enum index {i} at byte {start} of the datum is out of range \
                             (the enum has {} symbols)",
                            symbols.len()
                        )))
                    }
                }
            }
            Node::Union(branches) => {
                let depth = deeper(depth)?;
                let start = r.pos;
                let i = r.long("union branch")?;
                match usize::try_from(i).ok().and_then(|i| branches.get(i)) {
                    Some(&b) => self.decode(b, r, depth)?,
                    None => {
                        return Err(DeserializeError::new(format!(
                            "Avro union branch {i} at byte {start} of the datum is out of range \
                             (the union has {} branches)",
                            branches.len()
                        )))
                    }
                }
            }
            Node::Array(items) => {
                let depth = deeper(depth)?;
                let item_min = self.min_size[*items];
                let mut out = Vec::new();
                loop {
                    let n = r.block_count("array", item_min)?;
                    if n == 0 {
                        break;
                    }
                    out.reserve(n);
                    for _ in 0..n {
                        out.push(self.decode(*items, r, depth)?);
                    }
                }
                Value::Array(out)
            }
            Node::Map(values) => {
                let depth = deeper(depth)?;
                // Each entry has at least a 1-byte key length plus the value.
                let entry_min = self.min_size[*values].saturating_add(1);
                let mut out = Vec::new();
                loop {
                    let n = r.block_count("map", entry_min)?;
                    if n == 0 {
                        break;
                    }
                    out.reserve(n);
                    for _ in 0..n {
                        let k = r.string("map key")?.to_owned();
                        let v = self.decode(*values, r, depth)?;
                        out.push((k, v));
                    }
                }
                Value::Map(out)
            }
            Node::Record(fields) => {
                let depth = deeper(depth)?;
                let mut out = Vec::with_capacity(fields.len());
                for f in fields {
                    out.push((f.name.clone(), self.decode(f.node, r, depth)?));
                }
                Value::Map(out)
            }
        })
    }
}

#[inline]
fn deeper(depth: usize) -> Result<usize, DeserializeError> {
    if depth >= MAX_DEPTH {
        Err(DeserializeError::new(format!(
            "Avro datum nests deeper than {MAX_DEPTH} levels"
        )))
    } else {
        Ok(depth + 1)
    }
}

// ---------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

fn enc_err(expected: &str, v: &Value) -> SerializeError {
    SerializeError::new(format!(
        "Avro schema expects {expected}, got a {} ({v})",
        v.type_name()
    ))
}

impl Codec {
    /// Whether `v` is a natural fit for `node`; `exact` demands the same kind, the loose pass
    /// also allows numeric widening/narrowing, so `Long(1)` picks an `int` branch if no `long`.
    fn fits(&self, node: usize, v: &Value, exact: bool) -> bool {
        match (&self.nodes[node], v) {
            (Node::Null, Value::Null) | (Node::Boolean, Value::Bool(_)) => true,
            (Node::Int, Value::Int(_) | Value::Short(_)) => true,
            (Node::Long, Value::Long(_)) => true,
            (Node::Float, Value::Float(_)) | (Node::Double, Value::Double(_)) => true,
            (Node::Bytes, Value::Bytes(_)) | (Node::String, Value::String(_)) => true,
            (Node::Fixed(n), Value::Bytes(b)) => b.len() == *n,
            (Node::UuidString | Node::UuidBytes | Node::UuidFixed, Value::Uuid(_)) => true,
            (Node::Enum(symbols), Value::String(s)) => symbols.contains(s),
            (Node::Array(_), Value::Array(_)) | (Node::Map(_), Value::Map(_)) => true,
            (Node::Record(fields), Value::Map(entries)) => {
                // Prefer the record whose fields the map actually has.
                fields
                    .iter()
                    .all(|f| f.default.is_some() || entries.iter().any(|(k, _)| *k == f.name))
            }
            (_, _) if exact => false,
            (Node::Int, v) => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            (Node::Long, v) => v.as_i64().is_some(),
            (Node::Float | Node::Double, v) => v.as_f64().is_some(),
            (Node::UuidString | Node::UuidBytes | Node::UuidFixed, Value::String(s)) => {
                parse_uuid(s.as_bytes()).is_some()
            }
            _ => false,
        }
    }

    fn encode(
        &self,
        idx: usize,
        v: &Value,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), SerializeError> {
        if depth >= MAX_DEPTH {
            return Err(SerializeError::new(format!(
                "value nests deeper than {MAX_DEPTH} levels"
            )));
        }
        match &self.nodes[idx] {
            Node::Null => match v {
                Value::Null => {}
                _ => return Err(enc_err("null", v)),
            },
            Node::Boolean => match v {
                Value::Bool(b) => out.push(u8::from(*b)),
                _ => return Err(enc_err("a boolean", v)),
            },
            Node::Int => match v.as_i64().map(i32::try_from) {
                Some(Ok(n)) => put_long(out, i64::from(n)),
                Some(Err(_)) => return Err(enc_err("an int (32-bit)", v)),
                None => return Err(enc_err("an int", v)),
            },
            Node::Long => match v.as_i64() {
                Some(n) => put_long(out, n),
                None => return Err(enc_err("a long", v)),
            },
            Node::Float => match v.as_f64() {
                Some(x) => out.extend_from_slice(&(x as f32).to_le_bytes()),
                None => return Err(enc_err("a float", v)),
            },
            Node::Double => match v.as_f64() {
                Some(x) => out.extend_from_slice(&x.to_le_bytes()),
                None => return Err(enc_err("a double", v)),
            },
            Node::Bytes => match v {
                Value::Bytes(b) => put_bytes(out, b),
                _ => return Err(enc_err("bytes", v)),
            },
            Node::String => match v {
                Value::String(s) => put_bytes(out, s.as_bytes()),
                _ => return Err(enc_err("a string", v)),
            },
            Node::UuidString | Node::UuidBytes | Node::UuidFixed => {
                let u = match v {
                    Value::Uuid(u) => *u,
                    Value::String(s) => {
                        parse_uuid(s.as_bytes()).ok_or_else(|| enc_err("a uuid", v))?
                    }
                    _ => return Err(enc_err("a uuid", v)),
                };
                match &self.nodes[idx] {
                    Node::UuidString => put_bytes(out, format_uuid(&u).as_bytes()),
                    Node::UuidBytes => put_bytes(out, &u),
                    _ => out.extend_from_slice(&u),
                }
            }
            Node::Fixed(n) => match v {
                Value::Bytes(b) if b.len() == *n => out.extend_from_slice(b),
                _ => return Err(enc_err(&format!("fixed of {n} bytes"), v)),
            },
            Node::Enum(symbols) => match v {
                Value::String(s) => match symbols.iter().position(|x| x == s) {
                    Some(i) => put_long(out, i as i64),
                    None => {
                        return Err(SerializeError::new(format!(
                            "Avro enum has no symbol {s:?} (symbols: {})",
                            symbols.join(", ")
                        )))
                    }
                },
                _ => return Err(enc_err("an enum symbol (String)", v)),
            },
            Node::Array(items) => match v {
                Value::Array(vs) => {
                    if !vs.is_empty() {
                        put_long(out, vs.len() as i64);
                        for item in vs {
                            self.encode(*items, item, out, depth + 1)?;
                        }
                    }
                    out.push(0);
                }
                _ => return Err(enc_err("an array", v)),
            },
            Node::Map(values) => match v {
                Value::Map(entries) => {
                    if !entries.is_empty() {
                        put_long(out, entries.len() as i64);
                        for (k, item) in entries {
                            put_bytes(out, k.as_bytes());
                            self.encode(*values, item, out, depth + 1)?;
                        }
                    }
                    out.push(0);
                }
                _ => return Err(enc_err("a map", v)),
            },
            Node::Union(branches) => {
                let chosen = branches
                    .iter()
                    .position(|&b| self.fits(b, v, true))
                    .or_else(|| branches.iter().position(|&b| self.fits(b, v, false)));
                match chosen {
                    Some(i) => {
                        put_long(out, i as i64);
                        self.encode(branches[i], v, out, depth + 1)?;
                    }
                    None => {
                        return Err(SerializeError::new(format!(
                            "no branch of the Avro union fits a {} ({v})",
                            v.type_name()
                        )))
                    }
                }
            }
            Node::Record(fields) => match v {
                Value::Map(_) => {
                    for f in fields {
                        match v.get(&f.name).or(f.default.as_ref()) {
                            Some(fv) => self.encode(f.node, fv, out, depth + 1),
                            None => self.encode(f.node, &Value::Null, out, depth + 1),
                        }
                        .map_err(|e| {
                            SerializeError::new(format!("field '{}': {}", f.name, e.reason))
                        })?;
                    }
                }
                _ => return Err(enc_err("a record (Map)", v)),
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{
        "type": "record", "name": "Event", "namespace": "com.example",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "payload", "type": "bytes"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {"name": "maybe", "type": ["null", "string", "long"]},
            {"name": "score", "type": "double"},
            {"name": "ratio", "type": "float"},
            {"name": "ok", "type": "boolean"},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "next", "type": ["null", "Event"], "default": null}
        ]
    }"#;

    fn sample(next: Value) -> Value {
        Value::Map(vec![
            ("id".into(), Value::Long(-5)),
            ("name".into(), Value::String("hé".into())),
            ("payload".into(), Value::Bytes(vec![0, 1, 255])),
            (
                "tags".into(),
                Value::Array(vec![
                    Value::String("a".into()),
                    Value::String(String::new()),
                ]),
            ),
            (
                "attrs".into(),
                Value::Map(vec![
                    ("z".into(), Value::Long(1)),
                    ("a".into(), Value::Long(2)),
                ]),
            ),
            ("maybe".into(), Value::Long(7)),
            ("score".into(), Value::Double(2.5)),
            ("ratio".into(), Value::Float(0.5)),
            ("ok".into(), Value::Bool(true)),
            ("kind".into(), Value::String("B".into())),
            ("hash".into(), Value::Bytes(vec![1, 2, 3, 4])),
            ("ts".into(), Value::Long(1_700_000_000_000)),
            ("day".into(), Value::Int(19_000)),
            ("uid".into(), Value::Uuid([7; 16])),
            ("next".into(), next),
        ])
    }

    #[test]
    fn record_round_trip_keeps_order() {
        let de = AvroDeserializer::new(RECORD, Some(42)).unwrap();
        let ser = AvroSerializer::new(RECORD, Some(42)).unwrap();
        let v = sample(sample(Value::Null));
        let bytes = ser.serialize(&v).unwrap();
        assert_eq!(&bytes[..5], &[0, 0, 0, 0, 42]);
        assert_eq!(de.deserialize(&bytes).unwrap(), v);
    }

    #[test]
    fn exact_avro_bytes() {
        let ser = AvroSerializer::new(r#""long""#, None).unwrap();
        // zig-zag: 1 -> 2, -1 -> 1, 64 -> 0x80 0x01
        assert_eq!(ser.serialize(&Value::Long(1)).unwrap(), [0, 0, 0, 0, 0, 2]);
        assert_eq!(ser.serialize(&Value::Long(-1)).unwrap(), [0, 0, 0, 0, 0, 1]);
        assert_eq!(
            ser.serialize(&Value::Long(64)).unwrap(),
            [0, 0, 0, 0, 0, 0x80, 1]
        );
        let de = AvroDeserializer::from(&ser);
        for n in [i64::MIN, -1, 0, 1, i64::MAX] {
            assert_eq!(
                de.deserialize(&ser.serialize(&Value::Long(n)).unwrap())
                    .unwrap(),
                Value::Long(n)
            );
        }
        let s = AvroSerializer::new(r#""string""#, Some(7)).unwrap();
        assert_eq!(
            s.serialize(&Value::String("ab".into())).unwrap(),
            [0, 0, 0, 0, 7, 4, b'a', b'b']
        );
    }

    #[test]
    fn framing_errors() {
        let de = AvroDeserializer::new(r#""long""#, Some(42)).unwrap();
        assert_eq!(
            de.deserialize(&[0, 0, 0, 0, 7, 2]).unwrap_err().reason,
            "Avro schema id 7 does not match the configured schema id 42"
        );
        assert!(de
            .deserialize(&[1, 0, 0, 0, 42, 2])
            .unwrap_err()
            .reason
            .contains("magic"));
        assert!(de
            .deserialize(&[0, 0, 0])
            .unwrap_err()
            .reason
            .contains("at least 5 bytes"));
        assert!(de
            .deserialize(&[0, 0, 0, 0, 42])
            .unwrap_err()
            .reason
            .contains("ends early"));
        assert!(de
            .deserialize(&[0, 0, 0, 0, 42, 2, 2])
            .unwrap_err()
            .reason
            .contains("trailing"));
        // Without a configured id any id is accepted.
        let any = AvroDeserializer::new(r#""long""#, None).unwrap();
        assert_eq!(
            any.deserialize(&[0, 0, 0, 0, 7, 2]).unwrap(),
            Value::Long(1)
        );
    }

    #[test]
    fn invalid_schema_fails_at_construction() {
        for bad in [
            "",
            "{",
            r#""nope""#,
            r#"{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}"#,
            r#"{"type": "enum", "name": "E", "symbols": ["A", "A"]}"#,
        ] {
            let err = AvroDeserializer::new(bad, None).unwrap_err();
            assert!(
                err.reason.starts_with("invalid Avro schema"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn corrupt_lengths_do_not_allocate() {
        let de = AvroDeserializer::new(r#""bytes""#, None).unwrap();
        // Length 2^62 as a zig-zag varint.
        let mut data = vec![0, 0, 0, 0, 0];
        put_long(&mut data, 1 << 62);
        let err = de.deserialize(&data).unwrap_err();
        assert!(err.reason.contains("only 0 bytes remain"), "{err}");
        let arr = AvroDeserializer::new(r#"{"type": "array", "items": "long"}"#, None).unwrap();
        let mut data = vec![0, 0, 0, 0, 0];
        put_long(&mut data, i64::MAX);
        assert!(arr
            .deserialize(&data)
            .unwrap_err()
            .reason
            .contains("claims"));
        let mut data = vec![0, 0, 0, 0, 0];
        put_long(&mut data, i64::MIN);
        put_long(&mut data, 0);
        assert!(arr.deserialize(&data).is_err());
        let nulls = AvroDeserializer::new(r#"{"type": "array", "items": "null"}"#, None).unwrap();
        let mut data = vec![0, 0, 0, 0, 0];
        put_long(&mut data, 1 << 40);
        assert!(nulls.deserialize(&data).is_err());
        let mut data = vec![0, 0, 0, 0, 0];
        put_long(&mut data, 3);
        data.push(0);
        assert_eq!(
            nulls.deserialize(&data).unwrap(),
            Value::Array(vec![Value::Null; 3])
        );
    }

    #[test]
    fn deep_recursion_is_an_error() {
        let schema = r#"{"type": "record", "name": "L", "fields": [
            {"name": "next", "type": ["null", "L"]}]}"#;
        let de = AvroDeserializer::new(schema, None).unwrap();
        let mut data = vec![0, 0, 0, 0, 0];
        data.extend(vec![2u8; 100_000]); // branch 1 forever
        data.push(0);
        assert!(de.deserialize(&data).unwrap_err().reason.contains("deeper"));
        let mut ok = vec![0, 0, 0, 0, 0, 2, 2, 0];
        let v = de.deserialize(&ok).unwrap();
        assert_eq!(v.get_path(&["next", "next", "next"]), Some(&Value::Null));
        ok.push(0);
        assert!(de.deserialize(&ok).is_err());
    }

    #[test]
    fn negative_block_counts_and_bad_values() {
        let de = AvroDeserializer::new(r#"{"type": "array", "items": "int"}"#, None).unwrap();
        // count -2, byte size 2, items 1 and 2, end.
        let data = [0, 0, 0, 0, 0, 3, 4, 2, 4, 0];
        assert_eq!(
            de.deserialize(&data).unwrap(),
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        );
        let b = AvroDeserializer::new(r#""boolean""#, None).unwrap();
        assert!(b
            .deserialize(&[0, 0, 0, 0, 0, 2])
            .unwrap_err()
            .reason
            .contains("not 0 or 1"));
        let i = AvroDeserializer::new(r#""int""#, None).unwrap();
        let mut data = vec![0, 0, 0, 0, 0];
        put_long(&mut data, 1 << 40);
        assert!(i
            .deserialize(&data)
            .unwrap_err()
            .reason
            .contains("out of range"));
        let l = AvroDeserializer::new(r#""long""#, None).unwrap();
        assert!(l
            .deserialize(&[
                0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
            ])
            .is_err());
        let e = AvroDeserializer::new(r#"{"type": "enum", "name": "E", "symbols": ["A"]}"#, None)
            .unwrap();
        assert!(e
            .deserialize(&[0, 0, 0, 0, 0, 2])
            .unwrap_err()
            .reason
            .contains("enum index 1"));
        let u = AvroDeserializer::new(r#"["null", "long"]"#, None).unwrap();
        assert!(u
            .deserialize(&[0, 0, 0, 0, 0, 4])
            .unwrap_err()
            .reason
            .contains("union branch 2"));
        assert_eq!(u.deserialize(&[0, 0, 0, 0, 0, 0]).unwrap(), Value::Null);
        let s = AvroDeserializer::new(r#""string""#, None).unwrap();
        assert!(s
            .deserialize(&[0, 0, 0, 0, 0, 2, 0xff])
            .unwrap_err()
            .reason
            .contains("UTF-8"));
    }

    #[test]
    fn logical_types_and_named_refs() {
        let schema = r#"{"type": "record", "name": "R", "namespace": "n", "fields": [
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "g", "type": "F"},
            {"name": "h", "type": "n.F"},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
            {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "inner", "type": {"type": "record", "name": "I", "namespace": "other",
                "fields": [{"name": "x", "type": "int"}]}},
            {"name": "inner2", "type": "other.I"}
        ]}"#;
        let de = AvroDeserializer::new(schema, None).unwrap();
        let ser = AvroSerializer::from(&de);
        let v = Value::Map(vec![
            ("f".into(), Value::Bytes(vec![1, 2])),
            ("g".into(), Value::Bytes(vec![3, 4])),
            ("h".into(), Value::Bytes(vec![5, 6])),
            ("dec".into(), Value::Bytes(vec![0x04, 0xd2])),
            ("us".into(), Value::Long(-3)),
            ("tm".into(), Value::Int(1000)),
            (
                "inner".into(),
                Value::Map(vec![("x".into(), Value::Int(1))]),
            ),
            (
                "inner2".into(),
                Value::Map(vec![("x".into(), Value::Int(2))]),
            ),
        ]);
        assert_eq!(de.deserialize(&ser.serialize(&v).unwrap()).unwrap(), v);
    }

    #[test]
    fn serializer_fills_defaults_and_checks_types() {
        let schema = r#"{"type": "record", "name": "R", "fields": [
            {"name": "a", "type": "long", "default": 5},
            {"name": "b", "type": ["null", "string"]},
            {"name": "c", "type": "int"}
        ]}"#;
        let ser = AvroSerializer::new(schema, Some(1)).unwrap();
        let de = AvroDeserializer::from(&ser);
        let out = ser
            .serialize(&Value::Map(vec![("c".into(), Value::Long(3))]))
            .unwrap();
        assert_eq!(
            de.deserialize(&out).unwrap(),
            Value::Map(vec![
                ("a".into(), Value::Long(5)),
                ("b".into(), Value::Null),
                ("c".into(), Value::Int(3)),
            ])
        );
        let err = ser
            .serialize(&Value::Map(vec![("a".into(), Value::Long(1))]))
            .unwrap_err();
        assert_eq!(
            err.reason,
            "field 'c': Avro schema expects an int, got a null (null)"
        );
        let err = ser
            .serialize(&Value::Map(vec![("c".into(), Value::Long(1 << 40))]))
            .unwrap_err();
        assert!(err.reason.contains("32-bit"), "{err}");
        assert!(ser.serialize(&Value::Long(1)).is_err());
    }
}
