#pragma once
// The configuration of one rocedp process as plain structs: EAL, ports, polling cores, control
// thread, telemetry, logging, adapter limits and the daemon's listeners. A consumer fills one
// (or has rocedp::open_adapter read a YAML file into it, README "Configuration") and passes it
// to rocedp::open_adapter (rocedp/runtime.hpp). Parsing and validation of the YAML form live
// inside the library (as does set_dcqcn_parameter's check); these structs need nothing but the
// standard library.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocedp::config {

struct MacAddress {
  std::array<uint8_t, 6> bytes{};
  bool operator==(const MacAddress&) const = default;
};

// IPv4 addresses are kept in host byte order; 10.0.0.1 is 0x0a000001.
struct Ipv4Address {
  uint32_t value = 0;
  bool operator==(const Ipv4Address&) const = default;
};

// IPv6 addresses are kept as their 16 bytes in network order (fd52::20 is fd 52 00 .. 00 20).
struct Ipv6Address {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const Ipv6Address&) const = default;
};

/// Ports one configuration may list: every polling core serves every port, and a core holds one
/// queue and one RC engine per port (dataplane::PollingCore::kMaxPorts).
inline constexpr std::size_t kMaxPorts = 8;

struct StaticNeighbour {
  Ipv4Address ip;  // IPv4 neighbour (when ip6 is unset)
  MacAddress mac;
  std::optional<Ipv6Address> ip6;  // an IPv6 neighbour instead (the port needs an ipv6 address)
  bool operator==(const StaticNeighbour&) const = default;
};

// Impairments applied by pmd/ to one port's traffic (tests, chaos runs). All off by default.
struct FaultConfig {
  enum class Direction { kRx, kTx, kBoth };
  Direction direction = Direction::kRx;
  double drop_pct = 0;       // 0..100: frame silently discarded
  double duplicate_pct = 0;  // 0..100: frame delivered twice
  double corrupt_pct = 0;    // 0..100: one random byte flipped
  double ce_pct = 0;  // 0..100: an ECN-capable IPv4 frame marked CE, as a congested switch would
  uint32_t reorder_window = 0;  // 0 = off; else frames are shuffled within windows of this many
  double reorder_pct = 100;     // with a window: share of frames that take part in the shuffle
  uint32_t delay_us = 0;        // every frame held this long before delivery
  uint64_t seed = 1;            // PRNG seed, so a failing chaos run can be replayed
  bool enabled() const {
    return drop_pct > 0 || duplicate_pct > 0 || corrupt_pct > 0 || ce_pct > 0 ||
           reorder_window > 0 || delay_us > 0;
  }
  bool operator==(const FaultConfig&) const = default;
};

// DCQCN's parameters (IBTA Annex A17.9; DCQCN, SIGCOMM 2015), per port: what the QPs of a port
// with `ecn` do with the CNPs they get (the reaction point) and how often they send CNPs (the
// notification point). The defaults: NVIDIA's documented adapter defaults for the CNP interval,
// the rate-reduce period and alpha's update; the paper's F; T, B and the increase steps chosen
// for a software sender (README "ECN and congestion control").
struct DcqcnConfig {
  uint32_t cnp_interval_us = 4;        // NP: least time between two CNPs of a QP
  uint32_t rate_reduce_period_us = 4;  // RP: least time between two rate cuts
  uint32_t alpha_period_us = 1;        // alpha moves once per period
  uint32_t alpha_keep = 1019;    // of 1024: alpha's share kept each period (the rest: 1 with a CNP)
  uint32_t time_reset_us = 300;  // T: a rate-increase step every T
  uint32_t byte_reset = 32768;   // B: and every B bytes sent
  uint32_t fast_recovery = 5;    // F: steps of fast recovery before the target grows
  uint32_t ai_rate_mbps = 5;     // additive increase of the target per step
  uint32_t hai_rate_mbps = 50;   // hyper increase per step beyond F on both counters
  uint32_t min_rate_mbps = 1;    // no cut goes below it
  uint32_t first_cnp_rate_mbps = 0;  // the rate the first CNP cuts from (0: the line rate)
  bool operator==(const DcqcnConfig&) const = default;
};

// Sets one DCQCN parameter (`key`: a key of `ports[].dcqcn`, `value` decimal), checked as the
// YAML form is. False with the problem in *error (unknown key, value out of range).
bool set_dcqcn_parameter(DcqcnConfig* dcqcn, std::string_view key, std::string_view value,
                         std::string* error);

