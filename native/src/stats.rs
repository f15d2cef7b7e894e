//! One pass per column for the statistics of a batch (beam_tfrecords.
//! encoding.stats, which stays the reference: every result here is an
//! exact integer or a value of the input, so both paths give the same
//! numbers on every CPU).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

/// The (smallest, largest) values per row of a list column over its
/// present rows (`valid`: Arrow's validity bitmap from bit `bit_offset`,
/// or every row present), or None without a present row; Err(row) for a
/// missing row that has values (the caller then takes the reference
/// path, which flattens such lists as Arrow does).
pub fn length_range(offsets: &[i64], valid: Option<&[u8]>, bit_offset: usize) -> Result<Option<(i64, i64)>, usize> {
    let mut low = i64::MAX;
    let mut high = i64::MIN;
    match valid {
        // Every row present: a loop the compiler vectorizes.
        None => {
            for pair in offsets.windows(2) {
                let length = pair[1] - pair[0];
                low = low.min(length);
                high = high.max(length);
            }
        }
        Some(bits) => {
            for (row, pair) in offsets.windows(2).enumerate() {
                let length = pair[1] - pair[0];
                let at = bit_offset + row;
                if bits[at >> 3] >> (at & 7) & 1 == 1 {
                    low = low.min(length);
                    high = high.max(length);
                } else if length != 0 {
                    return Err(row);
                }
            }
        }
    }
    Ok(if low <= high { Some((low, high)) } else { None })
}

/// What the statistics keep of int64 values (at least one).
pub struct IntSummary {
    pub min: i64,
    pub max: i64,
    pub sum: i128,
    /// The sum of squares is `squares_high * 2**128 + squares_low`.
    pub squares_low: u128,
    pub squares_high: u64,
    pub zeros: u64,
    /// Counts of min..=max, when max - min < `by_value`.
    pub counts: Option<Vec<i64>>,
}

pub fn int_summary(values: &[i64], by_value: i128) -> IntSummary {
    let mut s = IntSummary {
        min: i64::MAX,
        max: i64::MIN,
        sum: 0,
        squares_low: 0,
        squares_high: 0,
        zeros: 0,
        counts: None,
    };
    for &v in values {
        s.min = s.min.min(v);
        s.max = s.max.max(v);
        s.zeros += (v == 0) as u64;
    }
    if s.min > -(1 << 16) && s.max < (1 << 16) {
        // Squares below 2**32: slices of 2**31 values sum in 64 bits, in
        // a loop the compiler vectorizes (most int64 features).
        for slice in values.chunks(1 << 31) {
            let (mut sum, mut squares) = (0i64, 0u64);
            for &v in slice {
                sum += v;
                squares += (v * v) as u64;
            }
            s.sum += sum as i128;
            s.squares_low += squares as u128;
        }
    } else {
        for &v in values {
            s.sum += v as i128;
            let m = v.unsigned_abs() as u128; // < 2**64, its square < 2**128
            let (low, carried) = s.squares_low.overflowing_add(m * m);
            s.squares_low = low;
            s.squares_high += carried as u64;
        }
    }
    let low = s.min;
    if (s.max as i128) - (low as i128) < by_value {
        let mut counts = vec![0i64; (s.max - low) as usize + 1];
        for &v in values {
            counts[(v - low) as usize] += 1;
        }
        s.counts = Some(counts);
    }
    s
}

/// Buckets per power of two at the finest level: 2**FINEST, and the most
/// keys a histogram's level lets its values span (encoding.histogram).
const FINEST: u32 = 40;
const SPAN: i64 = 1024;
/// np.frexp's exponents of finite float64 plus this are positive.
const BIAS: i64 = 1075;

/// encoding.histogram's Histogram: keys and counts at `level`, and the
/// (smallest, largest) finest key of the positive values and of the
/// negative values' magnitudes.
pub struct Hist {
    pub level: u32,
    pub keys: Vec<i64>,
    pub counts: Vec<i64>,
    pub positive: Option<(i64, i64)>,
    pub negative: Option<(i64, i64)>,
}

/// The finest key of a positive, normal float64 (histogram._finest_keys:
/// np.frexp's exponent plus BIAS, then the fraction's top FINEST bits).
fn finest_key(x: f64) -> i64 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64; // frexp's exponent + 1022
    ((biased - 1022 + BIAS) << FINEST) | ((bits & ((1u64 << 52) - 1)) >> (52 - FINEST)) as i64
}

