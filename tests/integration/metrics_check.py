#!/usr/bin/python3
"""Checks `rocedpctl metrics` output (stdin) with an independent parser, prometheus_client's.

  metrics_check.py 'SAMPLE == VALUE' 'SAMPLE >= VALUE' ...
SAMPLE is a sample name with its labels as the exposition writes them, e.g.
rocedp_drops_total{reason="unknown_qpn"}; the labels named must match exactly (all of them).
Also checks that the text parses, that no series appears twice and that every counter's samples
end in _total. Exit 0 if all holds, else 1 with what did not.
"""
import re
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and others on bad text
        print(f"metrics_check: does not parse: {e}")
        return 1
    samples = {}
    errors = []
    for fam in families:
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in samples:
                errors.append(f"series twice: {s.name}{s.labels}")
            samples[key] = s.value
            if fam.type == "counter" and not s.name.endswith("_total"):
                errors.append(f"counter sample without _total: {s.name}")
    for spec in sys.argv[1:]:
        m = re.fullmatch(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s*(==|>=)\s*(\S+)\s*", spec)
        if not m:
            errors.append(f"bad expectation: {spec}")
            continue
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', m.group(3) or "")))
        key = (m.group(1), labels)
        want = float(m.group(5))
        if key not in samples:
            errors.append(f"missing: {spec}")
        elif samples[key] != want if m.group(4) == "==" else samples[key] < want:
            errors.append(f"{spec}: got {samples[key]}")
    if errors:
        print("metrics_check: " + "; ".join(errors))
        return 1
    print(f"metrics_check: {len(families)} families, {len(samples)} series, "
          f"{len(sys.argv) - 1} expectations hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
