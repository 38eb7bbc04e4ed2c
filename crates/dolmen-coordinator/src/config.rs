//! The coordinator's dynamic configuration (Druid's `CoordinatorDynamicConfig`,
//! `docs/api-reference/dynamic-configuration-api.md`): every property with Druid's default,
//! a partial-merge update with validation, and typed accessors for the settings that mean
//! something on one node (`pauseCoordination`, `millisToWaitBeforeDeleting`,
//! `killDataSourceWhitelist`, `killTaskSlotRatio`, `maxKillTaskSlots`).
//!
//! The document is stored in the metadata store's configuration table under
//! [`COORDINATOR_CONFIG_KEY`]; every update is audited under the same key and type.

use serde_json::{Map, Value, json};

/// The configuration name, audit key and audit type (Druid's `CoordinatorDynamicConfig.CONFIG_KEY`).
pub const COORDINATOR_CONFIG_KEY: &str = "coordinator.config";

/// How a property's value is checked.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// An integer in `[min, max]`.
    Int(i64, i64),
    /// A boolean.
    Bool,
    /// A number in `[0, 1]`.
    Ratio,
    /// A list of strings (a JSON array or a comma-separated string).
    StringList,
    /// A JSON object.
    Object,
    /// Anything (`debugDimensions`).
    Any,
}

const I32_MAX: i64 = i32::MAX as i64;

/// Every property: name, kind, Druid's default. The first block is Druid's current set
/// (`CoordinatorDynamicConfig.java`), the second the older keys the spec's table still lists.
fn properties() -> Vec<(&'static str, Kind, Value)> {
    vec![
        (
            "millisToWaitBeforeDeleting",
            Kind::Int(0, i64::MAX),
            json!(900_000),
        ),
        ("maxSegmentsToMove", Kind::Int(0, I32_MAX), json!(100)),
        ("replicantLifetime", Kind::Int(0, I32_MAX), json!(15)),
        (
            "replicationThrottleLimit",
            Kind::Int(0, I32_MAX),
            json!(500),
        ),
        (
            "balancerComputeThreads",
            Kind::Int(i64::MIN, I32_MAX),
            json!(1),
        ),
        ("killDataSourceWhitelist", Kind::StringList, json!([])),
        ("killTaskSlotRatio", Kind::Ratio, json!(0.1)),
        ("maxKillTaskSlots", Kind::Int(0, I32_MAX), json!(I32_MAX)),
        ("killPendingSegmentsSkipList", Kind::StringList, json!([])),
        (
            "maxSegmentsInNodeLoadingQueue",
            Kind::Int(0, I32_MAX),
            json!(500),
        ),
        ("useRoundRobinSegmentAssignment", Kind::Bool, json!(true)),
        ("smartSegmentLoading", Kind::Bool, json!(true)),
        ("decommissioningNodes", Kind::StringList, json!([])),
        ("debugDimensions", Kind::Any, Value::Null),
        ("pauseCoordination", Kind::Bool, json!(false)),
        ("replicateAfterLoadTimeout", Kind::Bool, json!(false)),
        ("cloneServers", Kind::Object, json!({})),
        ("historicalTierAliases", Kind::Object, json!({})),
        ("turboLoadingNodes", Kind::StringList, json!([])),
        (
            "percentOfSegmentsToConsiderPerMove",
            Kind::Int(1, 100),
            json!(100),
        ),
        ("useBatchedSegmentSampler", Kind::Bool, json!(true)),
        ("emitBalancingStats", Kind::Bool, json!(false)),
        (
            "decommissioningMaxPercentOfMaxSegmentsToMove",
            Kind::Int(0, 100),
            json!(70),
        ),
        (
            "maxNonPrimaryReplicantsToLoad",
            Kind::Int(0, I32_MAX),
            json!(I32_MAX),
        ),
    ]
}

/// A bad update: the message names the property.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The coordinator's dynamic configuration: every property, in Druid's order.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorDynamicConfig {
    values: Map<String, Value>,
}

impl Default for CoordinatorDynamicConfig {
    fn default() -> Self {
        CoordinatorDynamicConfig {
            values: properties()
                .into_iter()
                .map(|(k, _, v)| (k.to_string(), v))
                .collect(),
        }
    }
}

impl CoordinatorDynamicConfig {
    /// The configuration from its stored document: defaults for anything it lacks (a document
    /// written by an older version), unknown keys ignored.
    pub fn from_stored(doc: Option<&Value>) -> CoordinatorDynamicConfig {
        let mut config = CoordinatorDynamicConfig::default();
        if let Some(Value::Object(m)) = doc {
            for (k, v) in m {
                if let Some(slot) = config.values.get_mut(k) {
                    *slot = v.clone();
                }
            }
        }
        config
    }

    /// The whole configuration as JSON (what `GET /coordinator/v1/config` answers and what is
    /// stored).
    pub fn to_json(&self) -> Value {
        Value::Object(self.values.clone())
    }

