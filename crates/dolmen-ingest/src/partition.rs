//! Secondary partitioning: splits each time chunk's segment into hash buckets (`hashed`) or
//! dimension-value ranges (`single_dim`, `range`), as Druid's `partitionsSpec` asks
//! (`docs/ingestion/native-batch.md#partitionsspec`).
//!
//! Both build paths (columnar and row-by-row) first write one sorted segment file per time chunk
//! (secondary partitioning turns off the `maxRowsPerSegment` cut). This step then streams each
//! chunk file once more and writes every row to the file of its partition. A partition's rows
//! are a subsequence of the chunk's sorted rows, so each output file stays sorted by `__time`
//! and dimensions. Chunks are processed in parallel.
//!
//! * **hashed**: a row's bucket is `abs(murmur3_32(key)) % numBuckets`, where `key` is the JSON
//!   serialization of the row's partition-dimension values, each as an array of strings
//!   (`[["a"],["b"]]`, `[]` for null), modelled on the group key Druid's `HashPartitioner`
//!   hashes with Guava's `murmur3_32`. Dolmen's own broker is the only reader of the buckets,
//!   so byte-for-byte agreement with Druid's key is not relied on. With no
//!   `partitionDimensions` the key is `[time, [all dimension values]]`. `numBuckets` is `numShards`, or `ceil(rows / targetRowsPerSegment)` per chunk.
//!   Empty buckets produce no segment.
//! * **single_dim / range**: the chunk's distinct partition-key tuples are counted, sorted
//!   (null first, then by UTF-8 bytes) and cut into consecutive ranges: a range closes once it
//!   holds `targetRowsPerSegment` rows, or before it would exceed `maxRowsPerSegment`; one
//!   tuple never spans two ranges (Druid's rule), so a tuple with more rows than the maximum
//!   gets a range of its own. The first range starts at null (unbounded) and the last ends at
//!   null.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;

