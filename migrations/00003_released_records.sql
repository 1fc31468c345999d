-- Keeps released claims for operators instead of deleting them.
--
-- A failed call used to delete its record, so a call that kept failing left
-- no trace. Release now keeps the row as status 3 (released) with the
-- failure's text, and the attempts counter keeps counting across releases
-- and takeovers. claimed_at tells how long the current holder has been at
-- it, which lets operators find claims that are renewed but never finish.
--
-- No statement here rewrites or scans idem_records: the new columns are
-- nullable without a default (a catalogue change), and the widened status
-- check is added NOT VALID because every existing row already satisfies it
-- (the check it replaces was narrower). PostgreSQL enforces a NOT VALID check
-- on every row written from now on; a DBA who wants it marked validated can
-- run ALTER TABLE idem_records VALIDATE CONSTRAINT idem_records_status_known
-- at any time (it scans the table without blocking writes).

-- +goose Up

ALTER TABLE idem_records ADD COLUMN last_error text;
ALTER TABLE idem_records ADD COLUMN claimed_at timestamptz;

ALTER TABLE idem_records DROP CONSTRAINT idem_records_status_known;
ALTER TABLE idem_records ADD CONSTRAINT idem_records_status_known
    CHECK (status IN (1, 2, 3)) NOT VALID;
ALTER TABLE idem_records ADD CONSTRAINT idem_records_released_has_no_outcome
    CHECK (status <> 3 OR (token > 0 AND lease_until IS NOT NULL AND result IS NULL)) NOT VALID;

COMMENT ON TABLE idem_records IS
    'idemstore: one row per (scope, key): a claimed call (pending), its stored outcome (completed), or a failed call kept for operators (released).';
COMMENT ON COLUMN idem_records.status IS
    '1 = pending (a claim was granted, outcome not yet known), 2 = completed (outcome stored, replayed on every hit), 3 = released (the latest attempt failed; never replayed, the next claim takes it).';
COMMENT ON COLUMN idem_records.attempts IS
    'Claims granted on this call: 1 for the first, +1 for every later one (takeover of an expired lease, or claim after a release); 0 for Put.';
COMMENT ON COLUMN idem_records.lease_until IS
    'Database time at which the latest claim''s lease ends; past it another caller may take a pending claim over. For a released row, when it was released if that came first. NULL for Put.';
COMMENT ON COLUMN idem_records.last_error IS
    'The cause given to the latest Release of this call (at most 1024 bytes), for operators; kept while later attempts run and after one completes. NULL if it never failed.';
COMMENT ON COLUMN idem_records.claimed_at IS
    'Database time the latest claim was granted (not moved by renewals); NULL for Put. Operators list claims held too long by it.';

-- +goose Down

-- An older build knows no released rows: drop them, as its Release would have.
DELETE FROM idem_records WHERE status = 3;
ALTER TABLE idem_records DROP CONSTRAINT idem_records_released_has_no_outcome;
ALTER TABLE idem_records DROP CONSTRAINT idem_records_status_known;
ALTER TABLE idem_records ADD CONSTRAINT idem_records_status_known CHECK (status IN (1, 2));
ALTER TABLE idem_records DROP COLUMN claimed_at;
ALTER TABLE idem_records DROP COLUMN last_error;
COMMENT ON TABLE idem_records IS
    'idemstore: one row per (scope, key): a claimed call (pending) or its stored outcome (completed).';
COMMENT ON COLUMN idem_records.status IS
    '1 = pending (a claim was granted, outcome not yet known), 2 = completed (outcome stored, replayed on every hit).';
COMMENT ON COLUMN idem_records.attempts IS
    'Claims granted on this key: 1 for the first, +1 per takeover of an expired lease; 0 for Put.';
COMMENT ON COLUMN idem_records.lease_until IS
    'Database time at which the latest claim''s lease ends; past it another caller may take the claim over. NULL for Put.';
