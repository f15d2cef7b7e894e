//! beam_tfrecords_native: the native encoding core of beam_tfrecords.
//!
//! The pure-Python encoder (beam_tfrecords.encoding.wire and
//! core.tfrecord_files) is the reference; every function here gives the
//! same bytes for the same input, which the test suite checks (goldens,
//! determinism, a Hypothesis property test over random schemas).
//!
//! Inputs are read through the buffer protocol (numpy arrays, bytes,
//! Arrow buffers) without a copy; every offset is checked before a row is
//! read, and the work runs with the GIL released.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyTuple};

mod columns;
mod decode;
mod framing;
mod messages;
mod numbers;
mod packing;
mod stats;
mod varint;

use columns::{Column, Kind};
use messages::Group;

/// The contract the Python side checks before it uses this module: bump
/// it when a function's arguments or output change.
const CONTRACT: u32 = 9;

/// Keeps the Python buffers alive while slices of them are in use.
#[derive(Default)]
struct Buffers(Vec<PyUntypedBuffer>);

impl Buffers {
    /// A C-contiguous buffer of `T` (by item size) as a slice that lives as
    /// long as `self`.
    fn slice<'a, T>(&'a mut self, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<&'a [T]> {
        let buf = PyUntypedBuffer::get(obj)?;
        let size = std::mem::size_of::<T>();
        if !buf.is_c_contiguous() || buf.item_size() != size || buf.len_bytes() % size != 0 {
            return Err(PyValueError::new_err(format!(
                "{what}: expected a contiguous buffer of {size}-byte items, got item size {} ({} bytes)",
                buf.item_size(),
                buf.len_bytes()
            )));
        }
        let count = buf.len_bytes() / size;
        let ptr = buf.buf_ptr() as *const T;
        if count > 0 && (ptr as usize) % std::mem::align_of::<T>() != 0 {
            return Err(PyValueError::new_err(format!("{what}: the buffer is not aligned")));
        }
        self.0.push(buf);
        if count == 0 {
            return Ok(&[]);
        }
        // SAFETY: the buffer is held (so neither freed nor resized) until
        // `self` drops, it is contiguous, aligned and `count` items long.
        Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
    }
}

/// A column from its Python tuple
/// (key: bytes, kind: int, offsets: int64[n+1], present: uint8[n] | None, a, b)
/// with kind 0 int64 (a: int64 values), 1 float (a: float32 values),
/// 2 bytes (a: data, b: int64 value offsets), 3 raw (a: data),
/// 4 steps (a: data, b: int64 step offsets).
fn column<'a>(t: &Bound<'_, PyTuple>, held: &'a mut Vec<Buffers>) -> PyResult<Column<'a>> {
    if t.len() != 6 {
        return Err(PyValueError::new_err("a column is (key, kind, offsets, present, a, b)"));
    }
    let key_obj = t.get_item(0)?;
    let kind: u8 = t.get_item(1)?.extract()?;
    let mut buffers = Buffers::default();
    // Slices are tied to `held`'s boxes below; take raw parts first.
    let key: &[u8] = buffers.slice::<u8>(&key_obj, "key")?;
    let key = unsafe { std::slice::from_raw_parts(key.as_ptr(), key.len()) };
    let offsets_obj = t.get_item(2)?;
    let offsets = detach(buffers.slice::<i64>(&offsets_obj, "offsets")?);
    let present_obj = t.get_item(3)?;
    let present = if present_obj.is_none() {
        None
    } else {
        Some(detach(buffers.slice::<u8>(&present_obj, "present")?))
    };
    let a = t.get_item(4)?;
    let b = t.get_item(5)?;
    let kind = match kind {
        0 => Kind::Int64(detach(buffers.slice::<i64>(&a, "int64 values")?)),
        1 => Kind::Float(detach(buffers.slice::<f32>(&a, "float32 values")?)),
        2 => Kind::Bytes(
            detach(buffers.slice::<u8>(&a, "bytes data")?),
            detach(buffers.slice::<i64>(&b, "value offsets")?),
        ),
        3 => Kind::Raw(detach(buffers.slice::<u8>(&a, "data")?)),
        4 => Kind::Steps(
            detach(buffers.slice::<u8>(&a, "step data")?),
            detach(buffers.slice::<i64>(&b, "step offsets")?),
        ),
        other => return Err(PyValueError::new_err(format!("unknown column kind {other}"))),
    };
    held.push(buffers);
    Ok(Column::new(key, kind, offsets, present))
}

