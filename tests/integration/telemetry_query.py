#!/usr/bin/env python3
"""Query a DPDK telemetry socket (v2, SOCK_SEQPACKET) and print one command's JSON value.

usage: telemetry_query.py FILE_PREFIX COMMAND [PYTHON_EXPR]
With PYTHON_EXPR, prints eval(PYTHON_EXPR) with the value bound to `d` (for shell assertions).
Exit status 1 if the socket cannot be reached or the command returned nothing."""
import json
import socket
import sys


def query(prefix, command):
    path = f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(path)
        info = json.loads(s.recv(16384).decode())
        s.send(command.encode())
        reply = json.loads(s.recv(info["max_output_len"]).decode())
    return reply.get(command.split(",")[0])


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        value = query(sys.argv[1], sys.argv[2])
    except OSError as e:
        print(f"telemetry_query: {e}", file=sys.stderr)
        return 1
    if value is None:
        return 1
    if len(sys.argv) > 3:
        print(eval(sys.argv[3], {}, {"d": value}))  # noqa: S307 - test helper, our own expressions
    else:
        print(json.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