use arrow::array::{Array, ArrayRef, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use dolmen_segment::{SegmentFileWriter, ShardSpec};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;

use crate::IngestError;
use crate::index::BuiltSegment;
use crate::spec::PartitionsSpec;

/// A built segment and the shard spec it is published with (the metadata store fills in the
/// final partition number and core-partition count).
#[derive(Debug, Clone)]
pub struct PartitionedSegment {
    /// The segment file.
    pub built: BuiltSegment,
    /// Shard spec template.
    pub shard: Option<ShardSpec>,
}

/// Splits every chunk segment of `built` by `spec` (a secondary partitioning); files go to
/// `work_dir/partitions`. Returns the segments in (chunk, partition) order.
///
/// # Errors
/// [`IngestError::Runtime`] on I/O or Parquet errors; [`IngestError::Canceled`] when
/// `canceled()` turns true.
pub fn partition(
    built: Vec<BuiltSegment>,
    spec: &PartitionsSpec,
    compression: Compression,
    work_dir: &Path,
    threads: usize,
    canceled: &(dyn Fn() -> bool + Sync),
) -> Result<Vec<PartitionedSegment>, IngestError> {
    let dir = work_dir.join("partitions");
    std::fs::create_dir_all(&dir)
        .map_err(|e| IngestError::Runtime(format!("cannot create [{}]: {e}", dir.display())))?;
    let queue = Mutex::new(built.into_iter().enumerate().collect::<Vec<_>>());
    let results: Mutex<Vec<(usize, Vec<PartitionedSegment>)>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<IngestError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let Some((i, seg)) = queue.lock().expect("queue").pop() else {
                        return;
                    };
                    if failure.lock().expect("failure").is_some() {
                        return;
                    }
                    if canceled() {
                        *failure.lock().expect("failure") = Some(IngestError::Canceled);
                        return;
                    }
                    let out_dir = dir.join(format!("chunk-{i:05}"));
                    match split_chunk(&seg, spec, compression, &out_dir) {
                        Ok(parts) => results.lock().expect("results").push((i, parts)),
                        Err(e) => {
                            *failure.lock().expect("failure") = Some(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().expect("failure") {
        return Err(e);
    }
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);
    Ok(results.into_iter().flat_map(|(_, p)| p).collect())
}

/// How one chunk's rows are assigned to partitions.
enum Assign {
    Hash {
        buckets: u32,
        dims: Vec<usize>,
        all: bool,
    },
    Range {
        dims: Vec<usize>,
        /// Exclusive upper bounds of all ranges but the last, ascending.
        bounds: Vec<Vec<Option<String>>>,
    },
}

fn split_chunk(
    seg: &BuiltSegment,
    spec: &PartitionsSpec,
    compression: Compression,
    out_dir: &Path,
) -> Result<Vec<PartitionedSegment>, IngestError> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| IngestError::Runtime(format!("cannot create [{}]: {e}", out_dir.display())))?;
    let schema = seg.schema.arrow_schema();
    // Column index in the file (column 0 is __time) of a dimension name.
    let col_of = |name: &str| -> Option<usize> {
        schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .filter(|i| *i > 0)
    };
    let resolve = |names: &[String]| -> Vec<usize> {
        names.iter().filter_map(|n| col_of(n)).collect::<Vec<_>>()
    };
    let dim_cols: Vec<usize> = seg
        .schema
        .dimensions()
        .filter_map(|c| col_of(&c.name))
        .collect();
    let rows = seg.num_rows;
    let (assign, template) = match spec {
        PartitionsSpec::Hashed {
            num_shards,
            target_rows_per_segment,
            max_rows_per_segment,
            partition_dimensions,
            ..
        } => {
            let buckets = match num_shards {
                Some(n) => (*n).max(1),
                None => {
                    let target = target_rows_per_segment
                        .or(*max_rows_per_segment)
                        .unwrap_or(5_000_000)
                        .max(1);
                    u32::try_from(rows.div_ceil(target).max(1)).unwrap_or(u32::MAX)
                }
            };
            let all = partition_dimensions.is_empty();
            let dims = if all {
                dim_cols.clone()
            } else {
                resolve(partition_dimensions)
            };
            (
                Assign::Hash { buckets, dims, all },
                Template::Hash {
                    buckets,
                    dims: partition_dimensions.clone(),
                },
            )
        }
        PartitionsSpec::SingleDim {
            partition_dimension,
            target_rows_per_segment,
            max_rows_per_segment,
            ..
        } => {
            let names = vec![partition_dimension.clone()];
            let dims = resolve(&names);
            let bounds = range_bounds(seg, &dims, *target_rows_per_segment, *max_rows_per_segment)?;
            (
                Assign::Range {
                    dims,
                    bounds: bounds.clone(),
                },
                Template::Single {
                    dim: partition_dimension.clone(),
                    bounds,
                },
            )
        }
        PartitionsSpec::Range {
            partition_dimensions,
            target_rows_per_segment,
            max_rows_per_segment,
            ..
        } => {
            let dims = resolve(partition_dimensions);
            let bounds = range_bounds(seg, &dims, *target_rows_per_segment, *max_rows_per_segment)?;
            (
                Assign::Range {
                    dims,
                    bounds: bounds.clone(),
                },
                Template::Range {
                    dims: partition_dimensions.clone(),
                    bounds,
                },
            )
        }
        PartitionsSpec::Dynamic { .. } => {
            return Ok(vec![PartitionedSegment {
                built: seg.clone(),
                shard: None,
            }]);
        }
    };
    let parts = match &assign {
        Assign::Hash { buckets, .. } => *buckets as usize,
        Assign::Range { bounds, .. } => bounds.len() + 1,
    };
    let mut writers: Vec<Option<(PathBuf, SegmentFileWriter)>> = (0..parts).map(|_| None).collect();
    for batch in read_file(&seg.path)? {
        let batch = batch?;
        let ids = assign_rows(&assign, &batch)?;
        let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); parts];
        for (row, p) in ids.iter().enumerate() {
            by_part[*p as usize].push(row as u32);
        }
        for (p, rows) in by_part.into_iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            let taken = take_record_batch(&batch, &UInt32Array::from(rows))
                .map_err(|e| IngestError::Runtime(format!("cannot split segment rows: {e}")))?;
            if writers[p].is_none() {
                let path = out_dir.join(format!("part-{p:05}.parquet"));
                let w = SegmentFileWriter::create(&path, Arc::clone(&schema), compression)
                    .map_err(|e| IngestError::Runtime(e.to_string()))?;
                writers[p] = Some((path, w));
            }
            let (_, w) = writers[p].as_mut().expect("created above");
            w.write(&taken)
                .map_err(|e| IngestError::Runtime(e.to_string()))?;
        }
    }
    let mut out = Vec::new();
    for (p, w) in writers.into_iter().enumerate() {
        let Some((path, w)) = w else { continue };
        let num_rows = w.rows();
        let (size, layout) = w
            .finish_with_layout()
            .map_err(|e| IngestError::Runtime(e.to_string()))?;
        out.push(PartitionedSegment {
            built: BuiltSegment {
                interval: seg.interval,
                path,
                num_rows,
                size,
                schema: seg.schema.clone().with_nested_layout(&layout),
            },
            shard: Some(template.shard(p)),
        });
    }
    let _ = std::fs::remove_file(&seg.path);
    let _ = std::fs::remove_file(dolmen_segment::value_index::sidecar_path(&seg.path));
    Ok(out)
}

