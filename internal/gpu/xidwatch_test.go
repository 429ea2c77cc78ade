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
	srv.LookupSymbolFunc = func(string) error { return nil }
	var waits atomic.Int64
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			waits.Add(1)
			return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	for _, d := range srv.Devices {
		d.(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	srv.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
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
