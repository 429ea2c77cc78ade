package config

import (
	"strings"
	"testing"
)

// A key that names an environment variable holding a secret refuses anything but a variable's
// name, without repeating the value: a secret written there by mistake would otherwise be recorded
// in summary.json's settings and `config show`, and the run would go on without the secret (the
// variable of that "name" is unset) and fail at the server.
func TestSecretEnvKeysWantAVariableName(t *testing.T) {
	const secret = "sk-proj-Zq9x:secret/value"
	for _, tc := range []struct{ key, want string }{
		{"endpoint.api_key_env", "endpoint.api_key_env"},
		{"engine.token_env", "engine.token_env"},
		{"opennebula.auth_env", "opennebula.auth_env"},
	} {
		sets := []string{"backend=endpoint", "endpoint.url=http://127.0.0.1:8000", tc.key + "=" + secret}
		_, err := Load(Options{Sets: sets})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "name of an environment variable") {
			t.Errorf("%s=<a secret>: %v, want an error naming %s", tc.key, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "Zq9x") {
			t.Errorf("%s: the error repeats the value: %v", tc.key, err)
		}
	}
	for _, ok := range []string{"endpoint.api_key_env=MY_KEY", "engine.token_env=", "endpoint.api_key_env="} {
		if _, err := Load(Options{Sets: []string{"backend=endpoint", "endpoint.url=http://127.0.0.1:8000", ok}}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A negative warm-up duration is refused naming load.warmup: before, the config took "-5s" (a
// valid Go duration with an s in it) and the load generator refused it only once each GPU's engine
// was up.
func TestNegativeWarmupRefused(t *testing.T) {
	for _, w := range []string{"-5s", "-1m"} {
		_, err := Load(Options{Sets: []string{"load.warmup=" + w}})
		if err == nil || !strings.Contains(err.Error(), "load.warmup") {
			t.Errorf("warmup %s: %v, want an error naming load.warmup", w, err)
		}
	}
	for _, w := range []string{"0", "1", "5s", "0s", "250ms"} {
		if _, err := Load(Options{Sets: []string{"load.warmup=" + w}}); err != nil {
			t.Errorf("warmup %s: %v", w, err)
		}
	}
}

// A config file holds one YAML document: a second one (after ---) is refused naming the file and
// its line, instead of being silently ignored (its keys never applied).
func TestSecondYAMLDocumentRefused(t *testing.T) {
	f := write(t, "two.yaml", "load:\n  rates: 5\n---\nload:\n  rates: 7\n")
	_, err := Load(Options{Files: []string{f}})
	if err == nil || !strings.Contains(err.Error(), "two.yaml:3") || !strings.Contains(err.Error(), "one YAML document") {
		t.Fatalf("a second document: %v", err)
	}
	// A lone leading --- (one document) stays fine, and so does a trailing one with nothing after it.
	for _, body := range []string{"---\nload:\n  rates: 5\n", "load:\n  rates: 5\n---\n", "load:\n  rates: 5\n...\n"} {
		if p, err := Load(Options{Files: []string{write(t, "one.yaml", body)}}); err != nil || p.Config.Load.Rates != 5 {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// An aicr recipe's throughput floor or TTFT ceiling of infinity is refused, as any number in a
// config file past ±1e300 is: ">= inf" would fail every GPU's throughput gate, "<= inf" pass any.
func TestRecipeInfiniteConstraintRefused(t *testing.T) {
	for _, c := range []string{`{name: inference-throughput, value: ">= inf"}`, `{name: inference-ttft-p99, value: "<= +Inf"}`, `{name: inference-throughput, value: ">= 1e400"}`} {
		f := write(t, "recipe.yaml", "kind: RecipeMetadata\nspec:\n  validation:\n    performance:\n      constraints:\n        - "+c+"\n")
		if _, err := Load(Options{Files: []string{f}}); err == nil || !strings.Contains(err.Error(), "constraints[0]") {
			t.Errorf("%s: %v, want an error naming the constraint", c, err)
		}
	}
}

// A sqlite history.url with a host part (sqlite://data/history.db: "data" is read as a host) is
// refused, naming the absolute form: before, it opened /history.db at the file system's root, and
// sqlite://./h.db opened /h.db.
func TestSQLiteHistoryURLWithAHostRefused(t *testing.T) {
	for _, u := range []string{"sqlite://data/history.db", "sqlite://./h.db", "sqlite://localhost/var/h.db"} {
		_, err := Load(Options{Sets: []string{"history.url=" + u}})
		if err == nil || !strings.Contains(err.Error(), "history.url") || !strings.Contains(err.Error(), "sqlite:///") {
			t.Errorf("%s: %v, want an error naming history.url and the form sqlite:///path", u, err)
		}
	}
	for _, u := range []string{"sqlite:///var/lib/gpuvet/history.db", ""} {
		if _, err := Load(Options{Sets: []string{"history.url=" + u}}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// sim.bench_time below zero is refused naming the key, as sim.step_overhead is: before, it was
// accepted and read as no time at all.
func TestNegativeSimBenchTimeRefused(t *testing.T) {
	if _, err := Load(Options{Sets: []string{"backend=sim", "sim.bench_time=-2s"}}); err == nil || !strings.Contains(err.Error(), "sim.bench_time") {
		t.Fatalf("sim.bench_time=-2s: %v", err)
	}
	if _, err := Load(Options{Sets: []string{"backend=sim", "sim.bench_time=2s"}}); err != nil {
		t.Fatal(err)
	}
}

// A sqlite history.url with a query or a fragment is refused: gpuvet sets the database's options
// itself, and "?" or "#" in the URL cut the file name ("sqlite:///var/h?1.db" opened /var/h).
func TestSQLiteHistoryURLWithAQueryRefused(t *testing.T) {
	for _, u := range []string{"sqlite:///var/h.db?mode=ro", "sqlite:///var/h?1.db", "sqlite:///var/h#1.db"} {
		_, err := Load(Options{Sets: []string{"history.url=" + u}})
		if err == nil || !strings.Contains(err.Error(), "history.url") {
			t.Errorf("%s: %v, want an error naming history.url", u, err)
		}
	}
}

// A model listed twice is refused naming it: before, it was served and measured twice on every
// GPU, the summary held two entries of one model id, and the history two sets of its figures.
func TestDuplicateModelRefused(t *testing.T) {
	_, err := Load(Options{Sets: []string{"models=Qwen/Qwen3-8B,Qwen/Qwen3-0.6B,Qwen/Qwen3-8B"}})
	if err == nil || !strings.Contains(err.Error(), "models") || !strings.Contains(err.Error(), "Qwen/Qwen3-8B") {
		t.Fatalf("a model twice: %v", err)
	}
	_, err = Load(Options{Sets: []string{"accelerators.H200.models=a,a"}})
	if err == nil || !strings.Contains(err.Error(), "accelerators") {
		t.Fatalf("a model twice in an accelerators entry: %v", err)
	}
}
