package term

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Health writes the health result as terminal tables: inventory, microbenchmarks with peak and ratio,
// burn, GPU-to-GPU, DCGM, flags and notes, then the status.
func Health(w io.Writer, h *results.Health) {
	fmt.Fprintf(w, "GPU health (source: %s, %d GPU(s)", h.Source, len(h.GPUs))
	if h.ExpectGPUs > 0 {
		fmt.Fprintf(w, ", expected %d", h.ExpectGPUs)
	}
	mode := "one GPU at a time"
	if h.Parallel {
		mode = "all GPUs at once"
	}
	fmt.Fprintf(w, ", benchmarks %s)\n", mode)
	if h.Error != "" {
		fmt.Fprintf(w, "error: %s\n", h.Error)
	}
	renderInventory(w, h)
	renderBench(w, h)
	renderBurn(w, h)
	renderCompare(w, h)
	renderInterconnect(w, h)
	renderDCGM(w, h)
	renderFlags(w, h)
	fmt.Fprintf(w, "\nhealth status: %s\n", strings.ToUpper(string(h.Status)))
}

func renderInventory(w io.Writer, h *results.Health) {
	if len(h.GPUs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nInventory")
	t := Columns(w)
	fmt.Fprintln(t, "GPU\tNAME\tBUS ID\tNUMA\tMEMORY\tPCIe NOW/MAX\tPOWER/LIMIT\tSM CLK/MAX\tTEMP\tECC UNC vol/agg\tREMAP pend/fail\tCLOCK EVENTS")
	for _, gh := range h.GPUs {
		g := gh.GPU
		numa := fmt.Sprint(g.NUMANode)
		if g.NUMANode < 0 {
			numa = "unknown"
		}
		remap := "n/a"
		if r := g.RemappedRows; r != nil {
			remap = fmt.Sprintf("%s/%s", yesNo(r.Pending), yesNo(r.Failure))
		}
		ev := cmp.Or(strings.Join(g.ClockEvents.Names, ","), "none")
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%.1f GiB\tgen%d x%d / gen%d x%d\t%s / %s\t%s / %s\t%s\t%s / %s\t%s\t%s (%#x)\n",
			g.Index, g.Name, g.PCIBusID, numa, float64(g.MemoryTotalMiB)/1024,
			g.PCIe.GenCurrent, g.PCIe.WidthCurrent, g.PCIe.GenMax, g.PCIe.WidthMax,
			fmtOrDash(g.PowerDrawW, "%.0f W"), fmtOrDash(g.PowerLimitW, "%.0f W"), fmtOrDash(g.SMClockMHz, "%d"), fmtOrDash(g.MaxSMClockMHz, "%d MHz"),
			fmtOrDash(g.TemperatureC, "%d °C"), fmtOrDash(g.ECC.VolatileUncorrected, "%d"), fmtOrDash(g.ECC.AggregateUncorrected, "%d"), remap, ev, g.ClockEvents.Mask)
	}
	t.Flush()
	t = Columns(w)
	fmt.Fprintln(t, "GPU\tUUID\tSERIAL\tVBIOS\tARCH (CC)\tDRIVER / CUDA\tPERSIST\tECC\tRETIRED PEND\tXIDs\tNOT REPORTED")
	for _, gh := range h.GPUs {
		g := gh.GPU
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s (%s)\t%s / %s\t%s\t%s\t%s\t%d\t%d field(s)\n", g.Index, dash(g.UUID), dash(g.Serial), dash(g.VBIOS),
			dash(g.Architecture), dash(g.ComputeCapability), dash(g.DriverVersion), dash(g.CUDAVersion),
			bptr(g.Persistence), bptr(g.ECCEnabled), bptr(g.RetiredPagesPending), len(g.XIDs), len(g.Unsupported))
	}
	t.Flush()
}

func renderBench(w io.Writer, h *results.Health) {
	if !slices.ContainsFunc(h.GPUs, func(gh results.GPUHealth) bool { return len(gh.Bench) > 0 }) {
		return
	}
	fmt.Fprintln(w, "\nMicrobenchmarks (vs the datasheet peak of the detected GPU)")
	t := Columns(w)
	fmt.Fprintln(t, "GPU\tBENCHMARK\tMEASURED\tPEAK\tRATIO\tANSWER\tSTATUS\tBINDING")
	for _, gh := range h.GPUs {
		for i, b := range gh.Bench {
			bind := ""
			if i == 0 {
				bind = gh.Binding
			}
			if b.Status == results.StatusFailed {
				fmt.Fprintf(t, "%d\t%s\t-\t-\t-\t-\tfailed: %s\t%s\n", gh.GPU.Index, b.Name, b.Error, bind)
				continue
			}
			peak, ratio := "-", "-"
			if b.Peak != nil {
				peak = fmt.Sprintf("%s %s", compare.Num(*b.Peak), b.Unit)
				ratio = fmt.Sprintf("%.2f", *b.Ratio)
			}
			fmt.Fprintf(t, "%d\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\n", gh.GPU.Index, b.Name, compare.Num(b.Value), b.Unit, peak, ratio, answerCell(b.Check), b.Status, bind)
		}
	}
	t.Flush()
}

