//! Kinesis (`shardstream`) ingestion benchmark (run by `scripts/bench-kinesis.sh`): a running
//! `dolmen server` and a Kinesis-API service (kinesalite by default).
//!
//! - `throughput ROWS`: fills a fresh stream (4 shards) with ROWS JSON events, measures the
//!   service's own read rate (plain `GetRecords` calls reading everything back,
//!   `KinesisAdmin::read_all`), then posts a `shardstream` supervisor reading the stream from the
//!   earliest record and times until `SELECT COUNT(*)` returns ROWS. Reports rows/s of wall time
//!   and rows/s per core (rows / CPU seconds of the dolmen process, from `/proc/<pid>/stat`).
//! - `latency RATE SECONDS`: posts a supervisor on a fresh stream, then puts RATE records/s
//!   (one `PutRecords` call every 50 ms) for SECONDS while another thread polls
//!   `SELECT COUNT(*)` every 20 ms; a record's latency is the time from the start of its
//!   `PutRecords` call to the first poll whose count includes its batch (an upper bound, at most
//!   one poll interval late). Reports p50/p99/max.
//! - `service-latency RATE SECONDS`: the same producer, read back by one
//!   `KinesisRecordSupplier` directly (no Dolmen): the service's own put-to-read latency, the
//!   floor under `latency`.
//!
//! Arguments: `--url http://127.0.0.1:PORT --endpoint http://127.0.0.1:4567 --pid PID <mode> ...`.
//! The server must have `service.kinesis.accessKey`/`secretKey` set (kinesalite checks that
//! requests are signed, not the keys).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dolmen_stream::kinesis::{
    KinesisAdmin, KinesisConfig, KinesisRecordSupplier, StaticCredentials,
};
use dolmen_stream::{RecordSupplier, StreamPartition};
use serde_json::{Value, json};

#[path = "support/bench_http.rs"]
mod bench_http;
use bench_http::{count, cpu_seconds, post_supervisor, terminate};

const SHARDS: i32 = 4;

fn arg(args: &[String], name: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| panic!("missing {name}"))
}

fn config(endpoint: &str) -> KinesisConfig {
    KinesisConfig {
        credentials: Some(StaticCredentials {
            access_key: "bench".into(),
            secret_key: "bench".into(),
        }),
        records_per_fetch: 10_000,
        ..KinesisConfig::new(Some(endpoint.to_owned()), Some("us-east-1".into()))
    }
}

/// Event `i`: `__time` over 30 days, `channel` (50 values), `page` (200k), `user` (50k),
/// `added`, `deleted`, `seq`. Deterministic in `i`.
fn event(i: u64, rows: u64) -> (String, Vec<u8>) {
    let h = |k: u64| (i.wrapping_add(k)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17;
    let time_ms = 1_600_000_000_000i64 + (i as i64 * 30 * 86_400_000 / rows.max(1) as i64);
    let v = json!({
        "__time": time_ms,
        "channel": format!("#ch{}", h(1) % 50),
        "page": format!("Page {}", h(2) % 200_000),
        "user": format!("user{}", h(3) % 50_000),
        "added": h(4) % 1000,
        "deleted": h(5) % 100,
        "seq": i,
    });
    (format!("k{}", h(6)), v.to_string().into_bytes())
}

fn new_stream(admin: &KinesisAdmin, prefix: &str) -> String {
    let stream = format!(
        "{prefix}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    admin.create_stream(&stream, SHARDS).expect("create stream");
    stream
}

fn spec(ds: &str, stream: &str, endpoint: &str) -> Value {
    json!({
        "type": "shardstream",
        "id": ds,
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "__time", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["channel", "page", "user",
                    {"type": "long", "name": "added"}, {"type": "long", "name": "deleted"},
                    {"type": "long", "name": "seq"}]},
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE", "rollup": false}
            },
            "ioConfig": {
                "stream": stream, "endpoint": endpoint, "region": "us-east-1",
                "inputFormat": {"type": "json"}, "useEarliestSequenceNumber": true,
                "startDelay": "PT0S", "period": "PT1S", "taskDuration": "PT1H",
                "recordsPerFetch": 10000
            },
            "tuningConfig": {"type": "shardstream"}
        }
    })
}

