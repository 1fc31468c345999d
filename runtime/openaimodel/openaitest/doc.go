// Package openaitest is an OpenAI-compatible chat-completions server for
// tests and offline demos: it speaks the real wire format (the request the
// SDK sends, the chat.completion body OpenAI returns, OpenAI's error
// bodies), checks requests the way the API does (every tool message answers
// a call of the assistant message before it), records what it received, and
// answers from a script (Script), a function (Handler), or a runtime.Model
// (ModelHandler). Replies can carry any status, Retry-After, a malformed
// body or a delay, which is how 429s, 5xx, broken proxies and timeouts are
// tested.
//
//	srv := openaitest.NewServer(openaitest.Script(
//		openaitest.Calls(openaitest.Call("call_1", "lookup_customer", `{"customer_id":"c-42"}`)),
//		openaitest.Answer("Ada Lovelace is customer c-42."),
//	))
//	defer srv.Close()
//	model, err := openaimodel.New(&openaimodel.Config{BaseURL: srv.URL(), Model: "test", HTTPClient: srv.Client()})
package openaitest
