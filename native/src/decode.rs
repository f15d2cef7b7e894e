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

/// The records' columns, one per name.
pub fn decode(records: &[&[u8]], names: &[&[u8]], kinds: &[Kind]) -> Result<Vec<Column>, Unsupported> {
    let n = records.len();
    let lookup = Names { names };
    let mut columns: Vec<Column> = kinds
        .iter()
        .map(|kind| Column {
            lengths: vec![0; n],
            present: vec![0; n],
            offsets: if *kind == Kind::Bytes { vec![0] } else { Vec::new() },
            ..Column::default()
        })
        .collect();
    // The record each feature was last seen in (a key twice in one
    // record is outside the layout).
    let mut seen: Vec<usize> = vec![usize::MAX; names.len()];
    for (r, record) in records.iter().enumerate() {
        let buf: &[u8] = record;
        if buf.is_empty() {
            continue; // an empty Example
        }
        // Example.features (1): the whole record.
        let (mut pos, end) = delimited(buf, 0, buf.len(), 0x0A)?;
        if end != buf.len() {
            return Err("an Example with more than its features");
        }
        let mut guess = 0;
        while pos < end {
            // Features.feature (1): a map entry {key (1), value (2)}.
            let (entry, entry_end) = delimited(buf, pos, end, 0x0A)?;
            let (key, key_end) = delimited(buf, entry, entry_end, 0x0A)?;
            let i = lookup.find(&buf[key..key_end], guess).ok_or("a key the schema does not name")?;
            let (value, value_end) = delimited(buf, key_end, entry_end, 0x12)?;
            if value_end != entry_end {
                return Err("a map entry with more than key and value");
            }
            if seen[i] == r {
                return Err("a feature twice in one record");
            }
            seen[i] = r;
            feature(buf, value, value_end, kinds[i], r, &mut columns[i])?;
            pos = entry_end;
            guess = i + 1;
        }
    }
    Ok(columns)
}

/// A Feature's list (between start and end) into `column`, as record `r`.
#[inline(always)]
fn feature(buf: &[u8], start: usize, end: usize, kind: Kind, r: usize, column: &mut Column) -> Result<(), Unsupported> {
    if start == end {
        return Err("a Feature with no list");
    }
    let (list, list_end) = delimited(buf, start, end, kind.tag())?;
    if list_end != end {
        return Err("more than the list in a Feature");
    }
    column.present[r] = 1;
    let count = match kind {
        Kind::Bytes => {
            let mut pos = list;
            let mut count = 0;
            while pos < list_end {
                let (a, b) = delimited(buf, pos, list_end, 0x0A)?;
                column.values.extend_from_slice(&buf[a..b]);
                column.offsets.push(column.values.len() as i64);
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
            column.values.extend_from_slice(&buf[a..b]);
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
                column.values.extend_from_slice(&v.to_le_bytes());
                count += 1;
                pos = after;
            }
            count
        }
    };
    column.lengths[r] = count as i64;
    Ok(())
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
}
