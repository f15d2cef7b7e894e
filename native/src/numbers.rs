//! Number text to int64 or float32 in one pass, for the plainest text
//! only. beam_tfrecords.encoding.columns keeps the reference (pyarrow's
//! casts after the schema's text rules): any value that is not plain
//! makes the whole column return None here, and the caller takes the
//! reference path, which judges it. So both paths accept the same text
//! and give the same values, which the test suite checks both ways.

/// The value of `-?[0-9]+` within int64, else None.
#[inline]
pub fn plain_int(text: &[u8]) -> Option<i64> {
    let negative = text.first() == Some(&b'-');
    let digits = &text[usize::from(negative)..];
    if digits.is_empty() {
        return None;
    }
    if digits.len() <= 18 {
        // Cannot overflow: under 10**18.
        let mut v: i64 = 0;
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + i64::from(d);
        }
        return Some(if negative { -v } else { v });
    }
    // Summed as a negative number, so that -2**63 fits.
    let mut v: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(i64::from(d))?;
    }
    if negative {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// Whether `text` is `[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?`:
/// the schema's float text without spaces, nan or inf.
fn is_plain_float(text: &[u8]) -> bool {
    let mut i = usize::from(matches!(text.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < text.len() && text[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if i < text.len() && text[i] == b'.' {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if i < text.len() && (text[i] == b'e' || text[i] == b'E') {
        i += 1;
        if i < text.len() && (text[i] == b'+' || text[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == text.len()
}

/// The value of plain float text as float32, rounded from the nearest
/// float64 as Arrow's casts round it; None for other text and for a
/// value float32 cannot hold (3.4e39, 1e309), which the reference
/// refuses.
#[inline]
pub fn plain_float(text: &[u8]) -> Option<f32> {
    if !is_plain_float(text) {
        return None;
    }
    // ASCII only, checked above.
    let v: f64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    let f = v as f32;
    if f.is_finite() {
        Some(f)
    } else {
        None
    }
}

/// Offsets into the text data: Arrow's int32 (string, binary) or int64
/// (large_string, large_binary).
pub trait Offset: Copy + Sync {
    fn at(self) -> i64;
}

impl Offset for i32 {
    fn at(self) -> i64 {
        i64::from(self)
    }
}

impl Offset for i64 {
    fn at(self) -> i64 {
        self
    }
}

/// Every present value (value i = data[offsets[i]..offsets[i+1]];
/// `valid`: Arrow's validity bitmap from bit `bit_offset`, or every value
/// present) parsed by `parse` into `out` (N bytes a value, zeroed:
/// missing values stay 0), and the present rows marked in `bits` (zeroed,
/// given with `valid`). False where a present value does not parse. The
/// caller checks the offsets and the lengths first.
pub fn parse_column<O: Offset, const N: usize>(
    data: &[u8],
    offsets: &[O],
    valid: Option<(&[u8], usize)>,
    bits: Option<&mut [u8]>,
    out: &mut [u8],
    parse: impl Fn(&[u8]) -> Option<[u8; N]>,
) -> bool {
    let text = |row: usize| &data[offsets[row].at() as usize..offsets[row + 1].at() as usize];
    let slots = out.chunks_exact_mut(N).enumerate();
    match (valid, bits) {
        (Some((v, bit_offset)), Some(bits)) => {
            for (row, slot) in slots {
                let at = bit_offset + row;
                if v[at >> 3] >> (at & 7) & 1 == 1 {
                    bits[row >> 3] |= 1 << (row & 7);
                    match parse(text(row)) {
                        Some(value) => slot.copy_from_slice(&value),
                        None => return false,
                    }
                }
            }
        }
        _ => {
            for (row, slot) in slots {
                match parse(text(row)) {
                    Some(value) => slot.copy_from_slice(&value),
                    None => return false,
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ints() {
        assert_eq!(plain_int(b"0"), Some(0));
        assert_eq!(plain_int(b"-0"), Some(0));
        assert_eq!(plain_int(b"007"), Some(7));
        assert_eq!(plain_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(plain_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(plain_int(b"9223372036854775808"), None);
        assert_eq!(plain_int(b"-9223372036854775809"), None);
        for bad in [&b""[..], b"-", b"--4", b"4-", b"+4", b" 4", b"4.0", b"1e3"] {
            assert_eq!(plain_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn plain_floats() {
        assert_eq!(plain_float(b"1.5"), Some(1.5));
        assert_eq!(plain_float(b"+.5"), Some(0.5));
        assert_eq!(plain_float(b"5."), Some(5.0));
        assert_eq!(plain_float(b"-2E+2"), Some(-200.0));
        assert_eq!(plain_float(b"1e-50"), Some(0.0));
        assert!(plain_float(b"-0.0").unwrap().is_sign_negative());
        // Rounded to float64 first, then to float32, as Arrow does.
        // 16777217.000000001 is 16777217 in float64, a tie in float32
        // that rounds to even; read as float32 at once, it would be
        // 16777218.
        assert_eq!(plain_float(b"16777217.000000001"), Some(16777216.0));
        for bad in [&b""[..], b".", b"-", b"1e", b"e5", b"1e+", b"nan", b"inf", b" 1", b"1 ", b"3.4e39", b"1e309", b"1..2"] {
            assert_eq!(plain_float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn columns_with_missing_values() {
        let data = b"12x-3";
        let offsets: [i32; 4] = [0, 2, 3, 5];
        // The middle value is missing: its "x" is not read.
        let valid = [0b101u8];
        let ints = |t: &[u8]| plain_int(t).map(i64::to_le_bytes);
        let (mut out, mut bits) = ([0u8; 24], [0u8; 1]);
        assert!(parse_column(data, &offsets, Some((&valid, 0)), Some(&mut bits), &mut out, ints));
        let got: Vec<i64> = out.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, [12, 0, -3]);
        assert_eq!(bits, [0b101]);
        // From bit 1 of the bitmap, the "x" is present and refused.
        let valid = [0b0110u8];
        let (mut out, mut bits) = ([0u8; 24], [0u8; 1]);
        assert!(!parse_column(data, &offsets, Some((&valid, 1)), Some(&mut bits), &mut out, ints));
    }
}
