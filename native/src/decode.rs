//! Serialized tf.train.Examples -> columns, for readers.
//!
//! The reference is beam_tfrecords.read.wire_columns (numpy over a whole
//! batch): this walk takes exactly the records it takes and gives the same
//! values, which the test suite checks both ways (the same tests on both
//! paths, and a Hypothesis property over damaged records). It reads what
//! TensorFlow's and tfx-bsl's encoders write: an Example holding only its
//! Features, map entries of exactly key then value, each Feature one list
//! of the schema's kind, numbers packed in one field. Anything else is
//! `Unsupported` (with what was seen), and the caller falls back on a
//! general decoder: the fast path never guesses.

/// What a feature's values are: int64 (packed varints), float (packed
/// little-endian float32) or bytes (repeated length-delimited).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int64,
    Float,
    Bytes,
}

impl Kind {
    pub fn from_code(code: u8) -> Option<Kind> {
        match code {
            0 => Some(Kind::Int64),
            1 => Some(Kind::Float),
            2 => Some(Kind::Bytes),
            _ => None,
        }
    }

    /// The Feature's oneof tag of this kind (fields 1 to 3, wire type 2).
    fn tag(self) -> u8 {
        match self {
            Kind::Bytes => 0x0A,
            Kind::Float => 0x12,
            Kind::Int64 => 0x1A,
        }
    }
}

/// One feature's column: values in record order.
#[derive(Default)]
pub struct Column {
    /// Values per record (0 where absent).
    pub lengths: Vec<i64>,
    /// int64 or float32 values (little-endian), or the bytes values back
    /// to back.
    pub values: Vec<u8>,
    /// Bytes: where each value starts in `values`, and where the last
    /// ends (Arrow's offsets).
    pub offsets: Vec<i64>,
    /// Per record: 1 where it holds the feature.
    pub present: Vec<u8>,
}

pub type Unsupported = &'static str;

/// The varint at `pos` of `buf` (before `end`): (value, the position after
/// it). At most 10 bytes; bits past 64 are dropped, as protobuf does.
#[inline(always)]
fn varint(buf: &[u8], mut pos: usize, end: usize) -> Result<(u64, usize), Unsupported> {
    let mut value = 0u64;
    let mut shift = 0u32;
    loop {
        if pos >= end {
            return Err("truncated");
        }
        let b = buf[pos];
        pos += 1;
        value |= ((b & 0x7F) as u64).wrapping_shl(shift);
        if b < 0x80 {
            return Ok((value, pos));
        }
        shift += 7;
        if shift > 63 {
            return Err("varint longer than 10 bytes");
        }
    }
}

/// The length-delimited field `tag` at `pos` (inside [.., end)): its
/// content's (start, end).
#[inline(always)]
fn delimited(buf: &[u8], pos: usize, end: usize, tag: u8) -> Result<(usize, usize), Unsupported> {
    if pos >= end || buf[pos] != tag {
        return Err("another tag than expected");
    }
    let (length, start) = if pos + 1 < end && buf[pos + 1] < 0x80 {
        (buf[pos + 1] as u64, pos + 2)
    } else {
        varint(buf, pos + 1, end)?
    };
    if length >= 1 << 31 {
        return Err("a length past 2 GB"); // protobuf's own limit
    }
    let stop = start + length as usize;
    if stop > end {
        return Err("a field past the end of its message");
    }
    Ok((start, stop))
}

/// The schema's names, and which one a key is.
struct Names<'a> {
    names: &'a [&'a [u8]],
}

impl<'a> Names<'a> {
    /// The index of `key`; `guess` first (encoders write keys in order).
    #[inline(always)]
    fn find(&self, key: &[u8], guess: usize) -> Option<usize> {
        if guess < self.names.len() && self.names[guess] == key {
            return Some(guess);
        }
        self.names.iter().position(|n| *n == key)
    }
}

/// A feature list's column: steps in record order.
#[derive(Default)]
pub struct Lists {
    /// Steps per record (0 where absent).
    pub steps: Vec<i64>,
    /// Values per step.
    pub lengths: Vec<i64>,
    /// As Column's: the steps' values back to back.
    pub values: Vec<u8>,
    /// As Column's (bytes only).
    pub offsets: Vec<i64>,
    /// Per record: 1 where it holds the feature list.
    pub present: Vec<u8>,
}

