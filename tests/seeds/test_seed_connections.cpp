// Connections through IB CM between two adapters (DESIGN.md §3; seed 000 NdkCompleteConnectEx;
// NdkConnect / NdkAccept / NdkDisconnect statuses; the callback rules of NDK.md).
// QPs are the object layer's real QPs on the polling cores.

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdlib>
#include <string>

#include "dataplane/wire/cm_messages.hpp"
#include "dataplane/wire/parser.hpp"
#include "dataplane/wire/pcap_io.hpp"
#include "tests/seeds/cm_env.hpp"

namespace rocedp::test {
namespace {

using SeedConnections = CmFixture;

struct BufferInfo {
  uint64_t va;
  uint32_t token;
  uint32_t len;
};

// ---- the whole cycle ---------------------------------------------------------------------------

// The same cycle over IPv6: the CM's REQ carries the ports' IPv6 addresses as GIDs and an
// rdma_cm header of IP version 6, every CM frame is IPv6, the addresses come back as IPv6 socket
// addresses, and the QPs run RoCEv2 over IPv6.
class SeedConnectionsIpv6 : public CmFixture {
 protected:
  bool cm_ipv6() const override { return true; }
};

TEST_F(SeedConnectionsIpv6, ConnectSendWriteReadDisconnectThroughTheCmOverIpv6) {
  Endpoint x, y;
  make_endpoints(x, y);
  auto xb = buffer(x.pd, 4096, kMrAll, 0xA5);
  auto yb = buffer(y.pd, 4096, kMrAll, 0x00);
  Link k;
  establish(k, x, y, 5792);
  NdkSockAddr peer, local;
  uint32_t asz = sizeof(peer);
  ASSERT_EQ(k.cb->get_peer_address(&peer, &asz), STATUS_SUCCESS);
  ASSERT_EQ(k.cb->get_local_address(&local, &asz), STATUS_SUCCESS);
  EXPECT_TRUE(peer.ipv6);
  EXPECT_EQ(peer.ip6, a_.ip6.bytes);
  EXPECT_GE(peer.port, 49152);
  EXPECT_EQ(local, addr_b(5792));
  ASSERT_EQ(k.ca->get_local_address(&local, &asz), STATUS_SUCCESS);
  EXPECT_TRUE(local.ipv6);
  EXPECT_EQ(local.ip6, a_.ip6.bytes) << "the wildcard source became the port's IPv6 address";

  // SEND, WRITE and READ over the connection's QPs.
  send_write_read(x, y, *xb, *yb, yb->va(), yb->mr->get_remote_token());
  if (HasFatalFailure()) return;

  Req disc;
  ASSERT_EQ(k.ca->disconnect(&Req::cb, &disc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return disc.done() && k.disc_b.done(); }));
  EXPECT_EQ(disc.status, STATUS_SUCCESS);
  release(k);
  close_pair(x, y, std::move(xb), std::move(yb));

  // Every CM frame IPv6 between the two addresses; the REQ's GIDs and rdma_cm header say so.
  ASSERT_GE(tap_a_.size() + tap_b_.size(), 5u) << "REQ, REP, RTU, DREQ, DREP at least";
  bool saw_req = false;
  for (auto* v : {&tap_a_, &tap_b_}) {
    for (auto& f : *v) {
      wire::ParsedPacket p;
      ASSERT_EQ(wire::parse(wire::Bytes(f.bytes.data(), f.bytes.size()), p),
                wire::DropReason::kNone);
      ASSERT_TRUE(p.f.ipv6());
      const bool from_a = v == &tap_a_;
      EXPECT_EQ(p.f.ip6.src, (from_a ? a_ : b_).ip6.bytes);
      EXPECT_EQ(p.f.ip6.dst, (from_a ? b_ : a_).ip6.bytes);
      wire::CmMad m;
      ASSERT_EQ(wire::decode_cm_mad(p.payload().first(wire::kMadLen), m),
                wire::CmDecodeStatus::kOk);
      if (const auto* req = std::get_if<wire::CmReq>(&m.body)) {
        saw_req = true;
        EXPECT_EQ(req->primary.local_gid, a_.ip6.bytes);
        EXPECT_EQ(req->primary.remote_gid, b_.ip6.bytes);
        wire::CmaHeader h;
        ASSERT_TRUE(wire::decode_cma_header(req->private_data.data(), h));
        EXPECT_EQ(h.ip_version(), 6);
        EXPECT_EQ(h.src_ip.bytes, a_.ip6.bytes);
        EXPECT_EQ(h.dst_ip.bytes, b_.ip6.bytes);
      }
    }
  }
  EXPECT_TRUE(saw_req);
}

// An IPv6 destination from an IPv4 source, or the reverse: STATUS_INVALID_ADDRESS, inline.
TEST_F(SeedConnectionsIpv6, ConnectAcrossFamiliesIsAnInvalidAddress) {
  Endpoint x, y;
  make_endpoints(x, y);
  Connector* c = connector(a_);
  Req r;
  EXPECT_EQ(c->connect(x.qp, NdkSockAddr{a_.ip, 0}, addr_b(5793), 4, 4, nullptr, 0, &Req::cb, &r),
            STATUS_INVALID_ADDRESS);
  EXPECT_EQ(c->connect(x.qp, addr_a(0), NdkSockAddr{b_.ip, 5793}, 4, 4, nullptr, 0, &Req::cb, &r),
            STATUS_INVALID_ADDRESS);
  EXPECT_FALSE(r.done());
  close_connector(c);
  std::vector<std::unique_ptr<Buffer>> bufs;
  close_endpoint(x, &bufs);
  close_endpoint(y, &bufs);
}

TEST_F(SeedConnections, ConnectSendWriteReadDisconnectThroughTheCm) {
  Endpoint x, y;
  make_endpoints(x, y);
  auto xb = buffer(x.pd, 4096, kMrAll, 0xA5);
  auto yb = buffer(y.pd, 4096, kMrAll, 0x00);
  // B announces its region in the accept private data, A its hello in the REQ.
  const BufferInfo info{yb->va(), yb->mr->get_remote_token(), 4096};
  const char hello[] = "hello from A";
  Link k;
  k.listener = listen_b(4791 + 1000, &k.events);
  k.ca = connector(a_);
  k.cb = request(k.ca, x.qp, 5791, k.events, k.connected, hello, sizeof(hello));
  ASSERT_NE(k.cb, nullptr);
  EXPECT_EQ(k.events.thread, main_thread_) << "ConnectEvent runs on the control thread";
  // Passive GetConnectionData: size query, too small, then the REQ's private data (56 bytes).
  uint32_t irl = 0, orl = 0, len = 0;
  ASSERT_EQ(k.cb->get_connection_data(&irl, &orl, nullptr, &len), STATUS_SUCCESS);
  EXPECT_EQ(len, 56u);
  uint8_t small[8];
  len = sizeof(small);
  EXPECT_EQ(k.cb->get_connection_data(&irl, &orl, small, &len), STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, 56u);
  std::vector<uint8_t> pd(64);
  len = 64;
  ASSERT_EQ(k.cb->get_connection_data(&irl, &orl, pd.data(), &len), STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(pd.data(), hello, sizeof(hello)), 0);
  EXPECT_EQ(irl, 4u);
  NdkSockAddr peer, local;
  uint32_t asz = sizeof(peer);
  ASSERT_EQ(k.cb->get_peer_address(&peer, &asz), STATUS_SUCCESS);
  ASSERT_EQ(k.cb->get_local_address(&local, &asz), STATUS_SUCCESS);
  EXPECT_EQ(peer.ip, a_.ip);
  EXPECT_GE(peer.port, 49152);
  EXPECT_EQ(local, addr_b(5791));

  // B accepts with smaller read limits: the effective limits are the minimum on both sides.
  ASSERT_EQ(k.cb->accept_ex(
                y.qp, 2, 3, &info, sizeof(info), [](void* c, NTSTATUS s) { Req::cb(c, s); },
                &k.disc_b, &Req::cb, &k.accepted),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return k.connected.done(); }));
  ASSERT_EQ(k.connected.status, STATUS_SUCCESS);
  EXPECT_EQ(k.connected.thread, main_thread_);
  EXPECT_FALSE(k.accepted.done()) << "Accept completes with the RTU";
  len = 0;
  ASSERT_EQ(k.ca->get_connection_data(&irl, &orl, nullptr, &len), STATUS_SUCCESS);
  EXPECT_EQ(len, 196u) << "REP private data field, as rdma_cm reports it";
  pd.assign(len, 0);
  ASSERT_EQ(k.ca->get_connection_data(&irl, &orl, pd.data(), &len), STATUS_SUCCESS);
  BufferInfo got;
  std::memcpy(&got, pd.data(), sizeof(got));
  EXPECT_EQ(got.va, info.va);
  EXPECT_EQ(irl, 3u) << "min(our IRL 4, peer ORL 3, adapter)";
  EXPECT_EQ(orl, 2u) << "min(our ORL 4, peer IRL 2, adapter)";

  ASSERT_EQ(k.ca->complete_connect_ex([](void* c, NTSTATUS s) { Req::cb(c, s); }, &k.disc_a,
                                      &Req::cb, &k.completed),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return k.completed.done() && k.accepted.done(); }));
  EXPECT_EQ(k.completed.status, STATUS_SUCCESS);
  EXPECT_EQ(k.accepted.status, STATUS_SUCCESS);
  EXPECT_EQ(k.ca->complete_connect_ex(nullptr, nullptr, &Req::cb, &k.completed),
            STATUS_CONNECTION_INVALID)
      << "already connected";

  // SEND A -> B, WRITE A -> B's announced region, READ it back into A.
  send_write_read(x, y, *xb, *yb, got.va, got.token);
  if (HasFatalFailure()) return;

  // B has a receive outstanding; A disconnects: B's disconnect callback fires (reason
  // STATUS_SUCCESS: a normal peer disconnect) and B's QP is NOT flushed (NDK: the provider does
  // not flush on a disconnect from the peer); B's own Disconnect then flushes it (the receive
  // completes CANCELLED). A's Disconnect completes with the DREP.
  NdkSge rs2 = yb->sge(0, 64);
  ASSERT_EQ(y.qp->receive(&y, &rs2, 1), STATUS_SUCCESS);
  Req disc;
  ASSERT_EQ(k.ca->disconnect(&Req::cb, &disc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return disc.done() && k.disc_b.done(); }));
  EXPECT_EQ(disc.status, STATUS_SUCCESS);
  EXPECT_EQ(disc.count, 1);
  EXPECT_EQ(k.disc_b.status, STATUS_SUCCESS) << "peer DREQ";
  EXPECT_EQ(k.disc_b.count, 1);
  EXPECT_EQ(k.disc_b.thread, main_thread_);
  EXPECT_FALSE(k.disc_a.done()) << "our own Disconnect does not fire our disconnect callback";
  pump(200);
  NdkResultEx none[4];
  EXPECT_EQ(y.cq->get_results_ex(none, 4), 0u) << "the peer's disconnect flushed our QP";
  Req disc_y;
  EXPECT_EQ(k.cb->disconnect(&Req::cb, &disc_y), STATUS_SUCCESS)
      << "already disconnected by the peer";
  auto fl = wait_results(y.cq, 1);
  ASSERT_EQ(fl.size(), 1u);
  EXPECT_EQ(fl[0].status, STATUS_CANCELLED) << "our Disconnect flushes";
  EXPECT_FALSE(disc_y.done()) << "inline SUCCESS: no callback";

  release(k);
  close_pair(x, y, std::move(xb), std::move(yb));

  // The CM traffic of both sides, checked by the conformance tool.
  const char* dir = std::getenv("ROCEDP_ARTIFACT_DIR");
  const char* shared = std::getenv("ROCEDP_SHARED_DIR");
  ASSERT_GE(tap_a_.size() + tap_b_.size(), 5u) << "REQ, REP, RTU, DREQ, DREP at least";
  if (dir != nullptr && shared != nullptr) {
    const std::string path = std::string(dir) + "/cm-traffic.pcap";
    wire::PcapWriter w;
    ASSERT_TRUE(w.open(path)) << w.error();
    for (auto* v : {&tap_a_, &tap_b_})
      for (auto& f : *v) w.write(wire::Bytes(f.bytes.data(), f.bytes.size()));
    w.close();
    const std::string cmd = "/usr/bin/python3 " + std::string(shared) + "/tools/roce-check " +
                            path + " > " + dir + "/cm-traffic.roce-check.txt 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "see " << dir << "/cm-traffic.roce-check.txt";
  }
}

}  // namespace
}  // namespace rocedp::test

