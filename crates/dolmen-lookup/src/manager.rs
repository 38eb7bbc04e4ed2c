//! [`LookupManager`]: Druid's `LookupCoordinatorManager` (the configuration and its rules) and
//! `LookupReferencesManager` (loading the tables) in one.
//!
//! # Configuration
//! The whole configuration is one JSON document in the metadata store under
//! [`LOOKUPS_CONFIG_KEY`], Druid's own key and shape. Until something is stored, lookups are
//! *not initialized*: the API answers 404 and refuses any update but the empty map
//! ([`LookupError::NotInitialized`], Druid's message), which initializes them. Updates
//! ([`LookupManager::update`]) add or replace definitions under Druid's version rule; deletes
//! remove one lookup (and its tier when it was the tier's last, as Druid) or a whole tier.
//!
//! Every change is a read-modify-write under one writer lock: the new document is checked,
//! its lookups are loaded, the document is written to the metadata store (compare-and-swap
//! against the document it was computed from: a change another process made meanwhile is a
//! 409, never silently overwritten), and only then do the in-memory configuration and the
//! served tables change, so an acknowledged change is durable and the very next query sees it.
//! [`LookupManager::start`] reads the document and loads every lookup; a definition that does
//! not load (an unreadable file) is served as failed and reported by the status endpoints
//! rather than stopping the server.
//!
//! # Loading and polling
//! `map` and `staticMap` tables are built from the definition; `uri` namespaces read their file
//! on a blocking thread. An unchanged definition keeps its loaded table across updates; a
//! failed one is retried at every change and poll. [`LookupManager::poll`] re-checks `uri`
//! namespaces whose `pollPeriod` elapsed and re-reads their file when it changed; a failed
//! re-read keeps the previous table. [`LookupManager::refresh_from_store`] picks up a document
//! another process wrote.
//!
//! # Status
//! Druid reports, per tier and lookup, whether every query process of the tier has it loaded
//! (`LookupCoordinatorResource.getLookupStatus`): not loaded when the node has no table of that
//! name or the configured definition [`replaces`](LookupContainer::replaces) the loaded one.
//! Dolmen applies the same rule with itself as the only node of every tier.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use dolmen_common::time::now_millis;
use dolmen_metadata::{LOOKUPS_CONFIG_KEY, MetadataError, MetadataStore};
use serde::Serialize;

use crate::namespace::{ExtractionNamespace, UriNamespace};
use crate::registry::{LoadState, LookupRegistry, ServedLookup};
use crate::spec::{DEFAULT_TIER, LookupContainer, LookupFactory, LookupsConfig, validate};
use crate::{LookupError, LookupMap};

/// Load status of one configured lookup (Druid's `LookupCoordinatorResource.LookupStatus`):
/// `{"loaded": bool}`, plus `"pendingNodes": ["host:port"]` when detailed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LookupStatus {
    /// Every node of the tier (here: this process) serves this definition or a newer one.
    pub loaded: bool,
    /// With `detailed`: the nodes that do not.
    #[serde(rename = "pendingNodes", skip_serializing_if = "Option::is_none")]
    pub pending_nodes: Option<Vec<String>>,
}

/// See the module docs.
#[derive(Debug)]
pub struct LookupManager {
    metadata: Arc<dyn MetadataStore>,
    registry: Arc<LookupRegistry>,
    node: String,
    /// `None`: not initialized.
    config: RwLock<Arc<Option<LookupsConfig>>>,
    writer: tokio::sync::Mutex<()>,
}

