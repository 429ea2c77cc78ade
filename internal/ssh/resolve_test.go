package ssh

import (
	"context"
	"strings"
	"testing"
)

// Issue 51: a host name that does not resolve was reported as an untrusted host key, then
// "cleaned up", then recorded in the history as a node. It is bad input now, found before anything
// starts, naming every such host; addresses are not looked up.
func TestUnresolvableHostIsBadInput(t *testing.T) {
	hosts := func(names ...string) []Target {
		var out []Target
		for _, n := range names {
			out = append(out, Target{Name: n, Host: n, Port: 22})
		}
		return out
	}
	if err := resolveAll(context.Background(), hosts("127.0.0.1", "::1", "localhost")); err != nil {
		t.Fatalf("addresses and localhost: %v", err)
	}
	err := resolveAll(context.Background(), hosts("127.0.0.1", "gpu-a.invalid", "gpu-b.invalid"))
	if err == nil || !strings.Contains(err.Error(), "gpu-a.invalid does not resolve") || !strings.Contains(err.Error(), "gpu-b.invalid does not resolve") ||
		!strings.Contains(err.Error(), "nothing was started") {
		t.Fatalf("err = %v", err)
	}
	alias := []Target{{Name: "gpu7", Host: "gpu7.example.invalid", Port: 22}}
	if err := resolveAll(context.Background(), alias); err == nil || !strings.Contains(err.Error(), "gpu7 (gpu7.example.invalid) does not resolve") {
		t.Fatalf("an ssh_config alias: %v", err)
	}
}
