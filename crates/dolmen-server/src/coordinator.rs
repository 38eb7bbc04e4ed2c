//! Datasource and segment management under `/coordinator/v1/...` (Druid's
//! `DataSourcesResource.java`, `MetadataResource.java` and `CoordinatorResource.java`;
//! `docs/api-reference/data-management-api.md`, `legacy-metadata-api.md`).
//!
//! Two views, as in Druid:
//! - **served** (`/datasources/...`): what queries read, i.e. the live timeline
//!   ([`SegmentView`](dolmen_storage::SegmentView)): used segments that are not overshadowed.
//!   Dolmen has one tier, `_default_tier`, and one replica of each segment, so `replicatedSize`
//!   equals `size`. An unknown datasource answers 204 with no body, as Druid does.
//! - **metadata** (`/metadata/datasources/...`): what the metadata store holds: all used
//!   segments (overshadowed ones included) and, on request, unused ones. An unknown
//!   datasource answers 404 `{error}`.
//!
//! Marking segments used or unused (`POST`/`DELETE /datasources/{ds}`, `markUsed`,
//! `markUnused`, single segments) commits in the metadata store, then rebuilds the datasource's
//! timeline before answering, so the next SQL query already sees the change. Nothing is deleted
//! from deep storage: only a `kill` task does that (`DELETE /datasources/{ds}/intervals/{i}`
//! submits one).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dolmen_common::Interval;
use dolmen_common::time::{format_iso_millis, now_millis};
use dolmen_metadata::{SegmentRecord, SegmentSelector};
use dolmen_segment::{DataSegment, Timeline};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ResourceError;
use crate::tasks::require_json;

/// Dolmen's only tier (Druid's default tier name).
pub const DEFAULT_TIER: &str = "_default_tier";

/// Druid's default window of `GET /datasources/{ds}/loadstatus` without `interval`: the last
/// 14 days (`DataSourcesResource.DEFAULT_LOADSTATUS_INTERVAL_OFFSET`), ms.
pub const DEFAULT_LOADSTATUS_WINDOW_MS: i64 = 14 * 24 * 60 * 60 * 1000;

type Params = Query<HashMap<String, String>>;

/// A flag query parameter as Druid reads them (`?full`, `?simple`, `?includeUnused`): present
/// means on, unless its value is `false`.
fn flag(params: &HashMap<String, String>, name: &str) -> bool {
    params
        .get(name)
        .is_some_and(|v| !v.eq_ignore_ascii_case("false"))
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// Parses an interval given in a path or query parameter (`/` or `_` delimited).
fn parse_interval(field: &str, text: &str) -> Result<Interval, ResourceError> {
    Interval::parse(text)
        .map_err(|e| ResourceError::new(400, format!("{field} [{text}] is invalid: {}", e.0)))
}

/// Sorts segments as Druid's `SegmentId` order: interval start, end, version, partition.
fn sort_segments<S: AsRef<DataSegment>>(segments: &mut [S]) {
    segments.sort_by(|a, b| {
        let (a, b) = (a.as_ref(), b.as_ref());
        (
            a.interval.start,
            a.interval.end,
            &a.version,
            a.shard_spec.partition_num(),
        )
            .cmp(&(
                b.interval.start,
                b.interval.end,
                &b.version,
                b.shard_spec.partition_num(),
            ))
    });
}

/// The segments of a datasource that queries read (its timeline's visible segments), sorted;
/// `None` when the datasource has none.
fn served_segments(state: &AppState, data_source: &str) -> Option<Vec<Arc<DataSegment>>> {
    let timeline = state.view.timeline(data_source)?;
    let mut segments: Vec<Arc<DataSegment>> = timeline
        .visible_segments()
        .into_iter()
        .filter(|s| state.view.is_loaded(&s.identifier))
        .collect();
    if segments.is_empty() {
        return None;
    }
    sort_segments(&mut segments);
    Some(segments)
}

/// Druid's simple datasource properties (`DataSourcesResource.getSimpleDatasource`):
/// `{"tiers": {"_default_tier": {size, segmentCount, replicatedSize}}, "segments": {maxTime,
/// size, minTime, count, replicatedSize}}`; sizes in bytes, times ISO 8601.
pub fn simple_properties<'a>(
    tier: &str,
    segments: impl IntoIterator<Item = &'a DataSegment>,
) -> Value {
    let (mut size, mut count) = (0u64, 0u64);
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    for s in segments {
        size += s.size;
        count += 1;
        min = min.min(s.interval.start);
        max = max.max(s.interval.end);
    }
    let mut tiers = serde_json::Map::new();
    if count > 0 {
        tiers.insert(
            tier.into(),
            json!({"size": size, "segmentCount": count, "replicatedSize": size}),
        );
    }
    json!({
        "tiers": tiers,
        "segments": {
            "maxTime": (count > 0).then(|| format_iso_millis(max)),
            "size": size,
            "minTime": (count > 0).then(|| format_iso_millis(min)),
            "count": count,
            "replicatedSize": size,
        }
    })
}

