//! What the supplier tests against real services share: the service's address from the
//! environment and names no other test uses. Included by `tests/kafka` and `tests/kinesis` with
//! `#[path]` (each test binary compiles its own copy).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The value of `var` (a test service's address), or `None` when the caller opted out with
/// `skip_var=1`. Fails the test when neither is set, with `hint` saying how to start the service.
pub(crate) fn service(var: &str, skip_var: &str, hint: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var(skip_var).as_deref() == Ok("1") => None,
        _ => panic!("{var} is not set: {hint}; set {skip_var}=1 to skip"),
    }
}

/// A name no other test (or earlier run against the same service) uses: `prefix-<ns>-<n>`.
pub(crate) fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{nanos}-{}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}
