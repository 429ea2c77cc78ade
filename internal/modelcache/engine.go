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
// none. auto is the hub's default folder (DefaultCacheDir) for the engines that load hub weights
// (enginekind's HubWeights: vllm, sglang, trtllm, transformers) and none for generic, whose command may not load any; off (or empty) is
// none. note says why auto means none, for the summary ("" otherwise).
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

// CacheEnv is the `gpuvet run` hook (pipeline.Deps.CacheEnv). With a managed cache (Dir(mc,
// engineKind) not "") it makes sure model is in the cache before any engine starts (no network when
// it is there; a pull when it is not; on an air-gapped host an error naming the exact `gpuvet cache
// pull` command), and returns the environment engines need to read it. model_cache.offline (the
// default) starts engines with HF_HUB_OFFLINE=1, so no engine ever downloads or needs a token; false
// lets them reach the hub. No managed cache, or a model given as a local path, leaves engines as
// they are.
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

// Preflight says in seconds, downloading nothing, whether a run can have model for an engine of
// engineKind: a local folder holds its config.json; a hub id is in the managed cache, or the hub
// answers (one request, bounded by timeout) so that CacheEnv can pull it. With no managed cache
// (generic, or model_cache off) the engine finds its weights itself: nothing to check. The error
// names what to do.
func Preflight(ctx context.Context, model, engineKind string, mc config.ModelCache, timeout time.Duration) error {
	if isLocalPath(model) {
		if _, err := os.Stat(filepath.Join(model, "config.json")); err != nil {
			return fmt.Errorf("model %s: the folder has no config.json (%v): give a folder with the model's config.json and weights, or a hub id", model, err)
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
		return fmt.Errorf("model %s: %v", model, err)
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
		return fmt.Errorf("model %s is not in the model cache %s and the hub %s cannot be reached (%v): on a host that can reach it run `%s`, then copy %s here; or set model_cache.dir to a cache that holds it, or give a local model folder",
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
