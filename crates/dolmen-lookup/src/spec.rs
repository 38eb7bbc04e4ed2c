//! The lookups configuration as Druid's coordinator keeps it, and the lookup definitions
//! Dolmen can load.
//!
//! - [`LookupsConfig`]: every tier's lookups, `{tier: {lookupName: LookupContainer}}`, the
//!   document Druid stores under `lookupsConfig` in its config table (`LookupCoordinatorManager`)
//!   and `GET /lookups/config/all` returns.
//! - [`LookupContainer`]: one lookup's `{version, lookupExtractorFactory}` (Druid's
//!   `LookupExtractorFactoryMapContainer`). The coordinator keeps the factory as the JSON object
//!   it was given and echoes it back unchanged; [`LookupContainer::replaces`] is Druid's version
//!   rule.
//! - [`LookupFactory`]: a factory Dolmen understands, parsed from that object by
//!   [`LookupFactory::parse`] with errors naming the field:
//!   - `map` (Druid's `MapLookupExtractorFactory`): `{"type": "map", "map": {key: value},
//!     "isOneToOne": bool}`; `injective` is accepted as a synonym of `isOneToOne`;
//!   - `cachedNamespace` (the `druid-lookups-cached-global` extension,
//!     `NamespaceLookupExtractorFactory`): `{"type": "cachedNamespace", "extractionNamespace":
//!     {...}, "firstCacheTimeout": ms, "injective": bool}` with a `uri` namespace over local
//!     files or a `staticMap` namespace ([`crate::namespace`]).
//!
//! Values follow Jackson's coercions where Druid relies on them: a numeric `version` or map
//! value is its JSON text (`1` is `"1"`), and a `null` map value is dropped (a missing key and a
//! key mapped to null give the same `LOOKUP` answer). Unlike Druid (whose object mapper ignores
//! them), unknown fields are rejected with a 400 naming them.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::namespace::ExtractionNamespace;
use crate::{LookupError, LookupMap};

/// The lookup tier Druid's query processes belong to unless configured otherwise
/// (`druid.lookup.lookupTier`).
pub const DEFAULT_TIER: &str = "__default";

/// One lookup's definition (Druid's `LookupExtractorFactoryMapContainer`): a user-chosen
/// version string and the factory object, kept as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LookupContainer {
    /// The version; an update must carry a greater one ([`LookupContainer::replaces`]).
    /// `null` only in configurations from before Druid 0.10.1; new definitions need one.
    #[serde(default, deserialize_with = "scalar_text")]
    pub version: Option<String>,
    /// The factory object, e.g. `{"type": "map", "map": {...}}`.
    pub lookup_extractor_factory: Map<String, Value>,
}

impl LookupContainer {
    /// Druid's rule (`LookupExtractorFactoryMapContainer.replaces`): this definition replaces
    /// `other` when its version is greater, comparing as Java strings (UTF-16 code units; a null
    /// version sorts first; two null versions never replace each other).
    pub fn replaces(&self, other: &LookupContainer) -> bool {
        match (&self.version, &other.version) {
            (None, None) | (None, Some(_)) => false,
            (Some(_), None) => true,
            (Some(a), Some(b)) => java_string_cmp(a, b) == Ordering::Greater,
        }
    }
}

/// Java's `String.compareTo`: lexicographic over UTF-16 code units (which differs from Rust's
/// byte order only between characters above U+FFFF and U+E000..U+FFFF).
pub fn java_string_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Every tier's lookups: `{tier: {lookupName: LookupContainer}}` (the `lookupsConfig`
/// document). Tiers and names are kept sorted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LookupsConfig {
    /// Lookups by tier, then by name.
    pub tiers: BTreeMap<String, BTreeMap<String, LookupContainer>>,
}

impl LookupsConfig {
    /// The definition of `name` in `tier`.
    pub fn get(&self, tier: &str, name: &str) -> Option<&LookupContainer> {
        self.tiers.get(tier)?.get(name)
    }

    /// True when no tier is configured.
    pub fn is_empty(&self) -> bool {
        self.tiers.is_empty()
    }

