package slurm

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Node is one node as `scontrol -o show node` describes it.
type Node struct {
	Name string
	// State is the base state (IDLE, ALLOCATED, MIXED, DOWN, …) and Flags its flags (DRAIN,
	// NOT_RESPONDING, RESERVED, MAINT, …), from State=IDLE+DRAIN.
	State string
	Flags []string
	// GPUs is the node's gres gpu count (every type summed); Gres is the field as Slurm wrote it.
	GPUs       int
	Gres       string
	Partitions []string
	// Reason is the drain or down reason without its "[user@time]" suffix; ReasonBy that user.
	Reason   string
	ReasonBy string
}

// Has reports whether the node's state has flag f (DRAIN, …) or is base state f.
func (n Node) Has(f string) bool { return n.State == f || slices.Contains(n.Flags, f) }

// Drained reports a node that takes no new jobs because someone drained it (DRAIN, DRAINING,
// DRAINED all carry the DRAIN flag).
func (n Node) Drained() bool { return n.Has("DRAIN") }

// Unusable says why a node cannot run a job now ("" when it can).
func (n Node) Unusable() string {
	switch {
	case n.Drained():
		return "drained"
	case n.State == "DOWN", n.Has("FAIL"), n.State == "FUTURE", n.Has("POWERED_DOWN"), n.Has("POWERING_DOWN"):
		return "state " + n.StateString()
	case n.Has("NOT_RESPONDING"):
		return "not responding"
	}
	return ""
}

// StateString is the state as Slurm writes it.
func (n Node) StateString() string { return strings.Join(append([]string{n.State}, n.Flags...), "+") }

// maxLine bounds one record: a node's line is under 2 KB, its reason at most a few hundred bytes.
const maxLine = 1 << 20

