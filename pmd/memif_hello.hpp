#pragma once
// Keeps a memif peer that leaves before the server's HELLO from killing the process.
//
// Why: DPDK 22.11's net_memif listener accepts a connection, registers the new control channel's
// interrupt callback, then sends HELLO. When that send fails (the peer connected and already
// closed or died), its error path closes the socket and frees the channel but leaves the callback
// registered; EAL's interrupt thread then re-arms epoll on the closed fd and panics ("Error adding
// fd N epoll_ctl, Bad file descriptor"). One connect-and-close on the socket is enough.
//
// How: this process defines sendmsg (exported from the executable, so the dlopen()ed driver binds
// to it). On EAL's interrupt thread, a send that fails because the peer is gone (EPIPE,
// ECONNRESET, ECONNREFUSED, ENOTCONN) is reported as sent: the listener then keeps the channel,
// the peer's hang-up shows as end-of-file on the next epoll pass, and the driver's own read path
// unregisters and frees the channel properly. Everywhere else, and for every other error, sendmsg
// is the C library's. The interrupt thread sends nothing but memif's control messages, and any
// of those to a departed peer is followed by that same end-of-file.
//
// ROCEDP_MEMIF_HELLO_GUARD=0 turns the absorbing off, to reproduce the panic.
//
// Linking: the executable must export the symbol (`-Wl,--export-dynamic-symbol=sendmsg`, part of
// rocedp_pmd's link interface and of rocedp.pc); memif_hello_guard_active() tells whether the
// driver will see it.

#include <cstdint>

namespace rocedp::pmd {

// True when the process's sendmsg (the one a dlopen()ed driver binds to) is the one defined here.
bool memif_hello_guard_active();

// Failed control sends on the interrupt thread reported as sent (peers gone before a message).
uint64_t memif_hello_sends_absorbed();

}  // namespace rocedp::pmd
