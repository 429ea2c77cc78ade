package modelcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/enginekind"
)

// Dir resolves model_cache.dir for an engine kind: the hub cache folder gpuvet manages, or "" for
// none (off, empty, or auto for a kind without enginekind's HubWeights, e.g. generic, whose command
// may not load any: note then says so for the summary). auto is DefaultCacheDir otherwise.
func Dir(mc config.ModelCache, engineKind string) (dir, note string) {
	switch {
	case config.IsOff(mc.Dir):
		return "", ""
	case mc.Dir == "auto" && !enginekind.Get(engineKind).HubWeights:
		return "", "model_cache.dir auto: no managed model cache for engine kind " + engineKind + " (its command may not load hub weights); set model_cache.dir to a hub cache folder to use one"
	case mc.Dir == "auto":
		return DefaultCacheDir(), ""
	}
	return mc.Dir, ""
}

// CacheEnv is the `gpuvet run` hook (pipeline.Deps.CacheEnv). With a managed cache it Ensures model
// is there before any engine starts and returns the environment engines need to read it:
// model_cache.offline (the default) adds HF_HUB_OFFLINE=1, so no engine downloads or needs a token.
// No managed cache, or a model given as a local path, leaves engines as they are.
func CacheEnv(ctx context.Context, model, engineKind string, mc config.ModelCache) (map[string]string, error) {
	env := map[string]string{}
	dir, _ := Dir(mc, engineKind)
	if dir == "" || isLocalPath(model) {
		return env, nil
	}
	if _, err := Ensure(ctx, model, Options{CacheDir: dir, Endpoint: mc.Endpoint, Progress: os.Stderr}); err != nil {
		return nil, err
	}
	for _, kv := range EngineEnv(dir) {
		k, v, _ := strings.Cut(kv, "=")
		if !mc.Offline && (k == "HF_HUB_OFFLINE" || k == "TRANSFORMERS_OFFLINE") {
			continue
		}
		env[k] = v
	}
	return env, nil
}

// Preflight says in seconds, downloading nothing, whether a run can have model: a local folder holds
// its config.json; a hub id is in the managed cache, or the hub answers (one request within timeout)
// so CacheEnv can pull it. No managed cache: the engine finds its weights itself. The error says what
// to do.
func Preflight(ctx context.Context, model, engineKind string, mc config.ModelCache, timeout time.Duration) error {
	if isLocalPath(model) {
		if _, err := os.Stat(filepath.Join(model, "config.json")); err != nil {
			return fmt.Errorf("model %s: the folder has no config.json (%w): give a folder with the model's config.json and weights, or a hub id", model, err)
		}
		return nil
	}
	dir, _ := Dir(mc, engineKind)
	if dir == "" {
		return nil
	}
	o := Options{CacheDir: dir, Endpoint: mc.Endpoint}
	c, err := o.resolve(model)
	if err != nil {
		return fmt.Errorf("model %s: %w", model, err)
	}
	if s, err := local(c, model); err != nil || s != nil {
		return err
	}
	if c.Offline {
		return fmt.Errorf("model %s is not in the model cache %s and the hub is offline (HF_HUB_OFFLINE): on a host that can reach %s run `%s`, then copy %s here; or give a local model folder",
			model, c.CacheDir, c.Endpoint, PullCommand(model, o), c.CacheDir)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := probe(pctx, c.Endpoint); err != nil {
		return fmt.Errorf("model %s is not in the model cache %s and the hub %s cannot be reached (%w): on a host that can reach it run `%s`, then copy %s here; or set model_cache.dir to a cache that holds it, or give a local model folder",
			model, c.CacheDir, c.Endpoint, err, PullCommand(model, o), c.CacheDir)
	}
	return nil
}

// isLocalPath reports whether an engine's model argument names a folder rather than a hub repo.
func isLocalPath(model string) bool {
	if filepath.IsAbs(model) || strings.HasPrefix(model, "./") || strings.HasPrefix(model, "../") {
		return true
	}
	st, err := os.Stat(model)
	return err == nil && st.IsDir()
}
