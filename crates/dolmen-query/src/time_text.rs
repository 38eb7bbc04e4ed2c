//! Druid's text form of TIMESTAMP and DATE values ([`TimeTextRule`], an analyzer rule).
//!
//! Druid turns a TIMESTAMP into text in SQL format, `yyyy-MM-dd HH:mm:ss` (no `T`, no
//! milliseconds), and a DATE into `yyyy-MM-dd`, both in the query's `sqlTimeZone`
//! (`CastOperatorConversion.castDateTimeToChar`: `timestamp_format(x, 'yyyy-MM-dd HH:mm:ss',
//! <sqlTimeZone>)`; `docs/querying/sql-data-types.md`: "Casts between string and timestamp types
//! assume standard SQL formatting, such as `2000-01-02 03:04:05`, not ISO 8601 formatting").
//! Arrow's cast writes ISO text with a `T` and the fraction, in UTC. Every conversion of a
//! TIMESTAMP to a string goes through a cast once DataFusion's type coercion has run: explicit
//! `CAST(__time AS VARCHAR)` / `CHAR` / `TRY_CAST`, `__time || 'x'`, and arguments that type
//! coercion casts to a string type. The rule runs after type coercion and
//! replaces each such cast with `TIME_FORMAT(x, 'yyyy-MM-dd HH:mm:ss', '<sqlTimeZone>')`.
//!
//! The other way, text cast to TIMESTAMP is read as a local time in `sqlTimeZone`
//! (`castCharToDateTime`: `timestamp_parse(x, null, <sqlTimeZone>)`), NULL when it is no time.
//!
//! A TIMESTAMP cast to DATE is floored to the day in `sqlTimeZone` (Druid's `CAST(x AS DATE)`
//! applies `TIME_FLOOR(x, 'P1D', null, <sqlTimeZone>)`); Arrow's cast takes the UTC day, so
//! with another zone the cast reads the local date from `TIME_FORMAT(x, 'yyyy-MM-dd', zone)`.
//! A DATE value is a calendar day, and Arrow's text of one is already `yyyy-MM-dd`.
//!
//! Result writers are not concerned: a TIMESTAMP-typed result column is rendered in Druid's
//! result format, ISO `2019-08-25T00:00:00.000Z` ([`crate::writer`]).

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::{Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, ScalarUDF, lit};
use datafusion::optimizer::AnalyzerRule;
use dolmen_common::zone::Zone;

use crate::functions::{DruidTimeFunction, DruidTimeUdf};
use crate::options::DruidSqlOptions;

/// The Joda pattern of a TIMESTAMP as text (`CastOperatorConversion.dateTimeFormatString`).
pub const TIMESTAMP_TEXT_PATTERN: &str = "yyyy-MM-dd HH:mm:ss";

/// The Joda pattern of a DATE as text.
pub const DATE_TEXT_PATTERN: &str = "yyyy-MM-dd";

/// The analyzer rule of the module docs; runs after DataFusion's type coercion.
#[derive(Debug)]
pub struct TimeTextRule {
    time_format: Arc<ScalarUDF>,
    time_parse: Arc<ScalarUDF>,
}

impl Default for TimeTextRule {
    fn default() -> Self {
        let udf = |f| Arc::new(ScalarUDF::new_from_impl(DruidTimeUdf::new(f)));
        TimeTextRule {
            time_format: udf(DruidTimeFunction::TimeFormat),
            time_parse: udf(DruidTimeFunction::TimeParse),
        }
    }
}

