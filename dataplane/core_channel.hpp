#pragma once
// The control <-> polling-lcore channel: one single-producer/single-consumer rte_ring carries
// requests from control to one lcore, a second one brings them back as completions (CONVENTIONS.md
// items 2-4, after Seastar's smp queues). Nothing else crosses between the control thread and a
// core's state.
//
// Threads:
//   - control thread: alloc(), call(), post(), poll_completions(), free(). It is the only producer
//     of the request ring and the only consumer of the completion ring.
//   - the owning polling lcore: process_requests_st(). Only consumer of requests, only producer of
//     completions.
// Messages come from a preallocated freelist owned by control ("the creator frees"): the core never
// frees a message, it hands it back on the completion ring, and control returns it to the freelist
// after running the completion callback. The completion ring holds as many entries as there are
// messages, so handing a message back can never fail.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "dataplane/neighbour_cache.hpp"
#include "rocedp/status.hpp"

struct rte_mbuf;
struct rte_ring;

namespace rocedp::pmd {
class ControlWake;
class Port;
}  // namespace rocedp::pmd

namespace rocedp::rc {
class CompletionQueue;
class SharedReceiveQueue;
struct QpConnectParams;
struct QpCreateParams;
}  // namespace rocedp::rc

namespace rocedp::dataplane {

class CoreRdma;
struct CoreStats;
struct QpRow;
struct EngineRow;

// ---- requests: what a message carries to the core, one small struct per kind ----
// Pointers name objects the sender keeps alive until the completion has run.

/// No argument (stop, barriers).
struct NoArgs {};
/// Poll queue `queue` of `port` from now on.
struct PortAttach {
  pmd::Port* port = nullptr;
  uint16_t queue = 0;
};
/// Stop polling port `port_id`.
struct PortDetach {
  uint16_t port_id = 0;
};
/// Copy the core's counters into `out`.
struct StatsSnapshot {
  CoreStats* out = nullptr;
};
/// Send `frame` (the core's from now on) on `port_id`.
struct FrameTransmit {
  uint16_t port_id = 0;
  rte_mbuf* frame = nullptr;
};
// NeighbourUpdate (dataplane/neighbour_cache.hpp): one neighbour-table change.
/// A request to the RDMA objects of the core (install, uninstall).
struct RdmaTarget {
  CoreRdma* rdma = nullptr;
};
/// Attach or detach a CQ to the core's RDMA objects.
struct CqTarget {
  CoreRdma* rdma = nullptr;
  rc::CompletionQueue* cq = nullptr;
};
/// Resize a CQ of the core.
struct CqResize {
  rc::CompletionQueue* cq = nullptr;
  uint32_t depth = 0;
};
/// Create a QP in the core's engine; the answer carries a QpCreated.
struct QpCreate {
  CoreRdma* rdma = nullptr;
  const rc::QpCreateParams* params = nullptr;
};
/// Move QP `qpn` to RTR and RTS.
struct QpConnect {
  CoreRdma* rdma = nullptr;
  uint32_t qpn = 0;
  const rc::QpConnectParams* params = nullptr;
};
/// A request about one QP of the core (flush, close, probe).
struct QpTarget {
  CoreRdma* rdma = nullptr;
  uint32_t qpn = 0;
};
/// Modify an SRQ of the core.
struct SrqModify {
  rc::SharedReceiveQueue* srq = nullptr;
  uint32_t depth = 0;
  uint32_t threshold = 0;
};
/// Append a row per QP of the core's engine to `out`, and copy the engine's counters to `engine`.
struct QpTableRead {
  CoreRdma* rdma = nullptr;
  std::vector<QpRow>* out = nullptr;
  EngineRow* engine = nullptr;
};

// ---- results: one type for every answer ----

/// The QPN a QpCreate got.
struct QpCreated {
  uint32_t qpn = 0;
};
/// What a QP probe found: whether the transport gave up (retries exhausted, IBTA §9.7.5.1.2)
/// without a flush having been asked for.
struct QpHealth {
  bool transport_failed = false;
  /// The peer's packets have reached the QP: its responder executed a request, or its requester
  /// got an answer (a passive side whose RTU was lost takes that as the RTU, IBTA §12.9.7.1).
  bool heard_from_peer = false;
};

/// What a core answers: a status and, for the requests that return something, a typed value.
/// The status is an NTSTATUS for every request, so one completion callback can read any answer.
struct CoreResult {
  NTSTATUS status = STATUS_SUCCESS;
  std::variant<std::monostate, QpCreated, QpHealth> value;

