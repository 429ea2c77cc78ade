package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// HostReason is why a judged host is not ok, in one line (a taint's message, a drain's reason): its error and every flag's check,
// subject and reason (the host's, its health phase's and GPUs', its models' and endpoints'), without repeats.
func HostReason(h results.Host) string {
	var r []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(r, s) {
			r = append(r, s)
		}
	}
	// The hardware's findings first (what a gate acts on), each with its layer; then the rest.
	hardware := true
	flags := func(fs []results.Flag) {
		for _, f := range fs {
			if f.Layer != "" && results.HardwareLayer(f.Layer) != hardware {
				continue
			}
			what := f.Check
			if f.Layer != "" {
				what = "[" + f.Layer + "] " + what
			}
			if f.Subject != "" {
				what += " (" + f.Subject + ")"
			}
			add(what + ": " + f.Reason)
		}
	}
	add(h.Error)
	if a := h.Action; a != "" && a != results.ActionNone {
		add("action: " + results.ActionWords[a])
	}
	all := h.AllFlags()
	flags(all)
	hardware = false
	flags(all)
	if hh := h.Health; hh != nil {
		add(hh.Error)
	}
	for _, m := range h.Models {
		add(m.Error)
		for _, ep := range m.Endpoints {
			add(ep.Error)
		}
	}
	// What left GPUs undecided (a client-limited load, too few samples): an inconclusive host with no
	// flag and no error said nothing at all ("needs a person: " with no reason).
	for _, u := range undecidedWhys(h) {
		add(u)
	}
	return strings.Join(r, "; ")
}

// undecidedWhys says what left the host's inconclusive GPUs undecided, one line per cause and set of
// GPUs: six comparisons undecided for one reason read as one line naming the six, not six lines
// that a node annotation cuts off after two.
func undecidedWhys(h results.Host) []string {
	type group struct {
		gpus     []int
		subjects []string
	}
	var causes []string
	byCause := map[string]*group{}
	for _, g := range h.GPUs {
		if g.Status != results.StatusInconclusive {
			continue
		}
		for _, w := range g.Why {
			subject, cause, ok := strings.Cut(w, ": ")
			if !ok {
				subject, cause = "", w
			}
			gr := byCause[cause]
			if gr == nil {
				gr = &group{}
				byCause[cause] = gr
				causes = append(causes, cause)
			}
			if !slices.Contains(gr.gpus, g.Index) {
				gr.gpus = append(gr.gpus, g.Index)
			}
			if subject != "" && !slices.Contains(gr.subjects, subject) {
				gr.subjects = append(gr.subjects, subject)
			}
		}
	}
	var out []string
	for _, c := range causes {
		gr := byCause[c]
		line := "undecided on gpu " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(gr.gpus)), ","), "[]") + ": "
		if len(gr.subjects) > 0 {
			line += joinShared(gr.subjects) + ": "
		}
		out = append(out, line+c)
	}
	return out
}

// joinShared lists subjects, their shared leading words said once: "Qwen/Qwen3-8B GPU-to-GPU
// ttft_p95_ms, itl_p95_ms".
func joinShared(subjects []string) string {
	if len(subjects) == 1 {
		return subjects[0]
	}
	words := make([][]string, len(subjects))
	for i, s := range subjects {
		words[i] = strings.Fields(s)
	}
	differs := func(n int) bool { // some subject's n-th word is another, or its last
		return slices.ContainsFunc(words[1:], func(w []string) bool { return n >= len(w)-1 || w[n] != words[0][n] })
	}
	n := 0
	for n < len(words[0])-1 && !differs(n) {
		n++
	}
	rest := make([]string, len(words))
	for i, w := range words {
		rest[i] = strings.Join(w[n:], " ")
	}
	return strings.TrimSpace(strings.Join(words[0][:n], " ") + " " + strings.Join(rest, ", "))
}
