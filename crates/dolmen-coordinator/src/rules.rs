//! Retention rules (Druid's `server/.../coordinator/rules/*.java`,
//! `docs/operations/rule-configuration.md`): parsing with validation, the stored (normalized)
//! form, and matching a segment's interval against "now".
//!
//! A rule array is parsed from a POST body with [`parse_rules`]; every problem is a
//! [`RuleError`] naming the rule (its position and type) and the field. The normalized form
//! ([`Rule::to_json`]) is what is stored and read back: load rules always carry
//! `tieredReplicants` and `useDefaultTierForNull`, period rules `includeFuture`, as Druid
//! serializes them.

use std::collections::BTreeMap;

use dolmen_common::{Interval, Period, Zone};
use serde_json::{Map, Value, json};

/// Druid's default tier name (`DruidServer.DEFAULT_TIER`).
pub const DEFAULT_TIER: &str = "_default_tier";
/// Druid's default replica count of a load rule without `tieredReplicants`
/// (`DruidServer.DEFAULT_NUM_REPLICANTS`).
pub const DEFAULT_NUM_REPLICANTS: u32 = 2;
/// The name under which the cluster-wide default rules are stored.
pub const DEFAULT_RULES_KEY: &str = "_default";

/// Every rule type id Druid knows, sorted (its unknown-type message lists them).
pub const RULE_TYPES: [&str; 10] = [
    "broadcastByInterval",
    "broadcastByPeriod",
    "broadcastForever",
    "dropBeforeByPeriod",
    "dropByInterval",
    "dropByPeriod",
    "dropForever",
    "loadByInterval",
    "loadByPeriod",
    "loadForever",
];

/// What a matching rule does with a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleAction {
    /// Keep the segment used with these replicas per tier (possibly none).
    Load {
        /// Replicas per tier name.
        tiered_replicants: BTreeMap<String, u32>,
        /// As posted (Druid serializes it back).
        use_default_tier_for_null: bool,
    },
    /// Mark the segment unused.
    Drop,
    /// Load the segment on every server (the query role included).
    Broadcast,
}

/// Which segments a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleRange {
    /// Every segment.
    Forever,
    /// Load/broadcast: segments overlapping the interval; drop: segments inside it.
    Interval(Interval),
    /// Segments near "now" (see [`Rule::applies_to`]).
    Period {
        /// The period counted back from now.
        period: Period,
        /// The period's text as posted.
        text: String,
        /// Whether segments after now match too (default true).
        include_future: bool,
    },
    /// `dropBeforeByPeriod`: segments ending at or before `now - period`.
    BeforePeriod {
        /// The period counted back from now.
        period: Period,
        /// The period's text as posted.
        text: String,
    },
}

/// One retention rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Load, drop or broadcast.
    pub action: RuleAction,
    /// Which segments.
    pub range: RuleRange,
}

/// A bad rule in a POST body: the message names the rule and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

