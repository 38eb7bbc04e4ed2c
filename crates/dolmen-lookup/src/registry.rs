//! [`LookupRegistry`]: the lookups this process serves, as queries read them.
//!
//! The registry holds one immutable snapshot, `name -> ServedLookup`, behind a lock held only
//! to clone an `Arc`; a change builds a new snapshot and swaps it in. A query takes the table
//! of a lookup once per batch ([`LookupRegistry::map`]) and reads it without further locking.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use crate::LookupMap;
use crate::namespace::SourceStamp;
use crate::spec::{DEFAULT_TIER, LookupContainer, LookupFactory};

/// Whether a served lookup's table is available.
#[derive(Debug, Clone)]
pub enum LoadState {
    /// Loaded; queries read `map`.
    Loaded {
        /// The table.
        map: Arc<LookupMap>,
        /// The file it was read from (`uri` namespaces), to tell on a poll whether it changed.
        source: Option<SourceStamp>,
    },
    /// The definition could not be loaded (a stored definition Dolmen cannot parse, a file that
    /// cannot be read); queries naming it fail with this reason.
    Failed {
        /// Why.
        error: String,
    },
}

/// One lookup name as this process serves it.
#[derive(Debug, Clone)]
pub struct ServedLookup {
    /// The lookup name.
    pub name: String,
    /// The tier whose definition is served.
    pub tier: String,
    /// That definition.
    pub container: LookupContainer,
    /// The table, or why there is none.
    pub state: LoadState,
    /// When the table was last read or its source checked, or the load last failed (ms since
    /// the epoch): polls of `uri` namespaces count from here.
    pub checked_ms: i64,
    /// The parsed factory (`None` when the definition does not parse).
    pub factory: Option<Arc<LookupFactory>>,
}

impl ServedLookup {
    /// The table, when loaded.
    pub fn map(&self) -> Option<&Arc<LookupMap>> {
        match &self.state {
            LoadState::Loaded { map, .. } => Some(map),
            LoadState::Failed { .. } => None,
        }
    }
}

/// A lookup a query names that cannot be read. The message starts as Druid's (`Lookup [name]
/// not found`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupUnavailable {
    /// No lookup of that name is configured in any tier.
    #[error("Lookup [{0}] not found")]
    NotFound(String),
    /// Configured, but its table could not be loaded.
    #[error("Lookup [{name}] not found: its definition (tier [{tier}]) failed to load: {error}")]
    Failed {
        /// The lookup.
        name: String,
        /// The tier whose definition failed.
        tier: String,
        /// Why.
        error: String,
    },
}

/// The lookups served now; see the module docs.
#[derive(Debug, Default)]
pub struct LookupRegistry {
    served: RwLock<Arc<BTreeMap<String, Arc<ServedLookup>>>>,
}

impl LookupRegistry {
    /// A registry serving the given tables as `map` lookups of the default tier (for tests and
    /// embedding; a server fills its registry through [`crate::LookupManager`]).
    pub fn from_maps(maps: impl IntoIterator<Item = (String, LookupMap)>) -> LookupRegistry {
        let registry = LookupRegistry::default();
        let served = maps
            .into_iter()
            .map(|(name, map)| {
                let inline: Map<String, Value> = map
                    .sorted_entries()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                    .collect();
                let mut factory = Map::new();
                factory.insert("type".into(), Value::String("map".into()));
                factory.insert("map".into(), Value::Object(inline));
                factory.insert("isOneToOne".into(), Value::Bool(map.injective()));
                let map = Arc::new(map);
                let served = ServedLookup {
                    name: name.clone(),
                    tier: DEFAULT_TIER.to_string(),
                    container: LookupContainer {
                        version: Some("v0".to_string()),
                        lookup_extractor_factory: factory,
                    },
                    state: LoadState::Loaded {
                        map: Arc::clone(&map),
                        source: None,
                    },
                    checked_ms: 0,
                    factory: Some(Arc::new(LookupFactory::Map(map))),
                };
                (name, Arc::new(served))
            })
            .collect();
        registry.replace(served);
        registry
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<BTreeMap<String, Arc<ServedLookup>>> {
        Arc::clone(&self.served.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// One served lookup, loaded or not.
    pub fn get(&self, name: &str) -> Option<Arc<ServedLookup>> {
        self.snapshot().get(name).cloned()
    }

    /// The table of lookup `name`, for a query.
    ///
    /// # Errors
    /// [`LookupUnavailable`] when no tier defines it or it failed to load.
    pub fn map(&self, name: &str) -> Result<Arc<LookupMap>, LookupUnavailable> {
        let served = self
            .get(name)
            .ok_or_else(|| LookupUnavailable::NotFound(name.to_string()))?;
        match &served.state {
            LoadState::Loaded { map, .. } => Ok(Arc::clone(map)),
            LoadState::Failed { error } => Err(LookupUnavailable::Failed {
                name: name.to_string(),
                tier: served.tier.clone(),
                error: error.clone(),
            }),
        }
    }

    /// Names of the lookups queries can read (loaded ones), sorted: the tables of the SQL
    /// `lookup` schema.
    pub fn loaded_names(&self) -> Vec<String> {
        self.snapshot()
            .values()
            .filter(|s| s.map().is_some())
            .map(|s| s.name.clone())
            .collect()
    }

    /// Swaps in a new snapshot.
    pub fn replace(&self, served: BTreeMap<String, Arc<ServedLookup>>) {
        *self.served.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(served);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn queries_read_loaded_tables_and_learn_why_others_are_missing() {
        let map = LookupMap::new(HashMap::from([("a".into(), "x".into())]), false);
        let registry = LookupRegistry::from_maps([("l".to_string(), map)]);
        assert_eq!(registry.map("l").unwrap().get("a"), Some("x"));
        assert_eq!(
            registry.map("nope").unwrap_err().to_string(),
            "Lookup [nope] not found"
        );
        let mut served = (*registry.snapshot()).clone();
        let mut failed = (*served["l"]).clone();
        failed.state = LoadState::Failed {
            error: "cannot read [/x]".into(),
        };
        served.insert(
            "bad".into(),
            Arc::new(ServedLookup {
                name: "bad".into(),
                ..failed
            }),
        );
        registry.replace(served);
        assert_eq!(registry.loaded_names(), vec!["l".to_string()]);
        assert_eq!(
            registry.map("bad").unwrap_err().to_string(),
            "Lookup [bad] not found: its definition (tier [__default]) failed to load: cannot read [/x]"
        );
    }
}
