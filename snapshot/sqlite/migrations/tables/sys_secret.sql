-- sys_secret in ObjectStack 17.4's shape, in SQLite's types (see
-- sys_metadata.sql). Applied only where the table is absent.

CREATE TABLE sys_secret (
    id VARCHAR(255) NOT NULL,
    created_at TEXT DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT DEFAULT CURRENT_TIMESTAMP,
    organization_id VARCHAR(255),
    created_by VARCHAR(255),
    updated_by VARCHAR(255),
    rotated_at TEXT,
    namespace VARCHAR(128),
    key VARCHAR(128),
    kms_key_id VARCHAR(256),
    alg TEXT DEFAULT 'aes-256-gcm',
    version REAL DEFAULT 1,
    ciphertext TEXT,
    CONSTRAINT sys_secret_pkey PRIMARY KEY (id)
);

CREATE INDEX idx_sys_secret_kms_key_id ON sys_secret (kms_key_id);

CREATE INDEX idx_sys_secret_namespace_key ON sys_secret (namespace, key);
