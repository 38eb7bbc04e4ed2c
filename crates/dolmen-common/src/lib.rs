//! Shared foundations of Dolmen: time (instants, periods, intervals, granularities), the
//! error categories every API error maps to, and configuration (runtime properties).
//!
//! Nothing here knows about HTTP, SQL or storage; every other crate depends on this one.

pub mod config;
pub mod error;
pub mod time;

pub use error::ErrorCategory;
pub use time::{Granularity, Interval, Period};
