package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// withLinks gives the sample's host a two-pair interconnect: 0–1 healthy, 0–2 slow and flagged, GPU
// 1 with a link down, and the all-reduce as given.
func withLinks(t *testing.T, ar *results.AllReduce) *results.Summary {
	s := readSample(t)
	h := s.Hosts[0].Health
	r := func(v float64) *float64 { return &v }
	h.Interconnect = &results.Interconnect{Source: "nvml",
		Links: []results.GPULinks{{GPU: 1, Links: []results.NVLink{{Link: 0, Up: true, GBps: 26.562, Errors: &results.LinkErrors{}}, {Link: 1}}}},
		Pairs: []results.GPUPair{
			{A: 0, B: 1, Path: "NV18", NVLinks: 18, P2P: "ok", PeakGBps: 478, Uni: &results.PairFigure{GBps: 394.7, Ratio: r(0.83)}, Bi: &results.PairFigure{GBps: 774.7, Ratio: r(0.81)}},
			{A: 0, B: 2, Path: "NV18", NVLinks: 18, P2P: "ok", PeakGBps: 478, Uni: &results.PairFigure{GBps: 190, Ratio: r(0.4)}, Bi: &results.PairFigure{GBps: 380, Ratio: r(0.4)}},
		},
		AllReduce: ar}
	h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: "gpu 0 ↔ gpu 2", Check: "health.p2p_bandwidth", Reason: "peer copy unidirectional 190 GB/s, 40 % of the link's 478 GB/s"})
	h.GPUs[1%len(h.GPUs)].Flags = append(h.GPUs[1%len(h.GPUs)].Flags, results.Flag{Scope: "gpu", Subject: "gpu 1", Check: "health.nvlink_down", Reason: "NVLink 1 down (1 of 2 up)"})
	return s
}

func TestJUnitInterconnect(t *testing.T) {
	ar := &results.AllReduce{Status: results.StatusSkipped, Note: "skipped: libnccl not found; point --nccl-lib at a libnccl.so.2"}
	s := withLinks(t, ar)
	if len(s.Hosts[0].Health.GPUs) < 2 {
		t.Skip("the sample has one GPU")
	}
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseJUnit(t, b)
	fails := failing(doc)
	const host = "gpuvet.health.gpu-node-01 "
	if !strings.Contains(fails[host+"interconnect.gpu0-gpu2"], "190 GB/s") {
		t.Errorf("slow pair: %q (failures %v)", fails[host+"interconnect.gpu0-gpu2"], fails)
	}
	if _, ok := fails[host+"interconnect.gpu0-gpu1"]; ok {
		t.Error("the healthy pair failed")
	}
	if !strings.Contains(fails["gpuvet.health.gpu-node-01.gpu1 health.nvlink"], "NVLink 1 down") {
		t.Errorf("gpu 1 nvlink: %v", fails)
	}
	skipped := false
	for _, su := range doc.Suites {
		for _, c := range su.Cases {
			if c.Name == "interconnect.all_reduce" && c.Skipped != nil && strings.Contains(c.Skipped.Message, "libnccl not found") {
				skipped = true
			}
		}
	}
	if !skipped {
		t.Error("the all-reduce without NCCL is not a skipped case saying why")
	}
}

func TestHTMLInterconnect(t *testing.T) {
	ar := &results.AllReduce{Status: results.StatusOK, NCCL: "2.28.3", GPUs: 2, Dtype: "float32", Lib: "/usr/lib/x86_64-linux-gnu/libnccl.so.2", PeakGBps: 478,
		Sizes: []results.AllReduceSize{{Bytes: 1 << 30, TimeUs: 3275.8, AlgBWGBps: 327.8, BusBWGBps: 327.8}}}
	html := render(t, withLinks(t, ar))
	for _, want := range []string{"Interconnect", "<td class=\"c mono\">NV18</td>", "394.7 · 83 %", "774.7 · 81 %", "NCCL 2.28.3 over 2 GPUs", "1 GiB", "327.8", "1 / 2"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(html, `<td class="r flag">190.0 · 40 %</td>`) {
		t.Error("the flagged pair is not marked in the table")
	}
}
