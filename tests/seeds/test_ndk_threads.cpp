// Calls from any thread (NDK consumers call from any processor, at any time): several consumer
// threads at once create objects, connect, accept, post, resize CQs, disconnect and close, while
// one other thread runs the polling cores and the control loop (both adapters). Every control
// call made on a consumer thread is handed to the control thread and its inline status comes
// back; every callback runs on the control thread. Run under ThreadSanitizer by
// scripts/tsan.sh.

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include <rte_lcore.h>

#include "tests/seeds/cm_env.hpp"

namespace rocedp::test {
namespace {

using namespace std::chrono_literals;

/// A completion seen from another thread: count and status are atomics; the thread it ran on.
struct Async {
  std::atomic<int> count{0};
  std::atomic<NTSTATUS> status{STATUS_PENDING};
  std::atomic<NdkObjectHeader*> object{nullptr};
  std::thread::id thread;
  static void request(void* c, NTSTATUS s) {
    auto* a = static_cast<Async*>(c);
    a->thread = std::this_thread::get_id();
    a->status.store(s);
    a->count.fetch_add(1, std::memory_order_release);
  }
  static void created(void* c, NTSTATUS s, NdkObjectHeader* o) {
    auto* a = static_cast<Async*>(c);
    a->thread = std::this_thread::get_id();
    a->object.store(o);
    a->status.store(s);
    a->count.fetch_add(1, std::memory_order_release);
  }
  static void closed(void* c) { request(c, STATUS_SUCCESS); }
  bool wait(std::chrono::seconds limit = 60s) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (count.load(std::memory_order_acquire) == 0) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::yield();
    }
    return true;
  }
};

class NdkThreads : public CmFixture {
 protected:
  void start_pump() {
    // The cores were made on this (the main) lcore and check it in their `_st` methods; the pump
    // thread takes the main lcore's identity while the test thread only waits.
    const unsigned lcore = rte_lcore_id();
    pump_thread_ = std::thread([this, lcore] {
      RTE_PER_LCORE(_lcore_id) = lcore;
      control_id_ = std::this_thread::get_id();
      started_.store(true);
      while (!stop_.load(std::memory_order_acquire)) pump(1);
    });
    while (!started_.load()) std::this_thread::yield();
  }
  void stop_pump() {
    stop_.store(true, std::memory_order_release);
    if (pump_thread_.joinable()) pump_thread_.join();
    pump(1);  // the test thread is the control thread again (TearDown closes the rest)
  }
  /// Creates a CQ and a QP from the calling (consumer) thread.
  void make_endpoint(Host& h, uint32_t core, Pd*& pd, Cq*& cq, Qp*& qp) {
    ASSERT_EQ(h.adapter->create_pd(nullptr, nullptr, &pd), STATUS_SUCCESS);
    Async c;
    ASSERT_EQ(h.adapter->create_cq(512, nullptr, nullptr, core, &Async::created, &c, nullptr),
              STATUS_PENDING);
    ASSERT_TRUE(c.wait());
    ASSERT_EQ(c.status.load(), STATUS_SUCCESS);
    EXPECT_EQ(c.thread, control_id_) << "callbacks run on the control thread";
    cq = ndk_object_cast<Cq>(c.object.load());
    Async q;
    ASSERT_EQ(pd->create_qp(cq, cq, this, 256, 64, 2, 2, 0, &Async::created, &q, nullptr),
              STATUS_PENDING);
    ASSERT_TRUE(q.wait());
    ASSERT_EQ(q.status.load(), STATUS_SUCCESS);
    qp = ndk_object_cast<Qp>(q.object.load());
  }
  void close_all(Connector* conn, Qp* qp, Cq* cq, Mr* mr, Pd* pd) {
    if (conn != nullptr) {
      Async cl;
      const NTSTATUS st = conn->close(&Async::closed, &cl);
      if (st == STATUS_PENDING) {
        EXPECT_TRUE(cl.wait());
      } else {
        EXPECT_EQ(st, STATUS_SUCCESS);
      }
    }
    Async q, c, m;
    ASSERT_EQ(qp->close(&Async::closed, &q), STATUS_PENDING);
    ASSERT_TRUE(q.wait());
    ASSERT_EQ(cq->close(&Async::closed, &c), STATUS_PENDING);
    ASSERT_TRUE(c.wait());
    ASSERT_EQ(mr->close(&Async::closed, &m), STATUS_PENDING);
    ASSERT_TRUE(m.wait());
    EXPECT_EQ(pd->close(nullptr, nullptr), STATUS_SUCCESS);
  }

