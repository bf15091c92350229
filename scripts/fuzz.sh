#!/usr/bin/env bash
# Runs every coverage-guided fuzz target (tests/fuzz/) with libFuzzer for a while each.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 60)
# Builds with clang into build-fuzz/ (ASan+UBSan+libFuzzer); seeds come from the real captures
# and the example configs; new corpus entries and crashes land in build-fuzz/fuzz-out/TARGET/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
"$root/scripts/setup.sh"
command -v clang++ >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null; }
dir=$root/build-fuzz
CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCEDP_FUZZ=ON >/dev/null
cmake --build "$dir" -j "$(nproc)" --target fuzz_wire_parser fuzz_cm_messages fuzz_config fuzz_rc_engine fuzz_cm_connection \
  fuzz_cm_agent
shared=$root/../shared
seed_frames() {  # frames of the captures (optionally a slice of each) as seed files
  python3 - "$1" "$2" "${@:3}" <<'PY'
import os, struct, sys
out, sl, files = sys.argv[1], sys.argv[2], sys.argv[3:]
off, ln = (int(x) for x in sl.split(":")) if sl else (0, 1 << 30)
os.makedirs(out, exist_ok=True)
n = 0
for f in files:
    data = open(f, "rb").read()
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    pos = 24
    while pos + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[pos + 8:pos + 12])[0]
        frame = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if len(frame) > off:
            open(os.path.join(out, f"seed{n:04d}"), "wb").write(frame[off:off + ln]); n += 1
PY
}
run() {  # target seed-dir
  local out=$dir/fuzz-out/$1 pid rc=0
  mkdir -p "$out/corpus" "$out/crashes"
  echo "==> $1 for ${secs}s"
  "$dir/tests/$1" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/crashes/" \
    "$out/corpus" "$2" &
  pid=$!
  wait "$pid" || rc=$?
  # A target that starts EAL (fuzz_cm_agent) leaves its runtime folder when libFuzzer ends it.
  rm -rf "/var/run/dpdk/rdp-${1//_/-}-$pid"
  return "$rc"
}
seeds=$dir/fuzz-seeds
seed_frames "$seeds/frames" "" "$shared"/captures/*.pcap
seed_frames "$seeds/mads" "62:256" "$shared"/captures/*.pcap
run fuzz_wire_parser "$seeds/frames"
run fuzz_cm_messages "$seeds/mads"
run fuzz_config "$root/config/examples"
run fuzz_rc_engine "$root/tests/fuzz/seeds/rc_engine"
run fuzz_cm_connection "$root/tests/fuzz/seeds/cm_connection"
run fuzz_cm_agent "$root/tests/fuzz/seeds/cm_agent"
