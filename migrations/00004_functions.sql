-- The store's writes that decide something, as functions of one scope.
--
-- Claim, Put, ExtendScope and an operator's resolution each read a record
-- and decide what to write from what they read. As functions they do so in
-- one round trip, on one clock (the database's now(): on Citus the clock of
-- the worker that holds the scope), and on Citus they run whole on that
-- worker: Distribute registers them with create_distributed_function,
-- distributed by p_scope and colocated with idem_records, so a call is
-- delegated to the worker holding the scope's shards. Plain PostgreSQL runs
-- the very same functions.
--
-- The schema. The functions are written as the store writes its statements
-- (store/pgstore/internal/pgsql): every table, type and function of the
-- store carries the marker /* schema */, a comment to PostgreSQL, and
-- idem_define replaces each marker with the schema being migrated
-- (current_schema(): migrations run with search_path set to it). So the
-- functions name their objects qualified, and work whatever the calling
-- session's search_path, without a SET search_path clause: switching
-- search_path on every call costs a replay about a fifth of its time.
--
-- Status numbers: 1 = pending, 2 = completed, 3 = released (see
-- idem_records.status); every literal carries its name in a comment.
--
-- A record is dead when its scope has expired and it is not a pending
-- record whose lease is still live: a dead record is as good as absent. A
-- pending record of the same call (same fingerprint) whose lease ended in a
-- live scope has lapsed: a claim takes it over. A released record is taken
-- by any call.
--
-- Fencing tokens: every new token is GREATEST(drawn, record's token + 1).
-- On Citus each worker draws from a range of its own (see Distribute), and
-- a shard moved to a worker with a lower range must still hand its records
-- larger tokens than they had.

-- +goose Up

-- On a Citus coordinator whose tables are distributed already, DDL on them
-- runs over several connections per worker unless told otherwise, and
-- Citus then refuses to create a type or a function later in the same
-- transaction. On plain PostgreSQL this sets a placeholder nobody reads.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- The nonce of the latest claim: random bytes the caller drew for one Claim
-- and sends again when it retries that Claim after losing the reply. A
-- pending record carrying the caller's nonce is the caller's own claim.
ALTER TABLE idem_records ADD COLUMN claim_nonce bytea;

COMMENT ON COLUMN idem_records.claim_nonce IS
    'Random bytes the claimer drew for the Claim that granted the latest claim; a retry of that Claim (reply lost) sends them again and gets the same claim back. NULL for Put and for claims granted before migration 4.';

-- A claim's answer for one key: won says whether the caller holds the claim
-- now, prior is the status of the record as first read (NULL: none), and the
-- record's columns follow. A named type rather than OUT parameters: a call
-- then finds its result's shape in the type cache instead of building it
-- from the function's declaration every time.
CREATE TYPE idem_claim_result AS (
    key bytea, won boolean, prior smallint,
    status smallint, tool text, fingerprint bytea, outcome_kind smallint, encoding smallint,
    result bytea, token bigint, lease_until timestamptz, attempts integer,
    created_at timestamptz, updated_at timestamptz, expires_at timestamptz,
    last_error text, claimed_at timestamptz);

COMMENT ON TYPE idem_claim_result IS
    'idemstore: what idem_claim answers for one key (won, prior status, the record as it is now).';

-- idem_define runs one CREATE FUNCTION written with the schema marker, each
-- marker replaced by the schema being migrated. It lives for this session
-- only.
-- +goose StatementBegin
CREATE FUNCTION pg_temp.idem_define(p_sql text) RETURNS void
LANGUAGE plpgsql
AS $define$
BEGIN
    EXECUTE replace(p_sql, '/* schema */', quote_ident(current_schema()) || '.');
END
$define$;
-- +goose StatementEnd

-- idem_scope_expiry returns the expiry a write into p_scope copies into its
-- record (p_now: the caller's clock). A live scope is read and locked FOR
-- SHARE, so that ExtendScope and DeleteScope (which lock it exclusively
-- first) wait for the write and then see its record; a new or expired scope
-- is started with expiry p_now + p_ttl microseconds. When a concurrent
-- writer started the scope after this statement's snapshot, the upsert
-- keeps that writer's expiry.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_scope_expiry(p_scope text, p_ttl bigint, p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_expires timestamptz;
BEGIN
    SELECT sc.expires_at INTO v_expires
    FROM /* schema */idem_scopes sc
    WHERE sc.scope = p_scope AND sc.expires_at > p_now
    FOR SHARE;
    IF NOT FOUND THEN
        INSERT INTO /* schema */idem_scopes AS sc (scope, expires_at)
        VALUES (p_scope, p_now + p_ttl * interval '1 microsecond')
        ON CONFLICT (scope) DO UPDATE SET expires_at =
            CASE WHEN sc.expires_at > p_now THEN sc.expires_at ELSE excluded.expires_at END
        RETURNING sc.expires_at INTO v_expires;
    END IF;
    RETURN v_expires;
END
$fn$
$sql$);
-- +goose StatementEnd

-- idem_claim takes the key of one call (p_key with p_tool and
-- p_fingerprint, in p_scope) for the caller when it may: when there is no
-- record, or a dead, lapsed or released one. The store calls it after a
-- read that found no record deciding the answer by itself (a live
-- completed record, a live claim, a record of another call): a replay
-- never comes here. It returns one row, prior left NULL (the caller read
-- the record before).
--
-- The key is taken with INSERT … ON CONFLICT DO UPDATE … WHERE it may be
-- taken. ON CONFLICT sees and locks the record's latest version, also one
-- written after the caller's read, and the WHERE re-decides on it; when it
-- may not be taken (another caller's claim or outcome got there first), the
-- locked record is read again and returned, won only if it is pending and
-- carries p_nonce (the caller's own claim, granted by an earlier run of the
-- same Claim whose reply was lost). So every decision is made on the
-- record's latest version, under its row lock.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_claim(
    p_scope text, p_key bytea, p_tool text, p_fingerprint bytea,
    p_lease bigint, p_ttl bigint, p_nonce bytea)
RETURNS SETOF /* schema */idem_claim_result
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_now     timestamptz := now();
    v_expires timestamptz := /* schema */idem_scope_expiry(p_scope, p_ttl, v_now);
BEGIN
    RETURN QUERY
    INSERT INTO /* schema */idem_records AS r
        (scope, key, status, tool, fingerprint, token, lease_until, attempts,
         created_at, updated_at, expires_at, claimed_at, claim_nonce)
    VALUES (p_scope, p_key, 1 /* pending */, p_tool, p_fingerprint,
        nextval('/* schema */idem_token_seq'), v_now + p_lease * interval '1 microsecond', 1,
        v_now, v_now, v_expires, v_now, p_nonce)
    ON CONFLICT (scope, key) DO UPDATE SET
        status       = excluded.status,
        tool         = excluded.tool,
        fingerprint  = excluded.fingerprint,
        outcome_kind = NULL,
        encoding     = NULL,
        result       = NULL,
        token        = GREATEST(excluded.token, r.token + 1),
        lease_until  = excluded.lease_until,
        -- A fresh start (over a dead record, or another call's released
        -- one) forgets the earlier attempts; a new attempt of the same
        -- call counts on and keeps its last error.
        attempts     = CASE WHEN (r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now))
                              OR (r.status = 3 /* released */ AND r.fingerprint <> excluded.fingerprint)
                            THEN 1 ELSE r.attempts + 1 END,
        created_at   = CASE WHEN (r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now))
                              OR (r.status = 3 /* released */ AND r.fingerprint <> excluded.fingerprint)
                            THEN excluded.created_at ELSE r.created_at END,
        last_error   = CASE WHEN (r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now))
                              OR (r.status = 3 /* released */ AND r.fingerprint <> excluded.fingerprint)
                            THEN NULL ELSE r.last_error END,
        updated_at   = excluded.updated_at,
        expires_at   = excluded.expires_at,
        watched      = false,
        claimed_at   = excluded.claimed_at,
        claim_nonce  = excluded.claim_nonce
    WHERE (r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now))  -- dead
       OR (r.status = 1 /* pending */ AND r.lease_until <= v_now
           AND r.fingerprint = excluded.fingerprint)                                            -- lapsed
       OR r.status = 3 /* released */                                                           -- released
    RETURNING r.key, true, NULL::smallint,
        r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
        r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at;
    IF FOUND THEN
        RETURN;
    END IF;

    -- Another caller's record, locked by ON CONFLICT: as it is now.
    RETURN QUERY
    SELECT r.key, r.status = 1 /* pending */ AND r.claim_nonce IS NOT DISTINCT FROM p_nonce, NULL::smallint,
        r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
        r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at
    FROM /* schema */idem_records r
    WHERE r.scope = p_scope AND r.key = p_key;