fn columns_for(kinds: &[Kind], n: usize) -> Vec<Column> {
    kinds
        .iter()
        .map(|kind| Column {
            lengths: vec![0; n],
            present: vec![0; n],
            offsets: if *kind == Kind::Bytes { vec![0] } else { Vec::new() },
            ..Column::default()
        })
        .collect()
}

/// The records' columns, one per name.
pub fn decode(records: &[&[u8]], names: &[&[u8]], kinds: &[Kind]) -> Result<Vec<Column>, Unsupported> {
    let mut columns = columns_for(kinds, records.len());
    let mut map = Map::new(names);
    for (r, record) in records.iter().enumerate() {
        let buf: &[u8] = record;
        if buf.is_empty() {
            continue; // an empty Example
        }
        // Example.features (1): the whole record.
        let (pos, end) = delimited(buf, 0, buf.len(), 0x0A)?;
        if end != buf.len() {
            return Err("an Example with more than its features");
        }
        map.walk(buf, pos, end, r, |i, value, value_end| {
            let column = &mut columns[i];
            let count = feature(buf, value, value_end, kinds[i], &mut column.values, &mut column.offsets)?;
            column.present[r] = 1;
            column.lengths[r] = count as i64;
            Ok(())
        })?;
    }
    Ok(columns)
}

/// SequenceExamples' context columns and feature list columns, one per
/// name: a SequenceExample holding its context (1) and then its feature
/// lists (2), either absent, each FeatureList's steps one Feature each.
pub fn decode_sequences(
    records: &[&[u8]],
    context_names: &[&[u8]],
    context_kinds: &[Kind],
    list_names: &[&[u8]],
    list_kinds: &[Kind],
) -> Result<(Vec<Column>, Vec<Lists>), Unsupported> {
    let n = records.len();
    let mut context = columns_for(context_kinds, n);
    let mut lists: Vec<Lists> = list_kinds
        .iter()
        .map(|kind| Lists {
            steps: vec![0; n],
            present: vec![0; n],
            offsets: if *kind == Kind::Bytes { vec![0] } else { Vec::new() },
            ..Lists::default()
        })
        .collect();
    let mut context_map = Map::new(context_names);
    let mut list_map = Map::new(list_names);
    for (r, record) in records.iter().enumerate() {
        let buf: &[u8] = record;
        let mut pos = 0;
        if pos < buf.len() && buf[pos] == 0x0A {
            // SequenceExample.context (1): Features.
            let (start, end) = delimited(buf, pos, buf.len(), 0x0A)?;
            context_map.walk(buf, start, end, r, |i, value, value_end| {
                let column = &mut context[i];
                let count = feature(buf, value, value_end, context_kinds[i], &mut column.values, &mut column.offsets)?;
                column.present[r] = 1;
                column.lengths[r] = count as i64;
                Ok(())
            })?;
            pos = end;
        }
        if pos < buf.len() {
            // SequenceExample.feature_lists (2): FeatureLists.
            let (start, end) = delimited(buf, pos, buf.len(), 0x12)?;
            if end != buf.len() {
                return Err("a SequenceExample with more than its context and feature lists");
            }
            list_map.walk(buf, start, end, r, |i, value, value_end| {
                let column = &mut lists[i];
                // FeatureList.feature (1): one Feature per step.
                let mut at = value;
                let mut steps = 0i64;
                while at < value_end {
                    let (step, step_end) = delimited(buf, at, value_end, 0x0A)?;
                    let count = feature(buf, step, step_end, list_kinds[i], &mut column.values, &mut column.offsets)?;
                    column.lengths.push(count as i64);
                    steps += 1;
                    at = step_end;
                }
                column.present[r] = 1;
                column.steps[r] = steps;
                Ok(())
            })?;
        }
    }
    Ok((context, lists))
}

/// Walks a map<string, message> (Features.feature, FeatureLists.
/// feature_list): entries of exactly key (1) then value (2), each key one
/// of the names, once per record.
struct Map<'a> {
    lookup: Names<'a>,
    /// The record each name was last seen in (a key twice in one record
    /// is outside the layout).
    seen: Vec<usize>,
}

