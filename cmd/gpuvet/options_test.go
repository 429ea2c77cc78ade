package main

import (
	"bytes"
	"strings"
	"testing"
)

// Issue 29: the CLI has no package-level command tree: each execution builds its own, so a flag one
// command line set does not leak into the next (with one shared root, a --set stayed in the next
// run's plan unless every test reset the flags by hand).
func TestFlagsDoNotLeakBetweenExecutions(t *testing.T) {
	var first, second bytes.Buffer
	if code := executeTo([]string{"config", "show", "--set", "load.max_duration=7s", "--model", "org/leaked"}, &first, nil); code != 0 {
		t.Fatalf("config show --set: exit %d\n%s", code, first.String())
	}
	if !strings.Contains(first.String(), "load.max_duration = 7s") || !strings.Contains(first.String(), "org/leaked") {
		t.Fatalf("the first command did not take its flags:\n%s", first.String())
	}
	if code := executeTo([]string{"config", "show"}, &second, nil); code != 0 {
		t.Fatalf("config show: exit %d\n%s", code, second.String())
	}
	for _, leaked := range []string{"load.max_duration = 7s", "org/leaked", "flag:"} {
		if strings.Contains(second.String(), leaked) {
			t.Errorf("the second command line has %q from the first:\n%s", leaked, second.String())
		}
	}
}

// The cache commands and config show refuse bad input in Validate, before anything runs (exit 2).
func TestCacheAndConfigOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    interface{ Validate() error }
		want string
	}{
		{&cachePullOptions{model: "Qwen/Qwen3-8B"}, "--workers 0"},
		{&cacheVerifyOptions{model: "../etc"}, ""},
		{&cacheOwnOptions{dir: "/x", uid: -1, gid: 0}, "--uid and --gid"},
	} {
		err := tc.o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%T: %v, want an error naming %q", tc.o, err, tc.want)
			continue
		}
		if ee, ok := err.(*exitError); !ok || ee.code != exitBadUsage {
			t.Errorf("%T: %v is not bad usage (exit 2)", tc.o, err)
		}
	}
	for _, args := range [][]string{{"cache", "pull", "--workers", "0", "Qwen/Qwen3-8B"}, {"cache", "own", "/tmp"},
		{"config", "show", "--set", "load.max_duration=soon"}} {
		var out, errb bytes.Buffer
		if code := executeTo(args, &out, &errb); code != exitBadUsage {
			t.Errorf("gpuvet %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
}
