#!/usr/bin/python3
"""Checks the atomics of a capture: every CompareSwap (0x13) and FetchAdd (0x14) request the
requester sent was executed exactly once, in PSN order, and its Atomic Acknowledge (0x12) carried
the value the word held just before. The headers are decoded here from the bytes (big-endian
AtomicETH: VA, R_Key, swap/add, compare; AtomicAckETH: the original value), independently of
rocedp's codec.

  atomic_check.py CAPTURE REQUESTER_IP [DUMP BASE]

Without DUMP, a word's value before its first request is taken from that request's answer (the
peer's memory is not known); every later answer must then follow from the requests before it.
With DUMP (the responder's region after the run, 8-byte little-endian words starting at address
BASE; before the run every word of its even cache lines held 0, of its odd lines 1, as rocedp-perf
--perftest sets them), the first answers must read those values too, and the region must end as
the replay does.
Retransmitted requests and repeated answers (same PSN) must be identical. Prints the counts; exit 0
when everything matches, 1 otherwise, 2 on usage errors.
"""
import sys

from scapy.all import IP, UDP, rdpcap  # noqa: E402

CMP_SWAP, FETCH_ADD, ATOMIC_ACK = 0x13, 0x14, 0x12
MASK = (1 << 64) - 1


def initial(off):
    """A dumped region's word before the run: 0 on even cache lines, 1 on odd ones."""
    return (off // 64) % 2


def main():
    if len(sys.argv) not in (3, 5):
        print(__doc__, file=sys.stderr)
        return 2
    cap, requester = sys.argv[1], sys.argv[2]
    dump = open(sys.argv[3], "rb").read() if len(sys.argv) == 5 else None
    base = int(sys.argv[4], 0) if dump is not None else 0
    requests, order, answers = {}, [], {}
    conflicts = again = 0
    for p in rdpcap(cap):
        if IP not in p or UDP not in p or p[UDP].dport != 4791:
            continue
        data = bytes(p[UDP].payload)
        if len(data) < 16:
            continue
        op, psn = data[0], int.from_bytes(data[9:12], "big")
        if p[IP].src == requester and op in (CMP_SWAP, FETCH_ADD) and len(data) >= 12 + 28 + 4:
            eth = data[12:40]
            req = (op, int.from_bytes(eth[0:8], "big"), int.from_bytes(eth[12:20], "big"),
                   int.from_bytes(eth[20:28], "big"))
            if psn in requests:
                conflicts += requests[psn] != req
                again += 1
            else:
                requests[psn] = req
                order.append(psn)
        elif p[IP].dst == requester and op == ATOMIC_ACK and len(data) >= 12 + 4 + 8 + 4:
            orig = int.from_bytes(data[16:24], "big")
            if psn in answers:
                conflicts += answers[psn] != orig
            else:
                answers[psn] = orig
    bad = conflicts
    if conflicts:
        print(f"{conflicts} retransmitted requests or repeated answers differ from the first")
    words = {}
    swapped = failed_swaps = 0
    for psn in order:
        op, va, swap_add, compare = requests[psn]
        if psn not in answers:
            print(f"PSN {psn:#x}: request to {va:#x} has no answer")
            bad += 1
            continue
        if va % 8:
            print(f"PSN {psn:#x}: misaligned address {va:#x}")
            bad += 1
            continue
        known = va in words or dump is not None
        old = words.get(va, initial(va - base) if dump is not None else answers[psn])
        if known and answers[psn] != old:
            print(f"PSN {psn:#x}: answer {answers[psn]:#x} for {va:#x}, which held {old:#x}")
            bad += 1
        if op == FETCH_ADD:
            words[va] = (old + swap_add) & MASK
        elif old == compare:
            words[va] = swap_add
            swapped += 1
        else:
            words[va] = old
            failed_swaps += 1
    if dump is not None:
        for off in range(0, len(dump) - 7, 8):
            got = int.from_bytes(dump[off:off + 8], "little")
            want = words.get(base + off, initial(off))
            if got != want:
                print(f"region word at {base + off:#x} holds {got:#x}, the replay gives {want:#x}")
                bad += 1
        outside = [va for va in words if not base <= va < base + len(dump)]
        if outside:
            print(f"{len(outside)} words outside the dumped region, first {outside[0]:#x}")
            bad += 1
    kinds = {FETCH_ADD: 0, CMP_SWAP: 0}
    for psn in order:
        kinds[requests[psn][0]] += 1
    print(f"{len(order)} atomics ({kinds[FETCH_ADD]} FetchAdd, {kinds[CMP_SWAP]} CompareSwap: "
          f"{swapped} swapped, {failed_swaps} not; {again} sent again), {len(words)} words, "
          f"{len(answers)} answers"
          + (f", region of {len(dump)} bytes checked" if dump is not None else "") + f": {bad} errors")
    if not order:
        print("no atomic request in the capture")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
