-- Dolmen metadata store, version 1: segments, tasks, task locks.
-- Portable SQL: runs unchanged on SQLite and PostgreSQL (TEXT and BIGINT only;
-- booleans are BIGINT 0/1; instants are BIGINT milliseconds since the epoch).

CREATE TABLE segments (
    id TEXT PRIMARY KEY,
    datasource TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    end_ms BIGINT NOT NULL,
    version TEXT NOT NULL,
    partition_num BIGINT NOT NULL,
    used BIGINT NOT NULL,
    used_status_last_updated BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX segments_datasource_used ON segments (datasource, used, start_ms, end_ms);

CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    task_type TEXT NOT NULL,
    group_id TEXT NOT NULL,
    datasource TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    queue_insertion_ms BIGINT NOT NULL,
    status TEXT NOT NULL,
    runner_status TEXT NOT NULL,
    duration_ms BIGINT NOT NULL,
    error_msg TEXT,
    location TEXT,
    payload TEXT NOT NULL,
    report TEXT
);
CREATE INDEX tasks_status ON tasks (status, created_ms);
CREATE INDEX tasks_datasource ON tasks (datasource, created_ms);

CREATE TABLE task_locks (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    datasource TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    end_ms BIGINT NOT NULL,
    version TEXT NOT NULL,
    lock_type TEXT NOT NULL
);
CREATE INDEX task_locks_task ON task_locks (task_id);
