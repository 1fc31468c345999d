// Package pgha gives idemstore's tests a highly available PostgreSQL: a
// pg_auto_failover 2.0 formation (a monitor, a primary and a standby, all
// PostgreSQL 15) that the tests start themselves, crash, fail over and
// switch over, to prove the store's promise across failovers. Only tests
// use it.
//
// The formation runs in one container of the image
// docker/pgautofailover/build.sh builds from Debian packages (`make
// pgha-image`; IDEMSTORE_TEST_PGHA_IMAGE names another). The container uses
// the host's network and its servers listen on 127.0.0.1 only, on ports
// chosen when it starts: the nodes register with the monitor under the very
// host:port that clients dial, and a killed node refuses connections at once
// instead of hiding behind Docker's port proxy. So the Docker engine must
// run on this machine.
//
// The formation's URL (Formation.URL) is multi-host with
// target_session_attrs=read-write, as an application in front of
// pg_auto_failover uses it: pgx tries both nodes and keeps the one that
// accepts writes.
//
// Ways to fail over, each measured by Formation.Failover:
//   - Crash: SIGKILL of the primary's postmaster (crash recovery on the
//     next start; the monitor promotes the standby in a few seconds);
//   - Switchover: pgautofailover.perform_failover, what `pg_autoctl perform
//     switchover` runs; the primary is demoted cleanly.
//
// Both nodes rejoin as standby after a failover (pg_rewind when needed), so
// failovers can be repeated in one formation.
//
// Replication is synchronous by default (synchronous_standby_names is
// 'ANY 1 (...)' on the primary while its standby is healthy, and
// synchronous_commit is on), so a committed transaction is on both nodes.
// SetSynchronous(false) makes it asynchronous, and Formation.HoldReplication
// then injects the loss an asynchronous failover allows: writes acknowledged
// by the primary that the promoted standby never received.
package pgha
