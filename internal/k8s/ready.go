package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gpuvet/gpuvet/internal/inpod"
)

// Ready means every replica is Ready and a real completion came back from it: an engine pod's from
// its load Job's first step (node.go), a Dynamo frontend's from a probe Job of its own here. Either
// goes from a Job on the node, not through the API server's pod proxy: the load's own network
// path, no pods/proxy permission, and it works where the API server cannot reach the pod network
// (the proxy also refuses loopback and link-local pod addresses).

// RoleReady is the readiness Job's role.
const RoleReady = "ready"

// checkCompletions runs one probe Job on the node against urls and returns each one's failure
// ("" when a completion came back). err: the Job gave no answer at all.
func (h *nodeHost) checkCompletions(ctx context.Context, name, model string, urls []string) ([]string, error) {
	r := h.r
	const out = "ready.json"
	args := inpod.Command("", out, "probe", "--model", model, "--out", out)
	for _, u := range urls {
		args = append(args, "--url", u)
	}
	j := gpuvetJob(r.opt.RunID, name, RoleReady, h.node.Name, r.opt.Image, args, 0, r.opt.Selection.Tolerations)
	b, err := h.runJob(ctx, r.ns, j)
	if b == nil {
		return nil, fmt.Errorf("completion check job %s: %w", name, err)
	}
	return completionFailures(b, urls)
}

// completionFailures reads the probe's result: one failure per url ("" for a real completion).
func completionFailures(b []byte, urls []string) ([]string, error) {
	var res []CompletionCheck
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("completion check result: %w", err)
	}
	by := map[string]CompletionCheck{}
	for _, c := range res {
		by[c.URL] = c
	}
	fails := make([]string, len(urls))
	for i, u := range urls {
		c, ok := by[u]
		switch {
		case !ok:
			fails[i] = "no completion check result for " + u
		case c.Error != "":
			fails[i] = fmt.Sprintf("Ready, but a real completion failed after %.1fs: %s", c.Seconds, c.Error)
		case c.Tokens < 1:
			fails[i] = "Ready, but the completion returned no tokens"
		}
	}
	return fails, nil
}

// podURLs are the engine pods' addresses (an error names a pod without one).
func (h *nodeHost) podURLs(ctx context.Context, pods []string) ([]string, error) {
	urls := make([]string, len(pods))
	for i, pod := range pods {
		ip, err := podAddress(ctx, h.r.cl.Client, h.r.podNS(), pod)
		if err != nil || ip == "" {
			return nil, fmt.Errorf("engine pod %s has no address (%w)", pod, err)
		}
		urls[i] = "http://" + ip + ":" + strconv.Itoa(EnginePort)
	}
	return urls, nil
}
