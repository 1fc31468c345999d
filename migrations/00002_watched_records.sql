-- Lets Complete and Release notify only records that someone waits for.
--
-- A transaction that sends NOTIFY holds a database-wide lock from its
-- pre-commit until its commit is flushed, so notifying on every completion
-- would serialise all completions (no group commit). A waiter marks the
-- record it waits for instead, and only marked records are announced.

-- +goose Up

ALTER TABLE idem_records ADD COLUMN watched boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN idem_records.watched IS
    'Set by a waiter (Wait) on the pending record it waits for; Complete and Release send NOTIFY only for watched records. Reset by a new claim.';

-- +goose Down

ALTER TABLE idem_records DROP COLUMN watched;
