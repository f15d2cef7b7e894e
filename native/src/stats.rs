//! One pass per column for the statistics of a batch (beam_tfrecords.
//! encoding.stats, which stays the reference: every result here is an
//! exact integer or a value of the input, so both paths give the same
//! numbers on every CPU).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use rustc_hash::FxHasher;

/// The (smallest, largest) values per row of a list column over its
/// present rows (`valid`: Arrow's validity bitmap from bit `bit_offset`,
/// or every row present), or None without a present row; Err(row) for a
/// missing row that has values (the caller then takes the reference
/// path, which flattens such lists as Arrow does).
pub fn length_range(offsets: &[i64], valid: Option<&[u8]>, bit_offset: usize) -> Result<Option<(i64, i64)>, usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { length_range_avx2(offsets, valid, bit_offset) };
    }
    ranged(offsets, valid, bit_offset)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn length_range_avx2(offsets: &[i64], valid: Option<&[u8]>, bit_offset: usize) -> Result<Option<(i64, i64)>, usize> {
    ranged(offsets, valid, bit_offset)
}

#[inline(always)]
fn ranged(offsets: &[i64], valid: Option<&[u8]>, bit_offset: usize) -> Result<Option<(i64, i64)>, usize> {
    let bits = match valid {
        None => return Ok(all_lengths(offsets)),
        Some(bits) => bits,
    };
    // Without a branch per row: an absent row's length counts as neither
    // the smallest nor the largest, and one with values is noted (then
    // found again, the first of them, in a second loop).
    let n = offsets.len().saturating_sub(1);
    let (starts, ends) = (&offsets[..n], &offsets[1..]);
    let mut low = i64::MAX;
    let mut high = i64::MIN;
    let mut hidden = 0i64;
    let mut add = |length: i64, present: i64| {
        let all = -present; // every bit set where the row is present
        low = low.min((length & all) | (i64::MAX & !all));
        high = high.max((length & all) | (i64::MIN & !all));
        hidden |= length & !all;
    };
    // Rows up to the first whole byte of the bitmap one by one, then 8
    // rows per byte (constant shifts: a loop the compiler vectorizes),
    // then the rest one by one.
    let head = ((8 - bit_offset % 8) % 8).min(n);
    let bit = |row: usize| ((bits[(bit_offset + row) >> 3] >> ((bit_offset + row) & 7)) & 1) as i64;
    for row in 0..head {
        add(ends[row] - starts[row], bit(row));
    }
    let whole = (n - head) / 8;
    let first_byte = (bit_offset + head) >> 3;
    // (64 rows all present, the most common case, as all_lengths takes
    // them: in less than half the time)
    let mut b = 0;
    while b < whole {
        let row = head + 8 * b;
        if b + 8 <= whole && bits[first_byte + b..first_byte + b + 8] == [0xff; 8] {
            if let Some((lo, hi)) = all_lengths(&offsets[row..row + 65]) {
                add(lo, 1);
                add(hi, 1);
            }
            b += 8;
            continue;
        }
        let byte = bits[first_byte + b] as i64;
        for j in 0..8 {
            add(ends[row + j] - starts[row + j], (byte >> j) & 1);
        }
        b += 1;
    }
    for row in head + 8 * whole..n {
        add(ends[row] - starts[row], bit(row));
    }
    if hidden != 0 {
        let at = |row: usize| bit_offset + row;
        let first = (0..n).find(|&row| bits[at(row) >> 3] >> (at(row) & 7) & 1 == 0 && ends[row] != starts[row]);
        return Err(first.unwrap_or(0));
    }
    Ok(if low <= high { Some((low, high)) } else { None })
}

/// The range of the lengths of every row: a loop the compiler vectorizes
/// (64-bit compares need AVX2 on x86-64: all_lengths_avx2).
#[inline(always)]
fn all_lengths(offsets: &[i64]) -> Option<(i64, i64)> {
    let n = offsets.len().saturating_sub(1);
    let (starts, ends) = (&offsets[..n], &offsets[1..]);
    let mut low = i64::MAX;
    let mut high = i64::MIN;
    for i in 0..n {
        let length = ends[i] - starts[i];
        low = low.min(length);
        high = high.max(length);
    }
    if low <= high { Some((low, high)) } else { None }
}