func renderBurn(w io.Writer, h *results.Health) {
	if !slices.ContainsFunc(h.GPUs, func(gh results.GPUHealth) bool { return gh.Burn != nil }) {
		return
	}
	fmt.Fprintf(w, "\nBurn (BF16 GEMM flat out, telemetry every second)\n")
	t := Columns(w)
	fmt.Fprintln(t, "GPU\tDURATION\tTFLOP/s\tRESULTS CHECKED / WRONG\tSAMPLES\tPOWER MEAN / MAX / LIMIT\tMIN SM CLK\tMAX TEMP\tREASONS SEEN\tERROR")
	for _, gh := range h.GPUs {
		b := gh.Burn
		if b == nil {
			continue
		}
		reasons := cmp.Or(strings.Join(b.ReasonsSeen, ","), "none")
		fmt.Fprintf(t, "%d\t%s\t%.1f\t%s\t%d\t%.0f / %.0f / %.0f W\t%d MHz\t%d °C\t%s\t%s\n", gh.GPU.Index, time.Duration(b.Duration), b.TFLOPS, checkCell(b.Check), len(b.Samples),
			b.PowerMeanW, b.PowerMaxW, b.PowerLimitW, b.MinSMClockMHz, b.MaxTempC, reasons, dash(b.Error))
	}
	t.Flush()
}

func renderCompare(w io.Writer, h *results.Health) {
	if len(h.Comparisons) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGPU-to-GPU")
	gpus := map[int]bool{}
	for _, c := range h.Comparisons {
		for _, v := range c.Values {
			gpus[v.GPU] = true
		}
	}
	idx := slices.Sorted(maps.Keys(gpus))
	t := Columns(w)
	head := "METRIC\tTOLERANCE"
	for _, i := range idx {
		head += fmt.Sprintf("\tGPU %d", i)
	}
	fmt.Fprintln(t, head+"\tWORST Δ\tFLAGGED")
	for _, c := range h.Comparisons {
		row := fmt.Sprintf("%s\t%g %%", c.Metric, c.VariancePct)
		worst := 0.0
		var flagged []string
		byGPU := map[int]results.CompareCell{}
		for _, v := range c.Values {
			byGPU[v.GPU] = v
			worst = max(worst, v.DeltaPct)
			if v.Flagged {
				flagged = append(flagged, fmt.Sprintf("gpu %d", v.GPU))
			}
		}
		for _, i := range idx {
			if v, ok := byGPU[i]; ok {
				row += "\t" + compare.Num(v.Value)
			} else {
				row += "\t-"
			}
		}
		fmt.Fprintf(t, "%s\t%.1f %%\t%s\n", row, worst, cmp.Or(strings.Join(flagged, ", "), "none"))
	}
	t.Flush()
}

func renderDCGM(w io.Writer, h *results.Health) {
	d := h.DCGM
	if d == nil {
		return
	}
	fmt.Fprintf(w, "\nDCGM diagnostic (level %d): %s", d.Level, d.Status)
	if d.Version != "" {
		fmt.Fprintf(w, ", DCGM %s", d.Version)
	}
	if d.Note != "" && d.Note != string(d.Status) {
		fmt.Fprintf(w, " (%s)", strings.TrimPrefix(d.Note, string(d.Status)+": "))
	}
	if d.Error != "" {
		fmt.Fprintf(w, " — error: %s", d.Error)
	}
	fmt.Fprintln(w)
	if len(d.Tests) == 0 {
		return
	}
	t := Columns(w)
	fmt.Fprintln(t, "TEST\tGPU\tRESULT\tINFO")
	for _, x := range d.Tests {
		g := "all"
		if x.GPU != nil {
			g = fmt.Sprint(*x.GPU)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", x.Name, g, x.Result, clip(x.Info, 100))
	}
	t.Flush()
}

func renderFlags(w io.Writer, h *results.Health) {
	var flags []results.Flag
	flags = append(flags, h.Flags...)
	for _, gh := range h.GPUs {
		flags = append(flags, gh.Flags...)
	}
	if len(flags) > 0 {
		fmt.Fprintln(w, "\nFlags")
		for _, f := range flags {
			fmt.Fprintln(w, "  "+flagLine(f))
		}
	}
	var notes []string
	notes = append(notes, h.Notes...)
	for _, gh := range h.GPUs {
		for _, n := range gh.Notes {
			notes = append(notes, fmt.Sprintf("gpu %d: %s", gh.GPU.Index, n))
		}
		if len(gh.GPU.Unsupported) > 0 {
			notes = append(notes, fmt.Sprintf("gpu %d: not reported by the source: %s", gh.GPU.Index, strings.Join(gh.GPU.Unsupported, "; ")))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes")
		for _, n := range notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
}

func clip(s string, n int) string {
	if len([]rune(s)) > n {
		return string([]rune(s)[:n]) + "…"
	}
	return dash(s)
}

func dash(s string) string { return cmp.Or(s, "-") }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func bptr(b *bool) string {
	if b == nil {
		return "-"
	}
	return yesNo(*b)
}

// fmtOrDash is *p in format, "-" for nil.
func fmtOrDash[T any](p *T, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

// checkCell is a result check in a table cell: "2132 / 0", "not checked".
func checkCell(c *results.ResultCheck) string {
	if c == nil {
		return "not checked"
	}
	s := fmt.Sprintf("%d / %d", c.Checked, c.Mismatches)
	if c.TileMismatches > 0 {
		s += fmt.Sprintf(" (tile: %d wrong)", c.TileMismatches)
	}
	return s
}

// answerCell is a microbenchmark's result check: "checked", "WRONG", "-" (a copy: nothing to check).
func answerCell(c *results.ResultCheck) string {
	switch {
	case c == nil:
		return "-"
	case c.Failed():
		return "WRONG"
	}
	return "checked"
}
