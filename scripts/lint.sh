#!/usr/bin/env bash
# Lint: clang-format (check only, .clang-format) and clang-tidy (.clang-tidy, with build/'s
# compile_commands.json) over our C++ sources. Exit 1 on any finding.
#   scripts/lint.sh              every file
#   scripts/lint.sh --changed    files changed since the merge base with main (CI; fast)
#   scripts/lint.sh FILE...      these files
# LINT_JOBS (default: nproc) clang-tidy processes; LINT_FORMAT=0 / LINT_TIDY=0 skip one half.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${LINT_BUILD:-build}
jobs=${LINT_JOBS:-$(nproc)}
dirs=(apps bench config control dataplane examples include pmd tests)

if [ "${1:-}" = "--changed" ]; then
  base=$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD)
  mapfile -t files < <({ git diff --name-only "$base" -- "${dirs[@]}"; git ls-files --others --exclude-standard -- "${dirs[@]}"; } |
                       grep -E '\.(cpp|hpp|h)$' | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
elif [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- "${dirs[@]}" | grep -E '\.(cpp|hpp|h)$')
fi
[ ${#files[@]} -gt 0 ] || { echo "lint: no files"; exit 0; }
status=0

if [ "${LINT_FORMAT:-1}" != 0 ]; then
  if ! clang-format --dry-run -Werror "${files[@]}" 2> /tmp/rocedp-lint-format.$$; then
    grep -E '^[^ ].*(error|warning):' /tmp/rocedp-lint-format.$$ | cut -d: -f1 | sort -u | sed 's/^/needs clang-format: /'
    echo "lint: clang-format differs in $(grep -cE '(error|warning):' /tmp/rocedp-lint-format.$$) places (clang-format -i FILE)"
    status=1
  fi
  rm -f /tmp/rocedp-lint-format.$$
fi

if [ "${LINT_TIDY:-1}" != 0 ]; then
  [ -f "$build/compile_commands.json" ] || { echo "lint: $build/compile_commands.json missing (configure first)"; exit 2; }
  # clang-tidy checks translation units; headers are checked through them (HeaderFilterRegex).
  mapfile -t units < <(python3 - "$build/compile_commands.json" "${files[@]}" <<'PY'
import json, os, sys
db = {os.path.realpath(e["file"]) for e in json.load(open(sys.argv[1]))}
for f in sys.argv[2:]:
    if os.path.realpath(f) in db:
        print(f)
PY
)
  if [ ${#units[@]} -gt 0 ]; then
    out=/tmp/rocedp-lint-tidy.$$
    printf '%s\n' "${units[@]}" | xargs -P "$jobs" -n 4 clang-tidy -p "$build" --quiet > "$out" 2>&1 || true
    grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated|^Suppressed|^Use -header-filter|^Error while processing' "$out" || true
    if grep -q -E '(error|warning):' "$out"; then
      echo "lint: clang-tidy findings in $(grep -E '(error|warning):' "$out" | cut -d: -f1 | sort -u | wc -l) files"
      status=1
    fi
    rm -f "$out"
  fi
fi
[ $status -eq 0 ] && echo "lint: clean (${#files[@]} files)"
exit $status