namespace rocedp::test {
namespace {

// ---- Connect ------------------------------------------------------------------------------------

TEST_F(SeedConnections, ConnectRefusedWithoutListenerAndOnReject) {
  Endpoint x, y;
  make_endpoints(x, y);
  Connector* c = connector(a_);
  Req r;
  ASSERT_EQ(c->connect(x.qp, addr_a(0), addr_b(6001), 1, 1, nullptr, 0, &Req::cb, &r),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return r.done(); }));
  EXPECT_EQ(r.status, STATUS_CONNECTION_REFUSED) << "no listener: REJ invalid service ID";
  EXPECT_EQ(connection_manager_counters(*b_.adapter).rej_sent_no_listener, 1u);
  close_connector(c);

  // The listener's consumer rejects, with private data the active side reads back.
  Events ev;
  Listener* l = listen_b(6002, &ev);
  c = connector(a_);
  Req r2;
  Connector* pc = request(c, x.qp, 6002, ev, r2);
  ASSERT_NE(pc, nullptr);
  const char why[] = "go away";
  ASSERT_EQ(pc->reject(why, sizeof(why)), STATUS_SUCCESS);
  EXPECT_EQ(pc->reject(nullptr, 0), STATUS_CONNECTION_INVALID) << "nothing left to reject";
  ASSERT_TRUE(pump_until([&] { return r2.done(); }));
  EXPECT_EQ(r2.status, STATUS_CONNECTION_REFUSED);
  uint32_t len = 0;
  ASSERT_EQ(c->get_connection_data(nullptr, nullptr, nullptr, &len), STATUS_SUCCESS);
  EXPECT_EQ(len, 148u) << "REJ private data";
  std::vector<uint8_t> pd(len);
  ASSERT_EQ(c->get_connection_data(nullptr, nullptr, pd.data(), &len), STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(pd.data(), why, sizeof(why)), 0);
  close_connector(c);
  close_connector(pc);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// A CM MAD as `from` would send it to `to`, handed to `to`'s connection manager (a peer stack's
// message the test builds itself).
void deliver_cm(const Host& from, Host& to, const wire::CmMad& m) {
  wire::CmFrameAddr fa;
  std::memcpy(fa.src_mac.data(), from.mac.bytes.data(), 6);
  std::memcpy(fa.dst_mac.data(), to.mac.bytes.data(), 6);
  fa.src_ip = from.ip;
  fa.dst_ip = to.ip;
  std::vector<uint8_t> frame(wire::kCmFrameLen);
  ASSERT_EQ(wire::build_cm_frame(wire::MutBytes(frame.data(), frame.size()), fa, m),
            wire::kCmFrameLen);
  ASSERT_TRUE(cm_receive_frame(*to.adapter, frame.data(), frame.size()));
}

// A peer whose REQ carries CA GUID 0: its connection is forgotten by the same keys it was found
// by. B's consumer rejects it; a new REQ from the same QP (another comm ID) is then a new request,
// not a stale connection of the freed entry (which the tables still named).
TEST_F(SeedConnections, APeerWithCaGuidZeroIsForgottenWhenItsConnectionEnds) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(6102, &ev);
  Connector* c = connector(a_);
  Req r;
  Connector* pc = request(c, x.qp, 6102, ev, r);
  ASSERT_NE(pc, nullptr);
  wire::CmMad req;
  ASSERT_NE(find_cm(tap_a_, 0x10, &req), nullptr);
  auto forged = [&](uint32_t comm_id) {
    wire::CmMad m = req;
    auto& q = std::get<wire::CmReq>(m.body);
    q.local_ca_guid = 0;
    q.local_comm_id = comm_id;
    m.hdr.tid = comm_id;
    deliver_cm(a_, b_, m);
  };
  forged(0x1111);
  ASSERT_TRUE(pump_until([&] { return ev.connectors.size() == 2; }));
  ASSERT_EQ(ev.connectors[1]->reject(nullptr, 0), STATUS_SUCCESS);
  pump(50);  // released, then freed
  forged(0x2222);
  ASSERT_TRUE(pump_until([&] { return ev.connectors.size() == 3; }))
      << "a new request from the same QP";
  EXPECT_EQ(connection_manager_counters(*b_.adapter).stale_rejected, 0u);
  forged(0x2222);  // its duplicate: the live connection answers, no new event
  pump(50);
  EXPECT_EQ(ev.connectors.size(), 3u);
  ASSERT_EQ(ev.connectors[2]->reject(nullptr, 0), STATUS_SUCCESS);
  ASSERT_EQ(pc->reject(nullptr, 0), STATUS_SUCCESS);
  ASSERT_TRUE(pump_until([&] { return r.done(); }));
  EXPECT_EQ(r.status, STATUS_CONNECTION_REFUSED);
  for (Connector* k : ev.connectors) close_connector(k);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// A DREQ for a connection B no longer has (its TimeWait over: B's DREP was lost and the peer kept
// resending) is answered with a DREP all the same, as Linux's cm_issue_drep: the peer's
// disconnect ends at once instead of after its retries.
TEST_F(SeedConnections, ADreqForAConnectionGoneIsAnsweredWithADrep) {
  const ConnectionManagerCounters before = connection_manager_counters(*b_.adapter);
  const size_t sent0 = tap_b_.size();
  deliver_cm(a_, b_, wire::make_cm_mad(0x4242, wire::CmDreq{0xA1A2A3A4, 0xB1B2B3B4, 0x77, {}}));
  ASSERT_TRUE(pump_until([&] { return tap_b_.size() > sent0; }));
  const std::vector<CapturedFrame> after(tap_b_.begin() + static_cast<std::ptrdiff_t>(sent0),
                                         tap_b_.end());
  wire::CmMad drep;
  ASSERT_NE(find_cm(after, 0x16, &drep), nullptr);
  EXPECT_EQ(drep.hdr.tid, 0x4242u);
  const auto& d = std::get<wire::CmDrep>(drep.body);
  EXPECT_EQ(d.local_comm_id, 0xB1B2B3B4u) << "the comm ID the DREQ names as ours";
  EXPECT_EQ(d.remote_comm_id, 0xA1A2A3A4u);
  const ConnectionManagerCounters now = connection_manager_counters(*b_.adapter);
  EXPECT_EQ(now.drep_sent_unknown, before.drep_sent_unknown + 1);
  EXPECT_EQ(now.cm_rx_dropped, before.cm_rx_dropped);
}

// The active side's RTU is lost and it starts sending: the passive side takes the first packet
// on its QP as the RTU (IBTA §12.9.7.1, communication established; Linux's IB_EVENT_COMM_EST),
// and its Accept completes at once, not on the RTU after the next REP (no clock advance here:
// that REP never leaves).
TEST_F(SeedConnections, ThePeersFirstPacketCompletesTheAcceptWhenItsRtuIsLost) {
  Endpoint x, y;
  make_endpoints(x, y);
  auto xb = buffer(x.pd, 4096, kMrAll, 0x3C);
  auto yb = buffer(y.pd, 4096, kMrAll, 0x00);
  Link k;
  k.listener = listen_b(6203, &k.events);
  k.ca = connector(a_);
  k.cb = request(k.ca, x.qp, 6203, k.events, k.connected);
  ASSERT_NE(k.cb, nullptr);
  ASSERT_EQ(k.cb->accept_ex(
                y.qp, 4, 4, nullptr, 0, [](void* c, NTSTATUS s) { Req::cb(c, s); }, &k.disc_b,
                &Req::cb, &k.accepted),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return k.connected.done(); }));
  ASSERT_EQ(k.connected.status, STATUS_SUCCESS);
  // A completes: its QP goes to RTS and its RTU leaves, but B's CM never reads it.
  silent_b_ = true;
  ASSERT_EQ(k.ca->complete_connect_ex([](void* c, NTSTATUS s) { Req::cb(c, s); }, &k.disc_a,
                                      &Req::cb, &k.completed),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return k.completed.done(); }));
  ASSERT_EQ(k.completed.status, STATUS_SUCCESS);
  pump(20);
  rte_mbuf* lost[32];
  uint16_t n = 0;
  while ((n = b_.dispatch->receive(b_.dispatch->control_target(), lost, 32)) != 0)
    rte_pktmbuf_free_bulk(lost, n);
  silent_b_ = false;
  pump(20);
  EXPECT_FALSE(k.accepted.done()) << "nothing from A yet: the Accept waits";
  // A sends; B's QP (in RTS since its REP) receives it.
  NdkSge rs = yb->sge(0, 64);
  ASSERT_EQ(y.qp->receive(&y, &rs, 1), STATUS_SUCCESS);
  NdkSge ss = xb->sge(0, 32);
  ASSERT_EQ(x.qp->send(&x, &ss, 1, 0), STATUS_SUCCESS);
  ASSERT_TRUE(pump_until([&] { return k.accepted.done(); })) << "communication established";
  EXPECT_EQ(k.accepted.status, STATUS_SUCCESS);
  EXPECT_EQ(connection_manager_counters(*b_.adapter).established_by_data, 1u);
  auto got = wait_results(y.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes_transferred, 32u);
  EXPECT_EQ(yb->ptr()[31], 0x3C);
  Req disc;
  ASSERT_EQ(k.ca->disconnect(&Req::cb, &disc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return disc.done() && k.disc_b.done(); }));
  release(k);
  close_pair(x, y, std::move(xb), std::move(yb));
}