/// A slice with its lifetime widened to the caller's `held` list.
fn detach<'a, T>(s: &[T]) -> &'a [T] {
    // SAFETY: every slice comes from a buffer that `column` moves into
    // `held`, which outlives the returned Column (see `encode`).
    unsafe { std::slice::from_raw_parts(s.as_ptr(), s.len()) }
}

fn offsets_bytes<'py>(py: Python<'py>, offsets: &[i64]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, offsets.len() * 8, |out| {
        for (chunk, o) in out.chunks_exact_mut(8).zip(offsets) {
            chunk.copy_from_slice(&o.to_le_bytes());
        }
        Ok(())
    })
}

/// Columns of n rows from their tuples (see `column`), each checked;
/// their buffers go into `held`.
///
/// # Safety
/// The columns borrow from `held`'s buffers with a lifetime the caller
/// picks: it must keep `held` alive (and not clear it) until every
/// returned column is dropped.
unsafe fn checked_columns<'a>(tuples: &[Bound<'_, PyTuple>], n: usize, held: &mut Vec<Buffers>) -> PyResult<Vec<Column<'a>>> {
    let mut columns = Vec::with_capacity(tuples.len());
    for t in tuples {
        let c = column(t, held)?;
        // SAFETY (lifetimes): see `detach`; the caller keeps `held` until
        // the columns are dropped.
        let c: Column<'a> = unsafe { std::mem::transmute::<Column<'_>, Column<'a>>(c) };
        c.check(n).map_err(PyValueError::new_err)?;
        columns.push(c);
    }
    Ok(columns)
}

/// Messages per row: `groups` is [(tag, [column tuple])], each group's
/// columns sorted by key. Returns (data, int64 offsets as bytes).
#[pyfunction]
fn encode<'py>(
    py: Python<'py>,
    n: usize,
    groups: Vec<(u8, Vec<Bound<'py, PyTuple>>)>,
    omit_empty: bool,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let mut held: Vec<Buffers> = Vec::new();
    let mut built: Vec<Group> = Vec::with_capacity(groups.len());
    for (tag, tuples) in &groups {
        // SAFETY: `built` is dropped before `held` below.
        built.push(Group { tag: *tag, columns: unsafe { checked_columns(tuples, n, &mut held)? } });
    }
    let offsets = py.detach(|| messages::measure(n, &built, omit_empty));
    let data = PyBytes::new_with(py, *offsets.last().unwrap() as usize, |out| {
        py.detach(|| messages::write(&built, omit_empty, &offsets, out));
        Ok(())
    })?;
    let offsets = offsets_bytes(py, &offsets)?;
    drop(built);
    drop(held);
    Ok((data, offsets))
}

/// One column's value per row with no key (a serialized Feature, or a
/// FeatureList body); absent rows are empty. Returns (data, offsets).
#[pyfunction]
fn values<'py>(
    py: Python<'py>,
    n: usize,
    column_tuple: Bound<'py, PyTuple>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let mut held: Vec<Buffers> = Vec::new();
    let c = column(&column_tuple, &mut held)?;
    c.check(n).map_err(PyValueError::new_err)?;
    let (data, offsets) = py.detach(|| messages::values(n, &c));
    let data = PyBytes::new(py, &data);
    let offsets = offsets_bytes(py, &offsets)?;
    drop(held);
    Ok((data, offsets))
}

