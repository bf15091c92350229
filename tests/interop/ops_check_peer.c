// ops_check_peer: the Linux side of the ops check, run inside the rig's guest (libibverbs and
// librdmacm over rdma_rxe). The other side is `rocedp-perf --ops-check`; either may be the server.
// The check covers the verbs that no Linux example tool sends: SEND and RDMA WRITE with immediate
// data, an RDMA WRITE through a memory window, SEND with Invalidate of that window, and an RDMA
// WRITE through the invalidated window, which the server must refuse.
//
// The script (apps/perf/ops_check_mode.hpp describes the same one):
//   server: registers a 64 KiB buffer, posts 5 receives of 4 KiB (slots 0..4), accepts on port
//     -p (rdma_cm), arms its CQ for solicited completions, binds a memory window over [24 KiB,
//     28 KiB) for remote READ and WRITE, then SENDs 24 bytes, big-endian: the WRITE target's
//     address (16 KiB in) and the region's rkey, the window's address and the window's rkey.
//   client: after those 24 bytes, one operation at a time, each awaited:
//     1. SEND with immediate 0x5EED0001, 3000 bytes of pattern 1
//     2. RDMA WRITE with immediate 0x5EED0002, 3000 bytes of pattern 2 to the target
//     3. RDMA WRITE, 512 bytes of pattern 3 through the window, then an RDMA READ of them back
//        through the window (the client checks what it read)
//     4. after the server's go-ahead (a 4-byte SEND, once it saw receive 2 raise no CQ event),
//        SEND with the solicited event bit, 64 bytes of pattern 6; then it waits for a second
//        go-ahead (the server saw the event)
//     5. SEND with Invalidate of the window's rkey, 64 bytes of pattern 4
//     6. RDMA WRITE, 64 bytes of pattern 5 through the invalidated window: must fail with a
//        remote access error
//   server: receive 1 carries the immediate and the bytes; receive 2 (the WRITE's) the immediate,
//     the target the bytes; neither raises a CQ event, receive 3 (solicited) does; receive 4 names
//     the window's rkey as invalidated, and the window holds pattern 3; after the refused WRITE the
//     window still holds pattern 3 (the fifth receive is flushed or the peer disconnects).
// Pattern k, byte i: (k * 37 + i * 13 + (i >> 8)) & 0xff.
//   ops_check_peer -s [-p PORT] [-l]   (-l: the second go-ahead may end flushed, see run_server)
//   ops_check_peer -c -a ADDR [-p PORT] [-l]   (-l: a lossy link, see g_lossy)
//   ops_check_peer -M -a ADDR -p PORT [-w MS]  a client of rocedpd's memory service instead
//                                              (run_memory_client; -w: idle MS before its last
//                                              step, while the service's keepalives arrive)
// A client's ADDR may be IPv4 or IPv6.
// Exit status 0: every check held; 1: one failed (printed); 2: usage.

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_peer.h"

enum {
  kBufLen = 65536,
  kSlot = 4096,
  kTargetAt = 16384,
  kWindowAt = 24576,
  kWindowLen = 4096,
  kInfoAt = 32768,
  kInfoLen = 24,
  kSourceAt = 36864,
  kBigLen = 3000,
  kWindowWriteLen = 512,
  kSmallLen = 64,
  kGoLen = 4,
  kServerRecvs = 5,
};
static const uint32_t kImm1 = 0x5EED0001u, kImm2 = 0x5EED0002u;

// -l, on a lossy link: the server's NAK ends its QP, so a lost NAK is never sent again and the
// refused WRITE may run out of retries instead.
static int g_lossy;
static int g_hold_ms;  // -M: idle this long before the last step

