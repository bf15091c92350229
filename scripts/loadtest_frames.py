#!/usr/bin/python3
"""Crafts the pcaps scripts/loadtest.sh replays at rocedpd (scapy, scapy.contrib.roce).

usage: loadtest_frames.py OUT_DIR --dmac MAC --smac MAC --dip IP --sip IP --client-ip IP
                          --listener-port N [--storm-reqs N] [--rping PCAP]
       loadtest_frames.py --retarget IN.pcap OUT.pcap --live-qpn N --live-psn N

Frames for the live QP are crafted with the placeholder QPN 0xFFFFFE and PSNs relative to 0;
--retarget (no scapy, fast) rewrites them for the QP the live connection got (its QPN, PSNs
relative to the PSN it expects) and recomputes their ICRC (a frame crafted with a bad ICRC keeps
a bad one).

  flood.pcap      valid RoCEv2 RC frames (ICRC right): WRITE_ONLY with RETH to unknown QPNs on
                  core 0, and SEND_ONLY to the live QP (from the live client's IP) with PSNs far
                  outside its window; replayed in a loop at the generator's full rate.
  malformed.pcap  a valid frame cut at every length; bad IP and UDP lengths; every BTH opcode
                  (0..255) to the live QP (PSN outside the window) and to an unknown QP; hostile
                  RETHs (length 2^32-1, VA at the top of the address space, random rkeys); bad
                  ICRCs; an ACK/NAK storm (every AETH syndrome) with PSNs no request can match;
                  CM MADs to QP1 with every CM attribute ID (and others) and broken sizes.
  storm.pcap      thousands of CM REQs (the rping capture's REQ, re-addressed: each its own UDP
                  source port, communication ID, QPN and transaction ID) to the listener, none of
                  which ever sends the RTU, and DREQs for connections that do not exist.
  mads.pcap       1,024 CM DREQs to QP1 for connections that do not exist (distinct communication
                  and transaction IDs): control-path frames that leave no state behind, replayed
                  in a loop to fill the ring from the polling core to the control thread.
Every frame goes to rocedpd's MAC and IP. The generator's own MAC is the Ethernet source, so
the switch never sees the live client's MAC from the generator's port.
"""
import argparse
import random
import struct
import sys
import zlib

ROCE_PORT = 4791
PLACEHOLDER_QPN = 0xFFFFFE      # requests to the live QP: PSNs relative to the PSN it expects
PLACEHOLDER_QPN_RSP = 0xFFFFFD  # responses (ACK/NAK, READ/atomic responses) to the live QP:
                                # PSNs relative to the next PSN it sends
RESPONSE_OPCODES = range(0x0D, 0x13)


def icrc(frame):
    """RoCEv2 ICRC of an IPv4 frame (IBTA A17.3.3): CRC-32 over 8 bytes of 0xFF, then the IP,
    UDP and BTH headers with the variant fields masked, then the rest without the ICRC."""
    ip = bytearray(frame[14:34])
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    udp = bytearray(frame[34:42])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(frame[42:54])
    bth[4] = 0xFF
    data = b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + frame[54:-4]
    return struct.pack("<I", zlib.crc32(data) & 0xFFFFFFFF)


def retarget(src, dst, qpn, psn, sq_psn):
    with open(src, "rb") as f:
        data = f.read()
    out = bytearray(data[:24])
    off, patched = 24, 0
    while off + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, off + 8)[0]
        rec = bytearray(data[off:off + 16 + caplen])
        fr = rec[16:]
        if (len(fr) >= 54 and fr[12:14] == b"\x08\x00" and fr[14] == 0x45 and fr[23] == 17 and
                struct.unpack_from("!H", fr, 36)[0] == ROCE_PORT and
                int.from_bytes(fr[47:50], "big") in (PLACEHOLDER_QPN, PLACEHOLDER_QPN_RSP)):
            good = len(fr) >= 58 and icrc(bytes(fr)) == bytes(fr[-4:])
            base = psn if int.from_bytes(fr[47:50], "big") == PLACEHOLDER_QPN else sq_psn
            fr[47:50] = qpn.to_bytes(3, "big")
            fr[51:54] = ((int.from_bytes(fr[51:54], "big") + base) & 0xFFFFFF).to_bytes(3, "big")
            if len(fr) >= 58:
                c = icrc(bytes(fr))
                fr[-4:] = c if good else bytes(x ^ 0x5A for x in c)
            rec[16:] = fr
            patched += 1
        out += rec
        off += 16 + caplen
    with open(dst, "wb") as f:
        f.write(out)
    return patched


def scapy_layers():
    global Ether, IP, UDP, Raw, wrpcap, rdpcap, BTH, AETH
    from scapy.all import Ether, IP, UDP, Raw, wrpcap, rdpcap
    from scapy.contrib.roce import BTH, AETH


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def roce(a, sip, dqpn, opcode, psn, payload=b"", sport=49152, icrc=None):
    bth = BTH(opcode=opcode, dqpn=dqpn, psn=psn & 0xFFFFFF, ackreq=1, pkey=0xFFFF)
    if icrc is not None:
        bth.icrc = icrc
    return (Ether(src=a.smac, dst=a.dmac) / IP(src=sip, dst=a.dip, ttl=64, flags="DF") /
            UDP(sport=sport, dport=ROCE_PORT, chksum=0) / bth / Raw(payload))


