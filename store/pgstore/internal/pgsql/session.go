package pgsql

// What the store asks the database when it starts.

// sessionSQL asks whether the session is read-only (a standby, or a primary
// demoted by a failover: the store refuses to run on it) and whether the
// citus extension is installed.
const sessionSQL = `SELECT current_setting('transaction_read_only') = 'on' AS read_only,
	EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS citus`

// distributionSQL asks Citus (only where it is installed) how many shards
// idem_records has (0: it is not a distributed table), and whether
// idem_claim is a distributed function whose calls go to the worker that
// holds the scope (Distribute registers it).
//
// Parameters: $1 idem_records (qualified name), $2 idem_claim's
// signature (qualified).
const distributionSQL = `SELECT
	(SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = $1::regclass)::integer AS shards,
	EXISTS (SELECT FROM pg_dist_object
	        WHERE classid = 'pg_proc'::regclass AND objid = $2::regprocedure
	          AND distribution_argument_index IS NOT NULL) AS delegated`