static uint8_t pattern(unsigned k, unsigned i) {
  return (uint8_t)(k * 37 + i * 13 + (i >> 8));
}
static void fill(uint8_t* p, unsigned k, unsigned len) {
  for (unsigned i = 0; i < len; ++i) p[i] = pattern(k, i);
}
// Readies a step's source buffer: zeroes for a READ (which must bring pattern k back), else the
// pattern to send. True for a READ.
static int stage_source(uint8_t* src, enum ibv_wr_opcode op, unsigned k, unsigned len) {
  if (op == IBV_WR_RDMA_READ) {
    memset(src, 0, len);
    return 1;
  }
  fill(src, k, len);
  return 0;
}
static int holds(const uint8_t* p, unsigned k, unsigned len) {
  for (unsigned i = 0; i < len; ++i)
    if (p[i] != pattern(k, i)) return 0;
  return 1;
}
static void put_be64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = (uint8_t)v;
}
static void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = (uint8_t)v;
}
static uint64_t get_be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

struct Peer {
  struct rdma_event_channel* ec;
  struct rdma_cm_id* listen_id;
  struct rdma_cm_id* id;
  struct ibv_pd* pd;
  struct ibv_comp_channel* channel;  // the server's CQ events
  struct ibv_cq* cq;
  struct ibv_mr* mr;
  struct ibv_mw* mw;
  uint8_t* buf;
  int disconnected;
  uint8_t conn_data[64];  // the private data of the last ESTABLISHED event (the REP's, as client)
};

// The next CM event of `want`, within the time limit; any other event fails (a DISCONNECTED
// is remembered).
static int wait_event(struct Peer* p, enum rdma_cm_event_type want, struct rdma_cm_id** id_out) {
  for (;;) {
    struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
    const int left_ms = (int)((g_timeout_s - elapsed()) * 1000);
    if (left_ms <= 0 || poll(&pfd, 1, left_ms) <= 0)
      return fail("time limit reached waiting for a CM event");
    struct rdma_cm_event* ev = NULL;
    if (rdma_get_cm_event(p->ec, &ev) != 0) return fail("rdma_get_cm_event");
    const enum rdma_cm_event_type got = ev->event;
    struct rdma_cm_id* id = ev->id;
    if (got == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data != NULL) {
      const size_t n = ev->param.conn.private_data_len < sizeof p->conn_data
                           ? ev->param.conn.private_data_len
                           : sizeof p->conn_data;
      memcpy(p->conn_data, ev->param.conn.private_data, n);
    }
    rdma_ack_cm_event(ev);
    if (got == want) {
      if (id_out != NULL) *id_out = id;
      return 1;
    }
    if (got == RDMA_CM_EVENT_DISCONNECTED) {
      p->disconnected = 1;
      continue;
    }
    fprintf(stderr, "ops_check_peer: CM event %s while waiting for %s\n", rdma_event_str(got),
            rdma_event_str(want));
    return 0;
  }
}

// Receives carry wr_id below kSendIds, send-queue requests from it: the two queues complete in no
// fixed order between them (a peer's answer may come before the ACK), and an error completion's
// opcode is not valid, so the wr_id tells them apart.
enum { kSendIds = 100 };
static struct ibv_wc g_pending[32];
static int g_npending;

// The next completion of the receive queue or of the send queue (polling, with short naps: the
// guest has little CPU), within the time limit.
static int next_wc(struct Peer* p, int receive, struct ibv_wc* wc) {
  for (;;) {
    for (int i = 0; i < g_npending; ++i) {
      if ((g_pending[i].wr_id < kSendIds) == (receive != 0)) {
        *wc = g_pending[i];
        memmove(&g_pending[i], &g_pending[i + 1], (size_t)(g_npending - i - 1) * sizeof *wc);
        --g_npending;
        return 1;
      }
    }
    if (g_npending == (int)(sizeof g_pending / sizeof g_pending[0]))
      return fail("completion backlog");
    const int n = ibv_poll_cq(p->cq, 1, &g_pending[g_npending]);
    if (n < 0) return fail("ibv_poll_cq");
    if (n == 1) {
      ++g_npending;
      continue;
    }
    if (elapsed() > g_timeout_s) return fail("time limit reached waiting for a completion");
    usleep(200);
  }
}