END
$fn$
$sql$);
-- +goose StatementEnd

-- idem_claim_many is the exclusive mode's step for several calls of one
-- scope in one round trip (a turn's misses): p_keys[i] with p_tools[i] and
-- p_fingerprints[i], one row per key, in order. Each key's record is read
-- first: when it decides the answer by itself it is returned as it is,
-- without writing (won if it is the caller's own claim, by p_nonce);
-- otherwise idem_claim takes the key. prior is the status first read
-- (NULL: no record), which tells a claim over a released record from a
-- takeover.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_claim_many(
    p_scope text, p_keys bytea[], p_tools text[], p_fingerprints bytea[],
    p_lease bigint, p_ttl bigint, p_nonce bytea)
RETURNS SETOF /* schema */idem_claim_result
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_now     timestamptz := now();
    v_prior   smallint;
    v_decides boolean;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
        SELECT r.status,
               NOT ((r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now)) -- dead
                 OR (r.status = 1 /* pending */ AND r.lease_until <= v_now
                     AND r.fingerprint = p_fingerprints[i])                                              -- lapsed
                 OR r.status = 3 /* released */)
        INTO v_prior, v_decides
        FROM /* schema */idem_records r WHERE r.scope = p_scope AND r.key = p_keys[i];
        IF v_decides THEN
            RETURN QUERY
            SELECT r.key, r.status = 1 /* pending */ AND r.claim_nonce IS NOT DISTINCT FROM p_nonce, r.status,
                r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
                r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at
            FROM /* schema */idem_records r WHERE r.scope = p_scope AND r.key = p_keys[i];
        ELSE
            RETURN QUERY
            SELECT c.key, c.won, v_prior,
                c.status, c.tool, c.fingerprint, c.outcome_kind, c.encoding, c.result, c.token, c.lease_until,
                c.attempts, c.created_at, c.updated_at, c.expires_at, c.last_error, c.claimed_at
            FROM /* schema */idem_claim(p_scope, p_keys[i], p_tools[i], p_fingerprints[i], p_lease, p_ttl, p_nonce) c;
        END IF;
    END LOOP;
END
$fn$
$sql$);
-- +goose StatementEnd

