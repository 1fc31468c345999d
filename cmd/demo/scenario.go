package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
)

// scenario is one story the demo can play. Every story welcomes customer
// c-42: look the customer up (read-only), send a welcome mail (a side
// effect), answer. The quality gate wants the answer to name the customer.
type scenario struct {
	about string
	// namesCustomerAt is the first gate attempt whose answer names the customer
	// (and so passes the gate).
	namesCustomerAt int
	// invocationIDs gives the calls stable invocation ids.
	invocationIDs bool
	// newSubjectOnRetry makes the retry ask for the mail with another
	// subject (under the same invocation id when invocationIDs is set).
	newSubjectOnRetry bool
	// transientSendFailures is how many first sends fail with a transient
	// error (never stored, so the retry sends again).
	transientSendFailures int32
}

// scenarios are the stories behind -scenario.
var scenarios = map[string]scenario{
	"retry": {
		about:           "the gate rejects the first answer; the retry's calls are replayed",
		namesCustomerAt: 2,
	},
	"clean": {
		about:           "the gate accepts the first answer; every call runs once",
		namesCustomerAt: 1,
	},
	"mismatch": {
		about:             "the retry reuses the mail's invocation id with another subject: refused with a typed error",
		namesCustomerAt:   2,
		invocationIDs:     true,
		newSubjectOnRetry: true,
	},
	"failure": {
		about:                 "the first send fails transiently; failures are not stored, so the retry sends again",
		namesCustomerAt:       2,
		transientSendFailures: 1,
	},
}

func scenarioList() string {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

const (
	toolLookup = "lookup_customer"
	toolSend   = "send_mail"
	customerID = "c-42"
	customer   = "Ada Lovelace"
	mailTo     = "ada@example.com"
)

// tools are the demo's tools with counters of their real runs.
type tools struct {
	lookups      atomic.Int32
	sends        atomic.Int32
	failuresToGo atomic.Int32 // transient send failures still to come
	registry     *agent.Registry
}

func newTools(sc scenario) (*tools, error) {
	t := &tools{registry: agent.NewRegistry()}
	t.failuresToGo.Store(sc.transientSendFailures)
	err := errors.Join(
		t.registry.Register(agent.ToolSpec{
			Name:        toolLookup,
			Description: "Reads a customer record. Read-only.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"]}`),
		}, executor.ExecutorFunc(t.lookup)),
		t.registry.Register(agent.ToolSpec{
			Name:        toolSend,
			Description: "Sends an e-mail. Side effect: the mail goes out.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"}},"required":["to","subject"]}`),
		}, executor.ExecutorFunc(t.send)),
	)
	return t, err
}

func (t *tools) lookup(_ context.Context, call executor.Call) (executor.Result, error) {
	t.lookups.Add(1)
	var args struct {
		CustomerID string `json:"customer_id"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil || args.CustomerID != customerID {
		return executor.Result{Output: []byte(`{"error":"no such customer"}`), Failed: true, Permanent: true}, nil
	}
	out, err := json.Marshal(map[string]string{"id": customerID, "name": customer, "email": mailTo})
	return executor.Result{Output: out}, err
}

func (t *tools) send(ctx context.Context, _ executor.Call) (executor.Result, error) {
	t.sends.Add(1)
	if t.failuresToGo.Add(-1) >= 0 {
		return executor.Result{}, errors.New("smtp: connection reset (transient)")
	}
	// A real mail API would get the downstream key as its idempotency key;
	// it is the same on every retry of this call in this run.
	key := executor.DownstreamKey(ctx)
	out, err := json.Marshal(map[string]string{"status": "sent", "message_id": "msg-" + key[len(key)-12:]})
	return executor.Result{Output: out}, err
}

// model returns the scripted model of sc: on the input or a gate's feedback
// it asks for both tools; once it has their results it answers, naming the
// customer from gate attempt namesCustomerAt on. It reads the gate attempt
// from the conversation (one user message per gate attempt: the input, then
// each gate's feedback) and keeps no state, so that one model served over
// the wire (-serve-openai) plays any number of demo runs.
func (sc scenario) model() agent.Model {
	return agent.ModelFunc(func(_ context.Context, req agent.Request) (agent.Response, error) {
		gateAttempt := 0
		for _, m := range req.Messages {
			if m.Role == agent.RoleUser {
				gateAttempt++
			}
		}
		if req.Messages[len(req.Messages)-1].Role == agent.RoleUser {
			return agent.Response{ToolCalls: sc.calls(gateAttempt)}, nil
		}
		return agent.Response{Text: sc.answer(gateAttempt, req.Messages)}, nil
	})
}

// calls are the tool calls the model asks for in gateAttempt.
func (sc scenario) calls(gateAttempt int) []executor.Call {
	subject := "Welcome aboard"
	if sc.newSubjectOnRetry && gateAttempt > 1 {
		subject = "Welcome aboard, Ada"
	}
	mail, _ := json.Marshal(map[string]string{"to": mailTo, "subject": subject})
	lookup := executor.Call{ProviderCallID: fmt.Sprintf("call-%d-lookup", gateAttempt), Tool: toolLookup, Args: json.RawMessage(`{"customer_id":"` + customerID + `"}`)}
	send := executor.Call{ProviderCallID: fmt.Sprintf("call-%d-send", gateAttempt), Tool: toolSend, Args: mail}
	if sc.invocationIDs {
		lookup.InvocationID = "lookup-" + customerID
		send.InvocationID = "welcome-mail-" + customerID
	}
	return []executor.Call{lookup, send}
}

// answer writes the final answer of gateAttempt from the tool results the
// model was handed (the full outputs, replayed or not).
func (sc scenario) answer(gateAttempt int, msgs []agent.Message) string {
	var name, lastSendErr string
	sent := false
	for _, m := range msgs {
		switch {
		case m.Role != agent.RoleTool:
		case m.ToolName == toolLookup && !m.IsError:
			var c struct{ Name string }
			if json.Unmarshal([]byte(m.Content), &c) == nil {
				name = c.Name
			}
		case m.ToolName == toolSend && m.IsError:
			lastSendErr = m.Content
		case m.ToolName == toolSend:
			sent, lastSendErr = true, ""
		}
	}
	var text string
	switch {
	case !sent:
		text = "I could not send the welcome mail (" + lastSendErr + ")"
	case name != "" && gateAttempt >= sc.namesCustomerAt:
		text = "I sent the welcome mail to " + name + " <" + mailTo + ">"
	default:
		text = "I sent the welcome mail"
	}
	if sent && lastSendErr != "" {
		text += "; a second mail with another subject was refused"
	}
	return text + "."
}

// gate accepts an answer that names the customer.
func gate() agent.Gate {
	return agent.GateFunc(func(_ context.Context, answer string) (agent.Verdict, error) {
		if strings.Contains(answer, customer) {
			return agent.Verdict{Accepted: true}, nil
		}
		return agent.Verdict{Feedback: "Name the customer you mailed."}, nil
	})
}