static int post_recv(struct Peer* p, unsigned slot, unsigned offset, unsigned len) {
  struct ibv_sge sge = {.addr = (uintptr_t)(p->buf + offset), .length = len, .lkey = p->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
  return ibv_post_recv(p->id->qp, &wr, &bad) == 0 || fail("ibv_post_recv");
}

// Posts one send-queue request and awaits its completion; its status in *status.
static int post_and_wait(struct Peer* p, struct ibv_send_wr* wr, enum ibv_wc_status* status) {
  struct ibv_send_wr* bad = NULL;
  wr->send_flags |= IBV_SEND_SIGNALED;
  if (ibv_post_send(p->id->qp, wr, &bad) != 0) return fail("ibv_post_send");
  struct ibv_wc wc;
  if (!next_wc(p, 0, &wc)) return 0;
  *status = wc.status;
  return 1;
}

static int make_objects(struct Peer* p, struct rdma_cm_id* id, unsigned recv_depth) {
  p->id = id;
  p->pd = ibv_alloc_pd(id->verbs);
  p->channel = ibv_create_comp_channel(id->verbs);
  p->cq = p->pd && p->channel ? ibv_create_cq(id->verbs, 32, NULL, p->channel, 0) : NULL;
  if (p->cq == NULL) return fail("ibv_alloc_pd / ibv_create_cq");
  struct ibv_qp_init_attr qa = {
      .send_cq = p->cq,
      .recv_cq = p->cq,
      .cap = {.max_send_wr = 16, .max_recv_wr = recv_depth, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  if (rdma_create_qp(id, p->pd, &qa) != 0) return fail("rdma_create_qp");
  p->buf = calloc(1, kBufLen);
  p->mr = ibv_reg_mr(p->pd, p->buf, kBufLen,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_MW_BIND);
  return p->mr != NULL || fail("ibv_reg_mr");
}

// retry_count 6, not 7: rdma_rxe takes 7 for "retry forever" (as 7 means for RNR retries), so a
// refused WRITE whose NAK was lost (-l) would be sent again for ever, the responder's QP being in
// error and silent; with 6 it ends in IBV_WC_RETRY_EXC_ERR (seen in CI under interop_chaos).
static struct rdma_conn_param conn_param(void) {
  struct rdma_conn_param c = {
      .responder_resources = 1, .initiator_depth = 1, .retry_count = 6, .rnr_retry_count = 7};
  return c;
}

static int run_server(struct Peer* p, uint16_t port) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (rdma_create_id(p->ec, &p->listen_id, NULL, RDMA_PS_TCP) != 0 ||
      rdma_bind_addr(p->listen_id, (struct sockaddr*)&sin) != 0 ||
      rdma_listen(p->listen_id, 1) != 0)
    return fail("listen");
  printf("ops_check_peer: listening on port %u\n", port);
  fflush(stdout);
  struct rdma_cm_id* id = NULL;
  if (!wait_event(p, RDMA_CM_EVENT_CONNECT_REQUEST, &id) || !make_objects(p, id, kServerRecvs))
    return 0;
  for (unsigned s = 0; s < kServerRecvs; ++s)
    if (!post_recv(p, s, s * kSlot, kSlot)) return 0;
  struct rdma_conn_param c = conn_param();
  if (rdma_accept(id, &c) != 0) return fail("rdma_accept");
  if (!wait_event(p, RDMA_CM_EVENT_ESTABLISHED, NULL)) return 0;

  // The window (type 2: bound by a work request, invalidated by the peer's SEND with Invalidate).
  p->mw = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);
  if (p->mw == NULL) return fail("ibv_alloc_mw");
  const uint32_t mw_rkey = ibv_inc_rkey(p->mw->rkey);
  struct ibv_send_wr bind = {.wr_id = 100, .opcode = IBV_WR_BIND_MW};
  bind.bind_mw.mw = p->mw;
  bind.bind_mw.rkey = mw_rkey;
  bind.bind_mw.bind_info.mr = p->mr;
  bind.bind_mw.bind_info.addr = (uintptr_t)(p->buf + kWindowAt);
  bind.bind_mw.bind_info.length = kWindowLen;
  bind.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  enum ibv_wc_status st;
  if (!post_and_wait(p, &bind, &st)) return 0;
  if (st != IBV_WC_SUCCESS) return fail(ibv_wc_status_str(st));

  // Only the solicited SEND (step 4) may raise an event: the SEND and WRITE with immediate come
  // first.
  if (ibv_req_notify_cq(p->cq, 1) != 0) return fail("ibv_req_notify_cq");
  uint8_t* info = p->buf + kInfoAt;
  put_be64(info, (uintptr_t)(p->buf + kTargetAt));
  put_be32(info + 8, p->mr->rkey);
  put_be64(info + 12, (uintptr_t)(p->buf + kWindowAt));
  put_be32(info + 20, mw_rkey);
  struct ibv_sge sge = {.addr = (uintptr_t)info, .length = kInfoLen, .lkey = p->mr->lkey};
  struct ibv_send_wr send = {.wr_id = 101, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
  if (!post_and_wait(p, &send, &st)) return 0;
  if (st != IBV_WC_SUCCESS) return fail(ibv_wc_status_str(st));

  struct ibv_wc wc;
  char msg[160];
  // 1: SEND with immediate.
  if (!next_wc(p, 1, &wc)) return 0;
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
      ntohl(wc.imm_data) != kImm1 || wc.byte_len != kBigLen) {
    snprintf(msg, sizeof msg, "receive 1: status %s opcode %d flags 0x%x imm 0x%08x len %u",
             ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, ntohl(wc.imm_data), wc.byte_len);
    return fail(msg);
  }
  if (!holds(p->buf + wc.wr_id * kSlot, 1, kBigLen)) return fail("receive 1: wrong bytes");
  printf("ops_check_peer: SEND with immediate 0x%08x, %u bytes: ok\n", kImm1, kBigLen);
  // 2: RDMA WRITE with immediate.
  if (!next_wc(p, 1, &wc)) return 0;
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
      !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != kImm2) {
    snprintf(msg, sizeof msg, "receive 2: status %s opcode %d flags 0x%x imm 0x%08x len %u",
             ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, ntohl(wc.imm_data), wc.byte_len);
    return fail(msg);
  }
  if (!holds(p->buf + kTargetAt, 2, kBigLen))
    return fail("receive 2: the WRITE's target holds wrong bytes");
  printf("ops_check_peer: RDMA WRITE with immediate 0x%08x, %u bytes: ok\n", kImm2, kBigLen);
  // rdma_rxe raises an event right after it posts the completion: receives 1 and 2 would have
  // raised it by now (100 ms for the kernel to get there). The client waits for the go-ahead
  // before its solicited SEND, so nothing else can have.
  struct pollfd cq_event = {.fd = p->channel->fd, .events = POLLIN};
  if (poll(&cq_event, 1, 100) != 0) return fail("an unsolicited receive raised a CQ event");
  struct ibv_sge go_sge = {.addr = (uintptr_t)(info + 64), .length = kGoLen, .lkey = p->mr->lkey};
  struct ibv_send_wr go = {.wr_id = 102, .sg_list = &go_sge, .num_sge = 1, .opcode = IBV_WR_SEND};
  if (!post_and_wait(p, &go, &st)) return 0;
  if (st != IBV_WC_SUCCESS) return fail(ibv_wc_status_str(st));
  // 3: the solicited SEND, which raises the event.
  if (!next_wc(p, 1, &wc)) return 0;
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != kSmallLen ||
      !holds(p->buf + wc.wr_id * kSlot, 6, kSmallLen))
    return fail("receive 3 (the solicited SEND)");
  // rdma_rxe raises the event as it posts the completion. The client waits for a second go-ahead
  // before it goes on (its refused WRITE flushes a receive, an error completion, which would raise
  // the event too).
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  if (poll(&cq_event, 1, 1000) != 1 || ibv_get_cq_event(p->channel, &ev_cq, &ev_ctx) != 0 ||
      ev_cq != p->cq)
    return fail("the solicited SEND raised no CQ event");
  ibv_ack_cq_events(p->cq, 1);
  printf("ops_check_peer: solicited SEND: one CQ event, none for the two before it: ok\n");
  if (!post_and_wait(p, &go, &st)) return 0;
  // With -l, the go-ahead's ACK may be lost while the client, which got the go-ahead, goes on to
  // its refused WRITE: our NAK ends the QP and flushes the go-ahead before its ACK comes again.
  // Receive 4 below shows the client went on.
  if (st != IBV_WC_SUCCESS && !(g_lossy && st == IBV_WC_WR_FLUSH_ERR))
    return fail(ibv_wc_status_str(st));
  // 4: SEND with Invalidate, after a WRITE through the window.
  if (!next_wc(p, 1, &wc)) return 0;
  // rdma_rxe writes the kernel's IB_WC_WITH_INVALIDATE (bit 2) into the user's completion, where
  // libibverbs' own flag is bit 3 (bit 2 is its IBV_WC_IP_CSUM_OK): either says "invalidated".
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
      !(wc.wc_flags & (IBV_WC_WITH_INV | IBV_WC_IP_CSUM_OK)) || wc.invalidated_rkey != mw_rkey ||
      wc.byte_len != kSmallLen) {
    snprintf(msg, sizeof msg,
             "receive 4: status %s opcode %d flags 0x%x rkey 0x%08x (window 0x%08x) len %u",
             ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, wc.invalidated_rkey, mw_rkey,
             wc.byte_len);
    return fail(msg);
  }
  if (!holds(p->buf + wc.wr_id * kSlot, 4, kSmallLen)) return fail("receive 4: wrong bytes");
  if (!holds(p->buf + kWindowAt, 3, kWindowWriteLen))
    return fail("the window does not hold the WRITE through it");
  printf("ops_check_peer: RDMA WRITE through the window, SEND with Invalidate of 0x%08x: ok\n",
         mw_rkey);
  // 6: the WRITE through the invalidated window is refused: the QP's last receive is flushed (the
  // responder's access error ends the QP), or the peer disconnects first.
  while (!p->disconnected) {
    struct ibv_wc w;
    const int n = ibv_poll_cq(p->cq, 1, &w);
    if (n == 1 && w.wr_id < kSendIds && w.status != IBV_WC_SUCCESS) break;
    if (n == 1 && w.wr_id < kSendIds) return fail("a receive after the invalidation");
    struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
    if (poll(&pfd, 1, 1) == 1) {
      struct rdma_cm_event* ev = NULL;
      if (rdma_get_cm_event(p->ec, &ev) == 0) {
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED) p->disconnected = 1;
        rdma_ack_cm_event(ev);
      }
    }
    if (elapsed() > g_timeout_s) return fail("time limit reached waiting for the refused WRITE");
  }
  if (!holds(p->buf + kWindowAt, 3, kWindowWriteLen))
    return fail("the WRITE through the invalidated window changed it");
  printf("ops_check_peer: server: every check held\n");
  return 1;
}

