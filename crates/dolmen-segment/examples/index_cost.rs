//! What building value indexes costs the segment writer: writes the same batches with and
//! without a [`ValueIndexBuilder`], and times the builder's parts alone.
//!
//! `cargo run --release -p dolmen-segment --example index_cost [rows_per_segment] [segments]
//! [arrays]`: with `arrays` 1, the rows also hold a `tags` list column (two to four of 200
//! values a row: a multi-value string or `ARRAY<STRING>`), which gets an element index.
//! `DOLMEN_SEGMENT_VALUE_INDEXES=false` times the writer without indexes.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::Array;
use arrow::array::{
    ArrayRef, ListBuilder, RecordBatch, StringArray, StringBuilder, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use dolmen_segment::value_index::ValueIndexBuilder;

fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn batch(rows: usize, seed: u64, arrays: bool) -> RecordBatch {
    let mut s = seed | 1;
    let mut col = |prefix: &str, n: u64, nulls: u64| -> ArrayRef {
        Arc::new(StringArray::from_iter((0..rows).map(|_| {
            let r = rng(&mut s);
            (r % 100 >= nulls).then(|| format!("{prefix}-{}", (r >> 8) % n))
        })))
    };
    let channel = col("channel", 50, 0);
    let page = col("page", 200_000, 0);
    let user = col("user", 50_000, 0);
    let country = col("country", 200, 70);
    let time: ArrayRef = Arc::new(TimestampMillisecondArray::from_iter_values(
        (0..rows as i64).map(|i| i * 2),
    ));
    let mut fields = vec![
        Field::new(
            "__time",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("channel", DataType::Utf8, true),
        Field::new("page", DataType::Utf8, true),
        Field::new("user", DataType::Utf8, true),
        Field::new("countryName", DataType::Utf8, true),
    ];
    let mut columns = vec![time, channel, page, user, country];
    if arrays {
        let mut tags = ListBuilder::new(StringBuilder::new());
        for _ in 0..rows {
            let r = rng(&mut s);
            for k in 0..2 + r % 3 {
                tags.values()
                    .append_value(format!("tag-{}", (r >> 8).wrapping_add(k * 31) % 200));
            }
            tags.append(true);
        }
        let tags = tags.finish();
        fields.push(Field::new("tags", tags.data_type().clone(), true));
        columns.push(Arc::new(tags));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let rows = args.first().copied().unwrap_or(33_000);
    let segments = args.get(1).copied().unwrap_or(30);
    let arrays = args.get(2).copied().unwrap_or(0) == 1;
    let batches: Vec<RecordBatch> = (0..segments)
        .map(|i| batch(rows, i as u64 + 7, arrays))
        .collect();
    let dir = tempfile::tempdir().unwrap();

    let t = Instant::now();
    for (i, b) in batches.iter().enumerate() {
        let mut w = dolmen_segment::SegmentFileWriter::create(
            &dir.path().join(format!("s{i}/index.parquet")),
            b.schema(),
            dolmen_segment::file::compression_for(None),
        )
        .unwrap();
        for chunk in 0..b.num_rows().div_ceil(8192) {
            w.write(&b.slice(chunk * 8192, 8192.min(b.num_rows() - chunk * 8192)))
                .unwrap();
        }
        w.finish().unwrap();
    }
    let whole = t.elapsed();

    let (mut push, mut finish, mut write) = (0.0, 0.0, 0.0);
    for (i, b) in batches.iter().enumerate() {
        let t = Instant::now();
        let mut ix = ValueIndexBuilder::new(&b.schema());
        for chunk in 0..b.num_rows().div_ceil(8192) {
            ix.push(&b.slice(chunk * 8192, 8192.min(b.num_rows() - chunk * 8192)))
                .unwrap();
        }
        push += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let rows = b.num_rows();
        let indexes = ix.finish();
        finish += t.elapsed().as_secs_f64();
        let t = Instant::now();
        dolmen_segment::value_index::write_sidecar(
            &dir.path().join(format!("x{i}.arrow")),
            rows,
            &indexes,
        )
        .unwrap();
        write += t.elapsed().as_secs_f64();
    }
    println!(
        "indexes {}, arrays {arrays}: writer total {:.3} s; builder alone: push {push:.3} s, finish (sort) {finish:.3} s, sidecar write {write:.3} s",
        dolmen_segment::value_index::enabled(),
        whole.as_secs_f64()
    );
}
