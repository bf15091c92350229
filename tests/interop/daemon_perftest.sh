#!/usr/bin/env bash
# rocedpd's perftest service against Linux perftest 4.5's rdma_cm clients (-R) in the rig's
# Soft-RoCE guest: rocedpd (198.18.0.50) listens with `service: perftest` on 18515 (SENDs taken:
# `sends: sink`), on 18516 (`sends: echo`), on 18517 (`writes: echo`) and on 18518 (a sink of
# 8 MiB receives), and the guest
# (198.18.0.38) runs, one boot, one case after another:
#   write_bw     ib_write_bw -R -s 65536 -n 20     (64 packets a message at MTU 1024)
#   write_bw_q4  ib_write_bw -R -s 65536 -n 20 -q 4  (4 data connections in one session)
#   write_bw_two two such clients with -q 2 at once, from the one guest address (two sessions
#                setting up together: each data connection must be its own client's)
#   read_bw      ib_read_bw -R -s 65536 -n 20
#   atomic_bw    ib_atomic_bw -R -A FETCH_AND_ADD -n 300
#   send_bw      ib_send_bw -R -s 4096 -n 200     (into the sink)
#   read_lat     ib_read_lat -R -s 64 -n 20
#   atomic_lat   ib_atomic_lat -R -n 20
#   send_lat     ib_send_lat -R -s 64 -n 20 -p 18516   (answered by the echo)
#   write_lat    ib_write_lat -R -s 64 -n 20 -p 18517  (rocedpd writes first and answers each)
#   write_bw_all ib_write_bw -R -a -n 5            (every size from 2 bytes to 8 MiB, one session)
#   send_bw_all  ib_send_bw -R -a -n 5 -p 18518    (the same into a sink of 8 MiB receives)
# and the same listeners' clients without -R, perftest's set-up over TCP to the listeners'
# tcp_exchange address (the rig bridge's, 198.18.0.1), each key answered by a data QP connected
# out of band to the GID, QPN and PSN it carries:
#   write_bw_tcp ib_write_bw -x $GID -s 65536 -n 20      read_bw_tcp  ib_read_bw -x $GID ... -n 20
#   send_bw_tcp  ib_send_bw -x $GID -s 4096 -n 200       send_lat_tcp ib_send_lat ... -p 18516
#   write_lat_tcp ib_write_lat -x $GID -s 64 -n 20 -p 18517
#   read_lat_tcp ib_read_lat -x $GID -s 64 -n 20         atomic_bw_tcp ib_atomic_bw -x $GID -n 300
# Each Linux client must exit 0 and print its result row (the -a ones a row for each of the 23
# sizes); the daemon must log the WRITE, READ and atomic bandwidth clients' own reports (their
# size and iterations, as Linux wrote them; with -a perftest reports its last size), count the
# sink's 200 SENDs of 4096 bytes, the echo's 20 answers and the 20 WRITEs it took and answered,
# the -a sink's 115 SENDs (5 of each size) and their bytes, one session per client, and hold no
# connection or QP after the last. Every case's capture passes roce-check; the atomic case's goes
# through tests/interop/atomic_check.py (each FETCH_AND_ADD executed once, in order, each answer
# the word's value before it). Linux's rxe counters: no sequence error, no exhausted retry.
#   daemon_perftest.sh
set -uo pipefail
IOP_PREFIX=daemon-perftest-
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init daemon-perftest
linux=198.18.0.38 rocedp=198.18.0.50 bridge=198.18.0.1
cases=(write_bw write_bw_q4 write_bw_two read_bw atomic_bw send_bw read_lat atomic_lat send_lat write_lat write_bw_all send_bw_all
  write_bw_tcp read_bw_tcp send_bw_tcp send_lat_tcp write_lat_tcp read_lat_tcp atomic_bw_tcp)

iop_net 1500 dpdkdp
iop_rocedpd 1500 "$(iop_devargs 0 dpdkdp 1500)" "$rocedp" \
  "{port: rig0, nd_port: 18515, service: perftest, memory_bytes: 16777216, message_bytes: 65536, queue_depth: 64, tcp_exchange: $bridge}" \
  "{port: rig0, nd_port: 18516, service: perftest, sends: echo, message_bytes: 4096, queue_depth: 16, tcp_exchange: $bridge}" \
  "{port: rig0, nd_port: 18517, service: perftest, writes: echo, message_bytes: 4096, queue_depth: 4, tcp_exchange: $bridge}" \
  "{port: rig0, nd_port: 18518, service: perftest, message_bytes: 8388608, queue_depth: 4}" ||
  { iop_fail "rocedpd did not start"; exit 1; }