/// Druid's full datasource object (`ImmutableDruidDataSource`): `{name, properties, segments}`.
fn full_datasource<'a>(
    name: &str,
    properties: Value,
    segments: impl IntoIterator<Item = &'a DataSegment>,
) -> Value {
    json!({
        "name": name,
        "properties": properties,
        "segments": segments.into_iter().collect::<Vec<_>>(),
    })
}

fn segment_ids<'a>(segments: impl IntoIterator<Item = &'a DataSegment>) -> Value {
    Value::Array(
        segments
            .into_iter()
            .map(|s| Value::String(s.identifier.clone()))
            .collect(),
    )
}

/// Rebuilds a datasource's timeline after its segments changed, so queries see the change
/// at once.
async fn refresh(state: &AppState, data_source: &str) -> Result<(), ResourceError> {
    state
        .view
        .refresh_data_source(data_source)
        .await
        .map_err(|e| {
            ResourceError::new(
                500,
                format!(
                    "segments of datasource [{data_source}] changed in the metadata store, but the query timeline could not be refreshed (it catches up within the refresh period): {e}"
                ),
            )
        })
}

/// Sets the used flag of the selected segments, refreshes the timeline when something
/// changed, and answers `{"numChangedSegments": n}`.
async fn change_used(
    state: &AppState,
    data_source: &str,
    selector: &SegmentSelector,
    used: bool,
) -> Result<u64, ResourceError> {
    let n = state
        .metadata
        .set_segments_used(data_source, selector, used)
        .await?;
    tracing::info!(data_source, used, changed = n, "marked segments");
    if n > 0 {
        refresh(state, data_source).await?;
    }
    Ok(n)
}

async fn known_data_source(state: &AppState, data_source: &str) -> Result<bool, ResourceError> {
    Ok(state
        .metadata
        .all_data_source_names()
        .await?
        .iter()
        .any(|d| d == data_source))
}

// --- served view: /datasources ---

