package functional

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// greedyServer answers chat completions with ids derived from the prompt. refuse: a 400 naming
// return_token_ids (an engine that rejects unknown fields); flaky: from the 7th request on (the
// second pass), token 3 of every answer changes.
func greedyServer(refuse, flaky bool) *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		json.NewDecoder(r.Body).Decode(&req)
		if _, asked := req["return_token_ids"]; asked && refuse {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"return_token_ids: extra inputs are not permitted"}}`)
			return
		}
		k := n.Add(1)
		msgs := req["messages"].([]any)
		prompt := msgs[0].(map[string]any)["content"].(string)
		ids, words := []int{}, []string{}
		for i := 0; i < int(req["max_tokens"].(float64)); i++ {
			id := (len(prompt)*31 + i*7) % 1000
			if flaky && k > int64(2*len(greedyPrompts)) && i == 3 {
				id++
			}
			ids, words = append(ids, id), append(words, fmt.Sprintf("w%d", id))
		}
		choice := map[string]any{"message": map[string]string{"content": strings.Join(words, " ")}, "finish_reason": "length"}
		if _, asked := req["return_token_ids"]; asked {
			choice["token_ids"] = ids
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{choice}})
	}))
}

func greedyCase(t *testing.T, url, model string) *results.GreedyOutputs {
	t.Helper()
	s := &suite{o: Options{URL: url, Model: model, Timeout: 10e9, Client: http.DefaultClient}}
	detail, err := s.greedy(context.Background())
	if err != nil {
		t.Fatalf("greedy case: %v", err)
	}
	if s.greedyOut == nil || len(s.greedyOut.Outputs) != len(greedyPrompts) {
		t.Fatalf("outputs %+v (%s)", s.greedyOut, detail)
	}
	return s.greedyOut
}

func TestGreedyCaseComparesTokenIDsWhereTheEngineGivesThem(t *testing.T) {
	srv := greedyServer(false, false)
	defer srv.Close()
	g := greedyCase(t, srv.URL, "m")
	if g.Basis != "token_ids" || g.BasisNote != "" || g.RepeatDiff != nil || len(g.Outputs[0].TokenIDs) != greedyTokens {
		t.Errorf("%+v", g)
	}
}

func TestGreedyCaseFallsBackToTextWhenTokenIDsAreRefused(t *testing.T) {
	srv := greedyServer(true, false)
	defer srv.Close()
	g := greedyCase(t, srv.URL, "m")
	if g.Basis != "text" || !strings.Contains(g.BasisNote, "refused return_token_ids") || g.RepeatDiff != nil || g.Outputs[0].Text == "" {
		t.Errorf("%+v", g)
	}
}

func TestGreedyCaseSeesARepeatThatDiffers(t *testing.T) {
	srv := greedyServer(false, true)
	defer srv.Close()
	g := greedyCase(t, srv.URL, "m")
	if d := g.RepeatDiff; d == nil || d.Prompt != 0 || d.Position != 3 || d.Unit != "token" {
		t.Fatalf("repeat diff %+v", d)
	}
}

// The simulator gives token ids and the same tokens on a repeat; a corrupt GPU's drift from
// sim.CorruptDrift on, and only there.
func TestGreedyCaseAgainstTheSimulator(t *testing.T) {
	fleet, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, Corrupt: "1"})
	if err != nil {
		t.Fatal(err)
	}
	var outs []*results.GreedyOutputs
	for i := 0; i < 2; i++ {
		srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Engine: sim.EngineConfig{MaxModelLen: 1024}, Fleet: fleet, GPUIndex: i}, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		outs = append(outs, greedyCase(t, srv.URL(), "Qwen/Qwen3-8B"))
	}
	for i, g := range outs {
		if g.Basis != "token_ids" || g.RepeatDiff != nil {
			t.Errorf("gpu %d: basis %s repeat %v", i, g.Basis, g.RepeatDiff)
		}
	}
	d := outs[1].FirstDiff(outs[0])
	if d == nil || d.Prompt != 0 || d.Position != sim.CorruptDrift || d.Unit != "token" {
		t.Errorf("corrupt GPU's diff %+v, want prompt 0 token %d", d, sim.CorruptDrift)
	}
}
