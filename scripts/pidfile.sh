# Sourced by the test-service scripts (k8s-test-env.sh, k8s-real-node/setup.sh, slurm-test-env.sh):
# the one way they end a process they started through its pid file. A pid file outlives its process,
# and pids come round again (pid_max 32768 wraps within hours of tests): a stale file must end no
# other service's process, nor anyone's. In ci34 a real node's start, stopping what an earlier one
# had left, ended the kwok control plane's apiserver, scheduler and kwok mid-CI.

# pid_is PID COMMAND: PID is alive and its command (argv[0]) is still COMMAND.
pid_is() { [ "$(tr '\0' '\n' 2>/dev/null < "/proc/$1/cmdline" | head -n1)" = "$2" ]; }

# stop_pid FILE COMMAND [SECONDS]: end FILE's process if it is still COMMAND (SIGTERM, then SIGKILL
# after SECONDS, default 10), and remove FILE.
stop_pid() {
  [ -f "$1" ] || return 0
  local pid i; pid=$(cat "$1"); rm -f "$1"
  pid_is "$pid" "$2" || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < ${3:-10} * 10; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}