/// `GET /datasources[?simple|?full]`: names of the datasources queries can read, sorted; with
/// `simple`, `[{name, properties}]`; with `full`, `[{name, properties, segments}]`.
pub(crate) async fn list_datasources(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Json<Value> {
    let names: Vec<String> = state
        .view
        .data_sources()
        .into_iter()
        .filter(|ds| served_segments(&state, ds).is_some())
        .collect();
    if !flag(&params, "full") && !flag(&params, "simple") {
        return Json(json!(names));
    }
    let mut out = Vec::new();
    for name in names {
        let Some(segs) = served_segments(&state, &name) else {
            continue;
        };
        out.push(if flag(&params, "full") {
            full_datasource(&name, json!({}), segs.iter().map(AsRef::as_ref))
        } else {
            json!({"name": name, "properties": simple_properties(state.coordinator.tier(), segs.iter().map(AsRef::as_ref))})
        });
    }
    Json(Value::Array(out))
}

/// `GET /datasources/{ds}[?full]`: the simple properties (or the full object); 204 when queries
/// see no segment of the datasource.
pub(crate) async fn get_datasource(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Response {
    let Some(segs) = served_segments(&state, &data_source) else {
        return no_content();
    };
    let segs = segs.iter().map(AsRef::as_ref);
    if flag(&params, "full") {
        Json(full_datasource(&data_source, json!({}), segs)).into_response()
    } else {
        Json(simple_properties(state.coordinator.tier(), segs)).into_response()
    }
}

/// `POST /datasources/{ds}`: marks every unused segment of the datasource used;
/// `{"numChangedSegments": n}` (200 with 0 for an unknown datasource, as Druid).
/// Overshadowed segments may become used; the timeline keeps hiding them.
pub(crate) async fn mark_all_used(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    let n = change_used(&state, &data_source, &SegmentSelector::All, true).await?;
    Ok(Json(json!({ "numChangedSegments": n })))
}

/// `DELETE /datasources/{ds}`: marks every segment of the datasource unused (a soft delete;
/// files stay in deep storage); `{"numChangedSegments": n}`, 200 with 0 for an unknown
/// datasource. The deprecated form `?kill=true&interval=a_b` submits a kill task instead and
/// answers 200 with an empty body.
pub(crate) async fn mark_all_unused(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Response, ResourceError> {
    if params
        .get("kill")
        .is_some_and(|k| k.eq_ignore_ascii_case("true"))
    {
        let text = params.get("interval").ok_or_else(|| {
            ResourceError::new(
                400,
                "interval: required with kill=true (e.g. 2015-09-12_2015-09-13)",
            )
        })?;
        let interval = parse_interval("interval", text)?;
        submit_kill(&state, &data_source, interval).await?;
        return Ok(StatusCode::OK.into_response());
    }
    let n = change_used(&state, &data_source, &SegmentSelector::All, false).await?;
    Ok(Json(json!({ "numChangedSegments": n })).into_response())
}

/// Body of `markUsed` / `markUnused`: exactly one of `interval` and `segmentIds`; `versions`
/// only with `interval` (Druid's `MarkDataSourceSegmentsPayload`).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MarkPayload {
    interval: Option<String>,
    segment_ids: Option<Vec<String>>,
    versions: Option<Vec<String>>,
}

/// Parses and checks a `markUsed` / `markUnused` body into a selector.
///
/// # Errors
/// 400 naming the field: not JSON, unknown field, both or neither of `interval` and
/// `segmentIds`, empty `segmentIds`, `versions` without `interval`, a bad interval.
fn parse_mark_payload(body: &[u8]) -> Result<SegmentSelector, ResourceError> {
    let bad = |m: String| ResourceError::new(400, m);
    let mut de = serde_json::Deserializer::from_slice(body);
    let p: MarkPayload = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || path.is_empty() {
            bad(format!("Invalid request payload: {inner}"))
        } else {
            bad(format!("Invalid request payload: {path}: {inner}"))
        }
    })?;
    match (p.interval, p.segment_ids) {
        (Some(_), Some(_)) | (None, None) => Err(bad(
            "Invalid request payload: exactly one of [interval] and [segmentIds] must be given"
                .into(),
        )),
        (Some(text), None) => Ok(SegmentSelector::Interval {
            interval: parse_interval("interval", &text)?,
            versions: p.versions,
        }),
        (None, Some(ids)) => {
            if p.versions.is_some() {
                return Err(bad(
                    "Invalid request payload: versions can be given only with interval".into(),
                ));
            }
            if ids.is_empty() {
                return Err(bad("Invalid request payload: segmentIds is empty".into()));
            }
            Ok(SegmentSelector::Ids(ids))
        }
    }
}

async fn mark_with_payload(
    state: &AppState,
    data_source: &str,
    headers: &HeaderMap,
    body: &[u8],
    used: bool,
) -> Result<Response, ResourceError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ResourceError::new(
            400,
            "Invalid request payload: a JSON body with [interval] or [segmentIds] is required",
        ));
    }
    require_json(headers, "the segments to mark")?;
    let selector = parse_mark_payload(body)?;
    if !known_data_source(state, data_source).await? {
        return Ok(no_content());
    }
    if let SegmentSelector::Ids(ids) = &selector {
        let mut unknown = Vec::new();
        for id in ids {
            let found = state.metadata.segment(id).await?;
            if found.is_none_or(|r| r.segment.data_source != data_source) {
                unknown.push(id.as_str());
            }
        }
        if !unknown.is_empty() {
            return Err(ResourceError::new(
                404,
                format!(
                    "segmentIds: unknown segments of datasource [{data_source}]: {unknown:?}; nothing was changed"
                ),
            ));
        }
    }
    let n = change_used(state, data_source, &selector, used).await?;
    Ok(Json(json!({ "numChangedSegments": n })).into_response())
}