/// Whether offsets never fall (each row's end at or past its start): a
/// loop without an early exit, which the compiler vectorizes.
pub fn ascending(offsets: &[i64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { ascending_avx2(offsets) };
    }
    never_falls(offsets)
}

#[inline(always)]
fn never_falls(offsets: &[i64]) -> bool {
    let n = offsets.len().saturating_sub(1);
    let (starts, ends) = (&offsets[..n], &offsets[1..]);
    let mut falls = 0u64;
    for i in 0..n {
        falls |= (ends[i] < starts[i]) as u64;
    }
    falls == 0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn ascending_avx2(offsets: &[i64]) -> bool {
    never_falls(offsets)
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
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { int_summary_avx2(values, by_value) };
    }
    summarized(values, by_value)
}

/// int_summary compiled for AVX2 (its 64-bit min / max loop vectorizes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn int_summary_avx2(values: &[i64], by_value: i128) -> IntSummary {
    summarized(values, by_value)
}

#[inline(always)]
fn summarized(values: &[i64], by_value: i128) -> IntSummary {
    let mut s = IntSummary {
        min: i64::MAX,
        max: i64::MIN,
        sum: 0,
        squares_low: 0,
        squares_high: 0,
        zeros: 0,
        counts: None,
    };
    // One pass for the range, the zeros and the sums in 64 bits (a loop
    // the compiler vectorizes): exact where every value is within ±2**16
    // (squares below 2**32) and there are fewer than 2**31 of them, as in
    // most int64 features; else the sums are made again below.
    let (mut low, mut high, mut zeros) = (i64::MAX, i64::MIN, 0u64);
    let (mut sum, mut squares) = (0i64, 0u64);
    for &v in values {
        low = low.min(v);
        high = high.max(v);
        zeros += (v == 0) as u64;
        sum = sum.wrapping_add(v);
        squares = squares.wrapping_add(v.wrapping_mul(v) as u64);
    }
    (s.min, s.max, s.zeros) = (low, high, zeros);
    let small = s.min > -(1 << 16) && s.max < (1 << 16);
    if small && values.len() < 1 << 31 {
        s.sum = sum as i128;
        s.squares_low = squares as u128;
    } else if small {
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
        let size = (s.max - low) as usize + 1;
        if size <= 1 << 12 {
            // Four counts per value, for values 0, 1, 2, 3 mod 4 of the
            // column: a value repeated (a column in key order) adds to
            // four places in turn, not to one that each addition waits on.
            let mut four = vec![0i64; 4 * size];
            let mut quads = values.chunks_exact(4);
            for q in &mut quads {
                for (lane, &v) in q.iter().enumerate() {
                    four[4 * (v - low) as usize + lane] += 1;
                }
            }
            for &v in quads.remainder() {
                four[4 * (v - low) as usize] += 1;
            }
            s.counts = Some(four.chunks_exact(4).map(|c| c.iter().sum()).collect());
        } else {
            let mut counts = vec![0i64; size];
            for &v in values {
                counts[(v - low) as usize] += 1;
            }
            s.counts = Some(counts);
        }
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
/// at most `short` bytes long, each once, with its count: all of them in
/// the order each first comes when there are at most `kept`, else the
/// `kept` most frequent (ties: the smaller value, in byte order, which is
/// Python's order of bytes and of str), still in that order (`exact`
/// false); and how many values are longer.
pub struct ValueCounts<'a> {
    pub values: Vec<&'a [u8]>,
    pub counts: Vec<i64>,
    pub long: u64,
    pub exact: bool,
}

/// A value of at most 7 bytes as one 64-bit integer (its bytes, then its
/// length in the last byte: `tiny`, counted in a TinyTable), one of 8 to
/// 15 bytes as a 128-bit one, and one of 16 to 31 bytes as two: hashed
/// and compared without a memcmp. Each hashes as one word (fold; a hash
/// map's keys are compared in full, so the mix matters for speed only).
#[derive(PartialEq, Eq, Clone, Copy)]
struct Short(u128);
#[derive(PartialEq, Eq, Clone, Copy)]
struct Medium(u128, u128);

/// A 128-bit word mixed into 64 bits by one 64 x 64 -> 128-bit multiply
/// (folded, as foldhash does): every input bit moves bits above and below
/// it, so keys that differ in any byte spread over the table.
fn fold(x: u128, seed: u64) -> u64 {
    let m = ((x as u64) ^ seed) as u128 * (((x >> 64) as u64) ^ 0x243f_6a88_85a3_08d3) as u128;
    (m as u64) ^ ((m >> 64) as u64)
}

impl Hash for Short {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(fold(self.0, 0x9e37_79b9_7f4a_7c15));
    }
}

