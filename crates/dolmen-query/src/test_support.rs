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

/// Every row of `batches` as text, column by column (`null` for nulls).
pub(crate) fn rows_text(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in batches {
        let columns: Vec<_> = b
            .columns()
            .iter()
            .map(|c| arrow::compute::cast(c, &DataType::Utf8).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            out.push(
                columns
                    .iter()
                    .map(|c| {
                        let c = c.as_string::<i32>();
                        if c.is_valid(i) {
                            c.value(i).to_string()
                        } else {
                            "null".to_string()
                        }
                    })
                    .collect(),
            );
        }
    }
    out
}
