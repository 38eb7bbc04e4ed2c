//! Per-query Druid settings that analyzer rules read: a DataFusion [`ConfigExtension`] under the
//! prefix `druid`, set on each query's copy of the session state
//! ([`crate::engine::QueryEngine`]), so they reach [`AnalyzerRule`]s through the
//! [`ConfigOptions`] every rule is given.
//!
//! [`AnalyzerRule`]: datafusion::optimizer::AnalyzerRule

use std::any::Any;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ConfigOptions, ExtensionOptions};
use datafusion::common::{DataFusionError, Result};
use dolmen_common::time::parse_time_zone;
use dolmen_common::zone::Zone;

/// The query settings of Druid SQL that change how a plan is analyzed.
#[derive(Debug, Clone, Default)]
pub struct DruidSqlOptions {
    /// `sqlTimeZone` (Druid's `PlannerContext.getTimeZone()`): the zone of TIMESTAMP text
    /// ([`crate::time_text`]). UTC by default.
    pub time_zone: Zone,
}

impl DruidSqlOptions {
    /// The options in `config`, or the defaults (UTC) when the session has none.
    pub fn from_config(config: &ConfigOptions) -> DruidSqlOptions {
        config
            .extensions
            .get::<DruidSqlOptions>()
            .cloned()
            .unwrap_or_default()
    }
}

impl ConfigExtension for DruidSqlOptions {
    const PREFIX: &'static str = "druid";
}

impl ExtensionOptions for DruidSqlOptions {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "sql_time_zone" => {
                self.time_zone = parse_time_zone(value).map_err(|e| {
                    DataFusionError::Configuration(format!("druid.sql_time_zone: {e}"))
                })?;
                Ok(())
            }
            other => Err(DataFusionError::Configuration(format!(
                "unknown option druid.{other}"
            ))),
        }
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        vec![ConfigEntry {
            key: "druid.sql_time_zone".to_string(),
            value: Some(self.time_zone.id().into_owned()),
            description: "Druid's sqlTimeZone: the zone of TIMESTAMP values turned into text",
        }]
    }
}
