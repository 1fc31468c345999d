#!/usr/bin/env bash
# claim.sh measures what pgstore's claim of a new call (claimNewSQL, as of
# d926a1e) costs the database against the raw INSERT, and which of its parts
# does: pgbench, each script a claim (or the raw INSERT) and then the raw
# UPDATE of its row, the scripts interleaved round after round, so that the
# machine's drift falls on all of them alike. It prints, per script, the
# machine's busy CPU less pgbench's own per transaction (the database's CPU,
# on a machine that runs nothing else) and the transactions a second.
#
#   DATABASE_URL="host=/tmp/pg port=5432 user=postgres dbname=postgres" \
#     bash internal/benchpath/pgbench/claim.sh
#
# Run it on the database's machine, from the module's root (it migrates
# schemas of its own with cmd/migrate, and drops them at the end). Settings:
# ROUNDS (10), DURATION (3, seconds a script a round), CLIENTS (8), PGBENCH (pgbench
# on PATH, else PostgreSQL 15's). docs/benchmarks.md, "Fewer allocations a
# miss" and "The latest run", has its figures.
set -euo pipefail

: "${DATABASE_URL:?set DATABASE_URL to a PostgreSQL where the role may create a schema}"
ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-3}
CLIENTS=${CLIENTS:-8}
PGBENCH=${PGBENCH:-$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)}
SCHEMA=pgbench_claim

dir=$(mktemp -d)
# More copies of the schema, for the claim against idem_records without its
# CHECK constraints, with the six merged into one, with only the two length
# checks, and with the four checks of the status's shape replaced by one
# PL/pgSQL function's.
schemas=("$SCHEMA" "${SCHEMA}_no_checks" "${SCHEMA}_one_check" "${SCHEMA}_len_checks" "${SCHEMA}_fn_check")
cleanup() {
	for s in "${schemas[@]}"; do
		psql -qX "$DATABASE_URL" -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1 || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT

for s in "${schemas[@]}"; do
	psql -qX "$DATABASE_URL" -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null
	DATABASE_URL="$DATABASE_URL" go run ./cmd/migrate -schema "$s" up >/dev/null
done
lengths=(key_is_sha256 fingerprint_is_sha256)
shape=(status_known pending_has_lease completed_has_outcome released_has_no_outcome)
drop() { # $1: schema, then the constraints' names without idem_records_
	local s=$1
	shift
	psql -qX "$DATABASE_URL" -c "ALTER TABLE $s.idem_records $(printf 'DROP CONSTRAINT idem_records_%s, ' "$@" | sed 's/, $//')" >/dev/null
}
drop "${SCHEMA}_no_checks" "${lengths[@]}" "${shape[@]}"
drop "${SCHEMA}_one_check" "${lengths[@]}" "${shape[@]}"
drop "${SCHEMA}_len_checks" "${shape[@]}"
drop "${SCHEMA}_fn_check" "${shape[@]}"
psql -qX "$DATABASE_URL" >/dev/null <<SQL
CREATE FUNCTION ${SCHEMA}_fn_check.idem_record_shape(status smallint, token bigint, lease_until timestamptz,
	outcome_kind smallint, encoding smallint, result bytea) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS \$\$
BEGIN
	RETURN CASE status
		WHEN 1 THEN token > 0 AND lease_until IS NOT NULL AND result IS NULL
		WHEN 2 THEN outcome_kind IN (1, 2) AND encoding IS NOT NULL AND result IS NOT NULL
		WHEN 3 THEN token > 0 AND lease_until IS NOT NULL AND result IS NULL
		ELSE false END;
END \$\$;
ALTER TABLE ${SCHEMA}_fn_check.idem_records ADD CONSTRAINT idem_records_shape
	CHECK (${SCHEMA}_fn_check.idem_record_shape(status, token, lease_until, outcome_kind, encoding, result));
SQL
psql -qX "$DATABASE_URL" -c "ALTER TABLE ${SCHEMA}_one_check.idem_records ADD CONSTRAINT idem_records_valid CHECK (
	octet_length(key) = 32 AND octet_length(fingerprint) = 32 AND status IN (1, 2, 3)
	AND (status <> 1 OR (token > 0 AND lease_until IS NOT NULL AND result IS NULL))
	AND (status <> 2 OR (outcome_kind IN (1, 2) AND encoding IS NOT NULL AND result IS NOT NULL))
	AND (status <> 3 OR (token > 0 AND lease_until IS NOT NULL AND result IS NULL)))" >/dev/null

# One scope a client, a new key a transaction, a 1 KiB result; every script
# writes idem_records, the raw INSERT too, so that all meet the same table.
key="decode(lpad(to_hex(:k::bigint), 64, '0'), 'hex')"
scope="('run-' || :client_id)"
result="repeat('x', 1024)::bytea"
set_key='\set k random(1, 9000000000000000)'

