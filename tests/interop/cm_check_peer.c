// cm_check_peer: the Linux side of the CM check, run inside the rig's guest (librdmacm over
// rdma_rxe). The other side is `rocedp-perf --cm-check` (apps/perf/cm_check_mode.hpp). The check
// covers the connections that do not come about: who refuses, with which REJ reason and private
// data, and what each side's consumer is told. Every answer below comes from Linux's own CM
// (drivers/infiniband/core/cm.c and cma.c); this program only decides what its consumer does.
//
//   cm_check_peer -s MODE [-p PORT] [-d DATA] [-n N]   the server, one connection request:
//     reject   rdma_reject with the private data "linux-rejects" (REJ reason 28, consumer defined);
//              with -n, N requests each so (a client whose REJ was lost sends its REQ again, and
//              Linux's CM, which forgot the rejected one, hands it to the listener as new)
//     abandon  rdma_accept (the REP leaves), then the QP and the id are destroyed before the RTU
//              comes: the kernel sends a REJ (reason 28)
//     late     rdma_accept only after 6 s, past the client's first REQ timeout (its REQ comes
//              again, and Linux's CM answers it with an MRA): the connection must be ESTABLISHED
//              all the same, then Linux disconnects
//     silent   no answer; the client gives up meanwhile (its REJ, reason 4). Linux's CM hands
//              the consumer no event for it (the same when the client is Linux: -g below), so
//              for 3 s none may come, or else only RDMA_CM_EVENT_REJECTED with status 4.
//     With -d the request's private data (after rdma_cm's header) must begin with DATA.
//   cm_check_peer -c -a ADDR -e STATUS [-p PORT] [-d DATA]   the client: connects once with the
//     private data "linux-asks"; it must end in RDMA_CM_EVENT_REJECTED with status STATUS (the
//     REJ reason); with -d the REJ's private data must begin with DATA.
//   cm_check_peer -c -a ADDR -k [-p PORT]   the client: the connection must be ESTABLISHED
//     (however long the server takes, within -t), then the server disconnects.
//   cm_check_peer -c -a ADDR -g MS [-p PORT]   the client gives up: no CM event may come for MS
//     milliseconds; then it destroys its id (the kernel rejects the REQ: reason 4). Linux against
//     Linux, this shows what `-s silent` sees from Linux's own CM.
// Prints "cm_check_peer: server: listening on port PORT (MODE)" once it listens, and
// "cm_check_peer: server|client: every check held" at the end.
// Exit status 0: every check held; 1: one failed (printed); 2: usage.

#include <arpa/inet.h>
#include <ctype.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_peer.h"

static const char kAsks[] = "linux-asks";
static const char kRejects[] = "linux-rejects";

// One CM event, within the time limit: its type, status, id and private data as text (up to
// the first zero byte, unprintable bytes as '?').
struct Event {
  enum rdma_cm_event_type type;
  int status;
  struct rdma_cm_id* id;
  char data[160];
};

static int next_event(struct rdma_event_channel* ec, struct Event* out) {
  struct pollfd pfd = {.fd = ec->fd, .events = POLLIN};
  const int left_ms = (int)((g_timeout_s - elapsed()) * 1000);
  if (left_ms <= 0 || poll(&pfd, 1, left_ms) <= 0)
    return fail("time limit reached waiting for a CM event");
  struct rdma_cm_event* ev = NULL;
  if (rdma_get_cm_event(ec, &ev) != 0) return fail("rdma_get_cm_event");
  out->type = ev->event;
  out->status = ev->status;
  out->id = ev->id;
  size_t n = 0;
  const uint8_t* pd = ev->param.conn.private_data;
  for (; pd != NULL && n < ev->param.conn.private_data_len && n + 1 < sizeof out->data && pd[n];
       ++n)
    out->data[n] = isprint(pd[n]) ? (char)pd[n] : '?';
  out->data[n] = 0;
  rdma_ack_cm_event(ev);
  return 1;
}

static int expect_event(struct rdma_event_channel* ec, enum rdma_cm_event_type want,
                        struct Event* ev) {
  if (!next_event(ec, ev)) return 0;
  if (ev->type == want) return 1;
  fprintf(stderr, "cm_check_peer: CM event %s (status %d) while waiting for %s\n",
          rdma_event_str(ev->type), ev->status, rdma_event_str(want));
  return 0;
}

static int data_begins(const char* got, const char* want, const char* what) {
  if (want == NULL || strncmp(got, want, strlen(want)) == 0) return 1;
  fprintf(stderr,
          "cm_check_peer: FAIL: %s's private data is '%s', expected it to begin with '%s'\n", what,
          got, want);
  return 0;
}