struct PortConfig {
  std::string name;     // our name for the port, unique
  std::string devargs;  // a vdev ("net_memif0,role=server,socket=/tmp/m.sock") or a PCI address
  std::optional<MacAddress> mac;  // unset: keep the device's MAC
  Ipv4Address address;
  uint8_t prefix_len = 24;
  // The port's IPv6 address (unset: no IPv6). The data path answers Neighbor Solicitations for
  // it and ICMPv6 echo to it (RFC 4861, RFC 4443); the control thread resolves IPv6 neighbours.
  std::optional<Ipv6Address> address6;
  uint16_t mtu = 1500;
  // 802.1Q: every frame of the port carries this VLAN ID (0: untagged) and, when sent, this
  // priority (PCP, the class a lossless RoCE fabric keeps for RDMA). A priority without a VLAN
  // sends priority-tagged frames (VLAN ID 0).
  uint16_t vlan = 0;
  uint8_t vlan_priority = 0;
  // DSCP of the port's RoCEv2 frames (IPv4 ToS = dscp << 2): the QPs of its connections, the
  // REQs' traffic class and the CM's MADs. 0: unmarked, and a passive connection follows the
  // traffic class of the peer's REQ (as Linux's CM does).
  uint8_t dscp = 0;
  // ECN (DCQCN): the QPs' RoCEv2 frames carry ECT(0), and a CNP from the peer cuts the QP's send
  // rate, which then recovers. CE-marked arrivals are answered with CNPs (DSCP cnp_dscp) always.
  bool ecn = false;
  uint8_t cnp_dscp = 48;
  DcqcnConfig dcqcn;
  std::vector<StaticNeighbour> neighbours;
  FaultConfig fault;
  bool operator==(const PortConfig&) const = default;
};

struct EalConfig {
  std::vector<unsigned> lcores{0, 1};
  unsigned main_lcore = 0;
  // The CPU the main lcore runs on (unset: the CPU of its own number). The main lcore mostly
  // sleeps, so it may share a polling lcore's CPU: N polling lcores then need only N CPUs.
  std::optional<unsigned> main_lcore_cpu;
  unsigned memory_mb = 256;
  bool hugepages = false;  // false: --no-huge
  std::string file_prefix = "rocedp";
  std::vector<std::string> extra_args;
  bool operator==(const EalConfig&) const = default;
};

struct DataplaneConfig {
  std::vector<unsigned> lcores{1};  // polling lcores; each must be in eal.lcores and not main
  uint16_t burst_size = 32;
  uint16_t rx_ring_size = 1024;       // descriptors per RX queue
  uint16_t tx_ring_size = 1024;       // descriptors per TX queue
  uint32_t control_ring_size = 1024;  // entries of each control<->lcore rte_ring (power of two)
  uint32_t mbuf_count = 16383;
  uint32_t mbuf_cache_size = 256;
  // 0: the polling lcores spin (lowest latency). N > 0: after kIdlePollsBeforeSleep polls in a row
  // found no work, a core sleeps N µs per idle poll, so a daemon sharing its CPUs (small VMs,
  // a test host running guests) does not starve them. Work resets the count.
  uint32_t idle_sleep_us = 0;
  bool operator==(const DataplaneConfig&) const = default;
};

struct ControlConfig {
  std::optional<unsigned> lcore;      // unset: an unpinned thread
  uint32_t arp_retry_ms = 200;        // time between ARP requests for an unresolved peer
  uint32_t arp_retries = 5;           // requests before a peer is declared unreachable
  uint32_t neighbour_expiry_s = 300;  // learned entries expire after this long
  bool operator==(const ControlConfig&) const = default;
};

struct TelemetryConfig {
  bool enabled = true;
  uint32_t stats_interval_ms = 100;  // how often control asks the cores for a stats snapshot
  bool operator==(const TelemetryConfig&) const = default;
};

struct LoggingConfig {
  enum class Level { kError, kWarning, kInfo, kDebug };
  Level level = Level::kInfo;
  std::optional<std::string> file;  // unset: stderr
  bool operator==(const LoggingConfig&) const = default;
};

