#!/usr/bin/env bash
# rdma_cm applications on a live Linux Soft-RoCE peer against rocedp, both roles, in one guest
# boot per MTU:
#   rocedpd (198.18.0.20) serves echo listeners; the Linux guest (198.18.0.51) runs rdma_client:
#     client-echo        Linux connects, SENDs, gets the echo, Linux disconnects
#     client-rocedp-disc the service disconnects after one echo (the DREQ comes from rocedp)
#     client-rnr         the service posts its receives 300 ms late: Linux meets RNR NAKs and
#                        must retry (its rcvd_rnr_err rises, nothing exceeds its retries)
#   the guest runs rdma_server; rocedp-perf (198.18.0.21) --connect ... --peer-echoes:
#     server-echo        rocedp connects, SENDs, receives the answer; Linux disconnects
#     server-rnr         rocedp posts the answer's receive 200 ms late: Linux meets RNR NAKs
#   rping (librdmacm's example: per ping a SEND, a READ of the client's source, a SEND, a WRITE
#   into the client's sink, a SEND; 3000-byte pings, so multi-packet READs and WRITEs at path
#   MTU 1024), 10 pings with -V (the client compares the sink with the source):
#     rping-lc           Linux rping -c against rocedp-perf --rping -s
#     rping-ls           rocedp-perf --rping -c against Linux rping -s
#   the ops check (what no Linux example sends: SEND and WRITE with immediate data, a WRITE and a
#   READ through a memory window, a solicited SEND that alone raises the event of a CQ armed for
#   solicited completions, SEND with Invalidate of the window, a WRITE through the invalidated
#   window that must be refused; tests/interop/ops_check_peer.c, built on the host, runs in the
#   guest with its libibverbs and librdmacm):
#     ops-lc             ops_check_peer -c against rocedp-perf --ops-check -s
#     ops-lc-fr          the same with rocedp's window a fast-registered region (--fast-register)
#     ops-ls             rocedp-perf --ops-check -c against ops_check_peer -s
#   rocedpd's memory service (listener 7474, 64 KiB), a Linux verbs client (ops_check_peer -M):
#     mem-lc             the region from the REP's private data; WRITE and READ 3000 bytes at its
#                        start and at its end, then 1.5 s idle while the service's keepalives
#                        (keepalive_ms: 100, zero-length RDMA WRITEs) arrive, each ACKed by Linux,
#                        then a WRITE one byte past the end: refused
#   802.1Q and DSCP (MTU 1500 only): the guest's rping on VLAN 7 (eth0.7, 198.18.7.51; 8021q
#   loaded from the share), rocedp-perf --rping with --vlan 7 --vlan-priority 3 --dscp 26
#   (198.18.7.21), 3 pings each:
#     vlan-lc            Linux rping -c -V against rocedp-perf --rping -s
#     vlan-ls            rocedp-perf --rping -c -V against Linux rping -s
#                        every frame rocedp sends (ARP included) carries VLAN 7, priority 3, and
#                        its RoCEv2 frames DSCP 26; Linux's QP follows rocedp's REQ (its traffic
#                        class 104) in vlan-ls and stays unmarked in vlan-lc
#     prio-ls            rocedp-perf --rping -c -V --vlan-priority 3 (no VLAN, 198.18.9.21)
#                        against Linux rping -s on eth0.0 (VLAN ID 0, 198.18.9.51): both send
#                        priority-tagged frames (rocedp's at priority 3), both take them
#     tos-lc             Linux ib_write_bw -R --tos 96 against rocedp-perf --perftest (unmarked
#                        port): each of rocedp's QPs and its REP follow its REQ's traffic class
#                        (perftest's control connection unmarked, its data connection ToS 96
#                        both ways)
#     ecn-lc             Linux ib_write_bw -R -n 200 against rocedp-perf --perftest --ecn while
#                        the bridge marks every RoCEv2 frame from Linux to rocedp CE (a congested
#                        switch): rocedp answers with CNPs (BECN, DSCP 48) to Linux's QPs, at
#                        most one per QP per 4 µs, its own frames carry ECT(0), and the run
#                        completes (Linux's rxe ignores CNPs)
#   the CM check (connections that do not come about; tests/interop/cm_check_peer.c in the guest,
#   rocedp-perf --cm-check on the host; path MTU plays no part, so at MTU 1500 only):
#     cm-lc-reject       Linux connects with private data; rocedp's consumer rejects with its own
#                        (NdkReject): Linux gets REJECTED, status 28, and rocedp's data
#     cm-lc-refused      Linux connects to a port of rocedpd without a listener: REJECTED, status 8
#     cm-churn           20 rdma_client runs against rocedpd's echo, then 16 started at once (16
#                        requests in flight together), then 10 more killed (SIGKILL) 0.1 to 0.5 s
#                        into theirs (their kernel ends each connection); every echo must
#                        succeed, and at the end rocedpd must hold no connection and no QP
#     cm-ls-refused      rocedp connects to a port without a Linux listener: CONNECTION_REFUSED
#     cm-ls-reject       Linux's consumer rejects rocedp's request (rdma_reject with private data):
#                        CONNECTION_REFUSED, Linux's data through NdkGetConnectionData
#     cm-ls-abandon      Linux accepts, then destroys the connection before rocedp's RTU (rocedp
#                        waits 2 s before CompleteConnectEx): CompleteConnectEx ends with
#                        CONNECTION_ABORTED (seed 000)
#     cm-ls-late         Linux accepts after 6 s: rocedp's REQ times out and comes again, Linux's
#                        CM answers it with an MRA, and the connection is established
#     cm-lc-late         rocedp accepts after 9 s: Linux's REQ comes again, rocedp answers with an
#                        MRA, and Linux's connection is established
#     reload-lc          rocedpd reloads (SIGHUP) a configuration without listener 7473 and with
#                        a new echo listener 7480: Linux's rdma_client is served on 7480, refused
#                        on 7473 (REJECTED, status 8) and still served on 7471
#     cm-ls-give-up      Linux does not answer; rocedp closes its connector after 1 s: Connect ends
#                        CANCELLED, and rocedp's REJ is the one Linux's own CM sends when its
#                        client gives up (reason 4, Message REJected 2, ARI the REQ's CA GUID);
#                        Linux hands its consumer no event for it, as for its own client's
# Each case's traffic is captured on the bridge (build/test-artifacts/interop-MTU-CASE.pcap) and
# checked by roce-check; who sent the DREQ is read from the capture. At the end Linux must show
# no sequence errors and no exhausted retries.
#   rdma_cm.sh MTU        (1500: path MTU 1024; 4200: path MTU 4096)
set -uo pipefail
mtu=${1:?MTU}
IOP_PREFIX="$mtu-"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init "rdma-cm-$mtu"
linux=198.18.0.51 daemon=198.18.0.20 perf=198.18.0.21
vlinux=198.18.7.51 vperf=198.18.7.21  # on VLAN 7
plinux=198.18.9.51 pperf=198.18.9.21  # priority-tagged (VLAN ID 0)

