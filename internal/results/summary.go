// Package results is the one schema that every phase writes, summary.json holds, and the report reads.
//
// It is the contract between phases: a phase takes the Plan plus earlier results and returns results
// of these types; nothing reaches back. Fields are documented one by one because operators and their
// dashboards read summary.json directly. Add fields freely (with a comment and `omitempty` when they
// can be absent); renaming or removing one is a breaking change that bumps SchemaVersion.
package results

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion is written into every summary.json. Readers refuse a different major version.
const SchemaVersion = "1.0"

// Status is the outcome of anything judged: a GPU, a model, a host, a run.
type Status string

const (
	StatusOK      Status = "ok"      // measured and within every gate
	StatusFlag    Status = "flag"    // measured, and at least one signal fired (see Flags)
	StatusFailed  Status = "failed"  // the work itself broke; Error says how
	StatusSkipped Status = "skipped" // not run, on purpose or for lack of a tool; Note says why
	// StatusInconclusive: measured, nothing fired, but a gate or comparison could not decide (too
	// few samples, a client-limited run, a lower bound, a cut rung): not a pass. Ranked between ok
	// and flag; exit 0 unless --fail-on-inconclusive.
	StatusInconclusive Status = "inconclusive"
	// A run that did not finish is never ok: one still writing or killed is "incomplete", one stopped
	// by Ctrl-C/SIGTERM (and the GPU running then) "interrupted", what it never reached "not_run".
	StatusIncomplete  Status = "incomplete"
	StatusInterrupted Status = "interrupted"
	StatusNotRun      Status = "not_run"
)

// Worse returns the more serious of two statuses (failed > flag > inconclusive > ok > skipped/empty).
func Worse(a, b Status) Status {
	if rank(b) > rank(a) {
		return b
	}
	return a
}

var statusRank = map[Status]int{StatusIncomplete: 5, StatusInterrupted: 5, StatusFailed: 4, StatusFlag: 3,
	StatusInconclusive: 2, StatusOK: 1}

func rank(s Status) int { return statusRank[s] }

// Flag is one fired signal, with a one-line reason a person can act on.
type Flag struct {
	Scope   string `json:"scope"`   // "gpu", "model", "host", "run"
	Subject string `json:"subject"` // e.g. "gpu 3 (GPU-…)", "Qwen/Qwen3-8B on gpu 1"
	Check   string `json:"check"`   // stable id of the rule, e.g. "health.ecc", "gate.ttft_p95", "compare.gpu_to_gpu"
	Reason  string `json:"reason"`  // one line: what was found, against what, and what to do
	// Layer is the finding's layer (Layers), Action what it asks for (Actions): set by the judge.
	Layer  string `json:"layer,omitempty"`
	Action string `json:"action,omitempty"`
	// Fails: the finding fails what it is about (the GPU, the endpoint), not only flags it: a link
	// down, wrong answers, the driver asking for a reset, failed requests above the error limit.
	Fails bool `json:"fails,omitempty"`
}

