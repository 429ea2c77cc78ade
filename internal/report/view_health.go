package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

func buildHost(s *results.Summary, h results.Host, large bool) hostView {
	hv := hostView{Name: h.Name, Status: string(h.Status), Error: h.Error, Flags: countFlags(h.AllFlags())}
	hv.Discovery = h.Discovery.Source
	if h.Discovery.Note != "" {
		hv.Discovery += ": " + h.Discovery.Note
	}
	for _, v := range h.VMs {
		hv.VMs = append(hv.VMs, vmLine(v))
	}
	hv.Prep, hv.PrepBad = prepLines(h.Prep)
	for _, g := range h.GPUs {
		hv.GPUs = append(hv.GPUs, gpuVerdictView(g))
	}
	if h.Health != nil {
		hv.Health = buildHealth(h.Health, large)
	}
	for _, m := range h.Models {
		mv := buildModel(s, h, m, large, powerLimit(h))
		mv.Telemetry = telemetryCharts(m, maxClocks(h), powerLimit(h))
		hv.Models = append(hv.Models, mv)
	}
	return hv
}

// gpuVerdictView is one GPU's judged verdict as the host's header shows it: its status and, when
// not ok, what fired or what would decide it.
func gpuVerdictView(g results.GPUVerdict) gpuPill {
	v := gpuPill{GPU: strconv.Itoa(g.Index), Status: string(g.Status), Class: statusClass(g.Status)}
	if g.Action != "" && g.Action != results.ActionNone {
		v.Action = results.ActionWords[g.Action]
	}
	tip := []string{"health " + orDash(string(g.Health)), "serving " + orDash(string(g.Serving))}
	tip = append(tip, g.Checks...)
	tip = append(tip, g.Why...)
	v.Tip = strings.Join(tip, "; ")
	return v
}

func statusClass(st results.Status) string {
	switch st {
	case results.StatusOK, results.StatusInconclusive, results.StatusFlag, results.StatusFailed:
		return string(st)
	}
	return "skipped"
}

func buildHealth(h *results.Health, large bool) *healthView {
	hv := &healthView{Source: h.Source, Status: string(h.Status), Error: h.Error, Notes: h.Notes}
	hv.Open = !large || h.Status != results.StatusOK
	// The unit goes in the header, once, so the cells stay narrow: "54.1 · 81 %".
	units := map[string]string{}
	for _, g := range h.GPUs {
		for _, b := range g.Bench {
			if units[b.Name] == "" {
				units[b.Name] = b.Unit
			}
		}
	}
	// The schema's order (the order they ran in, as the terminal shows them); unknown names follow, sorted.
	var cols []string
	present := maps.Clone(units)
	for _, n := range results.MicrobenchNames() {
		if _, ok := present[n]; ok {
			cols = append(cols, n)
			delete(present, n)
		}
	}
	cols = append(cols, sortedKeys(present)...)
	for _, n := range cols {
		hv.BenchHeads = append(hv.BenchHeads, kv{n, units[n]})
	}
	dcgmByGPU := map[int][]results.DCGMTest{}
	if h.DCGM != nil {
		hv.DCGM = fmt.Sprintf("DCGM diag level %d", h.DCGM.Level)
		if h.DCGM.Version != "" {
			hv.DCGM += " (DCGM " + h.DCGM.Version + ")"
		}
		hv.DCGM += ": " + string(h.DCGM.Status)
		if h.DCGM.Note != "" {
			hv.DCGM += " — " + h.DCGM.Note
		}
		for _, t := range h.DCGM.Tests {
			if t.GPU != nil {
				dcgmByGPU[*t.GPU] = append(dcgmByGPU[*t.GPU], t)
			}
		}
	}
	// A figure the GPU-to-GPU comparison flagged is marked in the datasheet table too.
	type gm struct {
		gpu    int
		metric string
	}
	flagged := map[gm]string{}
	for _, c := range h.Comparisons {
		for _, v := range c.Values {
			if v.Flagged {
				flagged[gm{v.GPU, c.Metric}] = v.Reason
			}
		}
	}
	var burn []Series
	for _, g := range h.GPUs {
		hv.Inventory = append(hv.Inventory, inventoryRow(g))
		row := benchRow{GPU: strconv.Itoa(g.GPU.Index), Status: string(g.Status)}
		byName := map[string]results.Microbench{}
		for _, b := range g.Bench {
			byName[b.Name] = b
		}
		for _, n := range cols {
			b, ok := byName[n]
			if !ok {
				row.Cells = append(row.Cells, cell{Text: "—"})
				continue
			}
			c := benchCell(b)
			if reason, ok := flagged[gm{g.GPU.Index, n}]; ok && c.Class == "" {
				c.Class, c.Tip = "flag", strings.TrimPrefix(c.Tip+"; "+reason, "; ")
			}
			row.Cells = append(row.Cells, c)
		}
		row.Burn = burnCell(g.Burn)
		row.DCGM = dcgmCell(dcgmByGPU[g.GPU.Index], h.DCGM)
		hv.Bench = append(hv.Bench, row)
		if g.Burn != nil && len(g.Burn.Samples) > 0 {
			sr := Series{Name: "gpu " + strconv.Itoa(g.GPU.Index)}
			for _, p := range g.Burn.Samples {
				sr.Points = append(sr.Points, Point{X: p.T, Y: p.PowerW})
			}
			burn = append(burn, sr)
		}
	}
	if len(burn) > 0 {
		hv.Burn = LineChart{Title: "Power during the burn, per GPU", XLabel: "seconds", YLabel: "W", Series: burn, Refs: powerRefs(h)}.SVG()
	}
	hv.Compare = compares(h.Comparisons)
	pairFlags := map[string]bool{}
	for _, f := range h.Flags {
		pairFlags[f.Subject] = true
	}
	hv.Links = buildLinks(h, pairFlags)
	return hv
}