impl<'a> Map<'a> {
    fn new(names: &'a [&'a [u8]]) -> Map<'a> {
        Map { lookup: Names { names }, seen: vec![usize::MAX; names.len()] }
    }

    /// Each entry between `pos` and `end` of record `r`: `each(name index,
    /// value start, value end)`.
    #[inline(always)]
    fn walk<F>(&mut self, buf: &[u8], mut pos: usize, end: usize, r: usize, mut each: F) -> Result<(), Unsupported>
    where
        F: FnMut(usize, usize, usize) -> Result<(), Unsupported>,
    {
        let mut guess = 0;
        while pos < end {
            let (entry, entry_end) = delimited(buf, pos, end, 0x0A)?;
            let (key, key_end) = delimited(buf, entry, entry_end, 0x0A)?;
            let i = self.lookup.find(&buf[key..key_end], guess).ok_or("a key the schema does not name")?;
            let (value, value_end) = delimited(buf, key_end, entry_end, 0x12)?;
            if value_end != entry_end {
                return Err("a map entry with more than key and value");
            }
            if self.seen[i] == r {
                return Err("a feature twice in one record");
            }
            self.seen[i] = r;
            each(i, value, value_end)?;
            pos = entry_end;
            guess = i + 1;
        }
        Ok(())
    }
}