/// `POST /datasources/{ds}/markUsed` with `{"interval": "a/b"}` (segments fully inside,
/// optionally `"versions": [...]`) or `{"segmentIds": [...]}`: `{"numChangedSegments": n}`.
/// 400 naming the field for a bad body, 415 for a non-JSON content type, 204 for an unknown
/// datasource (as Druid), 404 `{error}` listing segment ids that are not segments of the
/// datasource (nothing is changed then).
pub(crate) async fn mark_used(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    mark_with_payload(&state, &data_source, &headers, &body, true).await
}

/// `POST /datasources/{ds}/markUnused`: as [`mark_used`], marking unused (a soft delete).
pub(crate) async fn mark_unused(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    mark_with_payload(&state, &data_source, &headers, &body, false).await
}

async fn mark_one(
    state: &AppState,
    data_source: &str,
    segment_id: &str,
    used: bool,
) -> Result<Json<Value>, ResourceError> {
    let selector = SegmentSelector::Ids(vec![segment_id.to_string()]);
    let n = change_used(state, data_source, &selector, used).await?;
    Ok(Json(json!({ "segmentStateChanged": n > 0 })))
}

/// `POST /datasources/{ds}/segments/{segmentId}`: marks one segment used;
/// `{"segmentStateChanged": bool}` (false when it was used already or is unknown, as Druid).
pub(crate) async fn mark_segment_used(
    State(state): State<Arc<AppState>>,
    Path((data_source, segment_id)): Path<(String, String)>,
) -> Result<Json<Value>, ResourceError> {
    mark_one(&state, &data_source, &segment_id, true).await
}

/// `DELETE /datasources/{ds}/segments/{segmentId}`: marks one segment unused;
/// `{"segmentStateChanged": bool}`.
pub(crate) async fn mark_segment_unused(
    State(state): State<Arc<AppState>>,
    Path((data_source, segment_id)): Path<(String, String)>,
) -> Result<Json<Value>, ResourceError> {
    mark_one(&state, &data_source, &segment_id, false).await
}

/// `GET /datasources/{ds}/segments[?full]`: ids (or payloads) of the served segments; 204
/// for an unknown datasource.
pub(crate) async fn list_served_segments(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Response {
    let Some(segs) = served_segments(&state, &data_source) else {
        return no_content();
    };
    let segs = segs.iter().map(AsRef::as_ref);
    if flag(&params, "full") {
        Json(json!(segs.collect::<Vec<_>>())).into_response()
    } else {
        Json(segment_ids(segs)).into_response()
    }
}

/// `GET /datasources/{ds}/segments/{segmentId}`: `{"metadata": segment, "servers":
/// ["host:port"]}`; 204 for an unknown datasource or a segment queries do not read.
pub(crate) async fn get_served_segment(
    State(state): State<Arc<AppState>>,
    Path((data_source, segment_id)): Path<(String, String)>,
) -> Response {
    let Some(segs) = served_segments(&state, &data_source) else {
        return no_content();
    };
    match segs.iter().find(|s| s.identifier == segment_id) {
        Some(s) => {
            Json(json!({"metadata": s.as_ref(), "servers": [state.host_port()]})).into_response()
        }
        None => no_content(),
    }
}

/// Intervals of the given segments, newest first (Druid: start then end, reversed).
fn intervals_newest_first<'a>(
    segments: impl IntoIterator<Item = &'a DataSegment>,
) -> Vec<Interval> {
    let mut v: Vec<Interval> = segments.into_iter().map(|s| s.interval).collect();
    v.sort_by_key(|iv| std::cmp::Reverse((iv.start, iv.end)));
    v.dedup();
    v
}

/// Per-interval answers of `intervals?simple` (`{interval: {size, count}}`) and
/// `intervals?full` (`{interval: {segmentId: {metadata, servers}}}`), newest first.
fn per_interval(state: &AppState, segments: &[&DataSegment], full: bool) -> Value {
    let mut out = serde_json::Map::new();
    for iv in intervals_newest_first(segments.iter().copied()) {
        let in_iv = segments.iter().filter(|s| s.interval == iv);
        let v = if full {
            let mut m = serde_json::Map::new();
            for s in in_iv {
                m.insert(
                    s.identifier.clone(),
                    json!({"metadata": s, "servers": [state.host_port()]}),
                );
            }
            Value::Object(m)
        } else {
            let (size, count) = in_iv.fold((0u64, 0u64), |(z, c), s| (z + s.size, c + 1));
            json!({"size": size, "count": count})
        };
        out.insert(iv.to_string(), v);
    }
    Value::Object(out)
}