raw_insert="INSERT INTO $SCHEMA.idem_records (scope, key, status, tool, fingerprint, token, lease_until, attempts, created_at, updated_at, expires_at)
VALUES ($scope, $key, 1, 'bench_tool', $key, :k, now() + interval '30 seconds', 1, now(), now(), now() + interval '1 day')
ON CONFLICT DO NOTHING;"
# The claim as pgstore sends it (claimNewSQL), the schema filled in.
claim="INSERT INTO $SCHEMA.idem_records AS r
(scope, key, status, tool, fingerprint, token, lease_until, attempts, created_at, updated_at, expires_at, claimed_at, claim_nonce)
SELECT $scope, $key, 1, 'bench_tool', $key, nextval('$SCHEMA.idem_token_seq'::regclass), now() + 30000000::bigint * interval '1 microsecond', 1,
now(), now(),
COALESCE((SELECT sc.expires_at FROM $SCHEMA.idem_scopes sc WHERE sc.scope = $scope AND sc.expires_at > now() FOR SHARE),
$SCHEMA.idem_scope_expiry($scope, 86400000000::bigint, now())),
now(), '\\x0123456789abcdef0123456789abcdef'::bytea
ON CONFLICT (scope, key) DO NOTHING
RETURNING token, lease_until, created_at, expires_at \\gset"
update() { # $1: the token
	echo "UPDATE $SCHEMA.idem_records SET status = 2, outcome_kind = 1, encoding = 1, result = $result, updated_at = now()
WHERE scope = $scope AND key = $key AND token = $1 AND status = 1;"
}
# pgbench reads one line a statement: join each statement's lines.
oneline() { tr '\n' ' ' | sed 's/; *$/;/'; echo; }
script() { # $1: name, $2: the claim, $3: the token the UPDATE matches
	{ echo "$set_key"; echo "$2" | oneline; update "$3" | oneline; } >"$dir/$1.sql"
}
no_scope="s/COALESCE(.*now())),/now() + interval '1 day',/"
script raw "$raw_insert" ":k"
script claim "$claim" ":token"
script no_share "$(echo "$claim" | sed 's/ FOR SHARE//')" ":token"
script no_scope "$(echo "$claim" | tr '\n' ' ' | sed "$no_scope")" ":token"
# The fallback that starts a scope (idem_scope_expiry) left out: the
# scopes exist once the claim's script ran, which runs first.
script no_fallback "$(echo "$claim" | tr '\n' ' ' | sed "s|COALESCE((SELECT \\(.*\\) FOR SHARE),.*now())), now(), '|(SELECT \\1 FOR SHARE), now(), '|")" ":token"
script token_param "$(echo "$claim" | sed "s/nextval('$SCHEMA.idem_token_seq'::regclass)/:k/")" ":token"
script neither "$(echo "$claim" | tr '\n' ' ' | sed "$no_scope; s/nextval('$SCHEMA.idem_token_seq'::regclass)/:k/")" ":token"
# The claim as it is, on the copies: what the CHECK constraints cost, which
# PostgreSQL reads from their text and plans again for every INSERT and
# UPDATE (ExecConstraints).
sed "s/$SCHEMA\./${SCHEMA}_no_checks./g" "$dir/claim.sql" >"$dir/no_checks.sql"
sed "s/$SCHEMA\./${SCHEMA}_one_check./g" "$dir/claim.sql" >"$dir/one_check.sql"
sed "s/$SCHEMA\./${SCHEMA}_len_checks./g" "$dir/claim.sql" >"$dir/len_checks.sql"
sed "s/$SCHEMA\./${SCHEMA}_fn_check./g" "$dir/claim.sql" >"$dir/fn_check.sql"
scripts=(raw claim no_share no_fallback no_scope token_param neither no_checks one_check len_checks fn_check)

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
tick=$(getconf CLK_TCK)
declare -A cpu tps
TIMEFORMAT='%U %S'
for ((r = 1; r <= ROUNDS; r++)); do
	for s in "${scripts[@]}"; do
		b0=$(busy)
		{ time "$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -T "$DURATION" -f "$dir/$s.sql" "$DATABASE_URL" >"$dir/out" 2>&1; } 2>"$dir/time"
		b1=$(busy)
		tx=$(awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}' "$dir/out")
		rate=$(awk '/^tps/ {print $3}' "$dir/out")
		own=$(awk '{print $1 + $2}' "$dir/time")
		us=$(awk -v b="$((b1 - b0))" -v t="$tick" -v o="$own" -v n="$tx" 'BEGIN {printf "%.0f", (b / t - o) * 1e6 / n}')
		cpu[$s]+=" $us"
		tps[$s]+=" ${rate%.*}"
		echo "round $r: $s $us µs a transaction, $rate a second" >&2
	done
done
echo "script: database CPU a transaction, µs, mean (each round) | transactions a second, mean"
for s in "${scripts[@]}"; do
	awk -v n="$s" -v c="${cpu[$s]}" -v t="${tps[$s]}" 'BEGIN {
		k = split(c, a, " "); split(t, b, " "); for (i = 1; i <= k; i++) { sc += a[i]; st += b[i] }
		printf "%-12s %6.1f (%s) | %.0f\n", n, sc / k, substr(c, 2), st / k }'
done
