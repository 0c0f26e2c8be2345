//! Random and mutated bytes into every deserializer: errors are fine, panics and runaway
//! allocations are not.

use streamstate_core::serde::{AvroDeserializer, AvroSerializer, Deserializer, Serializer};
use streamstate_core::timestamp::{ExtractInput, OnInvalid, TimeUnit, TimestampExtractor};
use streamstate_core::value::Value;

const SCHEMA: &str = r#"{
    "type": "record", "name": "Fuzz", "namespace": "t",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "b", "type": "bytes"},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "string", "double"]}},
        {"name": "u", "type": ["null", "long", "Fuzz"]},
        {"name": "l", "type": "long"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
        {"name": "n", "type": {"type": "array", "items": "null"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}
    ]
}"#;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.below(max_len + 1) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn deserializers() -> Vec<Deserializer> {
    vec![
        Deserializer::Bytes,
        Deserializer::String,
        Deserializer::Short,
        Deserializer::Integer,
        Deserializer::Long,
        Deserializer::Float,
        Deserializer::Double,
        Deserializer::Uuid,
        Deserializer::Json,
        Deserializer::Avro(AvroDeserializer::new(SCHEMA, None).unwrap()),
        Deserializer::Avro(AvroDeserializer::new(SCHEMA, Some(0)).unwrap()),
    ]
}

fn valid_avro() -> Vec<u8> {
    let v = Value::Map(vec![
        ("s".into(), Value::String("hello".into())),
        ("b".into(), Value::Bytes(vec![1, 2, 3])),
        (
            "a".into(),
            Value::Array(vec![Value::Long(1), Value::Long(-300)]),
        ),
        (
            "m".into(),
            Value::Map(vec![
                ("k".into(), Value::String("v".into())),
                ("d".into(), Value::Double(1.5)),
                ("z".into(), Value::Null),
            ]),
        ),
        ("u".into(), Value::Long(9)),
        ("l".into(), Value::Long(1 << 40)),
        ("e".into(), Value::String("Y".into())),
        ("n".into(), Value::Array(vec![Value::Null, Value::Null])),
        ("id".into(), Value::Uuid([9; 16])),
    ]);
    let ser = Serializer::Avro(AvroSerializer::new(SCHEMA, None).unwrap());
    let bytes = ser.serialize(&v).unwrap().unwrap();
    let Deserializer::Avro(de) = &deserializers()[9] else {
        unreachable!()
    };
    assert_eq!(de.deserialize(&bytes).unwrap(), v);
    bytes
}

#[test]
fn random_bytes_never_panic() {
    let des = deserializers();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..20_000 {
        let mut data = rng.bytes(64);
        // Give the Avro decoder a chance to get past the framing.
        if i % 2 == 0 && data.len() >= 5 {
            data[..5].copy_from_slice(&[0, 0, 0, 0, 0]);
        }
        for de in &des {
            let _ = de.deserialize(Some(&data));
        }
    }
}

#[test]
fn mutated_avro_never_panics() {
    let valid = valid_avro();
    let des = deserializers();
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let mut data = valid.clone();
        match rng.below(4) {
            0 => {
                let at = 5 + rng.below((data.len() - 5) as u64) as usize;
                data[at] = rng.next() as u8;
            }
            1 => data.truncate(rng.below(data.len() as u64) as usize),
            2 => {
                let at = 5 + rng.below((data.len() - 5) as u64) as usize;
                data.insert(at, rng.next() as u8);
            }
            _ => {
                for _ in 0..3 {
                    let at = 5 + rng.below((data.len() - 5) as u64) as usize;
                    data[at] = rng.next() as u8 | 0x80;
                }
            }
        }
        for de in &des {
            let _ = de.deserialize(Some(&data));
        }
    }
}

#[test]
fn random_json_like_never_panics() {
    const ALPHABET: &[u8] = b"{}[]\":,.-+eE0123456789 tfnrulsa\\\xff";
    let x = TimestampExtractor::json_field("a.b", TimeUnit::Iso8601, OnInvalid::Skip).unwrap();
    let mut rng = Rng(7);
    for _ in 0..20_000 {
        let len = rng.below(40) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
            .collect();
        let _ = Deserializer::Json.deserialize(Some(&data));
        let value = Value::Bytes(data);
        let input = ExtractInput {
            record_timestamp: 0,
            value: &value,
            raw_value: None,
        };
        let _ = x.extract(&input, 5);
    }
}
