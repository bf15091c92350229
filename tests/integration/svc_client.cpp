// A client of rocedpd's built-in services, for daemon_services.sh: its own runtime (EAL, memif
// client port, polling core, control thread, adapter with a connection manager) connects through
// the IB CM to the daemon's echo and memory listeners and checks the bytes:
//   echo:   SENDs of 1, 1000 and 4096 bytes come back byte-exact;
//   memory: the Accept private data announces the region (MemoryServiceInfo); 64 KiB written
//           into it with RDMA WRITE and read back with RDMA READ are the same;
//   then on the echo connection an RDMA WRITE with immediate of 8 KiB (twice the echo's buffer)
//           into the memory region, which shares the echo's PD: it consumes an echo receive, and
//           nothing comes back for it (its bytes are not in the echo's buffer); the next SEND
//           is echoed as before.
// Then it prints READY, waits until --hold FILE exists (the script looks at the daemon's
// telemetry meanwhile), disconnects and exits 0 if every check passed.
//
//   svc_client --config CLIENT.yaml --server IP --echo-port N --memory-port N --hold FILE

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "control/runtime.hpp"
#include "control/services.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"

namespace {

using namespace rocedp;
using control::Runtime;

int g_failures = 0;
#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      std::fprintf(stderr, "CHECK failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                 \
      std::fprintf(stderr, "\n");                        \
      ++g_failures;                                      \
    }                                                    \
  } while (0)

struct Done {
  std::atomic<bool> done{false};
  std::atomic<NTSTATUS> status{STATUS_PENDING};
  NdkObjectHeader* object = nullptr;
  static void request(void* c, NTSTATUS s) {
    auto* d = static_cast<Done*>(c);
    d->status = s;
    d->done = true;
  }
  static void create(void* c, NTSTATUS s, NdkObjectHeader* o) {
    auto* d = static_cast<Done*>(c);
    d->object = o;
    d->status = s;
    d->done = true;
  }
  static void closed(void* c) { static_cast<Done*>(c)->done = true; }
};

constexpr auto kWait = std::chrono::seconds(10);

/// One connection: CQ + QP on core 0, a registered buffer, a connector.
struct Link {
  Runtime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;
  Connector* conn = nullptr;
  std::vector<uint8_t> buf;

  bool open(Pd* p, size_t bytes) {
    pd = p;
    buf.assign(bytes, 0);
    Done cqd, qpd;
    NTSTATUS st = STATUS_SUCCESS;
    rt->run_on_control(
        [&] { st = rt->adapter()->create_cq(256, nullptr, nullptr, 0, &Done::create, &cqd, &cq); });
    if (st != STATUS_PENDING || !rt->wait_until([&] { return cqd.done.load(); }, kWait) ||
        cqd.status != STATUS_SUCCESS) {
      std::fprintf(stderr, "CreateCq: %s\n",
                   status_name(st == STATUS_PENDING ? cqd.status.load() : st).data());
      return false;
    }
    cq = ndk_object_cast<Cq>(cqd.object);
    rt->run_on_control([&] {
      st = pd->create_qp(cq, cq, this, 64, 64, 1, 1, 0, &Done::create, &qpd, &qp);
      if (st == STATUS_PENDING) {
        const NTSTATUS m = pd->create_mr(false, nullptr, nullptr, &mr);
        if (m == STATUS_SUCCESS)
          mr->register_mr(buf.data(), buf.size(),
                          NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK, nullptr,
                          nullptr);
      }
    });
    if (st != STATUS_PENDING || !rt->wait_until([&] { return qpd.done.load(); }, kWait) ||
        qpd.status != STATUS_SUCCESS || mr == nullptr || mr->get_local_token() == 0) {
      std::fprintf(stderr, "CreateQp/RegisterMr failed\n");
      return false;
    }
    qp = ndk_object_cast<Qp>(qpd.object);
    return true;
  }

  /// Connect + CompleteConnect; `private_data` gets the REP private data.
  bool connect(uint32_t ip, uint16_t port, std::vector<uint8_t>* private_data) {
    Done connected, completed;
    NTSTATUS st = STATUS_SUCCESS;
    rt->run_on_control([&] {
      st = create_connector(*rt->adapter(), nullptr, nullptr, &conn);
      if (st == STATUS_SUCCESS)
        st = conn->connect(qp, NdkSockAddr{0, 0}, NdkSockAddr{ip, port}, 4, 4, nullptr, 0,
                           &Done::request, &connected);
    });
    if (st != STATUS_PENDING || !rt->wait_until([&] { return connected.done.load(); }, kWait) ||
        connected.status != STATUS_SUCCESS) {
      std::fprintf(stderr, "Connect to port %u: %s\n", port,
                   status_name(st == STATUS_PENDING ? connected.status.load() : st).data());
      return false;
    }
    rt->run_on_control([&] {
      if (private_data != nullptr) {
        uint32_t len = 0;
        conn->get_connection_data(nullptr, nullptr, nullptr, &len);
        private_data->assign(len, 0);
        conn->get_connection_data(nullptr, nullptr, private_data->data(), &len);
      }
      st = conn->complete_connect_ex(nullptr, nullptr, &Done::request, &completed);
    });
    if (st != STATUS_PENDING || !rt->wait_until([&] { return completed.done.load(); }, kWait) ||
        completed.status != STATUS_SUCCESS) {
      std::fprintf(stderr, "CompleteConnect: %s\n",
                   status_name(st == STATUS_PENDING ? completed.status.load() : st).data());
      return false;
    }
    return true;
  }

