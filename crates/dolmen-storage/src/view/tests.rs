use std::sync::atomic::{AtomicBool, Ordering};

use dolmen_metadata::{NewSegment, PublishMode, PublishRequest, SqlMetadataStore};
use dolmen_segment::LoadSpec;

use super::*;

const DAY: &str = "2024-01-01/2024-01-02";

fn hydrant(sequence: u64, num_rows: u64) -> Hydrant {
    Hydrant {
        interval: Interval::parse(DAY).unwrap(),
        path: PathBuf::from(format!("/tmp/hydrant-{sequence}.parquet")),
        num_rows,
        size: 100,
        columns: Vec::new(),
        sequence,
    }
}

async fn memory_view() -> (Arc<SqlMetadataStore>, Arc<SegmentView>) {
    let store = Arc::new(SqlMetadataStore::connect("sqlite::memory:").await.unwrap());
    let view = Arc::new(SegmentView::new(
        Arc::clone(&store) as Arc<dyn MetadataStore>
    ));
    (store, view)
}

fn publish_request(data_source: &str, num_rows: u64) -> PublishRequest {
    PublishRequest {
        data_source: data_source.into(),
        segments: vec![NewSegment {
            interval: Interval::parse(DAY).unwrap(),
            load_spec: LoadSpec::Local {
                path: format!("/deep/{data_source}/{num_rows}.parquet"),
            },
            dimensions: vec![],
            metrics: vec![],
            columns: vec![],
            size: 100,
            num_rows,
            shard: None,
        }],
        mode: PublishMode::Append {
            version_if_new: "2024-01-01T00:00:00.000Z".into(),
        },
        drop_existing: vec![],
        commit: None,
        last_compaction_state: None,
    }
}

/// (sequences of the visible hydrants, rows of the visible segments) of a datasource.
fn seen(view: &SegmentView, data_source: &str) -> Option<(Vec<u64>, u64)> {
    view.snapshot(data_source).map(|s| {
        (
            s.hydrants.iter().map(|h| h.sequence).collect(),
            s.timeline
                .visible_segments()
                .iter()
                .map(|s| s.num_rows)
                .sum(),
        )
    })
}

#[tokio::test]
async fn one_replica_per_sink_is_visible_and_the_next_takes_over() {
    let (_, view) = memory_view().await;
    assert!(view.snapshot("rt").is_none());
    view.add_hydrants(
        "rt",
        "sup/0/0",
        "task-a",
        vec![hydrant(2, 10), hydrant(1, 10)],
    );
    view.add_hydrants(
        "rt",
        "sup/0/0",
        "task-b",
        vec![hydrant(1, 10), hydrant(2, 10), hydrant(3, 10)],
    );
    view.add_hydrants("rt", "sup/1/0", "task-c", vec![hydrant(7, 1)]);
    // The first replica of each sink, ordered by sequence.
    assert_eq!(seen(&view, "rt"), Some((vec![1, 2, 7], 0)));
    assert_eq!(view.data_sources(), vec!["rt".to_string()]);
    assert!(view.timeline("rt").is_none(), "hydrants are not segments");

    // Re-registering a file replaces its hydrant instead of adding a second one.
    let again = hydrant(2, 12);
    view.add_hydrants("rt", "sup/0/0", "task-a", vec![again.clone()]);
    let snap = view.snapshot("rt").unwrap();
    assert_eq!(snap.hydrants.len(), 3);
    assert_eq!(snap.hydrants[1].as_ref(), &again);
    // A second file of the same sequence (rows of another time chunk) is added beside it.
    let mut other_chunk = hydrant(2, 5);
    other_chunk.path = PathBuf::from("/tmp/hydrant-2-b.parquet");
    view.add_hydrants("rt", "sup/0/0", "task-a", vec![other_chunk]);
    assert_eq!(seen(&view, "rt"), Some((vec![1, 2, 2, 7], 0)));
    // Merging: sequences 1..=2 of task-a become one file, in one step.
    let mut merged = hydrant(2, 27);
    merged.path = PathBuf::from("/tmp/merged.parquet");
    view.replace_hydrants("rt", "sup/0/0", "task-a", 1..=2, vec![merged.clone()]);
    let snap = view.snapshot("rt").unwrap();
    assert_eq!(snap.hydrants.len(), 2);
    assert_eq!(snap.hydrants[0].as_ref(), &merged);

    // The first replica goes: the second (registered next) takes over with its own hydrants.
    view.drop_task_hydrants("rt", "task-a");
    assert_eq!(seen(&view, "rt"), Some((vec![1, 2, 3, 7], 0)));
    // A task unknown to the datasource changes nothing.
    view.drop_task_hydrants("rt", "task-x");
    view.drop_task_hydrants("other", "task-b");
    assert_eq!(seen(&view, "rt"), Some((vec![1, 2, 3, 7], 0)));

    view.drop_task_hydrants("rt", "task-b");
    view.drop_task_hydrants("rt", "task-c");
    assert!(view.snapshot("rt").is_none());
    assert!(view.data_sources().is_empty());
}

#[tokio::test]
async fn refreshes_keep_hydrants() {
    let (store, view) = memory_view().await;
    store
        .publish_segments(publish_request("batch", 5))
        .await
        .unwrap();
    view.add_hydrants("rt", "sup/0/0", "task-a", vec![hydrant(1, 10)]);
    view.refresh().await.unwrap();
    assert_eq!(seen(&view, "batch"), Some((vec![], 5)));
    assert_eq!(seen(&view, "rt"), Some((vec![1], 0)));
    assert_eq!(
        view.data_sources(),
        vec!["batch".to_string(), "rt".to_string()]
    );
    view.refresh_data_source("rt").await.unwrap();
    assert_eq!(seen(&view, "rt"), Some((vec![1], 0)));
    // A datasource with segments and hydrants shows both.
    view.add_hydrants("batch", "sup/0/0", "task-b", vec![hydrant(4, 3)]);
    view.refresh_data_source("batch").await.unwrap();
    assert_eq!(seen(&view, "batch"), Some((vec![4], 5)));
}

