package pgsql

import "strings"

// SchemaMarker is what stands for the store's schema in every statement:
// a comment right before a table or function name, or at the start of a
// string literal that names one ('/* schema */idem_token_seq'::regclass, a
// constant PostgreSQL resolves when it plans the statement).
const SchemaMarker = "/* schema */"

// Statements holds the SQL of one store, its schema filled in.
type Statements struct {
	// The call path.
	Get, GetMany, ClaimRead, ClaimReplay, ClaimReadMany, ClaimReplayMany, ClaimNew, ClaimNewMany, Claim, ClaimMany, Put, Complete, CompleteLive, Release, Renew, Watch, WaitCheck, Read, Notify string
	// The reads that hand out an outcome, confirmed on the synchronous
	// standby (Config.ConfirmReads): each takes a row lock, whose commit
	// waits for the standby.
	ConfirmedGet, ConfirmedGetMany, ConfirmedClaimRead, ConfirmedRead string
	// Scope maintenance.
	ExtendScope, DeleteScopeLock, DeleteScopeRow, DeleteScopeRecords, RemoveExpired, RemoveExpiredSkipLocked string
	// The operators' API.
	Attention, AttentionInScope, Resolve string
	// Encryption at rest: moving results to the current key.
	ResealList, Reseal string
	// What New asks the database.
	Session string
	// Citus only (tables distributed): what New asks, and cleanup.
	Distribution, CleanupScopes, RemoveExpiredHere string
}

// New returns the statements of a store whose schema is quotedSchema (a
// validated name, quoted as an identifier): the one replacement of
// SchemaMarker by quotedSchema and a dot (in a string literal, with its
// quotes doubled).
func New(quotedSchema string) Statements {
	literal := "'" + strings.ReplaceAll(quotedSchema, "'", "''") + "."
	return build(func(sql string) string {
		sql = strings.ReplaceAll(sql, "'"+SchemaMarker, literal)
		return strings.ReplaceAll(sql, SchemaMarker, quotedSchema+".")
	})
}

// AsWritten returns the statements as written in the source, markers and
// all but those in string literals, which are dropped: valid PostgreSQL
// that, with search_path set to a store's schema, does what New's
// statements do (this package's tests run them so).
func AsWritten() Statements {
	return build(func(sql string) string { return strings.ReplaceAll(sql, "'"+SchemaMarker, "'") })
}

// Source returns the statements exactly as written in the source, every
// marker kept: what the conventions tests read.
func Source() Statements { return build(func(sql string) string { return sql }) }

// build returns the statements, each passed through fill.
func build(fill func(string) string) Statements {
	return Statements{
		Get:                     fill(getSQL),
		GetMany:                 fill(getManySQL),
		ClaimRead:               fill(claimReadSQL),
		ClaimReplay:             fill(claimReplaySQL),
		ClaimReadMany:           fill(claimReadManySQL),
		ClaimReplayMany:         fill(claimReplayManySQL),
		ClaimNew:                fill(claimNewSQL),
		ClaimNewMany:            fill(claimNewManySQL),
		Claim:                   fill(claimSQL),
		ClaimMany:               fill(claimManySQL),
		Put:                     fill(putSQL),
		Complete:                fill(completeSQL),
		CompleteLive:            fill(completeLiveSQL),
		Release:                 fill(releaseSQL),
		Renew:                   fill(renewSQL),
		Watch:                   fill(watchSQL),
		WaitCheck:               fill(waitCheckSQL),
		Read:                    fill(readSQL),
		ConfirmedGet:            fill(confirmed(getSQL)),
		ConfirmedGetMany:        fill(confirmed(getManySQL)),
		ConfirmedClaimRead:      fill(confirmed(claimReadSQL)),
		ConfirmedRead:           fill(confirmed(readSQL)),
		Notify:                  fill(notifySQL),
		ExtendScope:             fill(extendScopeSQL),
		DeleteScopeLock:         fill(deleteScopeLockSQL),
		DeleteScopeRow:          fill(deleteScopeRowSQL),
		DeleteScopeRecords:      fill(deleteScopeRecordsSQL),
		RemoveExpired:           fill(removeExpiredSQL),
		RemoveExpiredSkipLocked: fill(removeExpiredSkipLockedSQL),
		Attention:               fill(attentionSQL),
		AttentionInScope:        fill(attentionInScopeSQL),
		Resolve:                 fill(resolveSQL),
		ResealList:              fill(resealListSQL),
		Reseal:                  fill(resealSQL),
		Session:                 fill(sessionSQL),
		Distribution:            fill(distributionSQL),
		CleanupScopes:           fill(cleanupScopesSQL),
		RemoveExpiredHere:       fill(removeExpiredHereSQL),
	}
}

// Named is one statement and the name of its Statements field.
type Named struct {
	Name, SQL string
}

// All lists every statement, for tests that check them all.
func (s Statements) All() []Named {
	return []Named{
		{"Get", s.Get}, {"GetMany", s.GetMany}, {"ClaimRead", s.ClaimRead}, {"ClaimReplay", s.ClaimReplay}, {"ClaimReadMany", s.ClaimReadMany}, {"ClaimReplayMany", s.ClaimReplayMany}, {"ClaimNew", s.ClaimNew}, {"ClaimNewMany", s.ClaimNewMany}, {"Claim", s.Claim}, {"ClaimMany", s.ClaimMany}, {"Put", s.Put},
		{"Complete", s.Complete}, {"CompleteLive", s.CompleteLive}, {"Release", s.Release}, {"Renew", s.Renew},
		{"Watch", s.Watch}, {"WaitCheck", s.WaitCheck}, {"Read", s.Read}, {"Notify", s.Notify},
		{"ConfirmedGet", s.ConfirmedGet}, {"ConfirmedGetMany", s.ConfirmedGetMany},
		{"ConfirmedClaimRead", s.ConfirmedClaimRead}, {"ConfirmedRead", s.ConfirmedRead},
		{"ExtendScope", s.ExtendScope}, {"DeleteScopeLock", s.DeleteScopeLock}, {"DeleteScopeRow", s.DeleteScopeRow},
		{"DeleteScopeRecords", s.DeleteScopeRecords}, {"RemoveExpired", s.RemoveExpired},
		{"RemoveExpiredSkipLocked", s.RemoveExpiredSkipLocked},
		{"Attention", s.Attention}, {"AttentionInScope", s.AttentionInScope}, {"Resolve", s.Resolve},
		{"ResealList", s.ResealList}, {"Reseal", s.Reseal},
		{"Session", s.Session}, {"Distribution", s.Distribution},
		{"CleanupScopes", s.CleanupScopes}, {"RemoveExpiredHere", s.RemoveExpiredHere},
	}
}

// confirmed makes a read that hands out an outcome confirm it on the
// synchronous standby before it returns. PostgreSQL makes a commit visible
// on the primary before its synchronous standby has it when the commit's
// wait for the standby ends without an answer (its session was terminated,
// or the server crashed and replayed the commit from its own WAL on
// restart; pg_auto_failover restarts a crashed primary in place, read-write,
// while the monitor may be failing over). A read alone would hand out such
// an outcome, which the promoted standby never had. A row lock is
// WAL-logged, so the read's own commit waits for the standby to flush the
// WAL up to it, and with it everything the read saw: on a node cut off from
// its standby the read never returns, so nothing it read is handed out.
func confirmed(read string) string { return read + "\nFOR SHARE" }
