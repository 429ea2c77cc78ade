package config

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Phases are the names --fail-in accepts.
var Phases = []string{"discover", "health", "serve", "warmup", "load", "functional", "judge", "write"}

// The forms of the sim faults, to catch a typo before anything starts; the simulator's parsers are
// the rules' home.
var (
	linkFaultRe      = regexp.MustCompile(`^(\d+)(:(down|slow|errors))?$`)
	coTenantRe       = regexp.MustCompile(`^(\d+)(:[0-9a-zµ.]+(-[0-9a-zµ.]+)?)?$`)
	corruptRe        = regexp.MustCompile(`^(\d+)$`)
	hbmHiddenRe      = regexp.MustCompile(`^(\d+)(:0?\.\d*[1-9]\d*)?$`)
	engineFaultRe    = regexp.MustCompile(`^(\d+):(short|cut|traceback|exit|hub)$`)
	recoveryActionRe = regexp.MustCompile(`^(\d+):(reset|reboot|drain-p2p|drain-and-reset)$`)
	driverFaultRe    = regexp.MustCompile(`^(\d+):(remap-pending|remap-failure|fabric|fallen-off-bus|requires-reset|rm-init|gsp-timeout)$`)
	throttleRe       = regexp.MustCompile(`^(\d+)(:(hw_slowdown|sw_thermal_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown)?(:[0-9a-zµ.]+(-[0-9a-zµ.]+)?)?)?$`)
)

// validSimGPU checks a sim fault of the form re whose first group is a GPU index ("" is none).
func validSimGPU(s string, gpus int, re *regexp.Regexp) bool {
	if s == "" {
		return true
	}
	m := re.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err == nil && n < gpus
}

// envNameRe is the form of an environment variable's name.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// HistoryStore is what history.url names: its one parse (config's validation, the history store).
type HistoryStore struct {
	Dialect string   // "sqlite" or "postgres"; "" when history.url is empty (the default SQLite file)
	Path    string   // sqlite: the database file
	URL     *url.URL // postgres: the connection URL (never with a password)
}

