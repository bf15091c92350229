#pragma once
// Object helpers over TwoAdapters: create-and-wait for pending objects, registered buffers,
// a connected QP pair (one on each adapter), completion collection.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/ndk/ndk_env.hpp"

namespace rocedp::test {

inline constexpr uint32_t kMrAll =
    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

struct Created {
  bool done = false;
  NTSTATUS status = STATUS_PENDING;
  NdkObjectHeader* object = nullptr;
  static void cb(void* c, NTSTATUS s, NdkObjectHeader* o) {
    auto* self = static_cast<Created*>(c);
    self->done = true;
    self->status = s;
    self->object = o;
  }
};

struct Requested {
  bool done = false;
  NTSTATUS status = STATUS_PENDING;
  static void cb(void* c, NTSTATUS s) {
    auto* self = static_cast<Requested*>(c);
    self->done = true;
    self->status = s;
  }
};

struct Closed {
  int count = 0;
  static void cb(void* c) { ++static_cast<Closed*>(c)->count; }
};

/// Request and close completions in the order they ran (each Tag names one and counts its calls):
/// for the object-lifetime tests, where a close must complete pending requests first.
struct Order {
  std::vector<std::string> events;
  struct Tag {
    Order* order;
    const char* name;
    int count = 0;
    NTSTATUS status = STATUS_PENDING;
  };
  static void request(void* c, NTSTATUS s) {
    auto* t = static_cast<Tag*>(c);
    ++t->count;
    t->status = s;
    t->order->events.push_back(t->name);
  }
  static void closed(void* c) {
    auto* t = static_cast<Tag*>(c);
    ++t->count;
    t->order->events.push_back(t->name);
  }
};

/// A CQ notification recorder: which statuses arrived, and on which lcore.
struct Notes {
  std::atomic<int> count{0};
  std::atomic<NTSTATUS> last{STATUS_PENDING};
  std::atomic<unsigned> lcore{~0u};
  static void cb(void* c, NTSTATUS s) {
    auto* self = static_cast<Notes*>(c);
    self->last = s;
    self->lcore = rte_lcore_id();
    ++self->count;
  }
};

struct Buffer {
  std::vector<uint8_t> data;
  Mr* mr = nullptr;
  Pd* pd = nullptr;  // the PD the region was created on
  uint8_t* ptr() { return data.data(); }
  uint64_t va() const { return reinterpret_cast<uint64_t>(data.data()); }
  NdkSge sge(uint64_t offset, uint32_t len) const {
    return NdkSge{const_cast<uint8_t*>(data.data()) + offset, len, mr->get_local_token()};
  }
};

struct Endpoint {
  Host* host = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;  // send and receive
  Qp* qp = nullptr;
  Notes notes;
};

class NdkFixture : public TwoAdapters {
 protected:
  bool ipv6_qps_ = false;  // params_to connects QPs over IPv6

  Cq* make_cq(Host& h, uint32_t depth, uint32_t core, Notes* notes = nullptr) {
    Created c;
    Cq* out = reinterpret_cast<Cq*>(1);
    const NTSTATUS st = h.adapter->create_cq(depth, notes != nullptr ? &Notes::cb : nullptr, notes,
                                             core, &Created::cb, &c, &out);
    EXPECT_EQ(st, STATUS_PENDING);
    EXPECT_FALSE(c.done) << "a CQ is pending until its core answers";
    EXPECT_TRUE(poll_until([&] { return c.done; }));
    EXPECT_EQ(c.status, STATUS_SUCCESS);
    return ndk_object_cast<Cq>(c.object);
  }

  Pd* make_pd(Host& h) {
    Pd* pd = nullptr;
    EXPECT_EQ(h.adapter->create_pd(nullptr, nullptr, &pd), STATUS_SUCCESS);
    return pd;
  }

  Qp* make_qp(Pd* pd, Cq* rcq, Cq* scq, void* ctx, uint32_t depth = 256, Srq* srq = nullptr) {
    Created c;
    Qp* out = nullptr;
    const NTSTATUS st =
        srq == nullptr
            ? pd->create_qp(rcq, scq, ctx, depth, depth, 4, 4, 64, &Created::cb, &c, &out)
            : pd->create_qp_with_srq(rcq, scq, srq, ctx, depth, 4, 64, &Created::cb, &c, &out);
    EXPECT_EQ(st, STATUS_PENDING);
    EXPECT_TRUE(poll_until([&] { return c.done; }));
    EXPECT_EQ(c.status, STATUS_SUCCESS);
    return ndk_object_cast<Qp>(c.object);
  }

  std::unique_ptr<Buffer> buffer(Pd* pd, size_t len, uint32_t flags = kMrAll, uint8_t fill = 0) {
    auto b = std::make_unique<Buffer>();
    b->data.assign(len == 0 ? 8 : len, fill);
    b->pd = pd;
    EXPECT_EQ(pd->create_mr(false, nullptr, nullptr, &b->mr), STATUS_SUCCESS);
    EXPECT_EQ(b->mr->register_mr(b->data.data(), b->data.size(), flags, nullptr, nullptr),
              STATUS_SUCCESS);
    return b;
  }

