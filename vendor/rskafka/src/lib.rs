#![doc = include_str!("../README.md")]
#![deny(
    rustdoc::broken_intra_doc_links,
    rustdoc::bare_urls,
    rustdoc::invalid_codeblock_attributes,
    rustdoc::private_intra_doc_links,
    rust_2018_idioms,
    unsafe_code
)]
// Dolmen patch: upstream's extra lint levels are dropped; clippy is turned off for this
// vendored crate in its Cargo.toml (upstream lints its own code).

mod backoff;

pub use backoff::{BackoffConfig, BackoffError};

pub mod build_info;

pub mod client;

mod connection;

pub use connection::Error as ConnectionError;
pub use messenger::SaslError;

#[cfg(feature = "unstable-fuzzing")]
pub mod messenger;
#[cfg(not(feature = "unstable-fuzzing"))]
mod messenger;

#[cfg(feature = "unstable-fuzzing")]
pub mod protocol;
#[cfg(not(feature = "unstable-fuzzing"))]
mod protocol;

pub mod record;

mod throttle;

pub mod topic;

// re-exports
pub use chrono;

mod validation;
