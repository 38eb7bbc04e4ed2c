//! Query-time lookups: Druid's key-to-value tables that SQL reads with `LOOKUP(expr, 'name')`
//! and as `lookup."name"` (`docs/querying/lookups.md`).
//!
//! Druid splits lookups between its coordinator, which keeps every tier's definitions in its
//! config table (`LookupCoordinatorManager`, key `lookupsConfig`) and pushes them to the query
//! processes of each tier, and those processes, which load the tables they are told to
//! (`LookupReferencesManager`). Dolmen is one process playing both parts:
//!
//! - [`spec`]: the configuration document and its rules: [`LookupsConfig`] (`{tier: {name:
//!   {version, lookupExtractorFactory}}}`), Druid's version rule
//!   ([`LookupContainer::replaces`]), update semantics ([`LookupsConfig::merged`]) and the
//!   factories Dolmen loads ([`LookupFactory`]: `map`, `cachedNamespace`).
//! - [`namespace`]: `cachedNamespace` sources: `uri` (local files in `csv`, `tsv`,
//!   `customJson` or `simpleJson`, re-read every `pollPeriod`) and `staticMap`.
//! - [`registry`]: what queries read: one immutable [`LookupMap`] per served lookup name,
//!   swapped as a whole ([`LookupRegistry`]), so a query sees either the old or the new
//!   table, never a mix.
//! - [`manager`]: [`LookupManager`], the coordinator's API semantics (not-initialized state,
//!   bulk and single updates, deletes, status) over the metadata store, where the whole
//!   configuration is one document under [`dolmen_metadata::LOOKUPS_CONFIG_KEY`], written
//!   before an update is acknowledged and read at start-up.
//!
//! Tiers: Dolmen's one process is a member of every tier, so it serves the lookups of all of
//! them; a name defined in several tiers is served from `__default` if defined there, else from
//! the first tier in name order ([`LookupsConfig::served`]; ADR 0014).

pub mod manager;
pub mod namespace;
pub mod registry;
pub mod spec;

use std::collections::HashMap;

use dolmen_common::ErrorCategory;

pub use manager::{LookupManager, LookupStatus};
pub use registry::{LoadState, LookupRegistry, LookupUnavailable, ServedLookup};
pub use spec::{DEFAULT_TIER, LookupContainer, LookupFactory, LookupsConfig};

/// A loaded lookup table: keys to values, read by `LOOKUP` once per row.
///
/// Immutable once built; a reload builds a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookupMap {
    entries: HashMap<String, String>,
    injective: bool,
}

impl LookupMap {
    /// A table of `entries`; `injective` when keys and values are one-to-one (Druid's
    /// `injective` / `isOneToOne`, which Dolmen records but does not use to rewrite queries).
    pub fn new(entries: HashMap<String, String>, injective: bool) -> LookupMap {
        LookupMap { entries, injective }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Declared one-to-one.
    pub fn injective(&self) -> bool {
        self.injective
    }

    /// The entries, sorted by key (the row order of `lookup."name"`).
    pub fn sorted_entries(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = self
            .entries
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        out.sort_unstable();
        out
    }
}

/// Why a lookups request failed.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The request is wrong (bad JSON, missing version, unknown type, version not greater);
    /// the message names the tier, lookup and field.
    #[error("{0}")]
    InvalidInput(String),
    /// Lookups were never initialized and the update is not the empty map (Druid's message).
    #[error("Not initialized. If this is the first lookup, post an empty map to initialize")]
    NotInitialized,
    /// The metadata store failed, or another writer changed the configuration meanwhile
    /// ([`dolmen_metadata::MetadataError::Conflict`]).
    #[error(transparent)]
    Metadata(#[from] dolmen_metadata::MetadataError),
}

impl LookupError {
    /// The error category (and so the HTTP status): 400 for the client's mistakes, 409 for a
    /// concurrent change, 500 for a store failure. Druid answers 500 for every failed update;
    /// Dolmen keeps 500 for its own faults.
    pub fn category(&self) -> ErrorCategory {
        match self {
            LookupError::InvalidInput(_) | LookupError::NotInitialized => {
                ErrorCategory::InvalidInput
            }
            LookupError::Metadata(e) => e.category(),
        }
    }
}
