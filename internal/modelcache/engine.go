package modelcache

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuvet/gpuvet/internal/config"
)

// CacheEnv is the `gpuvet run` hook (pipeline.Deps.CacheEnv). With model_cache.dir set it makes
// sure model is in the cache before any engine starts (no network when it is there; a pull when it
// is not; on an air-gapped host an error naming the exact `gpuvet cache pull` command), and returns
// the environment engines need to read it. model_cache.offline (the default) starts engines with
// HF_HUB_OFFLINE=1, so no engine ever downloads or needs a token; false lets them reach the hub.
// An empty dir (model_cache: off) or a model given as a local path leaves engines as they are.
func CacheEnv(ctx context.Context, model string, mc config.ModelCache) (map[string]string, error) {
	env := map[string]string{}
	if mc.Dir == "" || isLocalPath(model) {
		return env, nil
	}
	if _, err := Ensure(ctx, model, Options{CacheDir: mc.Dir, Progress: os.Stderr}); err != nil {
		return nil, err
	}
	for _, kv := range EngineEnv(mc.Dir) {
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
