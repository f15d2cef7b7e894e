//! Protobuf varints and a bounds-checked writer over a preallocated buffer.

/// Bytes of the varint of `v` (1 to 10).
#[inline(always)]
pub fn len(v: u64) -> usize {
    // Most are lengths under 128: one byte, without the chain of a
    // leading-zero count and a division (nested lengths add up serially).
    if v < 0x80 {
        1
    } else {
        (70 - v.leading_zeros() as usize) / 7
    }
}

/// Bytes of a length-delimited field: tag, varint of `n`, `n` bytes.
#[inline(always)]
pub fn field(n: usize) -> usize {
    1 + len(n as u64) + n
}

/// Writes into a buffer whose size was measured beforehand; a write past
/// its end panics (a bug, never memory unsafety).
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn byte(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    #[inline]
    pub fn varint(&mut self, mut v: u64) {
        if v < 0x80 {
            return self.byte(v as u8);
        }
        // Into a local first: one bounds check for the whole varint.
        let mut tmp = [0u8; 10];
        let mut i = 0;
        while v >= 0x80 {
            tmp[i] = (v as u8) | 0x80;
            v >>= 7;
            i += 1;
        }
        tmp[i] = v as u8;
        self.bytes(&tmp[..=i]);
    }

    /// A field's tag and length.
    #[inline]
    pub fn header(&mut self, tag: u8, n: usize) {
        if n < 0x80 && self.pos + 2 <= self.buf.len() {
            self.buf[self.pos] = tag;
            self.buf[self.pos + 1] = n as u8;
            self.pos += 2;
        } else {
            self.byte(tag);
            self.varint(n as u64);
        }
    }

    #[inline]
    pub fn bytes(&mut self, data: &[u8]) {
        let n = data.len();
        let dst = &mut self.buf[self.pos..self.pos + n];
        // Most keys and values are a few bytes: fixed-size (overlapping)
        // moves instead of a call to memcpy.
        match n {
            0 => {}
            1..=3 => {
                dst[0] = data[0];
                dst[n / 2] = data[n / 2];
                dst[n - 1] = data[n - 1];
            }
            4..=8 => {
                dst[..4].copy_from_slice(&data[..4]);
                dst[n - 4..].copy_from_slice(&data[n - 4..]);
            }
            9..=16 => {
                dst[..8].copy_from_slice(&data[..8]);
                dst[n - 8..].copy_from_slice(&data[n - 8..]);
            }
            _ => dst.copy_from_slice(data),
        }
        self.pos += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert_eq!(len(0), 1);
        assert_eq!(len(127), 1);
        assert_eq!(len(128), 2);
        assert_eq!(len(u64::MAX), 10);
        assert_eq!(len((-1i64) as u64), 10);
    }
}