iop_net "$mtu" dpdk-d dpdk-p
dev_d=$(iop_devargs 0 dpdk-d "$mtu") dev_p=$(iop_devargs 1 dpdk-p "$mtu")
iop_rocedpd "$mtu" "$dev_d" "$daemon" "{port: rig0, nd_port: 7471, service: echo}" \
  "{port: rig0, nd_port: 7472, service: echo, receive_delay_ms: 300}" \
  "{port: rig0, nd_port: 7473, service: echo, disconnect_after: 1}" \
  "{port: rig0, nd_port: 7474, service: memory, memory_bytes: 65536, keepalive_ms: 100}" || { iop_fail "rocedpd did not start"; exit 1; }
daemon_pid=$IOP_LAST_PID

{
  iop_case_lines
  cat <<EOF
begin client-echo; rdma_client -s $daemon -p 7471; end client-echo \$?
begin client-rocedp-disc; rdma_client -s $daemon -p 7473; end client-rocedp-disc \$?
hw before-rnr
begin client-rnr; rdma_client -s $daemon -p 7472; end client-rnr \$?
hw after-rnr
begin server-echo; rdma_server -p 7471; end server-echo \$?
hw before-server-rnr
begin server-rnr; rdma_server -p 7471; end server-rnr \$?
begin rping-lc; await rping-listening
rping -c -a $perf -C 10 -S 3000 -V -v; end rping-lc \$?
begin rping-ls; rping -s -a $linux -S 3000 -v; end rping-ls \$?
begin ops-lc; await ops-listening
/mnt/share/ops_check_peer -c -a $perf -t 60; end ops-lc \$?
begin ops-lc-fr; await ops-fr-listening
/mnt/share/ops_check_peer -c -a $perf -t 60; end ops-lc-fr \$?
begin ops-ls; /mnt/share/ops_check_peer -s -t 60; end ops-ls \$?
begin mem-lc; /mnt/share/ops_check_peer -M -a $daemon -p 7474 -w 1500; end mem-lc \$?
EOF
  [ "$mtu" = 1500 ] && cat <<EOF
begin vlan-lc; sh /mnt/share/modules/load.sh
ip link add link eth0 name eth0.7 type vlan id 7 && ip addr add $vlinux/24 dev eth0.7 && ip link set eth0.7 up
await rping-vlan-listening
rping -c -a $vperf -C 3 -S 3000 -V; end vlan-lc \$?
begin vlan-ls; rping -s -a $vlinux -S 3000; end vlan-ls \$?
begin prio-ls; ip link add link eth0 name eth0.0 type vlan id 0 && ip addr add $plinux/24 dev eth0.0 && ip link set eth0.0 up
rping -s -a $plinux -S 3000; end prio-ls \$?
begin tos-lc; await tos-listening
n=0; until ib_write_bw -d rxe0 -R --tos 96 -n 5 -s 4096 -F $perf; do n=\$((n+1)); [ \$n -ge 60 ] && break; sleep 0.5; done
end tos-lc \$((n >= 60))
begin ecn-lc; await ecn-listening
n=0; until ib_write_bw -d rxe0 -R -n 200 -s 4096 -F $perf; do n=\$((n+1)); [ \$n -ge 60 ] && break; sleep 0.5; done
end ecn-lc \$((n >= 60))
begin cm-lc-reject; await cm-listening
/mnt/share/cm_check_peer -c -a $perf -p 7476 -e 28 -d rocedp-rejects; end cm-lc-reject \$?
begin cm-lc-refused; /mnt/share/cm_check_peer -c -a $daemon -p 7479 -e 8; end cm-lc-refused \$?
begin cm-churn; ok=0; for i in \$(seq 20); do rdma_client -s $daemon -p 7471 >/dev/null 2>&1 && ok=\$((ok+1)); done
pids=; for i in \$(seq 16); do rdma_client -s $daemon -p 7471 >/dev/null 2>&1 & pids="\$pids \$!"; done
burst=0; for p in \$pids; do wait \$p && burst=\$((burst+1)); done; echo "BURST \$burst"
for i in \$(seq 10); do rdma_client -s $daemon -p 7472 >/dev/null 2>&1 & p=\$!; sleep 0.\$((i % 5 + 1)); kill -9 \$p; wait \$p; done
echo "CHURN \$ok"; end cm-churn 0
begin cm-ls-refused; n=0; while [ ! -e /mnt/share/cm-ls-refused-done ] && [ \$n -lt 600 ]; do sleep 0.1; n=\$((n+1)); done; end cm-ls-refused 0
begin cm-ls-reject; /mnt/share/cm_check_peer -s reject -p 7476 -d rocedp-asks; end cm-ls-reject \$?
begin cm-ls-abandon; /mnt/share/cm_check_peer -s abandon -p 7477; end cm-ls-abandon \$?
begin cm-ls-give-up; /mnt/share/cm_check_peer -s silent -p 7478; end cm-ls-give-up \$?
begin cm-ls-late; /mnt/share/cm_check_peer -s late -p 7477; end cm-ls-late \$?
begin cm-lc-late; await cm-late-listening
/mnt/share/cm_check_peer -c -a $perf -p 7476 -k -t 40; end cm-lc-late \$?
begin reload-lc; rdma_client -s $daemon -p 7480 && /mnt/share/cm_check_peer -c -a $daemon -p 7473 -e 8 &&
rdma_client -s $daemon -p 7471; end reload-lc \$?
EOF
  echo "hw end"
} >"$IOP_WORK/guest.sh"

# rocedp-perf's port (dpdk-p, one MAC) in every case; each adds its address.
perf_port=(--port-devargs "$dev_p" --mac 02:00:00:00:00:15 --mtu "$mtu")
# The host's side of the rdma_server cases: once the server prints its start line, connect.
perf_rc=()
run_perf() {
  iop_perf_echo "$linux" "$1" "$IOP_WORK/perf.log" "${perf_port[@]}" --ip "$perf/24" \
    --file-prefix "rdp-iop-p-$$" --timeout 30 "${@:2}"
  perf_rc+=("$IOP_PERF_RC")
}
on_begin_server_echo() { : >"$IOP_WORK/perf.log"; run_perf 1; }
on_begin_server_rnr() { run_perf 2 --recv-delay-ms 200; }
# reap PID: waits for a server iop_serve_guest started (none if PID is empty); its status in REAPED.
reap() {
  REAPED=none
  [ -n "$1" ] || return 0
  wait "$1"
  REAPED=$?
}
# rping: rocedp-perf --rping on the same port as rocedp-perf above. As the server it must listen
# before the guest's client starts (rping does not retry a rejected connection).
rping_ep=("${perf_port[@]}" --ip "$perf/24" --timeout 60 -S 3000)
# rping_lc NAME MARKER ARGS: rocedp-perf --rping -s ARGS for the guest's client (log NAME-srv.log);
# rping_ls NAME ARGS: reaps that server, then runs rocedp-perf --rping -c ARGS against the guest's
# server (NAME-cli.log). Their statuses in rping_rc[NAME-srv] and rping_rc[NAME-cli].
declare -A rping_rc=() rping_pid=()
rping_lc() {
  local name=$1 marker=$2
  shift 2
  iop_serve_guest "$name-srv" "$marker" --rping -s "$@" --file-prefix "rdp-iop-rs-$$"
  rping_pid[$name]=$IOP_LAST_PID
}
rping_ls() {
  local name=$1
  shift
  reap "${rping_pid[$name]:-}"
  rping_rc[$name-srv]=$REAPED
  ip netns exec rig "$IOP_BIN/rocedp-perf" --rping -c -V "$@" --file-prefix "rdp-iop-rc-$$" >"$IOP_WORK/$name-cli.log" 2>&1
  rping_rc[$name-cli]=$?
}
on_begin_rping_lc() { rping_lc rping rping-listening -v "${rping_ep[@]}"; }
on_begin_rping_ls() { rping_ls rping -a "$linux" -C 10 "${rping_ep[@]}"; }

