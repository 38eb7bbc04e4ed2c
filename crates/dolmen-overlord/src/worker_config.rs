//! The overlord's dynamic configuration (Druid's `WorkerBehaviorConfig`,
//! `indexing/overlord/setup/*`): parsing and normalizing `POST /indexer/v1/worker` bodies, and
//! what the stored configuration means for this process ([`WorkerSelection`]).
//!
//! The normalized form is what Druid reads back: `{"type": "default", "selectStrategy": ...,
//! "autoScaler": ...}` with each strategy's fields filled in (`taskLimits` always present with
//! both maps, `affinityConfig` null when absent).

use serde_json::{Map, Value, json};

/// The worker select strategy types Druid registers (`WorkerSelectStrategy`).
pub const SELECT_STRATEGY_TYPES: [&str; 7] = [
    "equalDistribution",
    "equalDistributionWithAffinity",
    "equalDistributionWithCategorySpec",
    "fillCapacity",
    "fillCapacityWithAffinity",
    "fillCapacityWithCategorySpec",
    "javascript",
];

/// The configuration name, audit key and type of the overlord's dynamic configuration
/// (Druid's `WorkerBehaviorConfig.CONFIG_KEY`).
pub const WORKER_CONFIG_KEY: &str = "worker.config";

/// Druid's default worker category (`WorkerConfig.DEFAULT_CATEGORY`).
pub const DEFAULT_WORKER_CATEGORY: &str = "_default_worker_category";

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'a>(field: &str, v: &'a Value) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{field} must be a JSON object, not {}", kind(v)))
}

fn no_unknown(field: &str, m: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{field}: unknown property [{k}]; known: [{}]",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

fn bool_or(field: &str, v: Option<&Value>, default: bool) -> Result<bool, String> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(o) => Err(format!("{field} must be true or false, not {}", kind(o))),
    }
}

/// Parses and normalizes a worker behaviour config.
///
/// # Errors
/// A message naming the bad field: a body that is not an object, an unknown `type` or
/// strategy type, unknown properties, a missing `affinityConfig.affinity`, bad task limits
/// (Druid's messages), a `javascript` strategy (JavaScript is disabled, as by default in Druid).
pub fn parse_worker_config(body: &Value) -> Result<Value, String> {
    let m = match body {
        Value::Null => return Err("the worker configuration cannot be null".into()),
        v => object("the worker configuration", v)?,
    };
    no_unknown(
        "the worker configuration",
        m,
        &["type", "selectStrategy", "autoScaler"],
    )?;
    match m.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "default" => {}
        Some(other) => {
            return Err(format!(
                "type: Could not resolve type id [{other}]: known type ids = [default]"
            ));
        }
    }
    let strategy = match m.get("selectStrategy") {
        None | Some(Value::Null) => Value::Null,
        Some(v) => select_strategy(v)?,
    };
    let auto_scaler = match m.get("autoScaler") {
        None | Some(Value::Null) => Value::Null,
        Some(v) => Value::Object(object("autoScaler", v)?.clone()),
    };
    Ok(json!({"type": "default", "selectStrategy": strategy, "autoScaler": auto_scaler}))
}

fn select_strategy(v: &Value) -> Result<Value, String> {
    let m = object("selectStrategy", v)?;
    let ty = match m.get("type") {
        None | Some(Value::Null) => "equalDistribution",
        Some(Value::String(s)) if SELECT_STRATEGY_TYPES.contains(&s.as_str()) => s.as_str(),
        Some(other) => {
            return Err(format!(
                "selectStrategy.type: Could not resolve type id [{other}]: known type ids = [{}]",
                SELECT_STRATEGY_TYPES.join(", ")
            ));
        }
    };
    if ty == "javascript" {
        return Err(
            "selectStrategy.type: javascript is disabled (JavaScript-based features are off, as by default in Druid)"
                .into(),
        );
    }
    let mut out = Map::new();
    out.insert("type".into(), json!(ty));
    if ty.ends_with("CategorySpec") {
        no_unknown(
            "selectStrategy",
            m,
            &["type", "workerCategorySpec", "taskLimits"],
        )?;
        out.insert(
            "workerCategorySpec".into(),
            match m.get("workerCategorySpec") {
                None | Some(Value::Null) => Value::Null,
                Some(v) => category_spec(v)?,
            },
        );
    } else {
        no_unknown(
            "selectStrategy",
            m,
            &["type", "affinityConfig", "taskLimits"],
        )?;
        out.insert(
            "affinityConfig".into(),
            match m.get("affinityConfig") {
                None | Some(Value::Null) => Value::Null,
                Some(v) => affinity_config(v)?,
            },
        );
    }
    out.insert("taskLimits".into(), task_limits(m.get("taskLimits"))?);
    Ok(Value::Object(out))
}