def flood(a):
    out = []
    rnd = random.Random(1)
    for i in range(256):
        qpn = 0x000100 + rnd.randrange(0x3F000)  # core 0, numbers nobody was given
        out.append(roce(a, a.sip, qpn, 0x0A, rnd.randrange(1 << 24),
                        reth(0x10000 + 64 * i, rnd.randrange(1 << 32), 64) + bytes(64),
                        sport=49152 + i))
    for i in range(256):
        psn = a.live_psn - (1 << 22) + i  # 2^22 behind: far outside any window (duplicate side)
        out.append(roce(a, a.client_ip, a.live_qpn, 0x04, psn, bytes(range(64)), sport=50000 + i))
    return out


def malformed(a):
    out = []
    rnd = random.Random(2)
    far = a.live_psn - (1 << 22)
    base = bytes(roce(a, a.client_ip, a.live_qpn, 0x0A, far, reth(0x1000, 0x1234, 64) + bytes(64)))
    # Every truncation of a valid frame (Ethernet header up to one byte short).
    for n in range(14, len(base)):
        out.append(Ether(base[:n]))
    # Bad IPv4 total lengths and UDP lengths (checksums recomputed where scapy does).
    for ip_len in (0, 1, 19, 20, 27, 28, 40, len(base) - 14 + 1, 1500, 65535):
        p = Ether(base)
        p[IP].len = ip_len
        del p[IP].chksum
        out.append(Ether(bytes(p)))
    for udp_len in (0, 7, 8, 19, 20, 100, 65535):
        p = Ether(base)
        p[UDP].len = udp_len
        out.append(Ether(bytes(p)))
    # A bad IP header checksum and IP options/fragments.
    p = Ether(base)
    p[IP].chksum = 0x1234
    out.append(Ether(bytes(p)))
    p = Ether(base)
    p[IP].flags = "MF"
    del p[IP].chksum
    out.append(Ether(bytes(p)))
    # Every opcode, to the live QP (PSN outside the window) and to an unknown QP, each with a
    # payload the size of a RETH+AtomicETH so every extension header "fits".
    for op in range(256):
        body = bytes(rnd.randrange(256) for _ in range(16 + 28 + 8))
        live = PLACEHOLDER_QPN_RSP if op in RESPONSE_OPCODES else a.live_qpn
        out.append(roce(a, a.client_ip, live, op, far + op, body))
        out.append(roce(a, a.sip, 0x000123, op, rnd.randrange(1 << 24), body))
    # Hostile RETHs: every length/VA extreme, random rkeys, to the live QP and an unknown one.
    for va, ln in ((0xFFFFFFFFFFFFFFF0, 64), (0, 0xFFFFFFFF), (0x7FFFFFFFFFFF, 0x80000000),
                   (0xFFFFFFFFFFFFFFFF, 1), (0, 0)):
        for op in (0x06, 0x0A, 0x0B, 0x0C, 0x13, 0x14):  # WRITE first/only/only-imm, READ, atomics
            body = reth(va, rnd.randrange(1 << 32), ln) + bytes(28)
            out.append(roce(a, a.client_ip, a.live_qpn, op, far, body))
            out.append(roce(a, a.sip, 0x000456, op, 0, body))
    # Bad ICRCs on otherwise valid frames.
    for i in range(32):
        out.append(roce(a, a.client_ip, a.live_qpn, 0x04, far + i, bytes(32), icrc=rnd.randrange(1 << 32)))
    # ACK/NAK storm: every AETH syndrome, PSNs no outstanding request can match.
    for syn in range(256):
        p = (Ether(src=a.smac, dst=a.dmac) / IP(src=a.client_ip, dst=a.dip) /
             UDP(sport=51000 + syn, dport=ROCE_PORT, chksum=0) /
             BTH(opcode=0x11, dqpn=PLACEHOLDER_QPN_RSP, psn=(far + syn) & 0xFFFFFF, pkey=0xFFFF) /
             AETH(syndrome=syn, msn=rnd.randrange(1 << 24)))
        out.append(p)
    # CM MADs to QP1: every CM attribute ID and some that are not, then broken sizes.
    def mad(attr, method=0x03, size=256, cls=0x07, ver=2):
        hdr = struct.pack("!BBBBHHQHHI", 1, cls, ver, method, 0, 0, rnd.randrange(1 << 64),
                          attr, 0, 0)
        body = bytes(rnd.randrange(256) for _ in range(232))
        m = (hdr + body)[:size] if size <= 256 else hdr + body + bytes(size - 256)
        deth = struct.pack("!II", 0x80010000, 1)
        return roce(a, a.sip, 1, 0x64, rnd.randrange(1 << 24), deth + m)
    for attr in list(range(0x0000, 0x0021)) + [0x00FF, 0x7FFF, 0xFFFF]:
        for method in (0x01, 0x03, 0x81):
            out.append(mad(attr, method))
    for size in (0, 1, 23, 24, 25, 100, 200, 255, 257, 300, 1000):
        out.append(mad(0x0010, size=size))
    out.append(mad(0x0010, cls=0x01))  # not the CM class
    out.append(mad(0x0010, ver=1))     # old class version
    # UD SEND_ONLY to QP1 without a DETH.
    out.append(roce(a, a.sip, 1, 0x64, 0, b""))
    return out


