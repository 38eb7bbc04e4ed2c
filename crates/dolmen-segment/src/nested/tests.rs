use super::*;
use crate::{ColumnKind, SegmentColumn, SegmentFileWriter, SegmentSchema};
use arrow::array::{Float64Array, Int64Array, TimestampMillisecondArray};
use serde_json::json;

fn layout_of(docs: &[Value]) -> Vec<NestedPath> {
    let mut d = PathDiscovery::default();
    for doc in docs {
        d.add_document(doc);
    }
    d.layout()
}

fn path(keys: &[&str], ty: ColumnType, integers: bool) -> NestedPath {
    NestedPath {
        path: keys.iter().map(|k| k.to_string()).collect(),
        ty,
        integers,
    }
}

fn shred(layout: &[NestedPath], docs: &[Option<&str>]) -> Vec<ArrayRef> {
    Shredder::new(layout.to_vec()).shred(&StringArray::from(docs.to_vec()))
}

fn texts(a: &ArrayRef) -> Vec<Option<String>> {
    a.as_string::<i32>()
        .iter()
        .map(|v| v.map(str::to_string))
        .collect()
}

#[test]
fn types_follow_the_values_at_each_path() {
    let docs = [
        json!({"i": 1, "f": 1.5, "n": 2, "s": "x", "b": true, "is": 3, "fs": 1.5, "big": 18446744073709551615u64}),
        json!({"i": -7, "f": 2.25, "n": 2.5, "s": "y", "b": false, "is": "z", "fs": "w", "big": 1}),
    ];
    assert_eq!(
        layout_of(&docs),
        vec![
            path(&["i"], ColumnType::Long, false),
            path(&["f"], ColumnType::Double, false),
            // Integers and doubles: a double column that only numeric reads may use.
            path(&["n"], ColumnType::Double, true),
            path(&["s"], ColumnType::String, false),
            path(&["b"], ColumnType::String, false),
            path(&["is"], ColumnType::String, false),
            // `fs` (doubles with strings) is not shredded: its text needs Java's doubles.
            path(&["big"], ColumnType::String, false),
        ]
    );
}

