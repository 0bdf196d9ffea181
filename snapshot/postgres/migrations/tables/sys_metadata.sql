-- sys_metadata exactly as ObjectStack 17.4 creates it (from a schema dump of
-- a real node), in the current schema. Applied only where the table is
-- absent; an existing one is never altered.

CREATE TABLE sys_metadata (
    id character varying(255) NOT NULL,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    name character varying(255),
    type character varying(100),
    namespace character varying(100) DEFAULT 'default'::character varying,
    package_id character varying(255),
    package_version_id character varying(255),
    managed_by character varying(255),
    scope character varying(255) DEFAULT 'platform'::character varying,
    metadata text,
    extends text,
    strategy character varying(255) DEFAULT 'merge'::character varying,
    owner text,
    state character varying(255) DEFAULT 'active'::character varying,
    organization_id character varying(255),
    environment_id character varying(255),
    version real DEFAULT '1'::real,
    checksum text,
    source character varying(255),
    tags text,
    created_by character varying(255),
    updated_by character varying(255)
);

ALTER TABLE ONLY sys_metadata
    ADD CONSTRAINT idx_sys_metadata_overlay_active UNIQUE (type, name, organization_id, package_id);

ALTER TABLE ONLY sys_metadata
    ADD CONSTRAINT sys_metadata_pkey PRIMARY KEY (id);

CREATE INDEX idx_sys_metadata_namespace ON sys_metadata USING btree (namespace);

CREATE INDEX idx_sys_metadata_org_type ON sys_metadata USING btree (organization_id, type);

CREATE UNIQUE INDEX idx_sys_metadata_overlay_draft ON sys_metadata USING btree (type, name, organization_id, COALESCE(package_id, ''::character varying)) WHERE ((state)::text = 'draft'::text);

CREATE INDEX idx_sys_metadata_package_version_id ON sys_metadata USING btree (package_version_id);

CREATE INDEX idx_sys_metadata_state ON sys_metadata USING btree (state);

CREATE INDEX idx_sys_metadata_type_scope ON sys_metadata USING btree (type, scope);