// A client's step done: its completion status must be `want` (with -l, a retry timeout also
// stands for a refusal, see g_lossy), and a READ's bytes (`read_back`) pattern `pattern`.
static int check_step(const char* what, enum ibv_wc_status st, enum ibv_wc_status want,
                      const uint8_t* read_back, unsigned pattern, unsigned len) {
  char msg[128];
  if (st != want && !(g_lossy && want == IBV_WC_REM_ACCESS_ERR && st == IBV_WC_RETRY_EXC_ERR)) {
    snprintf(msg, sizeof msg, "%s: completion %s, expected %s", what, ibv_wc_status_str(st),
             ibv_wc_status_str(want));
    return fail(msg);
  }
  if (read_back != NULL && !holds(read_back, pattern, len)) {
    snprintf(msg, sizeof msg, "%s: the bytes read are not what was written", what);
    return fail(msg);
  }
  printf("ops_check_peer: %s: %s\n", what, ibv_wc_status_str(st));
  return 1;
}

// The ops client's receives, posted before it connects: the server's 24 bytes and its two
// go-aheads.
static int post_client_receives(struct Peer* p) {
  return post_recv(p, 0, kInfoAt, kSlot) && post_recv(p, 1, 0, kSlot) &&
         post_recv(p, 2, kSlot, kSlot);
}

