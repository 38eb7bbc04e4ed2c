//! The lookups API under `/coordinator/v1/lookups/...` (Druid's `LookupCoordinatorResource`;
//! `docs/api-reference/lookups-api.md`, `docs/querying/lookups.md` "Dynamic configuration").
//!
//! | route | answer |
//! |---|---|
//! | `GET /config` | 200 the configured tier names; 404 before lookups are initialized. `?discover=true`: 200 the configured tiers plus the tier this process announces (`__default`), initialized or not |
//! | `POST /config` | `{tier: {name: {version, lookupExtractorFactory}}}` adds or replaces those lookups (none is deleted): 202 with the body echoed. Only `{}` is accepted before lookups are initialized (it initializes them) |
//! | `GET /config/all` | 200 the whole configuration; 404 before initialization |
//! | `GET /config/{tier}` | 200 the tier's lookup names, with `?detailed=true` its definitions; 404 for an unknown tier |
//! | `DELETE /config/{tier}` | 202, the tier and its lookups removed; 404 for an unknown tier |
//! | `GET /config/{tier}/{name}` | 200 `{version, lookupExtractorFactory}`; 404 `lookup [name] not found` |
//! | `POST /config/{tier}/{name}` | `{version, lookupExtractorFactory}` adds or replaces it: 202, no body |
//! | `DELETE /config/{tier}/{name}` | 202 (the tier goes with its last lookup); 404 when unknown |
//! | `GET /status[/{tier}[/{name}]]` | 200 `{tier: {name: {"loaded": bool}}}` (per tier: `{name: ...}`; one lookup: `{"loaded": bool}`), `?detailed=true` adds `"pendingNodes": ["host:port"]`; 404 `No lookups found`, `No lookups found for tier [t].`, `Lookup [n] not found for tier [t].` |
//! | `GET /nodeStatus[?discover=true][&detailed=false]` | 200 `{tier: {"host:port": {current, toLoad, toDrop}}}` (simple form: versions instead of definitions) |
//! | `GET /nodeStatus/{tier}` | 200 `{"host:port": {current, toLoad, toDrop}}` |
//! | `GET /nodeStatus/{tier}/{host:port}` | 200 `{current, toLoad, toDrop}`; 404 `Node [h:p] status is unknown.` |
//!
//! Rules (Druid's `LookupCoordinatorManager`, see [`dolmen_lookup::manager`]): every definition
//! needs a `version`, and replacing one needs a greater version (compared as strings); a bulk
//! update is all or nothing. Dolmen also checks the factory when it is posted (Druid's
//! coordinator stores any object and lets the query processes fail): an unknown `type` or field
//! is a 400 naming it. Boolean parameters read as Druid's (`Boolean.valueOf`): only `true`
//! (any case) is true, so a bare `?detailed` is false.
//!
//! Errors are `{"error": message}` (Druid's `ServletResourceUtils`). Where Druid fails an
//! update with 500 (a version that is not greater, a missing version, not initialized) Dolmen
//! answers 400 with Druid's message; where Druid answers 404 with an empty body, Dolmen adds a
//! message. A change committed by another process sharing the metadata store meanwhile is a
//! 409 (retry). Bodies must be `application/json` (415 otherwise; Smile is not read).
//!
//! One Dolmen process serves every tier (ADR 0014): status reports it as the one node of each
//! tier, `loaded` when it serves that definition or a newer one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dolmen_lookup::spec::parse_body;
use dolmen_lookup::{DEFAULT_TIER, LookupContainer, LookupManager, LookupsConfig};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::error::ResourceError;
use crate::tasks::require_json;

