-- Dolmen metadata store, version 4: retention rules (Druid's druid_rules) and the audit log
-- (Druid's druid_audit). Portable SQL, as version 1.

-- Every version of every datasource's rule array, append-only (Druid keeps each version as a
-- row keyed by `dataSource_version`): the newest row of a datasource is its current rules.
-- `_default` holds the cluster-wide default rules.
CREATE TABLE rules (
    datasource TEXT NOT NULL,
    seq BIGINT NOT NULL,
    version TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (datasource, seq)
);

-- One audit log for every audited change (rules, coordinator config, overlord worker config,
-- compaction config): `audit_key`/`audit_type` as Druid's `key`/`type`, `payload` the changed
-- document as JSON text, `created_ms` Druid's `auditTime`.
CREATE TABLE audit (
    id BIGINT NOT NULL PRIMARY KEY,
    audit_key TEXT NOT NULL,
    audit_type TEXT NOT NULL,
    author TEXT NOT NULL,
    comment TEXT NOT NULL,
    ip TEXT NOT NULL,
    identity TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX audit_type_key_time ON audit (audit_type, audit_key, created_ms);