TEST_F(SeedConnections, ConnectHostUnreachableInlineAndAsynchronously) {
  Endpoint x, y;
  make_endpoints(x, y);
  Connector* c = connector(a_);
  Req r;
  // Off-link: nothing to ARP for, known at once.
  EXPECT_EQ(
      c->connect(x.qp, addr_a(0), NdkSockAddr{0x0A000001, 80}, 1, 1, nullptr, 0, &Req::cb, &r),
      STATUS_HOST_UNREACHABLE);
  // On-link, but no host answers ARP: asynchronously after the retries.
  ASSERT_EQ(
      c->connect(x.qp, addr_a(0), NdkSockAddr{0xC6120063, 80}, 1, 1, nullptr, 0, &Req::cb, &r),
      STATUS_PENDING);
  pump(20);
  EXPECT_FALSE(r.done());
  advance(2 * kSecond);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(r.status, STATUS_HOST_UNREACHABLE);
  EXPECT_EQ(r.count, 1);
  close_connector(c);
  close_endpoint(x);
  close_endpoint(y);
}

// An ARP request for a peer that meets a full request ring to the TX core (the core is
// descheduled and control filled its ring) cannot leave: it is counted, never lost silently, and
// the table's retries still end the connect with HOST_UNREACHABLE. Once the core runs again the
// next resolution's requests go out.
TEST_F(SeedConnections, ArpRequestsThatMeetAFullCoreRingAreCounted) {
  Endpoint x, y;
  make_endpoints(x, y);
  a_.held_cores = 1u;  // core 0 (the CM's TX core) stops draining its request ring
  dataplane::CoreChannel& ch = *a_.channels[0];
  std::vector<dataplane::CoreStats> parked(ch.capacity());
  size_t posted = 0;
  while (posted < parked.size() &&
         dataplane::core_requests::snapshot(ch, &parked[posted], nullptr, nullptr))
    ++posted;
  ASSERT_GT(posted, 0u);
  // A connect to an address nobody answers: ARP gives up, the connect ends HOST_UNREACHABLE.
  const auto connect_unreachable = [&](uint32_t ip) {
    Connector* c = connector(a_);
    Req r;
    ASSERT_EQ(c->connect(x.qp, addr_a(0), NdkSockAddr{ip, 80}, 1, 1, nullptr, 0, &Req::cb, &r),
              STATUS_PENDING);
    pump(20);
    advance(2 * kSecond);
    ASSERT_TRUE(r.done());
    EXPECT_EQ(r.status, STATUS_HOST_UNREACHABLE);
    close_connector(c);
  };
  const ConnectionManagerCounters before = connection_manager_counters(*a_.adapter);
  connect_unreachable(0xC6120063);
  const ConnectionManagerCounters full = connection_manager_counters(*a_.adapter);
  EXPECT_GE(full.arp_tx_failed - before.arp_tx_failed, 1u) << "every request met the full ring";
  EXPECT_EQ(full.arp_tx, before.arp_tx);

  // The core runs again: the parked requests complete, and requests for a peer leave.
  a_.held_cores = 0;
  pump(50);
  connect_unreachable(0xC6120064);
  const ConnectionManagerCounters after = connection_manager_counters(*a_.adapter);
  EXPECT_GE(after.arp_tx - full.arp_tx, 1u);
  EXPECT_EQ(after.arp_tx_failed, full.arp_tx_failed);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, ConnectIoTimeoutWhenThePeerCmIsSilent) {
  Endpoint x, y;
  make_endpoints(x, y);
  silent_b_ = true;  // B's cores run (ARP is answered there), its CM never reads a MAD
  Connector* c = connector(a_);
  Req r;
  ASSERT_EQ(c->connect(x.qp, addr_a(0), addr_b(6003), 1, 1, nullptr, 0, &Req::cb, &r),
            STATUS_PENDING);
  pump(50);
  EXPECT_FALSE(r.done());
  advance(4 * kSecond);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(r.status, STATUS_IO_TIMEOUT);
  EXPECT_GE(connection_manager_counters(*a_.adapter).cm_tx, 4u) << "REQ and its 3 retries";
  close_connector(c);
  silent_b_ = false;
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, SharedEndpointManyRemotesAndAddressAlreadyExists) {
  Endpoint x, y, x2, y2;
  make_endpoints(x, y);
  make_endpoints(x2, y2);
  SharedEndpoint* sep = nullptr;
  ASSERT_EQ(create_shared_endpoint(*a_.adapter, addr_a(7100), nullptr, nullptr, &sep),
            STATUS_SUCCESS);
  Events ev;
  Listener* l1 = listen_b(7001, &ev);
  Listener* l2 = listen_b(7002, &ev);
  Connector* c1 = connector(a_);
  Connector* c2 = connector(a_);
  Connector* c3 = connector(a_);
  Req r1, r2, r3;
  ASSERT_EQ(
      c1->connect_with_shared_endpoint(x.qp, sep, addr_b(7001), 1, 1, nullptr, 0, &Req::cb, &r1),
      STATUS_PENDING);
  EXPECT_EQ(
      c2->connect_with_shared_endpoint(x2.qp, sep, addr_b(7001), 1, 1, nullptr, 0, &Req::cb, &r2),
      STATUS_ADDRESS_ALREADY_EXISTS)
      << "same 4-tuple";
  ASSERT_EQ(
      c3->connect_with_shared_endpoint(x2.qp, sep, addr_b(7002), 1, 1, nullptr, 0, &Req::cb, &r3),
      STATUS_PENDING)
      << "same local address, another remote";
  ASSERT_TRUE(pump_until([&] { return ev.connectors.size() == 2; }));
  for (Connector* pc : ev.connectors) {
    NdkSockAddr peer;
    uint32_t sz = sizeof(peer);
    ASSERT_EQ(pc->get_peer_address(&peer, &sz), STATUS_SUCCESS);
    EXPECT_EQ(peer, addr_a(7100)) << "both come from the shared endpoint's address";
  }
  // An explicit source port in use by the endpoint: SHARING_VIOLATION for a plain Connect.
  EXPECT_EQ(c2->connect(x2.qp, addr_a(7100), addr_b(7003), 1, 1, nullptr, 0, &Req::cb, &r2),
            STATUS_SHARING_VIOLATION);
  EXPECT_EQ(
      c2->connect(x2.qp, NdkSockAddr{0xC6120063, 0}, addr_b(7003), 1, 1, nullptr, 0, &Req::cb, &r2),
      STATUS_INVALID_ADDRESS);
  EXPECT_EQ(sep->close(nullptr, nullptr), STATUS_SUCCESS);
  for (Connector* pc : ev.connectors) close_connector(pc);
  close_connector(c1);
  close_connector(c2);
  close_connector(c3);
  close_listener(l1);
  close_listener(l2);
  pump(10);
  EXPECT_FALSE(r2.done());
  for (Endpoint* e : {&x, &y, &x2, &y2}) close_endpoint(*e);
}

