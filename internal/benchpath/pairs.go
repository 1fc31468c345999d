package benchpath

// memStride is the latency sampling of the in-memory pair, whose
// operations take about a microsecond: timing each would add two clock
// reads to both sides, which hides the difference the pair is there to
// show.
const memStride = 64

// pairs returns the pairs of f in the report's order: the user's path
// first, then the store operations under it.
func (f *fixture) pairs() []*pair {
	return []*pair{
		{
			name:  CaseExecuteHit,
			path:  "`Execute` hit, pgstore (exclusive mode)",
			floor: "SHA-256 + prepared `SELECT result … WHERE scope=$1 AND key=$2`, same table",
			raw:   f.rawHit, lib: f.libHit,
		},
		{
			name:  CaseExecuteMiss,
			path:  "`Execute` miss, pgstore: claim, no-op tool, complete (1 KiB)",
			floor: "SHA-256 + `INSERT … ON CONFLICT DO NOTHING` + `UPDATE` with the 1 KiB result (two commits)",
			raw:   f.rawMiss, lib: f.libMiss,
		},
		{
			name:   CaseMemExecuteHit,
			path:   "`Execute` hit, memstore",
			floor:  "SHA-256 of the argument bytes + `sync.Map` lookup",
			stride: memStride,
			raw:    f.memFloor, lib: f.memHit,
		},
		{
			name:  CaseTurnMiss,
			path:  "turn of 8 new calls: `Prepare` + 8 × `Prepared.Run`, pgstore",
			floor: "one `INSERT` of 8 pending rows `… RETURNING key` + 8 × `UPDATE`",
			raw:   f.rawTurnMiss, lib: f.libTurnMiss,
		},
		{
			name:  CaseTurnHit,
			path:  "turn of 8 stored calls: `Prepare` (all replayed), pgstore",
			floor: "8 × SHA-256 + one `SELECT key, result … WHERE key = ANY($2)`",
			raw:   f.rawTurnHit, lib: f.libTurnHit,
		},
		{
			name:  CaseStoreGet,
			path:  "store `Get` hit (key given)",
			floor: "SHA-256 + `SELECT result`, as for `Execute` hit",
			raw:   f.rawHit, lib: f.storeGet,
		},
		{
			name:  CaseStoreClaimHit,
			path:  "store `Claim` (`OutcomeOnly`, as `Execute` does) on a stored call (key given)",
			floor: "SHA-256 + `SELECT result`, as for `Execute` hit",
			raw:   f.rawHit, lib: f.storeClaimHit,
		},
		{
			name:  CaseStoreClaimComplete,
			path:  "store `Claim` (hinted `LikelyNew`, as `Execute` does) + `Complete` (1 KiB) of a new call",
			floor: "as for `Execute` miss",
			raw:   f.rawMiss, lib: f.storeClaimComplete,
		},
		{
			name:  CaseStoreGetMany,
			path:  "store `GetMany` of 8 stored calls (keys given)",
			floor: "as for the turn of 8 stored calls",
			raw:   f.rawTurnHit, lib: f.storeGetMany,
		},
	}
}