impl AnalyzerRule for TimeTextRule {
    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        let zone = DruidSqlOptions::from_config(config).time_zone;
        plan.transform_up_with_subqueries(|node| {
            crate::coercion::rewrite_node_expressions(node, |e, schema| {
                self.rewrite_expr(e, schema, zone)
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "druid_time_text"
    }
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

impl TimeTextRule {
    /// `TIME_FORMAT(x, pattern, zone)`.
    fn format(&self, x: Expr, pattern: &str, zone: Zone) -> Expr {
        Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::clone(&self.time_format),
            vec![x, lit(pattern), lit(zone.id().into_owned())],
        ))
    }

    fn rewrite_expr(&self, e: Expr, schema: &DFSchema, zone: Zone) -> Result<Transformed<Expr>> {
        let (inner, to, is_try) = match &e {
            Expr::Cast(Cast { expr, field }) => (expr, field.data_type(), false),
            Expr::TryCast(TryCast { expr, field }) => (expr, field.data_type(), true),
            _ => return Ok(Transformed::no(e)),
        };
        // An expression whose type cannot be computed here is left to DataFusion.
        let Ok(from) = inner.get_type(schema) else {
            return Ok(Transformed::no(e));
        };
        let rebuilt = |x: Expr, to: DataType| {
            if is_try {
                Expr::TryCast(TryCast::new(Box::new(x), to))
            } else {
                Expr::Cast(Cast::new(Box::new(x), to))
            }
        };
        let text = match (&from, to) {
            (DataType::Timestamp(..), t) if is_string(t) => {
                self.format((**inner).clone(), TIMESTAMP_TEXT_PATTERN, zone)
            }
            (DataType::Timestamp(..), DataType::Date32 | DataType::Date64) if !zone.is_utc() => {
                let local = self.format((**inner).clone(), DATE_TEXT_PATTERN, zone);
                return Ok(Transformed::yes(rebuilt(local, to.clone())));
            }
            // Text read as a local time in the zone (`castCharToDateTime`:
            // `timestamp_parse(x, null, <sqlTimeZone>)`), NULL when it is no time.
            (f, DataType::Timestamp(..)) if is_string(f) && !zone.is_utc() => {
                let parsed = Expr::ScalarFunction(ScalarFunction::new_udf(
                    Arc::clone(&self.time_parse),
                    vec![
                        (**inner).clone(),
                        lit(datafusion::common::ScalarValue::Utf8(None)),
                        lit(zone.id().into_owned()),
                    ],
                ));
                return Ok(Transformed::yes(Expr::TryCast(TryCast::new(
                    Box::new(parsed),
                    to.clone(),
                ))));
            }
            _ => return Ok(Transformed::no(e)),
        };
        Ok(Transformed::yes(if *to == DataType::Utf8 {
            text
        } else {
            rebuilt(text, to.clone())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// A session with the Druid functions and the rule after type coercion, in `zone`.
    fn ctx(zone: Zone) -> SessionContext {
        let config =
            SessionConfig::new().with_option_extension(DruidSqlOptions { time_zone: zone });
        let mut rules = datafusion::optimizer::Analyzer::new().rules;
        rules.push(Arc::new(TimeTextRule::default()));
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rules(rules)
            .build();
        let ctx = SessionContext::new_with_state(state);
        crate::functions::register_druid_functions(&ctx);
        ctx
    }

    /// The first row of `sql` as text, column by column (`null` for nulls).
    async fn row(zone: Zone, sql: &str) -> Vec<String> {
        let batches = ctx(zone).sql(sql).await.unwrap().collect().await.unwrap();
        crate::test_support::first_row_text(&batches)
    }

    /// Druid: `CAST(__time AS VARCHAR)` is `timestamp_format(__time, 'yyyy-MM-dd HH:mm:ss', tz)`
    /// (`CastOperatorConversion.castDateTimeToChar`), so `2000-01-01 00:00:00`.
    #[tokio::test]
    async fn timestamps_become_sql_text_without_t_or_millis() {
        let got = row(
            Zone::Utc,
            "SELECT CAST(TIMESTAMP '2019-08-25 01:02:03.456' AS VARCHAR) AS a, \
                    CAST(TIMESTAMP '2019-08-25 01:02:03' AS CHAR(30)) AS b, \
                    TIMESTAMP '2019-08-25 01:02:03' || 'x' AS c, \
                    'x' || TIMESTAMP '2019-08-25 01:02:03' AS d, \
                    TRY_CAST(MILLIS_TO_TIMESTAMP(0) AS VARCHAR) AS f, \
                    CAST(CAST(NULL AS TIMESTAMP) AS VARCHAR) AS g",
        )
        .await;
        assert_eq!(
            got,
            [
                "2019-08-25 01:02:03",
                "2019-08-25 01:02:03",
                "2019-08-25 01:02:03x",
                "x2019-08-25 01:02:03",
                "1970-01-01 00:00:00",
                "null",
            ]
        );
    }

    #[tokio::test]
    async fn dates_become_yyyy_mm_dd() {
        let got = row(
            Zone::Utc,
            "SELECT CAST(DATE '2019-08-25' AS VARCHAR) AS a, \
                    CAST(CAST(TIMESTAMP '2019-08-25 23:02:03' AS DATE) AS VARCHAR) AS b, \
                    DATE '2019-08-25' || '' AS c",
        )
        .await;
        assert_eq!(got, ["2019-08-25", "2019-08-25", "2019-08-25"]);
    }

    /// `sqlTimeZone` applies to the text and to the day of `CAST(ts AS DATE)`
    /// (`CastOperatorConversion` passes `plannerContext.getTimeZone()`).
    #[tokio::test]
    async fn text_and_dates_follow_sql_time_zone() {
        let la = Zone::parse("America/Los_Angeles").unwrap();
        // 2019-08-25 03:00 UTC is 2019-08-24 20:00 in Los Angeles.
        let got = row(
            la,
            "SELECT CAST(MILLIS_TO_TIMESTAMP(1566702000000) AS VARCHAR) AS a, \
                    CAST(CAST(MILLIS_TO_TIMESTAMP(1566702000000) AS DATE) AS VARCHAR) AS b",
        )
        .await;
        assert_eq!(got, ["2019-08-24 20:00:00", "2019-08-24"]);
        // Text to TIMESTAMP is read in the zone: 20:00 in Los Angeles is 03:00 UTC.
        let got = row(
            la,
            "SELECT TIMESTAMP_TO_MILLIS(CAST('2019-08-24 20:00:00' AS TIMESTAMP)) AS a, \
                    CAST('nope' AS TIMESTAMP) AS b",
        )
        .await;
        assert_eq!(got, ["1566702000000", "null"]);
    }

    /// Names and types of the select items are unchanged; only the text is.
    #[tokio::test]
    async fn output_schema_is_kept() {
        let df = ctx(Zone::Utc)
            .sql("SELECT CAST(MILLIS_TO_TIMESTAMP(0) AS VARCHAR) AS t, x FROM (VALUES (1)) v(x) GROUP BY 1, 2")
            .await
            .unwrap();
        let batches = df.collect().await.unwrap();
        let schema = batches[0].schema();
        assert_eq!(schema.field(0).name(), "t");
        assert!(is_string(schema.field(0).data_type()));
        let text = arrow::compute::cast(batches[0].column(0), &DataType::Utf8).unwrap();
        assert_eq!(text.as_string::<i32>().value(0), "1970-01-01 00:00:00");
    }
}
