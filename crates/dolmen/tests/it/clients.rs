//! Druid's Python clients against the real server: `pydruid`'s DB-API (`pydruid.db.connect`) and
//! its SQLAlchemy dialect (`druid://`), driven by `tests/py/pydruid_clients.py`.
//!
//! The Python interpreter with `pydruid[sqlalchemy]` installed comes from `DOLMEN_TEST_PYTHON`
//! (`scripts/install-test-deps.sh` creates it and `scripts/test.sh` exports the variable). Without
//! it the test fails with instructions, unless `DOLMEN_SKIP_CLIENT_TESTS=1`.

use std::path::PathBuf;
use std::process::Command;

use crate::common::{Server, wikipedia_spec};

/// The interpreter to run the client script with, or `None` when client tests are skipped.
fn python() -> Option<String> {
    match std::env::var("DOLMEN_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if std::env::var("DOLMEN_SKIP_CLIENT_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_PYTHON is not set: create the client virtualenv with \
             `bash scripts/install-test-deps.sh` and export \
             DOLMEN_TEST_PYTHON=~/.cache/dolmen-test-deps/clients/bin/python (scripts/test.sh does \
             both), or set DOLMEN_SKIP_CLIENT_TESTS=1 to skip the client tests"
        ),
    }
}

#[test]
fn pydruid_dbapi_and_sqlalchemy() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = server.run_task(&wikipedia_spec());
    assert_eq!(st["status"], "SUCCESS", "{st}");

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/pydruid_clients.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg("127.0.0.1")
        .arg(server.url.rsplit(':').next().unwrap())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pydruid client script failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("pydruid clients: ok"), "{stdout}");
}
