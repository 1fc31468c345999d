package idemotel

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/idemstore/idemstore/idemotel"

// Span and metric attributes of idemstore's own. The semantic-convention
// ones (gen_ai.*, db.*, error.type) come from semconv.
const (
	// AttrScope is the run (scope) of a call or store operation. Spans only.
	AttrScope = attribute.Key("idemstore.scope")
	// AttrKey is the call's key in hex, as the store and the Inspector show
	// it. Spans only.
	AttrKey = attribute.Key("idemstore.key")
	// AttrInvocationID is the caller's invocation id of a call, when set.
	// Spans only.
	AttrInvocationID = attribute.Key("idemstore.invocation_id")
	// AttrOutcome is how a call ended (executor.CallOutcome: replayed, ran,
	// failed, refused, in_flight, outcome_not_stored).
	AttrOutcome = attribute.Key("idemstore.outcome")
	// AttrReplayed marks a call whose outcome came from the store or from
	// an identical call in flight, without running the tool.
	AttrReplayed = attribute.Key("idemstore.replayed")
	// AttrClaimed marks a call that held a claim on its key.
	AttrClaimed = attribute.Key("idemstore.claimed")
	// AttrWaited marks a call that waited for another caller's.
	AttrWaited = attribute.Key("idemstore.waited")
	// AttrWaitKind says where a call waited: in_process (an identical call
	// of this process) or store (another caller's claim). A string slice on
	// spans (a call may wait both ways), a string on the waits metric.
	AttrWaitKind = attribute.Key("idemstore.wait.kind")
	// AttrTakenOver marks a claim granted over an expired lease: the
	// earlier attempt's outcome is unknown.
	AttrTakenOver = attribute.Key("idemstore.taken_over")
	// AttrAttempt counts the claims granted on a call. Spans only.
	AttrAttempt = attribute.Key("idemstore.attempt")
	// AttrReconciled marks a call whose earlier side effect the tool's
	// Reconciler found, so its outcome was stored without running the tool.
	AttrReconciled = attribute.Key("idemstore.reconciled")
	// AttrFingerprintMismatch marks a call refused because its key holds a
	// call with other arguments.
	AttrFingerprintMismatch = attribute.Key("idemstore.fingerprint_mismatch")
	// AttrLeaseLost marks a call whose lease was lost while it ran.
	AttrLeaseLost = attribute.Key("idemstore.lease_lost")
	// AttrClaimState is a Claim's decision (granted, completed, in_flight)
	// on a store span.
	AttrClaimState = attribute.Key("idemstore.claim.state")
	// AttrFound says whether a Get found a record, on a store span.
	AttrFound = attribute.Key("idemstore.found")
	// AttrRecords is how many records a store operation found (GetMany) or
	// removed (DeleteScope, RemoveExpired), on a store span.
	AttrRecords = attribute.Key("idemstore.records")
)

// Values of error.type besides the error classes (contract.Class: bad_call,
// retry, permanent, outcome_unknown).
const (
	// ErrorTypeToolFailure: the tool reported a failure in its Result
	// (executor.Result.Failed), without an error; also for a replayed one.
	ErrorTypeToolFailure = "tool_failure"
)

// Wait kinds (AttrWaitKind).
const (
	WaitInProcess = "in_process"
	WaitStore     = "store"
)

// Metric names.
const (
	// MetricCalls counts calls by outcome, tool and error.type.
	MetricCalls = "idemstore.calls"
	// MetricCallDuration is the time of a whole call, replays included, by
	// outcome and tool.
	MetricCallDuration = "idemstore.call.duration"
	// MetricToolDuration is the time a tool's Execute took, by tool;
	// replays do not run the tool and are not in it.
	MetricToolDuration = "idemstore.tool.duration"
	// MetricClaims counts calls that held a claim, by tool.
	MetricClaims = "idemstore.claims"
	// MetricWaits counts calls that waited for another caller, by tool and
	// wait kind.
	MetricWaits = "idemstore.waits"
	// MetricTakeovers counts claims granted over an expired lease, by tool.
	MetricTakeovers = "idemstore.takeovers"
	// MetricFingerprintMismatches counts calls refused because their key
	// holds a call with other arguments, by tool.
	MetricFingerprintMismatches = "idemstore.fingerprint_mismatches"
	// MetricLeasesLost counts calls whose lease was lost while they ran, by
	// tool.
	MetricLeasesLost = "idemstore.leases_lost"
	// MetricCleanupRemoved counts records removed by cleanup of expired
	// scopes, by db.namespace when known.
	MetricCleanupRemoved = "idemstore.cleanup.removed"
	// MetricStoreDuration is the database client conventions' operation
	// duration, by db.system.name, db.operation.name, db.namespace and
	// error.type.
	MetricStoreDuration = "db.client.operation.duration"
)

// OtherTool replaces tool names beyond Config.MaxToolNames in metrics, as
// the semantic conventions do for unknown HTTP methods.
const OtherTool = "_OTHER"

// SystemPostgreSQL is db.system.name of store/pgstore.
var SystemPostgreSQL = semconv.DBSystemNamePostgreSQL.Value.AsString()

// Bucket boundaries, in seconds. Store operations use the database client
// conventions' advice; a call spans a replay (microseconds) to a slow tool
// (minutes).
var (
	storeBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
	callBuckets  = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300}
	toolBuckets  = []float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)
