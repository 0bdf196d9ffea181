-- sys_secret exactly as ObjectStack 17.4 creates it (from a schema dump of a
-- real node), in the current schema. Applied only where the table is
-- absent; an existing one is never altered.

CREATE TABLE sys_secret (
    id character varying(255) NOT NULL,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    organization_id character varying(255),
    created_by character varying(255),
    updated_by character varying(255),
    rotated_at timestamp with time zone,
    namespace character varying(128),
    key character varying(128),
    kms_key_id character varying(256),
    alg text DEFAULT 'aes-256-gcm'::text,
    version real DEFAULT '1'::real,
    ciphertext text
);

ALTER TABLE ONLY sys_secret
    ADD CONSTRAINT sys_secret_pkey PRIMARY KEY (id);

CREATE INDEX idx_sys_secret_kms_key_id ON sys_secret USING btree (kms_key_id);

CREATE INDEX idx_sys_secret_namespace_key ON sys_secret USING btree (namespace, key);