impl Hash for Medium {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(fold(self.0, 0x9e37_79b9_7f4a_7c15) ^ fold(self.1, 0x1319_8a2e_0370_7344));
    }
}

/// `data[start..start + len]` (len <= 16) as the low `len` bytes of an
/// integer; 16 bytes are read at once where the data goes on that far.
#[inline(always)]
fn word(data: &[u8], start: usize, len: usize) -> u128 {
    let x = if start + 16 <= data.len() {
        u128::from_le_bytes(data[start..start + 16].try_into().unwrap())
    } else {
        let mut bytes = [0u8; 16];
        bytes[..len].copy_from_slice(&data[start..start + len]);
        u128::from_le_bytes(bytes)
    };
    x & MASKS[len]
}

/// `data[start..start + len]` (len < 8) as the low `len` bytes of a
/// 64-bit integer, its length in the top byte.
#[inline(always)]
fn tiny(data: &[u8], start: usize, len: usize) -> u64 {
    word(data, start, len) as u64 | ((len as u64) << 56)
}

/// MASKS[len]: the low `len` bytes of a 128-bit word.
const MASKS: [u128; 17] = {
    let mut masks = [0u128; 17];
    let mut len = 1;
    while len <= 16 {
        masks[len] = u128::MAX >> (128 - 8 * len);
        len += 1;
    }
    masks
};

type Fx = BuildHasherDefault<FxHasher>;

/// A value's key: a tiny one's (len < 8) is its Tiny word (the high 64
/// bits 0) and 0; a short one's (len < 16) its Short word (high bits not
/// 0: they hold its length) and 0; a medium one's (len < 32) second word
/// is never 0; a long one has none (None).
#[inline(always)]
fn key_of(data: &[u8], start: usize, len: usize) -> Option<(u128, u128)> {
    if len < 8 {
        // (its high 64 bits 0, where a Short's hold its length: 8 or more)
        Some((tiny(data, start, len) as u128, 0))
    } else if len < 16 {
        Some((word(data, start, len) | ((len as u128) << 120), 0))
    } else if len < 32 {
        Some((word(data, start, 16), word(data, start + 16, len - 16) | ((len as u128) << 120)))
    } else {
        None
    }
}

/// Tiny keys (values under 8 bytes: `tiny`) and their indexes: open
/// addressing in flat arrays, a slot found by the top bits of one
/// multiply (Fibonacci hashing: they depend on every bit of the key),
/// then the next slots. A value's look-up is then one or two loads, where
/// a general hash map took three times as long on a column of a few
/// distinct codes (a carrier, an airport).
struct TinyTable {
    keys: Vec<u64>,
    /// index + 1 of the key in the slot; 0: the slot is empty
    slots: Vec<u32>,
    bits: u32,
    len: usize,
}

impl TinyTable {
    fn new(room: usize) -> Self {
        let bits = (2 * room.max(8)).next_power_of_two().trailing_zeros();
        TinyTable { keys: vec![0; 1 << bits], slots: vec![0; 1 << bits], bits, len: 0 }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize
    }