def storm(a, rping):
    req = None
    for f in rdpcap(rping):
        raw = bytes(f)
        if len(raw) > 14 + 20 + 8 + 12 + 8 + 24 and raw[34 + 2:34 + 4] == struct.pack("!H", ROCE_PORT):
            mad = raw[14 + 20 + 8 + 12 + 8:]
            if mad[1] == 0x07 and struct.unpack("!H", mad[16:18])[0] == 0x0010:
                req = bytearray(mad[:256])
                break
    if req is None:
        raise SystemExit("no CM REQ in " + rping)
    body = 24
    out = []
    rnd = random.Random(3)
    sip = struct.unpack("!I", bytes(int(x) for x in a.sip.split(".")))[0]
    dip = struct.unpack("!I", bytes(int(x) for x in a.dip.split(".")))[0]
    for i in range(a.storm_reqs):
        m = bytearray(req)
        struct.pack_into("!Q", m, 8, 0x5A000000 + i)                       # transaction ID
        struct.pack_into("!I", m, body + 0, 0x70000000 + i)                # local comm ID
        struct.pack_into("!Q", m, body + 8, 0x0000000001060000 | a.listener_port)  # service ID
        qpn = 0x100 + i
        m[body + 32:body + 35] = qpn.to_bytes(3, "big")                    # local QPN
        pd = body + 140                                                   # private data: cma header
        struct.pack_into("!H", m, pd + 2, 40000 + i % 20000)               # source port
        struct.pack_into("!I", m, pd + 16, sip)
        struct.pack_into("!I", m, pd + 32, dip)
        deth = struct.pack("!II", 0x80010000, 1)
        out.append(roce(a, a.sip, 1, 0x64, i, deth + bytes(m), sport=1024 + i % 60000))
    for i in range(a.storm_reqs // 4):  # DREQs for connections that do not exist
        m = bytearray(256)
        m[0:4] = bytes([1, 0x07, 2, 0x03])
        struct.pack_into("!Q", m, 8, 0x5B000000 + i)
        struct.pack_into("!H", m, 16, 0x0015)
        struct.pack_into("!II", m, body, rnd.randrange(1 << 32), rnd.randrange(1 << 32))
        deth = struct.pack("!II", 0x80010000, 1)
        out.append(roce(a, a.sip, 1, 0x64, i, deth + bytes(m), sport=2048 + i))
    return out


def mads(a):
    rnd = random.Random(4)
    out = []
    for i in range(1024):
        m = bytearray(256)
        m[0:4] = bytes([1, 0x07, 2, 0x03])                  # CM class, version 2, Send
        struct.pack_into("!Q", m, 8, 0x5C000000 + i)        # transaction ID
        struct.pack_into("!H", m, 16, 0x0015)               # DREQ
        struct.pack_into("!II", m, 24, 0x71000000 + i, rnd.randrange(1 << 32))  # comm IDs
        deth = struct.pack("!II", 0x80010000, 1)
        out.append(roce(a, a.sip, 1, 0x64, i, deth + bytes(m), sport=3072 + i))
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--retarget":
        ap = argparse.ArgumentParser()
        ap.add_argument("--retarget", nargs=2, metavar=("IN", "OUT"), required=True)
        ap.add_argument("--live-qpn", type=lambda s: int(s, 0), required=True)
        ap.add_argument("--live-psn", type=lambda s: int(s, 0), required=True)
        ap.add_argument("--live-sq-psn", type=lambda s: int(s, 0), required=True)
        a = ap.parse_args()
        n = retarget(a.retarget[0], a.retarget[1], a.live_qpn, a.live_psn, a.live_sq_psn)
        print(f"retargeted {n} frames")
        return
    scapy_layers()
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dmac", required=True)
    ap.add_argument("--smac", required=True)
    ap.add_argument("--dip", required=True)
    ap.add_argument("--sip", required=True)
    ap.add_argument("--client-ip", required=True)
    ap.add_argument("--listener-port", type=int, required=True)
    ap.add_argument("--storm-reqs", type=int, default=4000)
    ap.add_argument("--rping", default="/work/shared/captures/rxe-rping.pcap")
    a = ap.parse_args()
    a.live_qpn, a.live_psn = PLACEHOLDER_QPN, 0
    counts = {}
    for name, frames in (("flood", flood(a)), ("malformed", malformed(a)), ("storm", storm(a, a.rping)),
                         ("mads", mads(a))):
        wrpcap(f"{a.out}/{name}.pcap", frames)
        counts[name] = len(frames)
    print(" ".join(f"{k}={v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