// Connects to addr:port with `recvs` receives (posted by `post`, if any, before the connect).
// The server may not listen yet: a refused connection is tried again with a new id.
static int connect_to(struct Peer* p, const char* addr, uint16_t port, unsigned recvs,
                      int (*post)(struct Peer*)) {
  // IPv4 or IPv6 (rdma_cm then connects over the port's IPv6 GID).
  struct sockaddr_storage dst = {0};
  struct sockaddr_in* sin = (struct sockaddr_in*)&dst;
  struct sockaddr_in6* sin6 = (struct sockaddr_in6*)&dst;
  if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
  } else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
  } else {
    return fail("-a needs an IPv4 or IPv6 address");
  }
  for (int attempt = 0;; ++attempt) {
    if (rdma_create_id(p->ec, &p->id, NULL, RDMA_PS_TCP) != 0) return fail("rdma_create_id");
    if (rdma_resolve_addr(p->id, NULL, (struct sockaddr*)&dst, 2000) != 0 ||
        !wait_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) || rdma_resolve_route(p->id, 2000) != 0 ||
        !wait_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL))
      return fail("resolve");
    if (!make_objects(p, p->id, recvs) || (post != NULL && !post(p))) return 0;
    struct rdma_conn_param c = conn_param();
    if (rdma_connect(p->id, &c) != 0) return fail("rdma_connect");
    if (wait_event(p, RDMA_CM_EVENT_ESTABLISHED, NULL)) break;
    if (attempt >= 20) return fail("no connection");
    rdma_destroy_qp(p->id);
    ibv_dereg_mr(p->mr);
    ibv_destroy_cq(p->cq);
    ibv_dealloc_pd(p->pd);
    free(p->buf);
    rdma_destroy_id(p->id);
    usleep(500 * 1000);
  }
  return 1;
}