func powerRefs(h *results.Health) []RefLine {
	if l := powerLimit(results.Host{Health: h}); l > 0 {
		return []RefLine{{Y: l, Label: "power limit " + num(l) + " W"}}
	}
	return nil
}

func inventoryRow(g results.GPUHealth) invRow {
	i := g.GPU
	r := invRow{GPU: strconv.Itoa(i.Index), Name: i.Name, UUID: i.UUID, Bus: i.PCIBusID, Status: string(g.Status)}
	r.NUMA = strconv.Itoa(i.NUMANode)
	if i.NUMANode < 0 {
		r.NUMA = "unknown"
	}
	r.Memory = fmt.Sprintf("%.0f GiB", float64(i.MemoryTotalMiB)/1024)
	if i.PCIe.GenCurrent > 0 {
		r.PCIe = fmt.Sprintf("Gen%d x%d", i.PCIe.GenCurrent, i.PCIe.WidthCurrent)
		if i.PCIe.GenMax != i.PCIe.GenCurrent || i.PCIe.WidthMax != i.PCIe.WidthCurrent {
			r.PCIe += fmt.Sprintf(" (max Gen%d x%d)", i.PCIe.GenMax, i.PCIe.WidthMax)
		}
		r.PCIeBad = i.PCIe.WidthCurrent < i.PCIe.WidthMax
	} else {
		r.PCIe = "—"
	}
	r.ECC = "—"
	if i.ECC.VolatileUncorrected != nil || i.ECC.AggregateUncorrected != nil {
		r.ECC = fmt.Sprintf("%s / %s", i64s(i.ECC.VolatileUncorrected), i64s(i.ECC.AggregateUncorrected))
		r.ECCBad = (i.ECC.VolatileUncorrected != nil && *i.ECC.VolatileUncorrected > 0) || (i.ECC.AggregateUncorrected != nil && *i.ECC.AggregateUncorrected > 0)
	}
	if i.ECCEnabled != nil && !*i.ECCEnabled {
		r.ECC = "ECC off"
	}
	if i.RemappedRows != nil && (i.RemappedRows.Failure || i.RemappedRows.Uncorrectable > 0) {
		r.ECC += fmt.Sprintf("; remapped rows: %d uncorrectable", i.RemappedRows.Uncorrectable)
		r.ECCBad = true
	}
	r.Clocks = "—"
	if i.SMClockMHz != nil && i.MaxSMClockMHz != nil {
		r.Clocks = fmt.Sprintf("%d / %d MHz", *i.SMClockMHz, *i.MaxSMClockMHz)
	}
	r.Events = strings.Join(i.ClockEvents.Names, ", ")
	if len(i.XIDs) > 0 {
		var xs []string
		for _, x := range i.XIDs {
			xs = append(xs, strconv.FormatUint(x.XID, 10))
		}
		r.Events = strings.TrimPrefix(r.Events+"; XID "+strings.Join(xs, ", "), "; ")
		r.EventsBad = true
	}
	if r.Events == "" {
		r.Events = "none"
	}
	// 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake: the failure mask.
	r.EventsBad = r.EventsBad || i.ClockEvents.Mask&(0x8|0x20|0x40|0x80) != 0 // an XID is bad too
	if i.TemperatureC != nil {
		r.Temp = strconv.Itoa(*i.TemperatureC) + " °C"
	}
	if i.PowerDrawW != nil && i.PowerLimitW != nil {
		r.Power = fmt.Sprintf("%s / %s W", num(*i.PowerDrawW), num(*i.PowerLimitW))
	}
	return r
}