/// `GET /datasources/{ds}/intervals[?simple|?full]`: the intervals of the served segments,
/// newest first, as `start/end` ISO strings; 204 for an unknown datasource.
pub(crate) async fn list_intervals(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Response {
    let Some(segs) = served_segments(&state, &data_source) else {
        return no_content();
    };
    let segs: Vec<&DataSegment> = segs.iter().map(AsRef::as_ref).collect();
    if flag(&params, "full") || flag(&params, "simple") {
        return Json(per_interval(&state, &segs, flag(&params, "full"))).into_response();
    }
    let ivs: Vec<String> = intervals_newest_first(segs)
        .iter()
        .map(Interval::to_string)
        .collect();
    Json(json!(ivs)).into_response()
}

/// `GET /datasources/{ds}/intervals/{interval}[?simple|?full]`: ids of the served segments
/// lying fully inside the interval (`_` delimited); 400 for a bad interval, 204 for an unknown
/// datasource.
pub(crate) async fn get_interval(
    State(state): State<Arc<AppState>>,
    Path((data_source, interval)): Path<(String, String)>,
    Query(params): Params,
) -> Result<Response, ResourceError> {
    let iv = parse_interval("interval", &interval)?;
    let Some(segs) = served_segments(&state, &data_source) else {
        return Ok(no_content());
    };
    let inside: Vec<&DataSegment> = segs
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| iv.contains(&s.interval))
        .collect();
    if flag(&params, "full") || flag(&params, "simple") {
        return Ok(Json(per_interval(&state, &inside, flag(&params, "full"))).into_response());
    }
    Ok(Json(segment_ids(inside)).into_response())
}

/// Submits a kill task as the coordinator API does (`api-issued_kill_...` ids).
async fn submit_kill(
    state: &AppState,
    data_source: &str,
    interval: Interval,
) -> Result<String, ResourceError> {
    let id = format!(
        "api-issued_{}",
        dolmen_overlord::generate_kill_task_id(data_source, interval, now_millis())
    );
    let id = state
        .overlord
        .submit(json!({
            "type": "kill",
            "id": id,
            "dataSource": data_source,
            "interval": interval.to_string(),
        }))
        .await?;
    tracing::info!(task_id = %id, data_source, %interval, "submitted kill task");
    Ok(id)
}

/// `DELETE /datasources/{ds}/intervals/{interval}`: submits a `kill` task that permanently
/// deletes the unused segments of the datasource inside the interval (`_` delimited); 200
/// with an empty body, as Druid. 400 for a bad interval or datasource name.
pub(crate) async fn kill_interval(
    State(state): State<Arc<AppState>>,
    Path((data_source, interval)): Path<(String, String)>,
) -> Result<Response, ResourceError> {
    let iv = parse_interval("interval", &interval)?;
    submit_kill(&state, &data_source, iv).await?;
    Ok(StatusCode::OK.into_response())
}

/// `GET /datasources/{ds}/tiers`: `["_default_tier"]` when queries read the datasource, else
/// `[]`.
pub(crate) async fn list_tiers(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
) -> Json<Value> {
    let tiers: Vec<String> = served_segments(&state, &data_source)
        .map(|_| vec![state.coordinator.tier().to_string()])
        .unwrap_or_default();
    Json(json!(tiers))
}

// --- load status ---

/// Load state of a datasource's used, non-overshadowed segments (per the metadata store) that
/// overlap an interval: how many should be served, how many queries can read now, and the
/// replicas still missing per tier (Druid's under-replication counts).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct LoadCounts {
    /// Segments the rules want loaded somewhere (all but those of zero-replica load rules).
    expected: usize,
    /// Of those, the ones this process serves.
    loaded: usize,
    /// Replicas missing per tier (this process holds at most one replica on its own tier).
    missing: std::collections::BTreeMap<String, u64>,
}

impl LoadCounts {
    fn percent(&self) -> f64 {
        if self.expected == 0 {
            100.0
        } else {
            100.0 * self.loaded as f64 / self.expected as f64
        }
    }
    fn unavailable(&self) -> usize {
        self.expected - self.loaded
    }
}