#[test]
fn rows_hold_what_json_value_gives() {
    let docs = [
        Some(r#"{"i":1,"n":2,"s":"x","b":true,"is":3,"big":18446744073709551615}"#),
        Some(r#"{"i":null,"n":2.5,"s":{"deep":1},"b":false,"is":"z","big":1}"#),
        None,
        Some(r#"{"other":1}"#),
    ];
    let layout = vec![
        path(&["i"], ColumnType::Long, false),
        path(&["n"], ColumnType::Double, true),
        path(&["s"], ColumnType::String, false),
        path(&["b"], ColumnType::String, false),
        path(&["is"], ColumnType::String, false),
        path(&["big"], ColumnType::String, false),
    ];
    let cols = shred(&layout, &docs);
    assert_eq!(
        cols[0].as_any().downcast_ref::<Int64Array>().unwrap(),
        &Int64Array::from(vec![Some(1), None, None, None])
    );
    assert_eq!(
        cols[1].as_any().downcast_ref::<Float64Array>().unwrap(),
        &Float64Array::from(vec![Some(2.0), Some(2.5), None, None])
    );
    let s = |v: &[Option<&str>]| v.iter().map(|x| x.map(str::to_string)).collect::<Vec<_>>();
    // An object at the path is null, as JSON_VALUE gives.
    assert_eq!(texts(&cols[2]), s(&[Some("x"), None, None, None]));
    assert_eq!(
        texts(&cols[3]),
        s(&[Some("true"), Some("false"), None, None])
    );
    assert_eq!(texts(&cols[4]), s(&[Some("3"), Some("z"), None, None]));
    assert_eq!(
        texts(&cols[5]),
        s(&[Some("18446744073709551615"), Some("1"), None, None])
    );
}

#[test]
fn nested_objects_roots_and_arrays() {
    let docs = [
        json!({"a": {"b": {"c": "deep"}, "x": 1}, "arr": [1, 2], "objs": [{"k": 1}]}),
        json!({"a": {"b": 5}}),
    ];
    assert_eq!(
        layout_of(&docs),
        vec![
            path(&["a", "b", "c"], ColumnType::String, false),
            path(&["a", "x"], ColumnType::Long, false),
            // `$.a.b` is an object in one row and 5 in the other.
            path(&["a", "b"], ColumnType::Long, false),
        ],
        "arrays are not descended"
    );
    let cols = shred(
        &layout_of(&docs),
        &[
            Some(r#"{"a":{"b":{"c":"deep"},"x":1}}"#),
            Some(r#"{"a":{"b":5}}"#),
        ],
    );
    assert_eq!(
        cols[2].as_any().downcast_ref::<Int64Array>().unwrap(),
        &Int64Array::from(vec![None, Some(5)])
    );
    // A document that is itself a primitive: the root path `$`.
    let root = layout_of(&[json!("text"), json!(3)]);
    assert_eq!(root, vec![path(&[], ColumnType::String, false)]);
    assert_eq!(root[0].json_path(), "$");
    let cols = shred(&root, &[Some(r#""text""#), Some("3"), Some("{}")]);
    let s = |v: &[Option<&str>]| v.iter().map(|x| x.map(str::to_string)).collect::<Vec<_>>();
    assert_eq!(texts(&cols[0]), s(&[Some("text"), Some("3"), None]));
    // Null documents and JSON nulls add no path.
    assert!(layout_of(&[json!(null), json!({"a": null})]).is_empty());
}

#[test]
fn paths_are_capped_per_column() {
    let mut doc = serde_json::Map::new();
    for i in 0..MAX_NESTED_PATHS + 10 {
        doc.insert(format!("k{i}"), json!(i));
    }
    let mut d = PathDiscovery::default();
    d.add_document(&Value::Object(doc));
    d.add_document(&json!({"late": 1, "k0": 2}));
    let column = d.column();
    assert_eq!(column.paths.len(), MAX_NESTED_PATHS);
    assert_eq!(column.paths[0].path, vec!["k0".to_string()]);
    assert!(
        column
            .paths
            .iter()
            .all(|p| p.path != vec!["late".to_string()])
    );
    assert!(!column.complete, "paths past the cap are left to the text");
}

/// A column lists all its paths unless one mixes doubles with text or the cap cut some.
#[test]
fn complete_unless_a_path_is_left_to_the_text() {
    let complete = |docs: &[Value]| {
        let mut d = PathDiscovery::default();
        for doc in docs {
            d.add_document(doc);
        }
        d.column().complete
    };
    assert!(complete(&[
        json!({"a": 1, "b": {"c": "x"}}),
        json!({"a": 2.5})
    ]));
    assert!(complete(&[json!(null), json!([1, {"x": 1}])]));
    assert!(!complete(&[json!({"a": 1.5}), json!({"a": "x"})]));
}

#[test]
fn json_paths_are_druid_normalized() {
    assert_eq!(
        path(&["a", "b"], ColumnType::Long, false).json_path(),
        "$.a.b"
    );
    assert_eq!(
        path(&["a.b", "c"], ColumnType::Long, false).json_path(),
        "$.['a.b'].c"
    );
    let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        nested_column_name("nested", &keys(&["c", "d"])),
        "__dolmen_nested:nested/c/d"
    );
    assert_eq!(nested_column_name("nested", &[]), "__dolmen_nested:nested");
    // Other characters: the hex of `["a.b",["c/d"]]`, no `.` in the name.
    let odd = nested_column_name("a.b", &keys(&["c/d"]));
    assert!(odd.starts_with("__dolmen_nested:#5b22612e62"), "{odd}");
    assert!(!odd.contains('.'));
    assert_ne!(odd, nested_column_name("a.b/c", &keys(&["d"])));
    assert!(is_nested_column(&odd));
    assert!(!is_nested_column("x"));
}

/// A JSON column and a string column through the segment writer: the file gains the
/// sub-columns after every other column, its metadata and the payload get the layout.
#[test]
fn writer_shreds_json_columns() {
    let mut nested = SegmentColumn::new("nested", ColumnType::Json, ColumnKind::Dimension);
    let schema = SegmentSchema {
        columns: vec![
            SegmentColumn::new("page", ColumnType::String, ColumnKind::Dimension),
            nested.clone(),
        ],
    };
    let arrow_schema = schema.arrow_schema();
    let batch = RecordBatch::try_new(
        Arc::clone(&arrow_schema),
        vec![
            Arc::new(TimestampMillisecondArray::from(vec![1, 2, 3])),
            Arc::new(StringArray::from(vec!["p", "q", "r"])),
            Arc::new(StringArray::from(vec![
                Some(r#"{"a":"v1","b":1,"c":{"d":1.5}}"#),
                None,
                Some(r#"{"a":"v2","b":2}"#),
            ])),
        ],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s/index.parquet");
    let mut w = SegmentFileWriter::create(
        &file,
        Arc::clone(&arrow_schema),
        crate::file::compression_for(None),
    )
    .unwrap();
    w.write(&batch).unwrap();
    let (size, layout) = w.finish_with_layout().unwrap();
    assert_eq!(size, std::fs::metadata(&file).unwrap().len());
    let expected = vec![
        path(&["a"], ColumnType::String, false),
        path(&["b"], ColumnType::Long, false),
        path(&["c", "d"], ColumnType::Double, false),
    ];
    assert_eq!(
        layout.get("nested"),
        Some(&NestedColumn {
            paths: expected.clone(),
            complete: true
        })
    );
    nested.nested = expected.clone();
    nested.nested_complete = true;
    assert_eq!(
        schema.clone().with_nested_layout(&layout).columns[1],
        nested
    );
    let payload = serde_json::to_value(&nested).unwrap();
    assert_eq!(
        payload["nestedPaths"],
        json!([{"path": ["a"], "type": "string"}, {"path": ["b"], "type": "long"},
               {"path": ["c", "d"], "type": "double"}])
    );
    assert_eq!(payload["nestedComplete"], json!(true));
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&file).unwrap()).unwrap();
    assert_eq!(
        layout_from_metadata(builder.metadata().file_metadata().key_value_metadata()),
        layout
    );
    let read_schema = Arc::clone(builder.schema());
    let names: Vec<&str> = read_schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(
        names,
        [
            "__time",
            "page",
            "nested",
            "__dolmen_nested:nested/a",
            "__dolmen_nested:nested/b",
            "__dolmen_nested:nested/c/d"
        ]
    );
    assert_eq!(
        read_schema
            .field(5)
            .metadata()
            .get(NESTED_PATH_METADATA_KEY)
            .map(String::as_str),
        Some("$.c.d")
    );
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(Result::unwrap).collect();
    let b = &batches[0];
    assert_eq!(b.num_rows(), 3);
    assert_eq!(b.column(2), batch.column(2), "the JSON text is kept");
    assert_eq!(
        texts(b.column(3)),
        vec![Some("v1".to_string()), None, Some("v2".to_string())]
    );
    assert_eq!(
        b.column(4).as_any().downcast_ref::<Int64Array>().unwrap(),
        &Int64Array::from(vec![Some(1), None, Some(2)])
    );
    assert!(!file.with_extension("shred.tmp").exists());

    // A file without JSON columns is written as before.
    let plain = SegmentSchema {
        columns: vec![SegmentColumn::new(
            "page",
            ColumnType::String,
            ColumnKind::Dimension,
        )],
    };
    let plain_schema = plain.arrow_schema();
    let file2 = dir.path().join("t/index.parquet");
    let mut w = SegmentFileWriter::create(
        &file2,
        Arc::clone(&plain_schema),
        crate::file::compression_for(None),
    )
    .unwrap();
    w.write(
        &RecordBatch::try_new(
            plain_schema,
            vec![
                Arc::new(TimestampMillisecondArray::from(vec![1])),
                Arc::new(StringArray::from(vec!["p"])),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    let (_, layout) = w.finish_with_layout().unwrap();
    assert!(layout.is_empty());
}

/// Two JSON columns, the first named after the second in name order: the sub-columns follow
/// the file's column order.
#[test]
fn several_json_columns() {
    let schema = SegmentSchema {
        columns: vec![
            SegmentColumn::new("zeta", ColumnType::Json, ColumnKind::Dimension),
            SegmentColumn::new("alpha", ColumnType::Json, ColumnKind::Dimension),
        ],
    };
    let arrow_schema = schema.arrow_schema();
    let batch = RecordBatch::try_new(
        Arc::clone(&arrow_schema),
        vec![
            Arc::new(TimestampMillisecondArray::from(vec![1])),
            Arc::new(StringArray::from(vec![r#"{"z":1.5}"#])),
            Arc::new(StringArray::from(vec![r#"{"a":"x"}"#])),
        ],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("index.parquet");
    let mut w =
        SegmentFileWriter::create(&file, arrow_schema, crate::file::compression_for(None)).unwrap();
    w.write(&batch).unwrap();
    let (_, layout) = w.finish_with_layout().unwrap();
    assert_eq!(layout.len(), 2);
    let b = ParquetRecordBatchReaderBuilder::try_new(File::open(&file).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(b.schema().field(3).name(), "__dolmen_nested:zeta/z");
    assert_eq!(
        b.column(3).as_any().downcast_ref::<Float64Array>().unwrap(),
        &Float64Array::from(vec![1.5])
    );
    assert_eq!(b.schema().field(4).name(), "__dolmen_nested:alpha/a");
}
