package results

import "time"

// DefaultLoadConfig is the load profile used where nothing says otherwise (the seed's shared
// guidellm profile). It is the one home of these values: config's built-in defaults, the load
// generator's fill-in of unset fields and `gpuvet bench`'s flag defaults all read it, and a test in
// each of them fails if it stops doing so.
//
// It lives here, beside LoadConfig, because results is the schema and imports nothing: config and
// load both read results already, while neither can import the other (config would pull in the
// HTTP client, load would pull in the whole run configuration). A function, not a variable, so no
// caller can change the defaults of another.
func DefaultLoadConfig() LoadConfig {
	return LoadConfig{
		Profile: "sweep", API: "chat", PromptTokens: 512, OutputTokens: 256,
		MaxConcurrency: 128, Concurrency: 256, Rates: 10, MaxDuration: Duration(20 * time.Second),
		Warmup: "1", Data: "synthetic", Seed: 42, Reader: "auto",
		MinSamples: 30, MaxRungDuration: Duration(3 * time.Minute),
	}
}

// MicrobenchNames are the health phase's microbenchmarks (Microbench.Name), in the order it runs
// them: the one list the CUDA runner, the simulator, the health phase and the reports read. A new
// benchmark is one more name here (and its implementation in cuda and sim, which their tests ask for).
func MicrobenchNames() []string {
	return []string{"sgemm_fp32", "gemm_tf32", "gemm_bf16", "pcie_h2d", "pcie_d2h", "hbm_d2d"}
}
