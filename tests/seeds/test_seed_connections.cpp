// Connections through IB CM between two adapters (DESIGN.md §3; seed 000 NdkCompleteConnectEx;
// NdkConnect / NdkAccept / NdkDisconnect statuses; issue 4 §3 and the callback rules of §5).
// QPs are the object layer's real QPs on the polling cores.

#include <cstdlib>

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
  ASSERT_EQ(k.cb->accept_ex(y.qp, 2, 3, &info, sizeof(info), [](void* c, NTSTATUS s) { Req::cb(c, s); },
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

  ASSERT_EQ(k.ca->complete_connect_ex([](void* c, NTSTATUS s) { Req::cb(c, s); }, &k.disc_a, &Req::cb,
                                      &k.completed),
            STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return k.completed.done() && k.accepted.done(); }));
  EXPECT_EQ(k.completed.status, STATUS_SUCCESS);
  EXPECT_EQ(k.accepted.status, STATUS_SUCCESS);
  EXPECT_EQ(k.ca->complete_connect_ex(nullptr, nullptr, &Req::cb, &k.completed), STATUS_CONNECTION_INVALID)
      << "already connected";

  // SEND A -> B.
  std::memcpy(xb->ptr(), "payload-bytes", 13);
  NdkSge rs = yb->sge(1024, 64);
  ASSERT_EQ(y.qp->receive(&y, &rs, 1), STATUS_SUCCESS);
  NdkSge ss = xb->sge(0, 13);
  ASSERT_EQ(x.qp->send(&x, &ss, 1, 0), STATUS_SUCCESS);
  auto rb = wait_results(y.cq, 1);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].status, STATUS_SUCCESS);
  EXPECT_EQ(rb[0].bytes_transferred, 13u);
  EXPECT_EQ(std::memcmp(yb->ptr() + 1024, "payload-bytes", 13), 0);
  // WRITE A -> B's announced region, READ it back into A.
  NdkSge ws = xb->sge(0, 512);
  ASSERT_EQ(x.qp->write(&x, &ws, 1, got.va, got.token, 0), STATUS_SUCCESS);
  NdkSge rd = xb->sge(2048, 512);
  ASSERT_EQ(x.qp->read(&x, &rd, 1, got.va, got.token, 0), STATUS_SUCCESS);
  auto ra = wait_results(x.cq, 3);
  ASSERT_EQ(ra.size(), 3u);
  for (auto& r : ra) EXPECT_EQ(r.status, STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(yb->ptr(), xb->ptr(), 512), 0);
  EXPECT_EQ(std::memcmp(xb->ptr() + 2048, xb->ptr(), 512), 0);

  // B has a receive outstanding; A disconnects: B's disconnect callback fires, its QP is
  // flushed (the receive completes CANCELLED), A's Disconnect completes with the DREP.
  NdkSge rs2 = yb->sge(0, 64);
  ASSERT_EQ(y.qp->receive(&y, &rs2, 1), STATUS_SUCCESS);
  Req disc;
  ASSERT_EQ(k.ca->disconnect(&Req::cb, &disc), STATUS_PENDING);
  ASSERT_TRUE(pump_until([&] { return disc.done() && k.disc_b.done(); }));
  EXPECT_EQ(disc.status, STATUS_SUCCESS);
  EXPECT_EQ(k.disc_b.status, STATUS_SUCCESS) << "peer DREQ";
  EXPECT_EQ(k.disc_b.thread, main_thread_);
  EXPECT_FALSE(k.disc_a.done()) << "our own Disconnect does not fire our disconnect callback";
  auto fl = wait_results(y.cq, 1);
  ASSERT_EQ(fl.size(), 1u);
  EXPECT_EQ(fl[0].status, STATUS_CANCELLED);
  EXPECT_EQ(k.cb->disconnect(&Req::cb, &disc), STATUS_SUCCESS) << "already disconnected by the peer";

  release(k);
  std::vector<std::unique_ptr<Buffer>> bufs;
  bufs.push_back(std::move(xb));
  bufs.push_back(std::move(yb));
  close_endpoint(x, &bufs);
  close_endpoint(y, &bufs);

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
    const std::string cmd = "/usr/bin/python3 " + std::string(shared) + "/tools/roce-check " + path + " > " + dir +
                            "/cm-traffic.roce-check.txt 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "see " << dir << "/cm-traffic.roce-check.txt";
  }
}

}  // namespace
}  // namespace rocedp::test
