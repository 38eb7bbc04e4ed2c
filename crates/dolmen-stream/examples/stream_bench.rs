//! Streaming ingestion benchmark (run by `scripts/bench-stream.sh`): a running `dolmen server`
//! and a Kafka-protocol broker.
//!
//! - `throughput ROWS`: fills a fresh topic (4 partitions) with ROWS events of the 9-column
//!   events table as JSON, measures the broker's own read rate (one consumer reading every
//!   record back through `KafkaRecordSupplier`), then posts a `logstream` supervisor reading the
//!   topic from the earliest offset and times until `SELECT COUNT(*)` returns ROWS. Reports
//!   rows/s of wall time and rows/s per core (rows / CPU seconds of the dolmen process, from
//!   `/proc/<pid>/stat`).
//! - `latency RATE SECONDS`: posts a supervisor on a fresh topic, then produces RATE events/s for
//!   SECONDS while another thread polls `SELECT COUNT(*)` every 20 ms; an event's latency is the
//!   time from its produce call to the first poll whose count includes it (an upper bound, at
//!   most one poll interval late). Reports p50/p99/max.
//! - `broker-latency RATE SECONDS`: the same producer, read back by one consumer directly (no
//!   Dolmen): the broker's own produce-to-fetch latency, the floor under `latency`.
//!
//! Arguments: `--url http://127.0.0.1:PORT --brokers HOST:PORT --pid PID [--batch-ms N] <mode>
//! ...`; `--batch-ms N` lets the latency producer batch records (linger N ms), for brokers that
//! take multi-record batches.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dolmen_stream::kafka::{KafkaAdmin, KafkaRecordSupplier};
use dolmen_stream::{RecordSupplier, StreamPartition};
use rskafka::client::ClientBuilder;
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::producer::aggregator::RecordAggregator;
use rskafka::client::producer::{BatchProducer, BatchProducerBuilder};
use rskafka::record::Record;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

#[path = "support/bench_http.rs"]
mod bench_http;
use bench_http::{count, cpu_seconds, post_supervisor, terminate};

const PARTITIONS: i32 = 4;

fn arg(args: &[String], name: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| panic!("missing {name}"))
}

/// Event `i` of the 9-column events table: `__time` over 30 days, `channel` (50 values),
/// `page` (200k), `user` (50k), `countryName` (200, 70% null), `isRobot`, `added`, `deleted`,
/// `delta`. Deterministic in `i` (a multiplicative hash).
fn event(i: u64, time_ms: i64) -> String {
    let h = |k: u64| (i.wrapping_add(k)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17;
    let country = if h(5) % 10 < 7 {
        Value::Null
    } else {
        json!(format!("Country {}", h(6) % 200))
    };
    json!({
        "__time": time_ms,
        "channel": format!("#ch{}", h(1) % 50),
        "page": format!("Page {}", h(2) % 200_000),
        "user": format!("user{}", h(3) % 50_000),
        "countryName": country,
        "isRobot": h(4) % 4 == 0,
        "added": h(7) % 1000,
        "deleted": h(8) % 100,
        "delta": (h(9) % 2000) as i64 - 1000,
        "seq": i,
    })
    .to_string()
}

/// Produce requests a [`BenchProducer`] keeps in flight at once.
const IN_FLIGHT: usize = 1024;

/// A pipelining producer for the benchmark (rskafka, on a runtime of its own). Without
/// `batch_ms` it sends one record per produce request, many in flight: the test broker's
/// in-memory engine misreports offsets of multi-record batches (TEST-SERVICES.md). With
/// `batch_ms` (for a broker that takes batches, such as tansu's SQLite engine) each partition
/// lingers up to that many ms to batch records, as production Kafka producers do.
struct BenchProducer {
    runtime: tokio::runtime::Runtime,
    partitions: Vec<Arc<PartitionClient>>,
    batchers: Option<Vec<Arc<BatchProducer<RecordAggregator>>>>,
    in_flight: Arc<Semaphore>,
    sent: Vec<JoinHandle<()>>,
}

impl BenchProducer {
    fn new(brokers: &str, topic: &str, batch_ms: Option<u64>) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let partitions: Vec<Arc<PartitionClient>> = runtime.block_on(async {
            let client = ClientBuilder::new(vec![brokers.to_string()])
                .build()
                .await
                .expect("kafka client");
            let mut out = Vec::new();
            for p in 0..PARTITIONS {
                out.push(Arc::new(
                    client
                        .partition_client(topic, p, UnknownTopicHandling::Retry)
                        .await
                        .expect("partition client"),
                ));
            }
            out
        });
        let batchers = batch_ms.map(|ms| {
            partitions
                .iter()
                .map(|pc| {
                    Arc::new(
                        BatchProducerBuilder::new(Arc::clone(pc))
                            .with_linger(Duration::from_millis(ms))
                            .build(RecordAggregator::new(1024 * 1024)),
                    )
                })
                .collect()
        });
        Self {
            runtime,
            partitions,
            batchers,
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            sent: Vec::new(),
        }
    }

    /// Queues `payload` for `partition`; waits only while [`IN_FLIGHT`] requests are pending.
    fn send(&mut self, partition: i32, payload: &str) {
        let record = Record {
            key: None,
            value: Some(payload.as_bytes().to_vec()),
            headers: BTreeMap::new(),
            timestamp: rskafka::chrono::Utc::now(),
        };
        let permit = self
            .runtime
            .block_on(Arc::clone(&self.in_flight).acquire_owned())
            .unwrap();
        let index = usize::try_from(partition).unwrap();
        let task = match &self.batchers {
            Some(batchers) => {
                let b = Arc::clone(&batchers[index]);
                self.runtime.spawn(async move {
                    b.produce(record).await.expect("produce");
                    drop(permit);
                })
            }
            None => {
                let pc = Arc::clone(&self.partitions[index]);
                self.runtime.spawn(async move {
                    pc.produce(vec![record], Compression::NoCompression)
                        .await
                        .expect("produce");
                    drop(permit);
                })
            }
        };
        self.sent.push(task);
        if self.sent.len() >= 4 * IN_FLIGHT {
            self.sent.retain(|t| !t.is_finished());
        }
    }

    /// Waits until every queued record is acknowledged.
    fn flush(&mut self) {
        let sent = std::mem::take(&mut self.sent);
        self.runtime.block_on(async {
            for t in sent {
                t.await.expect("produce task");
            }
        });
    }
}

