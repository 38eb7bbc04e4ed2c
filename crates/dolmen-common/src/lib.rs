//! Shared foundations of Dolmen: time (instants, periods, intervals, granularities, time zones,
//! Joda-Time patterns), the error categories every API error maps to, and configuration
//! (runtime properties).
//!
//! Time logic lives here once, for ingestion and queries alike:
//! - [`time`]: instants and their ISO 8601 text (in UTC or a zone), intervals, granularities,
//!   `TIME_EXTRACT` units;
//! - [`zone`]: time zones (UTC, fixed offsets such as `+05:30`, tz-database regions) and
//!   local/UTC conversions with Joda-Time's rules;
//! - [`period`]: ISO 8601 periods, adding them in a zone, and Druid's period bucketing;
//! - [`joda`]: Joda-Time `DateTimeFormat` patterns, formatting and parsing.
//!
//! [`java_number`] prints doubles and floats as Java does, for result writers and functions.
//!
//! Nothing here knows about HTTP, SQL or storage; every other crate depends on this one.

pub mod config;
pub mod error;
pub mod java_number;
pub mod joda;
pub mod period;
pub mod time;
pub mod zone;

pub use error::ErrorCategory;
pub use joda::JodaFormat;
pub use period::{Period, PeriodBucketer};
pub use time::{Granularity, Interval};
pub use zone::Zone;