// -M: a client of rocedpd's memory service (include/rocedp/memory_service.hpp). The REP's private
// data names the region: "RMEM", version 1, flags, address, length, token (big-endian). The
// client WRITEs 3000 bytes of pattern 7 at the region's start and 3000 of pattern 8 at its end,
// READs both back and compares; then a 64-byte WRITE that runs one byte past the end must be
// refused (a remote access error): the daemon holds its peers to the region's bounds.
static int run_memory_client(struct Peer* p, const char* addr, uint16_t port) {
  if (!connect_to(p, addr, port, 1, NULL)) return 0;
  const uint8_t* info = p->conn_data;
  const uint64_t base = get_be(info + 8, 8), length = get_be(info + 16, 8);
  const uint32_t token = (uint32_t)get_be(info + 24, 4);
  printf("ops_check_peer: memory: region 0x%llx, %llu bytes, token 0x%x, flags %u\n",
         (unsigned long long)base, (unsigned long long)length, token,
         (unsigned)get_be(info + 6, 2));
  if (get_be(info, 4) != 0x524D454Du || get_be(info + 4, 2) != 1 || get_be(info + 6, 2) != 3 ||
      length < 2 * kBigLen)
    return fail(
        "the REP's private data is not a memory service's region (RMEM, version 1, "
        "READ and WRITE)");
  uint8_t* src = p->buf + kSourceAt;
  struct ibv_sge sge = {.addr = (uintptr_t)src, .lkey = p->mr->lkey};
  enum ibv_wc_status st;
  const struct {
    const char* what;
    enum ibv_wr_opcode op;
    unsigned pattern, len;
    uint64_t raddr;
    enum ibv_wc_status want;
  } steps[] = {
      {"RDMA WRITE at the start", IBV_WR_RDMA_WRITE, 7, kBigLen, base, IBV_WC_SUCCESS},
      {"RDMA WRITE at the end", IBV_WR_RDMA_WRITE, 8, kBigLen, base + length - kBigLen,
       IBV_WC_SUCCESS},
      {"RDMA READ at the start", IBV_WR_RDMA_READ, 7, kBigLen, base, IBV_WC_SUCCESS},
      {"RDMA READ at the end", IBV_WR_RDMA_READ, 8, kBigLen, base + length - kBigLen,
       IBV_WC_SUCCESS},
      {"RDMA WRITE one byte past the end", IBV_WR_RDMA_WRITE, 9, kSmallLen,
       base + length - kSmallLen + 1, IBV_WC_REM_ACCESS_ERR},
  };
  const unsigned nsteps = sizeof steps / sizeof steps[0];
  for (unsigned k = 0; k < nsteps; ++k) {
    if (k == nsteps - 1 && g_hold_ms > 0) {
      // Idle: the connection must outlive the service's keepalives (zero-length RDMA WRITEs,
      // which rxe answers in the kernel); the last step then still reaches the daemon.
      printf("ops_check_peer: memory: idle for %d ms\n", g_hold_ms);
      fflush(stdout);
      usleep((useconds_t)g_hold_ms * 1000);
    }
    const int read = stage_source(src, steps[k].op, steps[k].pattern, steps[k].len);
    sge.length = steps[k].len;
    struct ibv_send_wr wr = {
        .wr_id = kSendIds + k, .sg_list = &sge, .num_sge = 1, .opcode = steps[k].op};
    wr.wr.rdma.remote_addr = steps[k].raddr;
    wr.wr.rdma.rkey = token;
    if (!post_and_wait(p, &wr, &st) ||
        !check_step(steps[k].what, st, steps[k].want, read ? src : NULL, steps[k].pattern,
                    steps[k].len))
      return 0;
  }
  printf("ops_check_peer: memory: every check held\n");
  return 1;
}

