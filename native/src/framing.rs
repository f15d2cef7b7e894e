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
