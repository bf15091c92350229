#!/usr/bin/python3
"""Writes the seeds of the fuzz targets that take structured inputs, into tests/fuzz/seeds/:
  rc_engine/      conversations for fuzz_rc_engine (its source explains the record format): each
                  opcode family the RC roles handle, as requests to B and as answers to A, with the
                  PSN and QPN the receiver expects (A's answers keep the PSNs of its requests:
                  fuzz_rc_engine.cpp's World posts them from PSN 100)
  cm_connection/  scripts for fuzz_cm_connection (operation bytes, its source lists them): the
                  exchanges of an establishment, its failures and its endings
  cm_agent/       scripts for fuzz_cm_agent (operation and argument bytes, listed below): the same
                  with the whole connection manager, and MADs a side receives again or altered"""
import os
import struct
import sys

TO_A, KEEP_PSN, KEEP_QPN, AIM, STEP, SRQ, IPV6, TWO = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80


def bth(opcode, ack_req=False, psn=0):
    # opcode, SE/M/pad/tver, P_Key, resv8 + dest QP (set by the target), AckReq + PSN (set by the
    # target unless the record keeps it)
    return struct.pack(">BBHII", opcode, 0, 0xFFFF, 0, (0x80000000 if ack_req else 0) | psn)


def reth(va, length):
    return struct.pack(">QII", va, 0, length)


def reth_fr(va, length):
    # rkey bit 0: an aimed record (AIM) addresses B's fast-register region instead of its region
    return struct.pack(">QII", va, 1, length)


def reth_mw(va, length):
    # rkey bits 1..0 = 2: an aimed record addresses the region under B's window, with the window's
    # key (the window lends [1024, 3072) of it)
    return struct.pack(">QII", va, 2, length)


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

# The same conversations between QPs that speak RoCEv2 over IPv6 (the first record's IPV6 bit).
for name in ("write_only", "send_only", "read_request", "fetch_add", "ack", "read_response_only",
             "write_region_end", "mixed"):
    seeds[name + "_ipv6"] = bytes([seeds[name][0] | IPV6]) + seeds[name][1:]
# B receiving from a shared receive queue (the first record's SRQ bit).
for name in ("send_only", "send_only_imm", "send_first_last", "send_invalidate", "mixed"):
    seeds[name + "_srq"] = bytes([seeds[name][0] | SRQ]) + seeds[name][1:]
# Two pairs on shared CQs (the first record's TWO bit; TWO in a record: the frame is for A2 or B2,
# whose requests are a WRITE, a READ of 256 bytes, a SEND and a fetch-add from PSN 7000).
seeds.update({
    "two_clean": record(TWO | STEP, b""),  # a runt, then the clean wire: all 13 succeed
    "two_write_send": record(B | TWO, bth(0x0A, True) + reth(0, 64) + PAY)
    + record(B, bth(0x04, True) + PAY) + record(B | TWO, bth(0x04, True) + PAY),
    "two_send_srq": record(B | TWO | SRQ, bth(0x04, True) + PAY) + record(B, bth(0x04, True) + PAY)
    + record(B | TWO, bth(0x00) + bytes(1024)) + record(B | TWO, bth(0x02, True) + PAY),
    "two_answers": record(A | TWO | KEEP_PSN, bth(0x10, psn=7001) + aeth(0x1F) + bytes(256))
    + record(A | TWO | KEEP_PSN, bth(0x12, psn=7003) + aeth(0x1F) + struct.pack(">Q", 42))
    + record(A | KEEP_PSN, bth(0x10, psn=105) + aeth(0x1F) + bytes(128)),
    "two_nak_one": record(A | TWO, bth(0x11) + aeth(0x62)) + record(A, bth(0x11) + aeth(0x1F)),
    "two_read_request": record(B | TWO, bth(0x0C, True) + reth(256, 128))
    + record(B, bth(0x0C, True) + reth(512, 64)),
    # B's fast-register region: written, invalidated by a SEND with invalidate (IETH bit 0), then
    # written again (NAKed: the region is gone); and a WRITE of B2's across the invalidation.
    "fr_invalidate": record(B, bth(0x0A, True) + reth_fr(0, 64) + PAY)
    + record(B, bth(0x17, True) + b"\x00\x00\x00\x01" + PAY)
    + record(B, bth(0x0A, True) + reth_fr(64, 64) + PAY),
    "two_fr_invalidate_mid_write": record(B | TWO, bth(0x06) + reth_fr(0, 1024 + 64) + bytes(1024))
    + record(B, bth(0x17, True) + b"\x00\x00\x00\x01" + PAY)
    + record(B | TWO, bth(0x08, True) + PAY),
    # B's memory window: a WRITE into it, a SEND with invalidate of it (IETH bits 1..0 = 2), a
    # WRITE of other bytes to the same place (NAKed: the window is gone); WRITEs outside it and
    # across its end (NAKed).
    "mw_invalidate": record(B, bth(0x0A, True) + reth_mw(1024, 64) + PAY)
    + record(B, bth(0x17, True) + b"\x00\x00\x00\x02" + PAY)
    + record(B, bth(0x0A, True) + reth_mw(1024, 64) + bytes(range(64, 128))),
    "mw_outside": record(B, bth(0x0A, True) + reth_mw(0, 64) + PAY)
    + record(B | STEP, bth(0x0A, True) + reth_mw(3072 - 32, 64) + PAY)
    + record(B, bth(0x0A, True) + reth_mw(2048, 64) + PAY),
})

