//! De-aggregation of Kinesis Producer Library (KPL) aggregated records (`deaggregate: true`).
//!
//! The KPL packs many user records into one Kinesis record: the magic bytes `F3 89 9A C2`, a
//! protobuf `AggregatedRecord`, then the MD5 digest of that protobuf (16 bytes). The message
//! (from the KPL's `messages.proto`):
//!
//! ```text
//! message AggregatedRecord {
//!   repeated string partition_key_table     = 1;
//!   repeated string explicit_hash_key_table = 2;
//!   repeated Record records                 = 3;
//! }
//! message Record {
//!   required uint64 partition_key_index     = 1;
//!   optional uint64 explicit_hash_key_index = 2;
//!   required bytes  data                    = 3;
//!   repeated Tag    tags                    = 4;
//! }
//! ```
//!
//! As the KCL's `UserRecord.deaggregate` (which Druid's Kinesis supplier calls), a record
//! without the magic bytes, with a digest that does not match, or whose protobuf does not parse
//! is not an aggregate: it is passed on as one record. The protobuf is decoded here by hand (the
//! two messages need varints and length-delimited fields only), not with a protobuf crate.

use md5::{Digest, Md5};

/// The bytes an aggregated record starts with.
pub const MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

const DIGEST_LEN: usize = 16;

/// One user record of an aggregate: its partition key and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// The partition key (from the aggregate's key table).
    pub partition_key: String,
    /// The record's data.
    pub data: Vec<u8>,
}

/// The user records of a KPL aggregated record, in order; `None` when `record` is not one (no
/// magic bytes, a digest mismatch, or a protobuf that does not parse).
pub fn deaggregate(record: &[u8]) -> Option<Vec<UserRecord>> {
    let body = record.strip_prefix(&MAGIC)?;
    if body.len() < DIGEST_LEN {
        return None;
    }
    let (message, digest) = body.split_at(body.len() - DIGEST_LEN);
    if Md5::digest(message).as_slice() != digest {
        return None;
    }
    let mut keys: Vec<String> = Vec::new();
    let mut raw: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut r = Reader(message);
    while !r.0.is_empty() {
        let (field, wire) = r.tag()?;
        match (field, wire) {
            (1, 2) => keys.push(String::from_utf8(r.bytes()?.to_vec()).ok()?),
            (3, 2) => {
                let mut m = Reader(r.bytes()?);
                let (mut key, mut data) = (None, None);
                while !m.0.is_empty() {
                    let (f, w) = m.tag()?;
                    match (f, w) {
                        (1, 0) => key = Some(m.varint()?),
                        (3, 2) => data = Some(m.bytes()?.to_vec()),
                        _ => m.skip(w)?,
                    }
                }
                raw.push((key?, data?));
            }
            _ => r.skip(wire)?,
        }
    }
    raw.into_iter()
        .map(|(k, data)| {
            Some(UserRecord {
                partition_key: keys.get(usize::try_from(k).ok()?)?.clone(),
                data,
            })
        })
        .collect()
}

/// Packs `records` (partition key, data) into one KPL aggregated record, as the KPL does (each
/// distinct partition key once in the key table). For tests and benchmarks.
pub fn aggregate(records: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut keys: Vec<&str> = Vec::new();
    let mut message = Vec::new();
    for (key, _) in records {
        if !keys.contains(&key.as_str()) {
            keys.push(key);
            put_bytes(&mut message, 1, key.as_bytes());
        }
    }
    for (key, data) in records {
        let index = keys.iter().position(|k| k == key).expect("key in table") as u64;
        let mut inner = Vec::new();
        put_varint(&mut inner, 1 << 3);
        put_varint(&mut inner, index);
        put_bytes(&mut inner, 3, data);
        put_bytes(&mut message, 3, &inner);
    }
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&message);
    out.extend_from_slice(Md5::digest(&message).as_slice());
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_varint(out, (field << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A protobuf reader over a byte slice; every method returns `None` on malformed input.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let (b, rest) = self.0.split_first()?;
            self.0 = rest;
            v |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn tag(&mut self) -> Option<(u64, u8)> {
        let t = self.varint()?;
        Some((t >> 3, (t & 7) as u8))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b)
    }

    fn skip(&mut self, wire: u8) -> Option<()> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            _ => None,
        }
    }

    fn advance(&mut self, n: usize) -> Option<()> {
        if n > self.0.len() {
            return None;
        }
        self.0 = &self.0[n..];
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_round_trip_and_plain_or_damaged_records_are_not_aggregates() {
        let records: Vec<(String, Vec<u8>)> = (0..300)
            .map(|i| {
                (
                    format!("k{}", i % 7),
                    format!("{{\"id\":{i}}}").into_bytes(),
                )
            })
            .collect();
        let packed = aggregate(&records);
        let out = deaggregate(&packed).expect("an aggregate");
        assert_eq!(out.len(), 300);
        for (u, (k, d)) in out.iter().zip(&records) {
            assert_eq!((&u.partition_key, &u.data), (k, d));
        }
        // A plain record, a damaged digest, a truncated aggregate: not aggregates.
        assert_eq!(deaggregate(b"{\"id\":1}"), None);
        let mut bad = packed.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(deaggregate(&bad), None);
        assert_eq!(deaggregate(&packed[..10]), None);
        // An empty aggregate has no records.
        assert_eq!(deaggregate(&aggregate(&[])), Some(Vec::new()));
    }
}
