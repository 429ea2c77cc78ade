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
