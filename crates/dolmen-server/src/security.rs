//! Authentication and authorization of every request, in one place, and the user/role API
//! (`/service-ext/basic-security/...`, `/druid-ext/basic-security/...`).
//!
//! With security off ([`AppState::security`] is `None`) nothing here runs: no layer is added
//! and the guards pass every request on untouched.
//!
//! With security on:
//! 1. [`authenticate`] (a layer over the whole router) lets Druid's unsecured paths through
//!    (`/status/health`, the leader checks, `service.auth.unsecuredPaths`) and runs the
//!    authenticator chain on every other request: 401 with `WWW-Authenticate: Basic` when
//!    nobody authenticated it, or the credentials are wrong.
//! 2. Every route carries the [`Guard`] of [`ROUTE_GUARDS`], the one table that says what each
//!    path needs (Druid's resource filters). [`ApiRoutes`] attaches it when the route is added;
//!    a path missing from the table gets [`Guard::Unclassified`], which denies everything, and
//!    the test `every_route_is_classified` fails. The action follows the method as in Druid's
//!    `AbstractResourceFilter`: GET and HEAD read, anything else writes.
//! 3. A denied request is 403 with Druid's body before the handler runs; nothing executes.
//!
//! To classify a new route: add its path constant to [`ROUTE_GUARDS`] with its guard.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, RawPathParams, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{MethodRouter, get, post};
use bytes::Bytes;
use dolmen_auth::{Action, AuthError, AuthnOutcome, Identity, Resource, ResourceAction, Security};
use serde_json::{Value, json};

use crate::error::ResourceError;
use crate::{AppState, paths};