# fuzz_cm_connection's operations (byte % 19): 0 A connects, 1 deliver A->B, 2 deliver B->A,
# 3 B accepts, 4 B rejects, 5 B sends an MRA, 6 A completes, 7 A disconnects, 8 B disconnects,
# 9 A closes, 10 B closes, 11 next timer, 12 T: T ms pass, 13 D P X: the next message of
# direction D with byte P xor X, 14 D: lost, 15 D: duplicated, 16 B sees traffic (comm
# established), 17 S: A (S odd) or B is stale, 18 D + 256 bytes: a MAD of the peer's making.
OPEN = [0, 1, 3, 2, 6, 1]  # REQ, REP, RTU: both established
scripts = {
    "establish_a_disconnects": OPEN + [7, 1, 2, 11, 11],
    "establish_b_disconnects": OPEN + [8, 2, 1, 11, 11],
    "crossing_dreqs": OPEN + [7, 8, 1, 2, 1, 2, 11],
    "rejected": [0, 1, 4, 2],
    "mra_then_accept": [0, 1, 5, 2, 11, 3, 2, 6, 1],
    "lost_req_retried": [0, 14, 1, 11, 1, 3, 2, 6, 1],
    "lost_rep_retried": [0, 1, 3, 14, 0, 11, 2, 6, 1],
    "lost_rtu_traffic_seen": [0, 1, 3, 2, 6, 14, 1, 16],
    "lost_dreq_timeout": OPEN + [7, 14, 1, 11, 11, 11, 11, 11],
    "duplicate_req": [0, 15, 1, 1, 1, 2, 3, 2, 6, 1],
    "close_before_accept": [0, 1, 10, 2],
    "close_after_rep": [0, 1, 3, 2, 9, 1],
    "close_established": OPEN + [9, 10, 1, 2, 11],
    "stale_peer": OPEN + [17, 1, 1, 2],
    "altered_rep": [0, 1, 3, 13, 0, 40, 0xFF, 6],
    "silent_peer": [0, 11, 11, 11, 11, 11, 12, 200],
    "peer_mad": [0, 18, 1] + list(bytes(256)),
}

