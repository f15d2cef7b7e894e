//! TFRecord framing: per record
//!   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
//! all little-endian (tensorflow/core/lib/io/record_writer.cc).

const MASK_DELTA: u32 = 0xa282_ead8;

#[inline]
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    ((crc >> 15) | (crc << 17)).wrapping_add(MASK_DELTA)
}

/// Bytes of `records` framed.
pub fn framed_len(offsets: &[i64]) -> usize {
    let n = offsets.len() - 1;
    (offsets[n] - offsets[0]) as usize + 16 * n
}

/// Frames record i = data[offsets[i]..offsets[i+1]] into `out`
/// (`framed_len` bytes).
pub fn frame(data: &[u8], offsets: &[i64], out: &mut [u8]) {
    let mut pos = 0;
    for pair in offsets.windows(2) {
        let record = &data[pair[0] as usize..pair[1] as usize];
        let length = (record.len() as u64).to_le_bytes();
        out[pos..pos + 8].copy_from_slice(&length);
        out[pos + 8..pos + 12].copy_from_slice(&masked_crc(&length).to_le_bytes());
        pos += 12;
        out[pos..pos + record.len()].copy_from_slice(record);
        pos += record.len();
        out[pos..pos + 4].copy_from_slice(&masked_crc(record).to_le_bytes());
        pos += 4;
    }
    assert_eq!(pos, out.len());
}

/// Where each framed record of `data` ends, walking the length fields
/// (CRCs are not checked); Err when the last record is cut short.
pub fn ends(data: &[u8]) -> Result<Vec<i64>, usize> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        if data.len() - pos < 16 {
            return Err(pos);
        }
        let length = u64::from_le_bytes(data[pos..pos + 8].try_into().unwrap());
        match (length as usize).checked_add(pos + 16) {
            Some(end) if end <= data.len() && length <= (usize::MAX >> 1) as u64 => {
                pos = end;
                out.push(end as i64);
            }
            _ => return Err(pos),
        }
    }
    Ok(out)
}

/// What stopped `unframe` before the end of its data.
#[derive(Debug, PartialEq, Eq)]
pub enum Problem {
    /// The data ends inside the record at `consumed` (more may follow).
    Cut,
    LengthCrc,
    DataCrc,
}

impl Problem {
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Problem::Cut => None,
            Problem::LengthCrc => Some("corrupt length CRC"),
            Problem::DataCrc => Some("corrupt data CRC"),
        }
    }
}

/// The records of framed `data` from its start, as (start, end) of each
/// record's bytes, and where the walk stopped: the end of the data, a
/// record the data ends inside (`Cut`: a length is never believed past
/// the data's end, so nothing is allocated from it), or with `check` a
/// record whose length or data CRC does not match. The records before
/// the stop are whole (and, with `check`, their CRCs match).
pub fn unframe(data: &[u8], check: bool) -> (Vec<(usize, usize)>, usize, Option<Problem>) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        if data.len() - pos < 12 {
            return (out, pos, Some(Problem::Cut));
        }
        let head = &data[pos..pos + 8];
        if check && masked_crc(head) != u32::from_le_bytes(data[pos + 8..pos + 12].try_into().unwrap()) {
            return (out, pos, Some(Problem::LengthCrc));
        }
        let length = u64::from_le_bytes(head.try_into().unwrap());
        let left = (data.len() - pos - 12) as u64;
        if length > left || left - length < 4 {
            return (out, pos, Some(Problem::Cut));
        }
        let start = pos + 12;
        let end = start + length as usize;
        if check && masked_crc(&data[start..end]) != u32::from_le_bytes(data[end..end + 4].try_into().unwrap()) {
            return (out, pos, Some(Problem::DataCrc));
        }
        out.push((start, end));
        pos = end + 4;
    }
    (out, pos, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(records: &[&[u8]]) -> Vec<u8> {
        let mut offsets = vec![0i64];
        let mut data = Vec::new();
        for r in records {
            data.extend_from_slice(r);
            offsets.push(data.len() as i64);
        }
        let mut out = vec![0u8; framed_len(&offsets)];
        frame(&data, &offsets, &mut out);
        out
    }

    #[test]
    fn unframes_checks_and_stops() {
        let data = framed(&[b"", b"abc", b"hello world"]);
        let (spans, consumed, problem) = unframe(&data, true);
        assert_eq!(spans.len(), 3);
        assert_eq!(&data[spans[2].0..spans[2].1], b"hello world");
        assert_eq!((consumed, problem), (data.len(), None));
        // Cut inside the last record: the first two, and where it starts.
        let (spans, consumed, problem) = unframe(&data[..data.len() - 1], true);
        assert_eq!((spans.len(), problem), (2, Some(Problem::Cut)));
        assert_eq!(consumed, 16 + 19);
        // A flipped data byte, a flipped length byte.
        let mut bad = data.clone();
        bad[16 + 12] ^= 1;
        assert_eq!(unframe(&bad, true).2, Some(Problem::DataCrc));
        assert_eq!(unframe(&bad, false).2, None);
        let mut bad = data.clone();
        bad[16 + 7] ^= 0x80; // a length of 2**63 and more
        assert_eq!(unframe(&bad, true).2, Some(Problem::LengthCrc));
        assert_eq!(unframe(&bad, false).2, Some(Problem::Cut));
    }
}
