// Package dcgm runs NVIDIA DCGM's diagnostic (`dcgmi diag -r LEVEL -j`) and reads its JSON, in both the
// DCGM 3.x layout (top-level "DCGM GPU Diagnostic", results keyed by "gpu_ids") and the 4.x layout
// (top-level "DCGM Diagnostic", results keyed by entity_group/entity_id).
package dcgm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/results"
)

// NotInstalled is the note of a skipped diagnostic: never a silent pass.
const NotInstalled = "skipped: dcgmi not installed"

// Options says how to run the diagnostic.
type Options struct {
	Level   int           // 1 (quick) .. 4 (extended); the seed's default is 2
	Timeout time.Duration // the whole dcgmi run; level 3 needs 15 min and more
	Binary  string        // "dcgmi" unless set (tests point it at a fake)
}

// Run runs the diagnostic and returns its result; it never returns nil. No dcgmi: skipped with
// NotInstalled. dcgmi broke (timeout, no JSON): failed with the error. A test that failed: flag.
func Run(ctx context.Context, o Options) *results.DCGM {
	out := &results.DCGM{Level: o.Level}
	fail := func(format string, args ...any) *results.DCGM {
		out.Status, out.Error = results.StatusFailed, fmt.Sprintf(format, args...)
		return out
	}
	if o.Level < 1 || o.Level > 4 {
		return fail("dcgm level %d: want 1, 2, 3 or 4", o.Level)
	}
	path, err := exec.LookPath(cmp.Or(o.Binary, "dcgmi"))
	if err != nil {
		out.Status, out.Note = results.StatusSkipped, NotInstalled
		return out
	}
	parent := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, path, "diag", "-r", strconv.Itoa(o.Level), "-j")
	stdout, stderr := &filelimit.Buffer{Limit: filelimit.DCGM}, &filelimit.Buffer{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 2 * time.Second // a child of dcgmi holding the pipes must not hold gpuvet
	runErr := cmd.Run()
	if parent.Err() != nil { // stopped from outside: not the diagnostic's own timeout
		return fail("dcgmi diag -r %d interrupted before it finished: %v", o.Level, context.Cause(parent))
	}
	if ctx.Err() != nil {
		return fail("dcgmi diag -r %d did not finish within %s: raise the DCGM timeout (level 3 takes 15 min or more)", o.Level, o.Timeout)
	}
	if stdout.Over {
		return fail("dcgmi diag -r %d printed more than %s: not a diagnostic report; run it by hand to see what it prints",
			o.Level, filelimit.Size(filelimit.DCGM))
	}
	// dcgmi exits non-zero when a test fails and still prints the JSON: parse first, judge the exit after.
	tests, version, perr := Parse(stdout.Bytes())
	if perr != nil {
		msg := strings.TrimSpace(string(stderr.Bytes()))
		if runErr != nil {
			msg = strings.TrimSpace(runErr.Error() + " " + msg)
		}
		return fail("dcgmi diag -r %d: %v; dcgmi said: %s (is nv-hostengine running? try `dcgmi discovery -l`)", o.Level, perr, clip(msg, 300))
	}
	out.Tests, out.Version = tests, version
	out.Status = Judge(tests)
	if !slices.ContainsFunc(tests, func(t results.DCGMTest) bool { return t.Result != "skip" }) {
		// Nothing ran (a GPU the diagnostic does not support, tests that could not start): not a pass.
		out.Status = results.StatusSkipped
		out.Note = fmt.Sprintf("skipped: dcgmi diag -r %d ran no test (all %d skipped); run it by hand to see why", o.Level, len(tests))
	}
	return out
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	if s == "" {
		return "nothing"
	}
	return s
}

// Judge: any failed test flags; otherwise ok. Warn and skip results are kept in the list, never hidden.
func Judge(tests []results.DCGMTest) results.Status {
	if slices.ContainsFunc(tests, func(t results.DCGMTest) bool { return t.Result == "fail" }) {
		return results.StatusFlag
	}
	return results.StatusOK
}

// document is both layouts at once: exactly one top-level key is set.
type document struct {
	V3       *diagnostic `json:"DCGM GPU Diagnostic"`
	V4       *diagnostic `json:"DCGM Diagnostic"`
	Metadata struct {
		Version string `json:"version"`
	} `json:"metadata"`
	RuntimeError string `json:"runtime_error"`
}

type diagnostic struct {
	Categories   []*category `json:"test_categories"`
	Version      string      `json:"version"`
	RuntimeError string      `json:"runtime_error"`
}

type category struct {
	Category string  `json:"category"`
	Tests    []*test `json:"tests"` // DCGM 3.x can leave nulls between tests
}

type test struct {
	Name    string    `json:"name"`
	Results []*result `json:"results"`
	Summary *struct {
		Status string `json:"status"`
	} `json:"test_summary"`
}

type result struct {
	GPUIDs      json.RawMessage `json:"gpu_ids"` // 3.x: "0,1,2" (a string) or a number
	GPUID       json.RawMessage `json:"gpu_id"`
	EntityGroup string          `json:"entity_group"` // 4.x: "GPU", "CPU", ...
	EntityID    *int            `json:"entity_id"`
	Status      string          `json:"status"`
	Info        json.RawMessage `json:"info"`     // a string or a list of strings
	Warnings    json.RawMessage `json:"warnings"` // strings or {"warning": "..."} objects
}