# The ops check: rocedp-perf --ops-check against the guest's ops_check_peer, as for rping.
ops_ep=("${perf_port[@]}" --ip "$perf/24" --timeout 60)
ops_srv="" ops_srv_rc=none ops_fr="" ops_fr_rc=none ops_cli_rc=none
on_begin_ops_lc() {
  iop_serve_guest ops-srv ops-listening --ops-check -s "${ops_ep[@]}" --file-prefix "rdp-iop-os-$$"
  ops_srv=$IOP_LAST_PID
}
on_begin_ops_lc_fr() {
  reap "$ops_srv"
  ops_srv_rc=$REAPED
  iop_serve_guest ops-fr ops-fr-listening --ops-check -s --fast-register "${ops_ep[@]}" --file-prefix "rdp-iop-of-$$"
  ops_fr=$IOP_LAST_PID
}
on_begin_ops_ls() {
  reap "$ops_fr"
  ops_fr_rc=$REAPED
  # connect_retrying tries again while the guest's server is not listening yet.
  ip netns exec rig "$IOP_BIN/rocedp-perf" --ops-check -c -a "$linux" "${ops_ep[@]}" \
    --file-prefix "rdp-iop-oc-$$" >"$IOP_WORK/ops-cli.log" 2>&1
  ops_cli_rc=$?
}
# The CM check: rocedp-perf --cm-check on the same port again. Its clients run to the end inside
# their hooks; before each, the guest's server must be listening (its console line).
cm_srv="" cm_srv_rc=none cm_cli_rc=()
on_begin_cm_lc_reject() {
  iop_serve_guest cm-srv cm-listening --cm-check -s --answer reject --peer-data linux-asks \
    "${ops_ep[@]}" --file-prefix "rdp-iop-ms-$$"
  cm_srv=$IOP_LAST_PID
}
# cm_client CASE MODE PORT [ARGS...]: rocedp-perf --cm-check -c against the guest (its log
# cm-CASE.log); waits first for the guest's server of MODE on PORT (none for MODE -).
cm_client() {
  local case=$1 mode=$2 port=$3
  shift 3
  [ "$mode" = - ] || iop_wait "$IOP_WORK/linux.console" "cm_check_peer: server: listening on port $port \($mode\)" 60 ||
    iop_fail "cm-$case: the guest's cm_check_peer did not listen"
  ip netns exec rig "$IOP_BIN/rocedp-perf" --cm-check -c -a "$linux" -p "$port" "$@" "${ops_ep[@]}" \
    --file-prefix "rdp-iop-mc-$$" >"$IOP_WORK/cm-$case.log" 2>&1
  cm_cli_rc+=("$case=$?")
}
on_begin_cm_ls_refused() {
  reap "$cm_srv"
  cm_srv_rc=$REAPED
  cm_client ls-refused - 7479 --expect refused
  touch "$IOP_WORK/share/cm-ls-refused-done"
}
on_begin_cm_ls_reject() { cm_client ls-reject reject 7476 --expect refused --peer-data linux-rejects; }
on_begin_cm_ls_abandon() { cm_client ls-abandon abandon 7477 --expect aborted; }
on_begin_cm_ls_give_up() { cm_client ls-give-up silent 7478 --expect cancelled --wait-ms 1000; }
on_begin_cm_ls_late() { cm_client ls-late late 7477 --expect connected; }
cm_late="" cm_late_rc=none
on_begin_cm_lc_late() {
  iop_serve_guest cm-late cm-late-listening --cm-check -s --answer late --wait-ms 9000 \
    "${ops_ep[@]}" --file-prefix "rdp-iop-ml-$$"
  cm_late=$IOP_LAST_PID
}

# A reload of rocedpd's listeners: 7473 leaves, 7480 comes, the others stay.
on_begin_reload_lc() {
  sed -i -e '/nd_port: 7473/d' "$IOP_WORK/rocedpd.yaml"
  echo "  - {port: rig0, nd_port: 7480, service: echo}" >>"$IOP_WORK/rocedpd.yaml"
  kill -HUP "$daemon_pid"
  iop_wait "$IOP_WORK/rocedpd.log" "event=reload_done restart_needed=false" 10 ||
    iop_fail "reload-lc: rocedpd did not finish its reload"
  iop_console_has "$IOP_WORK/rocedpd.log" "event=listeners_reloaded started=1 stopped=1 listeners=4" ||
    iop_fail "reload-lc: rocedpd did not start one listener and stop one"
}

# 802.1Q: rocedp-perf --rping as above on VLAN 7 with priority 3, the guest on eth0.7.
vlan_ep=("${perf_port[@]}" --ip "$vperf/24" --timeout 60 -S 3000 --vlan 7 --vlan-priority 3 --dscp 26)
on_begin_vlan_lc() { rping_lc rping-vlan rping-vlan-listening "${vlan_ep[@]}"; }
on_begin_vlan_ls() { rping_ls rping-vlan -a "$vlinux" -C 3 "${vlan_ep[@]}"; }
on_begin_prio_ls() {
  rping_ls rping-prio -a "$plinux" -C 3 "${perf_port[@]}" --ip "$pperf/24" --timeout 60 -S 3000 --vlan-priority 3
}
# A perftest server on the unmarked port for Linux's marked client, which starts once it listens (a
# REQ sent before rocedp-perf's port is up is lost, and Linux's CM sends it again only after its
# response timeout, about 6 s).
tos_srv="" tos_rc=none
on_begin_tos_lc() {
  iop_serve_guest perftest-tos tos-listening --perftest "${perf_port[@]}" --ip "$perf/24" --timeout 60 \
    --file-prefix "rdp-iop-pt-$$" write bw -n 5 -s 4096 -F -R
  tos_srv=$IOP_LAST_PID
}
# ECN: the bridge marks CE from before the guest's client starts until the next case; rocedp-perf
# prints its engine's counters (--counters).
ecn_srv="" ecn_rc=none ecn_marked=none
on_ready_ecn_lc() { iop_bridge_mark_ce "$linux" "$perf"; }
on_begin_ecn_lc() {
  reap "$tos_srv"  # the same port
  tos_rc=$REAPED tos_srv=""
  iop_serve_guest perftest-ecn ecn-listening --perftest "${perf_port[@]}" --ip "$perf/24" --timeout 60 \
    --file-prefix "rdp-iop-pe-$$" --ecn --counters write bw -n 200 -s 4096 -F -R
  ecn_srv=$IOP_LAST_PID
}
on_ready_cm_lc_reject() {
  ecn_marked=$(iop_bridge_mark_ce count)
  iop_bridge_mark_ce off
}

