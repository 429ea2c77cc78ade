package kwokplayer

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The recorded in-pod outputs: each file is the whole log of one real `gpuvet in-pod` run (its
// own output, then its result between the markers); testdata/README.md says how they were made.
//
//go:embed testdata/cache.log testdata/health.log testdata/ready.log testdata/load.log
var recorded embed.FS

// Recordings are the logs a player plays back, split into what the command printed and its
// result.
type Recordings struct {
	Cache                           []byte
	healthText, readyText, loadText string
	health                          []byte // results.Health JSON
	ready                           []k8s.CompletionCheck
	load                            []byte // results.Summary JSON of one endpoint
}

// Recorded are the recordings in testdata.
func Recorded() (*Recordings, error) {
	read := func(name string) []byte {
		b, _ := recorded.ReadFile("testdata/" + name)
		return b
	}
	return ParseRecordings(read("cache.log"), read("health.log"), read("ready.log"), read("load.log"))
}

// ParseRecordings checks and splits four recorded logs: the populate Job's (plain text), and the
// health, completion-check and load Jobs' (each with its result between the markers).
func ParseRecordings(cache, health, ready, load []byte) (*Recordings, error) {
	r := &Recordings{Cache: cache}
	var err error
	if r.healthText, r.health, err = split("health", health); err != nil {
		return nil, err
	}
	var h results.Health
	if err := json.Unmarshal(r.health, &h); err != nil || len(h.GPUs) == 0 {
		return nil, fmt.Errorf("recorded health result: %w (%d GPUs)", err, len(h.GPUs))
	}
	var rb []byte
	if r.readyText, rb, err = split("ready", ready); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(rb, &r.ready); err != nil || len(r.ready) == 0 || r.ready[0].Tokens < 1 {
		return nil, fmt.Errorf("recorded completion check: %w (%d answers)", err, len(r.ready))
	}
	if r.loadText, r.load, err = split("load", load); err != nil {
		return nil, err
	}
	if _, err := loadSummary(r.load); err != nil {
		return nil, fmt.Errorf("recorded load result: %w", err)
	}
	if len(bytes.TrimSpace(cache)) == 0 {
		return nil, fmt.Errorf("recorded populate log is empty")
	}
	return r, nil
}

// split is a log's text before its result, and the result.
func split(what string, log []byte) (string, []byte, error) {
	res, err := k8s.ExtractResult(log)
	if err != nil {
		return "", nil, fmt.Errorf("recorded %s log: %w", what, err)
	}
	text, _, _ := strings.Cut(string(log), "\n"+markerBegin)
	return text, res, nil
}

// markerBegin opens the result block in a log (internal/k8s's marker, as EmitResult writes it).
var markerBegin = func() string {
	var b bytes.Buffer
	_ = k8s.EmitResult(&b, nil)
	l, _, _ := strings.Cut(strings.TrimPrefix(b.String(), "\n"), "\n")
	return l
}()

// withResult is text followed by res, as JSON, in the result block.
func withResult(text string, res any) ([]byte, error) {
	j, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	b := bytes.NewBufferString(text)
	if err := k8s.EmitResult(b, j); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// HealthFor is the health Job's log for node: the recorded result with GPU UUIDs of the node's own.
func (r *Recordings) HealthFor(node string) ([]byte, error) { return r.healthLog(node, false) }

// healthLog is HealthFor, with wrongGPU0 as `gpuvet health` prints a GPU 0 that computed wrong
// answers (it then exits 1): evidence about a GPU, which fails the node and a taint acts on.
func (r *Recordings) healthLog(node string, wrongGPU0 bool) ([]byte, error) {
	var h results.Health
	if err := json.Unmarshal(r.health, &h); err != nil {
		return nil, err
	}
	for i := range h.GPUs {
		h.GPUs[i].GPU.UUID = gpuUUID(node, i)
	}
	if wrongGPU0 && len(h.GPUs) > 0 {
		g := &h.GPUs[0]
		g.Status = results.StatusFailed
		g.Flags = append(g.Flags, results.Flag{Scope: "gpu", Subject: fmt.Sprintf("gpu 0 (%s)", g.GPU.UUID), Check: "health.result_check",
			Reason: "gemm_bf16 computed a wrong answer (played by kwokplayer)", Layer: results.LayerGPU, Action: results.ActionDrainRMA, Fails: true})
		h.Status = results.StatusFailed
	}
	return withResult(r.healthText, h)
}

// ReadyFor is the completion check's log for urls: the recorded answer for each, its time × f.
func (r *Recordings) ReadyFor(urls []string, f float64) ([]byte, error) {
	out := make([]k8s.CompletionCheck, len(urls))
	for i, u := range urls {
		out[i] = r.ready[0]
		out[i].URL, out[i].Seconds = u, r.ready[0].Seconds*f
	}
	return withResult(r.readyText, out)
}

// LoadFor is a load Job's log against url: the recorded summary, its serving figures f times
// slower (ScaleLoad).
func (r *Recordings) LoadFor(url string, f float64) ([]byte, error) {
	s, err := loadSummary(r.load)
	if err != nil {
		return nil, err
	}
	for hi := range s.Hosts {
		for mi := range s.Hosts[hi].Models {
			for ei := range s.Hosts[hi].Models[mi].Endpoints {
				ep := &s.Hosts[hi].Models[mi].Endpoints[ei]
				ScaleLoad(ep.Load, f)
				ep.ProvisionSeconds *= f
				if url != "" {
					ep.URL = url
					if ep.Load != nil {
						ep.Load.URL = url
					}
				}
			}
		}
	}
	return withResult(r.loadText, s)
}

// loadSummary parses a load Job's result: a summary with one endpoint.
func loadSummary(b []byte) (*results.Summary, error) {
	s, err := results.Parse(b)
	if err != nil {
		return nil, err
	}
	if len(s.Hosts) == 0 || len(s.Hosts[0].Models) == 0 || len(s.Hosts[0].Models[0].Endpoints) == 0 || s.Hosts[0].Models[0].Endpoints[0].Load == nil {
		return nil, fmt.Errorf("no endpoint with a load")
	}
	return s, nil
}

// gpuUUID is a GPU's UUID on a played node, fixed by the node and index.
func gpuUUID(node string, i int) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%s/%d", node, i)
	x := h.Sum(nil)
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
}