/// Per row, each column's value (a Feature with no key; empty where
/// absent) as the varint of its length and its bytes, back to back
/// (packing.rs). Returns (data, offsets).
#[pyfunction]
fn packed_values<'py>(
    py: Python<'py>,
    n: usize,
    column_tuples: Vec<Bound<'py, PyTuple>>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let mut held: Vec<Buffers> = Vec::new();
    // SAFETY: `columns` is dropped before `held` below.
    let columns = unsafe { checked_columns(&column_tuples, n, &mut held)? };
    let (lengths, offsets) = py.detach(|| packing::measure(n, &columns));
    let data = PyBytes::new_with(py, *offsets.last().unwrap() as usize, |out| {
        py.detach(|| packing::write(&columns, &lengths, out));
        Ok(())
    })?;
    let offsets = offsets_bytes(py, &offsets)?;
    drop(columns);
    drop(held);
    Ok((data, offsets))
}

/// The `k` values of each packed row (`packed_values`' rows:
/// data[offsets[i]..offsets[i+1]]), column by column: (data: column 0's
/// values back to back, then column 1's, ...; offsets: k x (n + 1) int64
/// as bytes, each column's from 0; starts: where each column's values
/// begin in data, k + 1 of them). A ValueError names the first row that
/// is not k values.
#[pyfunction]
fn unpacked_values<'py>(
    py: Python<'py>,
    data: Bound<'py, PyAny>,
    offsets: Bound<'py, PyAny>,
    k: usize,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<usize>)> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let o: &[i64] = detach(held.slice::<i64>(&offsets, "offsets")?);
    if o.is_empty() {
        return Err(PyValueError::new_err("unpacked_values: no offsets"));
    }
    if k == 0 {
        return Err(PyValueError::new_err("unpacked_values: k must be at least 1"));
    }
    let n = o.len() - 1;
    columns::check_offsets("unpacked_values", o, n, d.len()).map_err(PyValueError::new_err)?;
    let totals = py.detach(|| packing::totals(d, o, k)).map_err(|row| {
        PyValueError::new_err(format!("packed row {row} is not {k} length-prefixed values"))
    })?;
    let mut column_offsets = vec![0i64; k * (n + 1)];
    let out = PyBytes::new_with(py, totals.iter().sum(), |out| {
        py.detach(|| packing::split(d, o, k, &totals, out, &mut column_offsets));
        Ok(())
    })?;
    let mut starts = Vec::with_capacity(k + 1);
    starts.push(0usize);
    for t in &totals {
        starts.push(starts.last().unwrap() + t);
    }
    let column_offsets = offsets_bytes(py, &column_offsets)?;
    drop(held);
    Ok((out, column_offsets, starts))
}

/// TFRecord framing of record i = data[offsets[i]..offsets[i+1]].
#[pyfunction]
fn frame<'py>(
    py: Python<'py>,
    data: Bound<'py, PyAny>,
    offsets: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let o: &[i64] = detach(held.slice::<i64>(&offsets, "offsets")?);
    if o.is_empty() {
        return Err(PyValueError::new_err("frame: no offsets"));
    }
    columns::check_offsets("frame", o, o.len() - 1, d.len()).map_err(PyValueError::new_err)?;
    let out = PyBytes::new_with(py, framing::framed_len(o), |out| {
        py.detach(|| framing::frame(d, o, out));
        Ok(())
    })?;
    drop(held);
    Ok(out)
}

/// Where each framed record of `data` ends (int64 as bytes).
#[pyfunction]
fn framed_ends<'py>(py: Python<'py>, data: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let ends = py
        .detach(|| framing::ends(d))
        .map_err(|at| PyValueError::new_err(format!(
            "framed records end in the middle of a record (the one at byte {at})")))?;
    let out = offsets_bytes(py, &ends)?;
    drop(held);
    Ok(out)
}

/// The records of framed `data` (bytes each), checked with `check`:
/// (records, where the walk stopped, None or what is wrong there:
/// "corrupt length CRC" / "corrupt data CRC"). A stop before the end
/// with None is a record the data ends inside.
#[pyfunction]
fn unframe<'py>(
    py: Python<'py>,
    data: Bound<'py, PyAny>,
    check: bool,
) -> PyResult<(Bound<'py, PyList>, usize, Option<&'static str>)> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let (spans, consumed, problem) = py.detach(|| framing::unframe(d, check));
    let list = PyList::new(py, spans.iter().map(|&(a, b)| PyBytes::new(py, &d[a..b])))?;
    drop(held);
    Ok((list, consumed, problem.and_then(|p| p.name())))
}