// Summary is summary.json: the whole run, the source of truth for the report and for comparisons.
type Summary struct {
	SchemaVersion string    `json:"schema_version"`
	Tool          Tool      `json:"tool"`
	RunID         string    `json:"run_id"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
	// Complete is false while a run is still writing (and in the file a killed run leaves behind).
	Complete bool `json:"complete"`
	// Backend that ran it: "local", "endpoint", "sim", "kubernetes", "ssh", "opennebula".
	Backend string `json:"backend"`
	// Environment label used by comparisons: "baremetal", "vm", "k8s", or what the user set.
	Environment string `json:"environment"`
	Meta        Meta   `json:"meta"`
	Hosts       []Host `json:"hosts"`
	// Outputs are the files this run wrote under raw/, logs/ and hosts/ (OutputFiles): all a later
	// run's --force removes there, so a user's own files stay.
	Outputs []string `json:"outputs,omitempty"`
	// Baseline comparison against a bare-metal run, when one was given.
	Baseline *BaselineComparison `json:"baseline,omitempty"`
	// Fleet is set by multi-host backends: the hosts skipped and the node-to-node comparisons.
	Fleet   *Fleet   `json:"fleet,omitempty"`
	Status  Status   `json:"status"`
	Flags   []Flag   `json:"flags,omitempty"`
	Caveats []string `json:"caveats,omitempty"`
	Error   string   `json:"error,omitempty"`

	// Findings are every check that did not pass, with its layer and action; Layers is the worst
	// status of each layer with a finding, Action the most disruptive a hardware finding asks for.
	Findings []Finding         `json:"findings,omitempty"`
	Layers   map[string]Status `json:"layers,omitempty"`
	Action   string            `json:"action,omitempty"`

	Timing *Timing `json:"timing,omitempty"` // the run's time-to-vet, phase by phase (nil: not recorded)
	// History is each node and GPU against its own acceptance run (nil: no history).
	History *History `json:"history,omitempty"`
}

// Fleet is what a run over many hosts adds to the summary.
type Fleet struct {
	// ParallelHosts is how many hosts ran at once (--parallel-nodes).
	ParallelHosts int `json:"parallel_hosts,omitempty"`
	// Skipped lists the hosts the backend did not run, each with the reason.
	Skipped []SkippedHost `json:"skipped,omitempty"`
	// Comparisons are node-to-node: one figure per host (CompareCell.Host names it), judged with
	// the GPU-to-GPU rule and guards.
	Comparisons []Compare `json:"comparisons,omitempty"`

	// APIRequests is how many requests the run sent to the cluster's API server (retries and
	// watches included).
	APIRequests int64 `json:"api_requests,omitempty"`

	// NodeActions are what the run did to each vetted node on its verdict (labels, taints, the gate,
	// the GPUVetted condition), or would have done (a dry run, a quarantine the breaker held).
	NodeActions []NodeAction `json:"node_actions,omitempty"`
}

// NodeAction is one vetted node's actions, in words.
type NodeAction struct {
	Node   string `json:"node"`
	Status Status `json:"status"` // the verdict acted on
	// Did lists what was done ("would have …" each, in a dry run).
	Did []string `json:"did,omitempty"`
	// Held is the quarantine the circuit breaker held (not taken), in words.
	Held string `json:"held,omitempty"`
	// Attention is what a person must look at (a pending node undecided too many runs in a row).
	Attention string `json:"attention,omitempty"`
	DryRun    bool   `json:"dry_run,omitempty"`
	// ValidUntil is when the verdict expires (kubernetes.verdict_valid_for after the run).
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// SkippedHost is a host left out of a fleet run, and why (e.g. "no free nvidia.com/gpu").
type SkippedHost struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Tool identifies the gpuvet build that wrote the file.
type Tool struct {
	Name    string `json:"name"`    // "gpuvet"
	Version string `json:"version"` // module version or "dev"
	Commit  string `json:"commit,omitempty"`
}

// Meta is what a reader needs to know to compare two runs: software versions, models and the rules.
type Meta struct {
	DriverVersion string   `json:"driver_version,omitempty"`
	CUDAVersion   string   `json:"cuda_version,omitempty"`
	Engine        string   `json:"engine,omitempty"`         // "vllm", "sglang", "trtllm", "sim", "generic"
	EngineVersion string   `json:"engine_version,omitempty"` // the pinned version, as the engine reports it
	Models        []string `json:"models,omitempty"`
	// LoadProfile is the load that produced the LLM numbers; comparisons caveat a difference.
	LoadProfile *LoadConfig `json:"load_profile,omitempty"`
	// Thresholds holds every threshold in force, keyed by a stable name (the Threshold… keys below
	// among them), each with its source.
	Thresholds map[string]Threshold `json:"thresholds,omitempty"`
	// ParallelGPUs is how many GPUs were loaded at once (1 = one at a time, as the seed does).
	ParallelGPUs int `json:"parallel_gpus,omitempty"`
	// Parallel says how ParallelGPUs was chosen (issue 34; nil: not recorded).
	Parallel *ParallelChoice `json:"parallel,omitempty"`
	// Settings holds the resolved plan values worth recording, each "value (source)".
	Settings map[string]string `json:"settings,omitempty"`
}

// Threshold is one limit and where it came from, so every verdict can say who decided.
type Threshold struct {
	Value  *float64 `json:"value"` // nil: the gate is disabled
	Unit   string   `json:"unit,omitempty"`
	Source string   `json:"source"` // "default", "config:FILE", "env", "flag", "reference", "accelerator:NAME", "recipe:FILE"
}

// Host is one machine under test.
type Host struct {
	Name      string    `json:"name"`
	Discovery Discovery `json:"discovery"`
	Health    *Health   `json:"health,omitempty"`
	Models    []Model   `json:"models,omitempty"`
	// GPUs is each GPU's verdict, decided once by the judge: the worst of its health and serving
	// verdicts. Every surface (terminal, report, JUnit, CTRF, Prometheus) shows a GPU's status from here.
	GPUs []GPUVerdict `json:"gpus,omitempty"`
	VMs  []VM         `json:"vms,omitempty"` // the VMs gpuvet created on this host (backend opennebula)
	// Prep is what host preparation installed on the host for this run and removed after.
	Prep   *HostPrep `json:"host_prep,omitempty"`
	Status Status    `json:"status"`
	Flags  []Flag    `json:"flags,omitempty"`
	Error  string    `json:"error,omitempty"`
	// ErrorLayer is Error's layer when its maker knows it (a backend's, LayerInfra); empty: the judge
	// reads it from the words.
	ErrorLayer string `json:"error_layer,omitempty"`
	// Layers is the worst status of each layer with a finding on this host; Action the most
	// disruptive its hardware findings ask for, and HardwareStatus their worst: what a gate acts on.
	Layers         map[string]Status `json:"layers,omitempty"`
	Action         string            `json:"action,omitempty"`
	HardwareStatus Status            `json:"hardware_status,omitempty"`
	// Disruption says what stopped the host's run that is not the hardware's (its job preempted or
	// cancelled by someone): the host is then inconclusive, not failed (DisruptionOf).
	Disruption string `json:"disruption,omitempty"`
	// Parallel is how many of a fleet host's engines its run loaded at once, and why.
	Parallel *ParallelChoice `json:"parallel,omitempty"`
	// DetailFile is set in a many-host fleet's summary, which holds each host's digest
	// (docs/report.md): the host's own full summary, relative to this one ("hosts/gpu-node-0007.json").
	DetailFile string `json:"detail_file,omitempty"`
}

// GPUVerdict is one GPU's status: the worst of its health verdict and the serving verdicts of every
// endpoint it ran.
type GPUVerdict struct {
	Index   int    `json:"index"`
	UUID    string `json:"uuid,omitempty"`
	Name    string `json:"name,omitempty"`
	Status  Status `json:"status"`
	Health  Status `json:"health,omitempty"`  // the health phase's verdict on it (empty: not checked)
	Serving Status `json:"serving,omitempty"` // the worst verdict of the endpoints it served (empty: none)
	// Checks are the ids of the checks that fired on it, health first, and Why says what left it
	// inconclusive (empty when decided).
	Checks []string `json:"checks,omitempty"`
	Why    []string `json:"why,omitempty"`
	// Action is the most disruptive action the GPU's own findings ask for (empty: none).
	Action string `json:"action,omitempty"`
}

// GPUStatus is the judged status of a set of GPUs (an endpoint's): the worst of their verdicts;
// empty when the host holds no verdict for any of them (a summary the judge has not seen).
func (h *Host) GPUStatus(gpus []int) Status {
	var st Status
	for _, g := range h.GPUs {
		if slices.Contains(gpus, g.Index) {
			st = Worse(st, g.Status)
		}
	}
	return st
}

// ServedGPUs are the GPU indexes an engine of the host served, sorted, each once.
func (h *Host) ServedGPUs() []int {
	var out []int
	for _, m := range h.Models {
		for _, e := range m.Endpoints {
			out = append(out, e.GPUs...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SkippedChecks lists the checks of the run that did not run (DCGM absent, a microbenchmark not
// run), one line each: an ok run with any is ok on what ran but partial, and every surface says so.
// Then the checks made with no yardstick (SourceNone, disabled), once per host, model and reason:
// "Qwen/Qwen3-8B on NVIDIA H200: absolute throughput not judged …".
func (s *Summary) SkippedChecks() []string {
	var out, notJudged []string
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		on := ""
		if len(s.Hosts) > 1 {
			on = h.Name + ": "
		}
		var gpus []GPUHealth
		if h.Health != nil {
			if d := h.Health.DCGM; d != nil && d.Status == StatusSkipped {
				note := cmp.Or(d.Note, "no reason recorded")
				out = append(out, on+"DCGM diagnostics were skipped ("+strings.TrimPrefix(note, "skipped: ")+")")
			}
			gpus = h.Health.GPUs
		}
		for _, g := range gpus {
			for _, b := range g.Bench {
				if b.Status == StatusSkipped {
					out = append(out, fmt.Sprintf("%sgpu %d: %s was skipped", on, g.GPU.Index, b.Name))
				}
			}
		}
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				for _, v := range e.Verdicts {
					if v.Source != SourceNone || v.Result != "disabled" {
						continue
					}
					line := fmt.Sprintf("%s%s on %s: %s", on, m.Model, e.GPUName, v.Reason)
					if !seen[line] {
						seen[line] = true
						notJudged = append(notJudged, line)
					}
				}
			}
		}
	}
	return append(out, notJudged...)
}

// Discovery records how GPUs were found and what was found.
type Discovery struct {
	Source string    `json:"source"` // "nvml", "nvidia-smi-xml", "sim"
	GPUs   []GPUInfo `json:"gpus"`
	Note   string    `json:"note,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// MaxSummaryBytes bounds the summary files Read accepts.
const MaxSummaryBytes = 256 << 20

// Read reads a summary.json (or baseline.json) and checks its schema version.
func Read(path string) (*Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Bounded: a wrong file must not take the machine's memory (summaries are a few MB).
	b, err := io.ReadAll(io.LimitReader(f, MaxSummaryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxSummaryBytes {
		return nil, fmt.Errorf("%s: more than %d MiB: not a gpuvet summary", path, MaxSummaryBytes>>20)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes summary.json bytes and checks the schema version: the one check every reader of a
// gpuvet summary (report, compare, import) goes through.
func Parse(b []byte) (*Summary, error) {
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("not a gpuvet summary (%w)", err)
	}
	if s.SchemaVersion == "" {
		return nil, fmt.Errorf("no schema_version: not a gpuvet summary")
	}
	if !knownVersion(s.SchemaVersion) {
		mj, _, _ := splitVersion(SchemaVersion)
		return nil, fmt.Errorf("schema_version %s: this gpuvet reads %d.0 to %s (MAJOR.MINOR): a newer or unknown summary; read it with the gpuvet that wrote it, or re-record",
			s.SchemaVersion, mj, SchemaVersion)
	}
	Compact(&s)
	return &s, nil
}

// knownVersion accepts exactly MAJOR.MINOR with this reader's major and a minor no newer than its
// own (minors only add fields): "1.99" and "1.0.0" are not versions this reader knows.
func knownVersion(v string) bool {
	mj, mn, ok := splitVersion(v)
	cmj, cmn, _ := splitVersion(SchemaVersion)
	return ok && mj == cmj && mn <= cmn
}

func splitVersion(v string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(v, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	canonical := found && err1 == nil && err2 == nil && strconv.Itoa(x) == a && strconv.Itoa(y) == b
	return x, y, canonical
}

// OutputFolders are the folders of an output folder where a run writes files of its own.
var OutputFolders = []string{"raw", "logs", "hosts"}

// maxOutputs bounds the manifest: a 1,000-node fleet writes a few files a host.
const maxOutputs = 100_000

// OutputFiles lists the files under dir's OutputFolders written at or after since (this run's:
// a file that was there before the run keeps its older time), relative to dir, at most maxOutputs.
func OutputFiles(dir string, since time.Time) []string {
	var out []string
	for _, sub := range OutputFolders {
		_ = filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || len(out) >= maxOutputs || !d.Type().IsRegular() {
				return nil
			}
			if info, err := d.Info(); err == nil && !info.ModTime().Before(since.Truncate(time.Second)) {
				if rel, err := filepath.Rel(dir, p); err == nil {
					out = append(out, rel)
				}
			}
			return nil
		})
	}
	return out
}

// IndentMaxBytes is the largest compact JSON WriteJSON indents: a larger file (a fleet's summary)
// stays compact, since indentation more than doubles it and nobody reads megabytes by eye.
const IndentMaxBytes = 2 << 20

// WriteJSON writes v as JSON atomically (ReplaceFile): indented, unless that would pass IndentMaxBytes.
func WriteJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) <= IndentMaxBytes {
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, "", "  "); err != nil {
			return err
		}
		b = ind.Bytes()
	}
	return ReplaceFile(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// ReplaceFile writes a file atomically: write fills a temp file in the path's folder (made if
// missing), which is put on the disk (fsync) and then replaces path by a rename, so a reader, a
// killed run or a crash of the machine never sees half a file or an empty one, and a symlink at path
// is replaced, never followed. Callers check first that path is one they may replace (an absent path
// or a regular file).
func ReplaceFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil { // CreateTemp makes the file 0600; results are meant to be read by whoever runs the report
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// JoinErr adds error text b to a (a result's Error field), "; " between them, either may be "".
func JoinErr(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}
