package judge

import (
	"fmt"
	"os"
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
	for _, row := range LayerTable() {
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/detection.md lacks %q", row)
		}
	}
}