/// Readers never see the published rows twice or not at all, even with a refresh racing the
/// handoff; replicas lose the handed-off hydrants too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_swaps_hydrants_for_segments_atomically() {
    let (store, view) = memory_view().await;
    // Earlier published data of the datasource.
    store
        .publish_segments(publish_request("rt", 5))
        .await
        .unwrap();
    view.refresh().await.unwrap();
    // Hydrants 1 and 2 (20 rows) are handed off; hydrant 3 (7 rows) was read afterwards.
    let hydrants = vec![hydrant(1, 10), hydrant(2, 10), hydrant(3, 7)];
    view.add_hydrants("rt", "sup/0/0", "task-a", hydrants.clone());
    view.add_hydrants("rt", "sup/0/0", "task-b", hydrants);
    let total = |v: &SegmentView| {
        let s = v.snapshot("rt").unwrap();
        let segs: u64 = s
            .timeline
            .visible_segments()
            .iter()
            .map(|s| s.num_rows)
            .sum();
        segs + s.hydrants.iter().map(|h| h.num_rows).sum::<u64>()
    };
    assert_eq!(total(&view), 32);

    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let view = Arc::clone(&view);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(total(&view), 32, "a reader saw a half-done handoff");
                reads += 1;
            }
            reads
        })
    };

    let publish = {
        let store = Arc::clone(&store);
        let view = Arc::clone(&view);
        async move {
            let out = store.publish_segments(publish_request("rt", 20)).await?;
            // Committed but not installed: a refresh started now must wait for the handoff
            // (otherwise it would install the new segment next to the hydrants).
            let racing = {
                let view = Arc::clone(&view);
                tokio::spawn(async move { view.refresh().await })
            };
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(seen(&view, "rt"), Some((vec![1, 2, 3], 5)));
            Ok::<_, StorageError>((out, racing))
        }
    };
    let (out, racing) = view.handoff("rt", "sup/0/0", 2, publish).await.unwrap();
    assert_eq!(out.len(), 1);
    racing.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader assertion");
    assert!(reads > 0);

    assert_eq!(seen(&view, "rt"), Some((vec![3], 25)));
    // The replica lost the handed-off hydrants too, so taking over does not count them again,
    // and hydrants at or below the handoff are not registered again.
    view.drop_task_hydrants("rt", "task-a");
    assert_eq!(seen(&view, "rt"), Some((vec![3], 25)));
    view.add_hydrants(
        "rt",
        "sup/0/0",
        "task-b",
        vec![hydrant(2, 10), hydrant(4, 1)],
    );
    assert_eq!(seen(&view, "rt"), Some((vec![3, 4], 25)));
}

#[tokio::test]
async fn failed_publish_changes_nothing() {
    let (store, view) = memory_view().await;
    store
        .publish_segments(publish_request("rt", 5))
        .await
        .unwrap();
    view.refresh().await.unwrap();
    view.add_hydrants("rt", "sup/0/0", "task-a", vec![hydrant(1, 10)]);
    let err = view
        .handoff("rt", "sup/0/0", 1, async {
            // A segment that is committed behind the view's back must not show up either.
            store
                .publish_segments(publish_request("rt", 20))
                .await
                .unwrap();
            Err::<(), _>(StorageError::InvalidPath("publish failed".into()))
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::InvalidPath(_)), "{err}");
    assert_eq!(seen(&view, "rt"), Some((vec![1], 5)));
    // No handoff watermark either: the same sequence can still be registered.
    view.add_hydrants("rt", "sup/0/0", "task-a", vec![hydrant(1, 11)]);
    assert_eq!(view.snapshot("rt").unwrap().hydrants[0].num_rows, 11);
}

/// Without any hydrants of the sink (e.g. the task was dropped meanwhile), a handoff still
/// installs the published segments.
#[tokio::test]
async fn handoff_without_hydrants_installs_the_segments() {
    let (store, view) = memory_view().await;
    let out = view
        .handoff(
            "rt",
            "sup/0/0",
            9,
            store.publish_segments(publish_request("rt", 20)),
        )
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(seen(&view, "rt"), Some((vec![], 20)));
    assert_eq!(view.data_sources(), vec!["rt".to_string()]);
}

#[tokio::test]
async fn segment_stats_count_visible_segments_only() {
    let (store, view) = memory_view().await;
    assert!(view.segment_stats().is_empty());
    store
        .publish_segments(publish_request("rt", 20))
        .await
        .unwrap();
    store
        .publish_segments(publish_request("rt", 30))
        .await
        .unwrap();
    store
        .publish_segments(publish_request("other", 5))
        .await
        .unwrap();
    // Hydrants are not segments.
    view.add_hydrants("rt", "sup/0/0", "task-a", vec![hydrant(1, 7)]);
    view.refresh().await.unwrap();
    assert_eq!(
        view.segment_stats(),
        vec![("other".to_string(), 1, 100), ("rt".to_string(), 2, 200)]
    );
    // An overwrite overshadows the two appended segments of the day.
    let mut over = publish_request("rt", 1);
    over.mode = PublishMode::Overwrite {
        version: "2024-02-01T00:00:00.000Z".into(),
    };
    over.segments[0].size = 40;
    store.publish_segments(over).await.unwrap();
    view.refresh_data_source("rt").await.unwrap();
    assert_eq!(
        view.segment_stats(),
        vec![("other".to_string(), 1, 100), ("rt".to_string(), 1, 40)]
    );
}
