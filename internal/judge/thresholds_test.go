package judge

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The thresholds table is the one home of every default: the judge's, the health rules' and the
// configuration's built-in values all agree with it, and every row names its source.
func TestThresholdsTableIsTheDefaults(t *testing.T) {
	c := config.Defaults()
	for key, got := range map[string]float64{
		results.ThTTFTP95Ms: *c.Gates.TTFTP95Ms, results.ThITLP95Ms: *c.Gates.ITLP95Ms, results.ThAICRTolerancePct: c.Gates.AICRTolerancePct,
		results.ThMaxErrorRatePct: *c.Gates.MaxErrorRatePct, results.ThLLMVariancePct: c.Compare.VariancePct, results.ThGEMMVariancePct: c.Compare.GEMMVariancePct,
		results.ThMinSamples: float64(c.Compare.MinSamples), results.ThCompareMinReqS: c.Compare.MinThroughputReqS, results.ThMinTTFTDeltaMs: c.Compare.MinTTFTDeltaMs,
		results.ThBaselineTolerance: c.Compare.BaselineTolerancePc, results.ThPCIeMinGBps: c.Health.PCIeMinGBs, results.ThDriftPct: c.History.DriftPct,
		results.ThCalibTTFTMarginPct: DefaultCalibrateOptions().TTFTMarginPct, results.ThCalibThrMarginPct: DefaultCalibrateOptions().ThroughputMarginPct,
	} {
		if want := results.DefaultOf(key); got != want {
			t.Errorf("%s: the default in force is %g, the thresholds table says %g", key, got, want)
		}
	}
	d, r := DefaultConfig(), DefaultHealthRules()
	for key, got := range map[string]float64{results.ThTTFTP95Ms: *d.Gates.TTFTP95Ms.Value, results.ThLLMVariancePct: *d.LLMVariancePct.Value,
		results.ThMaxErrorRatePct: *d.MaxErrorRatePct.Value, results.ThPCIeMinGBps: r.MinPCIeGBps, results.ThGEMMVariancePct: r.GEMMVariancePct,
		results.ThPCIeVariancePct: r.PCIeVariancePct, results.ThLinkVariancePct: r.LinkVariancePct} {
		if want := results.DefaultOf(key); got != want {
			t.Errorf("%s: judge's default is %g, the table says %g", key, got, want)
		}
	}
	seen := map[string]bool{}
	for _, th := range results.Thresholds {
		if seen[th.Key] || th.Where == "" || (th.Source != results.FromSeed && th.Source != results.FromDatasheet && th.Source != results.FromMeasured) {
			t.Errorf("row %+v: a key once, with a source and where it comes from", th)
		}
		seen[th.Key] = true
	}
	if ClockFailureMask != 0xe8 {
		t.Errorf("ClockFailureMask = %#x, want 0xe8 (0x8|0x20|0x40|0x80)", ClockFailureMask)
	}
}

// docs/thresholds.md prints the table: every key with its default and source.
func TestThresholdsDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/thresholds.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range results.Thresholds {
		d := fmtNum(th.Default)
		if th.Key == results.ThFloors {
			d = "per benchmark"
		}
		if th.Off {
			d = "off"
		}
		if row := fmt.Sprintf("| `%s` | %s | %s | %s |", th.Key, d, th.Unit, th.Source); !strings.Contains(string(b), row) {
			t.Errorf("docs/thresholds.md lacks %q", row)
		}
	}
}

// docs/detection.md prints the layer table: every check's layer, verdict, action and gate.
func TestLayerTableDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/detection.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range layerTable() {
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/detection.md lacks %q", row)
		}
	}
}

// byFinding: the checks whose verdict depends on what each finding says (Flag.Fails).
var byFinding = map[string]string{
	CheckRecoveryAction: "the GPU failed",
	CheckRemap:          "the GPU flag (a pending remap) or failed (remapping failed)",
	CheckKernelLog:      "the GPU failed (fallen off the bus, requires reset, init failed) or flag (a GSP timeout, another Xid)",
	CheckErrorRate:      "the GPU failed",
}

// layerTable is the layer table as the rows of docs/detection.md's table (finding, layer, verdict,
// action, what a gate does), in check order: only the doc prints it, so only its test builds it.
func layerTable() []string {
	checks := make([]string, 0, len(checkKinds))
	for c := range checkKinds {
		checks = append(checks, c)
	}
	slices.Sort(checks)
	var out []string
	for _, c := range checks {
		k := checkKinds[c]
		name := "`" + c + "`"
		if strings.HasSuffix(c, ".") {
			name = "`" + c + "*` (others)"
		}
		verdict, gate := "the GPU flag", "acts: a drain, a taint, the gate's quarantine"
		switch {
		case byFinding[c] != "":
			verdict = byFinding[c]
		case results.GPULayer(k.layer) && failingChecks[c]:
			verdict = "the GPU failed"
		case k.layer == results.LayerHost:
			verdict = "the host flag; the GPU not proven (inconclusive)"
		case c == checkClientLimited || c == checkUndecided:
			verdict, gate = "the GPUs it names and the run inconclusive, never a flag", "none: the node stays pending"
		case !results.HardwareLayer(k.layer):
			verdict, gate = "the endpoint and the run flag, never the GPU", "none"
			if c == CheckEngineFault || c == CheckNetworkFault {
				verdict = "the endpoint and the run failed above `gates.max_error_rate_pct`, flag at or under it; the GPU not proven"
			}
			if c == CheckAppXIDLoad {
				verdict = "the endpoint and the run flag; the GPU not proven (inconclusive)"
			}
		}
		out = append(out, fmt.Sprintf("| %s | %s | %s | `%s` | %s |", name, k.layer, verdict, k.action, gate))
	}
	return out
}
