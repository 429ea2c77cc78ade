package main

import (
	"os"

	"github.com/gpuvet/gpuvet/internal/config"
)

// useEndpointURLKey hands the password an endpoint URL carried (removed from the URL by the
// config) to the clients through the environment, where secrets live and are redacted from: as
// the key variable endpoint.api_key_env names (default OPENAI_API_KEY, as the load generator
// reads), and only when that variable is empty: a key already there is preferred.
func useEndpointURLKey(p *config.Plan) {
	if p.EndpointURLKey == "" {
		return
	}
	name := p.Config.Endpoint.APIKeyEnv
	if name == "" {
		name = "OPENAI_API_KEY"
		p.Config.Endpoint.APIKeyEnv = name
	}
	if os.Getenv(name) == "" {
		os.Setenv(name, p.EndpointURLKey)
	}
}