/// `unframe`'s walk, the records left where they lie: (spans: int64
/// (start, end) pairs into `data`, one per record, where the walk
/// stopped, None or what is wrong there). No bytes object per record
/// (core/records.py holds them).
#[pyfunction]
fn unframe_spans<'py>(
    py: Python<'py>,
    data: Bound<'py, PyAny>,
    check: bool,
) -> PyResult<(Bound<'py, PyBytes>, usize, Option<&'static str>)> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let (spans, consumed, problem) = py.detach(|| framing::unframe(d, check));
    let out = PyBytes::new_with(py, spans.len() * 16, |out| {
        for (pair, &(a, b)) in out.chunks_exact_mut(16).zip(&spans) {
            pair[..8].copy_from_slice(&(a as i64).to_le_bytes());
            pair[8..].copy_from_slice(&(b as i64).to_le_bytes());
        }
        Ok(())
    })?;
    drop(held);
    Ok((out, consumed, problem.and_then(|p| p.name())))
}

/// The records a decoder is given, as slices: a list of bytes (a record
/// each) or of (buffer, spans) pairs (buffer: read-only bytes; spans:
/// int64 (start, end) pairs into it, `unframe_spans`'), in any mix. Each
/// item is kept in `keep` and each buffer held in `held` for as long as
/// the slices are used (the list may change once the GIL is released).
fn record_slices<'py>(
    records: &Bound<'py, PyList>,
    held: &mut Buffers,
    keep: &mut Vec<Bound<'py, PyAny>>,
) -> PyResult<Vec<&'static [u8]>> {
    let mut out = Vec::new();
    for item in records.iter() {
        if let Ok(b) = item.cast::<PyBytes>() {
            out.push(detach(b.as_bytes()));
            keep.push(item);
            continue;
        }
        let pair = item.cast::<PyTuple>().map_err(|_| {
            PyTypeError::new_err("records are bytes, or (buffer, spans) pairs")
        })?;
        if pair.len() != 2 {
            return Err(PyTypeError::new_err("records are bytes, or (buffer, spans) pairs"));
        }
        let data: &[u8] = detach(held.slice::<u8>(&pair.get_item(0)?, "a records buffer")?);
        if !held.0.last().is_some_and(|b| b.readonly()) {
            return Err(PyTypeError::new_err("a records buffer is read-only (bytes, or a view of bytes)"));
        }
        let spans: &[i64] = detach(held.slice::<i64>(&pair.get_item(1)?, "a records buffer's spans")?);
        let format = held.0.last().map(|b| b.format().to_bytes().to_vec()).unwrap_or_default();
        if !matches!(format.as_slice(), b"l" | b"q" | b"<l" | b"<q" | b"=l" | b"=q" | b"@l" | b"@q") {
            return Err(PyValueError::new_err(format!(
                "spans are int64 (start, end) pairs, not of format {:?}", String::from_utf8_lossy(&format))));
        }
        if spans.len() % 2 != 0 {
            return Err(PyValueError::new_err("spans are (start, end) pairs"));
        }
        out.reserve(spans.len() / 2);
        for span in spans.chunks_exact(2) {
            let (a, b) = (span[0], span[1]);
            match (usize::try_from(a), usize::try_from(b)) {
                (Ok(start), Ok(end)) if start <= end && end <= data.len() => out.push(&data[start..end]),
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "a span ({a}, {b}) outside its buffer of {} bytes", data.len())))
                }
            }
        }
    }
    Ok(out)
}