  bool ok() const { return status == STATUS_SUCCESS; }
  /// The value if the core set one of type T, else null.
  template <typename T>
  const T* get() const {
    return std::get_if<T>(&value);
  }
};

/// A request with the function the core runs for it. The function's type follows the
/// request's, so a handler cannot read a request of another kind.
template <typename Request>
struct CoreCall {
  /// Runs on the owning polling lcore; `core` is the context given to process_requests_st()
  /// (the PollingCore). Fills `result`. Must not block: the core's pollers wait while it runs.
  using RunFn = void (*)(const Request& request, CoreResult& result, void* core);
  RunFn run = nullptr;
  Request request{};
};

/// Every request a core can be sent. Fixed size: messages live in the channel's freelist and
/// nothing is allocated to send one.
using CoreRequest =
    std::variant<CoreCall<NoArgs>, CoreCall<PortAttach>, CoreCall<PortDetach>,
                 CoreCall<StatsSnapshot>, CoreCall<FrameTransmit>, CoreCall<NeighbourUpdate>,
                 CoreCall<RdmaTarget>, CoreCall<CqTarget>, CoreCall<CqResize>, CoreCall<QpCreate>,
                 CoreCall<QpConnect>, CoreCall<QpTarget>, CoreCall<SrqModify>,
                 CoreCall<QpTableRead>>;

/// One request to a polling core and, on the way back, its completion.
struct CoreMessage {
  /// Runs on the control thread when the core has answered; `msg` is freed right after it returns.
  using DoneFn = void (*)(const CoreMessage& msg);

  CoreRequest request;
  DoneFn done = nullptr;     // may be null: nothing to do on completion
  void* done_ctx = nullptr;  // completion context, owned by the sender
  CoreResult result;         // set by the request's run function

  /// On the owning lcore: runs the request's function, which fills `result`.
  void run_st(void* core) {
    std::visit(
        [this, core](const auto& call) {
          if (call.run != nullptr) call.run(call.request, result, core);
        },
        request);
  }
};
static_assert(sizeof(CoreMessage) <= 128, "a core message stays small and fixed-size");
static_assert(std::is_trivially_copyable_v<CoreMessage>, "messages are recycled by plain copy");

/// The ring pair between the control thread and one polling lcore.
class CoreChannel {
 public:
  /// Creates both rings (SP/SC, exactly `capacity` entries each) and `capacity` messages.
  /// Returns null and sets *error when the rings cannot be created (EAL not up, no memory).
  static std::unique_ptr<CoreChannel> create(uint16_t core_index, uint32_t capacity,
                                             std::string* error);
  ~CoreChannel();
  CoreChannel(const CoreChannel&) = delete;
  CoreChannel& operator=(const CoreChannel&) = delete;

  // ---- control thread ----
  /// A clean message from the freelist, or null when every message is in flight.
  CoreMessage* alloc();
  /// Returns a message that was allocated but never posted.
  void free(CoreMessage* msg);
  /// Enqueues a request; false (message still the caller's) if the request ring is full.
  bool post(CoreMessage* msg);
  /// alloc() + fill + post(): `run(request, result, core)` on the core, then `done(msg)` here.
  /// False when no message is free or the request ring is full (nothing was sent).
  template <typename Request>
  bool call(typename CoreCall<Request>::RunFn run, const Request& request, CoreMessage::DoneFn done,
            void* done_ctx) {
    CoreMessage* msg = alloc();
    if (msg == nullptr) return false;
    msg->request.emplace<CoreCall<Request>>(CoreCall<Request>{run, request});
    msg->done = done;
    msg->done_ctx = done_ctx;
    if (!post(msg)) {
      free(msg);
      return false;
    }
    return true;
  }
  /// Dequeues at most `max` completions, runs their callbacks in order, frees the messages.
  /// Returns how many completions were handled.
  unsigned poll_completions(unsigned max);
  /// Messages posted whose completion has not been handled yet.
  uint32_t in_flight() const { return capacity_ - static_cast<uint32_t>(free_.size()); }
  uint32_t capacity() const { return capacity_; }
  uint16_t core_index() const { return core_index_; }
  /// Control side: the core wakes `wake` after it handed back completions (null: nobody to wake).
  /// Any time; `wake` must outlive the core's use of this channel.
  void set_control_wake(pmd::ControlWake* wake) { wake_.store(wake, std::memory_order_release); }

  // ---- owning polling lcore ----
  /// Runs at most `max` pending requests (bounded, so control traffic never starves the pollers,
  /// CONVENTIONS.md item 3) and hands each back on the completion ring. Returns how many ran.
  unsigned process_requests_st(void* core, unsigned max);

 private:
  CoreChannel(uint16_t core_index, uint32_t capacity, rte_ring* requests, rte_ring* completions);

  uint16_t core_index_;
  uint32_t capacity_;
  rte_ring* requests_;
  rte_ring* completions_;
  std::atomic<pmd::ControlWake*> wake_{nullptr};
  std::vector<CoreMessage> messages_;
  std::vector<CoreMessage*>
      free_;  // LIFO: the most recently used (cache-warm) message goes out first
};

}  // namespace rocedp::dataplane