// keyRe is a field's key in scontrol's one-line output.
var keyRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_:/]*$`)

// Fields splits one line of `scontrol -o show …` into its key=value fields. A value may hold
// spaces (OS=Linux 6.1.0 #1 SMP …): a word without a key continues the value before it. Reason
// is always the last field and holds anything, "=" too: it takes the rest of the line.
func Fields(line string) (map[string]string, error) {
	if len(line) > maxLine {
		return nil, fmt.Errorf("a line of %d bytes (at most %d)", len(line), maxLine)
	}
	out := map[string]string{}
	last := ""
	rest := line
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		word, tail, _ := strings.Cut(rest, " ")
		k, v, ok := strings.Cut(word, "=")
		if ok && keyRe.MatchString(k) {
			if k == "Reason" {
				out[k] = strings.TrimSpace(strings.TrimPrefix(rest, "Reason="))
				return out, nil
			}
			out[k], last = v, k
		} else if last != "" {
			out[last] += " " + word
		} else {
			return nil, fmt.Errorf("%q is not key=value", word)
		}
		rest = tail
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no key=value fields")
	}
	return out, nil
}

// ParseNodes reads `scontrol -o show node` (one node a line).
func ParseNodes(out string) ([]Node, error) {
	var nodes []Node
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No nodes") {
			continue
		}
		f, err := Fields(line)
		if err != nil {
			return nil, fmt.Errorf("scontrol show node, line %d: %w", i+1, err)
		}
		name := f["NodeName"]
		if name == "" {
			return nil, fmt.Errorf("scontrol show node, line %d: no NodeName", i+1)
		}
		n := Node{Name: name, Gres: f["Gres"]}
		st := strings.Split(f["State"], "+")
		n.State, n.Flags = strings.TrimSuffix(st[0], "*"), st[1:]
		if strings.HasSuffix(st[0], "*") {
			n.Flags = append(n.Flags, "NOT_RESPONDING")
		}
		if n.GPUs, err = GresGPUs(n.Gres); err != nil {
			return nil, fmt.Errorf("node %s: Gres=%s: %w", name, n.Gres, err)
		}
		if p := f["Partitions"]; p != "" && p != "(null)" {
			n.Partitions = strings.Split(p, ",")
		}
		n.Reason, n.ReasonBy = splitReason(f["Reason"])
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// reasonSuffix is the "[user@2026-12-03T02:32:00]" scontrol adds to a reason.
var reasonSuffix = regexp.MustCompile(`\s*\[([^\]@]*)@[^\]]*\]$`)

func splitReason(r string) (string, string) {
	if m := reasonSuffix.FindStringSubmatchIndex(r); m != nil {
		return r[:m[0]], r[m[2]:m[3]]
	}
	return r, ""
}

// GresGPUs sums the gpu entries of a Gres field: "gpu:8", "gpu:h100:4(S:0-1),gpu:a100:2",
// "gpu:8(IDX:0-7)", "(null)". Other gres (nic, mps, shard) count nothing.
func GresGPUs(gres string) (int, error) {
	if gres == "" || gres == "(null)" {
		return 0, nil
	}
	total := 0
	for _, e := range splitGres(gres) {
		if i := strings.IndexByte(e, '('); i >= 0 { // (S:0-1), (IDX:0-7): where, not how many
			e = e[:i]
		}
		parts := strings.Split(e, ":")
		if parts[0] != "gpu" {
			continue
		}
		last := parts[len(parts)-1]
		if len(parts) == 1 { // "gpu": one
			total++
			continue
		}
		n, err := strconv.Atoi(last)
		if err != nil || n < 0 || n > 1<<16 {
			if len(parts) == 2 { // gpu:TYPE without a count: one
				total++
				continue
			}
			return 0, fmt.Errorf("gpu count %q", last)
		}
		total += n
	}
	return total, nil
}

// splitGres splits a Gres list at the commas outside parentheses ("gpu:2(S:0-1),nic:1").
func splitGres(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// Job is one job as `scontrol -o show job ID` describes it.
type Job struct {
	ID       string
	Name     string
	State    string // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, …
	Reason   string // why it is pending (JobHeldUser, Resources, ReqNodeNotAvail…), or None
	ExitCode int    // the batch script's exit status
	Signal   int    // the signal that ended it (ExitCode=0:9)
	NodeList string
}

// Final reports a job that has ended, whatever way.
func (j Job) Final() bool {
	switch j.State {
	case "PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD":
		return false
	}
	return true
}

// ParseJob reads `scontrol -o show job ID` (its first job line). Job fields are not in the order
// node fields are, and a job's Reason is one word, so Reason's take-the-rest rule does not apply.
func ParseJob(out string) (Job, error) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// Reason here is "Reason=None Dependency=…": cut it to its word before splitting.
		f, err := jobFields(line)
		if err != nil {
			return Job{}, fmt.Errorf("scontrol show job: %w", err)
		}
		j := Job{ID: f["JobId"], Name: f["JobName"], State: f["JobState"], Reason: f["Reason"], NodeList: f["NodeList"]}
		if j.ID == "" || j.State == "" {
			return Job{}, fmt.Errorf("scontrol show job: no JobId or JobState in %.200q", line)
		}
		if ec := f["ExitCode"]; ec != "" {
			a, b, _ := strings.Cut(ec, ":")
			j.ExitCode, _ = strconv.Atoi(a)
			j.Signal, _ = strconv.Atoi(b)
		}
		return j, nil
	}
	return Job{}, fmt.Errorf("scontrol show job: no job")
}

// jobFields is Fields for a job line: its Reason is one word among the others.
func jobFields(line string) (map[string]string, error) {
	const key = " Reason="
	i := strings.Index(line, key)
	if i < 0 {
		return Fields(line)
	}
	head, tail := line[:i], line[i+len(key):]
	word, rest, _ := strings.Cut(tail, " ")
	f, err := Fields(head + " " + rest)
	if err != nil {
		return nil, err
	}
	f["Reason"] = word
	return f, nil
}

// ParseJobID reads `sbatch --parsable`: "ID" or "ID;CLUSTER".
func ParseJobID(out string) (string, error) {
	s := strings.TrimSpace(out)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 { // warnings may come first
		s = strings.TrimSpace(s[i+1:])
	}
	id, cluster, _ := strings.Cut(s, ";")
	if !jobIDRe.MatchString(id) || !clusterRe.MatchString(cluster) {
		return "", fmt.Errorf("sbatch --parsable printed %.100q, not a job id", out)
	}
	return id, nil
}

// jobIDRe is a job id as gpuvet passes it back to scontrol and scancel: digits only (an array or
// het job's "12_3"/"12+1" is never one of gpuvet's).
var jobIDRe = regexp.MustCompile(`^[0-9]{1,12}$`)

// clusterRe is a cluster's name after the id ("" for none).
var clusterRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{0,64}$`)

// ValidJobID reports whether s is a job id gpuvet submits (a manifest is a file anyone may have
// edited: what it names goes to scancel only when it is one).
func ValidJobID(s string) bool { return jobIDRe.MatchString(s) }

// ParseHostnames reads `scontrol show hostnames EXPR`: one name a line.
func ParseHostnames(out string) []string { return strings.Fields(out) }

// ClusterName reads ClusterName from `scontrol show config` ("ClusterName             = x").
func ClusterName(out string) string {
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == "ClusterName" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