/// Serialized Examples (`records`, bytes each) as columns, one per name
/// of `names` with its kind in `kinds` (0 int64, 1 float, 2 bytes):
/// [(lengths: int64 per record, values: int64 / float32 little-endian or
/// bytes back to back, offsets: int64 per bytes value + 1 or None, present:
/// uint8 per record)], numbers in bytearrays (writable once numpy has
/// them); or
/// a str saying what is outside the layout this reads (read/wire_columns).
#[pyfunction]
fn decode_examples<'py>(
    py: Python<'py>,
    records: Bound<'py, PyList>,
    names: Vec<Vec<u8>>,
    kinds: Vec<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    let kinds = decode_kinds(&names, &kinds, "decode_examples")?;
    let names: Vec<&[u8]> = names.iter().map(|n| n.as_slice()).collect();
    // (Each record's object is kept alive in `keep` and `held`, and
    // bytes never change.)
    let mut held = Buffers::default();
    let mut keep = Vec::new();
    let spans = record_slices(&records, &mut held, &mut keep)?;
    let got = py.detach(|| decode::decode(&spans, &names, &kinds));
    let columns = match got {
        Ok(columns) => columns,
        Err(why) => return Ok(why.into_pyobject(py)?.into_any()),
    };
    let out = columns_list(py, &columns, &kinds)?;
    drop(held);
    drop(keep);
    drop(records);
    Ok(out.into_any())
}

/// SequenceExamples as columns: (context, lists), the context as
/// decode_examples' list, each feature list (steps: int64 per record,
/// lengths: int64 per step, values, offsets, present: uint8 per record);
/// or a str saying what is outside the layout this reads.
#[pyfunction]
fn decode_sequence_examples<'py>(
    py: Python<'py>,
    records: Bound<'py, PyList>,
    context_names: Vec<Vec<u8>>,
    context_kinds: Vec<u8>,
    list_names: Vec<Vec<u8>>,
    list_kinds: Vec<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    let context_kinds = decode_kinds(&context_names, &context_kinds, "decode_sequence_examples")?;
    let list_kinds = decode_kinds(&list_names, &list_kinds, "decode_sequence_examples")?;
    let context_names: Vec<&[u8]> = context_names.iter().map(|n| n.as_slice()).collect();
    let list_names: Vec<&[u8]> = list_names.iter().map(|n| n.as_slice()).collect();
    // (Each record's object is kept alive in `keep` and `held`, and
    // bytes never change.)
    let mut held = Buffers::default();
    let mut keep = Vec::new();
    let spans = record_slices(&records, &mut held, &mut keep)?;
    let got = py.detach(|| decode::decode_sequences(&spans, &context_names, &context_kinds, &list_names, &list_kinds));
    let (context, lists) = match got {
        Ok(found) => found,
        Err(why) => return Ok(why.into_pyobject(py)?.into_any()),
    };
    let out_context = columns_list(py, &context, &context_kinds)?;
    let out_lists = PyList::empty(py);
    for (c, kind) in lists.iter().zip(&list_kinds) {
        out_lists.append((
            int64_bytes(py, &c.steps)?,
            int64_bytes(py, &c.lengths)?,
            values_object(py, &c.values, *kind)?,
            offsets_object(py, &c.offsets, *kind)?,
            PyByteArray::new(py, &c.present),
        ))?;
    }
    drop(held);
    drop(keep);
    drop(records);
    Ok((out_context, out_lists).into_pyobject(py)?.into_any())
}

/// decode::Columns as [(lengths, values, offsets, present)].
fn columns_list<'py>(py: Python<'py>, columns: &[decode::Column], kinds: &[decode::Kind]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (c, kind) in columns.iter().zip(kinds) {
        out.append((
            int64_bytes(py, &c.lengths)?,
            values_object(py, &c.values, *kind)?,
            offsets_object(py, &c.offsets, *kind)?,
            PyByteArray::new(py, &c.present),
        ))?;
    }
    Ok(out)
}

fn decode_kinds(names: &[Vec<u8>], kinds: &[u8], what: &str) -> PyResult<Vec<decode::Kind>> {
    if names.len() != kinds.len() {
        return Err(PyValueError::new_err(format!("{what}: one kind per name")));
    }
    kinds
        .iter()
        .map(|&k| decode::Kind::from_code(k).ok_or_else(|| PyValueError::new_err(format!("unknown kind {k}"))))
        .collect()
}

/// int64s, little-endian, in a bytearray (writable once numpy has it).
fn int64_bytes<'py>(py: Python<'py>, values: &[i64]) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, values.len() * 8, |b| {
        for (chunk, v) in b.chunks_exact_mut(8).zip(values) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })
}