fn new_topic(brokers: &str, prefix: &str) -> String {
    let topic = format!(
        "{prefix}-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    KafkaAdmin::new(brokers)
        .unwrap()
        .create_topic(&topic, PARTITIONS)
        .unwrap();
    topic
}

fn spec(ds: &str, topic: &str, brokers: &str) -> Value {
    json!({
        "type": "logstream",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "__time", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["channel", "page", "user", "countryName", "isRobot",
                    {"type": "long", "name": "added"}, {"type": "long", "name": "deleted"}, {"type": "long", "name": "delta"},
                    {"type": "long", "name": "seq"}]},
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE", "rollup": false}
            },
            "ioConfig": {
                "topic": topic, "inputFormat": {"type": "json"},
                "consumerProperties": {"bootstrap.servers": brokers},
                "useEarliestOffset": true, "startDelay": "PT0S", "period": "PT1S", "taskDuration": "PT1H"
            },
            "tuningConfig": {"type": "logstream"}
        }
    })
}

fn throughput(url: &str, brokers: &str, pid: u32, rows: u64) {
    let http = reqwest::blocking::Client::new();
    let topic = new_topic(brokers, "bench-tput");
    let t = Instant::now();
    let mut p = BenchProducer::new(brokers, &topic, None);
    let base = 1_600_000_000_000i64;
    for i in 0..rows {
        let time_ms = base + (i as i64 * 30 * 86_400_000 / rows as i64);
        p.send((i % PARTITIONS as u64) as i32, &event(i, time_ms));
    }
    p.flush();
    eprintln!("produced {rows} rows in {:.1} s", t.elapsed().as_secs_f64());

    // The broker's own read rate: one consumer reading everything back.
    let mut s = reader(brokers, &topic);
    let t = Instant::now();
    let mut read = 0u64;
    while read < rows {
        read += s.poll(Duration::from_millis(200)).unwrap().len() as u64;
        if std::env::var("BENCH_DEBUG").is_ok() {
            eprintln!("read {read}");
        }
        if t.elapsed() > Duration::from_secs(30) && read == 0 {
            panic!("the broker returns nothing");
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "broker read stalled at {read}"
        );
    }
    let broker_secs = t.elapsed().as_secs_f64();
    drop(s);

    let ds = format!("tput_{}", topic.replace('-', "_"));
    let cpu0 = cpu_seconds(pid);
    let t = Instant::now();
    let mut body = spec(&ds, &topic, brokers);
    body["id"] = json!(ds);
    post_supervisor(&http, url, &body);
    loop {
        let c = count(&http, url, &ds);
        if std::env::var("BENCH_DEBUG").is_ok() {
            eprintln!("count {c}");
        }
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
        "| rows | broker read (1 consumer) | dolmen wall | dolmen CPU | rows/s | rows/s per core |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {rows} | {broker_secs:.2} s ({:.0} rows/s) | {secs:.2} s | {cpu:.2} s | {:.0} | {:.0} |",
        rows as f64 / broker_secs,
        rows as f64 / secs,
        rows as f64 / cpu
    );
}

