-- Dolmen metadata store, version 3: named configuration documents (Druid's druid_config table),
-- e.g. `lookupsConfig`, the lookups of every tier. Portable SQL, as version 1.

-- One JSON document per name, replaced as a whole (compare-and-swap in the store).
CREATE TABLE config (
    name TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
