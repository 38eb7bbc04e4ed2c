//! Integration tests of `dolmen-ingest`, in one test binary (each integration-test binary links
//! a debug executable of several hundred MB; one binary keeps CI's build time and disk down).
//! Each module is one area: whole batch tasks run in-process against a SQLite metadata store
//! and local deep storage, their segments read back from the published files.

mod bounded_memory;
mod columnar;
mod formats_avro;
mod formats_multivalue;
mod input_sources;
mod parse_exceptions;
mod sketch_metrics;
mod support;
