//! [`DictionaryMemo`]: per-value results of a dictionary-encoded input, computed once per
//! dictionary. Used by the aggregates of this crate that hash values (`APPROX_COUNT_DISTINCT`)
//! and by dolmen-query's dictionary-aware grouping.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef};

/// One result per value of the last dictionary an operator saw, reused while the dictionary
/// stays the same: the Parquet reader hands out one dictionary for every batch of a column
/// chunk, so per-value work (group lookups, hashes) is done once per column chunk. The values
/// array is kept so its buffers cannot be reused by another dictionary meanwhile.
#[derive(Debug)]
pub struct DictionaryMemo<T> {
    last: Option<(ArrayRef, Vec<T>)>,
}

impl<T> Default for DictionaryMemo<T> {
    fn default() -> Self {
        DictionaryMemo { last: None }
    }
}

impl<T> DictionaryMemo<T> {
    /// The results for `values` if they are the remembered dictionary (same buffers).
    pub fn get(&self, values: &ArrayRef) -> Option<&[T]> {
        match &self.last {
            Some((seen, results)) if same_buffers(seen, values) => Some(results),
            _ => None,
        }
    }

    /// Takes the results for `values` out if they are the remembered dictionary's (to be
    /// updated and [`set`](Self::set) again).
    pub fn take(&mut self, values: &ArrayRef) -> Option<Vec<T>> {
        match self.last.take() {
            Some((seen, results)) if same_buffers(&seen, values) => Some(results),
            other => {
                self.last = other;
                None
            }
        }
    }

    /// Remembers `results` (one per value) for the dictionary `values`.
    pub fn set(&mut self, values: &ArrayRef, results: Vec<T>) {
        self.last = Some((Arc::clone(values), results));
    }

    /// Memory held by the results, bytes.
    pub fn result_bytes(&self) -> usize {
        self.last
            .as_ref()
            .map_or(0, |(_, r)| r.capacity() * std::mem::size_of::<T>())
    }
}

/// Whether two arrays share the same buffers (for dictionaries: the same Parquet dictionary
/// page's values).
fn same_buffers(a: &ArrayRef, b: &ArrayRef) -> bool {
    if a.len() != b.len() || a.data_type() != b.data_type() {
        return false;
    }
    let (a, b) = (a.to_data(), b.to_data());
    a.offset() == b.offset()
        && a.buffers().len() == b.buffers().len()
        && a.buffers()
            .iter()
            .zip(b.buffers())
            .all(|(x, y)| x.as_ptr() == y.as_ptr())
}
