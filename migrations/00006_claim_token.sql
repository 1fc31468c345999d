-- A claim draws the token it takes a record with once it holds the
-- record's row lock.
--
-- idem_claim (migration 4) draws its token when its INSERT starts, then
-- waits for the key's row when another session holds it. When that session
-- gave the record a later token (a claim, then a release, by another
-- caller), the takeover took the record's token + 1 (GREATEST(drawn,
-- record's token + 1), the rule that keeps a key's tokens rising on Citus
-- after a shard move): a value the sequence had not handed out yet, and
-- then handed to another claim. Two grants shared a token, which
-- docs/operations.md says never happens (seen in `make chaos-failover`:
-- "token 16718 granted twice"; pgstore's
-- TestTakeoverTokenIsNeverOneTheSequenceHandsOutLater). Now idem_claim
-- locks the record's row before it draws the token it takes the record
-- with; where there is no row to lock, it inserts with ON CONFLICT DO
-- NOTHING, and when a record appeared meanwhile, locks it and goes on. It
-- never writes a token and then another in one transaction (a first fix
-- did: the chaos audit saw a claim taken over by its own transaction).

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

-- idem_claim as in migration 4, but its token drawn once the record's row
-- is locked (a record inserted meanwhile is locked before a token is drawn
-- for taking it over).
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE OR REPLACE FUNCTION /* schema */idem_claim(
    p_scope text, p_key bytea, p_tool text, p_fingerprint bytea,
    p_lease bigint, p_ttl bigint, p_nonce bytea)
RETURNS SETOF /* schema */idem_claim_result
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_now     timestamptz := now();
    v_expires timestamptz := /* schema */idem_scope_expiry(p_scope, p_ttl, v_now);
    v_token   bigint;
    v_res     /* schema */idem_claim_result;
BEGIN
    -- The record's row first, then the token: a session that holds the
    -- row (a claim or release of another caller) has committed its token
    -- once this lock is granted, and the token drawn after it is above it.
    PERFORM FROM /* schema */idem_records r WHERE r.scope = p_scope AND r.key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        -- No record to lock: insert one, unless a record appears meanwhile
        -- (an insert not committed when the lock looked, which this insert
        -- waits for). Then lock that record and take it as below, with a
        -- token drawn after: never the record's token + 1 written first and
        -- a new token after it.
        v_token := nextval('/* schema */idem_token_seq');
        INSERT INTO /* schema */idem_records AS r
            (scope, key, status, tool, fingerprint, token, lease_until, attempts,
             created_at, updated_at, expires_at, claimed_at, claim_nonce)
        VALUES (p_scope, p_key, 1 /* pending */, p_tool, p_fingerprint,
            v_token, v_now + p_lease * interval '1 microsecond', 1,
            v_now, v_now, v_expires, v_now, p_nonce)
        ON CONFLICT (scope, key) DO NOTHING
        RETURNING r.key, true, NULL::smallint,
            r.status, r.tool, r.fingerprint, r.outcome_kind, r.encoding, r.result, r.token, r.lease_until,
            r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at
        INTO v_res;
        IF FOUND THEN
            RETURN NEXT v_res;
            RETURN;
        END IF;
        PERFORM FROM /* schema */idem_records r WHERE r.scope = p_scope AND r.key = p_key FOR UPDATE;
    END IF;
    v_token := nextval('/* schema */idem_token_seq');
    INSERT INTO /* schema */idem_records AS r
        (scope, key, status, tool, fingerprint, token, lease_until, attempts,
         created_at, updated_at, expires_at, claimed_at, claim_nonce)
    VALUES (p_scope, p_key, 1 /* pending */, p_tool, p_fingerprint,
        v_token, v_now + p_lease * interval '1 microsecond', 1,
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
        r.attempts, r.created_at, r.updated_at, r.expires_at, r.last_error, r.claimed_at
    INTO v_res;
    IF FOUND THEN
        RETURN NEXT v_res;
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

DROP FUNCTION pg_temp.idem_define(text);

-- +goose Down

SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- +goose StatementBegin
CREATE FUNCTION pg_temp.idem_define(p_sql text) RETURNS void
LANGUAGE plpgsql
AS $define$
BEGIN
    EXECUTE replace(p_sql, '/* schema */', quote_ident(current_schema()) || '.');
END
$define$;
-- +goose StatementEnd

-- idem_claim as migration 4 made it.
-- +goose StatementBegin
SELECT pg_temp.idem_define($sql$
CREATE OR REPLACE FUNCTION /* schema */idem_claim(
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

DROP FUNCTION pg_temp.idem_define(text);