type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The path parameters, or a 400 `{error}` when they do not decode (e.g. percent-encoded bytes
/// that are not UTF-8).
fn path_params<T>(p: Result<Path<T>, PathRejection>) -> Result<T, ResourceError> {
    p.map(|Path(t)| t)
        .map_err(|e| ResourceError::new(400, format!("invalid path: {}", e.body_text())))
}

fn query_params(q: Params) -> Result<HashMap<String, String>, ResourceError> {
    q.map(|Query(q)| q)
        .map_err(|e| ResourceError::new(400, format!("invalid query: {}", e.body_text())))
}

/// A boolean query parameter as Jersey reads a `boolean` (`Boolean.valueOf`): when present,
/// `true` in any case is true and anything else false; when absent, `default`.
fn bool_param(params: &HashMap<String, String>, name: &str, default: bool) -> bool {
    params
        .get(name)
        .map_or(default, |v| v.eq_ignore_ascii_case("true"))
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

fn not_found(message: impl Into<String>) -> ResourceError {
    ResourceError::new(404, message)
}

fn no_lookups() -> ResourceError {
    not_found("No lookups found")
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The configuration, or 404 when lookups are not initialized.
fn initialized(manager: &LookupManager) -> Result<Arc<Option<LookupsConfig>>, ResourceError> {
    let config = manager.config();
    if config.is_none() {
        return Err(no_lookups());
    }
    Ok(config)
}

// --- configuration ---

/// `GET /config[?discover=true]`.
pub(crate) async fn get_tiers(
    State(state): State<Arc<AppState>>,
    params: Params,
) -> Result<Json<Value>, ResourceError> {
    let params = query_params(params)?;
    if bool_param(&params, "discover", false) {
        return Ok(Json(json!(state.lookups.discovered_tiers())));
    }
    let config = initialized(&state.lookups)?;
    let tiers: Vec<&String> = config
        .as_ref()
        .as_ref()
        .map(|c| c.tiers.keys().collect())
        .unwrap_or_default();
    Ok(Json(json!(tiers)))
}

/// `POST /config`: a bulk update; 202 echoing the body.
pub(crate) async fn post_config(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    require_json(&headers, "lookup configurations")?;
    let update: LookupsConfig = parse_body(&body)?;
    state.lookups.update(update.clone()).await?;
    tracing::info!(tiers = update.tiers.len(), "lookups updated");
    Ok((StatusCode::ACCEPTED, Json(update)).into_response())
}

/// `GET /config/all`.
pub(crate) async fn get_all(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    let config = initialized(&state.lookups)?;
    Ok(Json(to_value(config.as_ref())))
}

/// `GET /config/{tier}[?detailed=true]`.
pub(crate) async fn get_tier(
    State(state): State<Arc<AppState>>,
    tier: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ResourceError> {
    let tier = path_params(tier)?;
    let params = query_params(params)?;
    let config = initialized(&state.lookups)?;
    let lookups = config
        .as_ref()
        .as_ref()
        .and_then(|c| c.tiers.get(&tier))
        .ok_or_else(|| not_found(format!("Tier [{tier}] not found")))?;
    Ok(Json(if bool_param(&params, "detailed", false) {
        to_value(lookups)
    } else {
        json!(lookups.keys().collect::<Vec<_>>())
    }))
}

/// `DELETE /config/{tier}`.
pub(crate) async fn delete_tier(
    State(state): State<Arc<AppState>>,
    tier: Result<Path<String>, PathRejection>,
) -> Result<Response, ResourceError> {
    let tier = path_params(tier)?;
    delete_tier_named(&state, &tier).await
}

/// `DELETE /config/all`: the tier named `all` (Druid's resource matches `/config/{tier}`
/// there; only `GET` is the whole configuration).
pub(crate) async fn delete_tier_all(
    State(state): State<Arc<AppState>>,
) -> Result<Response, ResourceError> {
    delete_tier_named(&state, "all").await
}

async fn delete_tier_named(state: &AppState, tier: &str) -> Result<Response, ResourceError> {
    if state.lookups.delete_tier(tier).await? {
        tracing::info!(tier, "lookup tier deleted");
        Ok(accepted())
    } else {
        Err(not_found(format!("Tier [{tier}] not found")))
    }
}

/// `GET /config/{tier}/{name}`.
pub(crate) async fn get_lookup(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Value>, ResourceError> {
    let (tier, name) = path_params(path)?;
    let config = state.lookups.config();
    let container = config
        .as_ref()
        .as_ref()
        .and_then(|c| c.get(&tier, &name))
        .ok_or_else(|| not_found(format!("lookup [{name}] not found")))?;
    Ok(Json(to_value(container)))
}

/// `POST /config/{tier}/{name}`: adds or replaces one lookup; 202 without a body.
pub(crate) async fn post_lookup(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    let (tier, name) = path_params(path)?;
    require_json(&headers, "a lookup definition")?;
    let container: LookupContainer = parse_body(&body)?;
    state.lookups.update_lookup(&tier, &name, container).await?;
    tracing::info!(tier, lookup = name, "lookup updated");
    Ok(accepted())
}

/// `DELETE /config/{tier}/{name}`.
pub(crate) async fn delete_lookup(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ResourceError> {
    let (tier, name) = path_params(path)?;
    if state.lookups.delete_lookup(&tier, &name).await? {
        tracing::info!(tier, lookup = name, "lookup deleted");
        Ok(accepted())
    } else {
        Err(not_found(format!(
            "lookup [{name}] not found in tier [{tier}]"
        )))
    }
}

// --- status ---

fn tier_status(
    manager: &LookupManager,
    lookups: &BTreeMap<String, LookupContainer>,
    detailed: bool,
) -> Value {
    Value::Object(
        lookups
            .iter()
            .map(|(name, def)| (name.clone(), to_value(&manager.status(name, def, detailed))))
            .collect(),
    )
}

/// `GET /status[?detailed=true]`.
pub(crate) async fn status(
    State(state): State<Arc<AppState>>,
    params: Params,
) -> Result<Json<Value>, ResourceError> {
    let detailed = bool_param(&query_params(params)?, "detailed", false);
    let config = initialized(&state.lookups)?;
    let tiers = &config.as_ref().as_ref().map(|c| &c.tiers);
    let out: Map<String, Value> = tiers
        .iter()
        .flat_map(|t| t.iter())
        .map(|(tier, lookups)| (tier.clone(), tier_status(&state.lookups, lookups, detailed)))
        .collect();
    Ok(Json(Value::Object(out)))
}

/// `GET /status/{tier}[?detailed=true]`.
pub(crate) async fn tier_status_route(
    State(state): State<Arc<AppState>>,
    tier: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ResourceError> {
    let tier = path_params(tier)?;
    let detailed = bool_param(&query_params(params)?, "detailed", false);
    let config = initialized(&state.lookups)?;
    let lookups = config
        .as_ref()
        .as_ref()
        .and_then(|c| c.tiers.get(&tier))
        .ok_or_else(|| not_found(format!("No lookups found for tier [{tier}].")))?;
    Ok(Json(tier_status(&state.lookups, lookups, detailed)))
}

/// `GET /status/{tier}/{name}[?detailed=true]`.
pub(crate) async fn lookup_status(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ResourceError> {
    let (tier, name) = path_params(path)?;
    let detailed = bool_param(&query_params(params)?, "detailed", false);
    let config = initialized(&state.lookups)?;
    let config = config.as_ref().as_ref();
    let lookups = config
        .and_then(|c| c.tiers.get(&tier))
        .ok_or_else(|| not_found(format!("No lookups found for tier [{tier}].")))?;
    let def = lookups
        .get(&name)
        .ok_or_else(|| not_found(format!("Lookup [{name}] not found for tier [{tier}].")))?;
    Ok(Json(to_value(&state.lookups.status(&name, def, detailed))))
}

// --- node status ---

/// This process's lookups state (Druid's `LookupsState`): `current` the loaded lookups,
/// `toLoad` the ones whose load failed and is retried, `toDrop` empty (Dolmen drops at once);
/// `detailed`: definitions, else their versions.
fn node_state(manager: &LookupManager, detailed: bool) -> Value {
    let mut current = Map::new();
    let mut to_load = Map::new();
    for (name, served) in manager.registry().snapshot().iter() {
        let entry = if detailed {
            to_value(&served.container)
        } else {
            json!(served.container.version)
        };
        if served.map().is_some() {
            current.insert(name.clone(), entry);
        } else {
            to_load.insert(name.clone(), entry);
        }
    }
    json!({"current": current, "toLoad": to_load, "toDrop": []})
}

/// The tiers this process is a node of: every configured tier and `__default`.
fn node_in_tier(manager: &LookupManager, tier: &str) -> bool {
    tier == DEFAULT_TIER
        || manager
            .config()
            .as_ref()
            .as_ref()
            .is_some_and(|c| c.tiers.contains_key(tier))
}

/// `GET /nodeStatus[?discover=true][&detailed=false]`.
pub(crate) async fn node_status(
    State(state): State<Arc<AppState>>,
    params: Params,
) -> Result<Json<Value>, ResourceError> {
    let params = query_params(params)?;
    let detailed = bool_param(&params, "detailed", true);
    let tiers: Vec<String> = if bool_param(&params, "discover", false) {
        state.lookups.discovered_tiers()
    } else {
        let config = state.lookups.config();
        let Some(config) = config.as_ref() else {
            return Err(not_found("No lookups configured."));
        };
        config.tiers.keys().cloned().collect()
    };
    let node = node_state(&state.lookups, detailed);
    let out: Map<String, Value> = tiers
        .into_iter()
        .map(|t| (t, json!({ state.lookups.node(): node.clone() })))
        .collect();
    Ok(Json(Value::Object(out)))
}

/// `GET /nodeStatus/{tier}`.
pub(crate) async fn tier_node_status(
    State(state): State<Arc<AppState>>,
    tier: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ResourceError> {
    let tier = path_params(tier)?;
    if !node_in_tier(&state.lookups, &tier) {
        return Ok(Json(json!({})));
    }
    Ok(Json(
        json!({ state.lookups.node(): node_state(&state.lookups, true) }),
    ))
}

/// `GET /nodeStatus/{tier}/{host:port}`.
pub(crate) async fn one_node_status(
    State(state): State<Arc<AppState>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Value>, ResourceError> {
    let (_tier, node) = path_params(path)?;
    if node != state.lookups.node() {
        return Err(not_found(format!("Node [{node}] status is unknown.")));
    }
    Ok(Json(node_state(&state.lookups, true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_read_as_java_boolean_value_of() {
        let p: HashMap<String, String> = [("a", "TRUE"), ("b", ""), ("c", "yes"), ("d", "true")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(bool_param(&p, "a", false));
        assert!(!bool_param(&p, "b", true), "a bare flag is false");
        assert!(!bool_param(&p, "c", false));
        assert!(bool_param(&p, "d", false));
        assert!(bool_param(&p, "absent", true));
        assert!(!bool_param(&p, "absent", false));
    }
}