// A QP on `id` (rdma_accept and rdma_connect move it through its states).
static int make_qp(struct rdma_cm_id* id) {
  struct ibv_pd* pd = ibv_alloc_pd(id->verbs);
  struct ibv_cq* cq = pd ? ibv_create_cq(id->verbs, 4, NULL, NULL, 0) : NULL;
  if (cq == NULL) return fail("ibv_alloc_pd / ibv_create_cq");
  struct ibv_qp_init_attr qa = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  return rdma_create_qp(id, pd, &qa) == 0 || fail("rdma_create_qp");
}

static struct rdma_conn_param conn_param(void) {
  struct rdma_conn_param c = {
      .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
  return c;
}

// Ends an established connection from our side: DREQ, and the peer's DREP.
static int disconnect(struct rdma_event_channel* ec, struct rdma_cm_id* id) {
  struct Event ev;
  if (rdma_disconnect(id) != 0) return fail("rdma_disconnect");
  return expect_event(ec, RDMA_CM_EVENT_DISCONNECTED, &ev);
}

static int run_server(struct rdma_event_channel* ec, const char* mode, uint16_t port,
                      const char* data, int requests) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  struct rdma_cm_id* listen_id = NULL;
  if (rdma_create_id(ec, &listen_id, NULL, RDMA_PS_TCP) != 0 ||
      rdma_bind_addr(listen_id, (struct sockaddr*)&sin) != 0 || rdma_listen(listen_id, 1) != 0)
    return fail("listen");
  printf("cm_check_peer: server: listening on port %u (%s)\n", port, mode);
  fflush(stdout);
  struct Event ev;
  if (!expect_event(ec, RDMA_CM_EVENT_CONNECT_REQUEST, &ev)) return 0;
  printf("cm_check_peer: server: a connection request, private data '%s'\n", ev.data);
  if (!data_begins(ev.data, data, "the request")) return 0;
  struct rdma_cm_id* id = ev.id;
  if (strcmp(mode, "reject") == 0) {
    for (int n = 1;; ++n) {
      if (rdma_reject(id, kRejects, sizeof kRejects - 1) != 0) return fail("rdma_reject");
      printf("cm_check_peer: server: rejected it with '%s'\n", kRejects);
      rdma_destroy_id(id);
      if (n == requests) break;
      if (!expect_event(ec, RDMA_CM_EVENT_CONNECT_REQUEST, &ev)) return 0;
      printf("cm_check_peer: server: request %d, private data '%s'\n", n + 1, ev.data);
      if (!data_begins(ev.data, data, "the request")) return 0;
      id = ev.id;
    }
  } else if (strcmp(mode, "abandon") == 0) {
    struct rdma_conn_param c = conn_param();
    if (!make_qp(id)) return 0;
    if (rdma_accept(id, &c) != 0) return fail("rdma_accept");
    // Before the client's RTU: its consumer waits before CompleteConnect.
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
    printf("cm_check_peer: server: accepted it, then destroyed the connection before the RTU\n");
  } else if (strcmp(mode, "late") == 0) {
    struct pollfd pfd = {.fd = ec->fd, .events = POLLIN};
    if (poll(&pfd, 1, 6000) != 0) return fail("a CM event before the late accept");
    struct rdma_conn_param c = conn_param();
    if (!make_qp(id)) return 0;
    if (rdma_accept(id, &c) != 0) return fail("rdma_accept");
    if (!expect_event(ec, RDMA_CM_EVENT_ESTABLISHED, &ev)) return 0;
    printf("cm_check_peer: server: accepted it after 6 s: ESTABLISHED\n");
    if (!disconnect(ec, id)) return 0;
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  } else {  // silent
    // The client gives up meanwhile. Linux's CM hands its consumer no event for that REJ
    // (against a Linux client, -g, the same): none may come, or a REJECTED with status 4.
    struct pollfd pfd = {.fd = ec->fd, .events = POLLIN};
    if (poll(&pfd, 1, 3000) == 0) {
      printf("cm_check_peer: server: no answer, and no CM event in 3 s\n");
    } else {
      if (!expect_event(ec, RDMA_CM_EVENT_REJECTED, &ev)) return 0;
      printf("cm_check_peer: server: the request ended in REJECTED, status %d\n", ev.status);
      if (ev.status != 4) return fail("the request's REJECTED event has a status other than 4");
    }
    rdma_destroy_id(id);
  }
  // Let the REJ leave before the process ends.
  usleep(300 * 1000);
  rdma_destroy_id(listen_id);
  printf("cm_check_peer: server: every check held\n");
  return 1;
}

