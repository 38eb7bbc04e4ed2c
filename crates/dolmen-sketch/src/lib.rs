//! Sketch aggregators that Dolmen builds at ingestion time and stores in segment columns.
//!
//! Every sketch is stored as the bytes of its reference serialization, so that a segment's
//! sketch columns can be read by Apache DataSketches (Java/C++/Python) and by Druid:
//!
//! | Druid aggregator          | Type                                | Implementation |
//! |---------------------------|-------------------------------------|----------------|
//! | `HLLSketchBuild`/`Merge`  | [`HllAcc`] (`COMPLEX<HLLSketch>`)   | `datasketches` crate (HLL family) |
//! | `thetaSketch`             | [`ThetaAcc`] (`COMPLEX<thetaSketch>`) | `datasketches` crate (theta family) |
//! | `quantilesDoublesSketch`  | [`quantiles::DoublesSketch`]        | this crate (the crate has no classic quantiles sketch) |
//! | `hyperUnique`             | [`hyper_unique::HyperLogLogCollector`] | this crate (Druid's own format) |
//! | `arrayOfDoublesSketch`    | [`tuple::ArrayOfDoublesUpdateSketch`], [`tuple::ArrayOfDoublesCompactSketch`] (`COMPLEX<arrayOfDoublesSketch>`) | this crate (the crate's tuple sketch writes the C++ generic tuple format, not Java's ArrayOfDoubles one) |
//!
//! See `docs/adr/0006-sketch-metrics.md` for why the quantiles and hyperUnique sketches are
//! written here; the tuple sketch is too, for the reason in its row.

pub mod hyper_unique;
pub mod quantiles;
pub mod tuple;

mod ds;

pub use ds::{
    HLL_LG_K_RANGE, HllAcc, HllMode, HllPreamble, HllSketchView, HllStringEncoding, HllTargetType,
    THETA_DEFAULT_SIZE, ThetaAcc, ThetaSketchView,
};

/// A sketch that could not be built, read or merged.
#[derive(Debug, thiserror::Error)]
pub enum SketchError {
    /// A parameter (lgK, size, k, ...) out of its range; the message names it.
    #[error("{0}")]
    InvalidParameter(String),
    /// Serialized bytes that are not a valid sketch of the expected family.
    #[error("invalid sketch bytes: {0}")]
    InvalidBytes(String),
}
