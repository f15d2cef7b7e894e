//! Several values per row packed into one byte string: each value as the
//! varint of its length, then its bytes, in column order. The grouped
//! path carries a step's Features so on its way to the assembly (one
//! column to reorder, compress and read, not one per feature), and
//! unpacks them there, in order. Equal packed steps are equal values, as
//! the varints are the shortest ones.

use crate::columns::Column;
use crate::varint::{self, Writer};

/// Each present value's length (0 where absent), row by row, and the
/// packed rows' n + 1 offsets.
pub fn measure(n: usize, columns: &[Column]) -> (Vec<usize>, Vec<i64>) {
    let k = columns.len();
    let mut lengths = vec![0usize; n * k];
    for (c, column) in columns.iter().enumerate() {
        for row in 0..n {
            if column.present(row) {
                lengths[row * k + c] = column.value_len(row);
            }
        }
    }
    let mut offsets = Vec::with_capacity(n + 1);
    let mut total = 0usize;
    offsets.push(0i64);
    for row in lengths.chunks(k.max(1)).take(n) {
        total += row.iter().map(|&v| varint::len(v as u64) + v).sum::<usize>();
        offsets.push(total as i64);
    }
    if k == 0 {
        offsets.resize(n + 1, 0);
    }
    (lengths, offsets)
}

/// Writes the packed rows `measure` measured into `out`.
pub fn write(columns: &[Column], lengths: &[usize], out: &mut [u8]) {
    let k = columns.len();
    let total = out.len();
    let mut w = Writer::new(out);
    for (row, row_lengths) in lengths.chunks(k.max(1)).enumerate() {
        for (column, &length) in columns.iter().zip(row_lengths) {
            w.varint(length as u64);
            if column.present(row) {
                column.write_value(row, &mut w);
            }
        }
    }
    assert_eq!(w.pos(), total);
}

/// Reads a varint at `pos` that must end by `end`: (value, its bytes).
fn read_varint(data: &[u8], pos: usize, end: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for i in 0..10 {
        let at = pos + i;
        if at >= end {
            return None;
        }
        let b = data[at];
        value |= u64::from(b & 0x7F) << (7 * i);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The `k` values of packed row `row` as (start, length) pairs, handed
/// to `each` in order; Err(row) where the row is not k packed values.
#[inline(always)]
fn walk<F: FnMut(usize, usize, usize)>(data: &[u8], offsets: &[i64], row: usize, k: usize, mut each: F) -> Result<(), usize> {
    let (mut pos, end) = (offsets[row] as usize, offsets[row + 1] as usize);
    for c in 0..k {
        let (length, used) = read_varint(data, pos, end).ok_or(row)?;
        let start = pos + used;
        let length = usize::try_from(length).map_err(|_| row)?;
        match start.checked_add(length) {
            Some(stop) if stop <= end => {
                each(c, start, length);
                pos = stop;
            }
            _ => return Err(row),
        }
    }
    if pos != end {
        return Err(row);
    }
    Ok(())
}

/// The bytes of each of the `k` values over every packed row (the rows:
/// data[offsets[i]..offsets[i+1]]); Err(row) for the first row that is
/// not k packed values.
pub fn totals(data: &[u8], offsets: &[i64], k: usize) -> Result<Vec<usize>, usize> {
    let mut out = vec![0usize; k];
    for row in 0..offsets.len() - 1 {
        walk(data, offsets, row, k, |c, _, length| out[c] += length)?;
    }
    Ok(out)
}

/// Value c of every row back to back into region c of `out` (regions of
/// `totals` bytes, in order), and its n + 1 offsets (from 0) into
/// `column_offsets[c * (n + 1)..]`. The rows must have passed `totals`.
pub fn split(data: &[u8], offsets: &[i64], k: usize, totals: &[usize], out: &mut [u8], column_offsets: &mut [i64]) {
    let n = offsets.len() - 1;
    let mut rest: &mut [u8] = out;
    let mut writers = Vec::with_capacity(k);
    for &total in totals {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(total);
        writers.push(Writer::new(head));
        rest = tail;
    }
    for c in 0..k {
        column_offsets[c * (n + 1)] = 0;
    }
    for row in 0..n {
        walk(data, offsets, row, k, |c, start, length| {
            let w = &mut writers[c];
            w.bytes(&data[start..start + length]);
            column_offsets[c * (n + 1) + row + 1] = w.pos() as i64;
        })
        .expect("split: rows checked by totals");
    }
    for (w, &total) in writers.iter().zip(totals) {
        assert_eq!(w.pos(), total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_reads_back_what_was_packed() {
        // rows: [b"ab", b""], [b"", vec![7; 200]]
        let mut data = vec![2, b'a', b'b', 0, 0, 0xC8, 0x01];
        data.extend(vec![7u8; 200]);
        let offsets = [0i64, 4, data.len() as i64];
        let totals = totals(&data, &offsets, 2).unwrap();
        assert_eq!(totals, vec![2, 200]);
        let mut out = vec![0u8; 202];
        let mut column_offsets = vec![-1i64; 6];
        split(&data, &offsets, 2, &totals, &mut out, &mut column_offsets);
        assert_eq!(&out[..2], b"ab");
        assert_eq!(out[2..], vec![7u8; 200][..]);
        assert_eq!(column_offsets, vec![0, 2, 2, 0, 0, 200]);
    }

    #[test]
    fn totals_refuse_rows_that_are_not_k_values() {
        let data = [2u8, b'a', b'b', 1, b'c'];
        // one value too many, one too few, a length past the row's end,
        // a varint cut by the row's end, the second row wrong
        assert_eq!(totals(&data, &[0, 5], 1), Err(0));
        assert_eq!(totals(&data, &[0, 5], 3), Err(0));
        assert_eq!(totals(&data, &[0, 2], 1), Err(0));
        assert_eq!(totals(&[0x80u8], &[0, 1], 1), Err(0));
        assert_eq!(totals(&data, &[0, 3, 4], 1), Err(1));
        assert_eq!(totals(&data, &[0, 3, 5], 1), Ok(vec![3]));
    }
}