-- idem_put stores a completed record unless the key has a live one
-- (probe-then-store mode): stored says whether this call stored it, and the
-- record's columns give the record now stored. A live record (in a live
-- scope, or a pending one whose lease is live; not a released one) is
-- returned as it is, without writing. Otherwise the insert replaces only a
-- dead or released record; when another writer's record appeared after the
-- read, ON CONFLICT waited for it, and the next round's read sees it.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_put(
    p_scope text, p_key bytea, p_tool text, p_fingerprint bytea,
    p_outcome_kind smallint, p_encoding smallint, p_result bytea, p_ttl bigint)
RETURNS TABLE (
    stored boolean,
    status smallint, tool text, fingerprint bytea, outcome_kind smallint, encoding smallint,
    result bytea, token bigint, lease_until timestamptz, attempts integer,
    created_at timestamptz, updated_at timestamptz, expires_at timestamptz,
    last_error text, claimed_at timestamptz)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := now();
    v_expires timestamptz; -- the scope's expiry, found by the first write
BEGIN
    -- A second round settles it unless the record vanished again meanwhile
    -- (a deleted scope, cleanup): a pathological interleaving, reported as
    -- a serialization failure, which the store retries.
    FOR round IN 1 .. 3 LOOP
        RETURN QUERY
        SELECT false,
            r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
            r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at
        FROM /* schema */idem_records r
        WHERE r.scope = p_scope AND r.key = p_key AND r.status <> 3 /* released */
          AND (r.expires_at > v_now OR (r.status = 1 /* pending */ AND r.lease_until > v_now));
        EXIT WHEN FOUND;

        IF v_expires IS NULL THEN
            v_expires := /* schema */idem_scope_expiry(p_scope, p_ttl, v_now);
        END IF;
        RETURN QUERY
        INSERT INTO /* schema */idem_records AS r
            (scope, key, status, tool, fingerprint, outcome_kind, encoding, result,
             token, lease_until, attempts, created_at, updated_at, expires_at)
        VALUES (p_scope, p_key, 2 /* completed */, p_tool, p_fingerprint, p_outcome_kind, p_encoding, p_result,
            0, NULL, 0, v_now, v_now, v_expires)
        ON CONFLICT (scope, key) DO UPDATE SET
            status = excluded.status, tool = excluded.tool, fingerprint = excluded.fingerprint,
            outcome_kind = excluded.outcome_kind, encoding = excluded.encoding, result = excluded.result,
            token = excluded.token, lease_until = excluded.lease_until, attempts = excluded.attempts,
            created_at = excluded.created_at, updated_at = excluded.updated_at, expires_at = excluded.expires_at,
            watched = false, last_error = NULL, claimed_at = NULL, claim_nonce = NULL
        WHERE (r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now)) -- dead
           OR r.status = 3 /* released */
        RETURNING true,
            r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
            r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at;
        EXIT WHEN FOUND;
        IF round = 3 THEN
            RAISE EXCEPTION 'idemstore: the record of the key kept changing under % attempts', round
                USING ERRCODE = 'serialization_failure';
        END IF;
    END LOOP;