iop_share_check_peers
[ "$mtu" = 1500 ] && iop_share_modules 8021q

iop_guest linux "$linux" "$mtu" "$IOP_WORK/guest.sh"
iop_follow "$IOP_WORK/linux.console" "host $daemon or host $perf or (vlan and (host $vperf or host $vlinux or host $pperf or host $plinux))" 260 || iop_fail "the guest did not finish"

con="$IOP_WORK/linux.console"
# Every Linux client is gone (done, or killed in cm-churn): rocedpd must hold no connection and no
# QP of theirs.
held=$(iop_daemon_holds "rdp-iop-d-$$")
[ "$held" = "0 0 " ] || iop_fail "rocedpd still holds connections and QPs (count of each: $held) after the guest's clients ended"
echo "rocedpd after the guest's clients: $held(connections, QPs)"
iop_check_captures
cm_cases=()
[ "$mtu" = 1500 ] && cm_cases=(vlan_lc vlan_ls prio_ls tos_lc ecn_lc cm_lc_reject cm_lc_refused cm_churn cm_ls_refused cm_ls_reject cm_ls_abandon cm_ls_give_up cm_ls_late cm_lc_late reload_lc)
reap "$cm_late"
cm_late_rc=$REAPED
for c in client_echo client_rocedp_disc client_rnr server_echo server_rnr rping_lc rping_ls ops_lc ops_lc_fr ops_ls mem_lc "${cm_cases[@]}"; do
  var="IOP_RC_$c"
  [ "${!var:-x}" = 0 ] || iop_fail "$c: Linux side ended with rc=${!var:-none}"
