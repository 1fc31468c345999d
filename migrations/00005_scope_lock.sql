-- A new call's claim orders itself with ExtendScope and DeleteScope by a
-- lock that writes nothing.
--
-- A write into a scope copies the scope's expiry into its record, and
-- ExtendScope and DeleteScope must see every record written before they
-- change the scope. So far every write held the scope's row FOR SHARE, which
-- they wait for by taking the row for update. Locking a row writes its
-- header and a WAL record (a new call's claim wrote 5.4 WAL records instead
-- of 4, 545 bytes instead of 472), and writes into one scope at once (a
-- turn's calls run in parallel) share the row's lock through a MultiXact,
-- which is written too.
--
-- A new call's claim (the store's likely-new claim statement, on plain
-- PostgreSQL) now takes a transaction-level advisory lock of the scope,
-- shared, and reads the scope's row without locking it; ExtendScope and
-- DeleteScope take that lock exclusively before they lock the row, so they
-- wait for such claims in flight as they wait for row locks, and claims that
-- come later wait for them. The other writes (idem_claim, idem_claim_many,
-- idem_put), and every write on Citus (where the advisory lock would have to
-- be taken on the scope's worker, which DeleteScope's statements do not
-- reach), keep the row lock; ExtendScope and DeleteScope take both.
--
-- The lock is (1768187245, hashtext(scope)): 1768187245 is 'idem' in ASCII,
-- and the pair form keeps it apart from applications' single-key advisory
-- locks (and from goose's). Two scopes whose hashes collide share a lock,
-- which only makes one wait for the other's ExtendScope or DeleteScope.

-- +goose Up

-- As in migration 4: DDL on distributed tables runs over one connection.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- idem_define, as in migration 4: for this session only.
-- +goose StatementBegin
CREATE FUNCTION pg_temp.idem_define(p_sql text) RETURNS void
LANGUAGE plpgsql
AS $define$
BEGIN
    EXECUTE replace(p_sql, '/* schema */', quote_ident(current_schema()) || '.');
END
$define$;
-- +goose StatementEnd

-- idem_scope_expiry_shared is idem_scope_expiry for a new call's claim: the
-- scope's advisory lock, shared, instead of its row FOR SHARE. The read is a
-- statement of its own, after the lock's: under READ COMMITTED its snapshot
-- is taken once the lock was granted, so it sees what an ExtendScope or
-- DeleteScope that held the lock committed (the caller's statement's
-- snapshot may be older). A live scope is all it needs to read; the rest is
-- idem_scope_expiry's: starting a new or expired scope (under the upsert's
-- row lock), and every call under REPEATABLE READ or SERIALIZABLE (a
-- database or role whose default_transaction_isolation says so), where
-- every statement reads the transaction's first snapshot, which a lock
-- cannot refresh, and only the row lock notices a later change (a
-- serialization failure, which the store sends again).
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_scope_expiry_shared(p_scope text, p_ttl bigint, p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_expires timestamptz;
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(1768187245 /* 'idem' */, hashtext(p_scope));
        SELECT sc.expires_at INTO v_expires
        FROM /* schema */idem_scopes sc
        WHERE sc.scope = p_scope AND sc.expires_at > p_now;
        IF FOUND THEN
            RETURN v_expires;
        END IF;
    END IF;
    RETURN /* schema */idem_scope_expiry(p_scope, p_ttl, p_now);
END
$fn$
$sql$);
-- +goose StatementEnd

-- idem_extend_scope as in migration 4, but it first takes the scope's
-- advisory lock exclusively: it waits for new calls' claims in flight
-- (which hold it shared) as the upsert's row lock waits for the other
-- writes (which hold the row FOR SHARE), and both make later writes wait.
-- Lock, then row, in the order every writer takes them, so none deadlocks.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE OR REPLACE FUNCTION /* schema */idem_extend_scope(p_scope text, p_ttl bigint)
RETURNS timestamptz
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_now     timestamptz := now();
    v_expires timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(1768187245 /* 'idem' */, hashtext(p_scope));
    IF NOT EXISTS (SELECT FROM /* schema */idem_scopes sc WHERE sc.scope = p_scope AND sc.expires_at > v_now)
       AND NOT EXISTS (SELECT FROM /* schema */idem_records r
                       WHERE r.scope = p_scope AND r.status = 1 /* pending */ AND r.lease_until > v_now) THEN
        RETURN NULL;
    END IF;
    INSERT INTO /* schema */idem_scopes AS sc (scope, expires_at)
    VALUES (p_scope, v_now + p_ttl * interval '1 microsecond')
    ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at
    RETURNING sc.expires_at INTO v_expires;
    UPDATE /* schema */idem_records r SET expires_at = v_expires, updated_at = v_now
    WHERE r.scope = p_scope
      AND (r.expires_at > v_now OR (r.status = 1 /* pending */ AND r.lease_until > v_now));
    RETURN v_expires;
END
$fn$
$sql$);
-- +goose StatementEnd

DROP FUNCTION pg_temp.idem_define(text);

-- +goose Down

SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- idem_extend_scope as migration 4 made it: without the advisory lock,
-- which no claim of a build that needs only migration 4 takes.
-- +goose StatementBegin
CREATE FUNCTION pg_temp.idem_define(p_sql text) RETURNS void
LANGUAGE plpgsql
AS $define$
BEGIN
    EXECUTE replace(p_sql, '/* schema */', quote_ident(current_schema()) || '.');
END
$define$;
-- +goose StatementEnd

-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE OR REPLACE FUNCTION /* schema */idem_extend_scope(p_scope text, p_ttl bigint)
RETURNS timestamptz
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_now     timestamptz := now();
    v_expires timestamptz;
BEGIN
    IF NOT EXISTS (SELECT FROM /* schema */idem_scopes sc WHERE sc.scope = p_scope AND sc.expires_at > v_now)
       AND NOT EXISTS (SELECT FROM /* schema */idem_records r
                       WHERE r.scope = p_scope AND r.status = 1 /* pending */ AND r.lease_until > v_now) THEN
        RETURN NULL;
    END IF;
    INSERT INTO /* schema */idem_scopes AS sc (scope, expires_at)
    VALUES (p_scope, v_now + p_ttl * interval '1 microsecond')
    ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at
    RETURNING sc.expires_at INTO v_expires;
    UPDATE /* schema */idem_records r SET expires_at = v_expires, updated_at = v_now
    WHERE r.scope = p_scope
      AND (r.expires_at > v_now OR (r.status = 1 /* pending */ AND r.lease_until > v_now));
    RETURN v_expires;
END
$fn$
$sql$);
-- +goose StatementEnd

DROP FUNCTION pg_temp.idem_define(text);
DROP FUNCTION idem_scope_expiry_shared(text, bigint, timestamptz);