static int run_client(struct rdma_event_channel* ec, const char* addr, uint16_t port,
                      const char* data, int expect, int give_up_ms, int connected) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) return fail("-a needs an IPv4 address");
  struct rdma_cm_id* id = NULL;
  struct Event ev;
  if (rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) != 0) return fail("rdma_create_id");
  if (rdma_resolve_addr(id, NULL, (struct sockaddr*)&sin, 2000) != 0 ||
      !expect_event(ec, RDMA_CM_EVENT_ADDR_RESOLVED, &ev) || rdma_resolve_route(id, 2000) != 0 ||
      !expect_event(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev))
    return fail("resolve");
  if (!make_qp(id)) return 0;
  struct rdma_conn_param c = conn_param();
  c.private_data = kAsks;
  c.private_data_len = sizeof kAsks - 1;
  if (rdma_connect(id, &c) != 0) return fail("rdma_connect");
  if (connected) {
    if (!expect_event(ec, RDMA_CM_EVENT_ESTABLISHED, &ev)) return 0;
    printf("cm_check_peer: client: ESTABLISHED after %.1f s\n", elapsed());
    // The server disconnects.
    if (!expect_event(ec, RDMA_CM_EVENT_DISCONNECTED, &ev)) return 0;
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
    printf("cm_check_peer: client: every check held\n");
    return 1;
  }
  if (give_up_ms > 0) {
    // No answer may come; then the id goes, and the kernel rejects its REQ (reason 4, timeout).
    struct pollfd pfd = {.fd = ec->fd, .events = POLLIN};
    if (poll(&pfd, 1, give_up_ms) != 0) return fail("a CM event before giving up");
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
    printf("cm_check_peer: client: no answer in %d ms; gave up\n", give_up_ms);
    usleep(300 * 1000);
    printf("cm_check_peer: client: every check held\n");
    return 1;
  }
  if (!expect_event(ec, RDMA_CM_EVENT_REJECTED, &ev)) return 0;
  printf("cm_check_peer: client: REJECTED, status %d, private data '%s'\n", ev.status, ev.data);
  if (ev.status != expect) return fail("the REJECTED event has another status");
  if (!data_begins(ev.data, data, "the REJ")) return 0;
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  printf("cm_check_peer: client: every check held\n");
  return 1;
}

static int usage(void) {
  fprintf(stderr,
          "usage: cm_check_peer -s reject|abandon|late|silent [-p PORT] [-d DATA] [-n N] "
          "[-t SECONDS]\n"
          "       cm_check_peer -c -a ADDR -e STATUS|-g MS|-k [-p PORT] [-d DATA] [-t SECONDS]\n");
  return 2;
}

int main(int argc, char** argv) {
  int client = 0, expect = -1, give_up_ms = 0, connected = 0, requests = 1, opt;
  const char *addr = NULL, *mode = NULL, *data = NULL;
  uint16_t port = 7476;
  while ((opt = getopt(argc, argv, "s:ca:p:d:e:g:kn:t:")) != -1) {
    switch (opt) {
      case 's':
        mode = optarg;
        break;
      case 'c':
        client = 1;
        break;
      case 'a':
        addr = optarg;
        break;
      case 'p':
        port = (uint16_t)atoi(optarg);
        break;
      case 'd':
        data = optarg;
        break;
      case 'e':
        expect = atoi(optarg);
        break;
      case 'k':
        connected = 1;
        break;
      case 'n':
        requests = atoi(optarg);
        break;
      case 'g':
        give_up_ms = atoi(optarg);
        break;
      case 't':
        g_timeout_s = atoi(optarg);
        break;
      default:
        return usage();
    }
  }
  if ((mode != NULL) == client) return usage();
  if (client && (addr == NULL || (expect >= 0) + (give_up_ms > 0) + connected != 1)) return usage();
  if (mode != NULL && strcmp(mode, "reject") != 0 && strcmp(mode, "abandon") != 0 &&
      strcmp(mode, "late") != 0 && strcmp(mode, "silent") != 0)
    return usage();
  if (requests < 1 || (requests > 1 && (mode == NULL || strcmp(mode, "reject") != 0)))
    return usage();
  g_me = "cm_check_peer";
  clock_gettime(CLOCK_MONOTONIC, &g_start);
  struct rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == NULL) return fail("rdma_create_event_channel"), 1;
  const int ok = client ? run_client(ec, addr, port, data, expect, give_up_ms, connected)
                        : run_server(ec, mode, port, data, requests);
  fflush(stdout);
  return ok ? 0 : 1;
}
