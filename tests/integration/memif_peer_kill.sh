#!/usr/bin/env bash
# A memif peer that dies never takes rocedpd down. rocedpd is the memif server and its polling
# core spins at full rate; 200 times a peer (memif_peer: a DPDK-free memif client) connects,
# floods ICMP echo requests (the core answers each, so it is inside rx_burst and tx_burst on the
# peer's memory all the time) and is killed with SIGKILL at a random moment. Each time the daemon
# must survive. Before that, 200 peers connect and close before the server's HELLO (a DPDK 22.11
# memif listener bug, pmd/memif_hello.hpp). At the end a fresh peer still gets its echo replies,
# and SIGTERM ends the daemon with status 0. Without the memif guard (pmd/memif_guard.hpp) the daemon can crash in
# librte_net_memif when the driver unmaps a dead peer's memory under a burst.
#   memif_peer_kill.sh PATH/TO/memif_peer [KILLS]
source "$(dirname "$0")/lib.sh"
need_root
peer=${1:?usage: memif_peer_kill.sh MEMIF_PEER [KILLS]}
kills=${2:-200}
peer_pid=

on_exit() {
  local rc=$?
  if [ -n "$peer_pid" ]; then kill -KILL "$peer_pid" 2>/dev/null || true; wait "$peer_pid" 2>/dev/null || true; fi
  # cleanup's status; (exit $rc) here would end the trap under set -e with the daemon running.
  exit_status=$rc
  cleanup
}
trap on_exit EXIT INT TERM

sock=$work/memif.sock
cat > "$work/server.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=server,socket=$sock,socket-abstract=no
    mac: "02:00:00:00:0a:01"
    address: 198.18.10.1/24
dataplane: {lcores: [1], mbuf_count: 8191}
telemetry: {stats_interval_ms: 20}
YAML
start_daemon "$work/server.yaml"
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "no memif socket at $sock"

# Peers that connect and close before the server's HELLO, 200 times in a row: the driver's
# listener then fails to send its HELLO (pmd/memif_hello.hpp).
hangup_rc=0
"$peer" "$sock" 02:00:00:00:0a:01 198.18.10.1 198.18.10.2 --hangups "${HANGUPS:-200}" \
  >> "$work/peer.out" 2>> "$work/peer.err" || hangup_rc=$?
sleep 0.5
kill -0 "$daemon_pid" 2>/dev/null || fail "rocedpd died after peers that hung up before HELLO"
[ "$hangup_rc" -eq 0 ] || fail "the hang-up peer failed: $(tail -1 "$work/peer.err")"

connected_peers=0
for i in $(seq "$kills"); do
  kill -0 "$daemon_pid" 2>/dev/null || fail "rocedpd died before kill $i"
  if [ $((i % 10)) -eq 0 ]; then
    # Every tenth peer is killed from outside at once: mostly during its handshake.
    "$peer" "$sock" 02:00:00:00:0a:01 198.18.10.1 198.18.10.2 > "$work/peer.out" 2>> "$work/peer.err" &
    peer_pid=$!
    sleep "0.00$((RANDOM % 10))"
    kill -KILL "$peer_pid" 2>/dev/null || true
  else
    # The others flood for 0..8 ms after the handshake, then SIGKILL themselves.
    "$peer" "$sock" 02:00:00:00:0a:01 198.18.10.1 198.18.10.2 --die-after-us $((RANDOM % 8000)) \
      > "$work/peer.out" 2>> "$work/peer.err" &
    peer_pid=$!
  fi
  wait "$peer_pid" 2>/dev/null || true
  peer_pid=
  grep -q connected "$work/peer.out" && connected_peers=$((connected_peers + 1))
done
kill -0 "$daemon_pid" 2>/dev/null || fail "rocedpd died during the kills"
echo "kills: $kills, peers that reached the flood: $connected_peers"
[ "$connected_peers" -ge $((kills / 2)) ] || fail "only $connected_peers of $kills peers connected"

# A fresh peer is served: its echo requests come back.
ok=
for _ in $(seq 50); do
  if "$peer" "$sock" 02:00:00:00:0a:01 198.18.10.1 198.18.10.2 --count 50 > "$work/fresh.out" 2>> "$work/peer.err"; then
    ok=1; break
  fi
  sleep 0.1
done
cat "$work/fresh.out"
[ -n "$ok" ] || fail "a fresh peer got no echo replies after the kills"
left=$(grep -c "event=memif_peer_left" "$work/daemon.log" || true)
echo "daemon: $left peer departures quiesced before unmap"
# A peer killed within the guard's watcher period after its handshake may leave before the guard
# saw it connected (then nothing was polled on its memory): allow that for one peer in ten.
[ "${ROCEDP_MEMIF_GUARD:-1}" = 0 ] || [ $((left * 10)) -ge $((connected_peers * 9)) ] ||
  fail "only $left departures logged for $connected_peers connected peers"
kill -0 "$daemon_pid" 2>/dev/null || fail "rocedpd died"
stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "rocedpd exited $daemon_status after SIGTERM"
# Some of the hang-ups were gone before the driver's HELLO went out: the sends it would have
# failed on (and then panicked) were absorbed, and the port's close reports how many.
absorbed=$(sed -n 's/.*event=memif_peers_gone_before_reply.*control_sends_absorbed=\([0-9]*\).*/\1/p' "$work/daemon.log")
echo "daemon: ${absorbed:-0} control sends to peers already gone absorbed"
[ "${HANGUPS:-200}" -eq 0 ] || [ "${absorbed:-0}" -ge 1 ] || fail "no hang-up met a failed HELLO"
echo "PASS: rocedpd survived $kills killed memif peers"