func i64s(p *int64) string {
	if p == nil {
		return "—"
	}
	return strconv.FormatInt(*p, 10)
}

func benchCell(b results.Microbench) cell {
	if b.Error != "" || b.Status == results.StatusFailed {
		return cell{Text: "failed", Class: "failed", Tip: b.Error}
	}
	c := cell{Text: num(b.Value), Tip: strings.TrimPrefix(b.Params+"; "+num(b.Value)+" "+b.Unit, "; ")}
	if b.Ratio != nil {
		c.Text += " · " + pct(*b.Ratio)
		if b.Peak != nil {
			c.Tip = strings.TrimPrefix(c.Tip+"; datasheet peak "+num(*b.Peak)+" "+b.Unit, "; ")
		}
	}
	c.Class = statusClass(b.Status)
	if b.Status == results.StatusOK {
		c.Class = ""
	}
	return c
}

func burnCell(b *results.Burn) cell {
	if b == nil {
		return cell{Text: "—"}
	}
	if b.Error != "" {
		return cell{Text: "failed", Class: "failed", Tip: b.Error}
	}
	c := cell{Text: fmt.Sprintf("%s TFLOP/s · %s W · ≥ %d MHz · ≤ %d °C", num(b.TFLOPS), num(b.PowerMeanW), b.MinSMClockMHz, b.MaxTempC)}
	c.Tip = fmt.Sprintf("%s; max %s W of %s W; clock events seen: %s", time.Duration(b.Duration), num(b.PowerMaxW), num(b.PowerLimitW), strings.Join(b.ReasonsSeen, ", "))
	for _, r := range b.ReasonsSeen {
		if r != "sw_power_cap" && r != "gpu_idle" && r != "applications_clocks_setting" && r != "sync_boost" {
			c.Class = "flag"
			c.Text += " · " + r
		}
	}
	return c
}

func dcgmCell(ts []results.DCGMTest, d *results.DCGM) cell {
	if d == nil {
		return cell{Text: "not run"}
	}
	if len(ts) == 0 {
		return cell{Text: string(d.Status), Class: statusClass(d.Status)}
	}
	counts := map[string]int{}
	var bad []string
	for _, t := range ts {
		counts[t.Result]++
		if t.Result == "fail" || t.Result == "warn" {
			bad = append(bad, t.Name+" "+t.Result)
		}
	}
	var parts []string
	for _, r := range []string{"pass", "warn", "fail", "skip"} {
		if counts[r] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
		}
	}
	c := cell{Text: strings.Join(parts, ", "), Tip: strings.Join(bad, "; ")}
	switch {
	case counts["fail"] > 0:
		c.Class = "failed"
	case counts["warn"] > 0:
		c.Class = "flag"
	}
	if len(bad) > 0 {
		c.Text += " (" + strings.Join(bad, ", ") + ")"
	}
	return c
}

