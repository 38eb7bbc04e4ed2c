//! Druid's names for Prometheus: how the Prometheus emitter turns a Druid metric name and a
//! dimension value into a Prometheus metric name and label value, and how Druid writes the
//! `dataSource` dimension of query metrics.
//!
//! Sources (Apache Druid, `extensions-contrib/prometheus-emitter`):
//! - `Metrics.java`: the name is lower-cased (`StringUtils.toLowerCase`), then every match of
//!   `[^a-zA-Z_:][^a-zA-Z0-9_:]*` becomes `_`, and the namespace (`druid` by default) is put
//!   in front with a `_`.
//! - `PrometheusEmitter.java`: a label value is the dimension's text with every match of
//!   `[^a-zA-Z0-9_][^a-zA-Z0-9_]*` replaced by `_`; a missing dimension is `unknown`.
//! - `processing/.../query/DataSourceUtil.java` (`getMetricName`): the `dataSource` of a
//!   native query's metrics is the one name, or Java's `List.toString()` of the names
//!   (`[a, b]`, `[]` for none).
//! - `sql/.../SqlExecutionReporter.java`: the `dataSource` of `sqlQuery/*` metrics is always
//!   `List.toString()` of the resources the query reads (`[wikipedia]`).

/// The label value Druid's emitter uses for a dimension an event does not carry.
pub const UNKNOWN_LABEL: &str = "unknown";

/// `Metrics.java`'s name mapping: lower-case, then each run that starts with a character
/// outside `[a-zA-Z_:]` and goes on over characters outside `[a-zA-Z0-9_:]` becomes one `_`.
/// Digits are kept only right after a letter, `_` or `:` run (`tcpv4/x` -> `tcpv_x`), exactly
/// as the Java regex does. The namespace is not included (see [`prometheus_name`]).
pub fn formatted_name(druid_name: &str) -> String {
    let lower = druid_name.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut chars = lower.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            out.push(c);
            continue;
        }
        out.push('_');
        while let Some(&n) = chars.peek() {
            if n.is_ascii_alphanumeric() || n == '_' || n == ':' {
                break;
            }
            chars.next();
        }
    }
    out
}

/// The full Prometheus name of a Druid metric: `<namespace>_<formatted name>` (the counter
/// suffix `_total` and the histogram suffixes are added by the exposition format).
pub fn prometheus_name(namespace: &str, druid_name: &str) -> String {
    format!("{namespace}_{}", formatted_name(druid_name))
}

/// `PrometheusEmitter.java`'s label value: each run of characters outside `[a-zA-Z0-9_]`
/// becomes one `_` (`wiki-edits` -> `wiki_edits`, `[a, b]` -> `_a_b_`).
pub fn label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut in_run = false;
    for c in value.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out
}

/// Java's `List.toString()` of names: `[a, b]`, `[]` when empty.
pub fn java_list(names: &[String]) -> String {
    format!("[{}]", names.join(", "))
}

/// The `dataSource` dimension of a native query's metrics (`DataSourceUtil.getMetricName`):
/// the name when there is exactly one, else [`java_list`].
pub fn query_data_source(names: &[String]) -> String {
    match names {
        [one] => one.clone(),
        _ => java_list(names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_follow_druids_regex() {
        let cases = [
            ("query/time", "query_time"),
            ("query/success/count", "query_success_count"),
            ("sqlQuery/planningTimeMs", "sqlquery_planningtimems"),
            (
                "ingest/events/processedWithError",
                "ingest_events_processedwitherror",
            ),
            ("ingest/kafka/partitionLag", "ingest_kafka_partitionlag"),
            ("taskSlot/total/count", "taskslot_total_count"),
            ("segment/used", "segment_used"),
            // Digits after a replaced character are replaced too (the second class of the
            // regex does not match them, the first class does on the next match).
            ("sys/tcpv4/activeOpens", "sys_tcpv_activeopens"),
            ("a/1b", "a__b"),
            ("query/node/ttfb", "query_node_ttfb"),
            ("a//b--c", "a_b_c"),
            ("9lives", "_lives"),
            ("ns:name", "ns:name"),
        ];
        for (druid, want) in cases {
            assert_eq!(formatted_name(druid), want, "{druid}");
        }
        assert_eq!(prometheus_name("druid", "query/time"), "druid_query_time");
    }

    #[test]
    fn label_values_follow_druids_regex() {
        assert_eq!(label_value("wikipedia"), "wikipedia");
        assert_eq!(label_value("wiki-edits 2"), "wiki_edits_2");
        assert_eq!(label_value("[wikipedia]"), "_wikipedia_");
        assert_eq!(label_value("[a, b]"), "_a_b_");
        assert_eq!(label_value("[]"), "_");
        assert_eq!(label_value("été"), "_t_");
        assert_eq!(
            label_value("_default_worker_category"),
            "_default_worker_category"
        );
    }

    #[test]
    fn query_data_source_is_the_name_or_a_java_list() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(query_data_source(&names(&["wikipedia"])), "wikipedia");
        assert_eq!(query_data_source(&names(&["a", "b"])), "[a, b]");
        assert_eq!(query_data_source(&names(&[])), "[]");
        assert_eq!(java_list(&names(&["wikipedia"])), "[wikipedia]");
    }
}
