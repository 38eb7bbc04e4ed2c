//! The standard `process_*` metrics (the names of Prometheus' client libraries, e.g. Go's
//! `process_collector.go`), read from `/proc/self` at scrape time with the `procfs` crate.
//! Linux only; elsewhere nothing is exposed. Not under the Druid namespace: a JVM-free process
//! has no `jvm/*` metrics, and dashboards read these names for any process.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// Encodes `process_cpu_seconds_total`, `process_open_fds`, `process_max_fds`,
/// `process_virtual_memory_bytes`, `process_resident_memory_bytes`,
/// `process_start_time_seconds` and `process_threads` for this process.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

#[cfg(target_os = "linux")]
impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::MetricType;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;

        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        let mut gauge = |name: &str, help: &str, v: f64| -> Result<(), std::fmt::Error> {
            let e = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(v).encode(e)
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            gauge(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.vsize as f64,
            )?;
            gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                (stat.rss * procfs::page_size()) as f64,
            )?;
            gauge(
                "process_threads",
                "Number of OS threads in the process.",
                stat.num_threads as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                gauge(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    boot as f64 + stat.starttime as f64 / ticks,
                )?;
            }
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            let e = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(cpu).encode(e)?;
        }
        let mut gauge = |name: &str, help: &str, v: f64| -> Result<(), std::fmt::Error> {
            let e = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(v).encode(e)
        };
        if let Ok(n) = me.fd_count() {
            gauge(
                "process_open_fds",
                "Number of open file descriptors.",
                n as f64,
            )?;
        }
        if let Ok(limits) = me.limits()
            && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            gauge(
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max as f64,
            )?;
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
impl Collector for ProcessCollector {
    fn encode(&self, _encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        Ok(())
    }
}
