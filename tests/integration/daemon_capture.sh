#!/usr/bin/env bash
# Packet capture from a running rocedpd: rocedpd (memif server, memory service) and rocedp-perf
# --connect (memif client) exchange RDMA WRITEs while `rocedpctl capture` records the daemon's
# port into pcapng. The capture must hold RoCEv2 frames in both directions (data and ACKs, CM
# MADs) and pass ../shared/tools/roce-check (ICRC, lengths, BTH, CM MADs, tshark's dissector).
# Then: -c stops at exactly that many frames; a port that does not exist is refused (exit 1)
# and the daemon keeps running.
source "$(dirname "$0")/lib.sh"
need_root
perf=$bin_dir/rocedp-perf
ctl=$bin_dir/rocedpctl
check=$shared_dir/tools/roce-check
[ -x "$perf" ] || fail "$perf not built"
[ -x "$check" ] || fail "$check missing"
trap 'stop_perf; cleanup' EXIT INT TERM

write_memif_pair_configs 2 7002 1000 50
start_daemon "$work/daemon.yaml"

# 1. A capture around a whole connection: CM handshake, WRITEs, ACKs, disconnect.
t0=$(date +%s)
"$ctl" capture --prefix "$prefix" --port 0 -w "$work/all.pcapng" -d 6 > "$work/capture.log" 2>&1 &
cap=$!
sleep 0.5
"$perf" --config "$work/client.yaml" --connect 198.18.2.1:7002 --timeout 30 write bw -s 1024 -q 2 -n 1000 \
  > "$work/perf.log" 2>&1 &
perf_pid=$!
perf_status=0
wait "$perf_pid" || perf_status=$?
perf_pid=
[ "$perf_status" -eq 0 ] || { cat "$work/perf.log" >&2; fail "rocedp-perf exit $perf_status"; }
cap_status=0
wait "$cap" || cap_status=$?
cat "$work/capture.log"
[ "$cap_status" -eq 0 ] || fail "rocedpctl capture exit $cap_status"
written=$(sed -n 's/^\([0-9]*\) frames written.*/\1/p' "$work/capture.log")
[ -n "$written" ] && [ "$written" -gt 0 ] || fail "no frames captured"
t1=$(date +%s)
/usr/bin/python3 - "$work/all.pcapng" "$t0" "$t1" <<'PY' || fail "capture timestamps outside the run"
import sys
from scapy.all import rdpcap
p = rdpcap(sys.argv[1])
t0, t1 = int(sys.argv[2]) - 1, int(sys.argv[3]) + 1
print("first/last frame time:", float(p[0].time), float(p[-1].time), "run:", t0, t1)
sys.exit(0 if t0 <= p[0].time <= p[-1].time <= t1 else 1)
PY
/usr/bin/python3 "$check" --json "$work/all.pcapng" > "$work/check.json" || {
  cat "$work/check.json"; fail "roce-check found problems in the capture"; }
python3 - "$work/check.json" "$written" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
t = r["by_type"]
print("roce-check:", r["roce_packets"], "RoCEv2 packets of", sys.argv[2], "frames:", t)
assert r["roce_packets"] > 0 and not r["failures"]
# Both directions: the client's WRITEs reach the daemon, the daemon ACKs them; the CM ran.
assert any("RDMA_WRITE" in k for k in t), "no WRITE captured"
assert any("ACKNOWLEDGE" in k for k in t), "no ACK captured"
assert any(k.startswith("UD") or "CM" in k or "MAD" in k for k in t), "no CM MAD captured"
PY

# 2. -c: exactly that many frames, although the next connection sends more.
"$ctl" capture --prefix "$prefix" --port 0 -w "$work/fifty.pcapng" -c 50 -d 30 > "$work/capture2.log" 2>&1 &
cap=$!
sleep 0.5
"$perf" --config "$work/client.yaml" --connect 198.18.2.1:7002 --timeout 30 write bw -s 1024 -q 1 -n 1000 \
  > "$work/perf2.log" 2>&1 &
perf_pid=$!
perf_status=0
wait "$perf_pid" || perf_status=$?
perf_pid=
[ "$perf_status" -eq 0 ] || { cat "$work/perf2.log" >&2; fail "second rocedp-perf exit $perf_status"; }
cap_status=0
wait "$cap" || cap_status=$?
cat "$work/capture2.log"
[ "$cap_status" -eq 0 ] || fail "rocedpctl capture -c 50: exit $cap_status"
grep -q "^50 frames written" "$work/capture2.log" || fail "-c 50 did not write exactly 50 frames"
n=$(/usr/bin/python3 -c "from scapy.all import rdpcap; import sys; print(len(rdpcap(sys.argv[1])))" "$work/fifty.pcapng")
[ "$n" -eq 50 ] || fail "the file holds $n frames, not 50"

# 3. A port that does not exist: refused with a reason, exit 1; the daemon runs on.
st=0
"$ctl" capture --prefix "$prefix" --port 9 -w "$work/none.pcapng" -d 1 > "$work/capture3.log" 2>&1 || st=$?
cat "$work/capture3.log"
[ "$st" -eq 1 ] || fail "capture of port 9: exit $st, expected 1"
grep -q "no port 9" "$work/capture3.log" || fail "capture of port 9: no reason given"
kill -0 "$daemon_pid" || fail "the daemon died"

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
echo PASS
