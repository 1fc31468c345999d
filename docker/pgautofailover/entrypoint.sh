#!/bin/bash
# Entrypoint of idemstore's pg_auto_failover test image (see Dockerfile).
#
# `formation` (the default command) creates and runs a formation of a
# monitor and two PostgreSQL nodes, node1 and node2, all on 127.0.0.1:
#
#   PGHA_MONITOR_PORT (default 5431)  the monitor
#   PGHA_NODE1_PORT   (default 5432)  node1, the first primary
#   PGHA_NODE2_PORT   (default 5433)  node2, the first standby
#
# Authentication is trust and SSL is off: these are throw-away test servers
# that listen on the loopback address only. The data directories are
# /var/lib/postgresql/{monitor,node1,node2}; /var/lib/postgresql/NODE.pg_autoctl.pid
# holds the pid of the node's `pg_autoctl` (the parent of its services).
#
# This script is the formation's supervisor: it starts the three
# `pg_autoctl ... --run` processes (each of which supervises its own
# PostgreSQL: a killed postmaster is started again by its pg_autoctl), then
# waits. If any pg_autoctl process exits, the formation is broken for good,
# so the script stops the others and exits non-zero, which stops the
# container where its owner sees it. It logs "pgha: formation ready" once
# node1 is primary and node2 its secondary.
#
# Any other command (bash, psql, pg_autoctl ...) runs as asked.
set -Eeuo pipefail

if [ "${1:-formation}" != 'formation' ]; then
	exec "$@"
fi

base=/var/lib/postgresql
if [ "$(id -u)" = '0' ]; then
	mkdir -p /var/run/postgresql "$base"
	chown postgres:postgres /var/run/postgresql "$base"
	chmod 2775 /var/run/postgresql
	# PostgreSQL refuses to run as root; re-run this script as postgres.
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

export HOME="$base"
monitor_port="${PGHA_MONITOR_PORT:-5431}"
node1_port="${PGHA_NODE1_PORT:-5432}"
node2_port="${PGHA_NODE2_PORT:-5433}"
host=127.0.0.1
monitor_url="postgres://autoctl_node@$host:$monitor_port/pg_auto_failover?sslmode=disable"

log() { echo "pgha: $*"; }

pids=()
# stop_all ends every pg_autoctl started so far (SIGINT: a fast shutdown of
# its PostgreSQL) and exits with $1.
stop_all() {
	local code=$1
	trap - TERM INT
	for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
	wait || true
	exit "$code"
}
trap 'log "stopping"; stop_all 0' TERM INT

# monitor_sql runs a query on the monitor and prints the result unaligned.
monitor_sql() {
	psql --no-psqlrc -qAtX -d "$monitor_url" -c "$1" 2>/dev/null
}

# wait_for polls a monitor query until it prints "t", for at most $1
# seconds; a pg_autoctl process that exits meanwhile fails it at once.
wait_for() {
	local deadline=$((SECONDS + $1)) what=$2 query=$3 pid
	until [ "$(monitor_sql "$query" || true)" = 't' ]; do
		for pid in "${pids[@]}"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				log "pg_autoctl (pid $pid) exited while waiting for $what"
				stop_all 1
			fi
		done
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "timed out waiting for $what"
			stop_all 1
		fi
		sleep 0.2
	done
	log "$what after ${SECONDS}s"
}

common=(--auth trust --no-ssl --hostname "$host")

# The monitor is created first and run afterwards, because `create monitor`
# has no --listen and would make the monitor listen on every address, which
# with the host's network means every address of the host.
pg_autoctl create monitor "${common[@]}" --pgdata "$base/monitor" --pgport "$monitor_port"
pg_autoctl config set --pgdata "$base/monitor" postgresql.listen_addresses "$host" >/dev/null
pg_autoctl run --pgdata "$base/monitor" &
pids+=($!)
wait_for 120 'monitor up' "SELECT count(*) >= 0 FROM pgautofailover.formation"

# node1 registers first, so it is the primary; node2 then joins it as
# standby (two nodes registering at once may race for the primary role).
node() {
	local name=$1 port=$2
	pg_autoctl create postgres "${common[@]}" --pgdata "$base/$name" --pgport "$port" \
		--listen "$host" --name "$name" --dbname postgres --monitor "$monitor_url" --run &
	pids+=($!)
	# Whoever freezes a node (internal/pgha) finds its pg_autoctl here.
	echo "$!" >"$base/$name.pg_autoctl.pid"
}
node node1 "$node1_port"
wait_for 120 'node1 single' "SELECT EXISTS (SELECT 1 FROM pgautofailover.node WHERE nodename = 'node1' AND reportedstate = 'single')"
node node2 "$node2_port"
wait_for 300 'formation ready' "SELECT count(*) = 2 FROM pgautofailover.node WHERE reportedstate = goalstate AND reportedstate IN ('primary', 'secondary')"
log "formation ready"

# wait -n returns when any pg_autoctl exits: the formation is broken.
code=0
wait -n "${pids[@]}" || code=$?
log "a pg_autoctl process exited (status $code); stopping the formation"
stop_all 1