    /// This configuration with the properties of `update` applied (Druid's `Builder.build(current)`:
    /// properties left out keep their value; `{}` changes nothing).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the property when the body is not an object, a property is
    /// unknown, or a value has the wrong type or is out of range.
    pub fn merged(&self, update: &Value) -> Result<CoordinatorDynamicConfig, ConfigError> {
        let Value::Object(m) = update else {
            return Err(ConfigError(
                "the coordinator dynamic configuration must be a JSON object".into(),
            ));
        };
        let props = properties();
        let mut out = self.clone();
        for (name, value) in m {
            let Some((_, kind, _)) = props.iter().find(|(k, _, _)| k == name) else {
                return Err(ConfigError(format!(
                    "unknown property [{name}] of the coordinator dynamic configuration; known: [{}]",
                    props
                        .iter()
                        .map(|(k, _, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            let checked = check(name, *kind, value)?;
            out.values.insert(name.clone(), checked);
        }
        Ok(out)
    }

    fn int(&self, name: &str) -> i64 {
        self.values.get(name).and_then(Value::as_i64).unwrap_or(0)
    }

    /// `pauseCoordination`: while true no duty runs (rules, overshadow marking, kill).
    pub fn pause_coordination(&self) -> bool {
        self.values
            .get("pauseCoordination")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `millisToWaitBeforeDeleting`: how long after start-up overshadowed segments stay used, ms.
    pub fn millis_to_wait_before_deleting(&self) -> i64 {
        self.int("millisToWaitBeforeDeleting")
    }

    /// `killDataSourceWhitelist`: datasources auto-kill applies to (all when empty).
    pub fn kill_data_source_whitelist(&self) -> Vec<String> {
        string_list(self.values.get("killDataSourceWhitelist"))
    }

    /// `killTaskSlotRatio`: share of the task slots auto-kill may use.
    pub fn kill_task_slot_ratio(&self) -> f64 {
        self.values
            .get("killTaskSlotRatio")
            .and_then(Value::as_f64)
            .unwrap_or(0.1)
    }

    /// `maxKillTaskSlots`: most task slots auto-kill may use.
    pub fn max_kill_task_slots(&self) -> i64 {
        self.int("maxKillTaskSlots")
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

fn check(name: &str, kind: Kind, value: &Value) -> Result<Value, ConfigError> {
    let bad = |what: &str| ConfigError(format!("{name} [{value}] is invalid: {what}"));
    match kind {
        Kind::Int(min, max) => {
            let n = value.as_i64().ok_or_else(|| bad("it must be an integer"))?;
            if name == "balancerComputeThreads" {
                // Druid raises values below 1 to 1.
                return Ok(json!(n.max(1)));
            }
            if n < min || n > max {
                return Err(bad(&format!("it must be >= {min} and <= {max}")));
            }
            Ok(json!(n))
        }
        Kind::Bool => value
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| bad("it must be true or false")),
        Kind::Ratio => {
            let r = value.as_f64().ok_or_else(|| bad("it must be a number"))?;
            if !(0.0..=1.0).contains(&r) {
                return Err(bad("It must be >= 0 and <= 1."));
            }
            Ok(value.clone())
        }
        Kind::StringList => match value {
            Value::Null => Ok(json!([])),
            Value::String(s) => Ok(json!(
                s.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .collect::<Vec<_>>()
            )),
            Value::Array(a) if a.iter().all(Value::is_string) => Ok(value.clone()),
            _ => Err(bad(
                "it must be an array of strings or a comma-separated string",
            )),
        },
        Kind::Object => match value {
            Value::Null => Ok(json!({})),
            Value::Object(_) => Ok(value.clone()),
            _ => Err(bad("it must be a JSON object")),
        },
        Kind::Any => Ok(value.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_druids() {
        let c = CoordinatorDynamicConfig::default().to_json();
        assert_eq!(c["millisToWaitBeforeDeleting"], 900_000);
        assert_eq!(c["maxSegmentsToMove"], 100);
        assert_eq!(c["replicantLifetime"], 15);
        assert_eq!(c["replicationThrottleLimit"], 500);
        assert_eq!(c["killDataSourceWhitelist"], json!([]));
        assert_eq!(c["killTaskSlotRatio"], 0.1);
        assert_eq!(c["maxKillTaskSlots"], 2_147_483_647);
        assert_eq!(c["pauseCoordination"], false);
        assert_eq!(c["smartSegmentLoading"], true);
        assert_eq!(c["debugDimensions"], Value::Null);
        assert_eq!(c["decommissioningMaxPercentOfMaxSegmentsToMove"], 70);
        assert_eq!(c.as_object().unwrap().len(), 24);
    }

    #[test]
    fn merge_is_partial_and_validated() {
        let base = CoordinatorDynamicConfig::default();
        assert_eq!(base.merged(&json!({})).unwrap(), base);
        let c = base
            .merged(&json!({"pauseCoordination": true, "killDataSourceWhitelist": "a, b", "balancerComputeThreads": 0}))
            .unwrap();
        assert!(c.pause_coordination());
        assert_eq!(c.kill_data_source_whitelist(), vec!["a", "b"]);
        assert_eq!(c.to_json()["balancerComputeThreads"], 1);
        assert_eq!(c.to_json()["maxSegmentsToMove"], 100);
        let e = base
            .merged(&json!({"killTaskSlotRatio": 2.0}))
            .unwrap_err()
            .0;
        assert!(e.starts_with("killTaskSlotRatio [2.0] is invalid"), "{e}");
        let e = base.merged(&json!({"maxKillTaskSlots": -1})).unwrap_err().0;
        assert!(e.starts_with("maxKillTaskSlots [-1] is invalid"), "{e}");
        let e = base
            .merged(&json!({"maxSegmentsToMove": "x"}))
            .unwrap_err()
            .0;
        assert!(
            e.contains("maxSegmentsToMove") && e.contains("integer"),
            "{e}"
        );
        let e = base.merged(&json!({"nope": 1})).unwrap_err().0;
        assert!(e.contains("unknown property [nope]"), "{e}");
        assert!(base.merged(&json!([])).is_err());
        // A stored document from an older version gets the new defaults.
        let old = CoordinatorDynamicConfig::from_stored(Some(&json!({"pauseCoordination": true})));
        assert!(old.pause_coordination());
        assert_eq!(old.millis_to_wait_before_deleting(), 900_000);
    }
}
