-- Dolmen metadata store, version 2: supervisors and stream offsets (Druid's druid_supervisors
-- and druid_dataSource tables). Portable SQL, as version 1.

-- Every version of every supervisor spec, append-only: the newest row of a spec_id is the
-- current spec; a terminated supervisor's newest row is a tombstone. `seq` orders the rows of
-- one spec_id (assigned under the store's write lock).
CREATE TABLE supervisors (
    spec_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (spec_id, seq)
);

-- The stream offsets a datasource's published segments cover, committed in the same
-- transaction as those segments (exactly-once ingestion from streams).
CREATE TABLE datasource_metadata (
    datasource TEXT PRIMARY KEY,
    created_ms BIGINT NOT NULL,
    commit_metadata TEXT NOT NULL
);