/// What the shard spec of partition `p` of a chunk looks like.
enum Template {
    Hash {
        buckets: u32,
        dims: Vec<String>,
    },
    Single {
        dim: String,
        bounds: Vec<Vec<Option<String>>>,
    },
    Range {
        dims: Vec<String>,
        bounds: Vec<Vec<Option<String>>>,
    },
}

impl Template {
    fn shard(&self, p: usize) -> ShardSpec {
        let p32 = u32::try_from(p).unwrap_or(u32::MAX);
        let range = |bounds: &[Vec<Option<String>>]| {
            let start = if p == 0 {
                None
            } else {
                Some(bounds[p - 1].clone())
            };
            let end = bounds.get(p).cloned();
            (start, end)
        };
        match self {
            Template::Hash { buckets, dims } => ShardSpec::Hashed {
                partition_num: p32,
                partitions: 0,
                bucket_id: p32,
                num_buckets: *buckets,
                partition_dimensions: dims.clone(),
                partition_function: "murmur3_32_abs".into(),
            },
            Template::Single { dim, bounds } => {
                let (start, end) = range(bounds);
                ShardSpec::Single {
                    dimension: dim.clone(),
                    start: start.and_then(|mut v| v.pop().flatten()),
                    end: end.and_then(|mut v| v.pop().flatten()),
                    partition_num: p32,
                    num_core_partitions: 0,
                }
            }
            Template::Range { dims, bounds } => {
                let (start, end) = range(bounds);
                ShardSpec::Range {
                    dimensions: dims.clone(),
                    start,
                    end,
                    partition_num: p32,
                    num_core_partitions: 0,
                }
            }
        }
    }
}

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, IngestError>>>;

fn read_file(path: &Path) -> Result<Batches, IngestError> {
    let err = |e: &dyn std::fmt::Display| {
        IngestError::Runtime(format!("cannot read segment [{}]: {e}", path.display()))
    };
    let file = std::fs::File::open(path).map_err(|e| err(&e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(&e))?;
    // The chunk's shredded JSON sub-columns are left out: each partition's file is shredded
    // anew when it is finished.
    let keep = builder
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !dolmen_segment::nested::is_nested_column(f.name()))
        .map(|(i, _)| i)
        .collect::<Vec<_>>();
    let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), keep);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(16 * 1024)
        .build()
        .map_err(|e| err(&e))?;
    let p = path.to_path_buf();
    Ok(Box::new(reader.map(move |b| {
        b.map_err(|e| IngestError::Runtime(format!("cannot read segment [{}]: {e}", p.display())))
    })))
}

