//! One typed column of a batch and the bytes of its value per row: a
//! serialized tf.train.Feature (Int64, Float, Bytes), bytes already
//! serialized (Raw), or a FeatureList body from serialized step Features
//! (Steps).
//!
//! Wire layout (tensorflow/core/example/feature.proto):
//!   Feature   = 0x0A len BytesList | 0x12 len FloatList | 0x1A len Int64List
//!   BytesList = (0x0A len bytes)*
//!   FloatList = 0x0A len float32-LE*    packed, omitted when empty
//!   Int64List = 0x0A len varint*        packed, omitted when empty
//!   FeatureList = (0x0A len Feature)*   one per step

use crate::varint::{self, Writer};

pub enum Kind<'a> {
    /// Flat values; row i holds values[offsets[i]..offsets[i+1]].
    Int64(&'a [i64]),
    /// Flat float32 values.
    Float(&'a [f32]),
    /// Values back to back in `data`, value j being
    /// data[value_offsets[j]..value_offsets[j+1]].
    Bytes(&'a [u8], &'a [i64]),
    /// Row i is data[offsets[i]..offsets[i+1]] as it is.
    Raw(&'a [u8]),
    /// Steps back to back in `data` (step s: data[steps[s]..steps[s+1]]),
    /// row i holding steps offsets[i]..offsets[i+1].
    Steps(&'a [u8], &'a [i64]),
}

pub struct Column<'a> {
    /// The UTF-8 name it is keyed by in a map (Features, FeatureLists).
    pub key: &'a [u8],
    /// The key field of its map entry: 0x0A len UTF-8 name (Features,
    /// FeatureLists).
    pub key_field: Vec<u8>,
    pub kind: Kind<'a>,
    /// n + 1 offsets into what `kind` holds.
    pub offsets: &'a [i64],
    /// Nonzero where the row has the entry (absent rows get no bytes).
    pub present: Option<&'a [u8]>,
}

/// Checks that `offsets` are n + 1 non-decreasing positions in 0..=end.
pub fn check_offsets(what: &str, offsets: &[i64], n: usize, end: usize) -> Result<(), String> {
    if n.checked_add(1) != Some(offsets.len()) {
        return Err(format!("{what}: {} offsets for {n} rows", offsets.len()));
    }
    let mut last = 0i64;
    for (i, &o) in offsets.iter().enumerate() {
        if o < last || (i == 0 && o < 0) {
            return Err(format!("{what}: offset {i} ({o}) is before the one before it"));
        }
        last = o;
    }
    if last as u64 > end as u64 {
        return Err(format!("{what}: the last offset ({last}) is past the end ({end})"));
    }
    Ok(())
}

/// Checks the offsets of items back to back in a buffer of `end` bytes;
/// the number of items.
fn check_items(what: &str, offsets: &[i64], end: usize) -> Result<usize, String> {
    if offsets.is_empty() {
        return Err(format!("{what}: no offsets"));
    }
    check_offsets(what, offsets, offsets.len() - 1, end)?;
    Ok(offsets.len() - 1)
}

impl<'a> Column<'a> {
    /// Checks every offset, so that no row reads outside its buffers.
    pub fn new(key: &'a [u8], kind: Kind<'a>, offsets: &'a [i64], present: Option<&'a [u8]>) -> Self {
        let mut key_field = vec![0u8; varint::field(key.len())];
        let mut w = Writer::new(&mut key_field);
        w.header(0x0A, key.len());
        w.bytes(key);
        Column { key, key_field, kind, offsets, present }
    }

    pub fn check(&self, n: usize) -> Result<(), String> {
        let name = String::from_utf8_lossy(self.key);
        let end = match self.kind {
            Kind::Int64(v) => v.len(),
            Kind::Float(v) => v.len(),
            Kind::Bytes(data, values) => check_items(&format!("{name} values"), values, data.len())?,
            Kind::Raw(data) => data.len(),
            Kind::Steps(data, steps) => check_items(&format!("{name} steps"), steps, data.len())?,
        };
        check_offsets(&name, self.offsets, n, end)?;
        if let Some(p) = self.present {
            if p.len() != n {
                return Err(format!("{name}: {} presence flags for {n} rows", p.len()));
            }
        }
        Ok(())
    }

    #[inline]
    pub fn present(&self, row: usize) -> bool {
        self.present.map_or(true, |p| p[row] != 0)
    }

    #[inline]
    fn range(&self, row: usize) -> (usize, usize) {
        (self.offsets[row] as usize, self.offsets[row + 1] as usize)
    }

    /// Bytes of the row's value (whether or not it is present).
    #[inline]
    pub fn value_len(&self, row: usize) -> usize {
        let (a, b) = self.range(row);
        match self.kind {
            Kind::Int64(v) => int64_len(v, a, b),
            Kind::Float(_) => float_len(a, b),
            Kind::Bytes(_, vo) => bytes_len(vo, a, b),
            Kind::Raw(_) => b - a,
            Kind::Steps(_, st) => steps_len(st, a, b),
        }
    }

    /// For rows start..start + values.len(): the value length of each
    /// present row into `values`, its map entry's length added to
    /// `bodies`. One loop per kind (the kind tested once, not per row).
    pub fn measure(&self, start: usize, values: &mut [usize], bodies: &mut [usize]) {
        match self.kind {
            Kind::Int64(v) => self.fill(start, values, bodies, |a, b| int64_len(v, a, b)),
            Kind::Float(_) => self.fill(start, values, bodies, float_len),
            Kind::Bytes(_, vo) => self.fill(start, values, bodies, |a, b| bytes_len(vo, a, b)),
            Kind::Raw(_) => self.fill(start, values, bodies, |a, b| b - a),
            Kind::Steps(_, st) => self.fill(start, values, bodies, |a, b| steps_len(st, a, b)),
        }
    }

    #[inline(always)]
    fn fill<F: Fn(usize, usize) -> usize>(&self, start: usize, values: &mut [usize], bodies: &mut [usize], len: F) {
        let offsets = &self.offsets[start..start + values.len() + 1];
        for r in 0..values.len() {
            if self.present.map_or(true, |p| p[start + r] != 0) {
                let v = len(offsets[r] as usize, offsets[r + 1] as usize);
                values[r] = v;
                bodies[r] += self.entry_len(v);
            }
        }
    }

    /// Writes the row's value (`value_len(row)` bytes).
    #[inline]
    pub fn write_value(&self, row: usize, w: &mut Writer) {
        let (a, b) = self.range(row);
        match self.kind {
            Kind::Int64(v) => {
                let values = &v[a..b];
                let packed = packed_ints(values);
                w.header(0x1A, if a < b { varint::field(packed) } else { 0 });
                if a < b {
                    w.header(0x0A, packed);
                    for &x in values {
                        w.varint(x as u64);
                    }
                }
            }
            Kind::Float(v) => {
                let packed = 4 * (b - a);
                w.header(0x12, if a < b { varint::field(packed) } else { 0 });
                if a < b {
                    w.header(0x0A, packed);
                    for &x in &v[a..b] {
                        w.bytes(&x.to_le_bytes());
                    }
                }
            }
            Kind::Bytes(data, vo) => {
                let items: usize = (a..b).map(|j| varint::field((vo[j + 1] - vo[j]) as usize)).sum();
                w.header(0x0A, items);
                for j in a..b {
                    let value = &data[vo[j] as usize..vo[j + 1] as usize];
                    w.header(0x0A, value.len());
                    w.bytes(value);
                }
            }
            Kind::Raw(data) => w.bytes(&data[a..b]),
            Kind::Steps(data, st) => {
                for s in a..b {
                    let step = &data[st[s] as usize..st[s + 1] as usize];
                    w.header(0x0A, step.len());
                    w.bytes(step);
                }
            }
        }
    }

    /// Bytes of the row's map entry (0x0A len (0x0A len key, 0x12 len value))
    /// given its value's length.
    #[inline]
    pub fn entry_len(&self, value_len: usize) -> usize {
        varint::field(self.key_field.len() + varint::field(value_len))
    }

    #[inline]
    pub fn write_entry(&self, row: usize, value_len: usize, w: &mut Writer) {
        w.header(0x0A, self.key_field.len() + varint::field(value_len));
        w.bytes(&self.key_field);
        w.header(0x12, value_len);
        let start = w.pos();
        self.write_value(row, w);
        debug_assert_eq!(w.pos() - start, value_len);
    }
}

#[inline(always)]
fn int64_len(v: &[i64], a: usize, b: usize) -> usize {
    list_feature(if a < b { packed_ints(&v[a..b]) } else { 0 }, a < b)
}

/// Bytes of the packed varints of an Int64 row.
#[inline(always)]
fn packed_ints(values: &[i64]) -> usize {
    values.iter().map(|&v| varint::len(v as u64)).sum()
}

#[inline(always)]
fn float_len(a: usize, b: usize) -> usize {
    list_feature(4 * (b - a), a < b)
}

#[inline(always)]
fn bytes_len(vo: &[i64], a: usize, b: usize) -> usize {
    varint::field((a..b).map(|j| varint::field((vo[j + 1] - vo[j]) as usize)).sum())
}

#[inline(always)]
fn steps_len(st: &[i64], a: usize, b: usize) -> usize {
    (a..b).map(|s| varint::field((st[s + 1] - st[s]) as usize)).sum()
}

/// Bytes of a Feature holding a list whose packed body is `packed` bytes
/// (the list's field is omitted when it has no values).
#[inline]
fn list_feature(packed: usize, any: bool) -> usize {
    varint::field(if any { varint::field(packed) } else { 0 })
}
