// Package idemotel is idemstore's OpenTelemetry instrumentation: a span per
// tool call and per store operation, and metrics of calls, claims, waits,
// takeovers and store latency. It depends on the OpenTelemetry API only;
// the application chooses the SDK and exporters. It is a package of its
// own so that users who do not want OpenTelemetry do not link it: the core
// packages know only the executor.Observer hook it implements.
//
// Wire it once per process:
//
//	tel, err := idemotel.New(nil) // the global providers
//	st, err := tel.WrapStore(pg, nil)
//	ex, err := executor.New(tools, st, &executor.Config{Observer: tel})
//
// and, for the agent runtime, runtime.Config{Store: st, Executor:
// &executor.Config{Observer: tel}}. A call the runtime's probe replays gets
// its span too, marked idemstore.replayed.
//
// Spans follow the GenAI semantic conventions for tool execution
// ("execute_tool NAME", gen_ai.operation.name, gen_ai.tool.name,
// gen_ai.tool.call.id) and the database client conventions for store
// operations (db.system.name, db.operation.name, db.namespace).
//
// Metrics never carry a scope, key or invocation id as an attribute: each
// run has its own scope, so such attributes would make one time series per
// run and overwhelm any metrics backend. Spans carry them instead. Tool
// names are bounded too (Config.MaxToolNames). docs/observability.md lists
// every name.
package idemotel
