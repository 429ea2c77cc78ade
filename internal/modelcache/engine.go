package modelcache

import (
	"context"
	"os"
	"path/filepath"
	"strings"

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

// isLocalPath reports whether an engine's model argument names a folder rather than a hub repo.
func isLocalPath(model string) bool {
	if filepath.IsAbs(model) || strings.HasPrefix(model, "./") || strings.HasPrefix(model, "../") {
		return true
	}
	st, err := os.Stat(model)
	return err == nil && st.IsDir()
}