/// A column's values: bytes (text and bytes, for Arrow) or a bytearray.
fn values_object<'py>(py: Python<'py>, values: &[u8], kind: decode::Kind) -> PyResult<Bound<'py, PyAny>> {
    Ok(if kind == decode::Kind::Bytes {
        PyBytes::new(py, values).into_any()
    } else {
        PyByteArray::new(py, values).into_any()
    })
}

/// A bytes column's offsets (Arrow's, int64), or None.
fn offsets_object<'py>(py: Python<'py>, offsets: &[i64], kind: decode::Kind) -> PyResult<Bound<'py, PyAny>> {
    Ok(if kind == decode::Kind::Bytes {
        offsets_bytes(py, offsets)?.into_any()
    } else {
        py.None().into_bound(py)
    })
}

/// The (smallest, largest) values per present row of a list column
/// (int64 `offsets`, n + 1; `valid`: Arrow's validity bitmap, read from
/// bit `bit_offset`, or None): (True, (low, high) or None without a
/// present row), or (False, None) where a missing row has values.
#[pyfunction]
fn length_range<'py>(
    offsets: Bound<'py, PyAny>,
    valid: Option<Bound<'py, PyAny>>,
    bit_offset: usize,
) -> PyResult<(bool, Option<(i64, i64)>)> {
    let mut held = Buffers::default();
    let o: &[i64] = detach(held.slice::<i64>(&offsets, "offsets")?);
    if o.is_empty() {
        return Err(PyValueError::new_err("length_range: no offsets"));
    }
    let bits: Option<&[u8]> = match &valid {
        None => None,
        Some(v) => Some(detach(held.slice::<u8>(v, "valid")?)),
    };
    if let Some(b) = bits {
        if (bit_offset + o.len() - 1).div_ceil(8) > b.len() {
            return Err(PyValueError::new_err("length_range: the validity bitmap is too short"));
        }
    }
    let got = stats::length_range(o, bits, bit_offset);
    drop(held);
    Ok(match got {
        Ok(range) => (true, range),
        Err(_) => (false, None),
    })
}

/// Int64 `values` (at least one) in one pass: (min, max, sum, the sum of
/// squares' low 128 bits and the rest, zeros, histogram), the histogram
/// (encoding.histogram.of_ints) made here when max - min < `by_value`
/// as (level, keys and counts as int64 bytes, the positive and the
/// negative ranges), else None.
#[pyfunction]
fn int_stats<'py>(
    py: Python<'py>,
    values: Bound<'py, PyAny>,
    by_value: i128,
) -> PyResult<(i64, i64, i128, u128, u64, u64, Option<Bound<'py, PyTuple>>)> {
    let mut held = Buffers::default();
    let v: &[i64] = detach(held.slice::<i64>(&values, "values")?);
    if v.is_empty() {
        return Err(PyValueError::new_err("int_stats: no values"));
    }
    // (The GIL held: a call takes microseconds, less than handing the
    // GIL to the other encoding thread and back costs.)
    let s = stats::int_summary(v, by_value);
    let hist = s.counts.as_ref().map(|c| stats::int_histogram(s.min, c));
    drop(held);
    let hist = match hist {
        None => None,
        Some(h) => Some(PyTuple::new(py, [
            h.level.into_pyobject(py)?.into_any(),
            offsets_bytes(py, &h.keys)?.into_any(),
            offsets_bytes(py, &h.counts)?.into_any(),
            h.positive.into_pyobject(py)?.into_any(),
            h.negative.into_pyobject(py)?.into_any(),
        ])?),
    };
    Ok((s.min, s.max, s.sum, s.squares_low, s.squares_high, s.zeros, hist))
}