/// A Feature's list (between start and end): its values appended to
/// `values` (and `offsets`, for bytes); how many there are.
#[inline(always)]
fn feature(buf: &[u8], start: usize, end: usize, kind: Kind, values: &mut Vec<u8>, offsets: &mut Vec<i64>) -> Result<usize, Unsupported> {
    if start == end {
        return Err("a Feature with no list");
    }
    let (list, list_end) = delimited(buf, start, end, kind.tag())?;
    if list_end != end {
        return Err("more than the list in a Feature");
    }
    let count = match kind {
        Kind::Bytes => {
            let mut pos = list;
            let mut count = 0;
            while pos < list_end {
                let (a, b) = delimited(buf, pos, list_end, 0x0A)?;
                values.extend_from_slice(&buf[a..b]);
                offsets.push(values.len() as i64);
                count += 1;
                pos = b;
            }
            count
        }
        _ if list == list_end => 0, // an empty list
        Kind::Float => {
            let (a, b) = delimited(buf, list, list_end, 0x0A)?;
            if b != list_end {
                return Err("an unpacked or split list");
            }
            if (b - a) % 4 != 0 {
                return Err("a float list not of whole floats");
            }
            values.extend_from_slice(&buf[a..b]);
            (b - a) / 4
        }
        Kind::Int64 => {
            let (a, b) = delimited(buf, list, list_end, 0x0A)?;
            if b != list_end {
                return Err("an unpacked or split list");
            }
            if a < b && buf[b - 1] >= 0x80 {
                return Err("a varint cut off at the end of its list");
            }
            let mut pos = a;
            let mut count = 0;
            while pos < b {
                let (v, after) = varint(buf, pos, b)?;
                values.extend_from_slice(&v.to_le_bytes());
                count += 1;
                pos = after;
            }
            count
        }
    };
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &[u8], feature: &[u8]) -> Vec<u8> {
        let mut e = vec![0x0A, key.len() as u8];
        e.extend_from_slice(key);
        e.push(0x12);
        e.push(feature.len() as u8);
        e.extend_from_slice(feature);
        let mut out = vec![0x0A, e.len() as u8];
        out.extend(e);
        out
    }

    fn example(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut out = vec![0x0A, body.len() as u8];
        out.extend(body);
        out
    }

    #[test]
    fn decodes_each_kind_in_record_order() {
        let a = example(&[
            entry(b"n", &[0x1A, 0x04, 0x0A, 0x02, 0x96, 0x01]),
            entry(b"w", &[0x0A, 0x05, 0x0A, 0x01, b'x', 0x0A, 0x00]),
        ]);
        let b = example(&[entry(b"f", &[0x12, 0x06, 0x0A, 0x04, 0, 0, 0x80, 0x3F])]);
        let names: [&[u8]; 3] = [b"n", b"f", b"w"];
        let got = decode(&[&a, &b, &[]], &names, &[Kind::Int64, Kind::Float, Kind::Bytes]).unwrap();
        assert_eq!(got[0].lengths, vec![1, 0, 0]);
        assert_eq!(got[0].present, vec![1, 0, 0]);
        assert_eq!(got[0].values, 150i64.to_le_bytes().to_vec());
        assert_eq!(got[1].lengths, vec![0, 1, 0]);
        assert_eq!(got[1].values, 1.0f32.to_le_bytes().to_vec());
        assert_eq!(got[2].lengths, vec![2, 0, 0]);
        assert_eq!(got[2].values, b"x".to_vec());
        assert_eq!(got[2].offsets, vec![0, 1, 1]);
    }

    #[test]
    fn refuses_what_it_does_not_read() {
        let names: [&[u8]; 1] = [b"n"];
        let kinds = [Kind::Int64];
        let twice = example(&[entry(b"n", &[0x1A, 0x00]), entry(b"n", &[0x1A, 0x00])]);
        assert_eq!(decode(&[&twice], &names, &kinds).err(), Some("a feature twice in one record"));
        let unpacked = example(&[entry(b"n", &[0x1A, 0x02, 0x08, 0x05])]);
        assert_eq!(decode(&[&unpacked], &names, &kinds).err(), Some("another tag than expected"));
        let other = example(&[entry(b"m", &[0x1A, 0x00])]);
        assert_eq!(decode(&[&other], &names, &kinds).err(), Some("a key the schema does not name"));
        let good = example(&[entry(b"n", &[0x1A, 0x03, 0x0A, 0x01, 0x05])]);
        assert_eq!(decode(&[&good[..good.len() - 1]], &names, &kinds).err(), Some("a field past the end of its message"));
    }

    fn sequence(context: &[Vec<u8>], lists: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        if !context.is_empty() {
            let body: Vec<u8> = context.concat();
            out.extend([0x0A, body.len() as u8]);
            out.extend(body);
        }
        if !lists.is_empty() {
            let body: Vec<u8> = lists.concat();
            out.extend([0x12, body.len() as u8]);
            out.extend(body);
        }
        out
    }

    fn steps(features: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in features {
            out.extend([0x0A, f.len() as u8]);
            out.extend_from_slice(f);
        }
        out
    }

    #[test]
    fn decodes_sequences_step_by_step() {
        let one: &[u8] = &[0x1A, 0x03, 0x0A, 0x01, 0x07];
        let none: &[u8] = &[0x1A, 0x00];
        let a = sequence(
            &[entry(b"user", &[0x0A, 0x03, 0x0A, 0x01, b'u'])],
            &[entry(b"ts", &steps(&[one, none, one])), entry(b"w", &steps(&[]))],
        );
        let b = sequence(&[], &[entry(b"w", &steps(&[&[0x0A, 0x04, 0x0A, 0x02, b'h', b'i']]))]);
        let c = sequence(&[entry(b"user", &[0x0A, 0x00])], &[]);
        let cn: [&[u8]; 1] = [b"user"];
        let ln: [&[u8]; 2] = [b"ts", b"w"];
        let (context, lists) =
            decode_sequences(&[&a, &b, &c, &[]], &cn, &[Kind::Bytes], &ln, &[Kind::Int64, Kind::Bytes]).unwrap();
        assert_eq!(context[0].present, vec![1, 0, 1, 0]);
        assert_eq!(context[0].lengths, vec![1, 0, 0, 0]);
        assert_eq!(context[0].values, b"u".to_vec());
        assert_eq!(lists[0].steps, vec![3, 0, 0, 0]);
        assert_eq!(lists[0].present, vec![1, 0, 0, 0]);
        assert_eq!(lists[0].lengths, vec![1, 0, 1]);
        assert_eq!(lists[0].values, [7i64.to_le_bytes(), 7i64.to_le_bytes()].concat());
        assert_eq!(lists[1].steps, vec![0, 1, 0, 0]);
        assert_eq!(lists[1].present, vec![1, 1, 0, 0]);
        assert_eq!(lists[1].lengths, vec![1]);
        assert_eq!(lists[1].offsets, vec![0, 2]);
        assert_eq!(lists[1].values, b"hi".to_vec());
    }

    #[test]
    fn refuses_sequences_it_does_not_read() {
        let cn: [&[u8]; 0] = [];
        let ln: [&[u8]; 1] = [b"ts"];
        let k = [Kind::Int64];
        let go = |r: &[u8]| decode_sequences(&[r], &cn, &[], &ln, &k).err();
        let lists_first = [sequence(&[], &[entry(b"ts", &steps(&[]))]), vec![0x0A, 0x00]].concat();
        assert_eq!(go(&lists_first), Some("a SequenceExample with more than its context and feature lists"));
        let no_list = sequence(&[], &[entry(b"ts", &steps(&[&[]]))]);
        assert_eq!(go(&no_list), Some("a Feature with no list"));
        let twice = sequence(&[], &[entry(b"ts", &steps(&[])), entry(b"ts", &steps(&[]))]);
        assert_eq!(go(&twice), Some("a feature twice in one record"));
        let other_kind = sequence(&[], &[entry(b"ts", &steps(&[&[0x12, 0x00]]))]);
        assert_eq!(go(&other_kind), Some("another tag than expected"));
    }
}
