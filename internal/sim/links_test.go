package sim

import (
	"strings"
	"testing"
)

func TestParseLinkFault(t *testing.T) {
	for in, want := range map[string]gpuFault{"": {gpu: -1}, "1": {1, "down"}, "3:slow": {3, "slow"}, " 0:errors ": {0, "errors"}} {
		got, err := parseLinkFault(in, 4)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"4", "-1", "x", "1:flaky", "1:"} {
		if _, err := parseLinkFault(bad, 4); err == nil || !strings.Contains(err.Error(), "link fault") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	if _, err := NewFleet(FleetConfig{GPU: "L40S", Count: 2, StragglerIndex: -1, LinkFault: "0:down"}); err == nil || !strings.Contains(err.Error(), "no NVLink") {
		t.Errorf("a down NVLink on an L40S: err %v", err)
	}
}

func TestSimLinksFollowTheFault(t *testing.T) {
	f, err := NewFleet(FleetConfig{GPU: "H200", Count: 4, StragglerIndex: -1, Seed: 1, LinkFault: "2:slow"})
	if err != nil {
		t.Fatal(err)
	}
	good, _, _ := f.PeerCopy(0, 1)
	slow, _, _ := f.PeerCopy(0, 2)
	if good < 0.8*450 || slow > 0.45*450 {
		t.Errorf("healthy pair %v GB/s, pair with the slow GPU %v GB/s (peak 450)", good, slow)
	}
	if _, _, err := f.PeerCopy(0, 4); err == nil {
		t.Error("PeerCopy to GPU 4 of 4: no error")
	}
	ar := f.AllReduce([]int64{1 << 20, 1 << 30})
	if len(ar) != 2 || ar[1].BusBWGBps > 0.45*450 || ar[1].BusBWGBps != ar[1].AlgBWGBps*1.5 {
		t.Errorf("all-reduce over 4 with a slow GPU: %+v (busbw = algbw × 2·3/4)", ar)
	}
	f, _ = NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, LinkFault: "1:down"})
	ic, _ := f.Interconnect()
	if ic.Links[0].Up() != 16 || ic.Links[1].Up() != 16 || ic.Pairs[0].Path != "NV16" {
		t.Errorf("two GPUs joined directly, one link pair down at both ends: %d and %d up, %s", ic.Links[0].Up(), ic.Links[1].Up(), ic.Pairs[0].Path)
	}
}