/// What a route needs. The action comes from the method (GET/HEAD: READ, others: WRITE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Served without authentication (Druid's unsecured paths).
    Open,
    /// `STATE` named `STATE`.
    State,
    /// `CONFIG` named `CONFIG` (dynamic configuration; lookups).
    Config,
    /// `CONFIG` named `security` (the user/role API).
    Security,
    /// `DATASOURCE` named by the path parameter.
    Datasource(&'static str),
    /// `DATASOURCE` of the task whose id is the path parameter (404 `text/plain` for an
    /// unknown id, as Druid's `TaskResourceFilter`).
    Task(&'static str),
    /// `DATASOURCE` of the supervisor whose id is the path parameter (404 `text/plain` for an
    /// unknown id, as Druid's `SupervisorResourceFilter`).
    Supervisor(&'static str),
    /// An async statement whose id is the path parameter: its submitter, or `STATE` (READ to
    /// read, WRITE to cancel), as Druid's `SqlStatementResource`. An unknown id goes on to the
    /// handler's own 404.
    Statement(&'static str),
    /// `DATASOURCE` WRITE on the datasource of the task in the body.
    TaskSubmit,
    /// `DATASOURCE` WRITE on the datasource of the supervisor spec in the body.
    SupervisorSubmit,
    /// A SQL statement in the body: READ on every datasource it reads, `EXTERNAL` READ for
    /// `EXTERN`, WRITE on an `INSERT`/`REPLACE` target, `STATE` READ for the server tables
    /// of `sys` (`servers`, `server_segments`, `server_properties`), `SYSTEM_TABLE` READ for
    /// each `sys` table with `authorizeSystemTablesDirectly`. Rows of `sys` and
    /// `INFORMATION_SCHEMA` tables are filtered to the datasources the user may read (the
    /// synchronous endpoint; statements reading them are refused with security on).
    Sql,
    /// Any authenticated user; a JSON array answer keeps only the elements naming a datasource
    /// the user may read (Druid filters these lists the same way).
    ReadableRows,
    /// Cancelling the synchronous queries of the `sqlQueryId` in the path parameter: READ on
    /// every resource they use (spec); an id with no running query goes on to the handler's 404.
    SqlCancel(&'static str),
    /// Another guard for GET/HEAD and another for other methods.
    ByMethod(&'static Guard, &'static Guard),
    /// Not in [`ROUTE_GUARDS`]: denied (a route must be classified to be reachable).
    Unclassified,
}

/// The one table of what every route needs, by path constant. Paths of the API tree are
/// relative to `/service` and `/druid`; the basic-security API's to `/service-ext` and
/// `/druid-ext`.
pub const ROUTE_GUARDS: &[(&str, Guard)] = &[
    // root
    (paths::STATUS, Guard::State),
    (paths::STATUS_HEALTH, Guard::Open),
    (paths::STATUS_SELF_DISCOVERED, Guard::State),
    (paths::METRICS, Guard::State),
    // SQL
    (paths::SQL, Guard::Sql),
    (paths::SQL_QUERY, Guard::SqlCancel("id")),
    (paths::SQL_STATEMENTS, Guard::Sql),
    (paths::SQL_STATEMENTS_ENABLED, Guard::ReadableRows),
    (paths::SQL_STATEMENT, Guard::Statement("id")),
    (paths::SQL_STATEMENT_RESULTS, Guard::Statement("id")),
    (paths::SQL_TASK, Guard::Sql),
    (paths::SQL_TASK_ENABLED, Guard::ReadableRows),
    // supervisors
    (
        paths::SUPERVISORS,
        Guard::ByMethod(&Guard::ReadableRows, &Guard::SupervisorSubmit),
    ),
    (paths::SUPERVISORS_HISTORY, Guard::State),
    (paths::SUPERVISORS_TERMINATE_ALL, Guard::State),
    (paths::SUPERVISORS_SUSPEND_ALL, Guard::State),
    (paths::SUPERVISORS_RESUME_ALL, Guard::State),
    (paths::SUPERVISOR, Guard::Supervisor("id")),
    (paths::SUPERVISOR_STATUS, Guard::Supervisor("id")),
    (paths::SUPERVISOR_HEALTH, Guard::Supervisor("id")),
    (paths::SUPERVISOR_STATS, Guard::Supervisor("id")),
    (paths::SUPERVISOR_HISTORY, Guard::Supervisor("id")),
    (paths::SUPERVISOR_SUSPEND, Guard::Supervisor("id")),
    (paths::SUPERVISOR_RESUME, Guard::Supervisor("id")),
    (paths::SUPERVISOR_RESET, Guard::Supervisor("id")),
    (paths::SUPERVISOR_RESET_OFFSETS, Guard::Supervisor("id")),
    (paths::SUPERVISOR_TERMINATE, Guard::Supervisor("id")),
    (paths::SUPERVISOR_SHUTDOWN, Guard::Supervisor("id")),
    (paths::SUPERVISOR_HANDOFF, Guard::Supervisor("id")),
    // tasks
    (paths::TASK_SUBMIT, Guard::TaskSubmit),
    (paths::TASK, Guard::Task("task_id")),
    (paths::TASK_STATUS, Guard::Task("task_id")),
    (paths::TASK_REPORTS, Guard::Task("task_id")),
    (paths::TASK_LOG, Guard::Task("task_id")),
    (paths::TASK_SEGMENTS, Guard::Task("task_id")),
    (paths::TASK_SHUTDOWN, Guard::Task("task_id")),
    (paths::TASKS, Guard::ReadableRows),
    (paths::COMPLETE_TASKS, Guard::ReadableRows),
    (paths::RUNNING_TASKS, Guard::ReadableRows),
    (paths::WAITING_TASKS, Guard::ReadableRows),
    (paths::PENDING_TASKS, Guard::ReadableRows),
    (paths::SHUTDOWN_ALL_TASKS, Guard::Datasource("data_source")),
    (paths::TASK_STATUSES, Guard::State),
    (paths::PENDING_SEGMENTS, Guard::Datasource("data_source")),
    (paths::INDEXER_IS_LEADER, Guard::Open),
    (paths::INDEXER_LEADER, Guard::State),
    (paths::COORDINATOR_IS_LEADER, Guard::Open),
    (paths::COORDINATOR_LEADER, Guard::State),
    // coordinator: retention rules (Druid's RulesResource: STATE for every datasource,
    // RulesResourceFilter on one), dynamic configuration (ConfigResourceFilter), workers
    // (StateResourceFilter)
    (paths::RULES, Guard::State),
    (paths::RULES_HISTORY, Guard::State),
    (paths::DATASOURCE_RULES, Guard::Datasource("data_source")),
    (
        paths::DATASOURCE_RULES_HISTORY,
        Guard::Datasource("data_source"),
    ),
    (paths::COORDINATOR_CONFIG, Guard::Config),
    (paths::COORDINATOR_CONFIG_HISTORY, Guard::Config),
    (paths::WORKER_CONFIG, Guard::Config),
    (paths::WORKER_CONFIG_HISTORY, Guard::Config),
    (paths::WORKERS, Guard::State),
    (paths::SCALING, Guard::State),
    // compaction: configuration (ConfigResourceFilter), status (StateResourceFilter)
    (paths::COMPACTION_CONFIG, Guard::Config),
    (paths::COMPACTION_TASKSLOTS, Guard::Config),
    (paths::COMPACTION_DATASOURCE_CONFIG, Guard::Config),
    (paths::COMPACTION_DATASOURCE_HISTORY, Guard::Config),
    (paths::COMPACTION_PROGRESS, Guard::State),
    (paths::COMPACTION_STATUS, Guard::State),
    (paths::OVERLORD_COMPACTION_CLUSTER, Guard::Config),
    (paths::OVERLORD_COMPACTION_DATASOURCES, Guard::Config),
    (paths::OVERLORD_COMPACTION_DATASOURCE, Guard::Config),
    (paths::OVERLORD_COMPACTION_DATASOURCE_HISTORY, Guard::Config),
    (paths::OVERLORD_COMPACTION_STATUSES, Guard::State),
    (paths::OVERLORD_COMPACTION_STATUS, Guard::State),
    (paths::OVERLORD_COMPACTION_SUPERVISOR_ENABLED, Guard::State),
    // coordinator: datasources and segments
    (paths::LOAD_STATUS, Guard::State),
    (paths::DATASOURCES, Guard::ReadableRows),
    (paths::DATASOURCE, Guard::Datasource("data_source")),
    (
        paths::DATASOURCE_INTERVALS,
        Guard::Datasource("data_source"),
    ),
    (paths::DATASOURCE_INTERVAL, Guard::Datasource("data_source")),
    (paths::DATASOURCE_SEGMENTS, Guard::Datasource("data_source")),
    (paths::DATASOURCE_SEGMENT, Guard::Datasource("data_source")),
    (
        paths::DATASOURCE_MARK_USED,
        Guard::Datasource("data_source"),
    ),
    (
        paths::DATASOURCE_MARK_UNUSED,
        Guard::Datasource("data_source"),
    ),
    (
        paths::DATASOURCE_LOAD_STATUS,
        Guard::Datasource("data_source"),
    ),
    (paths::DATASOURCE_TIERS, Guard::Datasource("data_source")),
    (paths::METADATA_DATASOURCES, Guard::ReadableRows),
    (paths::METADATA_DATASOURCE, Guard::Datasource("data_source")),
    (paths::METADATA_SEGMENTS, Guard::Datasource("data_source")),
    (paths::METADATA_SEGMENT, Guard::Datasource("data_source")),
    // lookups (Druid: CONFIG)
    (paths::LOOKUPS_CONFIG, Guard::Config),
    (paths::LOOKUPS_CONFIG_ALL, Guard::Config),
    (paths::LOOKUPS_TIER, Guard::Config),
    (paths::LOOKUPS_LOOKUP, Guard::Config),
    (paths::LOOKUPS_STATUS, Guard::Config),
    (paths::LOOKUPS_TIER_STATUS, Guard::Config),
    (paths::LOOKUPS_LOOKUP_STATUS, Guard::Config),
    (paths::LOOKUPS_NODE_STATUS, Guard::Config),
    (paths::LOOKUPS_TIER_NODE_STATUS, Guard::Config),
    (paths::LOOKUPS_NODE, Guard::Config),
    // basic security (Druid: CONFIG `security`)
    (paths::AUTHN_LOAD_STATUS, Guard::Security),
    (paths::AUTHN_REFRESH_ALL, Guard::Security),
    (paths::AUTHN_USERS, Guard::Security),
    (paths::AUTHN_USER, Guard::Security),
    (paths::AUTHN_USER_CREDENTIALS, Guard::Security),
    (paths::AUTHZ_LOAD_STATUS, Guard::Security),
    (paths::AUTHZ_REFRESH_ALL, Guard::Security),
    (paths::AUTHZ_USERS, Guard::Security),
    (paths::AUTHZ_USER, Guard::Security),
    (paths::AUTHZ_USER_ROLE, Guard::Security),
    (paths::AUTHZ_ROLES, Guard::Security),
    (paths::AUTHZ_ROLE, Guard::Security),
    (paths::AUTHZ_ROLE_PERMISSIONS, Guard::Security),
];

/// The guard of a route path ([`Guard::Unclassified`] when the table lacks it).
pub fn guard_for(path: &str) -> Guard {
    ROUTE_GUARDS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, g)| *g)
        .unwrap_or(Guard::Unclassified)
}

/// A router builder that attaches each route's [`Guard`] and remembers the paths it added, so
/// a test can enumerate the router.
#[derive(Debug)]
pub struct ApiRoutes {
    routes: Vec<(&'static str, MethodRouter<Arc<AppState>>)>,
}

impl Default for ApiRoutes {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiRoutes {
    /// No routes.
    pub fn new() -> ApiRoutes {
        ApiRoutes { routes: Vec::new() }
    }

    /// Adds a route (as `Router::route`).
    pub fn route(mut self, path: &'static str, method_router: MethodRouter<Arc<AppState>>) -> Self {
        self.routes.push((path, method_router));
        self
    }

    /// The paths added, in order.
    pub fn paths(&self) -> Vec<&'static str> {
        self.routes.iter().map(|(p, _)| *p).collect()
    }

    /// The router, each route behind its guard.
    pub fn into_router(self, state: &Arc<AppState>) -> Router<Arc<AppState>> {
        let mut r = Router::new();
        for (path, mr) in self.routes {
            let guard = guard_for(path);
            r = r.route(
                path,
                mr.layer(middleware::from_fn_with_state(
                    Arc::clone(state),
                    move |s: State<Arc<AppState>>, req: Request, next: Next| {
                        authorize(guard, s, req, next)
                    },
                )),
            );
        }
        r
    }
}

/// Druid's 401 body (`{"error":"Unauthorized request",...}`), with `WWW-Authenticate: Basic`.
fn unauthorized(state: &AppState, message: &str) -> Response {
    let mut r = (
        StatusCode::UNAUTHORIZED,
        Json(json!({
            "error": message,
            "errorMessage": null,
            "errorClass": null,
            "host": state.host_port(),
        })),
    )
        .into_response();
    if state
        .security
        .as_ref()
        .is_some_and(|s| s.has_basic_authenticator())
    {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"dolmen\""),
        );
    }
    r
}

/// Druid's 403: `{"Access-Check-Result":"Unauthorized"}`, or the same as `text/plain` on the
/// basic-security API (`BasicSecurityResourceFilter`).
fn forbidden(text: bool) -> Response {
    if text {
        (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain")],
            "Access-Check-Result: Unauthorized",
        )
            .into_response()
    } else {
        (
            StatusCode::FORBIDDEN,
            Json(json!({"Access-Check-Result": "Unauthorized"})),
        )
            .into_response()
    }
}

fn not_found_text(message: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain")],
        message,
    )
        .into_response()
}

