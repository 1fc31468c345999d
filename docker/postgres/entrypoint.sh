#!/bin/bash
# Entrypoint of idemstore's PostgreSQL test image. It mimics the official
# postgres image's contract (see Dockerfile): on first start it runs initdb,
# starts a socket-only init server, creates POSTGRES_DB and runs
# /docker-entrypoint-initdb.d, stops it, then execs the real server. A data
# directory that already holds PG_VERSION is never initialised again, so a
# stopped and restarted container keeps its data.
set -Eeuo pipefail

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

# `docker run IMAGE -c fsync=off` means `postgres -c fsync=off`.
if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

# Anything but the server (psql, bash, ...) runs as asked.
if [ "$1" != 'postgres' ]; then
	exec "$@"
fi

if [ "$(id -u)" = '0' ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	chmod 2775 /var/run/postgresql
	# Re-run this script as the postgres user (gosu is not in Debian's base).
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

init_database() {
	: "${POSTGRES_USER:=postgres}"
	: "${POSTGRES_DB:=$POSTGRES_USER}"
	: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != 'trust' ]; then
		echo 'error: POSTGRES_PASSWORD is empty; set it, or set POSTGRES_HOST_AUTH_METHOD=trust' >&2
		exit 1
	fi

	local pwfile
	pwfile="$(mktemp)"
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of flags.
	initdb --username="$POSTGRES_USER" --pwfile="$pwfile" \
		--encoding=UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host="$POSTGRES_HOST_AUTH_METHOD" \
		${POSTGRES_INITDB_ARGS:-}
	rm -f "$pwfile"

	# Remote clients (the host, through a published port) log in with a
	# password on any address, as with the official image.
	printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"
	printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

	# The init server listens on the socket only, so nobody connects to a
	# half-initialised database; it logs the first "ready to accept".
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start

	local psql=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ "$POSTGRES_DB" != 'postgres' ]; then
		"${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<-'SQL'
			CREATE DATABASE :"db" ;
		SQL
	fi

	local f
	shopt -s nullglob
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) echo "$0: running $f"; . "$f" ;;
		*.sql) echo "$0: running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
		*.sql.gz) echo "$0: running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
		*) echo "$0: ignoring $f" ;;
		esac
	done

	pg_ctl -D "$PGDATA" -m fast -w stop
	echo 'PostgreSQL init process complete; ready for start up.'
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	init_database
fi

shift
exec postgres "$@"
