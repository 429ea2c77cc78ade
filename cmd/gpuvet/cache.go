package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
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

func newCachePullCmd() *cobra.Command {
	var o modelcache.Options
	cmd := &cobra.Command{
		Use:   "pull MODEL",
		Short: "Download a model snapshot into the cache (resumable; a repeated pull transfers nothing)",
		Example: `  gpuvet cache pull Qwen/Qwen3-8B
  gpuvet cache pull meta-llama/Llama-3.1-8B-Instruct --include '*.safetensors' --include '*.json'
  HF_TOKEN=... gpuvet cache pull org/gated-model --cache-dir /mnt/models/hub`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Workers < 1 {
				return usageErr("--workers %d: expected 1 to 64 parallel downloads", o.Workers)
			}
			if err := o.Check(args[0]); err != nil {
				return usageErr("%v", err)
			}
			o.Progress = os.Stderr
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			s, err := modelcache.Pull(ctx, args[0], o)
			if err != nil && ctx.Err() != nil {
				return failedErr("cache pull %s: interrupted; the partial downloads are kept in the cache: run the same command again to resume", args[0])
			}
			if err != nil {
				return failedErr("cache pull %s: %v", args[0], err)
			}
			secs := time.Since(start).Seconds()
			fmt.Fprintf(cmd.OutOrStdout(), "%s@%s: %d files, %s; downloaded %s in %.1fs (%s/s)\n%s\n",
				s.Model, s.Commit, len(s.Files), modelcache.HumanBytes(s.Size), modelcache.HumanBytes(s.BytesDownloaded), secs,
				modelcache.HumanBytes(int64(float64(s.BytesDownloaded)/max(secs, 1e-3))), s.Dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Revision, "revision", "main", "branch, tag or commit to pull")
	f.StringVar(&o.CacheDir, "cache-dir", "", "hub cache directory (default HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)")
	f.StringArrayVar(&o.Include, "include", nil, "only files matching this glob (repeatable; * matches across /)")
	f.StringVar(&o.Endpoint, "endpoint", "", "hub URL (default HF_ENDPOINT or "+modelcache.DefaultEndpoint+")")
	f.IntVar(&o.Workers, "workers", 8, "parallel file downloads (1-64)")
	return cmd
}

func newCacheLsCmd() *cobra.Command {
	var cacheDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the model snapshots in the cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			snaps, err := modelcache.List(cacheDir)
			if err != nil {
				return failedErr("cache ls: %v", err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if snaps == nil {
					snaps = []modelcache.Snapshot{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(snaps)
			}
			tw := term.Columns(out)
			fmt.Fprintln(tw, "MODEL\tCOMMIT\tREFS\tFILES\tSIZE\tPATH")
			for _, s := range snaps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Model, s.Commit[:min(12, len(s.Commit))],
					strings.Join(s.Refs, ","), len(s.Files), modelcache.HumanBytes(s.Size), s.Dir)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "hub cache directory (default HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newCacheVerifyCmd() *cobra.Command {
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "verify [MODEL]",
		Short: "Re-hash every cached file (or one model's) against its SHA-256 / git blob id",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model := ""
			if len(args) == 1 {
				model = args[0]
				if err := modelcache.ValidateModel(model); err != nil {
					return usageErr("%v", err)
				}
			}
			if err := modelcache.Verify(cacheDir, model); err != nil {
				return failedErr("cache verify: %v", err)
			}
			snaps, _ := modelcache.List(cacheDir)
			n, files := 0, 0
			for _, s := range snaps {
				if model == "" || s.Model == model {
					n, files = n+1, files+len(s.Files)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cache verify: %d snapshot(s), %d files, every file matches its hash\n", n, files)
			return nil
		},
	}
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "hub cache directory (default HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)")
	return cmd
}

// cache own is the init container of backend kubernetes' populate Job (docs/kubernetes.md): as root
// with only CAP_CHOWN and CAP_FOWNER, it hands the cache volume's root to the user the populate step
// runs as, where fsGroup does not (hostPath, NFS).
func newCacheOwnCmd() *cobra.Command {
	var uid, gid int
	cmd := &cobra.Command{
		Use:    "own DIR --uid N --gid N",
		Short:  "Give a cache volume's root folder to uid:gid (the kubernetes backend's populate Job runs it as root)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if uid < 0 || gid < 0 {
				return usageErr("--uid and --gid: required, ≥ 0")
			}
			what, err := modelcache.Own(args[0], uid, gid)
			if err != nil {
				return failedErr("cache own: %v", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), what)
			return nil
		},
	}
	cmd.Flags().IntVar(&uid, "uid", -1, "owner to give the folder to")
	cmd.Flags().IntVar(&gid, "gid", -1, "group to give the folder to")
	return cmd
}