done
[ "${perf_rc[*]:-}" = "0 0" ] || iop_fail "rocedp-perf ended with rc=${perf_rc[*]:-none}"
# rping: both sides succeed, ten pings each; the client validated every one (Linux's -V in
# rping-lc, rocedp's in rping-ls); the server READ and WROTE each ping, read off the capture.
# rping_done CASE NAME SIDE PINGS: rocedp-perf --rping of that side ended 0 and served (srv) or
# validated (cli) PINGS pings; its log becomes the case's artifact.
rping_done() {
  local log=$IOP_WORK/$2-$3.log
  [ "${rping_rc[$2-$3]:-none}" = 0 ] ||
    iop_fail "$1: rocedp-perf --rping ($3) ended with rc=${rping_rc[$2-$3]:-none} ($(tail -1 "$log" 2>/dev/null))"
  cp "$log" "$IOP_ARTIFACTS/interop-$mtu-$1.log" 2>/dev/null
  if [ "$3" = srv ]; then
    grep -q "$4 pings of 3000 bytes$" "$log" 2>/dev/null || iop_fail "$1: rocedp did not serve $4 pings"
  else
    grep -q "$4 pings of 3000 bytes, each validated" "$log" 2>/dev/null || iop_fail "$1: rocedp did not validate $4 pings"
  fi
}
rping_done rping-lc rping srv 10
rping_done rping-ls rping cli 10
pings=$(tr -d '\r' <"$IOP_WORK/linux.console" | grep -c "^ping data: rdma-ping-")
[ "$pings" = 10 ] || iop_fail "rping-lc: Linux printed $pings validated pings, not 10"
# 802.1Q: both sides of the VLAN cases and rocedp's side of prio-ls succeeded (each client
# validated its 3 pings); every frame rocedp sent carried its VLAN ID and priority 3, and Linux's
# came with the same VLAN ID.
if [ "$mtu" = 1500 ]; then
  rping_done vlan-lc rping-vlan srv 3
  rping_done vlan-ls rping-vlan cli 3
  rping_done prio-ls rping-prio cli 3
  for c in vlan-lc:7:3 vlan-ls:7:3 prio-ls:0:3; do
    IFS=: read -r c vid pcp <<<"$c"
    # Per source MAC: VLAN ID, priority, frames; and how many of them are RoCEv2.
    tags=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-$c.pcap" -T fields -E separator=, -e eth.src -e vlan.id -e vlan.priority 2>/dev/null |
      sort | uniq -c | tr -s ' ' | tr '\n' ';')
    roce=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-$c.pcap" -Y "udp.dstport == 4791 && eth.src == 02:00:00:00:00:15" -T fields -e frame.number 2>/dev/null | wc -l)
    [ "$(tr ';' '\n' <<<"$tags" | grep -c "02:00:00:00:00:15,")" = 1 ] && grep -q " 02:00:00:00:00:15,$vid,$pcp;" <<<"$tags" ||
      iop_fail "$c: rocedp's frames are not all tagged VLAN $vid priority $pcp (count source,vlan,priority: $tags)"
    [ "$roce" -ge 10 ] || iop_fail "$c: only $roce RoCEv2 frames from rocedp in the capture"
    tr ';' '\n' <<<"$tags" | grep -v "02:00:00:00:00:15," | grep -q ",$vid," || iop_fail "$c: no frame of Linux's on VLAN $vid ($tags)"
    echo "$c: $roce RoCEv2 frames from rocedp; frames (count source,vlan,priority): $tags"
  done
  # DSCP of the data QPs' frames (not QP1's MADs), per source: rocedp's port marks 26 (ToS 104)
  # in both cases; Linux's QP follows rocedp's REQ as the passive side (vlan-ls), and is unmarked
  # as the active one (vlan-lc). tos-lc: rocedp's unmarked port follows Linux's REQ (ToS 96).
  [ -z "$tos_srv" ] || { reap "$tos_srv"; tos_rc=$REAPED; }
  [ "$tos_rc" = 0 ] || iop_fail "tos-lc: rocedp-perf --perftest ended with rc=$tos_rc ($(tail -1 "$IOP_WORK/perftest-tos.log" 2>/dev/null))"
  cp "$IOP_WORK/perftest-tos.log" "$IOP_ARTIFACTS/interop-$mtu-tos-lc.log" 2>/dev/null
  # (count source:dscp) of case $1's data frames, or with $2 set (count source:destqp:dscp).
  dscp_of() {
    tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband \
      -Y "udp.dstport == 4791 && infiniband.bth.destqp != 1" -T fields -E separator=: -e ip.src \
      ${2:+-e infiniband.bth.destqp} -e ip.dsfield.dscp 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';'
  }
  for c in "vlan-lc $vperf:26 $vlinux:0" "vlan-ls $vperf:26 $vlinux:26"; do
    set -- $c
    dscp=$(dscp_of "$1")
    for want in "$2" "$3"; do
      [ "$(tr ';' '\n' <<<"$dscp" | grep -c " ${want%:*}:")" = 1 ] && grep -q " $want;" <<<"$dscp" ||
        iop_fail "$1: the data frames from ${want%:*} are not all DSCP ${want#*:} (count source:dscp: $dscp)"
    done
    echo "$1: data frames (count source:dscp): $dscp"
  done
  # tos-lc: perftest's two connections, its control connection unmarked and its data connection
  # asked for ToS 96 (DSCP 24): rocedp's frames to each of Linux's QPs carry that QP's REQ's
  # traffic class, and Linux marks its data QP's frames.
  # Only the REQs rocedp answered with a REP: the guest's loop tries again when its first REQ
  # comes before rocedp-perf listens, and that one's REJ (no listener) leaves a QP with no data.
  reqs=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-tos-lc.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == 0x0010 || infiniband.mad.attributeid == 0x0012 || infiniband.mad.attributeid == 0x0013" \
    -T fields -e ip.src -e infiniband.mad.attributeid -e infiniband.cm.req.localqpn -e infiniband.cm.req.prim_tfcclass 2>/dev/null |
    awk -v perf="$perf" '$2 == "0x0010" {req = $3 ":" $4}
      $1 == perf && $2 == "0x0013" && req != "" {print req; req = ""}
      $1 == perf && $2 == "0x0012" {req = ""}' | sort -u)
  flows=$(dscp_of tos-lc qpn)
  grep -q ":0x60$" <<<"$reqs" || iop_fail "tos-lc: no REQ of Linux's with traffic class 96 ($reqs)"
  while IFS=: read -r qpn tc; do
    want=$((tc >> 2))
    got=$(tr ';' '\n' <<<"$flows" | grep " $perf:$qpn:" | sed 's/.*://' | sort -u | tr '\n' ' ')
    [ "$got" = "$want " ] || iop_fail "tos-lc: rocedp's frames to Linux's QP $qpn carry DSCP '$got', its REQ asked for $want"
  done <<<"$reqs"
  tr ';' '\n' <<<"$flows" | grep -q " $linux:.*:24$" || iop_fail "tos-lc: Linux sent no data frame at DSCP 24 ($flows)"
  # rocedp's REPs answer on their REQ's class too (DSCP 0 for the control connection, 24 for the
  # data connection), as Linux's CM sends its MADs on the REQ's path.
  want_reps=$(while IFS=: read -r _ tc; do echo $((tc >> 2)); done <<<"$reqs" | sort -u | tr '\n' ' ')
  reps=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-tos-lc.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.cm.rep.remotecommid && ip.src == $perf" -T fields -e ip.dsfield.dscp 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$reps" = "$want_reps" ] || iop_fail "tos-lc: rocedp's REPs carry DSCP '$reps', the REQs asked for '$want_reps'"
  echo "tos-lc: REQs (QPN:traffic class) $(tr '\n' ' ' <<<"$reqs"); rocedp's REPs (DSCP) $reps; data frames (count source:destqp:dscp): $flows"
  # ecn-lc: the bridge marked Linux's frames CE; rocedp's engine counted them and sent CNPs, each
  # to one of Linux's QPs (their REQs' local QPNs) with BECN set (BTH byte 4, which this tshark
  # shows as infiniband.reserved), DSCP 48 and Not-ECT; every other RoCEv2 frame of rocedp's QPs
  # carries ECT(0). (The capture shows Linux's frames before the bridge marks them.)
  reap "$ecn_srv"
  ecn_rc=$REAPED
  elog=$IOP_WORK/perftest-ecn.log epcap=$IOP_ARTIFACTS/interop-$mtu-ecn-lc.pcap
  cp "$elog" "$IOP_ARTIFACTS/interop-$mtu-ecn-lc.log" 2>/dev/null
  [ "$ecn_rc" = 0 ] || iop_fail "ecn-lc: rocedp-perf --perftest --ecn ended with rc=$ecn_rc ($(tail -1 "$elog" 2>/dev/null))"
  counter() { grep '"rc_counters"' "$elog" 2>/dev/null | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -1; }
  rx_ce=$(counter rx_ce) tx_cnp=$(counter tx_cnp)
  [ "${rx_ce:-0}" -ge 800 ] || iop_fail "ecn-lc: rocedp counted ${rx_ce:-no} CE-marked packets, not the 800 of 200 WRITEs of 4 KiB (the bridge marked $ecn_marked)"
  [ "${tx_cnp:-0}" -ge 1 ] && [ "${tx_cnp:-0}" -lt "${rx_ce:-0}" ] ||
    iop_fail "ecn-lc: rocedp sent ${tx_cnp:-no} CNPs for ${rx_ce:-no} CE-marked packets"
  ereqs=$(tshark -r "$epcap" -d udp.port==4791,infiniband -Y "infiniband.cm.req.localqpn" \
    -T fields -e infiniband.cm.req.localqpn 2>/dev/null | sort -u | tr '\n' ' ')
  cnps=$(tshark -r "$epcap" -d udp.port==4791,infiniband -Y "ip.src == $perf && infiniband.bth.opcode == 129" \
    -T fields -E separator=: -e infiniband.bth.destqp -e infiniband.reserved -e ip.dsfield.dscp -e ip.dsfield.ecn 2>/dev/null |
    sort | uniq -c | tr -s ' ' | tr '\n' ';')
  ncnp=0
  while read -r cnt qpn becn dscp ecn; do
    [ -n "$cnt" ] || continue
    ncnp=$((ncnp + cnt))
    grep -qw -- "$qpn" <<<"$ereqs" || iop_fail "ecn-lc: $cnt CNPs to QP $qpn, not one of Linux's ($ereqs)"
    [ "$becn" = 40 ] || iop_fail "ecn-lc: CNPs whose BTH byte 4 is $becn, not BECN alone (40) ($cnps)"
    [ "$dscp:$ecn" = 48:0 ] || iop_fail "ecn-lc: CNPs at DSCP $dscp ECN $ecn, not 48 and Not-ECT ($cnps)"
  done < <(tr ';' '\n' <<<"$cnps" | tr ':' ' ')
  [ "$ncnp" -ge 1 ] && [ "$ncnp" -le "${tx_cnp:-0}" ] || iop_fail "ecn-lc: $ncnp CNPs in the capture, rocedp counted ${tx_cnp:-none}"
  ect=$(tshark -r "$epcap" -d udp.port==4791,infiniband \
    -Y "ip.src == $perf && udp.dstport == 4791 && infiniband.bth.destqp != 1 && infiniband.bth.opcode != 129" \
    -T fields -e ip.dsfield.ecn 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  [ "$(tr ';' '\n' <<<"$ect" | grep -c .)" = 1 ] && grep -q "^ [0-9]* 2;$" <<<"$ect" ||
    iop_fail "ecn-lc: rocedp's data frames are not all ECT(0) (count ecn: $ect)"
  from_linux=$(tshark -r "$epcap" -Y "ip.src == $linux && udp.dstport == 4791" -T fields -e ip.dsfield.ecn 2>/dev/null |
    sort | uniq -c | tr -s ' ' | tr '\n' ';')
  echo "ecn-lc: bridge marked $ecn_marked; rocedp rx_ce $rx_ce, tx_cnp $tx_cnp; CNPs in the capture (count destqp:byte4:dscp:ecn): $cnps rocedp's data frames (count ecn): $ect Linux's (count ecn, as captured): $from_linux"
fi

# READ requests (opcode 12) and the WRITE's packets (6-8, 10) from the server of each case.
ops_from() {
  tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband -Y "ip.src == $2" \
    -T fields -e infiniband.bth.opcode 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';'
}
# The opcodes of case $1 from $2, each once, space-separated with a space either end.
opcode_set() {
  echo " $(ops_from "$1" "$2" | tr ';' '\n' | awk '{print $2}' | tr '\n' ' ')"
}
# How many NAKs remote access error (AETH syndrome 0x62) case $1's capture holds from $2.
naks_from() {
  tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband \
    -Y "ip.src == $2 && infiniband.aeth.syndrome == 0x62" -T fields -e frame.number 2>/dev/null | wc -l
}
for c in "rping-lc $perf" "rping-ls $linux"; do
  set -- $c
  ops=$(ops_from "$1" "$2")
  reads=$(tr ';' '\n' <<<"$ops" | awk '$2 == 12 {print $1}')
  writes=$(tr ';' '\n' <<<"$ops" | awk '$2 == 6 || $2 == 10 {n += $1} END {print n + 0}')
  [ "${reads:-0}" -ge 10 ] && [ "$writes" -ge 10 ] ||
    iop_fail "$1: the server ($2) sent ${reads:-0} READ requests and $writes WRITEs that start a message, not 10 each ($ops)"
  echo "$1: the server ($2) sent opcodes (count opcode) $ops"
done

# The ops check: both sides of both cases held every check (each side prints its own), and the
# capture shows the requests with immediate data and invalidation from the client and the
# server's NAK (remote access error, AETH syndrome 0x62) for the WRITE through the invalidated
# window.
[ "$ops_srv_rc" = 0 ] || iop_fail "ops-lc: rocedp-perf --ops-check -s ended with rc=$ops_srv_rc ($(grep FAIL "$IOP_WORK/ops-srv.log" 2>/dev/null | tail -1))"
[ "$ops_fr_rc" = 0 ] || iop_fail "ops-lc-fr: rocedp-perf --ops-check -s --fast-register ended with rc=$ops_fr_rc ($(grep FAIL "$IOP_WORK/ops-fr.log" 2>/dev/null | tail -1))"
[ "$ops_cli_rc" = 0 ] || iop_fail "ops-ls: rocedp-perf --ops-check -c ended with rc=$ops_cli_rc ($(grep FAIL "$IOP_WORK/ops-cli.log" 2>/dev/null | tail -1))"
cp "$IOP_WORK/ops-srv.log" "$IOP_ARTIFACTS/interop-$mtu-ops-lc.log" 2>/dev/null
cp "$IOP_WORK/ops-fr.log" "$IOP_ARTIFACTS/interop-$mtu-ops-lc-fr.log" 2>/dev/null
cp "$IOP_WORK/ops-cli.log" "$IOP_ARTIFACTS/interop-$mtu-ops-ls.log" 2>/dev/null
grep -q "server: every check held" "$IOP_WORK/ops-srv.log" 2>/dev/null || iop_fail "ops-lc: rocedp's server did not hold every check"
grep -q "server: every check held" "$IOP_WORK/ops-fr.log" 2>/dev/null || iop_fail "ops-lc-fr: rocedp's server did not hold every check"
grep -q "fast-register the window: STATUS_SUCCESS" "$IOP_WORK/ops-fr.log" 2>/dev/null || iop_fail "ops-lc-fr: rocedp did not fast-register its window"
grep -q "client: every check held" "$IOP_WORK/ops-cli.log" 2>/dev/null || iop_fail "ops-ls: rocedp's client did not hold every check"
# grep -c reads to the end: grep -q would leave tr writing into a closed pipe (status 141 under
# pipefail) once the console is long.
[ "$(tr -d '\r' <"$IOP_WORK/linux.console" | grep -c "^ops_check_peer: client: every check held")" = 2 ] || iop_fail "ops-lc, ops-lc-fr: Linux's client did not hold every check twice"
[ "$(tr -d '\r' <"$IOP_WORK/linux.console" | grep -c "^ops_check_peer: server: every check held")" = 1 ] || iop_fail "ops-ls: Linux's server did not hold every check"
# Opcodes: SEND LAST/ONLY with immediate 3/5, WRITE LAST/ONLY with immediate 9/11, READ request
# 12 (through the window), SEND ONLY with Invalidate 23.
for c in "ops-lc $linux $perf" "ops-lc-fr $linux $perf" "ops-ls $perf $linux"; do
  set -- $c
  ops=$(opcode_set "$1" "$2")
  for want in "3|5" "9|11" "12" "23"; do
    grep -Eq " ($want) " <<<"$ops" || iop_fail "$1: the client ($2) sent no opcode $want (opcodes:$ops)"
  done
  # The solicited event bit: on the solicited SEND (SEND ONLY, 4) and on nothing else the client
  # sent. Counted by PSN: a tail-loss probe may send that SEND again before the slow guest's ACK.
  se=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband \
    -Y "ip.src == $2 && infiniband.bth.se == 1" -T fields -e infiniband.bth.psn -e infiniband.bth.opcode 2>/dev/null |
    sort -u | cut -f2 | tr '\n' ' ')
  [ "$se" = "4 " ] || iop_fail "$1: the client ($2) set the solicited event bit on opcodes '$se', expected on one SEND ONLY (4)"
  naks=$(naks_from "$1" "$3")
  [ "$naks" -ge 1 ] || iop_fail "$1: the server ($3) sent no NAK remote access error"
  echo "$1: the client ($2) sent opcodes$ops; the server ($3) sent $naks NAK remote access error"
