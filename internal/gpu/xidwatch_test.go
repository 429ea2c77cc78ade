package gpu

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// TestXIDWatcherDoesNotSpin: nvmlEventSetWait that fails at once (a GPU fallen off the bus answers
// GPU_IS_LOST without waiting) must not turn the watcher into a loop that burns a core for the whole
// run (the load's client shares those cores); a timeout is waited, other errors are waited too.
func TestXIDWatcherDoesNotSpin(t *testing.T) {
	srv := dgxh200.New()
	var waits atomic.Int64
	withEvents(srv, func(uint32) (nvml.EventData, nvml.Return) {
		waits.Add(1)
		return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
	})
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s", d)
	}
	if n := waits.Load(); n > 10 {
		t.Errorf("%d nvmlEventSetWait calls in 300 ms: the watcher spins on an immediate error", n)
	}
}

// An XID from a GPU that can no longer answer nvmlDeviceGetUUID (XID 79: fallen off the bus) is
// still that GPU's: the event's device is matched by its handle first. Matched by UUID alone it was
// put on every GPU's record, and the judge flagged all eight for one card.
func TestXIDOfALostGPUIsItsOwn(t *testing.T) {
	srv := dgxh200.New()
	lost := srv.Devices[3].(*server.Device)
	lost.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	var sent atomic.Bool
	withEvents(srv, func(uint32) (nvml.EventData, nvml.Return) {
		if sent.CompareAndSwap(false, true) {
			return nvml.EventData{Device: lost, EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS
		}
		time.Sleep(10 * time.Millisecond)
		return nvml.EventData{}, nvml.ERROR_TIMEOUT
	})
	src, err := openNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for deadline := time.Now().Add(2 * time.Second); !sent.Load() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for i := range srv.Devices {
		if n, want := len(src.xidsOf(i)), map[bool]int{true: 1, false: 0}[i == 3]; n != want {
			t.Errorf("GPU %d has %d XIDs, want %d", i, n, want)
		}
	}
}

// withEvents gives the mock server an XID event set whose nvmlEventSetWait is wait.
func withEvents(srv *server.Server, wait func(uint32) (nvml.EventData, nvml.Return)) {
	srv.LookupSymbolFunc = func(string) error { return nil }
	set := &mock.EventSet{WaitFunc: wait, FreeFunc: func() nvml.Return { return nvml.SUCCESS }}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	for _, d := range srv.Devices {
		d.(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	srv.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
}