// ---- CompleteConnectEx (seed 000) --------------------------------------------------------------

TEST_F(SeedConnections, CompleteConnectExConnectionInvalid) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7200, &ev);
  Connector* c = connector(a_);
  Req connected, cc, acc;
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_CONNECTION_INVALID)
      << "never connected";
  Connector* pc = request(c, x.qp, 7200, ev, connected);
  ASSERT_NE(pc, nullptr);
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_CONNECTION_INVALID)
      << "no REP yet";
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  ASSERT_EQ(connected.status, STATUS_SUCCESS);
  // Active-side Reject after Connect completed (unacceptable limits): afterwards the
  // connection is closed, and CompleteConnectEx says so; B's Accept sees the REJ.
  ASSERT_EQ(c->reject(nullptr, 0), STATUS_SUCCESS);
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_CONNECTION_INVALID)
      << "closed";
  ASSERT_TRUE(pump_until([&] { return acc.done(); }));
  EXPECT_EQ(acc.status, STATUS_CONNECTION_ABORTED);
  pump(10);
  EXPECT_FALSE(cc.done()) << "inline failures have no callback";
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, CompleteConnectExConnectionInvalidWhenAlreadyConnected) {
  Endpoint x, y;
  make_endpoints(x, y);
  Link k;
  establish(k, x, y, 7201);
  Req again;
  EXPECT_EQ(k.ca->complete_connect_ex(nullptr, nullptr, &Req::cb, &again),
            STATUS_CONNECTION_INVALID);
  release(k);
  pump(20);
  EXPECT_FALSE(again.done());
  close_endpoint(x);
  close_endpoint(y);
}

