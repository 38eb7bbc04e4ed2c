-- Dolmen metadata store, version 10: basic security (Druid's basic-security extension keeps
-- the same data as serialized maps in druid_config). Portable SQL, as version 1. Numbered 10,
-- not 4, so that migrations added in parallel on other branches keep their numbers.

-- Users of a basic authenticator; `credentials` is `{"salt","hash","iterations"}` (base64
-- PBKDF2-HMAC-SHA512, never the password), NULL for a user created without credentials.
CREATE TABLE authn_users (
    authenticator TEXT NOT NULL,
    name TEXT NOT NULL,
    credentials TEXT,
    PRIMARY KEY (authenticator, name)
);

-- Users of a basic authorizer.
CREATE TABLE authz_users (
    authorizer TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (authorizer, name)
);

-- Roles of a basic authorizer; `permissions` is a JSON array of `{resource{name,type},action}`.
CREATE TABLE authz_roles (
    authorizer TEXT NOT NULL,
    name TEXT NOT NULL,
    permissions TEXT NOT NULL,
    PRIMARY KEY (authorizer, name)
);

-- Role assignments; removed with the user or the role, in the same transaction.
CREATE TABLE authz_user_roles (
    authorizer TEXT NOT NULL,
    user_name TEXT NOT NULL,
    role_name TEXT NOT NULL,
    PRIMARY KEY (authorizer, user_name, role_name)
);