  std::vector<NdkResultEx> results(size_t n) {
    std::vector<NdkResultEx> out;
    NdkResultEx r[16];
    rt->wait_until(
        [&] {
          for (uint32_t k; (k = cq->get_results_ex(r, 16)) != 0;) out.insert(out.end(), r, r + k);
          return out.size() >= n;
        },
        kWait);
    return out;
  }
  NdkSge sge(size_t off, uint32_t len) {
    return NdkSge{buf.data() + off, len, mr->get_local_token()};
  }

  void close() {
    if (conn != nullptr) {
      Done d;
      NTSTATUS st = STATUS_SUCCESS;
      rt->run_on_control([&] { st = conn->disconnect(&Done::request, &d); });
      if (st == STATUS_PENDING) rt->wait_until([&] { return d.done.load(); }, kWait);
      CHECK(st == STATUS_PENDING ? d.status == STATUS_SUCCESS : st == STATUS_SUCCESS, "Disconnect");
      rt->run_on_control([&] { conn->close(nullptr, nullptr); });
    }
    if (qp != nullptr) {
      Done d;
      rt->run_on_control([&] { qp->close(&Done::closed, &d); });
      rt->wait_until([&] { return d.done.load(); }, kWait);
    }
    if (cq != nullptr) {
      Done d;
      rt->run_on_control([&] { cq->close(&Done::closed, &d); });
      rt->wait_until([&] { return d.done.load(); }, kWait);
    }
    if (mr != nullptr) {
      Done d;
      NTSTATUS st = STATUS_SUCCESS;
      rt->run_on_control([&] { st = mr->close(&Done::closed, &d); });
      if (st == STATUS_PENDING) rt->wait_until([&] { return d.done.load(); }, kWait);
    }
  }
};

void fill(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
}

void echo_checks(Link& e) {
  // Receives first (into the upper half), then one SEND per size; each comes back as a SEND.
  const uint32_t sizes[] = {1, 1000, 4096};
  uint32_t seed = 1;
  for (uint32_t size : sizes) {
    NdkSge rs = e.sge(8192, 4096);
    CHECK(e.qp->receive(reinterpret_cast<void*>(uintptr_t{2}), &rs, 1) == STATUS_SUCCESS,
          "receive");
    std::memset(e.buf.data() + 8192, 0, 4096);
    fill(e.buf.data(), size, seed++);
    NdkSge ss = e.sge(0, size);
    CHECK(e.qp->send(reinterpret_cast<void*>(uintptr_t{1}), &ss, 1, 0) == STATUS_SUCCESS, "send");
    auto r = e.results(2);
    CHECK(r.size() == 2, "echo of %u bytes: %zu completions", size, r.size());
    for (auto& x : r) {
      CHECK(x.status == STATUS_SUCCESS, "echo completion status %s", status_name(x.status).data());
      if (x.request_context == reinterpret_cast<void*>(uintptr_t{2}))
        CHECK(x.bytes_transferred == size, "echo came back with %u bytes, sent %u",
              x.bytes_transferred, size);
    }
    CHECK(std::memcmp(e.buf.data(), e.buf.data() + 8192, size) == 0, "echo of %u bytes differs",
          size);
    std::printf("echo %u bytes: ok\n", size);
  }
}

void memory_checks(Link& m, const std::vector<uint8_t>& pd) {
  rocedp::MemoryServiceInfo info;
  const bool ok = rocedp::MemoryServiceInfo::decode(pd.data(), pd.size(), &info);
  CHECK(ok, "Accept private data is not a MemoryServiceInfo (%zu bytes)", pd.size());
  if (!ok) return;
  CHECK(info.length >= 65536, "region of %llu bytes", static_cast<unsigned long long>(info.length));
  CHECK(info.flags == 3, "flags %u", info.flags);
  std::printf("memory region: %llu bytes, token 0x%x\n",
              static_cast<unsigned long long>(info.length), info.token);
  constexpr uint32_t kLen = 65536;
  fill(m.buf.data(), kLen, 42);
  std::memset(m.buf.data() + kLen, 0, kLen);
  NdkSge ws = m.sge(0, kLen);
  CHECK(m.qp->write(reinterpret_cast<void*>(uintptr_t{1}), &ws, 1, info.address, info.token, 0) ==
            STATUS_SUCCESS,
        "write");
  NdkSge rs = m.sge(kLen, kLen);
  CHECK(m.qp->read(reinterpret_cast<void*>(uintptr_t{2}), &rs, 1, info.address, info.token, 0) ==
            STATUS_SUCCESS,
        "read");
  auto r = m.results(2);
  CHECK(r.size() == 2, "write+read: %zu completions", r.size());
  for (auto& x : r)
    CHECK(x.status == STATUS_SUCCESS, "write/read status %s", status_name(x.status).data());
  CHECK(std::memcmp(m.buf.data(), m.buf.data() + kLen, kLen) == 0,
        "READ did not return what WRITE stored");
  std::printf("memory write+read %u bytes: ok\n", kLen);
}