fn auth_failure(e: AuthError) -> Response {
    tracing::error!(error = %e, "authorization check failed");
    crate::error::ResourceError::new(e.http_status(), e.to_string()).into_response()
}

/// The layer over the whole router: runs the authenticator chain (see the module docs) and
/// leaves the [`Identity`] in the request's extensions.
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(security) = state.security.as_ref() else {
        return next.run(req).await;
    };
    if security.is_unsecured_path(req.uri().path()) {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match security.authenticate(header).await {
        Ok(AuthnOutcome::Authenticated(identity)) => {
            req.extensions_mut().insert(identity);
            next.run(req).await
        }
        Ok(AuthnOutcome::Rejected(message)) => unauthorized(&state, &message),
        Ok(AuthnOutcome::Unauthenticated) => unauthorized(&state, "Unauthorized request"),
        Err(e) => auth_failure(e),
    }
}

/// Whether `identity` may do every one of `wanted`.
async fn allowed(
    security: &Security,
    identity: &Identity,
    wanted: &[ResourceAction],
) -> Result<bool, AuthError> {
    for w in wanted {
        if !security.authorize(identity, w).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn path_param(req: &mut Request, name: &str) -> Option<String> {
    use axum::RequestExt;
    let params = req.extract_parts::<RawPathParams>().await.ok()?;
    params
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The datasource of a supervisor spec (`spec.dataSchema.dataSource` or `dataSchema.dataSource`).
fn supervisor_data_source(spec: &Value) -> Option<String> {
    spec.pointer("/spec/dataSchema/dataSource")
        .or_else(|| spec.pointer("/dataSchema/dataSource"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

async fn buffer_body(req: Request) -> Result<(Request, Bytes), Response> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, crate::MAX_REQUEST_BODY_BYTES)
        .await
        .map_err(|e| {
            crate::error::ResourceError::new(400, format!("cannot read the request body: {e}"))
                .into_response()
        })?;
    Ok((Request::from_parts(parts, Body::from(bytes.clone())), bytes))
}

/// What a SQL request touches and needs; `Err` is the response to send instead (the request's
/// own 400).
async fn sql_resources(
    state: &AppState,
    security: &Security,
    headers: &axum::http::HeaderMap,
    body: &Bytes,
) -> Result<
    (
        Vec<ResourceAction>,
        dolmen_query::engine::StatementResources,
    ),
    Response,
> {
    let host = state.host_port();
    let q = crate::sql::parse_request(headers, body).map_err(|e| {
        let mut r = crate::error::SqlError {
            error: e.error,
            host: host.clone(),
        }
        .into_response();
        *r.status_mut() = e.status;
        r
    })?;
    let prepared = state.engine.prepare(&q).map_err(|error| {
        crate::error::SqlError {
            error,
            host: host.clone(),
        }
        .into_response()
    })?;
    let resources = state
        .engine
        .resources_of(&prepared)
        .await
        .map_err(|error| crate::error::SqlError { error, host }.into_response())?;
    let wanted = sql_resource_actions(&resources, security.authorize_system_tables_directly());
    Ok((wanted, resources))
}

/// The `sys` and `INFORMATION_SCHEMA` tables a statement reads (lookups are not filtered).
fn system_tables_read(resources: &dolmen_query::engine::StatementResources) -> Vec<&str> {
    resources
        .other_tables
        .iter()
        .map(String::as_str)
        .filter(|t| !t.starts_with("lookup."))
        .collect()
}

/// `sys` tables that show servers: Druid's `SystemSchema.checkStateReadAccessForServers`
/// requires `STATE` READ for them.
const SERVER_SYS_TABLES: [&str; 3] = ["servers", "server_segments", "server_properties"];

/// A [`dolmen_query::system::DatasourceReadAccess`] over a user's resolved grants.
#[derive(Debug)]
struct GrantsAccess(dolmen_auth::Grants);

impl dolmen_query::system::DatasourceReadAccess for GrantsAccess {
    fn can_read(&self, data_source: &str) -> bool {
        self.0.allows(&ResourceAction::new(
            Resource::datasource(data_source),
            Action::Read,
        ))
    }
}

/// What a statement touching `resources` needs (see [`Guard::Sql`]); `system_tables_directly`
/// is [`Security::authorize_system_tables_directly`].
pub(crate) fn sql_resource_actions(
    resources: &dolmen_query::engine::StatementResources,
    system_tables_directly: bool,
) -> Vec<ResourceAction> {
    let mut wanted: Vec<ResourceAction> = resources
        .data_sources_read
        .iter()
        .map(|ds| ResourceAction::new(Resource::datasource(ds), Action::Read))
        .collect();
    if resources.external {
        wanted.push(ResourceAction::new(Resource::external(), Action::Read));
    }
    if let Some(target) = &resources.write_target {
        wanted.push(ResourceAction::new(
            Resource::datasource(target.clone()),
            Action::Write,
        ));
    }
    // Lookups are readable by any authenticated user (Druid). `INFORMATION_SCHEMA` and the
    // `sys` tables of datasource rows need nothing more: their rows are filtered per
    // datasource (`GrantsAccess`); the server tables need STATE READ (Druid).
    let sys = resources
        .other_tables
        .iter()
        .filter_map(|t| t.strip_prefix("sys."));
    let mut state_read = false;
    for table in sys {
        state_read |= SERVER_SYS_TABLES.contains(&table);
        if system_tables_directly {
            wanted.push(ResourceAction::new(
                Resource::system_table(table),
                Action::Read,
            ));
        }
    }
    if state_read {
        wanted.push(ResourceAction::new(Resource::state(), Action::Read));
    }
    wanted
}

/// Keeps the elements of a JSON array answer that name a datasource the user may read: a
/// string is a datasource name; an object names it in `dataSource`, `datasource`, `name`,
/// `spec.dataSchema.dataSource` or `id` (a supervisor id is its datasource by default). An
/// element naming none is dropped.
async fn filter_rows(security: &Security, identity: &Identity, resp: Response) -> Response {
    if resp.status() != StatusCode::OK {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&bytes) else {
        // Not a list (e.g. `{"enabled": true}`): nothing to filter.
        return Response::from_parts(parts, Body::from(bytes));
    };
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        let name = match &item {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => ["dataSource", "datasource", "name"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string))
                .or_else(|| supervisor_data_source(&item))
                .or_else(|| o.get("id").and_then(Value::as_str).map(str::to_string)),
            _ => None,
        };
        let Some(name) = name else { continue };
        let wanted = ResourceAction::new(Resource::datasource(name), Action::Read);
        match security.authorize(identity, &wanted).await {
            Ok(true) => kept.push(item),
            Ok(false) => {}
            Err(e) => return auth_failure(e),
        }
    }
    let body = serde_json::to_vec(&kept).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// The per-route guard (see [`Guard`]).
async fn authorize(
    guard: Guard,
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(security) = state.security.clone() else {
        return next.run(req).await;
    };
    let action = Action::for_method(req.method().as_str());
    let guard = match guard {
        Guard::ByMethod(read, write) => {
            if action == Action::Read {
                *read
            } else {
                *write
            }
        }
        g => g,
    };
    if guard == Guard::Open {
        return next.run(req).await;
    }
    let Some(identity) = req.extensions().get::<Identity>().cloned() else {
        return unauthorized(&state, "Unauthorized request");
    };
    let text_403 = guard == Guard::Security;
    let wanted: Vec<ResourceAction> = match guard {
        Guard::Open | Guard::ByMethod(..) => Vec::new(),
        Guard::Unclassified => return forbidden(false),
        Guard::State => vec![ResourceAction::new(Resource::state(), action)],
        Guard::Config => vec![ResourceAction::new(Resource::config(), action)],
        Guard::Security => vec![ResourceAction::new(Resource::security(), action)],
        Guard::Datasource(param) => {
            let Some(ds) = path_param(&mut req, param).await else {
                return forbidden(false);
            };
            vec![ResourceAction::new(Resource::datasource(ds), action)]
        }
        Guard::Task(param) => {
            let Some(id) = path_param(&mut req, param).await else {
                return forbidden(false);
            };
            match state.metadata.get_task(&id).await {
                Ok(Some(t)) => vec![ResourceAction::new(
                    Resource::datasource(t.data_source),
                    action,
                )],
                Ok(None) => return not_found_text(format!("Cannot find any task with id: [{id}]")),
                Err(e) => return crate::error::ResourceError::from(e).into_response(),
            }
        }
        Guard::SqlCancel(param) => {
            let Some(id) = path_param(&mut req, param).await else {
                return forbidden(false);
            };
            match state.queries.resources(&id) {
                Some(r) => r,
                None => return next.run(req).await,
            }
        }
        Guard::Statement(param) => {
            let Some(id) = path_param(&mut req, param).await else {
                return forbidden(false);
            };
            match state.metadata.get_task(&id).await {
                Ok(Some(t)) if t.task_type == "query_controller" => {
                    let submitter = t.payload.get("submittedBy").and_then(Value::as_str);
                    if submitter == Some(identity.name.as_str()) {
                        return next.run(req).await;
                    }
                    vec![ResourceAction::new(Resource::state(), action)]
                }
                // Not a statement: the handler's 404, which tells nothing either way.
                Ok(_) => return next.run(req).await,
                Err(e) => return crate::error::ResourceError::from(e).into_response(),
            }
        }
        Guard::Supervisor(param) => {
            let Some(id) = path_param(&mut req, param).await else {
                return forbidden(false);
            };
            match state.supervisors.spec(&id) {
                Ok(spec) => match supervisor_data_source(&spec) {
                    Some(ds) => vec![ResourceAction::new(Resource::datasource(ds), action)],
                    None => return forbidden(false),
                },
                Err(_) => {
                    return not_found_text(format!("Cannot find any supervisor with id: [{id}]"));
                }
            }
        }
        Guard::TaskSubmit | Guard::SupervisorSubmit => {
            let (r, bytes) = match buffer_body(req).await {
                Ok(x) => x,
                Err(resp) => return resp,
            };
            req = r;
            let Ok(spec) = serde_json::from_slice::<Value>(&bytes) else {
                // Not JSON: the handler answers its 400; nothing runs.
                return next.run(req).await;
            };
            let ds = if guard == Guard::TaskSubmit {
                dolmen_overlord::spec::TaskSpec::from_json(&spec)
                    .ok()
                    .map(|t| t.data_source().to_string())
            } else {
                supervisor_data_source(&spec)
            };
            match ds {
                Some(ds) => vec![ResourceAction::new(Resource::datasource(ds), Action::Write)],
                // An invalid spec: the handler answers its 400 without running anything.
                None => return next.run(req).await,
            }
        }
        Guard::Sql => {
            let (r, bytes) = match buffer_body(req).await {
                Ok(x) => x,
                Err(resp) => return resp,
            };
            req = r;
            let (wanted, resources) =
                match sql_resources(&state, &security, req.headers(), &bytes).await {
                    Ok(w) => w,
                    Err(resp) => return resp,
                };
            let system_tables = system_tables_read(&resources);
            if !system_tables.is_empty() {
                // Rows of system tables are filtered per user only where the request's user
                // is known while the query runs: the synchronous endpoint. Statements run as
                // tasks later; Druid's msq-task engine does not read system tables either.
                if !req.uri().path().trim_end_matches('/').ends_with("/v2/sql") {
                    let error = dolmen_query::QueryError::InvalidInput(format!(
                        "Cannot query table(s) [{}] with SQL engine [msq-task]: with security on, system tables are read through the /druid/v2/sql endpoint",
                        system_tables.join(", ")
                    ));
                    return crate::error::SqlError {
                        error,
                        host: state.host_port(),
                    }
                    .into_response();
                }
                match security.grants(&identity).await {
                    Ok(g) => {
                        req.extensions_mut()
                            .insert(dolmen_query::system::SystemTableAccess(Arc::new(
                                GrantsAccess(g),
                            )));
                    }
                    Err(e) => return auth_failure(e),
                }
            }
            wanted
        }
        Guard::ReadableRows => {
            let resp = next.run(req).await;
            return filter_rows(&security, &identity, resp).await;
        }
    };
    match allowed(&security, &identity, &wanted).await {
        Ok(true) => next.run(req).await,
        Ok(false) => forbidden(text_403),
        Err(e) => auth_failure(e),
    }
}

// --- the basic-security API ---

type ApiResult = Result<Response, ResourceError>;

fn security_of(state: &AppState) -> Result<&Arc<Security>, ResourceError> {
    state.security.as_ref().ok_or_else(|| {
        ResourceError::new(
            404,
            "basic security is off: set service.auth.authenticatorChain",
        )
    })
}

fn api_error(e: AuthError) -> ResourceError {
    ResourceError::new(e.http_status(), e.to_string())
}

fn ok_empty() -> Response {
    StatusCode::OK.into_response()
}

fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name).is_some_and(|v| v.is_empty() || v == "true")
}

fn body_json(body: &Bytes) -> Result<Value, ResourceError> {
    serde_json::from_slice(body)
        .map_err(|e| ResourceError::new(400, format!("the body is not valid JSON: {e}")))
}

async fn authn_load_status(State(state): State<Arc<AppState>>) -> ApiResult {
    Ok(Json(security_of(&state)?.authentication_load_status()).into_response())
}

async fn authz_load_status(State(state): State<Arc<AppState>>) -> ApiResult {
    Ok(Json(security_of(&state)?.authorization_load_status()).into_response())
}

async fn refresh_all(State(state): State<Arc<AppState>>) -> ApiResult {
    security_of(&state)?.invalidate_all();
    Ok(ok_empty())
}

async fn authn_users(State(state): State<Arc<AppState>>, Path(authn): Path<String>) -> ApiResult {
    let s = security_of(&state)?;
    Ok(Json(s.authn_user_names(&authn).await.map_err(api_error)?).into_response())
}

async fn authn_user_get(
    State(state): State<Arc<AppState>>,
    Path((authn, user)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    Ok(Json(s.authn_user(&authn, &user).await.map_err(api_error)?).into_response())
}

async fn authn_user_post(
    State(state): State<Arc<AppState>>,
    Path((authn, user)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.create_authn_user(&authn, &user)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authn_user_delete(
    State(state): State<Arc<AppState>>,
    Path((authn, user)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.delete_authn_user(&authn, &user)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authn_credentials(
    State(state): State<Arc<AppState>>,
    Path((authn, user)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let s = security_of(&state)?;
    let v = body_json(&body)?;
    s.set_authn_credentials(&authn, &user, &v)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_users(State(state): State<Arc<AppState>>, Path(authz): Path<String>) -> ApiResult {
    let s = security_of(&state)?;
    Ok(Json(s.authz_user_names(&authz).await.map_err(api_error)?).into_response())
}

async fn authz_user_get(
    State(state): State<Arc<AppState>>,
    Path((authz, user)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let s = security_of(&state)?;
    let v = s
        .authz_user(
            &authz,
            &user,
            flag(&q, "full"),
            flag(&q, "simplifyPermissions"),
        )
        .await
        .map_err(api_error)?;
    Ok(Json(v).into_response())
}

async fn authz_user_post(
    State(state): State<Arc<AppState>>,
    Path((authz, user)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.create_authz_user(&authz, &user)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_user_delete(
    State(state): State<Arc<AppState>>,
    Path((authz, user)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.delete_authz_user(&authz, &user)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_user_role_post(
    State(state): State<Arc<AppState>>,
    Path((authz, user, role)): Path<(String, String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.set_authz_user_role(&authz, &user, &role, true)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_user_role_delete(
    State(state): State<Arc<AppState>>,
    Path((authz, user, role)): Path<(String, String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.set_authz_user_role(&authz, &user, &role, false)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_roles(State(state): State<Arc<AppState>>, Path(authz): Path<String>) -> ApiResult {
    let s = security_of(&state)?;
    Ok(Json(s.authz_role_names(&authz).await.map_err(api_error)?).into_response())
}

async fn authz_role_get(
    State(state): State<Arc<AppState>>,
    Path((authz, role)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let s = security_of(&state)?;
    let v = s
        .authz_role(
            &authz,
            &role,
            flag(&q, "full"),
            flag(&q, "simplifyPermissions"),
        )
        .await
        .map_err(api_error)?;
    Ok(Json(v).into_response())
}

async fn authz_role_post(
    State(state): State<Arc<AppState>>,
    Path((authz, role)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.create_authz_role(&authz, &role)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_role_delete(
    State(state): State<Arc<AppState>>,
    Path((authz, role)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    s.delete_authz_role(&authz, &role)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

async fn authz_permissions_get(
    State(state): State<Arc<AppState>>,
    Path((authz, role)): Path<(String, String)>,
) -> ApiResult {
    let s = security_of(&state)?;
    Ok(Json(
        s.authz_role_permissions(&authz, &role)
            .await
            .map_err(api_error)?,
    )
    .into_response())
}

async fn authz_permissions_post(
    State(state): State<Arc<AppState>>,
    Path((authz, role)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let s = security_of(&state)?;
    let v = body_json(&body)?;
    s.set_authz_role_permissions(&authz, &role, &v)
        .await
        .map_err(api_error)?;
    Ok(ok_empty())
}

/// The basic-security API routes, relative to `/service-ext` and `/druid-ext`.
pub fn security_routes() -> ApiRoutes {
    ApiRoutes::new()
        .route(paths::AUTHN_LOAD_STATUS, get(authn_load_status))
        .route(paths::AUTHN_REFRESH_ALL, get(refresh_all))
        .route(paths::AUTHN_USERS, get(authn_users))
        .route(
            paths::AUTHN_USER,
            get(authn_user_get)
                .post(authn_user_post)
                .delete(authn_user_delete),
        )
        .route(paths::AUTHN_USER_CREDENTIALS, post(authn_credentials))
        .route(paths::AUTHZ_LOAD_STATUS, get(authz_load_status))
        .route(paths::AUTHZ_REFRESH_ALL, get(refresh_all))
        .route(paths::AUTHZ_USERS, get(authz_users))
        .route(
            paths::AUTHZ_USER,
            get(authz_user_get)
                .post(authz_user_post)
                .delete(authz_user_delete),
        )
        .route(
            paths::AUTHZ_USER_ROLE,
            post(authz_user_role_post).delete(authz_user_role_delete),
        )
        .route(paths::AUTHZ_ROLES, get(authz_roles))
        .route(
            paths::AUTHZ_ROLE,
            get(authz_role_get)
                .post(authz_role_post)
                .delete(authz_role_delete),
        )
        .route(
            paths::AUTHZ_ROLE_PERMISSIONS,
            get(authz_permissions_get).post(authz_permissions_post),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_tables_need_state_only_for_servers_and_system_table_when_direct() {
        let resources = dolmen_query::engine::StatementResources {
            data_sources_read: vec!["wiki".into()],
            other_tables: vec![
                "INFORMATION_SCHEMA.TABLES".into(),
                "lookup.country".into(),
                "sys.segments".into(),
            ],
            ..Default::default()
        };
        let read = |r: Resource| ResourceAction::new(r, Action::Read);
        assert_eq!(
            sql_resource_actions(&resources, false),
            vec![read(Resource::datasource("wiki"))]
        );
        assert_eq!(
            sql_resource_actions(&resources, true),
            vec![
                read(Resource::datasource("wiki")),
                read(Resource::system_table("segments"))
            ]
        );
        let servers = dolmen_query::engine::StatementResources {
            other_tables: vec!["sys.server_segments".into(), "sys.servers".into()],
            ..Default::default()
        };
        assert_eq!(
            sql_resource_actions(&servers, false),
            vec![read(Resource::state())]
        );
        assert_eq!(
            sql_resource_actions(&servers, true),
            vec![
                read(Resource::system_table("server_segments")),
                read(Resource::system_table("servers")),
                read(Resource::state())
            ]
        );
    }

    /// Enumerates every route the router serves and fails on one without a guard.
    #[test]
    fn every_route_is_classified() {
        let mut unclassified = Vec::new();
        for p in crate::root_routes()
            .paths()
            .into_iter()
            .chain(crate::api_routes().paths())
            .chain(security_routes().paths())
        {
            if guard_for(p) == Guard::Unclassified {
                unclassified.push(p);
            }
        }
        assert!(
            unclassified.is_empty(),
            "routes without an entry in security::ROUTE_GUARDS: {unclassified:?}"
        );
        // And the table names no route that does not exist (a stale entry hides a rename).
        let all: Vec<&str> = crate::root_routes()
            .paths()
            .into_iter()
            .chain(crate::api_routes().paths())
            .chain(security_routes().paths())
            .collect();
        for (p, _) in ROUTE_GUARDS {
            assert!(
                all.contains(p),
                "ROUTE_GUARDS names [{p}], which no route serves"
            );
        }
    }
}