func compares(cs []results.Compare) *compareTable {
	if len(cs) == 0 {
		return nil
	}
	t := &compareTable{}
	// One column per GPU, in index order; node-to-node cells (GPU -1) are one column per host, in
	// the order the comparisons list them.
	gpus, seen := map[int]bool{}, map[string]bool{}
	var hosts []string
	for _, c := range cs {
		for _, v := range c.Values {
			if v.Host == "" {
				gpus[v.GPU] = true
			} else if !seen[v.Host] {
				seen[v.Host] = true
				hosts = append(hosts, v.Host)
			}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(gpus)) {
		t.Cols = append(t.Cols, "gpu "+strconv.Itoa(g))
	}
	t.Cols = append(t.Cols, hosts...)
	for _, c := range cs {
		rule := fmt.Sprintf("within %g %% of the best", c.VariancePct)
		if c.Against == "peers_median" { // issue 35's interval rule
			rule = fmt.Sprintf("within %g %% of the median of the others, or the gap's interval reaching within it", c.VariancePct)
			if c.DetectablePct > 0 {
				rule += fmt.Sprintf("; this run would have caught one ≥ %s %% slower", num(c.DetectablePct))
			}
		}
		rule = map[bool]string{true: "higher", false: "lower"}[c.HigherIsBetter] + " is better; " + rule
		row := compareRow{Metric: c.Metric, Rule: rule, Best: num(c.Best), Note: c.Note}
		if c.LowConfidence {
			row.Note = strings.TrimPrefix(row.Note+"; low confidence: nothing flagged", "; ")
		}
		by := map[string]results.CompareCell{}
		for _, v := range c.Values {
			by[colKey(v)] = v
		}
		for _, col := range t.Cols {
			v, ok := by[col]
			if !ok {
				row.Cells = append(row.Cells, cell{Text: "—"})
				continue
			}
			cl := cell{Text: num(v.Value), Tip: v.Reason}
			if v.DeltaPct != 0 {
				cl.Text += fmt.Sprintf(" (%s)", signedPct(-v.DeltaPct))
			}
			switch {
			case v.Flagged:
				cl.Class = "flag"
			case v.LowerBound:
				cl.Class = "lb"
				cl.Text = "≥ " + cl.Text + " *"
			case v.Inconclusive || c.LowConfidence || c.ClientLimited: // the judge left the GPU undecided on it
				cl.Class = "inconclusive"
			}
			row.Cells = append(row.Cells, cl)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// colKey is the column of a comparison cell: its host in node-to-node comparisons, else its GPU.
func colKey(v results.CompareCell) string {
	if v.Host != "" {
		return v.Host
	}
	return "gpu " + strconv.Itoa(v.GPU)
}

func signedPct(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if v > 0 {
		s = "+" + s
	}
	return s + " %"
}

// vmLine says what a VM was: its GPUs by PCI address, the NUMA placement, how long it took to
// provision and whether it is gone.
func vmLine(v results.VM) string {
	numa := "NUMA node unknown"
	if v.NUMANode != nil {
		numa = fmt.Sprintf("NODE_AFFINITY %d", *v.NUMANode)
	}
	if v.NUMANode == nil && v.PinPolicy != "" {
		numa += ", PIN_POLICY " + v.PinPolicy
	}
	gone := "terminated"
	if !v.Terminated {
		gone = "NOT TERMINATED: run gpuvet clean"
	}
	return fmt.Sprintf("VM %d %s: GPUs %v (PCI %s), %s, provisioned in %.1f s, %s", v.ID, v.Name, v.GPUs, strings.Join(v.PCI, ", "), numa, v.ProvisionS, gone)
}

// prepLines is the report's "Host preparation" block: what the run found and used, installed,
// started, removed, released from and restored to vfio-pci, and what it left (bad: a leftover or an
// incomplete vfio restore, which `gpuvet clean` finishes from the run manifest).
func prepLines(p *results.HostPrep) ([]kv, bool) {
	if p == nil {
		return nil, false
	}
	var out []kv
	add := func(k string, v []string) {
		if len(v) > 0 {
			out = append(out, kv{k, strings.Join(v, ", ")})
		}
	}
	if p.Error != "" {
		out = append(out, kv{"not prepared", p.Error})
	}
	add("used (untouched)", p.Used)
	add("installed", p.Installed)
	add("started", p.Started)
	add("vfio", p.VFIO)
	add("removed after", p.Removed)
	if p.Autoremove != "" {
		out = append(out, kv{"autoremove", p.Autoremove})
	}
	add("left behind (gpuvet clean finishes it)", p.Left)
	if p.RestoreError != "" {
		out = append(out, kv{"vfio restore INCOMPLETE", p.RestoreError})
	}
	return out, len(p.Left) > 0 || p.RestoreError != ""
}