# The Linux command of a case.
command_of() {
  case $1 in
    write_bw) echo "ib_write_bw -d rxe0 -R -F -s 65536 -n 20 $rocedp" ;;
    write_bw_q4) echo "ib_write_bw -d rxe0 -R -F -s 65536 -n 20 -q 4 $rocedp" ;;
    write_bw_two)
      local one="ib_write_bw -d rxe0 -R -F -s 65536 -n 20 -q 2 $rocedp"
      echo "($one >/tmp/two-a 2>&1 & a=\$!; $one >/tmp/two-b 2>&1 & b=\$!;" \
        "wait \$a; ra=\$?; wait \$b; rb=\$?; cat /tmp/two-a /tmp/two-b; [ \$ra = 0 ] && [ \$rb = 0 ])" ;;
    read_bw) echo "ib_read_bw -d rxe0 -R -F -s 65536 -n 20 $rocedp" ;;
    atomic_bw) echo "ib_atomic_bw -d rxe0 -R -F -A FETCH_AND_ADD -n 300 $rocedp" ;;
    send_bw) echo "ib_send_bw -d rxe0 -R -F -s 4096 -n 200 $rocedp" ;;
    read_lat) echo "ib_read_lat -d rxe0 -R -F -s 64 -n 20 $rocedp" ;;
    atomic_lat) echo "ib_atomic_lat -d rxe0 -R -F -n 20 $rocedp" ;;
    send_lat) echo "ib_send_lat -d rxe0 -R -F -s 64 -n 20 -p 18516 $rocedp" ;;
    write_lat) echo "ib_write_lat -d rxe0 -R -F -s 64 -n 20 -p 18517 $rocedp" ;;
    write_bw_all) echo "ib_write_bw -d rxe0 -R -F -a -n 5 $rocedp" ;;
    send_bw_all) echo "ib_send_bw -d rxe0 -R -F -a -n 5 -p 18518 $rocedp" ;;
    write_bw_tcp) echo "ib_write_bw -d rxe0 -x \$GID -F -s 65536 -n 20 $bridge" ;;
    read_bw_tcp) echo "ib_read_bw -d rxe0 -x \$GID -F -s 65536 -n 20 $bridge" ;;
    send_bw_tcp) echo "ib_send_bw -d rxe0 -x \$GID -F -s 4096 -n 200 $bridge" ;;
    send_lat_tcp) echo "ib_send_lat -d rxe0 -x \$GID -F -s 64 -n 20 -p 18516 $bridge" ;;
    write_lat_tcp) echo "ib_write_lat -d rxe0 -x \$GID -F -s 64 -n 20 -p 18517 $bridge" ;;
    read_lat_tcp) echo "ib_read_lat -d rxe0 -x \$GID -F -s 64 -n 20 $bridge" ;;
    atomic_bw_tcp) echo "ib_atomic_bw -d rxe0 -x \$GID -F -A FETCH_AND_ADD -n 300 $bridge" ;;
  esac
}
{
  iop_case_lines
  for c in "${cases[@]}"; do echo "begin $c; $(command_of "$c"); end $c \$?"; done
  echo "hw end"
} >"$IOP_WORK/guest.sh"

# The -a cases move some 80 MB each: their captures hold their first 6,000 frames (the set-up and
# every size up to 512 KiB), which roce-check takes seconds over, not minutes.
IOP_CAPTURE_PACKETS=([write_bw_all]=6000 [send_bw_all]=6000)
IOP_GUEST_TIMEOUT=300 iop_guest_cases linux "$linux" 1500 "${cases[@]}"
con=$IOP_WORK/linux.console
iop_check_captures
cp "$con" "$IOP_ARTIFACTS/interop-daemon-perftest-guest.log" 2>/dev/null
cp "$IOP_WORK/rocedpd.log" "$IOP_ARTIFACTS/interop-daemon-perftest-rocedpd.log" 2>/dev/null

# A case's lines of the console, BEGIN to END.
case_lines() { tr -d '\r' <"$con" | sed -n "/^BEGIN $1\$/,/^END $1 rc=/p"; }
for c in "${cases[@]}"; do
  lines=$(case_lines "$c")
  grep -q "^END $c rc=0" <<<"$lines" || { iop_fail "$c: Linux's client failed ($(grep -E "^END|ERR|rror|Couldn" <<<"$lines" | head -3 | tr '\n' ' '))"; continue; }
  # perftest's result row: bytes, iterations, then figures (one per client).
  rows=$(grep -E '^ +[0-9]+ +[0-9]+ +[0-9.]+' <<<"$lines")
  row=$(head -1 <<<"$rows")
  [ -n "$row" ] || { iop_fail "$c: no result row"; continue; }
  [ "$c" != write_bw_two ] || [ "$(wc -l <<<"$rows")" = 2 ] || { iop_fail "$c: not two result rows"; continue; }
  if [[ $c == *_all ]]; then
    sizes=$(awk '{printf "%s ", $1}' <<<"$rows")
    [ "$sizes" = "$(for k in $(seq 1 23); do printf "%s " $((1 << k)); done)" ] ||
      { iop_fail "$c: result rows for sizes $sizes, want 2 to 8388608"; continue; }
    echo "ok   $c: 23 sizes, the last: $(tail -1 <<<"$rows" | tr -s ' ')"
    continue
  fi
  echo "ok   $c: $(tr -s ' ' <<<"$row")"
done