    /// Which definition this process serves for each lookup name: Dolmen is one process and a
    /// member of every tier, so a name defined in several tiers is served from
    /// [`DEFAULT_TIER`] when defined there, else from the first tier in name order.
    pub fn served(&self) -> BTreeMap<&str, (&str, &LookupContainer)> {
        let mut out = BTreeMap::new();
        let default = self.tiers.get_key_value(DEFAULT_TIER);
        let others = self.tiers.iter().filter(|(t, _)| *t != DEFAULT_TIER);
        for (tier, lookups) in default.into_iter().chain(others) {
            for (name, container) in lookups {
                out.entry(name.as_str())
                    .or_insert((tier.as_str(), container));
            }
        }
        out
    }

    /// Druid's `updateLookups`: adds or replaces the given definitions (nothing is deleted).
    /// Every definition must have a version and a factory Dolmen can load, and an existing
    /// definition is only replaced by a greater version; on any error nothing changes.
    ///
    /// # Errors
    /// [`LookupError::InvalidInput`] naming the tier, lookup and field.
    pub fn merged(&self, update: &LookupsConfig) -> Result<LookupsConfig, LookupError> {
        for (tier, lookups) in &update.tiers {
            if tier.is_empty() {
                return Err(LookupError::InvalidInput(
                    "a tier name must not be empty".to_string(),
                ));
            }
            for (name, container) in lookups {
                validate(tier, name, container)?;
                if let Some(existing) = self.get(tier, name)
                    && !container.replaces(existing)
                {
                    return Err(LookupError::InvalidInput(format!(
                        "given update for lookup [{tier}]:[{name}] can't replace existing spec: version [{}] must be greater than the existing version [{}] (compared as strings)",
                        container.version.as_deref().unwrap_or("null"),
                        existing.version.as_deref().unwrap_or("null"),
                    )));
                }
            }
        }
        let mut next = self.clone();
        for (tier, lookups) in &update.tiers {
            let entry = next.tiers.entry(tier.clone()).or_default();
            for (name, container) in lookups {
                entry.insert(name.clone(), container.clone());
            }
        }
        Ok(next)
    }
}

/// Checks one definition for `tier`/`name` and parses its factory.
///
/// # Errors
/// [`LookupError::InvalidInput`] for an empty name, a missing version (Druid's "does not have
/// version") or a factory Dolmen cannot load, naming the field.
pub fn validate(
    tier: &str,
    name: &str,
    container: &LookupContainer,
) -> Result<LookupFactory, LookupError> {
    if name.is_empty() {
        return Err(LookupError::InvalidInput(format!(
            "a lookup name in tier [{tier}] must not be empty"
        )));
    }
    if container.version.is_none() {
        return Err(LookupError::InvalidInput(format!(
            "lookup [{tier}]:[{name}] does not have version: the field version is required"
        )));
    }
    LookupFactory::parse(&container.lookup_extractor_factory).map_err(|e| {
        LookupError::InvalidInput(format!(
            "lookup [{tier}]:[{name}]: lookupExtractorFactory.{e}"
        ))
    })
}

/// A problem with one field of a factory: `path: message`, the path relative to the factory
/// object (`type`, `map.k`, `extractionNamespace.uri`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    /// An error of the field at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error under a parent field.
    pub fn under(self, parent: &str) -> FieldError {
        FieldError {
            path: if self.path.is_empty() {
                parent.to_string()
            } else {
                format!("{parent}.{}", self.path)
            },
            message: self.message,
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Deserializes `value` (an object) into `T`, reporting the failing field's path.
pub(crate) fn from_object<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        FieldError::new(path, e.into_inner().to_string())
    })
}

/// The `type` of a typed object and the object without it.
pub(crate) fn split_type(
    obj: &Map<String, Value>,
    field: &str,
    known: &[&str],
) -> Result<(String, Value), FieldError> {
    let kinds = known.join(", ");
    let ty = match obj.get(field) {
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(FieldError::new(
                field,
                format!("must be a string, one of [{kinds}], got {other}"),
            ));
        }
        None => return Err(FieldError::new(field, format!("missing; one of [{kinds}]"))),
    };
    let mut rest = obj.clone();
    rest.remove(field);
    Ok((ty, Value::Object(rest)))
}