fn throughput(url: &str, endpoint: &str, pid: u32, rows: u64) {
    let http = reqwest::blocking::Client::new();
    let admin = KinesisAdmin::new(config(endpoint)).expect("admin");
    let stream = new_stream(&admin, "bench-tput");
    let t = Instant::now();
    let records: Vec<(String, Vec<u8>)> = (0..rows).map(|i| event(i, rows)).collect();
    admin.put_records(&stream, &records).expect("put");
    eprintln!("put {rows} rows in {:.1} s", t.elapsed().as_secs_f64());

    // The service's own read rate: plain GetRecords calls reading everything back.
    let t = Instant::now();
    let read = admin.read_all(&stream).expect("read");
    assert_eq!(read as u64, rows);
    let service_secs = t.elapsed().as_secs_f64();

    let ds = format!("tput_{}", stream.replace('-', "_"));
    let cpu0 = cpu_seconds(pid);
    let t = Instant::now();
    post_supervisor(&http, url, &spec(&ds, &stream, endpoint));
    loop {
        let c = count(&http, url, &ds);
        if c as u64 >= rows {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(1800), "stalled at {c}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu0;
    terminate(&http, url, &ds);
    println!(
        "| rows | service read (GetRecords) | dolmen wall | dolmen CPU | rows/s | rows/s per core |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {rows} | {service_secs:.2} s ({:.0} rows/s) | {secs:.2} s | {cpu:.2} s | {:.0} | {:.0} |",
        rows as f64 / service_secs,
        rows as f64 / secs,
        rows as f64 / cpu
    );
}

/// Puts `rate` records/s for `seconds` in batches every 50 ms; returns each batch's
/// `(start of its PutRecords call, cumulative record count after it)`.
fn put_steadily(
    endpoint: &str,
    stream: &str,
    rate: u64,
    seconds: u64,
    batches: &Mutex<Vec<(Instant, u64)>>,
) {
    let admin = KinesisAdmin::new(config(endpoint)).expect("admin");
    let per_batch = (rate / 20).max(1);
    let total = rate * seconds;
    let start = Instant::now();
    let mut sent = 0u64;
    let mut k = 0u32;
    while sent < total {
        let due = start + Duration::from_millis(50) * k;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        k += 1;
        let n = per_batch.min(total - sent);
        let records: Vec<(String, Vec<u8>)> = (sent..sent + n).map(|i| event(i, total)).collect();
        let t = Instant::now();
        admin.put_records(stream, &records).expect("put");
        sent += n;
        batches.lock().unwrap().push((t, sent));
    }
}

fn print_latencies(label: &str, rate: u64, achieved: f64, mut lat: Vec<f64>) {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| lat[((lat.len() as f64 - 1.0) * q).round() as usize] * 1000.0;
    println!("| run | target rate | achieved | p50 | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| {label} | {rate}/s | {achieved:.0}/s | {:.0} ms | {:.0} ms | {:.0} ms |",
        p(0.5),
        p(0.99),
        p(1.0)
    );
}

/// Latencies per record from batches and the times counts were observed.
fn latencies(batches: &[(Instant, u64)], seen: &[(Instant, u64)]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut prev = 0u64;
    for (t, cum) in batches {
        let at = seen
            .iter()
            .find(|(_, c)| c >= cum)
            .map(|(s, _)| *s)
            .expect("every batch seen");
        let d = at.saturating_duration_since(*t).as_secs_f64();
        out.extend(std::iter::repeat_n(d, (cum - prev) as usize));
        prev = *cum;
    }
    out
}

fn latency(url: &str, endpoint: &str, rate: u64, seconds: u64) {
    let http = reqwest::blocking::Client::new();
    let admin = KinesisAdmin::new(config(endpoint)).expect("admin");
    let stream = new_stream(&admin, "bench-lat");
    let ds = format!("lat_{}", stream.replace('-', "_"));
    post_supervisor(&http, url, &spec(&ds, &stream, endpoint));
    // Wait until the supervisor's task reads (a first record visible).
    let total = rate * seconds;
    admin
        .put_records(&stream, &[event(total, total + 1)])
        .expect("put");
    let t = Instant::now();
    while count(&http, url, &ds) < 1 {
        assert!(t.elapsed() < Duration::from_secs(120), "no task reads");
        std::thread::sleep(Duration::from_millis(50));
    }
    let batches = Arc::new(Mutex::new(Vec::new()));
    let producer = {
        let (endpoint, stream, batches) = (endpoint.to_owned(), stream.clone(), batches.clone());
        std::thread::spawn(move || put_steadily(&endpoint, &stream, rate, seconds, &batches))
    };
    let t0 = Instant::now();
    let mut seen = Vec::new();
    loop {
        let c = count(&http, url, &ds) - 1;
        seen.push((Instant::now(), c.max(0) as u64));
        if c as u64 >= total {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(seconds + 300),
            "stalled at {c}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    producer.join().unwrap();
    terminate(&http, url, &ds);
    let batches = batches.lock().unwrap().clone();
    let achieved = total as f64
        / batches
            .last()
            .unwrap()
            .0
            .duration_since(batches[0].0)
            .as_secs_f64()
            .max(0.001);
    print_latencies("through Dolmen", rate, achieved, latencies(&batches, &seen));
}

fn service_latency(endpoint: &str, rate: u64, seconds: u64) {
    let admin = KinesisAdmin::new(config(endpoint)).expect("admin");
    let stream = new_stream(&admin, "bench-svc");
    let mut s = KinesisRecordSupplier::new(config(endpoint)).expect("supplier");
    let parts: Vec<_> = s
        .partition_ids(&stream)
        .unwrap()
        .into_iter()
        .map(|p| StreamPartition::new(stream.as_str(), p))
        .collect();
    s.assign(&parts).unwrap();
    s.seek_to_earliest(&parts).unwrap();
    let batches = Arc::new(Mutex::new(Vec::new()));
    let total = rate * seconds;
    let producer = {
        let (endpoint, stream, batches) = (endpoint.to_owned(), stream.clone(), batches.clone());
        std::thread::spawn(move || put_steadily(&endpoint, &stream, rate, seconds, &batches))
    };
    let t0 = Instant::now();
    let mut read = 0u64;
    let mut seen = Vec::new();
    while read < total {
        read += s.poll(Duration::from_millis(20)).unwrap().len() as u64;
        seen.push((Instant::now(), read));
        assert!(
            t0.elapsed() < Duration::from_secs(seconds + 300),
            "stalled at {read}"
        );
    }
    producer.join().unwrap();
    let batches = batches.lock().unwrap().clone();
    let achieved = total as f64
        / batches
            .last()
            .unwrap()
            .0
            .duration_since(batches[0].0)
            .as_secs_f64()
            .max(0.001);
    print_latencies(
        "service alone (one supplier)",
        rate,
        achieved,
        latencies(&batches, &seen),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = arg(&args, "--endpoint");
    let n = |i: usize| -> u64 {
        let mode_at = args
            .iter()
            .position(|a| a == "throughput" || a.ends_with("latency"))
            .expect("a mode");
        args[mode_at + i].parse().expect("a number")
    };
    if args.iter().any(|a| a == "throughput") {
        let pid: u32 = arg(&args, "--pid").parse().unwrap();
        throughput(&arg(&args, "--url"), &endpoint, pid, n(1));
    } else if args.iter().any(|a| a == "service-latency") {
        service_latency(&endpoint, n(1), n(2));
    } else if args.iter().any(|a| a == "latency") {
        latency(&arg(&args, "--url"), &endpoint, n(1), n(2));
    } else {
        panic!("mode: throughput ROWS | latency RATE SECONDS | service-latency RATE SECONDS");
    }
}