done

# The CM check: each side held its own checks (the statuses and private data it got), and the
# wire shows who sent which REJ: (source, reason) of each case's REJs, then the data.
rejs_of() {
  tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == 0x0012" -T fields -e ip.src -e infiniband.cm.rej.reason 2>/dev/null |
    while read -r src reason; do printf '%s:%d ' "$src" "$((reason))"; done
}
if [ "$mtu" = 1500 ]; then
  churn=$(tr -d '\r' <"$con" | sed -n 's/^CHURN //p')
  [ "$churn" = 20 ] || iop_fail "cm-churn: ${churn:-no} of 20 echoes through rocedpd succeeded"
  burst=$(tr -d '\r' <"$con" | sed -n 's/^BURST //p')
  [ "$burst" = 16 ] || iop_fail "cm-churn: ${burst:-no} of 16 clients started at once had their echo through rocedpd"
  # The burst's requests overlapped: the longest run of Linux's REQs without a DREQ of its between
  # them (1 for clients one after the other).
  peak=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-cm-churn.pcap" -d udp.port==4791,infiniband \
    -Y "ip.src == $linux && (infiniband.mad.attributeid == 0x0010 || infiniband.mad.attributeid == 0x0015)" \
    -T fields -e infiniband.mad.attributeid 2>/dev/null |
    awk '$1 == "0x0010" { if (++n > m) m = n; next } { n = 0 } END { print m + 0 }')
  echo "cm-churn: up to $peak of Linux's requests in a row before one of its DREQs"
  [ "$peak" -ge 2 ] || iop_fail "cm-churn: the 16 clients' requests did not overlap (at most $peak in a row)"
  [ "$cm_srv_rc" = 0 ] || iop_fail "cm-lc-reject: rocedp-perf --cm-check -s ended with rc=$cm_srv_rc ($(grep FAIL "$IOP_WORK/cm-srv.log" 2>/dev/null | tail -1))"
  grep -q "server: a connection request, private data 'linux-asks'" "$IOP_WORK/cm-srv.log" 2>/dev/null ||
    iop_fail "cm-lc-reject: rocedp did not read Linux's private data 'linux-asks' from the request"
  [ "${#cm_cli_rc[@]}" = 5 ] || iop_fail "cm-ls-*: ${#cm_cli_rc[@]} rocedp clients ran, not 5 (${cm_cli_rc[*]:-})"
  [ "$cm_late_rc" = 0 ] || iop_fail "cm-lc-late: rocedp-perf --cm-check -s --answer late ended with rc=$cm_late_rc ($(grep FAIL "$IOP_WORK/cm-late.log" 2>/dev/null | tail -1))"
  cp "$IOP_WORK/cm-late.log" "$IOP_ARTIFACTS/interop-$mtu-cm-lc-late.log" 2>/dev/null
  for r in "${cm_cli_rc[@]}"; do
    c=${r%%=*}
    [ "${r#*=}" = 0 ] || iop_fail "cm-$c: rocedp-perf --cm-check -c ended with rc=${r#*=} ($(grep FAIL "$IOP_WORK/cm-$c.log" 2>/dev/null | tail -1))"
    cp "$IOP_WORK/cm-$c.log" "$IOP_ARTIFACTS/interop-$mtu-cm-$c.log" 2>/dev/null
  done
  cp "$IOP_WORK/cm-srv.log" "$IOP_ARTIFACTS/interop-$mtu-cm-lc-reject.log" 2>/dev/null
  grep -q "STATUS_CONNECTION_REFUSED, the REJ's private data 'linux-rejects'" "$IOP_WORK/cm-ls-reject.log" 2>/dev/null ||
    iop_fail "cm-ls-reject: rocedp did not get Linux's reject with its private data"
  grep -q "complete_connect_ex after 2000 ms: STATUS_CONNECTION_ABORTED" "$IOP_WORK/cm-ls-abandon.log" 2>/dev/null ||
    iop_fail "cm-ls-abandon: rocedp's CompleteConnectEx did not end with STATUS_CONNECTION_ABORTED"
  [ "$(tr -d '\r' <"$con" | grep -c "^cm_check_peer: client: every check held")" = 4 ] || iop_fail "cm-lc-* and reload-lc: Linux's client did not hold every check four times"
  [ "$(tr -d '\r' <"$con" | grep -c "^cm_check_peer: server: every check held")" = 4 ] || iop_fail "cm-ls-*: Linux's server did not hold every check four times"
  # The late accepts: the client's REQ came again, the server answered it with an MRA for the REQ
  # (Message MRAed 0), and the connection was established (REP, RTU). Linux resends its REQ after
  # about 6 s (twice the packet lifetime rdma_cm gives a RoCE path, plus the 4 s response
  # timeout), rocedp after 4.3 s: so rocedp accepts after 9 s, Linux after 6.
  # Message MRAed: the top two bits of the MRA's ninth byte (Wireshark names no MRA field).
  mraed_of() {
    tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband \
      -Y "infiniband.mad.attributeid == 0x0011 && ip.src == $2" -T fields -e infiniband.mad.data 2>/dev/null |
      while read -r d; do printf '%d ' $((0x${d:16:2} >> 6)); done
  }
  for c in "cm-lc-late $linux $perf" "cm-ls-late $perf $linux"; do
    set -- $c
    reqs=$(iop_cm_sources "$1" 0x0010 | grep -c "^$2\$")
    mras=$(mraed_of "$1" "$3")
    [ "$reqs" -ge 2 ] || iop_fail "$1: the client ($2) sent $reqs REQs, expected it to send one again"
    [ "$(iop_cm_sources "$1" 0x0013 | sort -u)" = "$3" ] && [ "$(iop_cm_sources "$1" 0x0014 | sort -u)" = "$2" ] ||
      iop_fail "$1: no REP from $3 and RTU from $2"
    case " $mras" in
      *" 0 "*) ;;
      *) iop_fail "$1: the server ($3) sent no MRA for the REQ sent again (Message MRAed: '$mras')" ;;
    esac
    echo "$1: $reqs REQs from $2; MRAs from $3 (Message MRAed): '$mras'"
  done
  for c in "cm-lc-reject $perf:28" "cm-lc-refused $daemon:8" "cm-ls-refused $linux:8" "cm-ls-reject $linux:28" \
    "cm-ls-abandon $linux:28" "cm-ls-give-up $perf:4"; do
    set -- $c
    got=$(rejs_of "$1")
    [ "$got" = "$2 " ] || iop_fail "$1: REJs (source:reason) '$got', expected '$2'"
    echo "$1: REJ $got"
  done
  # The REJ of a client that gives up, as Linux's own CM writes it (cm.c cm_destroy_id in
  # REQ_SENT; compared Linux against Linux with cm_check_peer -g): Message REJected 2 (other),
  # ARI 8 bytes, the CA GUID of the REQ. Linux finds its request by that GUID and drops it
  # silently: the one REJ above is rocedp's. Checked that it can fail: with another GUID in the
  # ARI, Linux keeps the request and rejects it itself (reason 28) when its consumer lets go.
  rej=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-cm-ls-give-up.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == 0x0012" -T fields -e infiniband.cm.rej.msgrej \
    -e infiniband.cm.rej.rejinfolen -e infiniband.cm.rej.ari 2>/dev/null | head -1)
  guid=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-cm-ls-give-up.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == 0x0010" -T fields -e infiniband.cm.req.localcaguid 2>/dev/null | head -1)
  read -r msgrej infolen ari <<<"$rej"
  [ "$((msgrej))" = 2 ] && [ "$((infolen))" = 8 ] && [ "${ari:0:16}" = "${guid#0x}" ] ||
    iop_fail "cm-ls-give-up: rocedp's REJ has Message REJected '$msgrej', ARI length '$infolen', ARI '${ari:0:16}'; expected 2, 8 and the REQ's CA GUID '${guid#0x}'"
  # The abandoned accept: Linux's REP came first, and rocedp never sent an RTU.
  [ "$(iop_cm_sources cm-ls-abandon 0x0013 | sort -u)" = "$linux" ] || iop_fail "cm-ls-abandon: no REP from Linux"
  [ -z "$(iop_cm_sources cm-ls-abandon 0x0014)" ] || iop_fail "cm-ls-abandon: rocedp sent an RTU"
  # rocedp's REJ carries its consumer's private data ("rocedp-rejects").
  pd=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-cm-lc-reject.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == 0x0012" -T fields -e infiniband.cm.rej.private 2>/dev/null | head -1)
  [ "${pd:0:28}" = "$(printf rocedp-rejects | od -An -tx1 | tr -d ' \n')" ] || iop_fail "cm-lc-reject: the REJ's private data on the wire is '${pd:0:40}...'"