void write_with_immediate_check(Link& e, const std::vector<uint8_t>& pd) {
  rocedp::MemoryServiceInfo info;
  if (!rocedp::MemoryServiceInfo::decode(pd.data(), pd.size(), &info)) return;
  constexpr uint32_t kWrite = 8192;  // the echo's buffers hold 4096
  NdkSge ws = e.sge(0, kWrite);
  CHECK(e.qp->write_with_immediate(reinterpret_cast<void*>(uintptr_t{3}), &ws, 1, info.address,
                                   info.token, 0x1234, 0) == STATUS_SUCCESS,
        "write with immediate");
  auto w = e.results(1);
  CHECK(w.size() == 1 && w[0].status == STATUS_SUCCESS, "write with immediate completed");
  // A receive for whatever comes back, then a SEND: only its echo may arrive.
  NdkSge rs = e.sge(8192, 4096);
  CHECK(e.qp->receive(reinterpret_cast<void*>(uintptr_t{2}), &rs, 1) == STATUS_SUCCESS, "receive");
  std::memset(e.buf.data() + 8192, 0, 4096);
  fill(e.buf.data(), 100, 9);
  NdkSge ss = e.sge(0, 100);
  CHECK(e.qp->send(reinterpret_cast<void*>(uintptr_t{1}), &ss, 1, 0) == STATUS_SUCCESS, "send");
  auto r = e.results(2);
  CHECK(r.size() == 2, "send after the write: %zu completions", r.size());
  for (auto& x : r) {
    CHECK(x.status == STATUS_SUCCESS, "completion status %s", status_name(x.status).data());
    if (x.request_context == reinterpret_cast<void*>(uintptr_t{2}))
      CHECK(x.bytes_transferred == 100, "echo of %u bytes, expected the SEND's 100",
            x.bytes_transferred);
  }
  CHECK(std::memcmp(e.buf.data(), e.buf.data() + 8192, 100) == 0, "echo after the write differs");
  std::printf("write with immediate on the echo connection: nothing echoed for it, ok\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, hold;
  uint32_t server = 0;
  uint16_t echo_port = 0, memory_port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--config")
      config_path = v;
    else if (a == "--server")
      server = config::parse_ipv4(v).value_or(config::Ipv4Address{}).value;
    else if (a == "--echo-port")
      echo_port = static_cast<uint16_t>(std::stoi(v));
    else if (a == "--memory-port")
      memory_port = static_cast<uint16_t>(std::stoi(v));
    else if (a == "--hold")
      hold = v;
  }
  if (config_path.empty() || server == 0 || echo_port == 0 || memory_port == 0) {
    std::fprintf(
        stderr,
        "usage: svc_client --config F --server IP --echo-port N --memory-port N [--hold FILE]\n");
    return 2;
  }
  config::Config cfg;
  try {
    cfg = config::load_file(config_path);
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  control::RuntimeOptions o;
  o.program = "svc_client";
  o.open_adapter = o.connection_manager = true;
  std::string error;
  auto rt = Runtime::start(cfg, o, &error);
  if (!rt) {
    std::fprintf(stderr, "runtime: %s\n", error.c_str());
    return 1;
  }
  Pd* pd = nullptr;
  rt->run_on_control([&] { rt->adapter()->create_pd(nullptr, nullptr, &pd); });
  Link echo, memory;
  echo.rt = memory.rt = rt.get();
  std::vector<uint8_t> mem_pd;
  bool up = pd != nullptr && echo.open(pd, 16384) && memory.open(pd, 131072);
  // The memif link comes up asynchronously: the first REQs may be lost, the CM retries them.
  if (up) up = echo.connect(server, echo_port, nullptr);
  if (up) up = memory.connect(server, memory_port, &mem_pd);
  CHECK(up, "connections set up");
  if (up) {
    echo_checks(echo);
    memory_checks(memory, mem_pd);
    write_with_immediate_check(echo, mem_pd);
    std::printf("READY\n");
    std::fflush(stdout);
    for (int i = 0; i < 300 && !hold.empty() && !std::filesystem::exists(hold); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  echo.close();
  memory.close();
  if (pd != nullptr) rt->run_on_control([&] { pd->close(nullptr, nullptr); });
  CHECK(rt->stop(), "runtime stop");
  std::printf("%s (%d failed checks)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}
