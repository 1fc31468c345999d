// Package openaimodel is a runtime.Model for OpenAI's chat-completions API
// and the servers that speak it (vLLM, llama.cpp's server, Ollama, LiteLLM
// …), on the official SDK github.com/openai/openai-go/v3.
//
// The runtime's conversation goes out as chat messages (system, user,
// assistant with tool_calls, tool with tool_call_id) and the registry's tool
// specs as function tools. The model may ask for several tool calls in one
// turn; each keeps the provider's call id in executor.Call.ProviderCallID, which pairs
// the call with its result and is never the idempotency key. InvocationID
// stays empty, so the key is the tool and its canonical arguments: a retried
// turn gets new call ids from the provider and still replays.
//
// Failures come back as *Error, classified: a timeout, a connection error,
// 408, 409, 429 or 5xx (after the SDK's retries, which honour Retry-After)
// and a malformed body are transient and unwrap to runtime.ErrTransient, so
// runtime.Config.Fallbacks moves the turn to the next model; anything else
// (400, 401, 403, 404 …) is permanent and stops the run.
//
// Package openaitest holds an OpenAI-compatible server for tests.
package openaimodel