fn affinity_config(v: &Value) -> Result<Value, String> {
    let m = object("selectStrategy.affinityConfig", v)?;
    no_unknown("selectStrategy.affinityConfig", m, &["affinity", "strong"])?;
    let affinity = match m.get("affinity") {
        None | Some(Value::Null) => {
            return Err("selectStrategy.affinityConfig.affinity is required".into());
        }
        Some(a) => object("selectStrategy.affinityConfig.affinity", a)?,
    };
    for (ds, hosts) in affinity {
        let ok = hosts
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string));
        if !ok {
            return Err(format!(
                "selectStrategy.affinityConfig.affinity.{ds} must be an array of host:port strings"
            ));
        }
    }
    Ok(json!({
        "affinity": affinity,
        "strong": bool_or("selectStrategy.affinityConfig.strong", m.get("strong"), false)?,
    }))
}

fn category_spec(v: &Value) -> Result<Value, String> {
    let f = "selectStrategy.workerCategorySpec";
    let m = object(f, v)?;
    no_unknown(f, m, &["categoryMap", "strong"])?;
    let mut map = Map::new();
    if let Some(cm) = m.get("categoryMap").filter(|v| !v.is_null()) {
        for (task_type, c) in object(&format!("{f}.categoryMap"), cm)? {
            let cf = format!("{f}.categoryMap.{task_type}");
            let c = object(&cf, c)?;
            no_unknown(
                &cf,
                c,
                &[
                    "defaultCategory",
                    "categoryAffinity",
                    "supervisorIdCategoryAffinity",
                ],
            )?;
            let string_or_null = |k: &str| -> Result<Value, String> {
                match c.get(k) {
                    None | Some(Value::Null) => Ok(Value::Null),
                    Some(Value::String(s)) => Ok(json!(s)),
                    Some(o) => Err(format!("{cf}.{k} must be a string, not {}", kind(o))),
                }
            };
            let string_map = |k: &str| -> Result<Value, String> {
                match c.get(k) {
                    None | Some(Value::Null) => Ok(json!({})),
                    Some(Value::Object(o)) if o.values().all(Value::is_string) => {
                        Ok(Value::Object(o.clone()))
                    }
                    Some(_) => Err(format!("{cf}.{k} must be an object of category names")),
                }
            };
            map.insert(
                task_type.clone(),
                json!({
                    "defaultCategory": string_or_null("defaultCategory")?,
                    "categoryAffinity": string_map("categoryAffinity")?,
                    "supervisorIdCategoryAffinity": string_map("supervisorIdCategoryAffinity")?,
                }),
            );
        }
    }
    Ok(
        json!({"categoryMap": map, "strong": bool_or(&format!("{f}.strong"), m.get("strong"), false)?}),
    )
}

