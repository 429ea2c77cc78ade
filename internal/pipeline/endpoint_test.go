package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
)

// Finding 5 of issue 43: the endpoint backend joins its paths under the base URL keeping its query
// (a gateway's ?api-version=), and its errors never show the URL's key.
func TestEndpointBackendKeepsTheQuery(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("api-version") != "2" {
			http.Error(w, "no api-version", http.StatusNotFound)
			return
		}
		switch r.URL.Path {
		case "/v1/chat/completions":
			fmt.Fprint(w, `{"choices":[{"message":{"content":"OK"}}],"usage":{"completion_tokens":1}}`)
		case "/version":
			fmt.Fprint(w, `{"version":"9.9"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := config.Defaults()
	cfg.Endpoint.URL = srv.URL + "/v1?api-version=2&api_key=CANARY"
	if _, err := (Endpoint{}).Serve(context.Background(), Slot{}, "m", cfg, ""); err != nil {
		t.Fatalf("Serve with a query in the base URL: %v", err)
	}
	if v, err := (Endpoint{}).EngineVersion(context.Background(), cfg); err != nil || v != "9.9" {
		t.Fatalf("EngineVersion: %q %v", v, err)
	}
	cfg.Endpoint.URL = srv.URL + "/v1?api_key=CANARY"
	cfg.Engine.ReadyTimeout = config.Duration(1)
	if _, err := (Endpoint{}).EngineVersion(context.Background(), cfg); err == nil || strings.Contains(err.Error(), "CANARY") {
		t.Errorf("EngineVersion's error: %v", err)
	}
}
