//! Integration tests: they start the real `dolmen` binary on a free port with a fresh data
//! directory and talk HTTP to it. One test binary (modules below) keeps link time down.

mod arrays;
mod clients;
mod common;
mod compaction;
mod coordinator;
mod corpus;
mod errors;
mod ingest_query;
mod kinesis;
mod lifecycle;
mod lookups;
mod metrics;
mod nested;
mod rules;
mod security;
mod shardstream;
mod sql_api;
mod sql_formats;
mod sql_functions;
mod sql_semantics;
mod statements;
mod supervisors;
mod tasks_api;
mod unnest;
mod value_indexes;