fn span(ranges: &[Option<(i64, i64)>; 2], shift: u32) -> i64 {
    ranges.iter().flatten().map(|&(lo, hi)| (hi >> shift) - (lo >> shift) + 1).sum()
}

/// Adds (key >> shift, count) pairs in key order into runs of one key.
fn runs(pairs: impl Iterator<Item = (i64, i64)>, shift: u32) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (key, count) in pairs {
        let key = key >> shift;
        match out.last_mut() {
            Some(last) if last.0 == key => last.1 += count,
            _ => out.push((key, count)),
        }
    }
    out
}

/// The histogram of int64 values given as the count of each of low,
/// low + 1, ... (histogram.of_value_counts: each value as a float64).
/// Every value is an integer, so none is a subnormal float.
pub fn int_histogram(low: i64, counts: &[i64]) -> Hist {
    let mut positive: Vec<(i64, i64)> = Vec::new();
    let mut negative: Vec<(i64, i64)> = Vec::new(); // magnitudes falling
    let mut zeros = 0i64;
    for (i, &count) in counts.iter().enumerate() {
        if count == 0 {
            continue;
        }
        let x = (low + i as i64) as f64;
        if x > 0.0 {
            positive.push((finest_key(x), count));
        } else if x < 0.0 {
            negative.push((finest_key(-x), count));
        } else {
            zeros += count;
        }
    }
    negative.reverse(); // magnitudes rising
    let range = |v: &Vec<(i64, i64)>| v.first().map(|f| (f.0, v[v.len() - 1].0));
    let ranges = [range(&positive), range(&negative)];
    let mut shift = 0;
    while shift < FINEST && span(&ranges, shift) > SPAN {
        shift += 1;
    }
    let pos = runs(positive.into_iter(), shift);
    let neg = runs(negative.into_iter(), shift);
    let mut keys = Vec::with_capacity(pos.len() + neg.len() + 1);
    let mut out = Vec::with_capacity(keys.capacity());
    for &(key, count) in neg.iter().rev() {
        keys.push(-key);
        out.push(count);
    }
    if zeros > 0 {
        keys.push(0);
        out.push(zeros);
    }
    for &(key, count) in &pos {
        keys.push(key);
        out.push(count);
    }
    Hist { level: FINEST - shift, keys, counts: out, positive: ranges[0], negative: ranges[1] }
}

/// The values of a bytes column (value i = data[offsets[i]..offsets[i+1]])
/// at most `short` bytes long, each once in the order it first comes, with
/// its count; and how many are longer.
pub struct ValueCounts<'a> {
    pub values: Vec<&'a [u8]>,
    pub counts: Vec<i64>,
    pub long: u64,
}

/// A value of at most 31 bytes as two integers (its bytes, then its
/// length in the last byte): hashed and compared without a memcmp.
/// `data[start..start + len]` is the value; 32 bytes are read at once
/// where the data goes on that far.
#[inline(always)]
fn packed(data: &[u8], start: usize, len: usize) -> Option<(u128, u128)> {
    if len > 31 {
        return None;
    }
    let mut bytes = [0u8; 32];
    match data.get(start..start + 32) {
        Some(all) => bytes.copy_from_slice(all),
        None => {
            for (b, v) in bytes.iter_mut().zip(&data[start..start + len]) {
                *b = *v;
            }
        }
    }
    let low = u128::from_le_bytes(bytes[..16].try_into().unwrap());
    let high = u128::from_le_bytes(bytes[16..].try_into().unwrap());
    let mask = |bits: usize| if bits == 0 { 0 } else if bits >= 128 { u128::MAX } else { u128::MAX >> (128 - bits) };
    Some((low & mask(8 * len), (high & mask(8 * len.saturating_sub(16))) | ((len as u128) << 120)))
}

type Fx = BuildHasherDefault<FxHasher>;