// Parse reads `dcgmi diag -j` output. Text before the first '{' (dcgmi prints warnings there) is
// ignored. It returns one DCGMTest per test and GPU, results in lower case ("pass", "fail", "warn",
// "skip"), sorted by test order then GPU.
func Parse(data []byte) ([]results.DCGMTest, string, error) {
	start := bytes.IndexByte(data, '{')
	if start < 0 {
		return nil, "", errors.New("no JSON object in the output (want `dcgmi diag -j` output)")
	}
	var doc document
	dec := json.NewDecoder(bytes.NewReader(data[start:]))
	if err := dec.Decode(&doc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, "", fmt.Errorf("malformed JSON at byte %d: %w", int64(start)+se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, "", errors.New("malformed JSON: the output ends mid-document (dcgmi cut off?)")
		}
		return nil, "", fmt.Errorf("unexpected JSON shape: %w", err)
	}
	diag := doc.V4
	if diag == nil {
		diag = doc.V3
	}
	if diag == nil {
		return nil, "", errors.New(`neither "DCGM Diagnostic" (DCGM 4.x) nor "DCGM GPU Diagnostic" (DCGM 3.x) at the top level`)
	}
	if e := firstNonEmpty(doc.RuntimeError, diag.RuntimeError); e != "" {
		return nil, "", fmt.Errorf("DCGM runtime error: %s", e)
	}
	var tests []results.DCGMTest
	for _, c := range diag.Categories {
		if c == nil {
			continue
		}
		for _, t := range c.Tests {
			if t == nil {
				continue
			}
			got, err := t.flatten()
			if err != nil {
				return nil, "", err
			}
			tests = append(tests, got...)
		}
	}
	if len(tests) == 0 {
		return nil, "", errors.New("the diagnostic lists no test results")
	}
	return tests, firstNonEmpty(doc.Metadata.Version, diag.Version), nil
}

func (t *test) flatten() ([]results.DCGMTest, error) {
	name := strings.TrimSpace(t.Name)
	if name == "" {
		return nil, errors.New("a test without a name")
	}
	var out []results.DCGMTest
	for _, r := range t.Results {
		if r == nil {
			continue
		}
		res, err := normalise(r.Status)
		if err != nil {
			return nil, fmt.Errorf("test %q: %w", name, err)
		}
		info := strings.Join(append(texts(r.Warnings), texts(r.Info)...), "; ")
		gpus, err := r.gpus()
		if err != nil {
			return nil, fmt.Errorf("test %q: %w", name, err)
		}
		if gpus == nil { // a result for the whole system, or a non-GPU entity
			out = append(out, results.DCGMTest{Name: name, Result: res, Info: entityNote(r, info)})
			continue
		}
		for _, g := range gpus {
			out = append(out, results.DCGMTest{Name: name, GPU: &g, Result: res, Info: info})
		}
	}
	if len(out) == 0 && t.Summary != nil {
		res, err := normalise(t.Summary.Status)
		if err != nil {
			return nil, fmt.Errorf("test %q summary: %w", name, err)
		}
		out = append(out, results.DCGMTest{Name: name, Result: res})
	}
	sort.SliceStable(out, func(i, j int) bool { return gpuKey(out[i].GPU) < gpuKey(out[j].GPU) })
	return out, nil
}

func gpuKey(g *int) int {
	if g == nil {
		return -1
	}
	return *g
}

func entityNote(r *result, info string) string {
	if r.EntityGroup == "" || strings.EqualFold(r.EntityGroup, "GPU") || r.EntityID == nil {
		return info
	}
	return strings.TrimSpace(fmt.Sprintf("%s %d %s", r.EntityGroup, *r.EntityID, info))
}

// gpus lists the GPU ids a result is for; nil when it names none.
func (r *result) gpus() ([]int, error) {
	if r.EntityID != nil {
		if r.EntityGroup != "" && !strings.EqualFold(r.EntityGroup, "GPU") {
			return nil, nil
		}
		return []int{*r.EntityID}, nil
	}
	for _, raw := range []json.RawMessage{r.GPUIDs, r.GPUID} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var n int
		if json.Unmarshal(raw, &n) == nil {
			return []int{n}, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("gpu_ids %s: want a string like \"0,1\" or a number", raw)
		}
		var ids []int
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			id, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("gpu_ids %q: %q is not a GPU id", s, f)
			}
			ids = append(ids, id)
		}
		return ids, nil
	}
	return nil, nil
}

// statusWords maps DCGM's statuses, lower-cased, to gpuvet's words.
var statusWords = map[string]string{"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip",
	"skipped": "skip", "not run": "skip", "notrun": "skip", "not_run": "skip"}

// normalise maps DCGM's statuses ("PASS", "Pass", "Fail", "Skip", "Warn", "Not Run") to lower-case words.
func normalise(s string) (string, error) {
	if r, ok := statusWords[strings.ToLower(strings.TrimSpace(s))]; ok {
		return r, nil
	}
	return "", fmt.Errorf("status %q: want Pass, Fail, Warn or Skip", s)
}

// texts reads a string, a list of strings, or a list of {"warning": "..."} objects.
func texts(raw json.RawMessage) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nonEmpty([]string{s})
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []string
	for _, item := range list {
		if json.Unmarshal(item, &s) == nil {
			out = append(out, s)
			continue
		}
		var w struct {
			Warning string `json:"warning"`
			Info    string `json:"info"`
		}
		if json.Unmarshal(item, &w) == nil {
			out = append(out, firstNonEmpty(w.Warning, w.Info))
		}
	}
	return nonEmpty(out)
}

func nonEmpty(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
