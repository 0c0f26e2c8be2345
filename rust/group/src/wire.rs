//! Kafka's wire primitives, as its flexible message versions (KIP-482) write them.
//!
//! Everything is big-endian. Flexible versions length-prefix strings and arrays with an unsigned
//! varint of `length + 1` (0 meaning null) and end every struct with a tagged-field section. We
//! write no tagged fields and skip the ones we read: none that this client needs is tagged.

use crate::error::GroupError;

/// Appends Kafka primitives to a byte buffer.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// One signed byte.
    pub fn i8(&mut self, v: i8) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A boolean as one byte, 0 or 1.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// A big-endian `int16`.
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A big-endian `uint16`.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A big-endian `int32`.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A big-endian `int64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// An unsigned varint: 7 bits a byte, low bits first, high bit set while more follow.
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            // Truncation is the point: the low 7 bits, with the continuation bit.
            self.buf.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// A length as compact types encode it: `len + 1`, so that 0 can mean null.
    fn compact_len(&mut self, len: usize) {
        let len = u32::try_from(len + 1).unwrap_or(u32::MAX);
        self.uvarint(len);
    }

    /// A non-flexible `NULLABLE_STRING` (int16 length, -1 for null): the request header's client id.
    pub fn nullable_string(&mut self, v: Option<&str>) {
        match v {
            None => self.i16(-1),
            Some(s) => {
                self.i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
                self.buf.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// A `COMPACT_STRING`.
    pub fn compact_string(&mut self, v: &str) {
        self.compact_len(v.len());
        self.buf.extend_from_slice(v.as_bytes());
    }

    /// A `COMPACT_NULLABLE_STRING`.
    pub fn compact_nullable_string(&mut self, v: Option<&str>) {
        match v {
            None => self.uvarint(0),
            Some(s) => self.compact_string(s),
        }
    }

    /// A `COMPACT_ARRAY`, each item written by `each`.
    pub fn compact_array<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.compact_len(items.len());
        for item in items {
            each(self, item);
        }
    }

    /// A `COMPACT_NULLABLE_ARRAY`: `None` is written as null.
    pub fn compact_nullable_array<T>(
        &mut self,
        items: Option<&[T]>,
        each: impl FnMut(&mut Self, &T),
    ) {
        match items {
            None => self.uvarint(0),
            Some(items) => self.compact_array(items, each),
        }
    }

    /// A nullable struct field: -1 for null, 1 followed by the struct otherwise.
    pub fn nullable_struct<T>(&mut self, v: Option<&T>, each: impl FnOnce(&mut Self, &T)) {
        match v {
            None => self.i8(-1),
            Some(v) => {
                self.i8(1);
                each(self, v);
            }
        }
    }

    /// An empty tagged-field section: we send no tagged fields.
    pub fn no_tagged_fields(&mut self) {
        self.uvarint(0);
    }
}

/// Reads Kafka primitives from a response body; every read checks the remaining length.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; `what` names the message in errors.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }

    /// How many bytes have been read.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn malformed(&self, detail: &str) -> GroupError {
        GroupError::Malformed(format!("{} at byte {}: {detail}", self.what, self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], GroupError> {
        if self.buf.len() - self.pos < n {
            return Err(self.malformed(&format!("needs {n} more bytes")));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], GroupError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// One signed byte.
    pub fn i8(&mut self) -> Result<i8, GroupError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    /// A boolean byte (any non-zero is true, as Kafka reads it).
    pub fn bool(&mut self) -> Result<bool, GroupError> {
        Ok(self.i8()? != 0)
    }

    /// A big-endian `int16`.
    pub fn i16(&mut self) -> Result<i16, GroupError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    /// A big-endian `uint16`.
    pub fn u16(&mut self) -> Result<u16, GroupError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// A big-endian `int32`.
    pub fn i32(&mut self) -> Result<i32, GroupError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// A big-endian `int64`.
    pub fn i64(&mut self) -> Result<i64, GroupError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most 5 bytes.
    pub fn uvarint(&mut self) -> Result<u32, GroupError> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.array::<1>()?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.malformed("varint longer than 5 bytes"))
    }

    /// A compact length: `None` for null.
    fn compact_len(&mut self) -> Result<Option<usize>, GroupError> {
        let n = self.uvarint()?;
        Ok(n.checked_sub(1).map(|n| n as usize))
    }

    /// A `COMPACT_NULLABLE_STRING`.
    pub fn compact_nullable_string(&mut self) -> Result<Option<String>, GroupError> {
        match self.compact_len()? {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n)?;
                String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|_| self.malformed("string is not UTF-8"))
            }
        }
    }

    /// A `COMPACT_STRING` (null is malformed).
    pub fn compact_string(&mut self) -> Result<String, GroupError> {
        self.compact_nullable_string()?
            .ok_or_else(|| self.malformed("null where a string is required"))
    }

    /// A `COMPACT_NULLABLE_ARRAY`, each item read by `each`.
    pub fn compact_nullable_array<T>(
        &mut self,
        mut each: impl FnMut(&mut Self) -> Result<T, GroupError>,
    ) -> Result<Option<Vec<T>>, GroupError> {
        let Some(n) = self.compact_len()? else {
            return Ok(None);
        };
        // Every item takes at least one byte: a count beyond the bytes left is a corrupt frame,
        // not a reason to allocate gigabytes.
        if n > self.buf.len() - self.pos {
            return Err(self.malformed(&format!("array of {n} items in a shorter frame")));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(each(self)?);
        }
        Ok(Some(out))
    }

    /// A `COMPACT_ARRAY` (null is malformed).
    pub fn compact_array<T>(
        &mut self,
        each: impl FnMut(&mut Self) -> Result<T, GroupError>,
    ) -> Result<Vec<T>, GroupError> {
        self.compact_nullable_array(each)?
            .ok_or_else(|| self.malformed("null where an array is required"))
    }

    /// Skips a tagged-field section: tag, size, then `size` bytes, for each field.
    pub fn skip_tagged_fields(&mut self) -> Result<(), GroupError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarint_matches_kafkas_byte_utils() {
        // Values and bytes as Kafka's ByteUtils.writeUnsignedVarint writes them.
        for (v, bytes) in [
            (0u32, vec![0x00]),
            (1, vec![0x01]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (300, vec![0xac, 0x02]),
            (u32::MAX, vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let mut w = Writer::new();
            w.uvarint(v);
            let out = w.into_bytes();
            assert_eq!(out, bytes, "encoding {v}");
            assert_eq!(Reader::new(&out, "test").uvarint().unwrap(), v);
        }
    }

    #[test]
    fn compact_and_nullable_types_round_trip() {
        let mut w = Writer::new();
        w.compact_string("ab");
        w.compact_nullable_string(None);
        w.compact_nullable_array::<i32>(None, |w, v| w.i32(*v));
        w.compact_array(&[7i32], |w, v| w.i32(*v));
        let bytes = w.into_bytes();
        assert_eq!(bytes, [3, b'a', b'b', 0, 0, 2, 0, 0, 0, 7]);
        let mut r = Reader::new(&bytes, "test");
        assert_eq!(r.compact_string().unwrap(), "ab");
        assert_eq!(r.compact_nullable_string().unwrap(), None);
        assert_eq!(r.compact_nullable_array(Reader::i32).unwrap(), None);
        assert_eq!(r.compact_array(Reader::i32).unwrap(), vec![7]);
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let mut r = Reader::new(&[0x05, b'a'], "test");
        let err = r.compact_string().unwrap_err();
        assert!(err.to_string().contains("needs 4 more bytes"), "{err}");
    }

    #[test]
    fn tagged_fields_are_skipped() {
        // Two tagged fields (tag 0 with 2 bytes, tag 3 with 1 byte), then an int8.
        let bytes = [2, 0, 2, 9, 9, 3, 1, 9, 42];
        let mut r = Reader::new(&bytes, "test");
        r.skip_tagged_fields().unwrap();
        assert_eq!(r.i8().unwrap(), 42);
    }
}
