package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The README's command table lists every command the CLI has, once, and no other.
func TestReadmeCommandTableMatchesTheCLI(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Commands\n")
	if !ok {
		t.Fatal("README.md has no ## Commands section")
	}
	table, _, _ = strings.Cut(strings.TrimLeft(table, "\n"), "\n\n") // the table: up to its first blank line
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `gpuvet ([a-z-]+)[^`]*` \\|").FindAllStringSubmatch(table, -1) {
		if slices.Contains(listed, m[1]) {
			t.Errorf("gpuvet %s is listed twice", m[1])
		}
		listed = append(listed, m[1])
	}
	var have []string
	for _, c := range newRoot().Commands() {
		if !c.Hidden && c.Name() != "help" && c.Name() != "completion" {
			have = append(have, c.Name())
		}
	}
	slices.Sort(listed)
	listed = slices.Compact(listed)
	slices.Sort(have)
	if !slices.Equal(listed, have) {
		t.Errorf("README lists %v, the CLI has %v", listed, have)
	}
}

// Issue 51: the README's first run says the status the terminal prints for it. On simulated GPUs
// DCGM is always skipped, so a healthy first run is "ok, partial" (the README said "ok").
func TestReadmeFirstRunStatusIsTheTerminals(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("the run ends `([^`]+)`").FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("README.md no longer says how the first run ends")
	}
	sum := &results.Summary{Status: results.StatusOK, Hosts: []results.Host{{Name: "sim",
		Health: &results.Health{DCGM: &results.DCGM{Status: results.StatusSkipped, Note: "simulated GPUs"}}}}}
	line := pipeline.Describe(&pipeline.Result{Summary: sum})
	if !strings.HasPrefix(line, "status "+m[1]+" ") {
		t.Errorf("README says the first run ends %q; the terminal says %q", m[1], line)
	}
}
