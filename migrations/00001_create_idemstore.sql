-- The tables of idemstore's durable store (package store/pgstore).
--
-- Table names are unqualified on purpose: package migrations runs them with
-- search_path set to the configured schema, so one database can hold several
-- independent stores, each in its own schema.

-- +goose Up

-- One row per scope (an agent run). It holds the expiry shared by every record
-- of the scope; writes copy it into each record so that a lookup is a single
-- primary-key probe on idem_records.
CREATE TABLE idem_scopes (
    scope      text        NOT NULL PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

COMMENT ON TABLE idem_scopes IS
    'idemstore: one row per scope (agent run); its expiry is copied into every record of the scope.';
COMMENT ON COLUMN idem_scopes.scope IS
    'The scope (execution id) as given by the caller; outcomes are never shared across scopes.';
COMMENT ON COLUMN idem_scopes.expires_at IS
    'Database time after which every record of the scope is expired; a write into an expired scope restarts it.';

-- One row per (scope, key): a call that is claimed (pending) or whose outcome
-- is stored (completed).
CREATE TABLE idem_records (
    scope        text        NOT NULL,
    key          bytea       NOT NULL,
    status       smallint    NOT NULL,
    tool         text        NOT NULL,
    fingerprint  bytea       NOT NULL,
    outcome_kind smallint,
    encoding     smallint,
    result       bytea,
    token        bigint      NOT NULL,
    lease_until  timestamptz,
    attempts     integer     NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (scope, key),
    CONSTRAINT idem_records_key_is_sha256 CHECK (octet_length(key) = 32),
    CONSTRAINT idem_records_fingerprint_is_sha256 CHECK (octet_length(fingerprint) = 32),
    CONSTRAINT idem_records_status_known CHECK (status IN (1, 2)),
    CONSTRAINT idem_records_pending_has_lease CHECK (
        status <> 1 OR (token > 0 AND lease_until IS NOT NULL AND result IS NULL)),
    CONSTRAINT idem_records_completed_has_outcome CHECK (
        status <> 2 OR (outcome_kind IN (1, 2) AND encoding IS NOT NULL AND result IS NOT NULL))
) WITH (fillfactor = 90);

COMMENT ON TABLE idem_records IS
    'idemstore: one row per (scope, key): a claimed call (pending) or its stored outcome (completed).';
COMMENT ON COLUMN idem_records.scope IS
    'The scope (execution id) the call belongs to.';
COMMENT ON COLUMN idem_records.key IS
    'SHA-256 key of the call inside its scope (from the invocation id, else tool + canonical arguments).';
COMMENT ON COLUMN idem_records.status IS
    '1 = pending (a claim was granted, outcome not yet known), 2 = completed (outcome stored, replayed on every hit).';
COMMENT ON COLUMN idem_records.tool IS
    'Tool name of the call, for operators and for fingerprint-mismatch errors.';
COMMENT ON COLUMN idem_records.fingerprint IS
    'SHA-256 of tool + canonical arguments; a call with the same key and another fingerprint is refused.';
COMMENT ON COLUMN idem_records.outcome_kind IS
    '1 = success (replayed as a reused cached result), 2 = permanent failure (replayed as a reused cached failure); NULL while pending.';
COMMENT ON COLUMN idem_records.encoding IS
    'How result is encoded (1 = raw bytes); stored per row so that codecs can change without breaking old rows.';
COMMENT ON COLUMN idem_records.result IS
    'The stored outcome in the row''s encoding; decoded it is the tool output, replayed byte for byte.';
COMMENT ON COLUMN idem_records.token IS
    'Fencing token of the latest claim (from idem_token_seq, never reused); Complete, Release and Renew must present it. 0 for a record stored by Put without a claim.';
COMMENT ON COLUMN idem_records.lease_until IS
    'Database time at which the latest claim''s lease ends; past it another caller may take the claim over. NULL for Put.';
COMMENT ON COLUMN idem_records.attempts IS
    'Claims granted on this key: 1 for the first, +1 per takeover of an expired lease; 0 for Put.';
COMMENT ON COLUMN idem_records.created_at IS
    'Database time the record was created (or restarted after its scope expired).';
COMMENT ON COLUMN idem_records.updated_at IS
    'Database time of the last change (claim, takeover, renewal, completion, scope extension).';
COMMENT ON COLUMN idem_records.expires_at IS
    'Copy of the scope''s expiry, so a lookup is one index probe; expired records are never returned.';

-- Cleanup walks records in expiry order in bounded batches.
CREATE INDEX idem_records_expires_at ON idem_records (expires_at);
COMMENT ON INDEX idem_records_expires_at IS
    'Lets cleanup find expired records in bounded batches without scanning the table.';

CREATE INDEX idem_scopes_expires_at ON idem_scopes (expires_at);
COMMENT ON INDEX idem_scopes_expires_at IS
    'Lets cleanup find expired scope rows in bounded batches.';

-- Fencing tokens come from one sequence so that a token is never reused, not
-- even for the same key after its scope expired and restarted.
CREATE SEQUENCE idem_token_seq AS bigint MINVALUE 1;
COMMENT ON SEQUENCE idem_token_seq IS
    'Source of fencing tokens: strictly increasing, never reused, shared by every process using the schema.';

-- +goose Down

DROP SEQUENCE idem_token_seq;
DROP TABLE idem_records;
DROP TABLE idem_scopes;
