package report

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// nvlinkCase is one GPU's NVLink test case: its links up and error counters steady.
func nvlinkCase(class string, hh *results.Health, gpu int, pool *flagPool) []junitCase {
	if hh.Interconnect == nil {
		return nil
	}
	for _, gl := range hh.Interconnect.Links {
		if gl.GPU != gpu {
			continue
		}
		c := failCase(class, "health.nvlink", pool.take("nvlink"))
		if c.Failure == nil {
			c.SystemOut = fmt.Sprintf("%d of %d NVLinks up", gl.Up(), len(gl.Links))
		}
		return []junitCase{c}
	}
	return nil
}

// interconnectCases are the host's pair and all-reduce cases: one per measured pair (peer access, path,
// copy bandwidth, pair-to-pair comparison) and one for the all-reduce, skipped without NCCL.
func interconnectCases(class string, hh *results.Health, pool *flagPool) []junitCase {
	ic := hh.Interconnect
	if ic == nil {
		return nil
	}
	var out []junitCase
	for _, p := range ic.Pairs {
		if p.Uni == nil && p.Error == "" {
			continue
		}
		subj := fmt.Sprintf("gpu %d ↔ gpu %d", p.A, p.B)
		c := failCase(class, fmt.Sprintf("interconnect.gpu%d-gpu%d", p.A, p.B), pool.takeSubject(subj))
		switch {
		case c.Failure != nil:
		case p.Error != "":
			c.Error = &junitProblem{Message: p.Error, Type: "interconnect.peer_copy"}
		case p.Uni != nil && p.Uni.Ratio != nil:
			c.SystemOut = fmt.Sprintf("%s: %.1f GB/s one way (%.0f %% of %.0f GB/s)", p.Path, p.Uni.GBps, *p.Uni.Ratio*100, p.PeakGBps)
		}
		out = append(out, c)
	}
	if ar := ic.AllReduce; ar != nil {
		c := failCase(class, "interconnect.all_reduce", pool.take("all_reduce"))
		switch {
		case ar.Status == results.StatusSkipped:
			c.Skipped = &junitSkip{Message: "all-reduce " + orDash(ar.Note)}
		case ar.Status == results.StatusFailed && c.Failure == nil:
			c.Error = &junitProblem{Message: orDash(ar.Error), Type: "interconnect.all_reduce"}
		case c.Failure == nil && len(ar.Sizes) > 0:
			s := ar.Sizes[len(ar.Sizes)-1]
			c.SystemOut = fmt.Sprintf("busbw %.1f GB/s at %s over %d GPUs (NCCL %s)", s.BusBWGBps, results.SizeText(s.Bytes), ar.GPUs, ar.NCCL)
		}
		out = append(out, c)
	}
	return out
}

// takeSubject returns the flags about one subject, and marks them used.
func (p *flagPool) takeSubject(subject string) []results.Flag {
	var out []results.Flag
	for i, f := range p.flags {
		if !p.used[i] && strings.EqualFold(f.Subject, subject) {
			p.used[i] = true
			out = append(out, f)
		}
	}
	return out
}