async fn load_counts(
    state: &AppState,
    data_source: &str,
    interval: Option<Interval>,
) -> Result<LoadCounts, ResourceError> {
    let used = state.metadata.used_segments(data_source, None).await?;
    let visible: Vec<Arc<DataSegment>> = Timeline::build(used.into_iter().map(Arc::new))
        .visible_segments()
        .into_iter()
        .filter(|s| interval.is_none_or(|iv| iv.overlaps(&s.interval)))
        .collect();
    let served: HashSet<String> = state
        .view
        .timeline(data_source)
        .map(|t| {
            t.visible_segments()
                .iter()
                .filter(|s| state.view.is_loaded(&s.identifier))
                .map(|s| s.identifier.clone())
                .collect()
        })
        .unwrap_or_default();
    let decisions = state.view.load_decisions();
    let tier = state.coordinator.tier();
    let mut counts = LoadCounts::default();
    counts.missing.insert(tier.to_string(), 0);
    for s in &visible {
        let here = served.contains(&s.identifier);
        match decisions.segments.get(&s.identifier) {
            // Not evaluated yet: expected on this process's tier.
            None => {
                counts.expected += 1;
                counts.loaded += usize::from(here);
                *counts.missing.entry(tier.to_string()).or_default() += u64::from(!here);
            }
            Some(load) => {
                if load.replication_factor() > 0 {
                    counts.expected += 1;
                    counts.loaded += usize::from(here);
                }
                for t in load.required.keys() {
                    let missing = load.missing_on(t, t == tier && here);
                    *counts.missing.entry(t.clone()).or_default() += u64::from(missing);
                }
            }
        }
    }
    Ok(counts)
}

/// `GET /datasources/{ds}/loadstatus[?simple|?full][&interval=a_b][&forceMetadataRefresh=b]`:
/// `{ds: percent}` of the used, non-overshadowed segments overlapping the interval that queries
/// can read; `simple`: `{ds: segments left to load}`; `full`: `{"_default_tier": {ds: left}}`.
/// The interval defaults to the last 14 days, as Druid; 204 when no used segment overlaps it.
///
/// Dolmen has no load queue: historicals load segments on demand from the local segment cache,
/// so a used segment is "loaded" as soon as it is in the live timeline (right after its publish
/// or markUsed). The answer is therefore 100.0 except while another process's change has not
/// reached this server's timeline yet. `forceMetadataRefresh=true` rebuilds the timeline from
/// the metadata store first (Druid requires the parameter; Dolmen treats it as optional, default
/// false).
pub(crate) async fn datasource_load_status(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Response, ResourceError> {
    let force = match params.get("forceMetadataRefresh").map(String::as_str) {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            return Err(ResourceError::new(
                400,
                format!("forceMetadataRefresh [{v}] must be true or false"),
            ));
        }
    };
    let interval = match params.get("interval") {
        Some(text) => parse_interval("interval", text)?,
        None => {
            let now = now_millis();
            Interval {
                start: now - DEFAULT_LOADSTATUS_WINDOW_MS,
                end: now,
            }
        }
    };
    if force {
        refresh(&state, &data_source).await?;
    }
    let counts = load_counts(&state, &data_source, Some(interval)).await?;
    if counts.expected == 0 && counts.missing.values().all(|m| *m == 0) && counts.loaded == 0 {
        // Nothing overlapping is used, or nothing is meant to be loaded.
        let any = state
            .metadata
            .used_segments(&data_source, Some(interval))
            .await?;
        if any.is_empty() {
            return Ok(no_content());
        }
    }
    let body = if flag(&params, "simple") {
        json!({ data_source: counts.unavailable() })
    } else if flag(&params, "full") {
        Value::Object(
            counts
                .missing
                .iter()
                .map(|(t, m)| (t.clone(), json!({ data_source.clone(): m })))
                .collect(),
        )
    } else {
        json!({ data_source: counts.percent() })
    };
    Ok(Json(body).into_response())
}