# The bandwidth clients' reports, as rocedpd logged them: size and iterations as Linux sent them.
log=$IOP_WORK/rocedpd.log
for want in "size=65536 iterations=20" "size=65536 iterations=80" "size=65536 iterations=40" "size=8 iterations=300" \
  "size=8388608 iterations=5"; do
  grep -q "event=perftest_report .*$want " "$log" || iop_fail "no perftest_report with $want"
done
[ "$(grep -c "event=perftest_report .*size=65536 iterations=40 " "$log")" = 2 ] || iop_fail "write_bw_two: not two reports"
# With -a perftest reports once, for its last size; write_bw_tcp, read_bw_tcp and atomic_bw_tcp
# report too.
[ "$(grep -c "event=perftest_report" "$log")" = 10 ] || iop_fail "perftest reports: $(grep -c "event=perftest_report" "$log"), expected 10"
[ "$(grep -c "event=perftest_report .*size=8 iterations=300 " "$log")" = 2 ] || iop_fail "atomic_bw_tcp: no report"
# The TCP clients' sessions: each key made a data QP connected out of band.
[ "$(grep -c 'event=service_connected service=perftest peer="198.18.0.38 (TCP exchange)"' "$log")" = 7 ] ||
  iop_fail "TCP exchange: $(grep -c 'TCP exchange' "$log") data QPs connected, expected 7"
grep -q "event=perftest_refused" "$log" && iop_fail "rocedpd refused a Linux client: $(grep perftest_refused "$log")"

# WRITE latency on the wire: rocedpd's first WRITE is message_bytes long (4096: FIRST, 2 MIDDLE,
# LAST at path MTU 1024), then each side's 20 WRITE ONLYs of 64 bytes (138-byte frames). Packets
# by PSN: against the slow guest rocedp may send one again early.
wl=$(tshark -r "$IOP_ARTIFACTS/interop-daemon-perftest-write_lat.pcap" -Y "infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 10" \
  -T fields -e ip.src -e infiniband.bth.opcode -e frame.len -e infiniband.bth.psn 2>/dev/null |
  LC_ALL=C sort -u | awk '{print $1 "/" $2 "/" $3}' | LC_ALL=C sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
want_wl="$linux/10/138=20 $rocedp/10/138=20 $rocedp/6/1098=1 $rocedp/7/1082=2 $rocedp/8/1082=1 "
[ "$wl" = "$want_wl" ] &&
  echo "ok   write_lat on the wire: $want_wl" || iop_fail "write_lat's WRITEs (source/opcode/frame=count): $wl, want $want_wl"

# The atomics, each executed once in order, each answer the word's value before it.
for c in atomic_bw atomic_bw_tcp; do
  if out=$(/usr/bin/python3 "$iop_here/atomic_check.py" "$IOP_ARTIFACTS/interop-daemon-perftest-$c.pcap" "$linux" 2>&1); then
    echo "     $c: $(tail -1 <<<"$out")"
  else
    iop_fail "$c: atomic_check: $(tail -4 <<<"$out" | tr '\n' ' ')"
  fi
done

# /rocedp/listeners: a session per case, the sink's SENDs and the echo's answers; nothing held.
held=$(iop_daemon_holds "rdp-iop-d-$$")
[ "$held" = "0 0 " ] || iop_fail "rocedpd still holds connections and QPs: $held"
listeners=$("$IOP_BIN/rocedpctl" listeners --json --prefix "rdp-iop-d-$$" 2>&1)
check=$(python3 -c '
import json, sys
rows = json.loads(sys.argv[1])["listeners"]
d = {k: [r.get(k) for r in rows] for k in rows[0]}
# The -a sink (18518): 5 SENDs of each size 2 to 8 MiB, 5 x (2^24 - 2) bytes.
# The TCP clients: 5 sessions on 18515 (three reports, 200 more SENDs), one each on 18516 and 18517.
want = {"sessions": [15, 2, 2, 1], "reports": [10, 0, 0, 0], "received_messages": [400, 0, 40, 115],
        "received_bytes": [1638400, 0, 2560, 83886070], "echo_messages": [0, 40, 40, 0],
        "echo_bytes": [0, 2560, 2560, 0], "failed": [0, 0, 0, 0]}
bad = [f"{k}={d.get(k)} (want {v})" for k, v in want.items() if d.get(k) != v]
if d.get("accepted") != d.get("closed"):
    bad.append("accepted %s closed %s" % (d.get("accepted"), d.get("closed")))
print(" ".join(bad) or "ok")' "$listeners" 2>&1)
[ "$check" = ok ] && echo "ok   /rocedp/listeners: $(python3 -c 'import json, sys; rows = json.loads(sys.argv[1])["listeners"]; print({k: [r[k] for r in rows] for k in ("sessions", "reports", "data_moved", "accepted", "received_messages", "echo_messages")})' "$listeners")" ||
  iop_fail "/rocedp/listeners: $check"

iop_clean_link "$con"
echo "guest exit $IOP_GUEST_RC; ${#cases[@]} cases in $IOP_GUEST_SECS s"
[ $IOP_FAILED = 0 ] && echo "PASS: rocedpd's perftest service against Linux perftest"