fi

# rocedpd's memory service: Linux read what it wrote at both ends of the region, and its WRITE
# past the end met rocedpd's NAK (remote access error).
[ "$(tr -d '\r' <"$con" | grep -c "^ops_check_peer: memory: every check held")" = 1 ] || iop_fail "mem-lc: Linux's memory client did not hold every check"
ops=$(opcode_set mem-lc "$linux")
for want in "6|10" "12"; do
  grep -Eq " ($want) " <<<"$ops" || iop_fail "mem-lc: Linux sent no opcode $want (opcodes:$ops)"
done
naks=$(naks_from mem-lc "$daemon")
[ "$naks" -ge 1 ] || iop_fail "mem-lc: rocedpd sent no NAK remote access error for the WRITE past the region"
echo "mem-lc: Linux sent opcodes$ops; rocedpd sent $naks NAK remote access error"
# rocedpd's keepalives while Linux's client idled: zero-length RDMA WRITE ONLYs (opcode 10), each
# answered by an ACK of Linux's at its PSN; the connection lived on (the last step reached rocedpd).
psns_of() {  # psns_of CASE SOURCE FILTER
  tshark -r "$IOP_ARTIFACTS/interop-$mtu-$1.pcap" -d udp.port==4791,infiniband \
    -Y "ip.src == $2 && $3" -T fields -e infiniband.bth.psn 2>/dev/null | sort -u
}
ka=$(psns_of mem-lc "$daemon" "infiniband.bth.opcode == 10 && infiniband.reth.dmalen == 0")
acked=$(psns_of mem-lc "$linux" "infiniband.bth.opcode == 17 && infiniband.aeth.syndrome < 0x20")
unacked=$(comm -23 <(echo "$ka") <(echo "$acked") | grep -c .)
[ "$(grep -c . <<<"$ka")" -ge 5 ] || iop_fail "mem-lc: rocedpd sent $(grep -c . <<<"$ka") keepalives in Linux's 1.5 s idle, not 5 or more"
[ "$unacked" = 0 ] || iop_fail "mem-lc: Linux ACKed no PSN of $unacked of rocedpd's keepalives"
# The connection lived through the idle time: Linux's last step, the WRITE past the end, reached
# it and was NAKed (above). That NAK ends rocedpd's QP (IBTA: a remote access error is fatal), so
# a keepalive that falls due before Linux's DREQ arrives (a few ms of each 100) finds the QP in
# error and the service ends the connection as failed with STATUS_CONNECTION_INVALID; a failure
# with any other status is the keepalives' doing.
grep "event=service_connection_failed" "$IOP_WORK/rocedpd.log" | grep "service=memory" |
  grep -qv "status=STATUS_CONNECTION_INVALID" &&
  iop_fail "mem-lc: rocedpd ended the memory connection as failed: $(grep service_connection_failed "$IOP_WORK/rocedpd.log")"