/// `GET /loadstatus[?simple|?full]`: for every datasource with used segments, the percent of
/// its used, non-overshadowed segments queries can read (`{ds: percent}`, Druid's
/// `CoordinatorResource.getLoadStatus`); `simple`: `{ds: segments left}`; `full`:
/// `{"_default_tier": {ds: segments left}}`.
pub(crate) async fn load_status(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    let mut out = serde_json::Map::new();
    let mut full: std::collections::BTreeMap<String, serde_json::Map<String, Value>> =
        std::collections::BTreeMap::new();
    full.entry(state.coordinator.tier().to_string())
        .or_default();
    for ds in state.metadata.data_sources().await? {
        let c = load_counts(&state, &ds, None).await?;
        for (tier, missing) in &c.missing {
            full.entry(tier.clone())
                .or_default()
                .insert(ds.clone(), json!(missing));
        }
        let v = if flag(&params, "simple") {
            json!(c.unavailable())
        } else {
            json!(c.percent())
        };
        out.insert(ds, v);
    }
    Ok(Json(if flag(&params, "full") {
        Value::Object(
            full.into_iter()
                .map(|(t, m)| (t, Value::Object(m)))
                .collect(),
        )
    } else {
        Value::Object(out)
    }))
}

// --- metadata view: /metadata/datasources ---

/// The properties of a datasource as the metadata store knows it: `{"created": ISO}`, the
/// publish time of its oldest segment.
fn metadata_properties(records: &[SegmentRecord]) -> Value {
    match records.iter().map(|r| r.created_ms).min() {
        Some(ms) => json!({ "created": format_iso_millis(ms) }),
        None => json!({}),
    }
}

/// `GET /metadata/datasources[?includeUnused|?includeDisabled][&full]`: names of datasources
/// with used segments (with `includeUnused`, of all datasources with any segment); `full`
/// (ignored with `includeUnused`, as Druid) gives `[{name, properties, segments}]`.
pub(crate) async fn metadata_datasources(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    if flag(&params, "includeUnused") || flag(&params, "includeDisabled") {
        return Ok(Json(json!(state.metadata.all_data_source_names().await?)));
    }
    let names = state.metadata.data_sources().await?;
    if !flag(&params, "full") {
        return Ok(Json(json!(names)));
    }
    let mut out = Vec::new();
    for name in names {
        let recs = state.metadata.segments(&name, false).await?;
        out.push(full_datasource(
            &name,
            metadata_properties(&recs),
            recs.iter().map(|r| &r.segment),
        ));
    }
    Ok(Json(Value::Array(out)))
}

fn metadata_not_found(data_source: &str) -> ResourceError {
    ResourceError::new(
        404,
        format!("datasource [{data_source}] has no used segments in the metadata store"),
    )
}

/// `GET /metadata/datasources/{ds}`: `{name, properties: {created}, segments}` with the used
/// segments; 404 `{error}` when there are none.
pub(crate) async fn metadata_datasource(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    let recs = state.metadata.segments(&data_source, false).await?;
    if recs.is_empty() {
        return Err(metadata_not_found(&data_source));
    }
    Ok(Json(full_datasource(
        &data_source,
        metadata_properties(&recs),
        recs.iter().map(|r| &r.segment),
    )))
}

/// `GET /metadata/datasources/{ds}/segments[?full][&includeUnused]`: ids (or payloads) of the
/// used segments; with `includeUnused` (a Dolmen addition) unused ones too. 404 `{error}` when
/// there are none.
pub(crate) async fn metadata_segments(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    let include_unused = flag(&params, "includeUnused");
    let recs = state
        .metadata
        .segments(&data_source, include_unused)
        .await?;
    if recs.is_empty() {
        return Err(if include_unused {
            ResourceError::new(
                404,
                format!("datasource [{data_source}] has no segments in the metadata store"),
            )
        } else {
            metadata_not_found(&data_source)
        });
    }
    let segs = recs.iter().map(|r| &r.segment);
    Ok(Json(if flag(&params, "full") {
        json!(segs.collect::<Vec<_>>())
    } else {
        segment_ids(segs)
    }))
}