/// A lookup factory Dolmen can load (see the module docs).
#[derive(Debug, Clone)]
pub enum LookupFactory {
    /// `map`: the entries given inline.
    Map(Arc<LookupMap>),
    /// `cachedNamespace`: entries read from an extraction namespace.
    CachedNamespace {
        /// Where the entries come from.
        namespace: Box<ExtractionNamespace>,
        /// `injective`: keys and values are one-to-one.
        injective: bool,
    },
}

/// The `map` factory's fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFactorySpec {
    map: BTreeMap<String, ScalarText>,
    #[serde(rename = "isOneToOne", default)]
    is_one_to_one: bool,
    #[serde(default)]
    injective: Option<bool>,
}

/// The `cachedNamespace` factory's fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CachedNamespaceSpec {
    extraction_namespace: Map<String, Value>,
    /// Milliseconds to wait for the first load; Dolmen always loads before acknowledging.
    #[serde(default)]
    #[allow(dead_code)]
    first_cache_timeout: Option<u64>,
    #[serde(default)]
    injective: Option<bool>,
}

impl LookupFactory {
    /// The factory types Dolmen loads.
    pub const TYPES: [&'static str; 2] = ["map", "cachedNamespace"];

    /// Parses a `lookupExtractorFactory` object.
    ///
    /// # Errors
    /// A [`FieldError`] naming the field relative to the object: an unknown `type` or field, a
    /// missing or mistyped field, an unsupported namespace.
    pub fn parse(obj: &Map<String, Value>) -> Result<LookupFactory, FieldError> {
        let (ty, rest) = split_type(obj, "type", &Self::TYPES)?;
        match ty.as_str() {
            "map" => {
                let spec: MapFactorySpec = from_object(rest)?;
                let entries: HashMap<String, String> = spec
                    .map
                    .into_iter()
                    .filter_map(|(k, v)| v.0.map(|v| (k, v)))
                    .collect();
                let injective = spec.is_one_to_one || spec.injective.unwrap_or(false);
                Ok(LookupFactory::Map(Arc::new(LookupMap::new(
                    entries, injective,
                ))))
            }
            "cachedNamespace" => {
                let spec: CachedNamespaceSpec = from_object(rest)?;
                let namespace = ExtractionNamespace::parse(&spec.extraction_namespace)
                    .map_err(|e| e.under("extractionNamespace"))?;
                Ok(LookupFactory::CachedNamespace {
                    namespace: Box::new(namespace),
                    injective: spec.injective.unwrap_or(false),
                })
            }
            other => Err(FieldError::new(
                "type",
                format!(
                    "unknown lookup type [{other}]; Dolmen supports [{}]",
                    Self::TYPES.join(", ")
                ),
            )),
        }
    }

    /// How often the entries are read again (`pollPeriod` of a namespace), if ever.
    pub fn poll_period(&self) -> Option<std::time::Duration> {
        match self {
            LookupFactory::Map(_) => None,
            LookupFactory::CachedNamespace { namespace, .. } => namespace.poll_period(),
        }
    }
}

/// A JSON scalar read as text, as Jackson reads a `String` field: strings as they are, numbers
/// and booleans as their JSON text, `null` as `None`; objects and arrays are errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalarText(pub(crate) Option<String>);

impl<'de> Deserialize<'de> for ScalarText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(ScalarText(None)),
            Value::String(s) => Ok(ScalarText(Some(s))),
            v @ (Value::Number(_) | Value::Bool(_)) => Ok(ScalarText(Some(v.to_string()))),
            other => Err(serde::de::Error::custom(format!(
                "expected a string, got {other}"
            ))),
        }
    }
}

/// `deserialize_with` for an optional string field that takes any JSON scalar.
fn scalar_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    ScalarText::deserialize(d).map(|t| t.0)
}

