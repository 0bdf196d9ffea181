-- sys_metadata in ObjectStack 17.4's shape, in SQLite's types: the same
-- columns in the same order, character varying → VARCHAR (TEXT affinity),
-- timestamp with time zone → TEXT, real → REAL; the same defaults,
-- nullability, uniqueness and indexes. Applied only where the table is
-- absent; an existing one is never altered.

CREATE TABLE sys_metadata (
    id VARCHAR(255) NOT NULL,
    created_at TEXT DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT DEFAULT CURRENT_TIMESTAMP,
    name VARCHAR(255),
    type VARCHAR(100),
    namespace VARCHAR(100) DEFAULT 'default',
    package_id VARCHAR(255),
    package_version_id VARCHAR(255),
    managed_by VARCHAR(255),
    scope VARCHAR(255) DEFAULT 'platform',
    metadata TEXT,
    extends TEXT,
    strategy VARCHAR(255) DEFAULT 'merge',
    owner TEXT,
    state VARCHAR(255) DEFAULT 'active',
    organization_id VARCHAR(255),
    environment_id VARCHAR(255),
    version REAL DEFAULT 1,
    checksum TEXT,
    source VARCHAR(255),
    tags TEXT,
    created_by VARCHAR(255),
    updated_by VARCHAR(255),
    CONSTRAINT sys_metadata_pkey PRIMARY KEY (id),
    CONSTRAINT idx_sys_metadata_overlay_active UNIQUE (type, name, organization_id, package_id)
);

CREATE INDEX idx_sys_metadata_namespace ON sys_metadata (namespace);

CREATE INDEX idx_sys_metadata_org_type ON sys_metadata (organization_id, type);

CREATE UNIQUE INDEX idx_sys_metadata_overlay_draft ON sys_metadata (type, name, organization_id, COALESCE(package_id, '')) WHERE state = 'draft';

CREATE INDEX idx_sys_metadata_package_version_id ON sys_metadata (package_version_id);

CREATE INDEX idx_sys_metadata_state ON sys_metadata (state);

CREATE INDEX idx_sys_metadata_type_scope ON sys_metadata (type, scope);