// The accepting peer abandons the establishment after its REP: by closing its connector (REJ),
// inline (REJ seen before CompleteConnectEx) and asynchronously (REJ arrives while our QP moves).
TEST_F(SeedConnections, CompleteConnectExConnectionAbortedInlineWhenPeerClosesConnector) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7300, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc;
  Connector* pc = request(c, x.qp, 7300, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  close_connector(pc);
  pump(20);
  ASSERT_TRUE(acc.done()) << "the pending Accept completes before the close";
  EXPECT_EQ(acc.status, STATUS_CANCELLED);
  EXPECT_EQ(acc.count, 1);
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_CONNECTION_ABORTED);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, CompleteConnectExConnectionAbortedAsynchronously) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7301, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc;
  Connector* pc = request(c, x.qp, 7301, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  // B's listener closes before the RTU: the connection it produced is abandoned (REJ). One
  // round carries the REJ onto A's wire; A's CM has not read it when CompleteConnectEx starts.
  close_listener(l);
  for (auto& core : b_.cores) core->poll_once();
  ASSERT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return cc.done(); }));
  EXPECT_EQ(cc.status, STATUS_CONNECTION_ABORTED);
  ASSERT_TRUE(acc.done());
  EXPECT_EQ(acc.status, STATUS_CONNECTION_ABORTED)
      << "B's pending Accept, abandoned by its listener";
  close_connector(pc);
  close_connector(c);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, CompleteConnectExConnectionAbortedOnPeerDreqBeforeRtu) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7302, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc;
  Connector* pc = request(c, x.qp, 7302, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  // The peer's CM sends a DREQ before our RTU (NDK gives the passive consumer no call for it,
  // so the test builds the peer's DREQ from its own comm IDs, as a peer stack would).
  ASSERT_FALSE(tap_b_.empty());
  wire::CmMad rep;
  const auto& f = tap_b_.back().bytes;  // B's REP
  ASSERT_EQ(wire::decode_cm_mad(wire::Bytes(f.data() + 14 + 20 + 8 + 12 + 8, wire::kMadLen), rep),
            wire::CmDecodeStatus::kOk);
  const auto* r = std::get_if<wire::CmRep>(&rep.body);
  ASSERT_NE(r, nullptr);
  deliver_cm(
      b_, a_,
      wire::make_cm_mad(0x77, wire::CmDreq{r->local_comm_id, r->remote_comm_id, x.qp->qpn(), {}}));
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_CONNECTION_ABORTED);
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// The peer stopped waiting for our RTU: inline when it already gave up, asynchronously when it
// gives up while our QP moves to RTS.
TEST_F(SeedConnections, CompleteConnectExIoTimeoutInline) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7400, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc;
  Connector* pc = request(c, x.qp, 7400, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  advance(10 * kSecond);  // the consumer sits on the REP far beyond the peer's RTU wait
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_IO_TIMEOUT);
  ASSERT_TRUE(acc.done());
  EXPECT_EQ(acc.status, STATUS_IO_TIMEOUT) << "B's Accept: the peer never completed";
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, CompleteConnectExIoTimeoutAsynchronously) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7401, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc;
  Connector* pc = request(c, x.qp, 7401, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  ASSERT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_PENDING);
  // Time jumps before A's core answered the QP move: A's CM timer runs before the answer.
  clock_ns_ += 20 * kSecond;
  ASSERT_TRUE(pump_until([&] { return cc.done(); }));
  EXPECT_EQ(cc.status, STATUS_IO_TIMEOUT);
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// ---- Accept
// ---------------------------------------------------------------------------------------

TEST_F(SeedConnections, AcceptIoTimeoutWhenThePeerNeverCompletes) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7500, &ev);
  Connector* c = connector(a_);
  Req connected, acc;
  Connector* pc = request(c, x.qp, 7500, ev, connected);
  ASSERT_NE(pc, nullptr);
  silent_a_ = true;  // A's CM goes silent: no RTU, no REJ ever comes back
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  pump(50);
  EXPECT_FALSE(acc.done());
  advance(10 * kSecond);
  ASSERT_TRUE(acc.done());
  EXPECT_EQ(acc.status, STATUS_IO_TIMEOUT);
  silent_a_ = false;
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, AcceptConnectionAbortedInlineAndAsynchronously) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7501, &ev);
  // Inline: the active side closed its connector (REJ) before B's consumer accepted.
  Connector* c = connector(a_);
  Req connected, acc;
  Connector* pc = request(c, x.qp, 7501, ev, connected);
  ASSERT_NE(pc, nullptr);
  close_connector(c);
  pump(20);
  EXPECT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc),
            STATUS_CONNECTION_ABORTED);
  close_connector(pc);
  // Asynchronously: the active side rejects our REP.
  c = connector(a_);
  Req connected2, acc2;
  pc = request(c, x.qp, 7501, ev, connected2);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc2), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected2.done(); }));
  ASSERT_EQ(c->reject("no", 2), STATUS_SUCCESS);
  ASSERT_TRUE(pump_until([&] { return acc2.done(); }));
  EXPECT_EQ(acc2.status, STATUS_CONNECTION_ABORTED);
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// ---- Disconnect events
// ------------------------------------------------------------------------------

TEST_F(SeedConnections, PeerDeathFiresDisconnectAndFlushesCancelled) {
  Endpoint x, y;
  make_endpoints(x, y);
  auto xb = buffer(x.pd, 4096);
  Link k;
  establish(k, x, y, 7600);
  // Receives outstanding on A, then B dies (its cores and CM stop for good).
  NdkSge r1 = xb->sge(0, 64), r2 = xb->sge(64, 64);
  ASSERT_EQ(x.qp->receive(&x, &r1, 1), STATUS_SUCCESS);
  ASSERT_EQ(x.qp->receive(&x, &r2, 1), STATUS_SUCCESS);
  dead_b_ = true;
  NdkSge s = xb->sge(1024, 64);
  ASSERT_EQ(x.qp->send(&x, &s, 1, 0), STATUS_SUCCESS);
  ASSERT_TRUE(pump_until([&] { return k.disc_a.done(); }, 5'000'000))
      << "retries (3 x 4 ms) never ran out";
  EXPECT_EQ(k.disc_a.status, STATUS_IO_TIMEOUT)
      << "the disconnect reason: the peer stopped answering";
  EXPECT_EQ(k.disc_a.thread, main_thread_);
  auto res = wait_results(x.cq, 3);
  ASSERT_EQ(res.size(), 3u);
  int cancelled = 0;
  for (auto& r : res) cancelled += r.status == STATUS_CANCELLED;
  EXPECT_GE(cancelled, 2) << "both receives flushed";
  EXPECT_EQ(connection_manager_counters(*a_.adapter).peer_deaths, 1u);
  Req d;
  EXPECT_EQ(k.ca->disconnect(&Req::cb, &d), STATUS_SUCCESS) << "already disconnected";
  dead_b_ = false;
  release(k);
  std::vector<std::unique_ptr<Buffer>> bufs;
  bufs.push_back(std::move(xb));
  close_endpoint(x, &bufs);
  close_endpoint(y);
}

// ---- Callback discipline
// ---------------------------------------------------------------

TEST_F(SeedConnections, ConsumerClosesObjectsInsideTheirOwnCallbacks) {
  Endpoint x, y;
  make_endpoints(x, y);
  // The listener closes itself from inside its ConnectEvent, after rejecting the request.
  struct Ctx {
    Listener* l = nullptr;
    int events = 0;
  } lc;
  ASSERT_EQ(create_listener(
                *b_.adapter,
                [](void* c, NdkConnector* conn) {
                  auto* me = static_cast<Ctx*>(c);
                  ++me->events;
                  Connector* pc = Connector::from(conn);
                  EXPECT_EQ(pc->reject(nullptr, 0), STATUS_SUCCESS);
                  EXPECT_EQ(pc->close(nullptr, nullptr), STATUS_SUCCESS);
                  EXPECT_EQ(me->l->close(nullptr, nullptr), STATUS_SUCCESS);
                },
                &lc, nullptr, nullptr, &lc.l),
            STATUS_SUCCESS);
  ASSERT_EQ(lc.l->listen(addr_b(7700), nullptr, nullptr), STATUS_SUCCESS);
  // The connector closes itself from inside its Connect completion.
  struct CCtx {
    Connector* c = nullptr;
    NTSTATUS st = STATUS_PENDING;
  } cc;
  ASSERT_EQ(create_connector(*a_.adapter, nullptr, nullptr, &cc.c), STATUS_SUCCESS);
  ASSERT_EQ(cc.c->connect(
                x.qp, addr_a(0), addr_b(7700), 1, 1, nullptr, 0,
                [](void* c, NTSTATUS s) {
                  auto* me = static_cast<CCtx*>(c);
                  me->st = s;
                  EXPECT_EQ(me->c->close(nullptr, nullptr), STATUS_SUCCESS);
                  me->c = nullptr;
                },
                &cc),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return cc.st != STATUS_PENDING; }));
  EXPECT_EQ(cc.st, STATUS_CONNECTION_REFUSED);
  EXPECT_EQ(lc.events, 1);
  pump(20);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, NothingFiresAfterClose) {
  Endpoint x, y;
  make_endpoints(x, y);
  // A pending Connect whose connector closes: the Connect completes CANCELLED, once, then the
  // close completes; nothing after (the REQ retries run out later).
  silent_b_ = true;
  Connector* c = connector(a_);
  Req r;
  ASSERT_EQ(c->connect(x.qp, addr_a(0), addr_b(7800), 1, 1, nullptr, 0, &Req::cb, &r),
            STATUS_PENDING);
  pump(10);
  close_connector(c);
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.status, STATUS_CANCELLED);
  advance(5 * kSecond);
  EXPECT_EQ(r.count, 1);
  silent_b_ = false;
  // A paused listener refuses the request; closing it changes nothing: no ConnectEvent fires;
  // the active side sees REFUSED.
  Events ev;
  Listener* l = listen_b(7801, &ev);
  l->control_connect_events(true);
  c = connector(a_);
  Req r2;
  ASSERT_EQ(c->connect(x.qp, addr_a(0), addr_b(7801), 1, 1, nullptr, 0, &Req::cb, &r2),
            STATUS_PENDING);
  pump(50);
  EXPECT_TRUE(ev.connectors.empty()) << "paused";
  close_listener(l);
  ASSERT_TRUE(pump_until([&] { return r2.done(); }));
  EXPECT_EQ(r2.status, STATUS_CONNECTION_REFUSED);
  EXPECT_TRUE(ev.connectors.empty());
  close_connector(c);
  // An established connection: close both connectors; no disconnect callback fires on either.
  Link k;
  establish(k, x, y, 7802);
  // Both close in the same turn (nothing pending: inline SUCCESS, no callback).
  EXPECT_EQ(k.ca->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(k.cb->close(nullptr, nullptr), STATUS_SUCCESS);
  k.ca = k.cb = nullptr;
  advance(3 * kSecond);
  EXPECT_FALSE(k.disc_a.done());
  EXPECT_FALSE(k.disc_b.done());
  release(k);
  close_endpoint(x);
  close_endpoint(y);
}