/// The values of a bytes column (value i = data[offsets[i]..offsets[i+1]])
/// of at most `short` bytes, each once: all of them in the order each
/// first comes, or past `kept` of them the `kept` most frequent
/// (stats::value_counts); as (their bytes back to back, their offsets and
/// their counts as int64 bytes), how many values are longer, and whether
/// all are there. With `text`, each value must be UTF-8.
#[pyfunction]
fn value_counts<'py>(
    py: Python<'py>,
    data: Bound<'py, PyAny>,
    offsets: Bound<'py, PyAny>,
    short: usize,
    text: bool,
    kept: usize,
) -> PyResult<(Counted<'py>, u64, bool)> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let o: &[i64] = detach(held.slice::<i64>(&offsets, "offsets")?);
    checked_values("value_counts", d, o)?;
    let got = py.detach(|| stats::value_counts(d, o, short, kept));
    if text {
        for v in &got.values {
            std::str::from_utf8(v)
                .map_err(|e| PyValueError::new_err(format!("value_counts: text that is not UTF-8 ({e})")))?;
        }
    }
    let counted = counted(py, &got)?;
    let (long, exact) = (got.long, got.exact);
    drop(got);
    drop(held);
    Ok((counted, long, exact))
}

/// Values and their counts as bytes: (the values back to back, their
/// n + 1 offsets, their n counts; both int64).
type Counted<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

fn counted<'py>(py: Python<'py>, got: &stats::ValueCounts) -> PyResult<Counted<'py>> {
    let size: usize = got.values.iter().map(|v| v.len()).sum();
    let data = PyBytes::new_with(py, size, |out| {
        let mut at = 0;
        for v in &got.values {
            out[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        }
        Ok(())
    })?;
    let mut offsets = Vec::with_capacity(got.values.len() + 1);
    let mut at = 0i64;
    offsets.push(0);
    for v in &got.values {
        at += v.len() as i64;
        offsets.push(at);
    }
    Ok((data, offsets_bytes(py, &offsets)?, offsets_bytes(py, &got.counts)?))
}

/// Offsets that index `data` (from at least 0, never falling, to at most
/// its end), else a ValueError naming `what`.
fn checked_values(what: &str, d: &[u8], o: &[i64]) -> PyResult<()> {
    if o.is_empty() {
        return Err(PyValueError::new_err(format!("{what}: no offsets")));
    }
    // Arrow's offsets need not start at 0 (a slice of a column).
    if o[0] < 0 || !stats::ascending(o) || o[o.len() - 1] as u64 > d.len() as u64 {
        return Err(PyValueError::new_err(format!("{what}: offsets out of order or past the data")));
    }
    Ok(())
}

/// Value counts (each part: data, offsets, counts as value_counts gives
/// them) added up, past `kept` values cut as value_counts cuts
/// (stats::summed): (data, offsets, counts), and whether all are there.
#[pyfunction]
fn counts_summed<'py>(
    py: Python<'py>,
    parts: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    kept: usize,
) -> PyResult<(Counted<'py>, bool)> {
    let mut held = Buffers::default();
    let mut slices: Vec<(&[u8], &[i64], &[i64])> = Vec::with_capacity(parts.len());
    for (data, offsets, counts) in &parts {
        let d: &[u8] = detach(held.slice::<u8>(data, "data")?);
        let o: &[i64] = detach(held.slice::<i64>(offsets, "offsets")?);
        let c: &[i64] = detach(held.slice::<i64>(counts, "counts")?);
        checked_values("counts_summed", d, o)?;
        if c.len() + 1 != o.len() {
            return Err(PyValueError::new_err("counts_summed: a count per value, not as many"));
        }
        slices.push((d, o, c));
    }
    let got = py.detach(|| stats::summed(&slices, kept));
    let out = counted(py, &got)?;
    let exact = got.exact;
    drop(got);
    drop(held);
    Ok((out, exact))
}

/// (values, validity bitmap or None) as parse_numbers returns them.
type Parsed<'py> = (Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>);