# fuzz_cm_agent's scripts: a flags byte (bit 0: IPv6; bit 1: services mode, below), then operations (an operation byte % 13
# and an argument byte): 0 C: A connects (C odd: through its shared endpoint), 1 N: B
# accepts its Nth connector, 2 N: B rejects it, 3 N: A completes its Nth, 4 S: a side (S odd: B,
# its S >> 1 th) disconnects, 5 S: the same, abortively, 6 S: closes it, 7 _ K H [at value]...:
# B receives again A's most recent CM message of kind K (REQ ... DREP below), H & 3 of its MAD's
# bytes changed (H & 0x80: from another source address), 8: the same from B to A, 9 T: T x 50 ms
# pass, 10 R: R + 1 polling rounds, 11 P: B's listener pauses or resumes its connect events (P
# odd), or closes or listens again, 12 S: a side's CM stops or resumes reading.
PUMP = [10, 8]
MAD_COMM_ID = 24 + 3  # the low byte of the body's first field: the sender's comm ID
MAD_REMOTE_COMM_ID = 28 + 3
MAD_ATTR = 17  # the low byte of the attribute ID (0x10 REQ ... 0x16 DREP)
REQ, MRA, REJ, REP, RTU, DREQ, DREP = range(7)  # K: 0x10 + K
CONNECTED = [0, 0] + PUMP + [1, 0] + PUMP + [3, 0] + PUMP  # REQ, REP, RTU
agent_scripts = {
    "established_a_disconnects": CONNECTED + [4, 0] + PUMP,
    "established_b_disconnects": CONNECTED + [4, 1] + PUMP,
    "abortive": CONNECTED + [5, 1] + PUMP + [9, 30],
    "both_close": CONNECTED + [6, 0, 6, 1] + PUMP,
    "rejected": [0, 0] + PUMP + [2, 0] + PUMP,
    "two_connections": [0, 0, 0, 0] + PUMP + [1, 0, 1, 1] + PUMP + [3, 0, 3, 1] + PUMP + [4, 2] + PUMP,
    "request_unanswered": [0, 0] + PUMP + [9, 50, 9, 50, 9, 50],
    "listener_closes_on_request": [0, 0] + PUMP + [11, 0] + PUMP + [11, 0, 0, 0] + PUMP,
    "b_deaf": [12, 1, 0, 0] + PUMP + [9, 20, 12, 1] + PUMP + [1, 0] + PUMP + [3, 0] + PUMP,
    "a_deaf_after_rep": [0, 0] + PUMP + [12, 0, 1, 0] + PUMP + [9, 20, 12, 0] + PUMP,
    "duplicate_req": [0, 0] + PUMP + [7, 0, REQ, 0] + PUMP + [1, 0] + PUMP + [7, 0, REQ, 0] + PUMP,
    "duplicate_req_when_connected": CONNECTED + [7, 0, REQ, 0, 7, 0, RTU, 0] + PUMP,
    "duplicate_rep": CONNECTED + [8, 0, REP, 0] + PUMP,
    "stale_req": CONNECTED + [7, 0, REQ, 1, MAD_COMM_ID, 0x5A] + PUMP,
    "req_from_elsewhere": [0, 0] + PUMP + [7, 0, REQ, 0x80] + PUMP + [1, 0] + PUMP,
    "dreq_after_close": CONNECTED + [4, 0] + PUMP + [9, 30, 7, 0, DREQ, 0] + PUMP,
    "dreq_unknown": CONNECTED + [4, 0] + PUMP + [7, 0, DREQ, 1, MAD_REMOTE_COMM_ID, 0x33] + PUMP,
    "rtu_as_rep": CONNECTED + [7, 0, RTU, 1, MAD_ATTR, 0x13] + PUMP,
    "scrambled_req": [0, 0] + PUMP + [7, 0, REQ, 3, 40, 0xFF, 60, 0, 100, 0x80] + PUMP + [1, 0] + PUMP,
    "duplicate_drep": CONNECTED + [4, 1] + PUMP + [8, 0, DREP, 0, 7, 0, DREQ, 0] + PUMP,
    "mra_again": [0, 0] + PUMP + [9, 40] + [8, 0, MRA, 0] + PUMP + [1, 0] + PUMP,
}
agent_scripts.update({
    "endpoint_connections": [0, 1] + PUMP + [1, 0] + PUMP + [3, 0] + PUMP + [0, 1] + PUMP + [6, 0]
    + PUMP + [9, 50, 9, 50, 0, 1] + PUMP + [1, 1] + PUMP + [3, 2] + PUMP,
    "paused_listener": [11, 1, 0, 0] + PUMP + [9, 30, 11, 1, 0, 0] + PUMP + [1, 0] + PUMP + [3, 1]
    + PUMP,
    "paused_when_connected": CONNECTED + [11, 1, 7, 0, REQ, 0, 0, 0] + PUMP + [11, 1] + PUMP,
    "endpoint_duplicate_req": [0, 1] + PUMP + [7, 0, REQ, 0] + PUMP + [1, 0] + PUMP + [3, 0] + PUMP,
})
agent_seeds = {k: bytes([0] + v) for k, v in agent_scripts.items()}
# Services mode (flags bit 1): B is rocedpd's echo, memory and perftest services (connect's
# argument >> 1, mod 3), 3 connections each at most (perftest 4); 13 N: A sends on its Nth
# connection (N mod its connections), an echo or perftest one it completed, its receive for the
# answer posted; on a perftest one the message of kind N >> 4 (fuzz_cm_agent.cpp's
# perftest_message: 0 version, 1 too old a version, 2 system data, 3 MTU, 4 zeros, 5 key, 6 report
# field, 7.. lengths perftest never sends, 10 longer than the service's receive).
ECHO, MEMORY, PERFTEST = 0, 2, 4