// NdkControlConnectEvents(pause): a paused listener treats a request as if no listener
// existed: the peer gets the no-listener REJ (reason 8, invalid service ID) at once, nothing is
// held, and no ConnectEvent fires, not even after resuming. After resuming, requests get through.
TEST_F(SeedConnections, ControlConnectEventsPauseRefusesAsIfNoListener) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7900, &ev);
  l->control_connect_events(true);
  Connector* c = connector(a_);
  Req r;
  ASSERT_EQ(c->connect(x.qp, addr_a(0), addr_b(7900), 1, 1, nullptr, 0, &Req::cb, &r),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return r.done(); }, 20'000)) << "refused at once, not held";
  EXPECT_EQ(r.status, STATUS_CONNECTION_REFUSED);
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(connection_manager_counters(*b_.adapter).rej_sent_no_listener, 1u);
  bool saw_rej8 = false;
  for (const auto& f : tap_b_) {
    wire::CmMad m;
    if (wire::decode_cm_mad(wire::Bytes(f.bytes.data() + 14 + 20 + 8 + 12 + 8, wire::kMadLen), m) !=
        wire::CmDecodeStatus::kOk)
      continue;
    if (const auto* rej = std::get_if<wire::CmRej>(&m.body))
      saw_rej8 |= rej->reason == static_cast<uint16_t>(wire::CmRejReason::kInvalidServiceId);
  }
  EXPECT_TRUE(saw_rej8) << "REJ reason 8 (no listener) on the wire";
  l->control_connect_events(false);
  pump(20);
  EXPECT_TRUE(ev.connectors.empty()) << "nothing was held for delivery on resume";
  close_connector(c);
  // Resumed: the next request reaches the consumer.
  c = connector(a_);
  Req r2;
  Connector* pc = request(c, x.qp, 7900, ev, r2);
  ASSERT_NE(pc, nullptr);
  EXPECT_EQ(ev.thread, main_thread_);
  ASSERT_EQ(pc->reject(nullptr, 0), STATUS_SUCCESS);
  ASSERT_TRUE(pump_until([&] { return r2.done(); }));
  EXPECT_EQ(r2.status, STATUS_CONNECTION_REFUSED);
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// ---- Close with requests pending (NDKPI object lifetime) ----------------------------------------

// Close pends while a Connect / Accept / CompleteConnectEx / Disconnect is pending: the request
// completes STATUS_CANCELLED exactly once, then the CloseCompletion runs, never inside close().
TEST_F(SeedConnections, ConnectorCloseCompletesEachPendingRequestCancelledThenCloses) {
  Endpoint x, y, x2, y2, x3, y3;
  make_endpoints(x, y);
  make_endpoints(x2, y2);
  make_endpoints(x3, y3);
  Order order;
  Events ev;
  Listener* l = listen_b(7950, &ev);

  // 1. Connect pending (B's CM is silent): A closes its connector.
  {
    silent_b_ = true;
    Connector* c = connector(a_);
    Order::Tag conn{&order, "connect"}, cl{&order, "close"};
    ASSERT_EQ(c->connect(x.qp, addr_a(0), addr_b(7949), 1, 1, nullptr, 0, &Order::request, &conn),
              STATUS_PENDING);
    pump(10);
    ASSERT_EQ(c->close(&Order::closed, &cl), STATUS_PENDING);
    EXPECT_TRUE(order.events.empty()) << "nothing runs inside close()";
    ASSERT_TRUE(pump_until([&] { return cl.count != 0; }));
    advance(3 * kSecond);
    EXPECT_EQ(conn.count, 1);
    EXPECT_EQ(conn.status, STATUS_CANCELLED);
    EXPECT_EQ(cl.count, 1);
    EXPECT_EQ(order.events, (std::vector<std::string>{"connect", "close"}));
    order.events.clear();
    silent_b_ = false;
  }
  // 2. Accept pending (A never completes: its CM is silent): B closes the passive connector.
  {
    Connector* c = connector(a_);
    Req connected;
    Connector* pc = request(c, x2.qp, 7950, ev, connected);
    ASSERT_NE(pc, nullptr);
    silent_a_ = true;
    Order::Tag acc{&order, "accept"}, cl{&order, "close"};
    ASSERT_EQ(pc->accept(y2.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Order::request, &acc),
              STATUS_PENDING);
    pump(10);
    ASSERT_EQ(pc->close(&Order::closed, &cl), STATUS_PENDING);
    EXPECT_TRUE(order.events.empty());
    ASSERT_TRUE(pump_until([&] { return cl.count != 0; }));
    advance(3 * kSecond);
    EXPECT_EQ(acc.count, 1);
    EXPECT_EQ(acc.status, STATUS_CANCELLED);
    EXPECT_EQ(order.events, (std::vector<std::string>{"accept", "close"}));
    order.events.clear();
    silent_a_ = false;
    close_connector(c);
  }
  // 3. CompleteConnectEx pending (its QP move is in flight): A closes at once.
  // 4. Disconnect pending (B's CM is silent, no DREP): A closes.
  {
    Link k;
    k.listener = l;
    k.ca = connector(a_);
    k.cb = request(k.ca, x3.qp, 7950, ev, k.connected);
    ASSERT_NE(k.cb, nullptr);
    ASSERT_EQ(k.cb->accept_ex(y3.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &k.accepted),
              STATUS_PENDING);
    ASSERT_TRUE(pump_until([&] { return k.connected.done(); }));
    Order::Tag cc{&order, "complete"}, cl{&order, "close"};
    ASSERT_EQ(k.ca->complete_connect_ex(nullptr, nullptr, &Order::request, &cc), STATUS_PENDING);
    ASSERT_EQ(k.ca->close(&Order::closed, &cl), STATUS_PENDING);
    EXPECT_TRUE(order.events.empty());
    ASSERT_TRUE(pump_until([&] { return cl.count != 0; }));
    pump(50);
    EXPECT_EQ(cc.count, 1);
    EXPECT_EQ(cc.status, STATUS_CANCELLED);
    EXPECT_EQ(order.events, (std::vector<std::string>{"complete", "close"}));
    order.events.clear();
    close_connector(k.cb);
  }
  close_listener(l);
  // 4. Disconnect pending.
  {
    Endpoint x4, y4;
    make_endpoints(x4, y4);
    Link k;
    establish(k, x4, y4, 7951);
    silent_b_ = true;
    Order::Tag d{&order, "disconnect"}, cl{&order, "close"};
    ASSERT_EQ(k.ca->disconnect(&Order::request, &d), STATUS_PENDING);
    pump(10);
    ASSERT_EQ(k.ca->close(&Order::closed, &cl), STATUS_PENDING);
    EXPECT_TRUE(order.events.empty());
    ASSERT_TRUE(pump_until([&] { return cl.count != 0; }));
    advance(3 * kSecond);
    EXPECT_EQ(d.count, 1);
    EXPECT_EQ(d.status, STATUS_CANCELLED);
    EXPECT_EQ(order.events, (std::vector<std::string>{"disconnect", "close"}));
    silent_b_ = false;
    k.ca = nullptr;
    release(k);
    close_endpoint(x4);
    close_endpoint(y4);
  }
  for (Endpoint* e : {&x, &y, &x2, &y2, &x3, &y3}) close_endpoint(*e);
}