/// `GET /metadata/datasources/{ds}/segments/{segmentId}[?includeUnused=true]`: the segment's
/// payload; 404 `{error}` when it is unknown, belongs to another datasource, or is unused
/// (without `includeUnused`).
pub(crate) async fn metadata_segment(
    State(state): State<Arc<AppState>>,
    Path((data_source, segment_id)): Path<(String, String)>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    let include_unused = flag(&params, "includeUnused");
    match state.metadata.segment(&segment_id).await? {
        Some(r) if r.segment.data_source == data_source && (r.used || include_unused) => {
            Ok(Json(json!(r.segment)))
        }
        _ => Err(ResourceError::new(
            404,
            format!(
                "segment [{segment_id}] of datasource [{data_source}] is not found{}",
                if include_unused {
                    ""
                } else {
                    " among used segments (add includeUnused=true to look at unused ones)"
                }
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use dolmen_segment::{LoadSpec, ShardSpec};

    use super::*;

    fn seg(iv: &str, size: u64) -> DataSegment {
        let interval = Interval::parse(iv).unwrap();
        DataSegment {
            data_source: "ds".into(),
            interval,
            version: "v1".into(),
            load_spec: LoadSpec::Local { path: "/x".into() },
            dimensions: String::new(),
            metrics: String::new(),
            shard_spec: ShardSpec::Numbered {
                partition_num: 0,
                partitions: 1,
            },
            binary_version: 9,
            size,
            num_rows: 1,
            columns: vec![],
            last_compaction_state: None,
            identifier: format!("ds_{}_v1", interval.to_underscore_string()),
        }
    }

    #[test]
    fn simple_properties_sum_sizes_and_span_times() {
        let a = seg("2015-09-12/2015-09-13", 10);
        let b = seg("2015-09-14/2015-09-15", 5);
        let p = simple_properties(DEFAULT_TIER, [&a, &b]);
        assert_eq!(
            p,
            json!({
                "tiers": {"_default_tier": {"size": 15, "segmentCount": 2, "replicatedSize": 15}},
                "segments": {
                    "maxTime": "2015-09-15T00:00:00.000Z", "size": 15,
                    "minTime": "2015-09-12T00:00:00.000Z", "count": 2, "replicatedSize": 15
                }
            })
        );
        assert_eq!(simple_properties(DEFAULT_TIER, [])["segments"]["count"], 0);
    }

    #[test]
    fn intervals_are_newest_first_and_distinct() {
        let a = seg("2015-09-12/2015-09-13", 1);
        let b = seg("2015-09-14/2015-09-15", 1);
        let ivs: Vec<String> = intervals_newest_first([&a, &b, &a])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            ivs,
            vec![
                "2015-09-14T00:00:00.000Z/2015-09-15T00:00:00.000Z",
                "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
            ]
        );
    }

    #[test]
    fn mark_payloads_need_exactly_one_selector() {
        let ok = parse_mark_payload(br#"{"interval": "2015-09-12/2015-09-13"}"#).unwrap();
        assert!(matches!(
            ok,
            SegmentSelector::Interval { versions: None, .. }
        ));
        let ok =
            parse_mark_payload(br#"{"interval": "2015-09-12_2015-09-13", "versions": ["v1"]}"#)
                .unwrap();
        assert!(matches!(
            ok,
            SegmentSelector::Interval {
                versions: Some(_),
                ..
            }
        ));
        let ok = parse_mark_payload(br#"{"segmentIds": ["a", "b"]}"#).unwrap();
        assert_eq!(ok, SegmentSelector::Ids(vec!["a".into(), "b".into()]));
        let msg = |body: &[u8]| parse_mark_payload(body).unwrap_err();
        for (body, needle) in [
            (&br#"{}"#[..], "exactly one"),
            (
                br#"{"interval": "2015/2016", "segmentIds": ["a"]}"#,
                "exactly one",
            ),
            (br#"{"segmentIds": []}"#, "segmentIds"),
            (br#"{"segmentIds": ["a"], "versions": ["v"]}"#, "versions"),
            (br#"{"interval": "nope"}"#, "interval [nope]"),
            (br#"{"segmentIds": "a"}"#, "segmentIds"),
            (br#"{"intervals": "2015/2016"}"#, "intervals"),
            (br#"[1]"#, "Invalid request payload"),
            (br#"not json"#, "Invalid request payload"),
        ] {
            let e = msg(body);
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(
                e.message.contains(needle),
                "{}: {}",
                String::from_utf8_lossy(body),
                e.message
            );
        }
    }

    #[test]
    fn flags_are_present_unless_false() {
        let p: HashMap<String, String> = [("full", ""), ("simple", "false"), ("x", "true")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(flag(&p, "full"));
        assert!(!flag(&p, "simple"));
        assert!(flag(&p, "x"));
        assert!(!flag(&p, "absent"));
    }

    #[test]
    fn load_counts_percent() {
        let c = LoadCounts {
            expected: 4,
            loaded: 3,
            ..LoadCounts::default()
        };
        assert_eq!(c.percent(), 75.0);
        assert_eq!(c.unavailable(), 1);
    }
}
