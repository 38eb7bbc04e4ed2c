//! Read rate of `KinesisRecordSupplier` beside the Kinesis service's own read rate.
//!
//! Creates a stream of `SHARDS` shards on the endpoint in `DOLMEN_TEST_KINESIS_ENDPOINT` (the
//! kinesalite test service by default), pre-fills it with `RECORDS` JSON rows of about 100 bytes,
//! then measures (1) plain `GetRecords` calls reading everything (`KinesisAdmin::read_all`, the
//! floor) and (2) the supplier assigned every shard from the earliest, polled until it has every
//! record. Prints records/s for both and the CPU seconds this process spent in each phase.
//!
//! Usage: `cargo run --release -p dolmen-stream --example kinesis_read_rate [RECORDS] [SHARDS]`.

use std::time::{Duration, Instant};

use dolmen_stream::kinesis::{
    KinesisAdmin, KinesisConfig, KinesisRecordSupplier, StaticCredentials,
};
use dolmen_stream::{RecordSupplier, StreamPartition};

/// CPU seconds (user + system) this process has used, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let shards: i32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let endpoint = std::env::var("DOLMEN_TEST_KINESIS_ENDPOINT")
        .unwrap_or_else(|_| "http://127.0.0.1:4567".to_owned());
    let config = KinesisConfig {
        credentials: Some(StaticCredentials {
            access_key: "bench".into(),
            secret_key: "bench".into(),
        }),
        ..KinesisConfig::new(Some(endpoint), Some("us-east-1".into()))
    };
    let stream = format!("bench-read-{}", std::process::id());
    let admin = KinesisAdmin::new(config.clone()).expect("admin");
    admin.create_stream(&stream, shards).expect("create stream");
    let rows: Vec<(String, Vec<u8>)> = (0..records)
        .map(|i| {
            let row = format!(
                r##"{{"ts":{},"id":{i},"channel":"#c{}","page":"page-{}","added":{}}}"##,
                1_700_000_000_000i64 + i as i64,
                i % 50,
                i % 997,
                i % 100
            );
            (format!("key-{i}"), row.into_bytes())
        })
        .collect();
    let t = Instant::now();
    admin.put_records(&stream, &rows).expect("put");
    println!(
        "put {records} records into {shards} shards in {:.2} s ({:.0} records/s)",
        t.elapsed().as_secs_f64(),
        records as f64 / t.elapsed().as_secs_f64()
    );

    let (t, cpu) = (Instant::now(), cpu_seconds());
    let n = admin.read_all(&stream).expect("read");
    assert_eq!(n, records);
    let (wall, used) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    println!(
        "service alone (plain GetRecords): {:.0} records/s, {used:.2} CPU s in this process",
        n as f64 / wall
    );

    let mut supplier = KinesisRecordSupplier::new(KinesisConfig {
        records_per_fetch: 10_000,
        ..config
    })
    .expect("supplier");
    let partitions: Vec<_> = supplier
        .partition_ids(&stream)
        .expect("shards")
        .into_iter()
        .map(|s| StreamPartition::new(stream.as_str(), s))
        .collect();
    supplier.assign(&partitions).expect("assign");
    supplier.seek_to_earliest(&partitions).expect("seek");
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let mut got = 0;
    let mut bytes = 0;
    while got < records && t.elapsed() < Duration::from_secs(600) {
        for r in supplier.poll(Duration::from_millis(100)).expect("poll") {
            got += 1;
            bytes += r.value.map_or(0, |v| v.len());
        }
    }
    let (wall, used) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    println!(
        "KinesisRecordSupplier: {got} records ({bytes} bytes) at {:.0} records/s, {used:.2} CPU s in this process ({:.0} records per CPU second)",
        got as f64 / wall,
        got as f64 / used.max(0.01)
    );
}
