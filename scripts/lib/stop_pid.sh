# Sourced by the scripts and shell tests that start processes: they stop them by PID, never by name.
# stop_pid PID [TENTHS]: SIGTERM, up to TENTHS tenths of a second (default 50) for the process to
# exit, then SIGKILL; then reaps it if it is this shell's child. An empty PID or a process that has
# exited already is no work. Always returns 0 (it runs in traps, under set -e).
stop_pid() {
  local pid=$1 tenths=${2:-50}
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq "$tenths"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  return 0
}
