package main

import (
	"os"

	"github.com/gpuvet/gpuvet/internal/config"
)

// urlKeyEnv carries the password an endpoint URL held when no endpoint.api_key_env was named.
const urlKeyEnv = "GPUVET_URL_API_KEY"

// useEndpointURLKey hands the password an endpoint URL carried (removed from the URL by the
// config) to the engine clients through the environment, where secrets live and are redacted from:
// only when endpoint.api_key_env names no set variable, whose key is preferred.
func useEndpointURLKey(p *config.Plan) {
	if p.EndpointURLKey == "" {
		return
	}
	name := p.Config.Endpoint.APIKeyEnv
	if name == "" {
		name = urlKeyEnv
		p.Config.Endpoint.APIKeyEnv = name
	}
	if os.Getenv(name) == "" {
		os.Setenv(name, p.EndpointURLKey)
	}
}