  NdkQpConnectParams params_to(Host& peer, Qp* peer_qp, uint32_t my_psn, uint32_t peer_psn) {
    NdkQpConnectParams p;
    p.remote_qpn = peer_qp->qpn();
    if (ipv6_qps_) {  // RoCEv2 over IPv6: the peer by its IPv6 address alone
      std::memcpy(p.remote_ip6, peer.ip6.bytes.data(), 16);
    } else {
      p.remote_ip = peer.ip;
    }
    std::memcpy(p.remote_mac, peer.mac.bytes.data(), 6);
    p.path_mtu = 1024;
    p.local_psn = my_psn;
    p.remote_psn = peer_psn;
    p.local_ack_timeout = 10;  // 4.2 ms
    p.min_rnr_timer = 1;
    p.inbound_read_limit = 8;
    p.outbound_read_limit = 8;
    return p;
  }

  void connect(Endpoint& x, Endpoint& y, const NdkQpConnectParams* px = nullptr,
               const NdkQpConnectParams* py = nullptr) {
    Requested rx, ry;
    const NdkQpConnectParams dx = px != nullptr ? *px : params_to(*y.host, y.qp, 100, 7000);
    const NdkQpConnectParams dy = py != nullptr ? *py : params_to(*x.host, x.qp, 7000, 100);
    ASSERT_EQ(x.qp->connect(dx, &Requested::cb, &rx), STATUS_PENDING);
    ASSERT_EQ(y.qp->connect(dy, &Requested::cb, &ry), STATUS_PENDING);
    ASSERT_TRUE(poll_until([&] { return rx.done && ry.done; }));
    ASSERT_EQ(rx.status, STATUS_SUCCESS);
    ASSERT_EQ(ry.status, STATUS_SUCCESS);
  }

  /// A connected pair: A's QP on core `core_a`, B's on `core_b`, one CQ each (send+receive).
  void make_pair(Endpoint& x, Endpoint& y, uint32_t core_a = 0, uint32_t core_b = 1,
                 uint32_t cq_depth = 4096, uint32_t qp_depth = 256) {
    x.host = &a_;
    y.host = &b_;
    for (Endpoint* e : {&x, &y}) {
      e->pd = make_pd(*e->host);
      e->cq = make_cq(*e->host, cq_depth, e == &x ? core_a : core_b, &e->notes);
      e->qp = make_qp(e->pd, e->cq, e->cq, e, qp_depth);
    }
    connect(x, y);
  }

  std::vector<NdkResultEx> wait_results(Cq* cq, size_t n, uint64_t max_rounds = 4'000'000) {
    std::vector<NdkResultEx> out;
    NdkResultEx r[64];
    poll_until(
        [&] {
          for (uint32_t k; (k = cq->get_results_ex(r, 64)) != 0;) out.insert(out.end(), r, r + k);
          return out.size() >= n;
        },
        max_rounds);
    return out;
  }

  void close_qp(Qp* qp) {
    Closed c;
    ASSERT_EQ(qp->close(&Closed::cb, &c), STATUS_PENDING);
    ASSERT_TRUE(poll_until([&] { return c.count == 1; }));
  }
  void close_cq(Cq* cq) {
    Closed c;
    ASSERT_EQ(cq->close(&Closed::cb, &c), STATUS_PENDING);
    ASSERT_TRUE(poll_until([&] { return c.count == 1; }));
  }
  /// Closes an MR: inline SUCCESS when nothing is registered, else PENDING and the close
  /// completion (exactly once) once no core touches the memory.
  void close_mr(Mr* mr) {
    Closed c;
    const NTSTATUS st = mr->close(&Closed::cb, &c);
    if (st == STATUS_PENDING) {
      EXPECT_EQ(c.count, 0) << "the close completion never runs inside close()";
      ASSERT_TRUE(poll_until([&] { return c.count != 0; }));
      poll(2);
      EXPECT_EQ(c.count, 1);
    } else {
      EXPECT_EQ(st, STATUS_SUCCESS);
      EXPECT_EQ(c.count, 0);
    }
  }
  void close_endpoint(Endpoint& e, std::vector<std::unique_ptr<Buffer>>* buffers = nullptr) {
    if (e.qp != nullptr) close_qp(e.qp);
    if (e.cq != nullptr) close_cq(e.cq);
    if (buffers != nullptr) {
      for (auto& b : *buffers) {
        if (b->mr != nullptr && b->pd == e.pd) {
          close_mr(b->mr);
          b->mr = nullptr;
        }
      }
    }
    if (e.pd != nullptr) {
      EXPECT_EQ(e.pd->close(nullptr, nullptr), STATUS_SUCCESS);
    }
    e.qp = nullptr;
    e.cq = nullptr;
    e.pd = nullptr;
  }
  /// Closes a pair and the buffers written from `src` (x's) into `dst` (y's).
  void close_pair(Endpoint& x, Endpoint& y, std::unique_ptr<Buffer> src,
                  std::unique_ptr<Buffer> dst) {
    std::vector<std::unique_ptr<Buffer>> bx, by;
    bx.push_back(std::move(src));
    by.push_back(std::move(dst));
    close_endpoint(x, &bx);
    close_endpoint(y, &by);
  }
};

}  // namespace rocedp::test