/// Parses a request body into `T` with errors naming the JSON path:
/// `Invalid request payload: <path>: <reason>`.
///
/// # Errors
/// [`LookupError::InvalidInput`] for an empty body, text that is not JSON, or JSON of the wrong
/// shape.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, LookupError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(LookupError::InvalidInput(
            "Invalid request payload: a JSON body is required".to_string(),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let out: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        LookupError::InvalidInput(if path == "." || path.is_empty() {
            format!("Invalid request payload: {inner}")
        } else {
            format!("Invalid request payload: {path}: {inner}")
        })
    })?;
    de.end().map_err(|e| {
        LookupError::InvalidInput(format!("Invalid request payload: trailing characters: {e}"))
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn container(version: Option<&str>, factory: Value) -> LookupContainer {
        LookupContainer {
            version: version.map(str::to_string),
            lookup_extractor_factory: factory.as_object().unwrap().clone(),
        }
    }

    fn map_factory(pairs: Value) -> Value {
        json!({"type": "map", "map": pairs})
    }

    #[test]
    fn versions_compare_as_java_strings() {
        let c = |v: Option<&str>| container(v, map_factory(json!({})));
        assert!(c(Some("v2")).replaces(&c(Some("v1"))));
        assert!(!c(Some("v1")).replaces(&c(Some("v1"))), "same version");
        assert!(!c(Some("v1")).replaces(&c(Some("v2"))));
        // String order, not numeric: "10" < "9".
        assert!(!c(Some("10")).replaces(&c(Some("9"))));
        assert!(c(Some("v1789128374")).replaces(&c(Some("v1"))));
        // Null sorts first; two nulls never replace each other.
        assert!(c(Some("a")).replaces(&c(None)));
        assert!(!c(None).replaces(&c(Some("a"))));
        assert!(!c(None).replaces(&c(None)));
        // UTF-16 order: U+FFFD (one unit 0xFFFD) sorts after U+1F600 (surrogates 0xD83D..),
        // while byte order says the opposite.
        assert_eq!(java_string_cmp("\u{FFFD}", "\u{1F600}"), Ordering::Greater);
        assert!("\u{FFFD}" < "\u{1F600}");
    }

    #[test]
    fn containers_parse_with_jackson_coercions_and_name_bad_fields() {
        let c: LookupContainer = parse_body(
            br#"{"version": 3, "lookupExtractorFactory": {"type": "map", "map": {"a": 1, "b": true, "c": null, "d": "x"}}}"#,
        )
        .unwrap();
        assert_eq!(c.version.as_deref(), Some("3"));
        let LookupFactory::Map(m) = LookupFactory::parse(&c.lookup_extractor_factory).unwrap()
        else {
            panic!("a map")
        };
        assert_eq!(m.get("a"), Some("1"));
        assert_eq!(m.get("b"), Some("true"));
        assert_eq!(m.get("c"), None, "a null value is dropped");
        assert_eq!(m.get("d"), Some("x"));
        assert!(!m.injective());

        for (body, needle) in [
            (&b""[..], "a JSON body is required"),
            (b"{", "Invalid request payload"),
            (b"[]", "Invalid request payload"),
            (br#"{"version": "v1"}"#, "lookupExtractorFactory"),
            (
                br#"{"version": {}, "lookupExtractorFactory": {}}"#,
                "version",
            ),
            (
                br#"{"version": "v1", "lookupExtractorFactory": "map"}"#,
                "lookupExtractorFactory",
            ),
            (
                br#"{"version": "v1", "lookupExtractorFactory": {}, "extra": 1}"#,
                "extra",
            ),
            (
                br#"{"version": "v1", "lookupExtractorFactory": {}} x"#,
                "trailing",
            ),
        ] {
            let e = parse_body::<LookupContainer>(body).unwrap_err().to_string();
            assert!(e.contains(needle), "{}: {e}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn factories_name_the_offending_field() {
        let err = |f: Value| {
            LookupFactory::parse(f.as_object().unwrap())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(json!({"type": "jdbc"})),
            "type: unknown lookup type [jdbc]; Dolmen supports [map, cachedNamespace]"
        );
        assert!(err(json!({})).starts_with("type: missing"));
        assert!(err(json!({"type": 1})).starts_with("type: must be a string"));
        assert!(err(json!({"type": "map"})).contains("map"));
        assert!(err(json!({"type": "map", "map": {"a": {"x": 1}}})).starts_with("map.a:"));
        assert!(err(json!({"type": "map", "map": {}, "bogus": 1})).contains("bogus"));
        assert!(err(json!({"type": "map", "map": [1]})).starts_with("map:"));
        assert!(
            err(json!({"type": "cachedNamespace", "extractionNamespace": {"type": "jdbc"}}))
                .starts_with("extractionNamespace.type:")
        );
        // isOneToOne and injective both mark a map injective.
        for f in [
            json!({"type": "map", "map": {}, "isOneToOne": true}),
            json!({"type": "map", "map": {}, "injective": true}),
        ] {
            let LookupFactory::Map(m) = LookupFactory::parse(f.as_object().unwrap()).unwrap()
            else {
                panic!()
            };
            assert!(m.injective());
        }
    }

    #[test]
    fn updates_follow_druids_rules() {
        let c = |v: &str, k: &str| container(Some(v), map_factory(json!({ k: "x" })));
        let base = LookupsConfig::default();
        let update = LookupsConfig {
            tiers: [(
                DEFAULT_TIER.to_string(),
                [("a".to_string(), c("v1", "k"))].into(),
            )]
            .into(),
        };
        let one = base.merged(&update).unwrap();
        assert_eq!(one.get(DEFAULT_TIER, "a"), Some(&c("v1", "k")));
        // Same version again: refused, nothing changes.
        let e = one.merged(&update).unwrap_err().to_string();
        assert!(
            e.contains("given update for lookup [__default]:[a] can't replace existing spec"),
            "{e}"
        );
        assert!(e.contains("version [v1]"), "{e}");
        // A greater version replaces; another lookup and another tier are added beside.
        let two = one
            .merged(&LookupsConfig {
                tiers: [
                    (
                        DEFAULT_TIER.to_string(),
                        [
                            ("a".to_string(), c("v2", "k2")),
                            ("b".to_string(), c("v1", "k")),
                        ]
                        .into(),
                    ),
                    ("hot".to_string(), [("a".to_string(), c("v0", "h"))].into()),
                ]
                .into(),
            })
            .unwrap();
        assert_eq!(two.get(DEFAULT_TIER, "a"), Some(&c("v2", "k2")));
        assert_eq!(two.tiers.len(), 2);
        // The default tier's definition is the one served for a name in several tiers.
        let served = two.served();
        assert_eq!(served["a"].0, DEFAULT_TIER);
        assert_eq!(served["b"].0, DEFAULT_TIER);
        // A bad definition anywhere in an update changes nothing.
        let mut bad = LookupsConfig::default();
        bad.tiers.insert(
            "t".into(),
            [
                ("ok".to_string(), c("v1", "k")),
                (
                    "no_version".to_string(),
                    container(None, map_factory(json!({}))),
                ),
            ]
            .into(),
        );
        let e = two.merged(&bad).unwrap_err().to_string();
        assert!(
            e.contains("lookup [t]:[no_version] does not have version"),
            "{e}"
        );
        let mut empty_tier = LookupsConfig::default();
        empty_tier.tiers.insert(String::new(), BTreeMap::new());
        assert!(two.merged(&empty_tier).is_err());
        let mut empty_name = LookupsConfig::default();
        empty_name
            .tiers
            .insert("t".into(), [(String::new(), c("v1", "k"))].into());
        assert!(two.merged(&empty_name).is_err());
    }

    #[test]
    fn served_falls_back_to_the_first_tier_by_name() {
        let c = |v: &str| container(Some(v), map_factory(json!({})));
        let cfg = LookupsConfig {
            tiers: [
                ("b_tier".to_string(), [("x".to_string(), c("b"))].into()),
                ("a_tier".to_string(), [("x".to_string(), c("a"))].into()),
            ]
            .into(),
        };
        assert_eq!(cfg.served()["x"].0, "a_tier");
    }

    /// The stored document is Druid's `lookupsConfig` shape; this one must keep parsing.
    #[test]
    fn the_stored_document_is_druids_shape() {
        let stored = json!({
            "__default": {
                "country": {
                    "version": "v1",
                    "lookupExtractorFactory": {"type": "map", "map": {"US": "United States"}}
                }
            },
            "empty_tier": {}
        });
        let cfg: LookupsConfig = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(cfg.tiers.len(), 2);
        assert_eq!(serde_json::to_value(&cfg).unwrap(), stored);
    }
}