END
$fn$
$sql$);
-- +goose StatementEnd

-- idem_extend_scope sets the expiry of a live scope, or of an expired one
-- that still has a live claim (which carries over into the extended scope,
-- as a write restarting the scope would carry it; its scope row may already
-- be gone), to now + p_ttl microseconds, and copies it into the scope's
-- records that are not dead (expired records stay expired). An expired
-- scope without live claims is left alone: it is not revived, and its next
-- write starts it with that write's TTL. It returns the new expiry, NULL
-- when it changed nothing.
--
-- The upsert's row lock waits for writes in progress into the scope (they
-- hold the scope row FOR SHARE) and makes later ones wait; the records'
-- update runs after it, with a snapshot of its own, so it sees every record.
-- That needs READ COMMITTED, which the store asks for.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_extend_scope(p_scope text, p_ttl bigint)
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

-- idem_resolve settles, for an operator, a pending or released record that
-- is not dead and whose token is p_token: p_status 2 (completed) stores the
-- outcome (p_outcome_kind, p_encoding, p_result), and the record takes its
-- scope's current expiry when the scope is live (a claim that outlived its
-- scope's restart); p_status 3 (released) releases it with the note p_note.
-- Either way under a new fencing token, which fences the holder out. It
-- returns the record, and whether a waiter marked it (watched: wake it), or
-- no row when the record cannot be resolved.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_resolve(
    p_scope text, p_key bytea, p_token bigint, p_status smallint,
    p_outcome_kind smallint, p_encoding smallint, p_result bytea, p_note text)
RETURNS TABLE (
    watched boolean,
    status smallint, tool text, fingerprint bytea, outcome_kind smallint, encoding smallint,
    result bytea, token bigint, lease_until timestamptz, attempts integer,
    created_at timestamptz, updated_at timestamptz, expires_at timestamptz,
    last_error text, claimed_at timestamptz)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_now   timestamptz := statement_timestamp();
    v_token bigint;