/// Number text as int64 (`float` false) or float32 values: value i is
/// data[offsets[i]..offsets[i+1]] (`offsets`: int32, or int64 where
/// `wide`; n + 1 of them), present where `valid` (Arrow's validity
/// bitmap, read from bit `bit_offset`; None: every value) says. Returns
/// (the values' bytes, the validity bitmap from bit 0 or None), or None
/// where a present value is not plain text (numbers::plain_int,
/// plain_float): the caller's reference path then judges the column.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn parse_numbers<'py>(
    py: Python<'py>,
    data: Bound<'py, PyAny>,
    offsets: Bound<'py, PyAny>,
    wide: bool,
    valid: Option<Bound<'py, PyAny>>,
    bit_offset: usize,
    float: bool,
) -> PyResult<Option<Parsed<'py>>> {
    let mut held = Buffers::default();
    let d: &[u8] = detach(held.slice::<u8>(&data, "data")?);
    let v: Option<(&[u8], usize)> = match &valid {
        None => None,
        Some(v) => Some((detach(held.slice::<u8>(v, "valid")?), bit_offset)),
    };
    let got = if wide {
        let o: &[i64] = detach(held.slice::<i64>(&offsets, "offsets")?);
        check_text_offsets(o, d.len(), v)?;
        parse_into(py, d, o, v, float)?
    } else {
        let o: &[i32] = detach(held.slice::<i32>(&offsets, "offsets")?);
        check_text_offsets(o, d.len(), v)?;
        parse_into(py, d, o, v, float)?
    };
    drop(held);
    Ok(got)
}

fn check_text_offsets<O: numbers::Offset>(o: &[O], data: usize, valid: Option<(&[u8], usize)>) -> PyResult<()> {
    let bad = o.is_empty()
        || o[0].at() < 0
        || o.windows(2).any(|p| p[1].at() < p[0].at())
        || o[o.len() - 1].at() as u64 > data as u64;
    if bad {
        return Err(PyValueError::new_err("parse_numbers: offsets missing, out of order or past the data"));
    }
    if let Some((b, bit_offset)) = valid {
        let bits = bit_offset.checked_add(o.len() - 1);
        if bits.is_none_or(|bits| bits.div_ceil(8) > b.len()) {
            return Err(PyValueError::new_err("parse_numbers: the validity bitmap is too short"));
        }
    }
    Ok(())
}

/// parse_numbers' work, straight into the bytes objects it returns (one
/// allocation each, filled with the GIL released).
fn parse_into<'py, O: numbers::Offset>(
    py: Python<'py>,
    d: &[u8],
    o: &[O],
    valid: Option<(&[u8], usize)>,
    float: bool,
) -> PyResult<Option<Parsed<'py>>> {
    let n = o.len() - 1;
    let mut bits = valid.map(|_| vec![0u8; n.div_ceil(8)]);
    let mut parsed = true;
    let values = PyBytes::new_with(py, n * if float { 4 } else { 8 }, |out| {
        parsed = py.detach(|| {
            let b = bits.as_deref_mut();
            if float {
                numbers::parse_column(d, o, valid, b, out, |t| numbers::plain_float(t).map(f32::to_le_bytes))
            } else {
                numbers::parse_column(d, o, valid, b, out, |t| numbers::plain_int(t).map(i64::to_le_bytes))
            }
        });
        Ok(())
    })?;
    if !parsed {
        return Ok(None);
    }
    Ok(Some((values, bits.map(|b| PyBytes::new(py, &b)))))
}

#[pymodule]
fn beam_tfrecords_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CONTRACT", CONTRACT)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(values, m)?)?;
    m.add_function(wrap_pyfunction!(packed_values, m)?)?;
    m.add_function(wrap_pyfunction!(unpacked_values, m)?)?;
    m.add_function(wrap_pyfunction!(frame, m)?)?;
    m.add_function(wrap_pyfunction!(framed_ends, m)?)?;
    m.add_function(wrap_pyfunction!(unframe, m)?)?;
    m.add_function(wrap_pyfunction!(unframe_spans, m)?)?;
    m.add_function(wrap_pyfunction!(decode_examples, m)?)?;
    m.add_function(wrap_pyfunction!(decode_sequence_examples, m)?)?;
    m.add_function(wrap_pyfunction!(length_range, m)?)?;
    m.add_function(wrap_pyfunction!(int_stats, m)?)?;
    m.add_function(wrap_pyfunction!(value_counts, m)?)?;
    m.add_function(wrap_pyfunction!(counts_summed, m)?)?;
    m.add_function(wrap_pyfunction!(parse_numbers, m)?)?;
    Ok(())
}