// Adapter limits reported through QueryAdapterInfo (NDK_ADAPTER_INFO) and enforced at creation.
struct LimitsConfig {
  uint32_t max_qps = 131072;  // queue pairs over all cores
  uint32_t max_cqs = 131072;
  uint32_t max_srqs = 1024;
  uint32_t max_pds = 1024;
  uint32_t max_mrs = 65536;
  uint32_t max_cq_depth = 65536;   // NDK MaxCqDepth
  uint32_t max_qp_depth = 4096;    // MaxInitiatorQueueDepth and MaxReceiveQueueDepth
  uint32_t max_srq_depth = 16384;  // MaxSrqDepth
  uint32_t max_sge = 4;  // MaxInitiatorRequestSge / MaxReceiveRequestSge / MaxReadRequestSge
  uint32_t max_inline_data = 64;  // MaxInlineDataSize
  uint32_t max_read_limit = 16;   // MaxInboundReadLimit and MaxOutboundReadLimit
  uint64_t max_registration_size = 1ull << 32;
  uint32_t max_transfer_length = 1u << 30;  // MaxTransferLength
  uint32_t frmr_page_count = 256;           // FRMRPageCount (NDK: at least 16)
  uint32_t max_listeners =
      1024;  // CreateListener/CreateSharedEndpoint: INSUFFICIENT_RESOURCES beyond
  uint32_t max_shared_endpoints = 1024;
  uint32_t max_connectors = 131072;
  bool operator==(const LimitsConfig&) const = default;
};

// A listener with a built-in service behind it, run by rocedpd on the control thread and the
// adapter's polling cores (control/services.hpp). Clients reach it through the IB CM at the port's
// IP and `nd_port` (rdma_cm service ID 0x0106 << 16 | nd_port).
struct ListenerConfig {
  enum class Service { kEcho, kMemory, kPerftest };
  // perftest: what a data connection does with each SEND it receives (ib_send_bw wants a sink,
  // ib_send_lat an answer of the same size).
  enum class Sends { kSink, kEcho };
  // perftest: what a data connection does with the client's RDMA WRITEs: nothing (they land in
  // the region: ib_write_bw), or ib_write_lat's ping-pong, where the server writes first and
  // answers each WRITE that landed with one of the same length.
  enum class Writes { kSink, kEcho };
  std::string port;      // name of a configured port: its adapter serves the listener
  uint16_t nd_port = 0;  // 1..65535
  Service service = Service::kEcho;
  uint64_t memory_bytes = 1u << 20;  // memory, perftest: the exported region (4096 .. 1 GiB)
  uint32_t message_bytes = 4096;     // echo, perftest: the largest SEND it takes (receive buffer)
  Sends sends = Sends::kSink;        // perftest
  Writes writes = Writes::kSink;     // perftest
  uint32_t queue_depth = 64;         // per connection: receives posted / send queue depth
  uint32_t max_connections = 64;     // more are rejected (REJ, consumer reason)
  // echo: post the receives this long after the connection is established instead of before
  // the Accept, so a peer that sends at once meets RNR NAKs (proves its RNR retry). 0: off.
  uint32_t receive_delay_ms = 0;
  // echo: after this many echoes completed, the service disconnects (DREQ from our side). 0: off.
  uint32_t disconnect_after = 0;
  // echo: a connection that completes no echo for this long is disconnected, so a peer that
  // vanished without a DREQ does not hold its slot for ever. 0: never.
  uint32_t idle_timeout_ms = 300000;
  // memory, perftest (its control connection): a zero-length RDMA WRITE to the peer this often (it
  // touches no memory, IBTA C9-88); a peer that no longer answers fails it once the QP's retries
  // run out, and the connection is closed. 0: never.
  uint32_t keepalive_ms = 10000;
  // perftest: also serve clients without -R, whose set-up runs over TCP (perftest's own
  // exchange) to this host address (0.0.0.0: any) and nd_port, on the host's kernel stack; their
  // data QPs are connected out of band to the GIDs the keys carry. Unset: rdma_cm clients only.
  std::optional<Ipv4Address> tcp_exchange;
  bool operator==(const ListenerConfig&) const = default;
};

struct Config {
  std::string source;  // file the configuration came from
  EalConfig eal;
  std::vector<PortConfig> ports;
  DataplaneConfig dataplane;
  ControlConfig control;
  TelemetryConfig telemetry;
  LoggingConfig logging;
  LimitsConfig limits;
  std::vector<ListenerConfig> listeners;
  bool operator==(const Config&) const = default;
};

}  // namespace rocedp::config