echo "mem-lc: $(grep -c . <<<"$ka") keepalives from rocedpd, each ACKed by Linux"
# rocedpd names the peer whose WRITE it refused: the memory connection's end (Linux's DREQ, or the
# failed keepalive above) is logged with Linux's address and the reason its QP ended.
mem_end=$(grep -E "event=service_(disconnected|connection_failed) " "$IOP_WORK/rocedpd.log" | grep "service=memory" || true)
[[ "$mem_end" == *"peer=$linux:"*"qp_error=refused_access"* ]] ||
  iop_fail "mem-lc: rocedpd's log does not name Linux's refused WRITE: $mem_end"
echo "mem-lc: rocedpd logged $(grep -o 'peer=[^ ]* qpn=[^ ]* qp_error=[^ ]*' <<<"$mem_end" | head -1)"

# Who disconnected, read off the wire.
dreq_of() { iop_cm_sources "$1" 0x0015 | sort -u | tr '\n' ' '; }
drep_of() { iop_cm_sources "$1" 0x0016 | sort -u | tr '\n' ' '; }
[ "$(dreq_of client-echo)" = "$linux " ] || iop_fail "client-echo: DREQ from '$(dreq_of client-echo)', expected Linux"
[ "$(drep_of client-echo)" = "$daemon " ] || iop_fail "client-echo: DREP from '$(drep_of client-echo)', expected rocedpd"
# The service disconnects once its echo is acknowledged, while rdma_client disconnects as soon as
# the echo arrives: the two DREQs race. Whichever leaves first, the other side must answer it (a
# DREP, or its own crossing DREQ, IBTA §12.9.7.2). rocedp as the side that disconnects first is
# checked deterministically by interop_perftest's -R client cases.
first_dreq=$(iop_cm_sources client-rocedp-disc 0x0015 | head -1)
other=$([ "$first_dreq" = "$daemon" ] && echo "$linux" || echo "$daemon")
case "$first_dreq" in
  "$daemon" | "$linux")
    case "$(drep_of client-rocedp-disc) $(dreq_of client-rocedp-disc)" in
      *"$other"*) echo "client-rocedp-disc: first DREQ from $first_dreq, answered by $other" ;;
      *) iop_fail "client-rocedp-disc: $other neither answered nor crossed the DREQ of $first_dreq" ;;
    esac ;;
  *) iop_fail "client-rocedp-disc: no DREQ on the wire" ;;
esac
[ "$(dreq_of server-echo)" = "$linux " ] || iop_fail "server-echo: DREQ from '$(dreq_of server-echo)', expected Linux"

# The path MTU both ends agreed on: the REQ's field (3 = 1024, 5 = 4096).
want_mtu=$([ "$mtu" -ge 4200 ] && echo 5 || echo 3)
for c in client-echo server-echo; do
  got=$(tshark -r "$IOP_ARTIFACTS/interop-$mtu-$c.pcap" -d udp.port==4791,infiniband -Y "infiniband.mad.attributeid == 0x0010" \
    -T fields -e infiniband.cm.req.pppmtu 2>/dev/null | head -1)
  [ -n "$got" ] && [ "$((got))" = "$want_mtu" ] || iop_fail "$c: REQ path MTU code '$got', expected $want_mtu"
done

# Linux recovered from the RNR NAKs and saw a clean link otherwise.
rnr_before=$(iop_hw "$con" before-rnr rcvd_rnr_err) rnr_after=$(iop_hw "$con" after-rnr rcvd_rnr_err)
[ "${rnr_after:-0}" -gt "${rnr_before:-0}" ] || iop_fail "client-rnr: Linux rcvd_rnr_err did not rise ($rnr_before -> $rnr_after)"
rnr_before=$(iop_hw "$con" before-server-rnr rcvd_rnr_err) rnr_after=$(iop_hw "$con" end rcvd_rnr_err)
[ "${rnr_after:-0}" -gt "${rnr_before:-0}" ] || iop_fail "server-rnr: Linux rcvd_rnr_err did not rise ($rnr_before -> $rnr_after)"
iop_clean_link "$con"

tr -d '\r' <"$con" | grep -E '^(END|HW end (rcvd_rnr_err|rcvd_seq_err|completer_retry_err))'
grep -h "t_typical\|^ 16 " "$IOP_WORK/perf.log" | head -2
[ $IOP_FAILED -eq 0 ] && echo "PASS: rdma_cm interop at MTU $mtu"