impl LookupManager {
    /// Reads the stored configuration and loads every served lookup into `registry`; `node`
    /// (`host:port`) is how status reports name this process.
    ///
    /// # Errors
    /// When the metadata store fails or holds a document that does not decode.
    pub async fn start(
        metadata: Arc<dyn MetadataStore>,
        registry: Arc<LookupRegistry>,
        node: String,
    ) -> Result<Arc<LookupManager>, LookupError> {
        let manager = LookupManager {
            metadata,
            registry,
            node,
            config: RwLock::new(Arc::new(None)),
            writer: tokio::sync::Mutex::new(()),
        };
        let stored = manager.read_stored().await?;
        let served = manager.prepare(stored.as_ref()).await;
        manager.install(stored, served);
        let snapshot = manager.registry.snapshot();
        let failed = snapshot.values().filter(|s| s.map().is_none()).count();
        tracing::info!(
            lookups = snapshot.len(),
            failed,
            initialized = manager.config().is_some(),
            "lookups loaded"
        );
        Ok(Arc::new(manager))
    }

    /// The configuration now; `None` when not initialized.
    pub fn config(&self) -> Arc<Option<LookupsConfig>> {
        Arc::clone(&self.config.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The tables queries read.
    pub fn registry(&self) -> &Arc<LookupRegistry> {
        &self.registry
    }

    /// `host:port` of this process.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The tiers of `GET /lookups/config?discover=true`: the configured ones and the tier this
    /// process announces (`__default`, Druid's default `druid.lookup.lookupTier`), sorted.
    pub fn discovered_tiers(&self) -> Vec<String> {
        let mut tiers: Vec<String> = self
            .config()
            .as_ref()
            .as_ref()
            .map(|c| c.tiers.keys().cloned().collect())
            .unwrap_or_default();
        if !tiers.iter().any(|t| t == DEFAULT_TIER) {
            tiers.push(DEFAULT_TIER.to_string());
            tiers.sort();
        }
        tiers
    }

    /// Druid's `updateLookups` (`POST /lookups/config`): adds or replaces the given
    /// definitions. On an uninitialized configuration only the empty map is accepted (it
    /// initializes it); on an initialized one the empty map changes nothing.
    ///
    /// # Errors
    /// [`LookupError::InvalidInput`] (see [`LookupsConfig::merged`]),
    /// [`LookupError::NotInitialized`], [`LookupError::Metadata`].
    pub async fn update(&self, update: LookupsConfig) -> Result<(), LookupError> {
        let _writer = self.writer.lock().await;
        let current = self.config();
        let next = match current.as_ref() {
            None if update.is_empty() => LookupsConfig::default(),
            None => {
                // Druid checks versions before it looks at the state.
                LookupsConfig::default().merged(&update)?;
                return Err(LookupError::NotInitialized);
            }
            Some(_) if update.is_empty() => return Ok(()),
            Some(cfg) => cfg.merged(&update)?,
        };
        self.commit(current.as_ref().as_ref(), next).await
    }

    /// Druid's `updateLookup` (`POST /lookups/config/{tier}/{name}`): [`LookupManager::update`]
    /// of one definition.
    ///
    /// # Errors
    /// As [`LookupManager::update`].
    pub async fn update_lookup(
        &self,
        tier: &str,
        name: &str,
        container: LookupContainer,
    ) -> Result<(), LookupError> {
        let mut update = LookupsConfig::default();
        update
            .tiers
            .entry(tier.to_string())
            .or_default()
            .insert(name.to_string(), container);
        self.update(update).await
    }

    /// Druid's `deleteTier`: removes a tier and its lookups; `false` when there is no such
    /// tier (or lookups are not initialized).
    ///
    /// # Errors
    /// [`LookupError::Metadata`].
    pub async fn delete_tier(&self, tier: &str) -> Result<bool, LookupError> {
        let _writer = self.writer.lock().await;
        let current = self.config();
        let Some(cfg) = current.as_ref() else {
            return Ok(false);
        };
        if !cfg.tiers.contains_key(tier) {
            return Ok(false);
        }
        let mut next = cfg.clone();
        next.tiers.remove(tier);
        self.commit(Some(cfg), next).await?;
        Ok(true)
    }

    /// Druid's `deleteLookup`: removes one lookup of a tier, and the tier with its last
    /// lookup; `false` when there is no such lookup.
    ///
    /// # Errors
    /// [`LookupError::Metadata`].
    pub async fn delete_lookup(&self, tier: &str, name: &str) -> Result<bool, LookupError> {
        let _writer = self.writer.lock().await;
        let current = self.config();
        let Some(cfg) = current.as_ref() else {
            return Ok(false);
        };
        if cfg.get(tier, name).is_none() {
            return Ok(false);
        }
        let mut next = cfg.clone();
        if let Some(lookups) = next.tiers.get_mut(tier) {
            lookups.remove(name);
            if lookups.is_empty() {
                next.tiers.remove(tier);
            }
        }
        self.commit(Some(cfg), next).await?;
        Ok(true)
    }

    /// The load status of definition `def` of lookup `name` (see the module docs).
    pub fn status(&self, name: &str, def: &LookupContainer, detailed: bool) -> LookupStatus {
        let loaded = self
            .registry
            .get(name)
            .is_some_and(|s| s.map().is_some() && !def.replaces(&s.container));
        LookupStatus {
            loaded,
            pending_nodes: detailed.then(|| {
                if loaded {
                    Vec::new()
                } else {
                    vec![self.node.clone()]
                }
            }),
        }
    }

    /// Re-checks the `uri` namespaces whose `pollPeriod` elapsed (and retries failed loads of
    /// polled lookups): a changed file is read again and its table swapped in; an unchanged one
    /// only restarts the period.
    pub async fn poll(&self) {
        let _writer = self.writer.lock().await;
        let now = now_millis();
        let snapshot = self.registry.snapshot();
        let mut next = (*snapshot).clone();
        let mut changed = false;
        for (name, served) in snapshot.iter() {
            let Some(factory) = &served.factory else {
                continue;
            };
            let Some(period) = factory.poll_period() else {
                continue;
            };
            let due = served
                .checked_ms
                .saturating_add(i64::try_from(period.as_millis()).unwrap_or(i64::MAX));
            if now < due {
                continue;
            }
            let LookupFactory::CachedNamespace {
                namespace,
                injective,
            } = factory.as_ref()
            else {
                continue;
            };
            let ExtractionNamespace::Uri(uri) = namespace.as_ref() else {
                continue;
            };
            let refreshed = reread(uri, *injective, served).await;
            next.insert(name.clone(), Arc::new(refreshed));
            changed = true;
        }
        if changed {
            self.registry.replace(next);
        }
    }

    /// Applies the configuration stored by another process sharing the metadata store, when it
    /// differs from this one's.
    ///
    /// # Errors
    /// [`LookupError::Metadata`].
    pub async fn refresh_from_store(&self) -> Result<(), LookupError> {
        let _writer = self.writer.lock().await;
        let stored = self.read_stored().await?;
        if stored.as_ref() == self.config().as_ref().as_ref() {
            return Ok(());
        }
        tracing::info!("lookups configuration changed in the metadata store; reloading");
        let served = self.prepare(stored.as_ref()).await;
        self.install(stored, served);
        Ok(())
    }

    async fn read_stored(&self) -> Result<Option<LookupsConfig>, LookupError> {
        match self.metadata.config(LOOKUPS_CONFIG_KEY).await? {
            None => Ok(None),
            Some(doc) => serde_json::from_value(doc).map(Some).map_err(|e| {
                LookupError::Metadata(MetadataError::Corrupt {
                    what: "lookups configuration",
                    id: LOOKUPS_CONFIG_KEY.to_string(),
                    reason: e.to_string(),
                })
            }),
        }
    }

    /// Loads `next`, stores it (compare-and-swap against `previous`), then serves it.
    async fn commit(
        &self,
        previous: Option<&LookupsConfig>,
        next: LookupsConfig,
    ) -> Result<(), LookupError> {
        let served = self.prepare(Some(&next)).await;
        let to_json = |c: &LookupsConfig| {
            serde_json::to_value(c).map_err(|e| {
                LookupError::Metadata(MetadataError::Corrupt {
                    what: "lookups configuration",
                    id: LOOKUPS_CONFIG_KEY.to_string(),
                    reason: e.to_string(),
                })
            })
        };
        let expected = previous.map(to_json).transpose()?;
        let stored = self
            .metadata
            .set_config(LOOKUPS_CONFIG_KEY, Some(&expected), &to_json(&next)?)
            .await;
        if let Err(e) = stored {
            if matches!(e, MetadataError::Conflict(_)) {
                // Another process wrote meanwhile: serve what is stored now, and let the
                // client retry against it.
                if let Ok(stored) = self.read_stored().await {
                    let served = self.prepare(stored.as_ref()).await;
                    self.install(stored, served);
                }
            }
            return Err(e.into());
        }
        self.install(Some(next), served);
        Ok(())
    }

    fn install(&self, config: Option<LookupsConfig>, served: BTreeMap<String, Arc<ServedLookup>>) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        self.registry.replace(served);
    }

    /// The served lookups of `config`: unchanged loaded definitions keep their tables, others
    /// are loaded (failed ones again).
    async fn prepare(&self, config: Option<&LookupsConfig>) -> BTreeMap<String, Arc<ServedLookup>> {
        let old = self.registry.snapshot();
        let mut out = BTreeMap::new();
        let Some(config) = config else {
            return out;
        };
        for (name, (tier, container)) in config.served() {
            let reuse = old
                .get(name)
                .filter(|prev| prev.container == *container && prev.map().is_some());
            let served = match reuse {
                Some(prev) if prev.tier == tier => Arc::clone(prev),
                Some(prev) => Arc::new(ServedLookup {
                    tier: tier.to_string(),
                    ..(**prev).clone()
                }),
                None => Arc::new(load(name, tier, container).await),
            };
            out.insert(name.to_string(), served);
        }
        out
    }
}

/// Loads one definition; failures are recorded in the result, not returned.
async fn load(name: &str, tier: &str, container: &LookupContainer) -> ServedLookup {
    let mut served = ServedLookup {
        name: name.to_string(),
        tier: tier.to_string(),
        container: container.clone(),
        state: LoadState::Failed {
            error: String::new(),
        },
        checked_ms: now_millis(),
        factory: None,
    };
    let factory = match validate(tier, name, container) {
        Ok(f) => Arc::new(f),
        Err(e) => {
            served.state = LoadState::Failed {
                error: e.to_string(),
            };
            tracing::warn!(tier, lookup = name, error = %e, "lookup definition does not load");
            return served;
        }
    };
    served.state = match factory.as_ref() {
        LookupFactory::Map(map) => LoadState::Loaded {
            map: Arc::clone(map),
            source: None,
        },
        LookupFactory::CachedNamespace {
            namespace,
            injective,
        } => match namespace.as_ref() {
            ExtractionNamespace::StaticMap(entries) => LoadState::Loaded {
                map: Arc::new(LookupMap::new(entries.clone(), *injective)),
                source: None,
            },
            ExtractionNamespace::Uri(uri) => match read_uri(uri.clone()).await {
                Ok((entries, stamp)) => LoadState::Loaded {
                    map: Arc::new(LookupMap::new(entries, *injective)),
                    source: Some(stamp),
                },
                Err(error) => {
                    tracing::warn!(tier, lookup = name, %error, "lookup failed to load");
                    LoadState::Failed { error }
                }
            },
        },
    };
    served.checked_ms = now_millis();
    served.factory = Some(factory);
    served
}

type Entries = std::collections::HashMap<String, String>;

/// Locates and reads a `uri` namespace's file on a blocking thread.
async fn read_uri(uri: UriNamespace) -> Result<(Entries, crate::namespace::SourceStamp), String> {
    tokio::task::spawn_blocking(move || {
        let stamp = uri.locate()?;
        let entries = uri.read(&stamp)?;
        Ok((entries, stamp))
    })
    .await
    .unwrap_or_else(|e| Err(format!("the load was interrupted: {e}")))
}

/// A poll of a `uri` namespace: the same table when its file did not change, a new one when it
/// did, the previous one (or the failure) when the file cannot be read now.
async fn reread(uri: &UriNamespace, injective: bool, served: &ServedLookup) -> ServedLookup {
    let mut next = served.clone();
    next.checked_ms = now_millis();
    let previous = match &served.state {
        LoadState::Loaded { source, .. } => source.clone(),
        LoadState::Failed { .. } => None,
    };
    let uri = uri.clone();
    let result = tokio::task::spawn_blocking(move || {
        let stamp = uri.locate()?;
        if previous.as_ref() == Some(&stamp) {
            return Ok(None);
        }
        let entries = uri.read(&stamp)?;
        Ok(Some((entries, stamp)))
    })
    .await
    .unwrap_or_else(|e| Err(format!("the load was interrupted: {e}")));
    match result {
        Ok(None) => {}
        Ok(Some((entries, stamp))) => {
            tracing::info!(lookup = %served.name, path = %stamp.path.display(), entries = entries.len(), "lookup re-read");
            next.state = LoadState::Loaded {
                map: Arc::new(LookupMap::new(entries, injective)),
                source: Some(stamp),
            };
        }
        Err(error) => {
            tracing::warn!(lookup = %served.name, %error, "lookup poll failed; keeping the previous table");
            if served.map().is_none() {
                next.state = LoadState::Failed { error };
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dolmen_metadata::SqlMetadataStore;
    use serde_json::{Value, json};

    use super::*;

    async fn store() -> Arc<dyn MetadataStore> {
        Arc::new(SqlMetadataStore::connect("sqlite::memory:").await.unwrap())
    }

    fn config(v: Value) -> LookupsConfig {
        serde_json::from_value(v).unwrap()
    }

    fn container(v: Value) -> LookupContainer {
        serde_json::from_value(v).unwrap()
    }

    fn map_def(version: &str, map: Value) -> Value {
        json!({"version": version, "lookupExtractorFactory": {"type": "map", "map": map}})
    }

    #[tokio::test]
    async fn the_configuration_starts_uninitialized_and_survives_a_restart() {
        let metadata = store().await;
        let registry = Arc::new(LookupRegistry::default());
        let m = LookupManager::start(Arc::clone(&metadata), Arc::clone(&registry), "h:1".into())
            .await
            .unwrap();
        assert!(m.config().is_none());
        let one = config(json!({"__default": {"c": map_def("v1", json!({"a": "x"}))}}));
        // Druid's message until the empty map is posted.
        let e = m.update(one.clone()).await.unwrap_err();
        assert!(matches!(e, LookupError::NotInitialized), "{e}");
        assert!(metadata.config(LOOKUPS_CONFIG_KEY).await.unwrap().is_none());
        m.update(LookupsConfig::default()).await.unwrap();
        assert_eq!(
            m.config().as_ref().as_ref(),
            Some(&LookupsConfig::default())
        );
        m.update(one.clone()).await.unwrap();
        assert_eq!(registry.map("c").unwrap().get("a"), Some("x"));
        assert_eq!(
            metadata.config(LOOKUPS_CONFIG_KEY).await.unwrap(),
            Some(serde_json::to_value(&one).unwrap())
        );
        // A new manager over the same store serves the same lookups.
        let registry2 = Arc::new(LookupRegistry::default());
        let m2 = LookupManager::start(metadata, Arc::clone(&registry2), "h:1".into())
            .await
            .unwrap();
        assert_eq!(m2.config().as_ref().as_ref(), Some(&one));
        assert_eq!(registry2.map("c").unwrap().get("a"), Some("x"));
    }

    #[tokio::test]
    async fn updates_deletes_and_status() {
        let registry = Arc::new(LookupRegistry::default());
        let m = LookupManager::start(store().await, Arc::clone(&registry), "h:1".into())
            .await
            .unwrap();
        m.update(LookupsConfig::default()).await.unwrap();
        m.update(config(json!({
            "__default": {"c": map_def("v1", json!({"a": "x"}))},
            "hot": {"c": map_def("v0", json!({"a": "hot"})), "h": map_def("v1", json!({"k": "v"}))}
        })))
        .await
        .unwrap();
        // The default tier wins a name defined in two tiers.
        assert_eq!(registry.map("c").unwrap().get("a"), Some("x"));
        assert_eq!(registry.map("h").unwrap().get("k"), Some("v"));
        let def = |tier: &str, name: &str| {
            m.config()
                .as_ref()
                .as_ref()
                .unwrap()
                .get(tier, name)
                .unwrap()
                .clone()
        };
        assert_eq!(
            m.status("c", &def("__default", "c"), true),
            LookupStatus {
                loaded: true,
                pending_nodes: Some(vec![])
            }
        );
        // hot's v0 is older than the served v1: loaded, as Druid's rule says.
        assert!(m.status("c", &def("hot", "c"), false).loaded);
        // A newer definition in another tier is not what this node serves.
        m.update_lookup("hot", "c", container(map_def("v9", json!({"a": "new"}))))
            .await
            .unwrap();
        let st = m.status("c", &def("hot", "c"), true);
        assert_eq!(
            st,
            LookupStatus {
                loaded: false,
                pending_nodes: Some(vec!["h:1".into()])
            }
        );
        assert_eq!(
            serde_json::to_value(&st).unwrap(),
            json!({"loaded": false, "pendingNodes": ["h:1"]})
        );
        assert_eq!(
            serde_json::to_value(m.status("c", &def("__default", "c"), false)).unwrap(),
            json!({"loaded": true})
        );
        // Version rule through the manager; the table is unchanged after a refusal.
        let e = m
            .update_lookup(
                "__default",
                "c",
                container(map_def("v1", json!({"a": "y"}))),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, LookupError::InvalidInput(_)), "{e}");
        assert_eq!(registry.map("c").unwrap().get("a"), Some("x"));
        m.update_lookup(
            "__default",
            "c",
            container(map_def("v2", json!({"a": "y"}))),
        )
        .await
        .unwrap();
        assert_eq!(registry.map("c").unwrap().get("a"), Some("y"));
        // The empty update changes nothing once initialized.
        m.update(LookupsConfig::default()).await.unwrap();
        assert_eq!(m.config().as_ref().as_ref().unwrap().tiers.len(), 2);

        // Deleting the default tier's definition serves hot's.
        assert!(m.delete_lookup("__default", "c").await.unwrap());
        assert!(
            !m.config()
                .as_ref()
                .as_ref()
                .unwrap()
                .tiers
                .contains_key("__default"),
            "a tier goes with its last lookup"
        );
        assert_eq!(registry.map("c").unwrap().get("a"), Some("new"));
        assert!(!m.delete_lookup("__default", "c").await.unwrap());
        assert!(!m.delete_tier("nope").await.unwrap());
        assert!(m.delete_tier("hot").await.unwrap());
        assert!(registry.map("c").is_err());
        assert!(registry.snapshot().is_empty());
        assert_eq!(m.discovered_tiers(), vec!["__default".to_string()]);
    }

    #[tokio::test]
    async fn a_concurrent_writer_is_a_conflict_not_a_lost_update() {
        let metadata = store().await;
        let m = LookupManager::start(
            Arc::clone(&metadata),
            Arc::new(LookupRegistry::default()),
            "h:1".into(),
        )
        .await
        .unwrap();
        m.update(LookupsConfig::default()).await.unwrap();
        // Another process stores a lookup behind this manager's back.
        let theirs = config(json!({"__default": {"o": map_def("v1", json!({"k": "o"}))}}));
        metadata
            .set_config(
                LOOKUPS_CONFIG_KEY,
                None,
                &serde_json::to_value(&theirs).unwrap(),
            )
            .await
            .unwrap();
        let e = m
            .update(config(
                json!({"__default": {"mine": map_def("v1", json!({}))}}),
            ))
            .await
            .unwrap_err();
        assert!(
            matches!(e, LookupError::Metadata(MetadataError::Conflict(_))),
            "{e}"
        );
        // The manager now serves what is stored; a retry succeeds and keeps both.
        assert_eq!(m.config().as_ref().as_ref(), Some(&theirs));
        m.update(config(
            json!({"__default": {"mine": map_def("v1", json!({}))}}),
        ))
        .await
        .unwrap();
        assert_eq!(
            m.config().as_ref().as_ref().unwrap().tiers["__default"].len(),
            2
        );
        // refresh_from_store picks up changes made elsewhere.
        metadata
            .set_config(
                LOOKUPS_CONFIG_KEY,
                None,
                &serde_json::to_value(&theirs).unwrap(),
            )
            .await
            .unwrap();
        m.refresh_from_store().await.unwrap();
        assert_eq!(m.config().as_ref().as_ref(), Some(&theirs));
    }

    #[tokio::test]
    async fn uri_lookups_load_fail_and_poll() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("l.csv");
        let registry = Arc::new(LookupRegistry::default());
        let m = LookupManager::start(store().await, Arc::clone(&registry), "h:1".into())
            .await
            .unwrap();
        m.update(LookupsConfig::default()).await.unwrap();
        let def = json!({"version": "v1", "lookupExtractorFactory": {
            "type": "cachedNamespace",
            "extractionNamespace": {
                "type": "uri", "uri": format!("file:{}", file.display()),
                "namespaceParseSpec": {"format": "csv", "columns": ["k", "v"]},
                "pollPeriod": 1
            },
            "firstCacheTimeout": 0, "injective": true
        }});
        // The file does not exist yet: accepted, served as failed, reported as not loaded.
        m.update_lookup("__default", "f", container(def.clone()))
            .await
            .unwrap();
        let e = registry.map("f").unwrap_err().to_string();
        assert!(e.starts_with("Lookup [f] not found: its definition (tier [__default]) failed to load: cannot read"), "{e}");
        assert!(!m.status("f", &container(def.clone()), false).loaded);
        // The next poll retries and loads it.
        std::fs::write(&file, "a,1\nb,2\n").unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        m.poll().await;
        let map = registry.map("f").unwrap();
        assert_eq!(map.get("b"), Some("2"));
        assert!(map.injective());
        assert!(m.status("f", &container(def.clone()), false).loaded);
        // Unchanged file: same table. Changed file: new table.
        tokio::time::sleep(Duration::from_millis(5)).await;
        m.poll().await;
        assert!(Arc::ptr_eq(&map, &registry.map("f").unwrap()));
        std::fs::write(&file, "a,10\n").unwrap();
        let later = std::time::SystemTime::now() + Duration::from_secs(3);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(later)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        m.poll().await;
        assert_eq!(registry.map("f").unwrap().get("a"), Some("10"));
        assert_eq!(registry.map("f").unwrap().get("b"), None);
        // A broken file keeps the previous table.
        std::fs::write(&file, "{not csv for a json spec").unwrap();
        std::fs::remove_file(&file).unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        m.poll().await;
        assert_eq!(registry.map("f").unwrap().get("a"), Some("10"));
    }

    #[tokio::test]
    async fn a_stored_definition_that_does_not_parse_is_served_as_failed() {
        let metadata = store().await;
        metadata
            .set_config(
                LOOKUPS_CONFIG_KEY,
                None,
                &json!({"__default": {
                    "ok": map_def("v1", json!({"a": "b"})),
                    "old": {"version": "v1", "lookupExtractorFactory": {"type": "jdbc"}}
                }}),
            )
            .await
            .unwrap();
        let registry = Arc::new(LookupRegistry::default());
        let m = LookupManager::start(metadata, Arc::clone(&registry), "h:1".into())
            .await
            .unwrap();
        assert_eq!(registry.loaded_names(), vec!["ok".to_string()]);
        let e = registry.map("old").unwrap_err().to_string();
        assert!(e.contains("unknown lookup type [jdbc]"), "{e}");
        assert_eq!(
            m.config().as_ref().as_ref().unwrap().tiers["__default"].len(),
            2
        );
    }
}