def pt(kind, conn=0):
    return [13, (kind << 4) | conn] + PUMP


PT_PREAMBLE = [0, PERFTEST] + PUMP + [3, 0] + PUMP + pt(0) + pt(2) + pt(2) + pt(3) + pt(4)
PT_SESSION = PT_PREAMBLE + [0, PERFTEST] + PUMP + [3, 1] + PUMP + pt(4) + pt(5) + pt(5)
SERVED = [0, ECHO] + PUMP + [3, 0] + PUMP
services_scripts = {
    "services_echo": SERVED + [13, 0] + PUMP + [13, 77] + PUMP + [4, 0] + PUMP,
    "services_memory": [0, MEMORY] + PUMP + [3, 0] + PUMP + [13, 0] + PUMP + [4, 0] + PUMP,
    "services_over_limit": [0, ECHO] * 4 + PUMP + [3, 0, 3, 1, 3, 2, 3, 3] + PUMP + [13, 1] + PUMP,
    "services_abandoned_accept": [0, ECHO, 0, MEMORY] + PUMP + [6, 0, 6, 2] + PUMP + [9, 40],
    "services_duplicates": SERVED + [7, 0, REQ, 0, 7, 0, RTU, 0, 8, 0, REP, 0] + PUMP + [13, 0] + PUMP,
    "services_stale_req": SERVED + [13, 0] + PUMP + [7, 0, REQ, 1, MAD_COMM_ID, 0x5A] + PUMP + [9, 30],
    "services_deaf": [12, 1, 0, ECHO] + PUMP + [9, 20, 12, 1] + PUMP + [3, 0] + PUMP + [13, 0] + PUMP,
    "services_endpoint": [0, ECHO | 1] + PUMP + [3, 0] + PUMP + [13, 0] + PUMP + [5, 0] + PUMP,
    # perftest: a whole session (control, a data connection, keys, the report, the closing key),
    # ended by the client's control disconnect; and the service's refusals.
    "services_perftest": PT_SESSION + pt(6) * 5 + pt(5) + [4, 0] + PUMP + [9, 20],
    "services_perftest_data_disconnects": PT_SESSION + [4, 2] + PUMP + pt(5) + PUMP,
    "services_perftest_refused": PT_PREAMBLE + pt(8) + [9, 20],
    "services_perftest_old_version": [0, PERFTEST] + PUMP + [3, 0] + PUMP + pt(1) + [9, 20],
    "services_perftest_overflow": PT_PREAMBLE + pt(10) + [9, 20],
    "services_perftest_key_early": [0, PERFTEST] + PUMP + [3, 0] + PUMP + pt(0) + pt(5) + [9, 20],
}
for name, v in services_scripts.items():
    agent_seeds[name] = bytes([2] + v)
agent_seeds["services_echo_ipv6"] = bytes([3] + services_scripts["services_echo"])
agent_seeds["services_memory_ipv6"] = bytes([3] + services_scripts["services_memory"])
agent_seeds["services_perftest_ipv6"] = bytes([3] + services_scripts["services_perftest"])
for name in ("established_a_disconnects", "two_connections", "duplicate_req_when_connected", "stale_req",
             "req_from_elsewhere", "endpoint_connections", "scrambled_req"):
    agent_seeds[name + "_ipv6"] = bytes([1] + agent_scripts[name])

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "seeds")
for folder, items in (("rc_engine", seeds), ("cm_connection", {k: bytes(v) for k, v in scripts.items()}),
                      ("cm_agent", agent_seeds)):
    out = os.path.join(root, folder)
    os.makedirs(out, exist_ok=True)
    for name, data in items.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(items)} seeds in {out}")