static int run_client(struct Peer* p, const char* addr, uint16_t port) {
  if (!connect_to(p, addr, port, 3, post_client_receives)) return 0;
  struct ibv_wc wc;
  if (!next_wc(p, 1, &wc)) return 0;
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != kInfoLen)
    return fail("the server's 24-byte message");
  const uint8_t* info = p->buf + kInfoAt;
  const uint64_t target = get_be(info, 8), window = get_be(info + 12, 8);
  const uint32_t target_rkey = (uint32_t)get_be(info + 8, 4),
                 window_rkey = (uint32_t)get_be(info + 20, 4);
  uint8_t* src = p->buf + kSourceAt;
  struct ibv_sge sge = {.addr = (uintptr_t)src, .lkey = p->mr->lkey};
  enum ibv_wc_status st;
  struct {
    const char* what;
    enum ibv_wr_opcode op;
    unsigned pattern, len;
    uint64_t raddr;
    uint32_t rkey, imm_or_inv;
    enum ibv_wc_status want;
    int solicited;
  } steps[] = {
      {"SEND with immediate", IBV_WR_SEND_WITH_IMM, 1, kBigLen, 0, 0, kImm1, IBV_WC_SUCCESS, 0},
      {"RDMA WRITE with immediate", IBV_WR_RDMA_WRITE_WITH_IMM, 2, kBigLen, target, target_rkey,
       kImm2, IBV_WC_SUCCESS, 0},
      {"RDMA WRITE through the window", IBV_WR_RDMA_WRITE, 3, kWindowWriteLen, window, window_rkey,
       0, IBV_WC_SUCCESS, 0},
      {"RDMA READ through the window", IBV_WR_RDMA_READ, 3, kWindowWriteLen, window, window_rkey, 0,
       IBV_WC_SUCCESS, 0},
      {"solicited SEND", IBV_WR_SEND, 6, kSmallLen, 0, 0, 0, IBV_WC_SUCCESS, 1},
      {"SEND with Invalidate", IBV_WR_SEND_WITH_INV, 4, kSmallLen, 0, 0, window_rkey,
       IBV_WC_SUCCESS, 0},
      {"RDMA WRITE through the invalidated window", IBV_WR_RDMA_WRITE, 5, kSmallLen, window,
       window_rkey, 0, IBV_WC_REM_ACCESS_ERR, 0},
  };
  for (unsigned k = 0; k < sizeof steps / sizeof steps[0]; ++k) {
    const int read = stage_source(src, steps[k].op, steps[k].pattern, steps[k].len);
    sge.length = steps[k].len;
    struct ibv_send_wr wr = {
        .wr_id = kSendIds + k, .sg_list = &sge, .num_sge = 1, .opcode = steps[k].op};
    wr.wr.rdma.remote_addr = steps[k].raddr;
    wr.wr.rdma.rkey = steps[k].rkey;
    if (steps[k].solicited) {
      wr.send_flags = IBV_SEND_SOLICITED;
      struct ibv_wc go;
      if (!next_wc(p, 1, &go)) return 0;
      if (go.status != IBV_WC_SUCCESS || go.byte_len != kGoLen)
        return fail("the server's go-ahead");
    }
    if (steps[k].op == IBV_WR_SEND_WITH_INV)
      wr.invalidate_rkey = steps[k].imm_or_inv;
    else
      wr.imm_data = htonl(steps[k].imm_or_inv);
    if (!post_and_wait(p, &wr, &st) ||
        !check_step(steps[k].what, st, steps[k].want, read ? src : NULL, steps[k].pattern,
                    steps[k].len))
      return 0;
    if (steps[k].solicited) {
      struct ibv_wc go;
      if (!next_wc(p, 1, &go)) return 0;
      if (go.status != IBV_WC_SUCCESS || go.byte_len != kGoLen)
        return fail("the server's second go-ahead");
    }
  }
  printf("ops_check_peer: client: every check held\n");
  return 1;
}

