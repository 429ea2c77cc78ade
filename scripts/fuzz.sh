#!/usr/bin/env bash
# Runs every Go fuzz target in the repo for a fixed time each, several at once.
#
#   scripts/fuzz.sh [build|run|all] [DIR]
#
#   build DIR  compile one coverage-instrumented test binary per package into DIR
#              (needs Go; DIR can then be copied to a bigger machine without Go)
#   run DIR    run each fuzz target from the binaries in DIR, FUZZTIME each,
#              JOBS at a time, each in its package folder so seed corpora and
#              testdata are found; a crasher lands in testdata/fuzz/ as with go test
#   all        both, into a temporary DIR (the default)
#
# FUZZTIME (default 5m) and JOBS (default: the number of CPUs) set the budget.
# Exit status is non-zero when any target failed; the summary names it.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
dir=${2:-}
FUZZTIME=${FUZZTIME:-5m}
JOBS=${JOBS:-$(nproc)}

# targets prints "package-dir FuzzName" for every fuzz target under internal/.
targets() {
	grep -rn --include='*_test.go' '^func Fuzz' internal |
		sed -E 's#^(internal/[^:]*)/[^/:]*:[0-9]+:func (Fuzz[A-Za-z0-9_]*).*#\1 \2#' | sort
}

build() {
	mkdir -p "$1"
	for pkg in $(targets | awk '{print $1}' | sort -u); do
		echo "build $pkg"
		go test -c -fuzz=. -ldflags='-s -w' -o "$1/$(basename "$pkg").test" "./$pkg"
	done
}

run_one() { # dir pkg target
	local bin log
	bin=$(cd "$1" && pwd)/$(basename "$2").test
	log=$(cd "$1" && pwd)/$(basename "$2")-$3.log
	(cd "$2" && "$bin" -test.run='^$' -test.fuzz="^$3\$" -test.fuzztime="$FUZZTIME" \
		-test.parallel=1 -test.fuzzcachedir="$TMPDIR_FUZZ/$(basename "$2")" >"$log" 2>&1) &&
		echo "ok    $2 $3 $(grep elapsed "$log" | tail -1 | sed 's/^fuzz: //')" ||
		{ echo "FAIL  $2 $3 (log: $log)"; tail -20 "$log"; return 1; }
}

run() {
	export TMPDIR_FUZZ=${TMPDIR:-/tmp}/gpuvet-fuzzcache FUZZTIME
	export -f run_one
	echo "$(targets | wc -l) targets, $FUZZTIME each, $JOBS at a time"
	targets | xargs -P "$JOBS" -L 1 bash -c 'run_one "$0" "$1" "$2"; r=$?; [ $r = 0 ] || echo "rc $r for $1 $2"; exit $r' "$1"
}

case $mode in
build) build "${dir:?build needs a DIR}" ;;
run) run "${dir:?run needs a DIR}" ;;
all)
	dir=${dir:-$(mktemp -d)}
	build "$dir"
	run "$dir"
	;;
*)
	echo "usage: scripts/fuzz.sh [build|run|all] [DIR]" >&2
	exit 2
	;;
esac
