package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// RunOptions is `gpuvet sim`: one or more simulated endpoints on consecutive ports.
type RunOptions struct {
	Config                 // per-endpoint settings; Fleet and GPUIndex are filled in here
	GPUs           int     // virtual GPUs; one endpoint per GPU, or per TP group of Engine.TP GPUs
	Host           string  // listen host (default 127.0.0.1)
	Port           int     // first port; endpoint g listens on Port+g (0: any free ports)
	TracePath      string  // --trace FILE: JSONL ground truth of every endpoint
	StragglerIndex int     // -1: none
	StragglerPct   float64 // percent slower
	Out            io.Writer
}

// UsageError is bad input found before anything started (the CLI exits 2 on it).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Run starts the endpoints, prints where they listen, and serves until ctx ends.
func Run(ctx context.Context, o RunOptions) error {
	if o.GPUs < 1 {
		return &UsageError{fmt.Errorf("--gpus: must be ≥ 1, got %d", o.GPUs)}
	}
	tp := max(o.Engine.TP, 1)
	if o.GPUs%tp != 0 {
		return &UsageError{fmt.Errorf("--tp: %d does not divide --gpus %d; each engine takes tp GPUs", tp, o.GPUs)}
	}
	if o.Port < 0 || o.Port+o.GPUs/tp-1 > 65535 {
		return &UsageError{fmt.Errorf("--port: %d leaves no room for %d endpoints below 65536", o.Port, o.GPUs/tp)}
	}
	o.Host, o.Out = cmp.Or(o.Host, "127.0.0.1"), cmp.Or(o.Out, io.Discard)
	gpu := o.GPU
	if gpu == "" && o.Fixed() {
		gpu = "H100" // fixed mode needs no roofline; the virtual GPUs still need a datasheet
	}
	fleet, err := NewFleet(FleetConfig{GPU: gpu, Count: o.GPUs, StragglerIndex: o.StragglerIndex, StragglerPct: o.StragglerPct, Seed: o.Seed, Catalog: o.Catalog})
	if err != nil {
		return &UsageError{flagErr(err)}
	}
	defer fleet.Close()
	var traceFile *os.File
	if o.TracePath != "" {
		traceFile, err = os.Create(o.TracePath)
		if err != nil {
			return &UsageError{fmt.Errorf("--trace: %w", err)}
		}
		defer traceFile.Close()
	}
	var servers []*Server
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for g := 0; g < o.GPUs/tp; g++ {
		cfg := o.Config
		cfg.Fleet, cfg.GPUIndex = fleet, g*tp
		cfg.Log = cmp.Or(cfg.Log, o.Out)
		if traceFile != nil {
			cfg.Trace = traceFile
		}
		port := 0
		if o.Port > 0 {
			port = o.Port + g
		}
		s, err := Listen(cfg, net.JoinHostPort(o.Host, strconv.Itoa(port)))
		if err != nil {
			if g == 0 && !strings.HasPrefix(err.Error(), "listen on") {
				return &UsageError{flagErr(err)}
			}
			return err
		}
		s.name = s.Addr().String()
		servers = append(servers, s)
		mode := fmt.Sprintf("%s, fixed TTFT %v ITL %v jitter %.0f %%", cfg.Model, s.cfg.TTFT, s.cfg.ITL, cfg.Jitter*100)
		if !cfg.Fixed() {
			mode = fmt.Sprintf("%s on %s (tp=%d, KV %d tokens)", cfg.Model, fleet.GPU().Names[0], tp, s.perf.KVTokens())
		}
		fmt.Fprintf(o.Out, "gpuvet sim: GPU %d-%d  %s/v1  %s\n", g*tp, g*tp+tp-1, s.URL(), mode)
	}
	<-ctx.Done()
	return nil
}

// flagErr renames the field a library error starts with to the CLI flag that sets it.
func flagErr(err error) error {
	msg := err.Error()
	for _, r := range []struct{ field, flag string }{
		{"gpu:", "--gpu:"}, {"count:", "--gpus:"}, {"straggler index:", "--straggler:"}, {"straggler pct:", "--straggler-pct:"},
		{"model:", "--model:"}, {"jitter:", "--jitter:"}, {"ttft/itl:", "--ttft/--itl:"}, {"fault-", "--fault-"},
		{"stall / slow-start:", "--fault-stall-for / --slow-start:"}, {"gpu_memory_utilization:", "--gpu-memory-utilization:"},
		{"engine config:", "--tp/--max-num-seqs/--max-num-batched-tokens:"},
	} {
		if strings.HasPrefix(msg, r.field) {
			return fmt.Errorf("%s%s", r.flag, msg[len(r.field):])
		}
	}
	if strings.Contains(msg, "does not fit on") {
		return fmt.Errorf("--model/--gpu/--tp: %s", msg)
	}
	return err
}

// fleetHandler serves the virtual GPUs for out-of-process readers: GET /sim/gpus (inventory) and
// GET /sim/sample?gpu=I (one power/clock/temperature reading).
func (s *Server) fleetHandler(w http.ResponseWriter, r *http.Request) {
	f := s.cfg.Fleet
	if f == nil {
		writeErr(w, &apiError{Status: 404, Type: "NotFoundError", Message: "this server runs on no virtual GPUs"})
		return
	}
	if r.URL.Path == "/sim/gpus" {
		g, _ := f.GPUs()
		writeJSON(w, 200, g)
		return
	}
	i, err := strconv.Atoi(r.URL.Query().Get("gpu"))
	if err != nil {
		writeErr(w, badRequest("gpu", "gpu: expected an integer GPU index, got %q", r.URL.Query().Get("gpu")))
		return
	}
	smp, err := f.Sample(i)
	if err != nil {
		writeErr(w, badRequest("gpu", "%v", err))
		return
	}
	b, _ := json.Marshal(smp)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