BEGIN
    IF p_status NOT IN (2 /* completed */, 3 /* released */) THEN
        RAISE EXCEPTION 'idemstore: cannot resolve a record to status %', p_status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Drawn apart: Citus refuses a volatile function inside an UPDATE.
    v_token := nextval('/* schema */idem_token_seq');
    RETURN QUERY
    UPDATE /* schema */idem_records AS r SET
        status       = p_status,
        outcome_kind = CASE WHEN p_status = 2 /* completed */ THEN p_outcome_kind END,
        encoding     = CASE WHEN p_status = 2 /* completed */ THEN p_encoding END,
        result       = CASE WHEN p_status = 2 /* completed */ THEN p_result END,
        last_error   = CASE WHEN p_status = 3 /* released */ THEN p_note ELSE r.last_error END,
        token        = GREATEST(v_token, r.token + 1),
        lease_until  = CASE WHEN p_status = 3 /* released */ THEN LEAST(r.lease_until, v_now) ELSE r.lease_until END,
        updated_at   = v_now,
        expires_at   = CASE WHEN p_status = 2 /* completed */ THEN COALESCE(
                           (SELECT sc.expires_at FROM /* schema */idem_scopes sc
                            WHERE sc.scope = p_scope AND sc.expires_at > v_now),
                           r.expires_at) ELSE r.expires_at END
    WHERE r.scope = p_scope AND r.key = p_key AND r.token = p_token
      AND r.status IN (1 /* pending */, 3 /* released */)
      AND NOT (r.expires_at <= v_now AND NOT (r.status = 1 /* pending */ AND r.lease_until > v_now)) -- not dead
    RETURNING r.watched,
        r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
        r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at;
END
$fn$
$sql$);
-- +goose StatementEnd

-- idem_remove_expired_here is cleanup on a Citus worker, which Citus
-- refuses on distributed tables in one statement (a ctid batch FOR UPDATE
-- SKIP LOCKED across shards). It runs p_command, the store's cleanup batch
-- written for one pair of shards (%1$s: a shard of idem_records, %2$s: its
-- colocated shard of idem_scopes, $1: the batch size), on each pair of
-- shards this node holds, until p_limit records are removed, and returns how
-- many it removed and whether it removed all p_limit (more may remain).
-- p_scope only routes the call: Distribute delegates it to the worker
-- holding that scope, and the store calls it with a scope of each worker,
-- in parallel, so cleanup scales with the workers. Run anywhere else (plain
-- PostgreSQL, the coordinator) it finds no shard and removes nothing.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE FUNCTION /* schema */idem_remove_expired_here(p_scope text, p_command text, p_limit integer)
RETURNS TABLE (removed bigint, more boolean)
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_pair record;
    v_n    bigint;
BEGIN
    removed := 0;
    FOR v_pair IN
        SELECT shard_name('/* schema */idem_records'::regclass, r.shardid) AS records,
               shard_name('/* schema */idem_scopes'::regclass, s.shardid) AS scopes
        FROM pg_dist_shard r
        JOIN pg_dist_shard s ON s.logicalrelid = '/* schema */idem_scopes'::regclass
                            AND s.shardminvalue = r.shardminvalue
        JOIN pg_dist_placement p ON p.shardid = r.shardid
        WHERE r.logicalrelid = '/* schema */idem_records'::regclass
          AND p.groupid = (SELECT groupid FROM pg_dist_local_group)
    LOOP
        EXECUTE format(p_command, v_pair.records, v_pair.scopes) USING p_limit - removed INTO v_n;
        removed := removed + v_n;
        EXIT WHEN removed >= p_limit;
    END LOOP;
    more := removed >= p_limit;
    RETURN NEXT;
END
$fn$
$sql$);
-- +goose StatementEnd

DROP FUNCTION pg_temp.idem_define(text);

-- +goose Down

SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
DROP FUNCTION idem_remove_expired_here(text, text, integer);
DROP FUNCTION idem_resolve(text, bytea, bigint, smallint, smallint, smallint, bytea, text);
DROP FUNCTION idem_extend_scope(text, bigint);
DROP FUNCTION idem_put(text, bytea, text, bytea, smallint, smallint, bytea, bigint);
DROP FUNCTION idem_claim_many(text, bytea[], text[], bytea[], bigint, bigint, bytea);
DROP FUNCTION idem_claim(text, bytea, text, bytea, bigint, bigint, bytea);
DROP FUNCTION idem_scope_expiry(text, bigint, timestamptz);
DROP TYPE idem_claim_result;
ALTER TABLE idem_records DROP COLUMN claim_nonce;
