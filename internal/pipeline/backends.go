package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Local runs engines as child processes on this host, one per slot (CUDA_VISIBLE_DEVICES),
// bound to the GPU's NUMA node when known, logs under out/logs.
type Local struct{}

func (Local) Name() string { return "local" }

// Serve starts the engine and waits for a real completion (bounded by engine.ready_timeout).
func (Local) Serve(ctx context.Context, slot Slot, model string, cfg config.Config, outDir string) (*Served, error) {
	logRel := filepath.Join("logs", slug(model), gpuTag(slot.GPUs)+".log")
	e, err := engine.Start(engine.Spec{
		Kind: cfg.Engine.Kind, Command: cfg.Engine.Command, ExtraArgs: cfg.Engine.ExtraArgs,
		Vars: engine.Vars{Model: model, Port: cfg.Engine.PortBase + 10*slot.Index, GPUs: slot.GPUs, TP: max(1, cfg.Engine.TP),
			MaxModelLen: cfg.Engine.MaxModelLen, GPUMemoryUtilization: cfg.Engine.GPUMemoryUtilization},
		NUMANode: slot.NUMANode, NUMABind: cfg.Engine.NUMABind, Env: cfg.Engine.Env,
		LogPath: filepath.Join(outDir, logRel), TokenEnv: cfg.Engine.TokenEnv,
	})
	if err != nil {
		return &Served{LogFile: logRel, LogTail: func() string { return engine.Tail(filepath.Join(outDir, logRel), 40, nil) }}, err
	}
	sv := &Served{
		URL: e.URL, Binding: "engine: " + e.Binding, LogFile: logRel,
		Engine:  results.EngineInfo{Kind: cfg.Engine.Kind, Command: e.Command, TP: max(1, cfg.Engine.TP)},
		Stop:    func() { e.Stop(10 * time.Second) },
		LogTail: func() string { return e.LogTail(40) },
		Exited:  e.ExitStatus,
		PID:     e.PID(),
	}
	prov, err := e.WaitReady(ctx, model, cfg.Engine.ReadyTimeout.D())
	if err != nil {
		return sv, err
	}
	sv.Provision = prov
	return sv, nil
}

// EngineVersion runs the kind's version command (or engine.version_command).
func (Local) EngineVersion(ctx context.Context, cfg config.Config) (string, error) {
	return engine.Version(ctx, cfg.Engine.Kind, cfg.Engine.VersionCommand)
}

// Endpoint vets an already-running OpenAI-compatible server: no launch, nothing to stop.
type Endpoint struct{}

func (Endpoint) Name() string { return "endpoint" }

// Group makes the endpoint the one slot, whatever GPUs the health phase discovered: gpuvet did not
// launch it, so it spans no GPU of its own.
func (Endpoint) Group([]results.GPUInfo, int) ([]Slot, string) {
	return []Slot{{Index: 0, NUMANode: -1}}, ""
}

// Serve checks the endpoint answers a real completion for model (bounded by engine.ready_timeout,
// at most 2 minutes: the server is supposed to be up already).
func (Endpoint) Serve(ctx context.Context, _ Slot, model string, cfg config.Config, _ string) (*Served, error) {
	url := cfg.Endpoint.URL // paths join under it keeping its query (results.JoinURL)
	sv := &Served{URL: url, APIKeyEnv: cfg.Endpoint.APIKeyEnv, Binding: "none: endpoint backend (gpuvet did not launch it)",
		Engine: results.EngineInfo{Kind: "endpoint"}, SharesHost: cfg.Endpoint.SameHost}
	start := time.Now()
	timeout := min(cfg.Engine.ReadyTimeout.D(), 2*time.Minute)
	if err := probeReady(ctx, timeout, time.Second, url, model, os.Getenv(cfg.Endpoint.APIKeyEnv)); err != nil {
		return sv, fmt.Errorf("endpoint %s does not complete for model %q within %s: %w", results.RedactURLs(url), model, timeout, err)
	}
	sv.Provision = time.Since(start)
	return sv, nil
}

// probeReady probes model at url every tick until a real completion comes back, at most timeout:
// the last probe's error then.
func probeReady(ctx context.Context, timeout, tick time.Duration, url, model, apiKey string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := engine.Probe(ctx, url, model, apiKey)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(tick):
		}
	}
}

// EngineVersion asks the server's /version (vLLM answers {"version": "..."}).
func (Endpoint) EngineVersion(ctx context.Context, cfg config.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, results.JoinURL(cfg.Endpoint.URL, "/version"), nil)
	if err != nil {
		return "", err
	}
	if k := os.Getenv(cfg.Endpoint.APIKeyEnv); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<12))
	var v struct {
		Version string `json:"version"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil || v.Version == "" {
		return "", fmt.Errorf("GET %s: HTTP %d, no version", results.RedactURLs(results.JoinURL(cfg.Endpoint.URL, "/version")), resp.StatusCode)
	}
	return v.Version, nil
}