// A completion already decided when the consumer closes keeps its status and still fires once,
// before the close completion: a listener closes with two Accepts pending (both abandoned,
// CONNECTION_ABORTED, queued together); the first Accept's callback closes the second
// connector, whose completion is decided but has not run yet.
TEST_F(SeedConnections, ConnectorCloseDeliversACompletionAlreadyDecidedThenCloses) {
  Endpoint x, y, x2, y2;
  make_endpoints(x, y);
  make_endpoints(x2, y2);
  Events ev;
  Listener* l = listen_b(7960, &ev);
  Connector* c1 = connector(a_);
  Connector* c2 = connector(a_);
  Req conn1, conn2;
  Connector* p1 = request(c1, x.qp, 7960, ev, conn1);
  Connector* p2 = request(c2, x2.qp, 7960, ev, conn2);
  ASSERT_NE(p1, nullptr);
  ASSERT_NE(p2, nullptr);
  silent_a_ = true;  // no RTU: both Accepts stay pending
  struct Ctx {
    Order order;
    Order::Tag acc1{&order, "accept1"}, acc2{&order, "accept2"}, cl2{&order, "close2"};
    Connector* other = nullptr;
    NTSTATUS close_status = STATUS_PENDING;
  } ctx;
  ctx.other = p2;
  ASSERT_EQ(p1->accept(
                y.qp, 1, 1, nullptr, 0, nullptr, nullptr,
                [](void* c, NTSTATUS s) {
                  auto* me = reinterpret_cast<Ctx*>(static_cast<Order::Tag*>(c)->order);
                  Order::request(c, s);
                  me->close_status = me->other->close(&Order::closed, &me->cl2);
                },
                &ctx.acc1),
            STATUS_PENDING);
  ASSERT_EQ(p2->accept(y2.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Order::request, &ctx.acc2),
            STATUS_PENDING);
  pump(20);
  close_listener(l);
  ASSERT_TRUE(pump_until([&] { return ctx.cl2.count != 0; }));
  pump(20);
  EXPECT_EQ(ctx.close_status, STATUS_PENDING);
  EXPECT_EQ(ctx.acc1.status, STATUS_CONNECTION_ABORTED);
  EXPECT_EQ(ctx.acc2.count, 1);
  EXPECT_EQ(ctx.acc2.status, STATUS_CONNECTION_ABORTED) << "decided before the close: kept";
  EXPECT_EQ(ctx.order.events, (std::vector<std::string>{"accept1", "accept2", "close2"}));
  silent_a_ = false;
  close_connector(p1);
  close_connector(c1);
  close_connector(c2);
  for (Endpoint* e : {&x, &y, &x2, &y2}) close_endpoint(*e);
}

// ---- CompleteConnectEx: the QP cannot be connected by the time the request runs (seed 000) -----

TEST_F(SeedConnections, CompleteConnectExConnectionInvalidAsynchronouslyWhenTheQpCannotConnect) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7970, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc;
  Connector* pc = request(c, x.qp, 7970, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  ASSERT_EQ(connected.status, STATUS_SUCCESS);
  // The consumer flushes the QP (NdkFlush travels on the QP's core ring) and calls
  // CompleteConnectEx before the core ran either: the connector cannot know yet, so the call
  // pends; on the core the QP is in error when the move runs.
  x.qp->flush();
  ASSERT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return cc.done(); }));
  EXPECT_EQ(cc.status, STATUS_CONNECTION_INVALID);
  EXPECT_EQ(cc.count, 1);
  ASSERT_TRUE(pump_until([&] { return acc.done(); }));
  EXPECT_EQ(acc.status, STATUS_CONNECTION_ABORTED) << "the peer's Accept ends with our REJ";
  EXPECT_EQ(acc.count, 1);
  pump(50);
  EXPECT_EQ(cc.count, 1);
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

TEST_F(SeedConnections, CompleteConnectExConnectionInvalidInlineWhenTheQpWasClosed) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7971, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc, cc2;
  Connector* pc = request(c, x.qp, 7971, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, nullptr, nullptr, &Req::cb, &acc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  // The QP is closing: CompleteConnectEx cannot connect it.
  Closed qc;
  ASSERT_EQ(x.qp->close(&Closed::cb, &qc), STATUS_PENDING);
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc), STATUS_CONNECTION_INVALID);
  ASSERT_TRUE(pump_until([&] { return qc.count == 1; }));
  x.qp = nullptr;
  // The QP is gone (freed): the connector must not touch it.
  EXPECT_EQ(c->complete_connect_ex(nullptr, nullptr, &Req::cb, &cc2), STATUS_CONNECTION_INVALID);
  pump(20);
  EXPECT_FALSE(cc.done());
  EXPECT_FALSE(cc2.done());
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// ---- NdkCompleteConnect / NdkAccept (not Ex) and their plain disconnect callback -------------

TEST_F(SeedConnections, CompleteConnectAndAcceptWithPlainDisconnectCallbacks) {
  Endpoint x, y;
  make_endpoints(x, y);
  Events ev;
  Listener* l = listen_b(7980, &ev);
  Connector* c = connector(a_);
  Req connected, acc, cc, disc_a, disc_b;
  Connector* pc = request(c, x.qp, 7980, ev, connected);
  ASSERT_NE(pc, nullptr);
  ASSERT_EQ(pc->accept(y.qp, 1, 1, nullptr, 0, &Req::plain, &disc_b, &Req::cb, &acc),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return connected.done(); }));
  ASSERT_EQ(connected.status, STATUS_SUCCESS);
  ASSERT_EQ(c->complete_connect(&Req::plain, &disc_a, &Req::cb, &cc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return cc.done() && acc.done(); }));
  EXPECT_EQ(cc.status, STATUS_SUCCESS);
  EXPECT_EQ(acc.status, STATUS_SUCCESS);
  EXPECT_EQ(c->complete_connect(&Req::plain, &disc_a, &Req::cb, &cc), STATUS_CONNECTION_INVALID)
      << "already connected";
  // B disconnects: A's plain disconnect callback fires once, on the control thread; B's own
  // does not fire.
  Req d;
  ASSERT_EQ(pc->disconnect(&Req::cb, &d), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return d.done() && disc_a.done(); }));
  EXPECT_EQ(d.status, STATUS_SUCCESS);
  EXPECT_EQ(disc_a.count, 1);
  EXPECT_EQ(disc_a.thread, main_thread_);
  pump(50);
  EXPECT_EQ(disc_a.count, 1);
  EXPECT_FALSE(disc_b.done());
  EXPECT_EQ(cc.count, 1);
  EXPECT_EQ(acc.count, 1);
  close_connector(pc);
  close_connector(c);
  close_listener(l);
  close_endpoint(x);
  close_endpoint(y);
}