impl Rule {
    /// The rule's type id (`loadByPeriod`, ...).
    pub fn type_name(&self) -> &'static str {
        match (&self.action, &self.range) {
            (RuleAction::Load { .. }, RuleRange::Forever) => "loadForever",
            (RuleAction::Load { .. }, RuleRange::Interval(_)) => "loadByInterval",
            (RuleAction::Load { .. }, _) => "loadByPeriod",
            (RuleAction::Drop, RuleRange::Forever) => "dropForever",
            (RuleAction::Drop, RuleRange::Interval(_)) => "dropByInterval",
            (RuleAction::Drop, RuleRange::Period { .. }) => "dropByPeriod",
            (RuleAction::Drop, RuleRange::BeforePeriod { .. }) => "dropBeforeByPeriod",
            (RuleAction::Broadcast, RuleRange::Forever) => "broadcastForever",
            (RuleAction::Broadcast, RuleRange::Interval(_)) => "broadcastByInterval",
            (RuleAction::Broadcast, _) => "broadcastByPeriod",
        }
    }

    /// Whether the rule applies to a segment with interval `segment` when the time is `now`
    /// (ms), exactly as Druid computes it (`Rules.eligibleForLoad`, `*DropRule.appliesTo`):
    /// `now - period` is computed in the ISO chronology in UTC (`P1M` is a calendar month);
    /// intervals are half-open and abutting ones do not overlap.
    ///
    /// | rule | applies when (segment `[s, e)`, `p = now - period`) |
    /// |---|---|
    /// | `*Forever` | always |
    /// | `loadByInterval`, `broadcastByInterval` | the interval overlaps `[s, e)` |
    /// | `dropByInterval` | the interval contains `[s, e)` |
    /// | `loadByPeriod`, `broadcastByPeriod` | `p < e` with includeFuture, else `[p, now)` overlaps `[s, e)` |
    /// | `dropByPeriod` | `p <= s` with includeFuture, else `[p, now)` contains `[s, e)` |
    /// | `dropBeforeByPeriod` | `e <= p` |
    pub fn applies_to(&self, segment: &Interval, now: i64) -> bool {
        let is_drop = matches!(self.action, RuleAction::Drop);
        match &self.range {
            RuleRange::Forever => true,
            RuleRange::Interval(i) => {
                if is_drop {
                    i.contains(segment)
                } else {
                    i.overlaps(segment)
                }
            }
            RuleRange::Period {
                period,
                include_future,
                ..
            } => {
                let start = period_start(period, now);
                match (is_drop, include_future) {
                    (false, true) => start < segment.end,
                    (false, false) => start < segment.end && segment.start < now,
                    (true, true) => start <= segment.start,
                    (true, false) => start <= segment.start && segment.end <= now,
                }
            }
            RuleRange::BeforePeriod { period, .. } => segment.end <= period_start(period, now),
        }
    }

    /// Total replicas a load rule asks for over all tiers (0 for drop and broadcast rules).
    pub fn total_replicants(&self) -> u32 {
        match &self.action {
            RuleAction::Load {
                tiered_replicants, ..
            } => tiered_replicants.values().sum(),
            _ => 0,
        }
    }

    /// The rule as Druid serializes it (stored and read back).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        match &self.range {
            RuleRange::Forever => {}
            RuleRange::Interval(i) => {
                m.insert("interval".into(), json!(i.to_string()));
            }
            RuleRange::Period {
                text,
                include_future,
                ..
            } => {
                m.insert("period".into(), json!(text));
                m.insert("includeFuture".into(), json!(include_future));
            }
            RuleRange::BeforePeriod { text, .. } => {
                m.insert("period".into(), json!(text));
            }
        }
        if let RuleAction::Load {
            tiered_replicants,
            use_default_tier_for_null,
        } = &self.action
        {
            m.insert("tieredReplicants".into(), json!(tiered_replicants));
            m.insert(
                "useDefaultTierForNull".into(),
                json!(use_default_tier_for_null),
            );
        }
        m.insert("type".into(), json!(self.type_name()));
        Value::Object(m)
    }
}

/// `now - period` in UTC, saturating at the start of time on overflow.
fn period_start(period: &Period, now: i64) -> i64 {
    period
        .checked_add_to(now, -1, &Zone::Utc)
        .unwrap_or(i64::MIN)
}

/// The initial `_default` rules: `loadForever` with 2 replicas on `_default_tier`.
pub fn initial_default_rules() -> Vec<Rule> {
    vec![Rule {
        action: RuleAction::Load {
            tiered_replicants: BTreeMap::from([(DEFAULT_TIER.to_string(), DEFAULT_NUM_REPLICANTS)]),
            use_default_tier_for_null: true,
        },
        range: RuleRange::Forever,
    }]
}

/// The JSON array of a rule list (normalized form).
pub fn rules_to_json(rules: &[Rule]) -> Value {
    Value::Array(rules.iter().map(Rule::to_json).collect())
}