    /// The index of `key`, or `next` where it is new.
    #[inline(always)]
    fn index(&mut self, key: u64, next: usize) -> usize {
        let mask = (1usize << self.bits) - 1;
        let mut at = self.home(key);
        loop {
            match self.slots[at] {
                0 => break,
                i if self.keys[at] == key => return i as usize - 1,
                _ => at = (at + 1) & mask,
            }
        }
        self.keys[at] = key;
        self.slots[at] = next as u32 + 1;
        self.len += 1;
        if 2 * self.len > self.slots.len() {
            self.grow();
        }
        next
    }

    fn grow(&mut self) {
        let (keys, slots) = (std::mem::take(&mut self.keys), std::mem::take(&mut self.slots));
        self.bits += 1;
        self.keys = vec![0; 1 << self.bits];
        self.slots = vec![0; 1 << self.bits];
        let mask = (1usize << self.bits) - 1;
        for (key, slot) in keys.into_iter().zip(slots) {
            if slot != 0 {
                let mut at = self.home(key);
                while self.slots[at] != 0 {
                    at = (at + 1) & mask;
                }
                self.keys[at] = key;
                self.slots[at] = slot;
            }
        }
    }
}

/// Distinct values, each once in the order it first comes, with a count.
struct Counter<'a> {
    tiny: TinyTable,
    small: HashMap<Short, usize, Fx>,
    medium: HashMap<Medium, usize, Fx>,
    large: HashMap<&'a [u8], usize, Fx>,
    values: Vec<&'a [u8]>,
    counts: Vec<i64>,
}

impl<'a> Counter<'a> {
    fn new(room: usize) -> Self {
        Counter {
            tiny: TinyTable::new(room),
            small: HashMap::default(),
            medium: HashMap::default(),
            large: HashMap::default(),
            values: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// The index of `value` (its key: key_of), a new one counted 0.
    #[inline(always)]
    fn index(&mut self, value: &'a [u8], key: Option<(u128, u128)>) -> usize {
        let next = self.values.len();
        let i = match key {
            Some((first, 0)) if first >> 64 == 0 => self.tiny.index(first as u64, next),
            Some((first, 0)) => {
                let short = Short(first);
                match self.small.get(&short) {
                    Some(&i) => i,
                    None => *self.small.entry(short).or_insert(next),
                }
            }
            Some((first, second)) => *self.medium.entry(Medium(first, second)).or_insert(next),
            None => *self.large.entry(value).or_insert(next),
        };
        if i == next {
            self.values.push(value);
            self.counts.push(0);
        }
        i
    }

    /// The values and counts, past `kept` of them the `kept` most frequent
    /// (ties: the smaller value) in the order they first came.
    fn kept(self, kept: usize, long: u64) -> ValueCounts<'a> {
        let mut out = ValueCounts { values: self.values, counts: self.counts, long, exact: true };
        if out.values.len() > kept {
            out.exact = false;
            let mut order: Vec<usize> = (0..out.values.len()).collect();
            if kept > 0 {
                let (values, counts) = (&out.values, &out.counts);
                order.select_nth_unstable_by(kept - 1, |&a, &b| counts[b].cmp(&counts[a]).then_with(|| values[a].cmp(values[b])));
            }
            order.truncate(kept);
            order.sort_unstable();
            out.values = order.iter().map(|&i| out.values[i]).collect();
            out.counts = order.iter().map(|&i| out.counts[i]).collect();
        }
        out
    }
}

pub fn value_counts<'a>(data: &'a [u8], offsets: &[i64], short: usize, kept: usize) -> ValueCounts<'a> {
    let n = offsets.len().saturating_sub(1);
    let mut tally = Tally { counter: Counter::new(n.min(1 << 12)), long: 0, run: (None, 0, 0) };
    // Runs of one value (a column in the order of a key) are counted
    // without a look-up or a store each; in a column without them, the
    // test for one is a branch mispredicted about every other value (3
    // airports in random order took 2.4 times as long as counting each
    // value). So the values go in blocks, each counted the way that suits
    // the block before it: by runs where at least half of its values
    // repeated the one before.
    let mut by_runs = false;
    let mut at = 0;
    while at < n {
        let end = (at + RUN_BLOCK).min(n);
        let block = &offsets[at..end + 1];
        let repeats = if by_runs { tally.by_runs(data, block, short) } else { tally.one_by_one(data, block, short) };
        by_runs = 2 * repeats >= end - at;
        at = end;
    }
    tally.end_run();
    tally.counter.kept(kept, tally.long)
}

