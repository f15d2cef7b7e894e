//! Whole messages per row from columns, written once into one buffer:
//!
//!   Example         = 0x0A len Features               always written
//!   SequenceExample = 0x0A len Features (context)     omitted when empty
//!                     0x12 len FeatureLists           omitted when empty
//!   Features / FeatureLists = (0x0A len MapEntry)*    one per present column
//!
//! Columns come sorted by key (protobuf's order of map keys); the caller
//! sorts them.
//!
//! Rows go in blocks (1,024 rows, fewer for schemas of over 64
//! columns, so that a block's lengths stay within 512 KiB): each block is
//! measured column by column
//! (every column's buffers read in order), then written row by row while
//! that block of every column is still in cache. Row by row over whole
//! columns would read 19 columns' buffers at once, more streams than a
//! core prefetches: it ran at a third of the speed.

use crate::columns::Column;
use crate::varint::{self, Writer};

const BLOCK: usize = 1024;
/// Lengths per block at most (rows x columns).
const BLOCK_CELLS: usize = 64 * 1024;

/// One field of the message: its tag and the map entries it holds.
pub struct Group<'a> {
    pub tag: u8,
    pub columns: Vec<Column<'a>>,
}

/// Value lengths per (column, row) and body lengths per (group, row) of
/// one block of rows.
struct Block {
    rows: usize,
    values: Vec<usize>,
    bodies: Vec<usize>,
}

impl Block {
    fn new(groups: &[Group]) -> Self {
        let columns: usize = groups.iter().map(|g| g.columns.len()).sum();
        let rows = (BLOCK_CELLS / columns.max(1)).clamp(1, BLOCK);
        Block { rows, values: vec![0; columns * rows], bodies: vec![0; groups.len() * rows] }
    }

    /// Measures rows start..start + rows, column by column.
    fn measure(&mut self, groups: &[Group], start: usize, rows: usize) {
        self.bodies.iter_mut().for_each(|b| *b = 0);
        let mut c = 0;
        for (g, group) in groups.iter().enumerate() {
            for column in &group.columns {
                column.measure(
                    start,
                    &mut self.values[c * self.rows..c * self.rows + rows],
                    &mut self.bodies[g * self.rows..g * self.rows + rows],
                );
                c += 1;
            }
        }
    }

    /// Bytes of row r's message.
    fn size(&self, groups: usize, r: usize, omit_empty: bool) -> usize {
        (0..groups)
            .map(|g| self.bodies[g * self.rows + r])
            .filter(|&body| body > 0 || !omit_empty)
            .map(varint::field)
            .sum()
    }
}

/// The n + 1 offsets of the messages of rows 0..n. `omit_empty` leaves out
/// a group whose body is empty (SequenceExample), otherwise it is written
/// empty (Example).
pub fn measure(n: usize, groups: &[Group], omit_empty: bool) -> Vec<i64> {
    let mut block = Block::new(groups);
    let mut offsets = Vec::with_capacity(n + 1);
    let mut total = 0usize;
    offsets.push(0i64);
    for start in (0..n).step_by(block.rows) {
        let rows = block.rows.min(n - start);
        block.measure(groups, start, rows);
        for r in 0..rows {
            total += block.size(groups.len(), r, omit_empty);
            offsets.push(total as i64);
        }
    }
    offsets
}

/// Writes the messages `measure` measured into `out` (its last offset
/// long). Each block is measured again, column by column, and written row
/// by row while it is in cache: cheaper than keeping every row's lengths.
pub fn write(groups: &[Group], omit_empty: bool, offsets: &[i64], out: &mut [u8]) {
    let n = offsets.len() - 1;
    let mut block = Block::new(groups);
    let mut w = Writer::new(out);
    for start in (0..n).step_by(block.rows) {
        let rows = block.rows.min(n - start);
        block.measure(groups, start, rows);
        for r in 0..rows {
            let row = start + r;
            let mut c = 0;
            for (g, group) in groups.iter().enumerate() {
                let body = block.bodies[g * block.rows + r];
                if body == 0 && omit_empty {
                    c += group.columns.len();
                    continue;
                }
                w.header(group.tag, body);
                for column in &group.columns {
                    if column.present(row) {
                        column.write_entry(row, block.values[c * block.rows + r], &mut w);
                    }
                    c += 1;
                }
            }
            assert_eq!(w.pos() as i64, offsets[row + 1]);
        }
    }
}

/// One column's value per row with no key (absent rows: no bytes):
/// (bytes back to back, n + 1 offsets).
pub fn values(n: usize, column: &Column) -> (Vec<u8>, Vec<i64>) {
    let mut offsets = Vec::with_capacity(n + 1);
    let mut total = 0usize;
    offsets.push(0i64);
    for row in 0..n {
        if column.present(row) {
            total += column.value_len(row);
        }
        offsets.push(total as i64);
    }
    let mut out = vec![0u8; total];
    let mut w = Writer::new(&mut out);
    for row in 0..n {
        if column.present(row) {
            column.write_value(row, &mut w);
        }
    }
    assert_eq!(w.pos(), total);
    (out, offsets)
}