fn task_limits(v: Option<&Value>) -> Result<Value, String> {
    let f = "selectStrategy.taskLimits";
    let empty = Map::new();
    let m = match v {
        None | Some(Value::Null) => &empty,
        Some(v) => object(f, v)?,
    };
    no_unknown(f, m, &["maxSlotCountByType", "maxSlotRatioByType"])?;
    let counts = match m.get("maxSlotCountByType") {
        None | Some(Value::Null) => Map::new(),
        Some(v) => object(&format!("{f}.maxSlotCountByType"), v)?.clone(),
    };
    if counts.values().any(|c| c.as_i64().is_none_or(|n| n < 0)) {
        return Err(format!(
            "{f}.maxSlotCountByType: Max task slot count limit for any type must be greater than zero. Found[{}].",
            Value::Object(counts)
        ));
    }
    let ratios = match m.get("maxSlotRatioByType") {
        None | Some(Value::Null) => Map::new(),
        Some(v) => object(&format!("{f}.maxSlotRatioByType"), v)?.clone(),
    };
    if ratios
        .values()
        .any(|r| r.as_f64().is_none_or(|x| !(0.0..=1.0).contains(&x)))
    {
        return Err(format!(
            "{f}.maxSlotRatioByType: Max task slot ratios should be in the interval of [0, 1]. Found[{}].",
            Value::Object(ratios)
        ));
    }
    Ok(json!({"maxSlotCountByType": counts, "maxSlotRatioByType": ratios}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_as_druid_reads_back() {
        assert_eq!(
            parse_worker_config(&json!({})).unwrap(),
            json!({"type": "default", "selectStrategy": null, "autoScaler": null})
        );
        assert_eq!(
            parse_worker_config(&json!({"selectStrategy": {"type": "equalDistribution"}})).unwrap(),
            json!({"type": "default", "selectStrategy": {"type": "equalDistribution", "affinityConfig": null,
                   "taskLimits": {"maxSlotCountByType": {}, "maxSlotRatioByType": {}}}, "autoScaler": null})
        );
        let cat = parse_worker_config(&json!({"type": "default", "selectStrategy": {
            "type": "fillCapacityWithCategorySpec",
            "workerCategorySpec": {"categoryMap": {"index_parallel": {"defaultCategory": "c1"}}, "strong": true}},
            "autoScaler": null}))
        .unwrap();
        assert_eq!(
            cat["selectStrategy"]["workerCategorySpec"]["categoryMap"]["index_parallel"],
            json!({"defaultCategory": "c1", "categoryAffinity": {}, "supervisorIdCategoryAffinity": {}})
        );
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        let e = |v: Value| parse_worker_config(&v).unwrap_err();
        assert!(e(json!({"type": "other"})).starts_with("type:"));
        assert!(e(json!({"selectStrategy": {"type": "random"}})).contains("selectStrategy.type"));
        assert!(
            e(json!({"selectStrategy": {"type": "fillCapacity", "affinityConfig": {}}}))
                .contains("affinityConfig.affinity is required")
        );
        assert!(e(json!({"selectStrategy": {"type": "fillCapacity", "taskLimits": {"maxSlotCountByType": {"index": -1}}}}))
            .contains("must be greater than zero"));
        assert!(e(json!({"selectStrategy": {"type": "fillCapacity", "taskLimits": {"maxSlotRatioByType": {"index": 2}}}}))
            .contains("[0, 1]"));
        assert!(e(json!({"nope": 1})).contains("unknown property [nope]"));
        assert!(e(json!([])).contains("JSON object"));
        assert!(
            e(json!({"selectStrategy": {"type": "javascript", "function": "x"}}))
                .contains("javascript")
        );
    }
}

/// What the stored worker configuration says about running a task on this process (Druid's
/// `WorkerSelectStrategy` with one worker): category and affinity requirements, and the
/// per-type slot limits (`taskLimits`).
#[derive(Debug, Clone, Default)]
pub struct WorkerSelection {
    strategy: Option<Value>,
}

/// This process as a worker, and the task asking for a slot.
#[derive(Debug, Clone, Copy)]
pub struct SlotRequest<'a> {
    /// The task's type (`index_parallel`, `kill`, ...).
    pub task_type: &'a str,
    /// The task's datasource.
    pub data_source: &'a str,
    /// This worker's `host:port`.
    pub host_port: &'a str,
    /// This worker's category (`service.worker.category`).
    pub category: &'a str,
    /// This worker's capacity (task slots).
    pub capacity: usize,
    /// Tasks of the same type running now.
    pub running_of_type: usize,
}

impl WorkerSelection {
    /// From the stored configuration document (`None`: nothing stored, everything admitted).
    pub fn from_stored(doc: Option<&Value>) -> WorkerSelection {
        WorkerSelection {
            strategy: doc
                .and_then(|d| d.get("selectStrategy"))
                .filter(|s| s.is_object())
                .cloned(),
        }
    }

    /// `Ok` when the task may take a slot here now; else why not (it stays PENDING, as in
    /// Druid when no worker fits).
    ///
    /// # Errors
    /// The reason, for the task log.
    pub fn admits(&self, r: &SlotRequest<'_>) -> Result<(), String> {
        let Some(s) = &self.strategy else {
            return Ok(());
        };
        // Category spec: the preferred category of the task's type (by datasource, else the
        // type's default); with `strong`, only a worker of that category runs it.
        if let Some(spec) = s.get("workerCategorySpec").filter(|v| v.is_object()) {
            let strong = spec.get("strong").and_then(Value::as_bool).unwrap_or(false);
            let preferred = spec
                .get("categoryMap")
                .and_then(|m| m.get(r.task_type))
                .and_then(|c| {
                    c.get("categoryAffinity")
                        .and_then(|a| a.get(r.data_source))
                        .and_then(Value::as_str)
                        .or_else(|| c.get("defaultCategory").and_then(Value::as_str))
                });
            if let Some(p) = preferred
                && strong
                && p != r.category
            {
                return Err(format!(
                    "the worker configuration sends [{}] tasks of datasource [{}] only to workers of category [{p}] (strong); this worker's category is [{}]",
                    r.task_type, r.data_source, r.category
                ));
            }
        }
        // Affinity: with `strong`, a datasource listed there runs only on its hosts.
        if let Some(aff) = s.get("affinityConfig").filter(|v| v.is_object()) {
            let strong = aff.get("strong").and_then(Value::as_bool).unwrap_or(false);
            if let Some(hosts) = aff
                .get("affinity")
                .and_then(|a| a.get(r.data_source))
                .and_then(Value::as_array)
                && strong
                && !hosts.iter().any(|h| h.as_str() == Some(r.host_port))
            {
                return Err(format!(
                    "the worker configuration runs tasks of datasource [{}] only on {} (strong affinity); this worker is [{}]",
                    r.data_source,
                    Value::Array(hosts.clone()),
                    r.host_port
                ));
            }
        }
        // Task limits: at most `maxSlotCountByType` and `floor(capacity * maxSlotRatioByType)`
        // slots for the type.
        let limits = s.get("taskLimits");
        let count = limits
            .and_then(|l| l.get("maxSlotCountByType"))
            .and_then(|m| m.get(r.task_type))
            .and_then(Value::as_u64);
        let ratio = limits
            .and_then(|l| l.get("maxSlotRatioByType"))
            .and_then(|m| m.get(r.task_type))
            .and_then(Value::as_f64)
            .map(|x| (x * r.capacity as f64).floor() as u64);
        let limit = match (count, ratio) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(limit) = limit
            && r.running_of_type as u64 >= limit
        {
            return Err(format!(
                "the worker configuration allows at most [{limit}] slots for [{}] tasks; [{}] run now",
                r.task_type, r.running_of_type
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod selection_tests {
    use super::*;

    fn req<'a>(task_type: &'a str, running: usize) -> SlotRequest<'a> {
        SlotRequest {
            task_type,
            data_source: "wiki",
            host_port: "localhost:8888",
            category: DEFAULT_WORKER_CATEGORY,
            capacity: 4,
            running_of_type: running,
        }
    }

    fn sel(v: Value) -> WorkerSelection {
        WorkerSelection::from_stored(Some(&parse_worker_config(&v).unwrap()))
    }

    #[test]
    fn limits_categories_and_affinity() {
        assert!(
            WorkerSelection::from_stored(None)
                .admits(&req("index", 9))
                .is_ok()
        );
        let limits = sel(json!({"selectStrategy": {"type": "fillCapacity",
            "taskLimits": {"maxSlotCountByType": {"index": 2}, "maxSlotRatioByType": {"kill": 0.5}}}}));
        assert!(limits.admits(&req("index", 1)).is_ok());
        assert!(
            limits
                .admits(&req("index", 2))
                .unwrap_err()
                .contains("at most [2]")
        );
        assert!(limits.admits(&req("kill", 1)).is_ok());
        assert!(limits.admits(&req("kill", 2)).is_err());
        assert!(limits.admits(&req("other", 100)).is_ok());

        let strong = sel(
            json!({"selectStrategy": {"type": "equalDistributionWithCategorySpec",
            "workerCategorySpec": {"strong": true, "categoryMap": {"index_parallel": {"defaultCategory": "c1", "categoryAffinity": {"wiki": "_default_worker_category"}}, "kill": {"defaultCategory": "c1"}}}}}),
        );
        assert!(strong.admits(&req("index_parallel", 0)).is_ok());
        assert!(
            strong
                .admits(&req("kill", 0))
                .unwrap_err()
                .contains("category [c1]")
        );
        assert!(strong.admits(&req("index", 0)).is_ok());
        let weak = sel(
            json!({"selectStrategy": {"type": "fillCapacityWithCategorySpec",
            "workerCategorySpec": {"strong": false, "categoryMap": {"kill": {"defaultCategory": "c1"}}}}}),
        );
        assert!(weak.admits(&req("kill", 0)).is_ok());

        let aff = sel(json!({"selectStrategy": {"type": "fillCapacity",
            "affinityConfig": {"affinity": {"wiki": ["other:8091"]}, "strong": true}}}));
        assert!(
            aff.admits(&req("index", 0))
                .unwrap_err()
                .contains("strong affinity")
        );
    }
}
