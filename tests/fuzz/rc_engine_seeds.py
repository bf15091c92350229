#!/usr/bin/python3
"""Writes the seed conversations of fuzz_rc_engine (tests/fuzz/fuzz_rc_engine.cpp explains the
record format) into tests/fuzz/seeds/rc_engine/: each opcode family the RC roles handle, as
requests to B and as answers to A, with the PSN and QPN the receiver expects
(A's answers keep the PSNs of its requests: fuzz_rc_engine.cpp's World posts them from PSN 100)."""
import os
import struct
import sys

TO_A, KEEP_PSN, KEEP_QPN, AIM, STEP = 0x01, 0x02, 0x04, 0x08, 0x10


def bth(opcode, ack_req=False, psn=0):
    # opcode, SE/M/pad/tver, P_Key, resv8 + dest QP (set by the target), AckReq + PSN (set by the
    # target unless the record keeps it)
    return struct.pack(">BBHII", opcode, 0, 0xFFFF, 0, (0x80000000 if ack_req else 0) | psn)


def reth(va, length):
    return struct.pack(">QII", va, 0, length)


def aeth(syndrome, msn=0):
    return struct.pack(">I", (syndrome << 24) | msn)


def record(ctl, transport):
    return struct.pack(">BH", ctl, len(transport)) + transport


PAY = bytes(range(64))
B = STEP | AIM
A = TO_A | STEP | AIM
seeds = {
    "empty": b"",  # the clean run: every request of A succeeds
    "write_only": record(B, bth(0x0A, True) + reth(0, 64) + PAY),
    "write_only_imm": record(B, bth(0x0B, True) + reth(64, 64) + PAY + b"\x00\x00\x00\x07"),
    "write_first_middle_last": record(B, bth(0x06) + reth(128, 2048 + 64) + bytes(1024))
    + record(B, bth(0x07) + bytes(1024)) + record(B, bth(0x08, True) + PAY),
    "send_only": record(B, bth(0x04, True) + PAY),
    "send_only_imm": record(B, bth(0x05, True) + b"\x00\x00\x00\x09" + PAY),
    "send_first_last": record(B, bth(0x00) + bytes(1024)) + record(B, bth(0x02, True) + PAY),
    "send_invalidate": record(B, bth(0x17, True) + b"\x00\x00\x01\x00" + PAY),
    "read_request": record(B, bth(0x0C, True) + reth(256, 128)),
    # At the end of B's 4096-byte region: the last 64 bytes, then 64 bytes of which 8 fit (NAK).
    "write_region_end": record(B, bth(0x0A, True) + reth(4096 - 64, 64) + PAY)
    + record(B, bth(0x0A, True) + reth(4096 - 8, 64) + PAY),
    "read_region_end": record(B, bth(0x0C, True) + reth(4096 - 100, 128)),
    "fetch_add": record(B, bth(0x14, True) + struct.pack(">QIQQ", 8, 0, 3, 0)),
    "cmp_swap": record(B, bth(0x13, True) + struct.pack(">QIQQ", 16, 0, 9, 0)),
    "ack": record(A, bth(0x11) + aeth(0x1F)),
    "nak_sequence": record(A, bth(0x11) + aeth(0x60)),
    "nak_rnr": record(A, bth(0x11) + aeth(0x21)),
    "nak_access": record(A, bth(0x11) + aeth(0x62)),
    "read_response_only": record(A | KEEP_PSN, bth(0x10, psn=105) + aeth(0x1F) + bytes(128)),
    "read_response_first_last": record(A | KEEP_PSN, bth(0x0D, psn=108) + aeth(0x1F) + bytes(1024))
    + record(A | KEEP_PSN, bth(0x0E, psn=109) + bytes(1024))
    + record(A | KEEP_PSN, bth(0x0F, psn=110) + aeth(0x1F) + bytes(952)),
    "atomic_ack": record(A | KEEP_PSN, bth(0x12, psn=107) + aeth(0x1F) + struct.pack(">Q", 42)),
    "cnp": record(TO_A | STEP, bth(0x81) + bytes(16)),
    "duplicate_write": record(B, bth(0x0A, True) + reth(0, 64) + PAY)
    + record(B | KEEP_PSN, bth(0x0A, True) + reth(0, 64) + PAY),
    "mixed": record(B, bth(0x04, True) + PAY) + record(A, bth(0x11) + aeth(0x1F))
    + record(B, bth(0x0C, True) + reth(512, 256)) + record(TO_A | STEP, bth(0x11) + aeth(0x60)),
}

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "seeds", "rc_engine")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {out}")