fn latency(url: &str, brokers: &str, rate: u64, seconds: u64, batch_ms: Option<u64>) {
    let http = reqwest::blocking::Client::new();
    let topic = new_topic(brokers, "bench-lat");
    let ds = format!("lat_{}", topic.replace('-', "_"));
    let mut body = spec(&ds, &topic, brokers);
    body["id"] = json!(ds);
    post_supervisor(&http, url, &body);
    // Wait until the supervisor's task reads (one warm-up event is visible).
    let mut p = BenchProducer::new(brokers, &topic, batch_ms);
    p.send(0, &event(u64::MAX, 1_600_000_000_000));
    p.flush();
    let t = Instant::now();
    while count(&http, url, &ds) < 1 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "supervisor did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let total = rate * seconds;
    let produced_at: Arc<Mutex<Vec<Instant>>> =
        Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
    let visible: Arc<Mutex<Vec<(Instant, i64)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let (visible, done, url, ds) = (
            Arc::clone(&visible),
            Arc::clone(&done),
            url.to_string(),
            ds.clone(),
        );
        std::thread::spawn(move || {
            let http = reqwest::blocking::Client::new();
            while !done.load(Ordering::Relaxed) {
                let c = count(&http, &url, &ds) - 1;
                visible.lock().unwrap().push((Instant::now(), c));
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let achieved = produce_steadily(&mut p, total, rate, |_, at| {
        produced_at.lock().unwrap().push(at);
    });
    let t = Instant::now();
    while visible
        .lock()
        .unwrap()
        .last()
        .is_none_or(|(_, c)| (*c as u64) < total)
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "not all events became visible"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    done.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    let produced = produced_at.lock().unwrap();
    let polls = visible.lock().unwrap();
    // Latency of event i: first poll at or after its produce time whose count exceeds i.
    let mut lat: Vec<f64> = Vec::with_capacity(produced.len());
    let mut j = 0;
    for (i, at) in produced.iter().enumerate() {
        while j < polls.len() && (polls[j].1 <= i as i64 || polls[j].0 < *at) {
            j += 1;
        }
        if j < polls.len() {
            lat.push(polls[j].0.duration_since(*at).as_secs_f64() * 1000.0);
        }
    }
    terminate(&http, url, &ds);
    print_latencies("rate (events/s, achieved)", rate, achieved, lat);
}

/// Prints the Markdown table row of latencies `lat` (ms): count, p50, p99 and max.
fn print_latencies(label: &str, rate: u64, achieved: f64, mut lat: Vec<f64>) {
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p) as usize];
    println!("| {label} | events | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    println!(
        "| {rate} ({achieved:.0}) | {} | {:.0} ms | {:.0} ms | {:.0} ms |",
        lat.len(),
        q(0.5),
        q(0.99),
        q(1.0)
    );
}

/// Produces events `0..total` at `rate` events/s over the partitions in turn, calling
/// `produced(i, at)` with the moment of each produce call; waits for delivery and returns the
/// achieved rate (events/s). Payloads are built before the clock starts, so the loop only
/// sends.
fn produce_steadily(
    p: &mut BenchProducer,
    total: u64,
    rate: u64,
    mut produced: impl FnMut(usize, Instant),
) -> f64 {
    let payloads = payloads(total);
    let start = Instant::now();
    for (i, payload) in payloads.iter().enumerate() {
        let due = start + Duration::from_nanos(i as u64 * 1_000_000_000 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        produced(i, Instant::now());
        p.send((i as u64 % PARTITIONS as u64) as i32, payload);
    }
    p.flush();
    total as f64 / start.elapsed().as_secs_f64()
}

/// A consumer of every partition of `topic` from offset 0, reading through Dolmen's Kafka
/// supplier with its defaults (`BENCH_FETCH_WAIT_MS` overrides `fetch.wait.max.ms`).
fn reader(brokers: &str, topic: &str) -> KafkaRecordSupplier {
    let mut props = BTreeMap::from([("bootstrap.servers".to_string(), brokers.to_string())]);
    if let Ok(ms) = std::env::var("BENCH_FETCH_WAIT_MS") {
        props.insert("fetch.max.wait.ms".to_string(), ms);
    }
    let mut s = KafkaRecordSupplier::new(&props)
        .unwrap()
        .with_max_poll_records(10_000);
    let parts: Vec<_> = (0..PARTITIONS)
        .map(|p| StreamPartition::new(topic.to_string(), p))
        .collect();
    s.assign(&parts).unwrap();
    for sp in &parts {
        s.seek(sp, 0).unwrap();
    }
    s
}

/// Events `0..total` as JSON payloads (time = 2020-09-13 + i ms).
fn payloads(total: u64) -> Vec<String> {
    (0..total)
        .map(|i| event(i, 1_600_000_000_000 + i as i64))
        .collect()
}

/// The `seq` field of an event payload ([`event`]), without a JSON
/// parse.
fn seq_of(payload: &[u8]) -> usize {
    let text = std::str::from_utf8(payload).unwrap();
    let at = text.rfind("\"seq\":").unwrap() + 6;
    text[at..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0usize, |n, d| n * 10 + usize::from(d - b'0'))
}

/// The broker's own produce-to-fetch latency at `rate` events/s for `seconds`: the same
/// producer as `latency`, and one consumer (`KafkaRecordSupplier`, as Dolmen's tasks read)
/// timing each record from its produce call to its arrival. The floor under Dolmen's latency.
fn broker_latency(brokers: &str, rate: u64, seconds: u64, batch_ms: Option<u64>) {
    let topic = new_topic(brokers, "bench-blat");
    let total = rate * seconds;
    let produced_at: Arc<Mutex<Vec<Option<Instant>>>> =
        Arc::new(Mutex::new(vec![None; total as usize]));
    let mut s = reader(brokers, &topic);
    let producer_thread = {
        let (produced_at, topic, brokers) =
            (Arc::clone(&produced_at), topic.clone(), brokers.to_string());
        std::thread::spawn(move || {
            let mut p = BenchProducer::new(&brokers, &topic, batch_ms);
            produce_steadily(&mut p, total, rate, |i, at| {
                produced_at.lock().unwrap()[i] = Some(at);
            })
        })
    };
    let mut lat: Vec<f64> = Vec::with_capacity(total as usize);
    let t = Instant::now();
    while (lat.len() as u64) < total {
        for r in s.poll(Duration::from_millis(50)).unwrap() {
            let arrived = Instant::now();
            let seq = seq_of(r.value.as_deref().unwrap_or_default());
            if let Some(at) = produced_at.lock().unwrap()[seq] {
                lat.push(arrived.duration_since(at).as_secs_f64() * 1000.0);
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(seconds + 120),
            "broker read stalled at {}",
            lat.len()
        );
    }
    let achieved = producer_thread.join().unwrap();
    print_latencies(
        "broker only: rate (events/s, achieved)",
        rate,
        achieved,
        lat,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--url");
    let brokers = arg(&args, "--brokers");
    let pid: u32 = arg(&args, "--pid").parse().unwrap();
    let batch_ms: Option<u64> = args
        .iter()
        .position(|a| a == "--batch-ms")
        .map(|i| args[i + 1].parse().expect("--batch-ms N"));
    let mode_at = args
        .iter()
        .position(|a| a == "throughput" || a == "latency" || a == "broker-latency")
        .expect("mode: throughput ROWS | latency RATE SECONDS | broker-latency RATE SECONDS");
    match args[mode_at].as_str() {
        "throughput" => throughput(&url, &brokers, pid, args[mode_at + 1].parse().unwrap()),
        "broker-latency" => broker_latency(
            &brokers,
            args[mode_at + 1].parse().unwrap(),
            args[mode_at + 2].parse().unwrap(),
            batch_ms,
        ),
        _ => latency(
            &url,
            &brokers,
            args[mode_at + 1].parse().unwrap(),
            args[mode_at + 2].parse().unwrap(),
            batch_ms,
        ),
    }
}
