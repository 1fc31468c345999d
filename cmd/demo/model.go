package main

import (
	"errors"
	"os"

	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
)

// newModel returns the model opts ask for: the scenario's scripted model,
// or an OpenAI-compatible endpoint. The second result, when not empty,
// describes the model for the demo's header.
func newModel(sc scenario, opts options) (agent.Model, string, error) {
	if opts.model != modelOpenAI {
		return sc.model(), "", nil
	}
	onOpenAI := opts.baseURL == "" || opts.baseURL == openaimodel.DefaultBaseURL
	if onOpenAI && os.Getenv(openaimodel.APIKeyEnv) == "" {
		return nil, "", errors.New("-model openai on " + openaimodel.DefaultBaseURL + " needs " + openaimodel.APIKeyEnv +
			"; for a local server pass -base-url (see docs/openai.md)")
	}
	m, err := openaimodel.New(&openaimodel.Config{BaseURL: opts.baseURL, Model: opts.modelName})
	if err != nil {
		return nil, "", err
	}
	return m, "model " + m.Name() + " (OpenAI-compatible endpoint)", nil
}
