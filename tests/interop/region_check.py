#!/usr/bin/python3
"""Checks that a memory region rocedp dumped after a perftest run holds, byte for byte, what the
peer put on the wire, read off a capture with an independent decoder (scapy).

  region_check.py CAPTURE SENDER_IP write|read DUMP

write: the sender's RDMA WRITE First/Middle/Last/Only packets (opcodes 0x06-0x0A) into the region;
read: its READ Response First/Middle/Last/Only packets (0x0D-0x10) into the reader's buffer.
Every message of the run goes to the same address (perftest with a message larger than its cycle
buffer), so the region must equal each complete message. Retransmitted packets (same PSN) must
carry the same bytes. Exit 0 when the dump matches, 1 otherwise, 2 on usage errors.
"""
import sys

from scapy.all import IP, UDP, rdpcap  # noqa: E402

WRITE = {0x06: "first", 0x07: "middle", 0x08: "last", 0x0A: "only"}
READ = {0x0D: "first", 0x0E: "middle", 0x0F: "last", 0x10: "only"}


def payload_of(op, data):
    """Payload of an RC packet: after the BTH and the extension header its opcode carries, before
    the pad and the 4-byte ICRC."""
    pad = (data[1] >> 4) & 0x3
    hdr = 12
    if op in (0x06, 0x0A):
        hdr += 16  # RETH
    if op in (0x0D, 0x0F, 0x10):
        hdr += 4  # AETH
    return data[hdr:len(data) - 4 - pad]


def main():
    if len(sys.argv) != 5 or sys.argv[3] not in ("write", "read"):
        print(__doc__, file=sys.stderr)
        return 2
    cap, sender, kind, dump = sys.argv[1:]
    table = WRITE if kind == "write" else READ
    by_psn = {}
    order = []
    conflicts = 0
    for p in rdpcap(cap):
        if IP not in p or UDP not in p or p[IP].src != sender or p[UDP].dport != 4791:
            continue
        data = bytes(p[UDP].payload)
        if len(data) < 16 or data[0] not in table:
            continue
        psn = int.from_bytes(data[9:12], "big")
        body = (table[data[0]], payload_of(data[0], data))
        if psn in by_psn:
            conflicts += by_psn[psn] != body
            continue
        by_psn[psn] = body
        order.append(psn)
    region = open(dump, "rb").read()
    messages = 0
    bad = 0
    for psn in order:
        pos, part = by_psn[psn]
        if pos not in ("first", "only"):
            continue
        msg = bytearray(part)
        ok = pos == "only"
        n = psn
        while not ok:
            n = (n + 1) & 0xFFFFFF
            if n not in by_psn:
                break  # the capture missed a packet of this message: skip it
            pos_n, part_n = by_psn[n]
            msg += part_n
            ok = pos_n == "last"
        if not ok:
            continue
        messages += 1
        if bytes(msg) != region[:len(msg)]:
            bad += 1
            if bad == 1:
                diff = next(i for i in range(min(len(msg), len(region))) if msg[i] != region[i])
                print(f"message at PSN {psn}: first differing byte at offset {diff} "
                      f"(wire {msg[diff]:#04x}, region {region[diff]:#04x})")
    print(f"{messages} complete {kind} messages from {sender}, {len(by_psn)} distinct PSNs, "
          f"{conflicts} retransmissions with different bytes, {bad} messages differ from the region")
    return 0 if messages > 0 and bad == 0 and conflicts == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