/// Parses a POSTed rule array. `null` or a non-array is rejected; each rule must have a known
/// `type`, the fields of that type with valid values, and no other field.
///
/// # Errors
/// A [`RuleError`] naming the rule (`rule [i] (type)`) and the field.
pub fn parse_rules(body: &Value) -> Result<Vec<Rule>, RuleError> {
    match body {
        Value::Null => Err(RuleError("Rules cannot be null.".into())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_rule(i, v))
            .collect(),
        other => Err(RuleError(format!(
            "rules must be a JSON array of rule objects, not {}",
            json_kind(other)
        ))),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses a stored rule array (the store only holds arrays this module wrote).
///
/// # Errors
/// As [`parse_rules`].
pub fn parse_stored(rules: &Value) -> Result<Vec<Rule>, RuleError> {
    parse_rules(rules)
}

fn parse_rule(index: usize, v: &Value) -> Result<Rule, RuleError> {
    let Value::Object(obj) = v else {
        return Err(RuleError(format!(
            "rule [{index}] must be a JSON object, not {}",
            json_kind(v)
        )));
    };
    let Some(type_value) = obj.get("type") else {
        return Err(RuleError(format!(
            "rule [{index}]: missing type id property 'type' (known type ids = [{}])",
            RULE_TYPES.join(", ")
        )));
    };
    let Some(ty) = type_value.as_str() else {
        return Err(RuleError(format!(
            "rule [{index}]: property 'type' must be a string"
        )));
    };
    if !RULE_TYPES.contains(&ty) {
        return Err(RuleError(format!(
            "rule [{index}]: Could not resolve type id '{ty}' as a subtype of Rule: known type ids = [{}]",
            RULE_TYPES.join(", ")
        )));
    }
    let ctx =
        |field: &str, msg: String| RuleError(format!("rule [{index}] ({ty}): {field}: {msg}"));

    let is_load = ty.starts_with("load");
    let is_drop = ty.starts_with("drop");
    let kind = if ty.ends_with("Forever") {
        "forever"
    } else if ty.ends_with("ByInterval") {
        "interval"
    } else if ty == "dropBeforeByPeriod" {
        "before"
    } else {
        "period"
    };
    let mut allowed: Vec<&str> = vec!["type"];
    match kind {
        "interval" => allowed.push("interval"),
        "period" => allowed.extend(["period", "includeFuture"]),
        "before" => allowed.push("period"),
        _ => {}
    }
    if is_load {
        allowed.extend(["tieredReplicants", "useDefaultTierForNull"]);
    }
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ctx(
            unknown,
            format!(
                "unknown property; a {ty} rule has the properties [{}]",
                allowed.join(", ")
            ),
        ));
    }

    let bool_field = |name: &str, default: bool| -> Result<bool, RuleError> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(ctx(
                name,
                format!("must be true or false, not {}", json_kind(other)),
            )),
        }
    };
    let period_field = || -> Result<(Period, String), RuleError> {
        match obj.get("period") {
            Some(Value::String(s)) => Period::parse(s).map(|p| (p, s.clone())).map_err(|_| {
                ctx(
                    "period",
                    format!("Invalid format: \"{s}\" is not an ISO 8601 period"),
                )
            }),
            None | Some(Value::Null) => Err(ctx("period", "is required".into())),
            Some(other) => Err(ctx(
                "period",
                format!(
                    "must be an ISO 8601 period string, not {}",
                    json_kind(other)
                ),
            )),
        }
    };

    let range = match kind {
        "forever" => RuleRange::Forever,
        "interval" => match obj.get("interval") {
            Some(Value::String(s)) => RuleRange::Interval(
                Interval::parse(s)
                    .map_err(|e| ctx("interval", format!("Invalid interval[{s}]: {}", e.0)))?,
            ),
            None | Some(Value::Null) => return Err(ctx("interval", "is required".into())),
            Some(other) => {
                return Err(ctx(
                    "interval",
                    format!(
                        "must be an ISO 8601 interval string <start>/<end>, not {}",
                        json_kind(other)
                    ),
                ));
            }
        },
        "before" => {
            let (period, text) = period_field()?;
            RuleRange::BeforePeriod { period, text }
        }
        _ => {
            let (period, text) = period_field()?;
            RuleRange::Period {
                period,
                text,
                include_future: bool_field("includeFuture", true)?,
            }
        }
    };

    let action = if is_load {
        let use_default = bool_field("useDefaultTierForNull", true)?;
        let tiered = match obj.get("tieredReplicants") {
            None | Some(Value::Null) => {
                if use_default {
                    BTreeMap::from([(DEFAULT_TIER.to_string(), DEFAULT_NUM_REPLICANTS)])
                } else {
                    BTreeMap::new()
                }
            }
            Some(Value::Object(m)) => {
                let mut out = BTreeMap::new();
                for (tier, n) in m {
                    let count = match n {
                        Value::Null => {
                            return Err(ctx(
                                "tieredReplicants",
                                format!("Invalid number of replicas for tier [{tier}]. Value must not be null."),
                            ));
                        }
                        Value::Number(num) => match num.as_i64() {
                            Some(c) if c < 0 => {
                                return Err(ctx(
                                    "tieredReplicants",
                                    format!("Invalid number of replicas for tier [{tier}]. Value [{c}] must be positive."),
                                ));
                            }
                            Some(c) => u32::try_from(c).map_err(|_| {
                                ctx(
                                    "tieredReplicants",
                                    format!("Invalid number of replicas for tier [{tier}]. Value [{c}] is too large."),
                                )
                            })?,
                            None => {
                                return Err(ctx(
                                    "tieredReplicants",
                                    format!("Invalid number of replicas for tier [{tier}]. Value [{num}] must be an integer."),
                                ));
                            }
                        },
                        other => {
                            return Err(ctx(
                                "tieredReplicants",
                                format!(
                                    "Invalid number of replicas for tier [{tier}]: must be an integer, not {}",
                                    json_kind(other)
                                ),
                            ));
                        }
                    };
                    out.insert(tier.clone(), count);
                }
                out
            }
            Some(other) => {
                return Err(ctx(
                    "tieredReplicants",
                    format!(
                        "must be an object from tier name to replica count, not {}",
                        json_kind(other)
                    ),
                ));
            }
        };
        RuleAction::Load {
            tiered_replicants: tiered,
            use_default_tier_for_null: use_default,
        }
    } else if is_drop {
        RuleAction::Drop
    } else {
        RuleAction::Broadcast
    };
    Ok(Rule { action, range })
}

#[cfg(test)]
mod tests;