// ParseHistoryURL parses history.url; the error says what is wrong and what is wanted.
func ParseHistoryURL(raw string) (HistoryStore, error) {
	if raw == "" {
		return HistoryStore{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return HistoryStore{}, errors.New("want sqlite:///path/history.db or postgres://user@host:port/db (the URL does not parse)")
	}
	switch u.Scheme {
	case "sqlite":
		if u.Path == "" {
			return HistoryStore{}, errors.New("want sqlite:///path/history.db (an absolute path after sqlite://)")
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
			return HistoryStore{}, fmt.Errorf("want sqlite:///path/history.db without ? or #: gpuvet sets the database's options itself, and a ? or # cuts the file name (here to %s)", u.Path)
		}
		if u.Host != "" { // sqlite://data/h.db: "data" is the URL's host, and the file would be /h.db
			return HistoryStore{}, fmt.Errorf("want sqlite:///path/history.db (three slashes, an absolute path): %q is read as a host, and the file would be %s", u.Host, u.Path)
		}
		return HistoryStore{Dialect: "sqlite", Path: u.Path}, nil
	case "postgres", "postgresql":
		if _, has := u.User.Password(); has || u.Query().Has("password") {
			return HistoryStore{}, errors.New("a password in history.url would be recorded and shown: remove it and put it in the variable history.password_env names (default PGPASSWORD)")
		}
		return HistoryStore{Dialect: "postgres", URL: u}, nil
	}
	return HistoryStore{}, fmt.Errorf("scheme %q: want sqlite:///path/history.db or postgres://user@host:port/db", u.Scheme)
}

// errCheck is the rule a parser's error makes over path: its words are the message.
func errCheck(path string, err error) check {
	if err != nil {
		return check{path, true, err.Error()}
	}
	return check{path: path}
}

// errOf is a parser's error, its value dropped.
func errOf[T any](_ T, err error) error { return err }

// floorNames are the benchmarks reference_floors may name (results.MicrobenchNames and the three
// floors beside them).
func floorNames() []string {
	return append(results.MicrobenchNames(), results.FloorBurn, results.FloorPeerCopy, results.FloorAllReduce)
}

// check is one rule over a resolved value.
type check struct {
	path string
	bad  bool
	msg  string
}

// maxModels bounds models: each is served on every GPU in turn, so thousands cannot be meant.
const maxModels = 256

// validate checks values no schema type can: ranges, enums, combinations. Errors name the value's
// source and key path, after prefix (an accelerators entry's).
func validate(c Config, sources map[string]string, prefix string) error {
	oneOf := func(v string, allowed ...string) bool { return !slices.Contains(allowed, v) }
	pos := func(v *float64) bool { return v != nil && *v < 0 }
	checks := []check{
		{"backend", oneOf(c.Backend, backendkind.Names()...), "want " + backendkind.List(backendkind.Names())},
		{"models", len(c.Models) == 0, "want at least one model id"},
		{"models", slices.Contains(c.Models, ""), "a model id is empty"},
		{"models", firstDup(c.Models) != "", fmt.Sprintf("%q is listed twice: each model is served once on every GPU; drop the second", firstDup(c.Models))},
		{"models", len(c.Models) > maxModels, fmt.Sprintf("%d models; at most %d are served in one run (each is served on every GPU in turn): split the run", len(c.Models), maxModels)},
		{"engine.kind", oneOf(c.Engine.Kind, enginekind.Names()...), "want " + enginekind.List()},
		{"engine.command", needsCommand(c.Engine.Kind) && backendkind.Of(c.Backend).Engines && c.Engine.Command == "", "engine kind " + c.Engine.Kind + " needs a command template, e.g. \"my-server --model {model} --port {port}\""},
		{"engine.command", c.Engine.Command != "" && !strings.Contains(c.Engine.Command, "{port}"), "the command template must contain {port} (gpuvet picks the port)"},
		{"engine.tp", c.Engine.TP < 1 || c.Engine.TP > 64, "want 1..64"},
		{"engine.max_model_len", c.Engine.MaxModelLen < 16, "want ≥ 16 tokens"},
		{"engine.gpu_memory_utilization", c.Engine.GPUMemoryUtilization <= 0 || c.Engine.GPUMemoryUtilization > 1, "want a fraction in (0, 1]"},
		{"engine.port_base", c.Engine.PortBase < 1024 || c.Engine.PortBase > 65000, "want 1024..65000"},
		{"engine.ready_timeout", c.Engine.ReadyTimeout <= 0, "want a positive duration"},
		{"endpoint.url", backendkind.UsesSection(c.Backend, "endpoint") && c.Endpoint.URL == "", "backend endpoint needs a URL (--url http://host:port)"},
		{"endpoint.url", c.Endpoint.URL != "" && !strings.HasPrefix(c.Endpoint.URL, "http://") && !strings.HasPrefix(c.Endpoint.URL, "https://"), "want http://host:port or https://host:port"},
		{"load.profile", oneOf(c.Load.Profile, "sweep", "synchronous", "concurrency", "constant", "poisson", "throughput", "trace"), "want sweep, synchronous, concurrency, constant, poisson, throughput or trace"},
		{"load.api", oneOf(c.Load.API, "chat", "completions"), "want chat or completions"},
		{"load.reader", oneOf(c.Load.Reader, "auto", "eventloop", "nethttp"), "want auto, eventloop or nethttp"},
		{"load.prompt_tokens", c.Load.PromptTokens < 1, "want ≥ 1"},
		{"load.output_tokens", c.Load.OutputTokens < 1, "want ≥ 1"},
		{"load.output_tokens", c.Load.PromptTokens+c.Load.OutputTokens > c.Engine.MaxModelLen, fmt.Sprintf("prompt_tokens + output_tokens = %d exceeds engine.max_model_len %d: raise max_model_len or shorten the profile", c.Load.PromptTokens+c.Load.OutputTokens, c.Engine.MaxModelLen)},
		{"load.max_concurrency", c.Load.MaxConcurrency < 1, "want ≥ 1"},
		{"load.concurrency", c.Load.Concurrency < 1, "want ≥ 1"},
		{"load.rate", (c.Load.Profile == "constant" || c.Load.Profile == "poisson") && c.Load.Rate <= 0, "profiles constant and poisson need rate > 0 (req/s)"},
		{"load.rates", c.Load.Rates < 1 || c.Load.Rates > 100, "want 1..100"},
		{"load.max_duration", c.Load.MaxDuration <= 0, "want a positive duration"},
		{"load.max_rung_duration", c.Load.MaxRungDuration <= 0, "want a positive duration (it caps a rung that runs on past max_duration until compare.min_samples requests completed; one shorter than max_duration caps nothing)"},
		{"load.time_budget", c.Load.TimeBudget <= 0, "want a positive duration (what a sweep plans its rungs against, per GPU)"},
		{"load.workload", oneOf(c.Load.Workload, results.LoadWorkloads()...), "want one of " + strings.Join(results.LoadWorkloads(), ", ")},
		{"load.trace", (c.Load.Workload == "trace") != (c.Load.Trace != ""), "give a trace file (Mooncake JSONL) with workload trace, and only then"},
		{"load.trace_speed", !(c.Load.TraceSpeed > 0 && c.Load.TraceSpeed <= 1000), "want a factor in (0, 1000] (2: twice as fast as recorded)"},
		{"load.prefix_count", c.Load.PrefixCount < 0 || c.Load.PrefixCount > 0 && c.Load.Workload != "shared-prefix", "want ≥ 0, with workload shared-prefix"},
		{"load.prefix_tokens", c.Load.PrefixTokens < 0 || c.Load.PrefixTokens > c.Load.PromptTokens || c.Load.PrefixTokens > 0 && c.Load.Workload != "shared-prefix", "want 0..prompt_tokens, with workload shared-prefix"},
		{"load.profile", c.Load.Profile == "trace" && c.Load.Workload != "trace", "profile trace replays a trace's arrival times: set workload trace and trace"},
		{"load.profile", c.Load.Workload == "multi-turn" && oneOf(c.Load.Profile, "synchronous", "concurrency", "throughput"), "workload multi-turn sends each session's turns in order on one stream: want concurrency, synchronous or throughput"},
		{"load.profile", c.Load.Workload == "long-context" && oneOf(c.Load.Profile, "synchronous", "concurrency"), "workload long-context climbs context lengths at a fixed number of streams: want concurrency or synchronous"},
		{"load.context_max", c.Load.ContextMax < 0 || c.Load.ContextMax > 0 && c.Load.Workload != "long-context", "want the ladder's top context in tokens, with workload long-context (0: engine.max_model_len)"},
		{"load.turns", c.Load.Turns < 0 || c.Load.Turns > 256 || c.Load.Turns > 0 && c.Load.Workload != "multi-turn", "want 1..256 turns per session, with workload multi-turn"},
		{"sim.step_overhead", c.Sim.StepOverhead < 0, "want ≥ 0s"},
		{"sim.seq_overhead", c.Sim.SeqOverhead < 0, "want ≥ 0s"},
		{"sim.bench_time", c.Sim.BenchTime < 0, "want ≥ 0s (0: the simulated microbenchmarks take no time)"},
		{"sim.max_num_seqs", c.Sim.MaxNumSeqs < 0, "want ≥ 1, or 0 for the engine's default (256)"},
		{"load.warmup", !validWarmup(c.Load.Warmup), "want a request count like \"1\" or a duration like \"5s\" (≥ 0)"},
		{results.ThTTFTP95Ms, pos(c.Gates.TTFTP95Ms), "want ≥ 0, or null to disable"},
		{results.ThITLP95Ms, pos(c.Gates.ITLP95Ms), "want ≥ 0, or null to disable"},
		{results.ThMinThroughputReqS, pos(c.Gates.MinThroughputReqS), "want ≥ 0, or null to disable"},
		{results.ThAICRMinOutputTokS, pos(c.Gates.AICRMinOutputTokS), "want ≥ 0, or null to disable"},
		{results.ThAICRMaxTTFTP99Ms, pos(c.Gates.AICRMaxTTFTP99Ms), "want ≥ 0, or null to disable"},
		{results.ThAICRTolerancePct, c.Gates.AICRTolerancePct < 0 || c.Gates.AICRTolerancePct >= 100, "want 0..100"},
		{results.ThMaxErrorRatePct, c.Gates.MaxErrorRatePct != nil && (*c.Gates.MaxErrorRatePct < 0 || *c.Gates.MaxErrorRatePct > 100), "want a percentage 0..100, or null for errors to only flag"},
		{"gates.aicr_throughput_scope", oneOf(c.Gates.AICRThroughputScope, "node", "gpu"), "want node or gpu"},
		{results.ThLLMVariancePct, c.Compare.VariancePct <= 0 || c.Compare.VariancePct >= 100, "want a percentage in (0, 100)"},
		{results.ThGEMMVariancePct, c.Compare.GEMMVariancePct <= 0 || c.Compare.GEMMVariancePct >= 100, "want a percentage in (0, 100)"},
		{results.ThMinSamples, c.Compare.MinSamples < 0, "want ≥ 0"},
		{results.ThCompareMinReqS, c.Compare.MinThroughputReqS < 0, "want ≥ 0"},
		{results.ThMinTTFTDeltaMs, c.Compare.MinTTFTDeltaMs < 0, "want ≥ 0"},
		{results.ThBaselineTolerance, c.Compare.BaselineTolerancePc <= 0 || c.Compare.BaselineTolerancePc >= 100, "want a percentage in (0, 100)"},
		{"health.expect_gpus", c.Health.ExpectGPUs < 0, "want ≥ 0 (0: no count check)"},
		{results.ThPCIeMinGBps, c.Health.PCIeMinGBs < 0, "want ≥ 0"},
		{"health.pcie_expected_width", !slices.Contains([]int{0, 1, 2, 4, 8, 16, 32}, c.Health.PCIeExpectedWidth), "want 0 (strict), 1, 2, 4, 8, 16 or 32"},
		{"health.burn", c.Health.Burn < 0, "want ≥ 0s"},
		{"health.dcgm.level", c.Health.DCGM.Level < 1 || c.Health.DCGM.Level > 4, "want 1..4"},
		{"health.dcgm.timeout", c.Health.DCGM.Timeout <= 0, "want a positive duration"},
		{"functional.timeout", c.Functional.Timeout <= 0, "want a positive duration"},
		{"power.interval", c.Power.Interval < Duration(100e6), "want ≥ 100ms"},
		{"output.dir", c.Output.Dir == "", "want a directory"},
		{"output.prometheus_file", c.Output.PrometheusFile != "" && (!strings.HasSuffix(c.Output.PrometheusFile, ".prom") || strings.HasSuffix(c.Output.PrometheusFile, "/.prom")),
			fmt.Sprintf("want a file name ending in .prom (node exporter's textfile collector reads only *.prom), e.g. /var/lib/node_exporter/textfile_collector/gpuvet.prom, or \"\" for none; got %q", c.Output.PrometheusFile)},
		{"run.gpu_count", c.Run.GPUCount < 0, "want ≥ 0 (0: all)"},
		{"run.fail_in", c.Run.FailIn != "" && !slices.Contains(Phases, c.Run.FailIn), "want one of " + strings.Join(Phases, ", ")},
		{"sim.gpus", c.Sim.GPUs < 1 || c.Sim.GPUs > 64, "want 1..64"},
		{"sim.gpu", c.Sim.GPU == "", "want a GPU name from the catalog, e.g. H200"},
		{"sim.straggler", c.Sim.Straggler < -1 || c.Sim.Straggler >= c.Sim.GPUs, fmt.Sprintf("want -1 (none) or a GPU index 0..%d", c.Sim.GPUs-1)},
		{"sim.straggler_pct", c.Sim.StragglerPct < 0 || c.Sim.StragglerPct >= 100, "want 0..100"},
		{"sim.engine_drift_pct", c.Sim.EngineDriftPct < 0 || c.Sim.EngineDriftPct >= 100, "want 0..100 (20: every engine's speed wanders between 0.8 and 1 of its own)"},
		{"sim.node_slowdown_pct", c.Sim.NodeSlowdownPct < 0 || c.Sim.NodeSlowdownPct >= 100, "want 0..100 (5: every GPU of the node runs at 0.95)"},
		errCheck("history.url", errOf(ParseHistoryURL(c.History.URL))),
		{"history.password_env", c.History.PasswordEnv != "" && !envNameRe.MatchString(c.History.PasswordEnv), "want the name of an environment variable, e.g. PGPASSWORD (the password itself never goes in the config)"},
		{"endpoint.api_key_env", c.Endpoint.APIKeyEnv != "" && !envNameRe.MatchString(c.Endpoint.APIKeyEnv), "want the name of an environment variable, e.g. OPENAI_API_KEY (the key itself never goes in the config: it would be recorded)"},
		{"engine.token_env", c.Engine.TokenEnv != "" && !envNameRe.MatchString(c.Engine.TokenEnv), "want the name of an environment variable, e.g. HF_TOKEN (the token itself never goes in the config: it would be recorded)"},
		{"opennebula.auth_env", c.OpenNebula.AuthEnv != "" && !envNameRe.MatchString(c.OpenNebula.AuthEnv), "want the name of an environment variable, e.g. ONE_AUTH (user:password itself never goes in the config: it would be recorded)"},
		{"history.retention_days", c.History.RetentionDays < 0, "want ≥ 0 days (0: keep every run)"},
		{results.ThDriftPct, c.History.DriftPct <= 0 || c.History.DriftPct >= 100, "want a margin in % in (0, 100), e.g. 5"},
		{"history.timeout", c.History.Timeout <= 0, "want a positive duration, e.g. 30s"},
		{"sim.link_fault", !validSimGPU(c.Sim.LinkFault, c.Sim.GPUs, linkFaultRe), fmt.Sprintf("want \"\" (none) or GPU[:down|slow|errors] with GPU 0..%d, e.g. 1:slow", c.Sim.GPUs-1)},
		{"sim.cotenant", !validSimGPU(c.Sim.CoTenant, c.Sim.GPUs, coTenantRe), fmt.Sprintf("want \"\" (none) or GPU[:FROM[-TO]] with GPU 0..%d and Go durations, e.g. 1 or 1:5s-20s", c.Sim.GPUs-1)},
		{"sim.corrupt", !validSimGPU(c.Sim.Corrupt, c.Sim.GPUs, corruptRe), fmt.Sprintf("want \"\" (none) or a GPU index 0..%d", c.Sim.GPUs-1)},
		{"sim.hbm_hidden", !validSimGPU(c.Sim.HBMHidden, c.Sim.GPUs, hbmHiddenRe), fmt.Sprintf("want \"\" (none) or GPU[:SHARE] with GPU 0..%d and SHARE in (0, 1), e.g. 1 or 1:0.5", c.Sim.GPUs-1)},
		{"sim.engine_fault", !validSimGPU(c.Sim.EngineFault, c.Sim.GPUs, engineFaultRe), fmt.Sprintf("want \"\" (none) or GPU:KIND with GPU 0..%d and KIND short, cut, traceback, exit or hub, e.g. 1:short", c.Sim.GPUs-1)},
		{"sim.recovery_action", !validSimGPU(c.Sim.RecoveryAction, c.Sim.GPUs, recoveryActionRe), fmt.Sprintf("want \"\" (none) or GPU:ACTION with GPU 0..%d and ACTION reset, reboot, drain-p2p or drain-and-reset, e.g. 3:reset", c.Sim.GPUs-1)},
		{"sim.driver_fault", !validSimGPU(c.Sim.DriverFault, c.Sim.GPUs, driverFaultRe), fmt.Sprintf("want \"\" (none) or GPU:KIND with GPU 0..%d and KIND remap-pending, remap-failure, fabric, fallen-off-bus, requires-reset, rm-init or gsp-timeout, e.g. 1:fallen-off-bus", c.Sim.GPUs-1)},
		{"sim.throttle", !validSimGPU(c.Sim.Throttle, c.Sim.GPUs, throttleRe), fmt.Sprintf("want \"\" (none) or GPU[:REASON[:FROM[-TO]]] with GPU 0..%d, REASON hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown or hw_power_brake_slowdown, e.g. 2 or 2:hw_slowdown:20s", c.Sim.GPUs-1)},
	}
	for gpuName, floors := range c.ReferenceFloors {
		for name, v := range floors {
			p := joinPath(joinPath(results.ThFloors, gpuName), name)
			checks = append(checks,
				check{p, !slices.Contains(floorNames(), name), "unknown benchmark; want one of " + strings.Join(floorNames(), ", ")},
				check{p, v < 0 || v > 1.5, "want a share of the datasheet peak between 0 and 1.5 (0 turns the floor off), e.g. 0.6"})
		}
	}
	checks = append(checks, remoteChecks(c)...)
	checks = append(checks, kubernetesChecks(c)...)
	checks = append(checks, slurmChecks(c)...)
	checks = append(checks, hostPrepChecks(c)...)
	for ref, models := range c.Reference {
		for m, g := range models {
			p := joinPath(joinPath("reference", ref), m)
			checks = append(checks,
				check{joinPath(p, "ttft_p95_ms"), pos(g.TTFTP95Ms), "want ≥ 0"},
				check{joinPath(p, "itl_p95_ms"), pos(g.ITLP95Ms), "want ≥ 0"},
				check{joinPath(p, "min_throughput_req_s"), pos(g.MinThroughputReqS), "want ≥ 0"})
		}
	}
	for _, ch := range checks {
		if !ch.bad {
			continue
		}
		src := cmp.Or(sources[ch.path], sourceUnder(sources, ch.path))
		path := ch.path
		if prefix != "" {
			path = prefix + " -> " + ch.path
		}
		return &Error{Source: src, Path: path, Msg: ch.msg}
	}
	return nil
}

// firstDup is the first value of list given again ("" when none is).
func firstDup(list []string) string {
	seen := map[string]bool{}
	for _, v := range list {
		if seen[v] {
			return v
		}
		seen[v] = true
	}
	return ""
}

// sourceUnder finds the source of a value below path (for checks on maps).
func sourceUnder(sources map[string]string, path string) string {
	for k, v := range sources {
		if strings.HasPrefix(k, path) {
			return v
		}
	}
	return "default"
}

func validWarmup(s string) bool {
	if s == "" {
		return false
	}
	if d, err := parseDuration(s); err == nil && strings.ContainsAny(s, "smh") {
		return d >= 0
	}
	return strings.Trim(s, "0123456789") == "" && len(s) < 7 // a request count
}

// needsCommand reports whether a known engine kind has no built-in launch template (generic).
func needsCommand(kind string) bool {
	k, ok := enginekind.Lookup(kind)
	return ok && k.Template == ""
}