static int usage(void) {
  fprintf(
      stderr,
      "usage: ops_check_peer -s [-p PORT] [-t SECONDS] [-l] | -c -a ADDR [-p PORT] [-t SECONDS] "
      "[-l] | -M -a ADDR -p PORT [-t SECONDS] [-w MS]\n");
  return 2;
}

int main(int argc, char** argv) {
  int server = 0, client = 0, memory = 0, opt;
  const char* addr = NULL;
  uint16_t port = 7475;
  while ((opt = getopt(argc, argv, "scMa:p:t:lw:")) != -1) {
    switch (opt) {
      case 's':
        server = 1;
        break;
      case 'c':
        client = 1;
        break;
      case 'M':
        client = memory = 1;
        break;
      case 'a':
        addr = optarg;
        break;
      case 'p':
        port = (uint16_t)atoi(optarg);
        break;
      case 'l':
        g_lossy = 1;
        break;
      case 't':
        g_timeout_s = atoi(optarg);
        break;
      case 'w':
        g_hold_ms = atoi(optarg);
        break;
      default:
        return usage();
    }
  }
  if (server == client || (client && addr == NULL)) return usage();
  g_me = "ops_check_peer";
  clock_gettime(CLOCK_MONOTONIC, &g_start);
  struct Peer p;
  memset(&p, 0, sizeof p);
  p.ec = rdma_create_event_channel();
  if (p.ec == NULL) return fail("rdma_create_event_channel"), 1;
  const int ok = server   ? run_server(&p, port)
                 : memory ? run_memory_client(&p, addr, port)
                          : run_client(&p, addr, port);
  // Let the last ACKs and the DREQ/DREP leave before the process ends.
  if (p.id != NULL && !p.disconnected) {
    g_timeout_s = (int)elapsed() + 3;
    rdma_disconnect(p.id);
    wait_event(&p, RDMA_CM_EVENT_DISCONNECTED, NULL);
  }
  fflush(stdout);
  return ok ? 0 : 1;
}
