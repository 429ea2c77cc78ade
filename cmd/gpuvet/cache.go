package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/gpuvet/gpuvet/internal/term"
	"github.com/spf13/cobra"
)

func newCacheCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Model-weights cache: download once from a Hugging Face-compatible hub, serve engines offline",
		Long: `The cache uses the Hugging Face hub layout (models--org--name/{blobs,snapshots,refs}), so vLLM,
SGLang and transformers read it as is with HF_HUB_OFFLINE=1. The hub token comes only from HF_TOKEN
(or the file named by HF_TOKEN_PATH, default $HF_HOME/token).`,
	}
	cmd.AddCommand(newCachePullCmd(), newCacheLsCmd(), newCacheVerifyCmd(), newCacheOwnCmd())
	return cmd
}

// cacheDirFlag is the --cache-dir every cache command takes.
func cacheDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "cache-dir", "", "hub cache directory (default HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)")
}

// cachePullOptions are `gpuvet cache pull`'s flags and argument.
type cachePullOptions struct {
	model string
	pull  modelcache.Options
}

func newCachePullCmd() *cobra.Command {
	o := &cachePullOptions{}
	cmd := &cobra.Command{
		Use:   "pull MODEL",
		Short: "Download a model snapshot into the cache (resumable; a repeated pull transfers nothing)",
		Example: `  gpuvet cache pull Qwen/Qwen3-8B
  gpuvet cache pull meta-llama/Llama-3.1-8B-Instruct --include '*.safetensors' --include '*.json'
  HF_TOKEN=... gpuvet cache pull org/gated-model --cache-dir /mnt/models/hub`,
		Args: cobra.ExactArgs(1),
		RunE: phases(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.pull.Revision, "revision", "main", "branch, tag or commit to pull")
	cacheDirFlag(cmd, &o.pull.CacheDir)
	f.StringArrayVar(&o.pull.Include, "include", nil, "only files matching this glob (repeatable; * matches across /)")
	f.StringVar(&o.pull.Endpoint, "endpoint", "", "hub URL (default HF_ENDPOINT or "+modelcache.DefaultEndpoint+")")
	f.IntVar(&o.pull.Workers, "workers", 8, "parallel file downloads (1-64)")
	return cmd
}

func (o *cachePullOptions) Complete(_ *cobra.Command, args []string) error {
	o.model = args[0]
	o.pull.Progress = os.Stderr
	return nil
}

func (o *cachePullOptions) Validate() error {
	if o.pull.Workers < 1 {
		return usageErr("--workers %d: expected 1 to 64 parallel downloads", o.pull.Workers)
	}
	if err := o.pull.Check(o.model); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

func (o *cachePullOptions) Run(cmd *cobra.Command) error {
	ctx, stop := interruptible(cmd.Context())
	defer stop()
	start := time.Now()
	s, err := modelcache.Pull(ctx, o.model, o.pull)
	if err != nil && ctx.Err() != nil {
		return failedErr("cache pull %s: interrupted; the partial downloads are kept in the cache: run the same command again to resume", o.model)
	}
	if err != nil {
		return failedErr("cache pull %s: %v", o.model, err)
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(cmd.OutOrStdout(), "%s@%s: %d files, %s; downloaded %s in %.1fs (%s/s)\n%s\n",
		s.Model, s.Commit, len(s.Files), modelcache.HumanBytes(s.Size), modelcache.HumanBytes(s.BytesDownloaded), secs,
		modelcache.HumanBytes(int64(float64(s.BytesDownloaded)/max(secs, 1e-3))), s.Dir)
	return nil
}

// cacheLsOptions are `gpuvet cache ls`'s flags.
type cacheLsOptions struct {
	cacheDir string
	asJSON   bool
}

func newCacheLsCmd() *cobra.Command {
	o := &cacheLsOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the model snapshots in the cache",
		Args:  cobra.NoArgs,
		RunE:  phases(o),
	}
	cacheDirFlag(cmd, &o.cacheDir)
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

func (o *cacheLsOptions) Complete(*cobra.Command, []string) error { return nil }
func (o *cacheLsOptions) Validate() error                         { return nil }

func (o *cacheLsOptions) Run(cmd *cobra.Command) error {
	snaps, err := modelcache.List(o.cacheDir)
	if err != nil {
		return failedErr("cache ls: %v", err)
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		if snaps == nil {
			snaps = []modelcache.Snapshot{}
		}
		return printJSON(out, snaps)
	}
	tw := term.Columns(out)
	fmt.Fprintln(tw, "MODEL\tCOMMIT\tREFS\tFILES\tSIZE\tPATH")
	for _, s := range snaps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Model, s.Commit[:min(12, len(s.Commit))],
			strings.Join(s.Refs, ","), len(s.Files), modelcache.HumanBytes(s.Size), s.Dir)
	}
	return tw.Flush()
}

// cacheVerifyOptions are `gpuvet cache verify`'s flags and optional model.
type cacheVerifyOptions struct {
	cacheDir, model string
}

func newCacheVerifyCmd() *cobra.Command {
	o := &cacheVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [MODEL]",
		Short: "Re-hash every cached file (or one model's) against its SHA-256 / git blob id",
		Args:  cobra.MaximumNArgs(1),
		RunE:  phases(o),
	}
	cacheDirFlag(cmd, &o.cacheDir)
	return cmd
}

func (o *cacheVerifyOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.model = args[0]
	}
	return nil
}

func (o *cacheVerifyOptions) Validate() error {
	if o.model == "" {
		return nil
	}
	if err := modelcache.ValidateModel(o.model); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

func (o *cacheVerifyOptions) Run(cmd *cobra.Command) error {
	if err := modelcache.Verify(o.cacheDir, o.model); err != nil {
		return failedErr("cache verify: %v", err)
	}
	snaps, _ := modelcache.List(o.cacheDir)
	n, files := 0, 0
	for _, s := range snaps {
		if o.model == "" || s.Model == o.model {
			n, files = n+1, files+len(s.Files)
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "cache verify: %d snapshot(s), %d files, every file matches its hash\n", n, files)
	return nil
}

// cacheOwnOptions are `gpuvet cache own`'s flags and folder: the kubernetes populate Job's init
// container (kubernetes.cache_owner_init).
type cacheOwnOptions struct {
	dir      string
	uid, gid int
}

func newCacheOwnCmd() *cobra.Command {
	o := &cacheOwnOptions{}
	cmd := &cobra.Command{
		Use:    "own DIR --uid N --gid N",
		Short:  "Give a cache volume's root folder to uid:gid (the kubernetes backend's populate Job runs it as root)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE:   phases(o),
	}
	cmd.Flags().IntVar(&o.uid, "uid", -1, "owner to give the folder to")
	cmd.Flags().IntVar(&o.gid, "gid", -1, "group to give the folder to")
	return cmd
}

func (o *cacheOwnOptions) Complete(_ *cobra.Command, args []string) error {
	o.dir = args[0]
	return nil
}

func (o *cacheOwnOptions) Validate() error {
	if o.uid < 0 || o.gid < 0 {
		return usageErr("--uid and --gid: required, ≥ 0")
	}
	return nil
}

func (o *cacheOwnOptions) Run(cmd *cobra.Command) error {
	what, err := modelcache.Own(o.dir, o.uid, o.gid)
	if err != nil {
		return failedErr("cache own: %v", err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), what)
	return nil
}
