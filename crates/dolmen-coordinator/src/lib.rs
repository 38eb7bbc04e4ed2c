//! The coordinator role: retention rules ([`rules`]), the coordinator's dynamic configuration
//! ([`config`]) and the duties that apply them on a schedule ([`duty`]).
//!
//! As in Druid (`DruidCoordinator`, `duty/RunRules.java`, `MarkOvershadowedSegmentsAsUnused`,
//! `KillUnusedSegments` in [`kill`]), a loop runs every `service.coordinator.period` after
//! `service.coordinator.startDelay`; each run reads the used segments, the rules and the dynamic
//! config from the metadata store and decides, per segment, whether it is dropped (marked unused),
//! loaded (served to queries) or kept used but not loaded (readable only from deep storage).

pub mod config;
pub mod duty;
pub mod kill;
pub mod rules;

pub use config::CoordinatorDynamicConfig;
pub use duty::{Coordinator, CoordinatorOptions, Retention};