// The NDK disconnect event pages: "The provider should not flush outstanding work requests when
// it indicates a disconnect event because of an incoming disconnect request from the peer."
TEST_F(SeedConnections, PeerDisconnectDoesNotFlushTheQp) {
  Endpoint x, y;
  make_endpoints(x, y);
  auto xb = buffer(x.pd, 4096);
  Link k;
  establish(k, x, y, 7990);
  NdkSge r1 = xb->sge(0, 64), r2 = xb->sge(64, 64);
  ASSERT_EQ(x.qp->receive(&x, &r1, 1), STATUS_SUCCESS);
  ASSERT_EQ(x.qp->receive(&x, &r2, 1), STATUS_SUCCESS);
  Req d;
  ASSERT_EQ(k.cb->disconnect(&Req::cb, &d), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return d.done() && k.disc_a.done(); }));
  EXPECT_EQ(k.disc_a.status, STATUS_SUCCESS) << "a normal peer disconnect: reason STATUS_SUCCESS";
  EXPECT_EQ(k.disc_a.count, 1);
  pump(200);
  NdkResultEx r[4];
  EXPECT_EQ(x.cq->get_results_ex(r, 4), 0u) << "receives still outstanding after the event";
  // The consumer flushes.
  x.qp->flush();
  auto fl = wait_results(x.cq, 2);
  ASSERT_EQ(fl.size(), 2u);
  for (auto& e : fl) EXPECT_EQ(e.status, STATUS_CANCELLED);
  release(k);
  std::vector<std::unique_ptr<Buffer>> bufs;
  bufs.push_back(std::move(xb));
  close_endpoint(x, &bufs);
  close_endpoint(y);
}

}  // namespace
}  // namespace rocedp::test

namespace rocedp::test {
namespace {

// ---- PSN meaning on the wire
// ---------------------------------------------------------------------

// The first RC request packet each side sends, seen on the receiving port (rte_eth RX callback).
struct FirstRequests {
  struct Seen {
    bool have = false;
    uint32_t dest_qpn = 0, psn = 0;
  };
  Seen at_a, at_b;  // what arrived at A (sent by B), at B (sent by A)
  uint16_t port_a = 0;
};

uint16_t record_first_request(uint16_t port, uint16_t, rte_mbuf** pkts, uint16_t n, uint16_t,
                              void* ctx) {
  auto* fr = static_cast<FirstRequests*>(ctx);
  for (uint16_t i = 0; i < n; ++i) {
    const auto* f = rte_pktmbuf_mtod(pkts[i], const uint8_t*);
    if (rte_pktmbuf_data_len(pkts[i]) < 14 + 20 + 8 + 12 || f[12] != 0x08 || f[13] != 0x00)
      continue;
    const size_t ihl = (f[14] & 0x0F) * 4u;
    const uint8_t* udp = f + 14 + ihl;
    if (f[14 + 9] != 17 || ((udp[2] << 8) | udp[3]) != 4791) continue;
    const uint8_t* bth = udp + 8;
    const uint8_t op = bth[0];
    // RC requests only: SEND, WRITE, READ request, atomics (responses carry the requester's PSN).
    const bool request = op <= 0x0C || op == 0x13 || op == 0x14 || op == 0x16 || op == 0x17;
    if (!request) continue;
    auto& s = port == fr->port_a ? fr->at_a : fr->at_b;
    if (s.have) continue;
    s.have = true;
    s.dest_qpn = (uint32_t{bth[5]} << 16) | (uint32_t{bth[6]} << 8) | bth[7];
    s.psn = (uint32_t{bth[9]} << 16) | (uint32_t{bth[10]} << 8) | bth[11];
  }
  return n;
}

// Linux ib_cm reads the Starting PSN of a REQ or REP as the PSN its SENDER receives first (cm.c:
// the REQ's value becomes the active side's rq_psn, the REP's its sq_psn). Two rocedp ends that
// shared the opposite reading talked to each other and to no Linux peer, so this checks the PSN
// of the first request on the wire against the receiver's own CM message.
TEST_F(SeedConnections, EachSidesStartingPsnIsTheFirstPsnItReceives) {
  Endpoint x, y;
  make_endpoints(x, y);
  FirstRequests fr;
  fr.port_a = a_.port->id();
  std::vector<std::pair<uint16_t, const rte_eth_rxtx_callback*>> cbs;
  for (Host* h : {&a_, &b_})
    for (uint16_t q = 0; q < kCores; ++q) {
      const auto* cb = rte_eth_add_rx_callback(h->port->id(), q, &record_first_request, &fr);
      ASSERT_NE(cb, nullptr);
      cbs.emplace_back(q, cb);
    }
  Link k;
  establish(k, x, y, 6400);
  auto xb = buffer(x.pd, 4096, kMrAll, 0x11);
  auto yb = buffer(y.pd, 4096, kMrAll, 0x22);
  // A SEND each way.
  NdkSge ra = xb->sge(2048, 64), rb = yb->sge(2048, 64);
  ASSERT_EQ(x.qp->receive(&x, &ra, 1), STATUS_SUCCESS);
  ASSERT_EQ(y.qp->receive(&y, &rb, 1), STATUS_SUCCESS);
  NdkSge sa = xb->sge(0, 32), sb = yb->sge(0, 32);
  ASSERT_EQ(x.qp->send(&x, &sa, 1, 0), STATUS_SUCCESS);
  ASSERT_EQ(y.qp->send(&y, &sb, 1, 0), STATUS_SUCCESS);
  EXPECT_EQ(wait_results(x.cq, 2).size(), 2u);
  EXPECT_EQ(wait_results(y.cq, 2).size(), 2u);
  for (size_t i = 0; i < cbs.size(); ++i) {
    Host* h = i < kCores ? &a_ : &b_;
    rte_eth_remove_rx_callback(h->port->id(), cbs[i].first, cbs[i].second);
  }

  // A's REQ and B's REP, as their senders built them.
  wire::CmMad req, rep;
  ASSERT_NE(find_cm(tap_a_, 0x10, &req), nullptr);
  ASSERT_NE(find_cm(tap_b_, 0x13, &rep), nullptr);
  ASSERT_TRUE(fr.at_a.have && fr.at_b.have);
  const auto& q = std::get<wire::CmReq>(req.body);
  const auto& p = std::get<wire::CmRep>(rep.body);
  EXPECT_EQ(fr.at_b.dest_qpn, p.local_qpn);
  EXPECT_EQ(fr.at_b.psn, p.starting_psn) << "A's first request carries the PSN of B's REP";
  EXPECT_EQ(fr.at_a.dest_qpn, q.local_qpn);
  EXPECT_EQ(fr.at_a.psn, q.starting_psn) << "B's first request carries the PSN of A's REQ";
  EXPECT_NE(q.starting_psn, p.starting_psn);

  Req disc;
  ASSERT_EQ(k.ca->disconnect(&Req::cb, &disc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return disc.done(); }));
  release(k);
  close_pair(x, y, std::move(xb), std::move(yb));
}

// NDK_FN_DISCONNECT_EX(Abortive = TRUE): the connection ends at once, inline; our QP is flushed;
// the peer sees its disconnect event.
TEST_F(SeedConnections, AbortiveDisconnectExEndsAtOnceAndFlushes) {
  Endpoint x, y;
  make_endpoints(x, y);
  auto xb = buffer(x.pd, 4096);
  Link k;
  establish(k, x, y, 7995);
  NdkSge r1 = xb->sge(0, 64);
  ASSERT_EQ(x.qp->receive(&x, &r1, 1), STATUS_SUCCESS);
  Req d;
  EXPECT_EQ(k.ca->disconnect_ex(true, nullptr, nullptr), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(k.ca->disconnect_ex(true, &Req::cb, &d), STATUS_SUCCESS);
  auto fl = wait_results(x.cq, 1);
  ASSERT_EQ(fl.size(), 1u);
  EXPECT_EQ(fl[0].status, STATUS_CANCELLED) << "the QP is flushed";
  ASSERT_TRUE(pump_until([&] { return k.disc_b.done(); }));
  EXPECT_EQ(k.disc_b.status, STATUS_SUCCESS);
  pump(100);
  EXPECT_FALSE(d.done()) << "inline: no callback";
  EXPECT_FALSE(k.disc_a.done()) << "our own disconnect fires no event";
  EXPECT_EQ(k.ca->disconnect_ex(true, &Req::cb, &d), STATUS_SUCCESS) << "already down";
  Connector* idle = connector(a_);
  EXPECT_EQ(idle->disconnect_ex(true, &Req::cb, &d), STATUS_CONNECTION_INVALID)
      << "never connected";
  close_connector(idle);
  release(k);
  std::vector<std::unique_ptr<Buffer>> bufs;
  bufs.push_back(std::move(xb));
  close_endpoint(x, &bufs);
  close_endpoint(y);
}

}  // namespace
}  // namespace rocedp::test
