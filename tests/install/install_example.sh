#!/usr/bin/env bash
# The installed product as a consumer sees it: `cmake --install` into a temporary prefix, then
# examples/write_pingpong built out of tree with pkg-config alone (no CMake, no repository path),
# then run as two processes over a net_memif link: every byte of every round trip must come back.
#   install_example.sh BUILD_DIR
set -euo pipefail
build=${1:?build dir}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../scripts/lib/stop_pid.sh"
src=$here/../../examples/write_pingpong
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (EAL runtime directory)"; exit 77; }

work=$(mktemp -d /tmp/rocedp-install.XXXXXX)
tag=rdp-inst-$$
server_pid= client_pid=
cleanup() {
  local rc=$?
  for pid in $client_pid $server_pid; do stop_pid "$pid" 30; done
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; } >&2; done
  fi
  rm -rf "$work" "/var/run/dpdk/$tag-s" "/var/run/dpdk/$tag-c"
  exit $rc
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
[ -f "$work/prefix/include/rocedp/rocedp.hpp" ] || fail "public headers not installed"
[ -f "$work/prefix/lib/cmake/rocedp/rocedpConfig.cmake" ] || fail "CMake package not installed"
for h in config pmd control dataplane; do
  [ ! -e "$work/prefix/include/$h" ] || fail "internal folder $h/ installed"
done

# Out of tree: a copy of the example and pkg-config, nothing else.
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
cp "$src/write_pingpong.cpp" "$work/"
cd "$work"
# shellcheck disable=SC2046
c++ -O2 -o write_pingpong write_pingpong.cpp $(pkg-config --cflags rocedp) $(pkg-config --libs --static rocedp) \
  > build.log 2>&1 || fail "out-of-tree build failed (build.log)"
# The public headers alone must not need DPDK's include path.
if pkg-config --cflags rocedp | grep -q dpdk; then fail "rocedp.pc Cflags reach into DPDK"; fi

sock=$work/pp.sock
./write_pingpong --role server --socket "$sock" --prefix "$tag-s" --iterations 500 > server.log 2>&1 &
server_pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done  # EAL start-up is slow on a busy host
[ -S "$sock" ] || fail "server did not create its memif socket"
./write_pingpong --role client --socket "$sock" --prefix "$tag-c" --iterations 500 > client.log 2>&1 &
client_pid=$!
wait "$client_pid" || fail "client failed"
client_pid=
wait "$server_pid" || fail "server failed"
server_pid=
grep -q "client: 500 round trips of 64 bytes, every byte checked" client.log || fail "client summary missing"
grep -q "server: PASS" server.log || fail "server did not pass"
# The pkg-config link line exports the process's sendmsg to the memif driver (pmd/memif_hello.hpp).
! grep -q memif_hello_guard_unavailable server.log client.log || fail "memif HELLO guard inactive"
cat client.log
echo "PASS"
