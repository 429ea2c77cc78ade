package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Issue 42: pflag takes the first `backticked` words of a flag's usage as its value's name, so a
// usage quoting a command showed `--taint-failed gpuvet clean --untaint` in --help. No flag of any
// command may have its value named by a quote.
func TestHelpFlagValueNames(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if strings.Contains(f.Usage, "`") {
					name, _ := pflag.UnquoteUsage(f)
					t.Errorf("%s --%s: the usage quotes with backticks, so --help shows %q as its value: %q", c.CommandPath(), f.Name, name, f.Usage)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
