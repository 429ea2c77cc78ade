package term

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// renderInterconnect writes the topology matrix (as `nvidia-smi topo -m` prints it), each GPU's links,
// the peer-copy table against the links' peak, and the all-reduce bus bandwidth.
func renderInterconnect(w io.Writer, h *results.Health) {
	ic := h.Interconnect
	if ic == nil {
		return
	}
	fmt.Fprintf(w, "\nInterconnect (source: %s)\n", ic.Source)
	if ic.Error != "" {
		fmt.Fprintf(w, "error: %s\n", ic.Error)
	}
	if m := ic.Matrix(len(h.GPUs)); len(m) > 0 {
		t := Columns(w)
		for _, row := range m {
			fmt.Fprintln(t, strings.Join(row, "\t"))
		}
		t.Flush()
	}
	if len(ic.Links) > 0 {
		t := Columns(w)
		fmt.Fprintln(t, "\nGPU\tNVLINKS UP\tSPEED/LINK\tVERSION\tREACHES\tERRORS crc/replay/recovery (start → end)")
		for _, gl := range ic.Links {
			fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\n", gl.GPU, fmt.Sprintf("%d/%d", gl.Up(), len(gl.Links)), fleetview.LinkSpeed(gl), linkVersion(gl), linkRemotes(gl), linkErrorsText(gl))
		}
		t.Flush()
	}
	var measured []results.GPUPair
	for _, p := range ic.Pairs {
		if p.Uni != nil || p.Error != "" {
			measured = append(measured, p)
		}
	}
	if len(measured) > 0 {
		fmt.Fprintln(w, "\nPeer-to-peer copy")
		t := Columns(w)
		fmt.Fprintln(t, "PAIR\tPATH\tP2P\tLINK PEAK\tUNI GB/s\tRATIO\tBI GB/s\tRATIO (of 2× peak)\tERROR")
		for _, p := range measured {
			uni, uniRatio := pairFigure(p.Uni)
			bi, biRatio := pairFigure(p.Bi)
			fmt.Fprintf(t, "%d ↔ %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.A, p.B, dash(p.Path), dash(p.P2P), peakText(p.PeakGBps),
				uni, uniRatio, bi, biRatio, clip(p.Error, 100))
		}
		t.Flush()
	}
	if ar := ic.AllReduce; ar != nil {
		fmt.Fprintf(w, "\nAll-reduce (%s", ar.Status)
		if ar.NCCL != "" {
			fmt.Fprintf(w, ", NCCL %s, %d GPUs, %s", ar.NCCL, ar.GPUs, ar.Dtype)
		}
		fmt.Fprintln(w, ")")
		if ar.Note != "" {
			fmt.Fprintln(w, ar.Note)
		}
		if ar.Error != "" {
			fmt.Fprintf(w, "error: %s\n", ar.Error)
		}
		if len(ar.Sizes) > 0 {
			t := Columns(w)
			fmt.Fprintln(t, "SIZE\tTIME µs\tALGBW GB/s\tBUSBW GB/s\tRATIO (of "+peakText(ar.PeakGBps)+" per GPU)")
			for _, s := range ar.Sizes {
				fmt.Fprintf(t, "%s\t%.1f\t%.1f\t%.1f\t%s\n", results.SizeText(s.Bytes), s.TimeUs, s.AlgBWGBps, s.BusBWGBps, fmtOrDash(s.BusBWRatio, "%.2f"))
			}
			t.Flush()
		}
	}
	for _, n := range ic.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func linkVersion(gl results.GPULinks) string {
	for _, l := range gl.Links {
		if l.Version > 0 {
			return fmt.Sprint(l.Version)
		}
	}
	return "—"
}

func linkRemotes(gl results.GPULinks) string {
	seen := map[string]int{}
	var order []string
	for _, l := range gl.Links {
		if !l.Up {
			continue
		}
		k := l.RemoteType
		if l.Remote != "" {
			k += " " + l.Remote
		}
		if k == "" {
			continue
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, seen[k]))
	}
	return dash(strings.Join(parts, ", "))
}

func linkErrorsText(gl results.GPULinks) string {
	a, b := gl.ErrorTotals()
	f := func(e *results.LinkErrors) string {
		if e == nil {
			return "n/a"
		}
		return fmt.Sprintf("%d/%d/%d", e.CRC, e.Replay, e.Recovery)
	}
	if b == nil {
		return f(a)
	}
	return f(a) + " → " + f(b)
}

func peakText(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f GB/s", v)
}

// pairFigure is a copy's GB/s and its ratio to the link peak ("—" when not measured).
func pairFigure(f *results.PairFigure) (gbps, ratio string) {
	if f == nil {
		return "—", "—"
	}
	return fmt.Sprintf("%.1f", f.GBps), fmtOrDash(f.Ratio, "%.2f")
}
