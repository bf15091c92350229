#!/usr/bin/env bash
# rocedpd with a bad configuration exits 2 and names file:line:column and the key; --check-config
# validates without starting anything.
source "$(dirname "$0")/lib.sh"

write_pcap_config "$work/good.yaml"
"$rocedpd" --check-config "$work/good.yaml" > "$work/check.out" 2>&1 || fail "a valid config was rejected: $(cat "$work/check.out")"

# Unknown key on line 8, column 5 (ports[0].colour).
cat > "$work/bad.yaml" <<'YAML'
eal:
  lcores: [0, 1]
  main_lcore: 0
ports:
  - name: p0
    devargs: net_null0
    address: 198.18.0.1/24
    colour: blue
dataplane:
  lcores: [1]
YAML
for mode in --config --check-config; do
  status=0
  "$rocedpd" $mode "$work/bad.yaml" > "$work/out" 2> "$work/err" || status=$?
  [ "$status" -eq 2 ] || fail "$mode: exit status $status, expected 2"
  grep -q "^$work/bad.yaml:8:5: ports\[0\]\.colour: " "$work/err" \
    || fail "$mode: stderr does not name file:line:column and key: $(cat "$work/err")"
done

# A wrong type: the error points at the value.
sed 's/^  lcores: \[1\]$/  lcores: one/' "$work/good.yaml" > "$work/type.yaml"
status=0
"$rocedpd" --config "$work/type.yaml" > /dev/null 2> "$work/err" || status=$?
[ "$status" -eq 2 ] || fail "wrong type: exit status $status, expected 2"
grep -q "^$work/type.yaml:[0-9]*:[0-9]*: dataplane\.lcores" "$work/err" || fail "wrong type: $(cat "$work/err")"

# A missing file and a bad command line are errors too.
status=0; "$rocedpd" --config "$work/none.yaml" > /dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "missing file: exit status $status"
status=0; "$rocedpd" --bogus > /dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "bad usage: exit status $status"
echo PASS
