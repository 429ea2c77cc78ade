// Package testwait is for the test packages whose slow tests mostly wait (on a simulated engine's
// clock, fleet hosts, a cluster) rather than compute: go test runs as many parallel tests at once
// as there are cores, which leaves a 2-core machine idle while they wait.
package testwait

import (
	"flag"
	"strconv"
)

// Parallel sets -test.parallel to n unless the command line set it. Call it from TestMain,
// before m.Run.
func Parallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}
