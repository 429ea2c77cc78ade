package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/spf13/cobra"
)

// configFlags are the flags every command that resolves a Plan shares.
type configFlags struct {
	files []string
	sets  []string
}

func (f *configFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.files, "config", "c", nil, "YAML config file or aicr recipe (repeatable; later files overlay earlier ones)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "set one key, e.g. --set load.max_concurrency=64 (repeatable; beats files and env)")
}

// plan resolves the Plan; any config error is a usage error (exit 2, nothing started).
func (f *configFlags) plan(extra ...config.Flag) (*config.Plan, error) {
	p, err := config.Load(config.Options{Files: f.files, Sets: f.sets, Environ: os.Environ(), Flags: extra})
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			return nil, usageErr("config: %v", err)
		}
		return nil, usageErr("%v", err)
	}
	return p, nil
}

// configShowOptions are `gpuvet config show`'s flags: the plan resolved as `gpuvet run` would.
type configShowOptions struct{ planOptions }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	o := &configShowOptions{}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the resolved plan: every value with its source (default, env, file, recipe, flag)",
		Long: `Prints the plan 'gpuvet run' would use with the same -c, --set and flags: one key a line, its
value, and where it came from (default, default(sim), env:GPUVET_…, config:FILE, recipe:FILE, flag:…).
Bad input exits 2 with the file, the key path and what is allowed. See docs/config.md.`,
		Args: cobra.NoArgs,
		RunE: phases(o),
	}
	o.cf.register(show)
	o.pf.register(show)
	cmd.AddCommand(show)
	return cmd
}

// Validate has nothing to add to config.Load's.
func (o *configShowOptions) Validate() error { return nil }

// Run prints the plan, and where the model cache of a local run really is when that differs.
func (o *configShowOptions) Run(cmd *cobra.Command) error {
	o.plan.Show(cmd.OutOrStdout())
	if c := o.plan.Config; backendkind.Of(c.Backend).ThisHost {
		dir, note := modelcache.Dir(c.ModelCache, c.Engine.Kind)
		if note == "" && dir != "" && dir != c.ModelCache.Dir {
			note = fmt.Sprintf("model_cache.dir %s is %s for engine kind %s", c.ModelCache.Dir, dir, c.Engine.Kind)
		}
		if note != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "# note: %s\n", note)
		}
	}
	return nil
}
