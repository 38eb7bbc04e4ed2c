//! Helpers shared by the unit tests of this crate.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;

/// The first row of `batches` as text, column by column (`null` for nulls).
pub(crate) fn first_row_text(batches: &[RecordBatch]) -> Vec<String> {
    batches[0]
        .columns()
        .iter()
        .map(|c| {
            let c = arrow::compute::cast(c, &DataType::Utf8).unwrap();
            let c = c.as_string::<i32>();
            if c.is_valid(0) {
                c.value(0).to_string()
            } else {
                "null".to_string()
            }
        })
        .collect()
}
