//! Whole messages per row from columns, measured first and then written
//! once into one buffer:
//!
//!   Example         = 0x0A len Features               always written
//!   SequenceExample = 0x0A len Features (context)     omitted when empty
//!                     0x12 len FeatureLists           omitted when empty
//!   Features / FeatureLists = (0x0A len MapEntry)*    one per present column
//!
//! Columns come sorted by key (protobuf's order of map keys); the caller
//! sorts them.

use crate::columns::Column;
use crate::varint::{self, Writer};

/// One field of the message: its tag and the map entries it holds.
pub struct Group<'a> {
    pub tag: u8,
    pub columns: Vec<Column<'a>>,
}

/// The measured layout of a batch of messages.
pub struct Layout {
    /// n + 1 offsets of each row's message in the output.
    pub offsets: Vec<i64>,
    /// Value length per (row, column), row-major over every group's columns.
    values: Vec<usize>,
    /// Body length per (row, group).
    bodies: Vec<usize>,
    columns: usize,
}

/// Measures every row: `omit_empty` leaves out a group whose body is
/// empty (SequenceExample), otherwise it is written empty (Example).
pub fn measure(n: usize, groups: &[Group], omit_empty: bool) -> Layout {
    let columns: usize = groups.iter().map(|g| g.columns.len()).sum();
    let mut values = vec![0usize; n * columns];
    let mut bodies = vec![0usize; n * groups.len()];
    // Row by row: every column is read in order, and both tables are
    // written in order.
    for row in 0..n {
        let mut c = row * columns;
        for (g, group) in groups.iter().enumerate() {
            let mut body = 0;
            for column in &group.columns {
                if column.present(row) {
                    let v = column.value_len(row);
                    values[c] = v;
                    body += column.entry_len(v);
                }
                c += 1;
            }
            bodies[row * groups.len() + g] = body;
        }
    }
    let mut offsets = Vec::with_capacity(n + 1);
    let mut total = 0usize;
    offsets.push(0i64);
    for row in 0..n {
        for g in 0..groups.len() {
            let body = bodies[row * groups.len() + g];
            if body > 0 || !omit_empty {
                total += varint::field(body);
            }
        }
        offsets.push(total as i64);
    }
    Layout { offsets, values, bodies, columns }
}

impl Layout {
    pub fn total(&self) -> usize {
        *self.offsets.last().unwrap() as usize
    }

    /// Writes every row into `out` (`total()` bytes).
    pub fn write(&self, groups: &[Group], omit_empty: bool, out: &mut [u8]) {
        let n = self.offsets.len() - 1;
        let mut w = Writer::new(out);
        for row in 0..n {
            let mut c = 0;
            for (g, group) in groups.iter().enumerate() {
                let body = self.bodies[row * groups.len() + g];
                if body == 0 && omit_empty {
                    c += group.columns.len();
                    continue;
                }
                w.header(group.tag, body);
                for column in &group.columns {
                    if column.present(row) {
                        column.write_entry(row, self.values[row * self.columns + c], &mut w);
                    }
                    c += 1;
                }
            }
            debug_assert_eq!(w.pos() as i64, self.offsets[row + 1]);
        }
        assert_eq!(w.pos(), out_len(&self.offsets));
    }
}

fn out_len(offsets: &[i64]) -> usize {
    *offsets.last().unwrap() as usize
}

/// The value of one column per row, with no key (absent rows: no bytes).
pub fn values(n: usize, column: &Column) -> (Vec<i64>, usize) {
    let mut offsets = Vec::with_capacity(n + 1);
    let mut total = 0usize;
    offsets.push(0i64);
    for row in 0..n {
        if column.present(row) {
            total += column.value_len(row);
        }
        offsets.push(total as i64);
    }
    (offsets, total)
}

pub fn write_values(n: usize, column: &Column, out: &mut [u8]) {
    let mut w = Writer::new(out);
    for row in 0..n {
        if column.present(row) {
            column.write_value(row, &mut w);
        }
    }
    assert_eq!(w.pos(), out.len());
}