/// Values a block of value_counts holds (see there).
const RUN_BLOCK: usize = 512;
/// Values of a block counted one by one that tell whether it had runs.
const PROBE: usize = 64;

/// What value_counts has counted so far: the values, how many were long,
/// and the run going on (its key, its index, how many values it holds
/// that are not added to its count yet).
struct Tally<'a> {
    counter: Counter<'a>,
    long: u64,
    run: (Option<(u128, u128)>, usize, i64),
}

impl<'a> Tally<'a> {
    fn end_run(&mut self) {
        if self.run.2 > 0 {
            self.counter.counts[self.run.1] += self.run.2;
        }
        self.run = (None, 0, 0);
    }

    /// Counts the values of `offsets` (n + 1 of them), following runs:
    /// how many values went on a run.
    fn by_runs(&mut self, data: &'a [u8], offsets: &[i64], short: usize) -> usize {
        // (the run and the count of long values in locals: registers)
        let (mut run, mut long, mut repeats) = (self.run, 0, 0);
        for pair in offsets.windows(2) {
            let (start, end) = (pair[0] as usize, pair[1] as usize);
            if end - start > short {
                long += 1;
                continue;
            }
            let key = key_of(data, start, end - start);
            if key.is_some() && key == run.0 {
                run.2 += 1;
                repeats += 1;
                continue;
            }
            if run.2 > 0 {
                self.counter.counts[run.1] += run.2;
            }
            run = (key, self.counter.index(&data[start..end], key), 1);
        }
        self.run = run;
        self.long += long;
        repeats
    }

    /// Counts the values of `offsets` one by one: of the first PROBE,
    /// how many (short ones) repeated the one before, without a branch on
    /// it, scaled to the block's values (the rest are not looked at for
    /// it: that alone took a fifth of the time a value took).
    fn one_by_one(&mut self, data: &'a [u8], offsets: &[i64], short: usize) -> usize {
        self.end_run();
        let probe = (offsets.len() - 1).min(PROBE);
        let (mut repeats, mut before) = (0, u64::MAX);
        for pair in offsets[..probe + 1].windows(2) {
            if let Some(key) = self.count_one(data, pair, short) {
                // (a repeat as far as the low words tell: only for the choice)
                let word = key.map_or(u64::MAX - 1, |(first, second)| first as u64 ^ second as u64);
                repeats += (word == before) as usize;
                before = word;
            }
        }
        for pair in offsets[probe..].windows(2) {
            self.count_one(data, pair, short);
        }
        repeats * (offsets.len() - 1) / probe.max(1)
    }

    /// Counts the value data[pair[0]..pair[1]]: its key (key_of), or None
    /// where it is long.
    #[inline(always)]
    fn count_one(&mut self, data: &'a [u8], pair: &[i64], short: usize) -> Option<Option<(u128, u128)>> {
        let (start, end) = (pair[0] as usize, pair[1] as usize);
        if end - start > short {
            self.long += 1;
            return None;
        }
        let key = key_of(data, start, end - start);
        let i = self.counter.index(&data[start..end], key);
        self.counter.counts[i] += 1;
        Some(key)
    }
}