pub fn value_counts<'a>(data: &'a [u8], offsets: &[i64], short: usize) -> ValueCounts<'a> {
    let n = offsets.len().saturating_sub(1);
    let room = n.min(1 << 12);
    let mut small: HashMap<(u128, u128), usize, Fx> = HashMap::with_capacity_and_hasher(room, Fx::default());
    let mut large: HashMap<&'a [u8], usize, Fx> = HashMap::default();
    let mut out = ValueCounts { values: Vec::new(), counts: Vec::new(), long: 0 };
    for pair in offsets.windows(2) {
        let value = &data[pair[0] as usize..pair[1] as usize];
        if value.len() > short {
            out.long += 1;
            continue;
        }
        let next = out.values.len();
        let i = match packed(data, pair[0] as usize, value.len()) {
            Some(k) => match small.get(&k) {
                Some(&i) => i,
                None => *small.entry(k).or_insert(next),
            },
            None => match large.get(value) {
                Some(&i) => i,
                None => *large.entry(value).or_insert(next),
            },
        };
        if i == next {
            out.values.push(value);
            out.counts.push(0);
        }
        out.counts[i] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squares_carry_past_128_bits() {
        let s = int_summary(&[i64::MIN, i64::MIN, i64::MIN, i64::MIN], 1 << 16);
        // 4 * 2**126 = 2**128
        assert_eq!((s.squares_high, s.squares_low), (1, 0));
        assert_eq!(s.sum, 4 * (i64::MIN as i128));
        assert!(s.counts.is_some());
    }

    #[test]
    fn small_values_sum_as_large_ones_do() {
        let values: Vec<i64> = (-70_000..70_000).step_by(7).collect();
        let small: Vec<i64> = values.iter().map(|v| v / 2).collect();
        for v in [&values, &small] {
            let s = int_summary(v, 1 << 16);
            let sum: i128 = v.iter().map(|&x| x as i128).sum();
            let squares: u128 = v.iter().map(|&x| (x as i128 * x as i128) as u128).sum();
            assert_eq!((s.sum, s.squares_low, s.squares_high), (sum, squares, 0));
        }
    }

    #[test]
    fn wide_ranges_are_not_counted_by_value() {
        let s = int_summary(&[0, 1 << 16], 1 << 16);
        assert!(s.counts.is_none());
        assert_eq!(s.zeros, 1);
        let s = int_summary(&[i64::MIN, i64::MAX], 1 << 16);
        assert!(s.counts.is_none());
    }

    #[test]
    fn lengths_of_present_rows_only() {
        // rows: [0,2) present, [2,2) missing, [2,5) present
        let bits = [0b101u8];
        assert_eq!(length_range(&[0, 2, 2, 5], Some(&bits), 0), Ok(Some((2, 3))));
        assert_eq!(length_range(&[0, 2, 3, 5], Some(&bits), 0), Err(1));
        assert_eq!(length_range(&[0, 0], Some(&[0u8]), 0), Ok(None));
    }

    #[test]
    fn finest_keys_as_frexp_gives_them() {
        // 1.0 = 0.5 * 2**1: exponent 1, fraction 0; 3.0 = 0.75 * 2**2.
        assert_eq!(finest_key(1.0), (1 + BIAS) << FINEST);
        assert_eq!(finest_key(3.0), ((2 + BIAS) << FINEST) + (1 << (FINEST - 1)));
        let h = int_histogram(-1, &[2, 1, 3]);
        assert_eq!(h.keys, vec![-((1 + BIAS) << FINEST), 0, (1 + BIAS) << FINEST]);
        assert_eq!(h.counts, vec![2, 1, 3]);
        assert_eq!(h.level, FINEST);
    }

    #[test]
    fn counts_in_first_seen_order() {
        let data = b"bababcc";
        let got = value_counts(data, &[0, 1, 2, 3, 4, 5, 7], 1);
        assert_eq!(got.values, vec![&b"b"[..], &b"a"[..]]);
        assert_eq!(got.counts, vec![3, 2]);
        assert_eq!(got.long, 1);
        // Runs, a run broken by a long value, and empty values; values of
        // 15, 16, 31 and 32 bytes that differ in their last byte only.
        let got = value_counts(b"aabbaaxx", &[0, 1, 2, 3, 4, 6, 7, 8, 8, 8], 1);
        assert_eq!(got.values, vec![&b"a"[..], &b"b"[..], &b"x"[..], &b""[..]]);
        assert_eq!(got.counts, vec![2, 2, 2, 2]);
        assert_eq!(got.long, 1);
        for size in [15usize, 16, 31, 32] {
            let mut data = vec![b'q'; size];
            data.extend(vec![b'q'; size - 1]);
            data.push(b'r');
            data.extend(vec![b'q'; size]);
            let o: Vec<i64> = (0..4).map(|i| (i * size) as i64).collect();
            let got = value_counts(&data, &o, 128);
            assert_eq!(got.counts, vec![2, 1], "{size}");
            assert_eq!(got.values[1].len(), size);
        }
    }
}
