//! `dolmen quickstart`: the main job end to end. Starts the all-in-one server, loads the bundled
//! Wikipedia edits sample (39,244 rows of 2015-09-12) into datasource `wikipedia` with Druid's
//! quickstart ingestion spec (`examples/quickstart/specs/wikipedia-index.json`, `baseDir`
//! pointed at the sample), shows progress, prints a ready-to-paste `curl` query with its answer,
//! and keeps serving until Ctrl-C.
//!
//! Running it again on the same data directory does not load the sample twice: when
//! `wikipedia` already has visible segments, ingestion is skipped.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use dolmen_metadata::TaskState;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use crate::RunningServer;

/// The bundled sample (Druid's `quickstart/tutorial/wikiticker-2015-09-12-sampled.json.gz`).
pub const SAMPLE: &[u8] =
    include_bytes!("../../../examples/quickstart/wikiticker-2015-09-12-sampled.json.gz");
/// Druid's quickstart ingestion spec.
pub const SPEC: &str = include_str!("../../../examples/quickstart/specs/wikipedia-index.json");
/// File name of the sample.
pub const SAMPLE_NAME: &str = "wikiticker-2015-09-12-sampled.json.gz";
/// Rows in the sample.
pub const SAMPLE_ROWS: u64 = 39_244;
/// The query the quickstart prints (Druid tutorial: top pages by edits on 2015-09-12).
pub const SAMPLE_QUERY: &str = "SELECT page, COUNT(*) AS Edits FROM wikipedia WHERE TIMESTAMP '2015-09-12 00:00:00' <= __time AND __time < TIMESTAMP '2015-09-13 00:00:00' GROUP BY page ORDER BY Edits DESC LIMIT 10";

/// The ingestion spec with `baseDir` pointing at `dir`.
pub fn spec_for(dir: &Path) -> anyhow::Result<Value> {
    let mut spec: Value = serde_json::from_str(SPEC).context("bundled spec is not JSON")?;
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = json!(dir.display().to_string());
    Ok(spec)
}

/// Loads the sample unless `wikipedia` is already there; returns a one-line summary.
///
/// # Errors
/// When the sample cannot be written or the ingestion task fails.
pub async fn load_sample(
    server: &RunningServer,
    data_dir: &Path,
    show_progress: bool,
) -> anyhow::Result<String> {
    if server
        .state
        .view
        .timeline("wikipedia")
        .is_some_and(|t| !t.is_empty())
    {
        return Ok("datasource [wikipedia] is already loaded; skipping ingestion".to_string());
    }
    let dir = data_dir.join("quickstart");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create [{}]", dir.display()))?;
    let file = dir.join(SAMPLE_NAME);
    if std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) != SAMPLE.len() as u64 {
        std::fs::write(&file, SAMPLE)
            .with_context(|| format!("cannot write [{}]", file.display()))?;
    }
    let started = Instant::now();
    let task_id = server
        .state
        .overlord
        .submit(spec_for(&dir.canonicalize()?)?)
        .await?;
    let bar = if show_progress {
        let b = ProgressBar::new(SAMPLE_ROWS);
        b.set_style(
            ProgressStyle::with_template(
                "Loading wikipedia  [{bar:40}] {pos}/{len} rows  {elapsed}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    loop {
        let report = server.state.overlord.report(&task_id).await?;
        let processed =
            report["ingestionStatsAndErrors"]["payload"]["rowStats"]["buildSegments"]["processed"]
                .as_u64()
                .unwrap_or(0);
        bar.set_position(processed.min(SAMPLE_ROWS));
        let task = server
            .state
            .overlord
            .task(&task_id)
            .await?
            .context("task vanished")?;
        match task.status {
            TaskState::Success => {
                bar.set_position(SAMPLE_ROWS);
                bar.finish();
                break;
            }
            TaskState::Failed => {
                bar.abandon();
                bail!(
                    "ingestion task {task_id} failed: {}",
                    task.error_msg.unwrap_or_default()
                );
            }
            TaskState::Running => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "loaded {SAMPLE_ROWS} rows into [wikipedia] in {secs:.2} s ({:.0} rows/s), task {task_id}",
        SAMPLE_ROWS as f64 / secs.max(1e-9)
    ))
}

/// Runs the sample query over HTTP, as a user's `curl` would, and returns the response body.
///
/// # Errors
/// When the request fails.
pub async fn sample_answer(url: &str) -> anyhow::Result<String> {
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{url}/service/v2/sql"))
        .json(&json!({ "query": SAMPLE_QUERY }))
        .send()
        .await?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("sample query failed with {status}: {text}");
    }
    Ok(text)
}

/// The ready-to-paste curl command for the sample query (POSIX shell quoting: the query's own
/// single quotes, as in `TIMESTAMP '2015-09-12 00:00:00'`, survive the paste).
pub fn curl_command(url: &str) -> String {
    let body = json!({ "query": SAMPLE_QUERY }).to_string();
    format!(
        "curl -s -X POST -H 'Content-Type: application/json' {url}/service/v2/sql -d {}",
        shell_quote(&body)
    )
}

/// `s` as one single-quoted POSIX shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Prints the answer of the sample query as a small table.
pub fn print_answer(body: &str) {
    let rows: Vec<Value> = serde_json::from_str(body).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "  {:<60} {:>6}", "page", "Edits");
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<60} {:>6}",
            r["page"].as_str().unwrap_or(""),
            r["Edits"].as_i64().unwrap_or(0)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_curl_command_sends_the_sample_query_unchanged() {
        let cmd = curl_command("http://127.0.0.1:8888");
        // What the shell passes to curl's -d: everything after it, as the shell reads it.
        let arg = cmd.split_once(" -d ").unwrap().1;
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' {arg}"))
            .output()
            .unwrap();
        let sent: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(sent["query"], SAMPLE_QUERY);
        assert!(
            SAMPLE_QUERY.contains('\''),
            "the test covers embedded quotes"
        );
    }
}