/// Value counts added up: each part is (data, offsets, counts) as
/// value_counts gives them; the sum is cut as value_counts cuts (`exact`
/// false when it was), its values in the order each first comes.
pub fn summed<'a>(parts: &[(&'a [u8], &[i64], &[i64])], kept: usize) -> ValueCounts<'a> {
    let room = parts.iter().map(|p| p.2.len()).max().unwrap_or(0).min(1 << 16);
    let mut counter = Counter::new(room);
    for &(data, offsets, counts) in parts {
        for (pair, &count) in offsets.windows(2).zip(counts) {
            let (start, end) = (pair[0] as usize, pair[1] as usize);
            let i = counter.index(&data[start..end], key_of(data, start, end - start));
            counter.counts[i] += count;
        }
    }
    counter.kept(kept, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repeatable draws below m (a linear congruential generator).
    fn draws(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut state = seed;
        move |m| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % m
        }
    }

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
    fn lengths_of_long_columns_with_few_missing_rows() {
        // Stretches of 64 present rows and more (taken whole) among
        // missing ones, at every bit offset, against a row-by-row range.
        let mut next = draws(99);
        for round in 0..200 {
            let n = 1 + next(700) as usize;
            let bit_offset = next(16) as usize;
            let present: Vec<bool> = (0..n).map(|_| next(100) >= [0, 1, 30][round % 3]).collect();
            // lengths 2 to 8, but one row of 1 and one of 11 anywhere (in
            // a stretch taken whole or not): the range must see them
            let (short_row, long_row) = (next(n as u64) as usize, next(n as u64) as usize);
            let mut offsets = vec![next(5) as i64];
            for (row, &p) in present.iter().enumerate() {
                let length = match (p, row) {
                    (false, _) => 0,
                    (true, r) if r == long_row => 11,
                    (true, r) if r == short_row => 1,
                    _ => 2 + next(7) as i64,
                };
                offsets.push(offsets[offsets.len() - 1] + length);
            }
            let mut bits = vec![0u8; (bit_offset + n + 7) / 8 + 1];
            for (row, &p) in present.iter().enumerate() {
                bits[(bit_offset + row) >> 3] |= (p as u8) << ((bit_offset + row) & 7);
            }
            let lengths = (0..n).filter(|&r| present[r]).map(|r| offsets[r + 1] - offsets[r]);
            let want = lengths.clone().min().map(|lo| (lo, lengths.max().unwrap()));
            assert_eq!(length_range(&offsets, Some(&bits), bit_offset), Ok(want), "round {round}");
            if let Some(row) = (0..n).rev().find(|&r| !present[r]) {
                // a missing row that holds values: found
                let mut hidden = offsets.clone();
                for later in hidden.iter_mut().skip(row + 1) {
                    *later += 3;
                }
                assert_eq!(length_range(&hidden, Some(&bits), bit_offset), Err(row), "round {round}");
            }
        }
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
    fn runs_and_scattered_values_count_alike() {
        // Blocks of runs, then of values that seldom repeat, then runs
        // again (value_counts switches its loop between blocks), of every
        // key's length class and long values, against a plain count in
        // first-seen order.
        let words: Vec<Vec<u8>> = [1usize, 5, 9, 20, 40, 200]
            .iter()
            .flat_map(|&len| (0..7u8).map(move |i| vec![b'a' + i; len]))
            .collect();
        let mut picks = Vec::new();
        let mut draws = draws(12345);
        let mut next = |m: usize| draws(m as u64) as usize;
        for section in 0..5 {
            while picks.len() < (section + 1) * 1500 {
                let w = next(words.len());
                let run = if section % 2 == 0 { 1 + next(40) } else { 1 };
                picks.extend(std::iter::repeat(w).take(run));
            }
        }
        let mut data = Vec::new();
        let mut offsets = vec![0i64];
        for &w in &picks {
            data.extend(&words[w]);
            offsets.push(data.len() as i64);
        }
        let got = value_counts(&data, &offsets, 128, 1000);
        let (mut order, mut counts): (Vec<usize>, HashMap<usize, i64>) = (Vec::new(), HashMap::new());
        for &w in picks.iter().filter(|&&w| words[w].len() <= 128) {
            if !counts.contains_key(&w) {
                order.push(w);
            }
            *counts.entry(w).or_insert(0) += 1;
        }
        assert_eq!(got.values, order.iter().map(|&w| &words[w][..]).collect::<Vec<_>>());
        assert_eq!(got.counts, order.iter().map(|w| counts[w]).collect::<Vec<_>>());
        assert_eq!(got.long as usize, picks.iter().filter(|&&w| words[w].len() > 128).count());
        assert!(got.exact);
    }

    #[test]
    fn counts_in_first_seen_order() {
        let data = b"bababcc";
        let got = value_counts(data, &[0, 1, 2, 3, 4, 5, 7], 1, 10);
        assert_eq!(got.values, vec![&b"b"[..], &b"a"[..]]);
        assert_eq!(got.counts, vec![3, 2]);
        assert_eq!(got.long, 1);
        // Runs, a run broken by a long value, and empty values; values of
        // 15, 16, 31 and 32 bytes that differ in their last byte only.
        let got = value_counts(b"aabbaaxx", &[0, 1, 2, 3, 4, 6, 7, 8, 8, 8], 1, 10);
        assert_eq!(got.values, vec![&b"a"[..], &b"b"[..], &b"x"[..], &b""[..]]);
        assert_eq!(got.counts, vec![2, 2, 2, 2]);
        assert_eq!(got.long, 1);
        for size in [1usize, 7, 8, 15, 16, 31, 32] {
            let mut data = vec![b'q'; size];
            data.extend(vec![b'q'; size - 1]);
            data.push(b'r');
            data.extend(vec![b'q'; size]);
            let o: Vec<i64> = (0..4).map(|i| (i * size) as i64).collect();
            let got = value_counts(&data, &o, 128, 10);
            assert_eq!(got.counts, vec![2, 1], "{size}");
            assert_eq!(got.values[1].len(), size);
        }
    }

    #[test]
    fn tiny_values_past_the_table_s_first_size() {
        // 5,000 distinct values of 1 to 7 bytes (past the room of 4,096
        // the table starts with), each twice, interleaved.
        let words: Vec<Vec<u8>> = (0..5000u32).map(|i| format!("{:x}", i * 2654435761 % 100_000_000).into_bytes()).collect();
        let mut data = Vec::new();
        let mut offsets = vec![0i64];
        for round in 0..2 {
            for (i, w) in words.iter().enumerate() {
                let w = if round == 1 { &words[words.len() - 1 - i] } else { w };
                data.extend(w);
                offsets.push(data.len() as i64);
            }
        }
        let got = value_counts(&data, &offsets, 8, 10_000);
        let distinct: std::collections::HashSet<&Vec<u8>> = words.iter().collect();
        assert_eq!(got.values.len(), distinct.len());
        assert!(got.counts.iter().all(|&c| c % 2 == 0));
        assert_eq!(got.counts.iter().sum::<i64>(), 10_000);
        assert_eq!(got.values[0], &words[0][..]);
    }

    #[test]
    fn sums_add_counts_of_equal_values_of_every_length() {
        let long = vec![b'L'; 40];
        let medium = vec![b'm'; 20];
        let mut a = b"xy".to_vec();
        a.extend(&medium);
        a.extend(&long);
        let mut b = long.clone();
        b.extend(b"xy");
        b.extend(b"q");
        let (oa, ca) = ([0i64, 2, 22, 62], [1i64, 2, 3]);
        let (ob, cb) = ([0i64, 40, 42, 43], [10i64, 20, 30]);
        let got = summed(&[(&a, &oa, &ca), (&b, &ob, &cb)], 10);
        assert!(got.exact);
        assert_eq!(got.values, vec![&b"xy"[..], &medium[..], &long[..], &b"q"[..]]);
        assert_eq!(got.counts, vec![21, 2, 13, 30]);
        let got = summed(&[(&a, &oa, &ca), (&b, &ob, &cb)], 2);
        assert!(!got.exact);
        assert_eq!(got.values, vec![&b"xy"[..], &b"q"[..]]);
        assert_eq!(got.counts, vec![21, 30]);
    }

    #[test]
    fn past_the_kept_most_frequent_then_smallest_in_first_seen_order() {
        // counts: d 1, c 4, b 2, a 2, e 2
        let data = b"dcbaecbacec";
        let o: Vec<i64> = (0..=data.len() as i64).collect();
        let got = value_counts(data, &o, 8, 5);
        assert!(got.exact);
        let got = value_counts(data, &o, 8, 3);
        assert!(!got.exact);
        assert_eq!(got.values, vec![&b"c"[..], &b"b"[..], &b"a"[..]]);
        assert_eq!(got.counts, vec![4, 2, 2]);
        let got = value_counts(data, &o, 8, 0);
        assert!(!got.exact && got.values.is_empty());
    }
}