  std::thread pump_thread_;
  std::atomic<bool> stop_{false}, started_{false};
  std::thread::id control_id_;
};

TEST_F(NdkThreads, ConnectAcceptPostResizeAndCloseFromSeveralThreadsAtOnce) {
  constexpr int kPairs = 3;
  constexpr uint32_t kMessages = 200;
  constexpr uint32_t kSize = 256;
  constexpr uint16_t kPort = 8100;
  // The listener's ConnectEvent (control thread) hands connectors to the accepting threads.
  struct Incoming {
    std::mutex m;
    std::deque<Connector*> q;
    std::thread::id thread;
  } in;
  Listener* l = nullptr;
  ASSERT_EQ(create_listener(
                *b_.adapter,
                [](void* c, NdkConnector* conn) {
                  auto* me = static_cast<Incoming*>(c);
                  std::lock_guard<std::mutex> g(me->m);
                  me->thread = std::this_thread::get_id();
                  me->q.push_back(Connector::from(conn));
                },
                &in, nullptr, nullptr, &l),
            STATUS_SUCCESS);
  ASSERT_EQ(l->listen(addr_b(kPort), nullptr, nullptr), STATUS_SUCCESS);
  start_pump();

  std::atomic<int> failures{0};
  auto passive = [&](int i) {
    Pd* pd = nullptr;
    Cq* cq = nullptr;
    Qp* qp = nullptr;
    make_endpoint(b_, static_cast<uint32_t>(i % 2), pd, cq, qp);
    std::vector<uint8_t> buf(kMessages * kSize, 0);
    Mr* mr = nullptr;
    ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
    ASSERT_EQ(
        mr->register_mr(buf.data(), buf.size(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE, nullptr, nullptr),
        STATUS_SUCCESS);
    for (uint32_t k = 0; k < kMessages; ++k) {
      NdkSge s{buf.data() + k * kSize, kSize, mr->get_local_token()};
      ASSERT_EQ(qp->receive(reinterpret_cast<void*>(uintptr_t{k}), &s, 1), STATUS_SUCCESS);
    }
    Connector* conn = nullptr;
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (conn == nullptr && std::chrono::steady_clock::now() < end) {
      std::lock_guard<std::mutex> g(in.m);
      if (!in.q.empty()) {
        conn = in.q.front();
        in.q.pop_front();
      }
    }
    ASSERT_NE(conn, nullptr);
    Async acc, disc;
    ASSERT_EQ(conn->accept_ex(
                  qp, 1, 1, nullptr, 0, [](void* c, NTSTATUS s) { Async::request(c, s); }, &disc,
                  &Async::request, &acc),
              STATUS_PENDING);
    ASSERT_TRUE(acc.wait());
    ASSERT_EQ(acc.status.load(), STATUS_SUCCESS);
    // Receive everything while resizing the CQ from this thread.
    uint32_t got = 0, resizes = 0;
    Async rs;
    rs.count = 1;
    rs.status = STATUS_SUCCESS;
    NdkResultEx r[16];
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    uint8_t tag = 0;
    while (got < kMessages && std::chrono::steady_clock::now() < deadline) {
      const uint32_t n = cq->get_results_ex(r, 16);
      for (uint32_t k = 0; k < n; ++k) {
        EXPECT_EQ(r[k].status, STATUS_SUCCESS);
        EXPECT_EQ(r[k].bytes_transferred, kSize);
        const auto idx = reinterpret_cast<uintptr_t>(r[k].request_context);
        EXPECT_EQ(idx, got + k) << "in order";
        if (got + k == 0) tag = buf[0];
        EXPECT_EQ(buf[idx * kSize], tag);
        EXPECT_EQ(buf[idx * kSize + kSize - 1], static_cast<uint8_t>(tag + idx));
      }
      got += n;
      if (rs.count.load(std::memory_order_acquire) != 0 && resizes < 20) {
        EXPECT_EQ(rs.status.load(), STATUS_SUCCESS);
        rs.count = 0;
        rs.status = STATUS_PENDING;
        ASSERT_EQ(cq->resize(resizes % 2 == 0 ? 1024 : 512, &Async::request, &rs), STATUS_PENDING);
        ++resizes;
      }
      if (n == 0) std::this_thread::yield();
    }
    EXPECT_EQ(got, kMessages);
    ASSERT_TRUE(rs.wait());
    // The active side disconnects: our event fires once; then we close.
    ASSERT_TRUE(disc.wait());
    EXPECT_EQ(disc.status.load(), STATUS_SUCCESS);
    EXPECT_EQ(disc.thread, control_id_);
    close_all(conn, qp, cq, mr, pd);
    if (::testing::Test::HasFailure()) failures.fetch_add(1);
  };
  auto active = [&](int i) {
    Pd* pd = nullptr;
    Cq* cq = nullptr;
    Qp* qp = nullptr;
    make_endpoint(a_, static_cast<uint32_t>((i + 1) % 2), pd, cq, qp);
    std::vector<uint8_t> buf(kSize * 64);
    const uint8_t tag = static_cast<uint8_t>(0x40 + i);
    Mr* mr = nullptr;
    ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
    ASSERT_EQ(
        mr->register_mr(buf.data(), buf.size(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE, nullptr, nullptr),
        STATUS_SUCCESS);
    Connector* conn = nullptr;
    ASSERT_EQ(create_connector(*a_.adapter, nullptr, nullptr, &conn), STATUS_SUCCESS);
    Async c, cc;
    ASSERT_EQ(conn->connect(qp, addr_a(0), addr_b(kPort), 1, 1, nullptr, 0, &Async::request, &c),
              STATUS_PENDING);
    ASSERT_TRUE(c.wait());
    ASSERT_EQ(c.status.load(), STATUS_SUCCESS);
    EXPECT_EQ(c.thread, control_id_);
    ASSERT_EQ(conn->complete_connect_ex(nullptr, nullptr, &Async::request, &cc), STATUS_PENDING);
    ASSERT_TRUE(cc.wait());
    ASSERT_EQ(cc.status.load(), STATUS_SUCCESS);
    uint32_t posted = 0, done = 0, resizes = 0;
    Async rs;
    rs.count = 1;
    NdkResultEx r[16];
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (done < kMessages && std::chrono::steady_clock::now() < deadline) {
      while (posted < kMessages && posted - done < 32) {
        uint8_t* p = buf.data() + (posted % 64) * kSize;
        p[0] = tag;
        p[kSize - 1] = static_cast<uint8_t>(tag + posted);
        NdkSge s{p, kSize, mr->get_local_token()};
        ASSERT_EQ(qp->send(nullptr, &s, 1, 0), STATUS_SUCCESS);
        ++posted;
      }
      const uint32_t n = cq->get_results_ex(r, 16);
      for (uint32_t k = 0; k < n; ++k) EXPECT_EQ(r[k].status, STATUS_SUCCESS);
      done += n;
      if (rs.count.load(std::memory_order_acquire) != 0 && resizes < 10) {
        rs.count = 0;
        ASSERT_EQ(cq->resize(resizes % 2 == 0 ? 1024 : 512, &Async::request, &rs), STATUS_PENDING);
        ++resizes;
      }
      if (n == 0) std::this_thread::yield();
    }
    EXPECT_EQ(done, kMessages);
    ASSERT_TRUE(rs.wait());
    Async d;
    ASSERT_EQ(conn->disconnect(&Async::request, &d), STATUS_PENDING);
    ASSERT_TRUE(d.wait());
    EXPECT_EQ(d.status.load(), STATUS_SUCCESS);
    close_all(conn, qp, cq, mr, pd);
    if (::testing::Test::HasFailure()) failures.fetch_add(1);
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kPairs; ++i) {
    threads.emplace_back(passive, i);
    threads.emplace_back(active, i);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(in.thread, control_id_) << "ConnectEvent on the control thread";
  // The listener closes from a consumer thread too.
  std::thread closer([&] { EXPECT_EQ(l->close(nullptr, nullptr), STATUS_SUCCESS); });
  closer.join();
  stop_pump();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace rocedp::test