/// The text of each row's value in column `c` (null stays null).
fn texts(col: &ArrayRef) -> Result<Vec<Option<String>>, IngestError> {
    let opts = FormatOptions::default();
    let f = ArrayFormatter::try_new(col.as_ref(), &opts)
        .map_err(|e| IngestError::Runtime(format!("cannot format partition values: {e}")))?;
    Ok((0..col.len())
        .map(|i| (!col.is_null(i)).then(|| f.value(i).to_string()))
        .collect())
}

fn assign_rows(assign: &Assign, batch: &RecordBatch) -> Result<Vec<u32>, IngestError> {
    let n = batch.num_rows();
    match assign {
        Assign::Hash { buckets, dims, all } => {
            let cols: Vec<Vec<Option<String>>> = dims
                .iter()
                .map(|i| texts(batch.column(*i)))
                .collect::<Result<_, _>>()?;
            let times = if *all {
                Some(texts(
                    &arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Int64)
                        .map_err(|e| IngestError::Runtime(e.to_string()))?,
                )?)
            } else {
                None
            };
            Ok((0..n)
                .map(|row| {
                    let values: Vec<serde_json::Value> = cols
                        .iter()
                        .map(|c| match &c[row] {
                            Some(v) => serde_json::json!([v]),
                            None => serde_json::json!([]),
                        })
                        .collect();
                    let key = match &times {
                        Some(t) => serde_json::json!([
                            t[row].as_deref().unwrap_or("0").parse::<i64>().unwrap_or(0),
                            values
                        ]),
                        None => serde_json::Value::Array(values),
                    };
                    hash_bucket(key.to_string().as_bytes(), *buckets)
                })
                .collect())
        }
        Assign::Range { dims, bounds } => {
            let cols: Vec<Vec<Option<String>>> = dims
                .iter()
                .map(|i| texts(batch.column(*i)))
                .collect::<Result<_, _>>()?;
            let mut memo: HashMap<Vec<Option<String>>, u32> = HashMap::new();
            Ok((0..n)
                .map(|row| {
                    let key: Vec<Option<String>> = cols.iter().map(|c| c[row].clone()).collect();
                    if let Some(p) = memo.get(&key) {
                        return *p;
                    }
                    // Partition = number of bounds <= key.
                    let p = bounds.partition_point(|b| b <= &key) as u32;
                    memo.insert(key, p);
                    p
                })
                .collect())
        }
    }
}

/// `abs(murmur3_32(bytes)) % buckets`, as Druid's `murmur3_32_abs` partition function.
fn hash_bucket(bytes: &[u8], buckets: u32) -> u32 {
    let h = murmur3::murmur3_32(&mut std::io::Cursor::new(bytes), 0).unwrap_or(0) as i32;
    (h.unsigned_abs()) % buckets.max(1)
}

/// Range bounds for one chunk: counts distinct key tuples, sorts them and cuts ranges (see the
/// module docs).
fn range_bounds(
    seg: &BuiltSegment,
    dims: &[usize],
    target: Option<u64>,
    max: Option<u64>,
) -> Result<Vec<Vec<Option<String>>>, IngestError> {
    let mut counts: HashMap<Vec<Option<String>>, u64> = HashMap::new();
    for batch in read_file(&seg.path)? {
        let batch = batch?;
        let cols: Vec<Vec<Option<String>>> = dims
            .iter()
            .map(|i| texts(batch.column(*i)))
            .collect::<Result<_, _>>()?;
        for row in 0..batch.num_rows() {
            let key: Vec<Option<String>> = cols.iter().map(|c| c[row].clone()).collect();
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    let mut keys: Vec<(Vec<Option<String>>, u64)> = counts.into_iter().collect();
    // Option orders None first, then strings by bytes.
    keys.sort();
    let mut bounds = Vec::new();
    let mut in_range = 0u64;
    for (i, (key, count)) in keys.iter().enumerate() {
        if let Some(m) = max
            && in_range > 0
            && in_range + count > m
        {
            bounds.push(key.clone());
            in_range = 0;
        }
        in_range += count;
        if let Some(t) = target
            && in_range >= t
            && i + 1 < keys.len()
        {
            bounds.push(keys[i + 1].0.clone());
            in_range = 0;
        }
    }
    Ok(bounds)
}
