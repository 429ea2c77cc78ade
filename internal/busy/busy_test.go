package busy

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func p[T any](v T) *T { return &v }

func TestReason(t *testing.T) {
	idle := results.Occupancy{ProcessesListed: true, MemoryUsedMiB: p(int64(618)), UtilPct: p(0), PowerW: p(80.3), PowerLimitW: p(700.0)}
	own := results.GPUProcess{PID: 10, Name: "gpuvet", UsedMiB: p(int64(70000)), Own: true}
	other := results.GPUProcess{PID: 4242, Name: "python3", UsedMiB: p(int64(8294))}
	with := func(o results.Occupancy, f func(*results.Occupancy)) results.Occupancy { f(&o); return o }
	for _, c := range []struct {
		name string
		o    results.Occupancy
		opt  Options
		want string
	}{
		{"idle H200", idle, Options{}, ""},
		// Right after a load (fixtures/h200 after-load): 124 W, 23 %: settling, not busy.
		{"after a load", with(idle, func(o *results.Occupancy) { o.PowerW, o.UtilPct = p(124.8), p(23) }), Options{}, ""},
		{"own engine", with(idle, func(o *results.Occupancy) {
			o.Processes = []results.GPUProcess{own}
			o.MemoryUsedMiB, o.UtilPct, o.PowerW = p(int64(70618)), p(100), p(690.0)
		}), Options{DuringLoad: true}, ""},
		{"co-tenant", with(idle, func(o *results.Occupancy) { o.Processes = []results.GPUProcess{own, other} }), Options{}, "busy: PID 4242 python3, 8.1 GiB"},
		{"known co-tenant", with(idle, func(o *results.Occupancy) {
			o.Processes = []results.GPUProcess{other}
			o.MemoryUsedMiB = p(int64(8900))
		}),
			Options{DuringLoad: true, Known: map[int]bool{4242: true}}, ""},
		{"hidden PID", with(idle, func(o *results.Occupancy) {
			o.Processes = []results.GPUProcess{{PID: 77, UsedMiB: p(int64(512)), Hidden: true}}
		}), Options{}, "busy: PID 77 (not in this PID namespace: another container or the host), 512 MiB"},
		{"hidden load", with(idle, func(o *results.Occupancy) { o.PowerW, o.UtilPct, o.MemoryUsedMiB = p(693.1), p(100), p(int64(8310)) }),
			Options{}, "not idle: 693 W, 100 % utilization, 8.1 GiB in use, no process visible"},
		{"no process list", with(idle, func(o *results.Occupancy) { o.ProcessesListed = false; o.PowerW = p(400.0) }),
			Options{}, "not idle: 400 W, no process list from this source"},
		{"load during the engine's load is its own", with(idle, func(o *results.Occupancy) { o.PowerW, o.UtilPct = p(693.1), p(100) }), Options{DuringLoad: true}, ""},
		{"memory growing past the baseline", with(idle, func(o *results.Occupancy) {
			o.Processes = []results.GPUProcess{own}
			o.MemoryUsedMiB = p(int64(70618 + 3000))
		}), Options{DuringLoad: true, BaselineMiB: 618}, "not idle: 2.9 GiB in use, no process visible"},
	} {
		if got := Reason(c.o, c.opt); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Least keeps the least utilisation and power of a settling GPU, and the processes and memory of
// the last reading: a process that exited meanwhile (an engine gpuvet just stopped) is not busy.
func TestLeast(t *testing.T) {
	dying := results.Occupancy{ProcessesListed: true, UtilPct: p(23), PowerW: p(124.0), MemoryUsedMiB: p(int64(40000)), PowerLimitW: p(700.0),
		Processes: []results.GPUProcess{{PID: 9, Name: "python3", UsedMiB: p(int64(39000))}}}
	settled := results.Occupancy{ProcessesListed: true, UtilPct: p(0), PowerW: p(81.0), MemoryUsedMiB: p(int64(618)), Notes: []string{"n"}}
	x := Least([]results.Occupancy{dying, settled, settled})
	if *x.UtilPct != 0 || *x.PowerW != 81 || *x.MemoryUsedMiB != 618 || len(x.Processes) != 0 || x.Samples != 3 || len(x.Notes) != 1 || x.PowerLimitW == nil {
		t.Errorf("%+v", x)
	}
	if r := Reason(x, Options{}); r != "" {
		t.Errorf("reason %q", r)
	}
	cotenant := settled
	cotenant.Processes = []results.GPUProcess{{PID: 5, Name: "x"}}
	if r := Reason(Least([]results.Occupancy{cotenant, cotenant}), Options{}); !strings.HasPrefix(r, "busy: PID 5 x") {
		t.Errorf("reason %q", r)
	}
}
