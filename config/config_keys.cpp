#include "config/config_keys.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>

namespace rocedp::config {
namespace {

using K = KeySpec::Kind;
constexpr uint64_t k24 = uint64_t{1} << 24;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

// Limits that come from DPDK 22.11 as Debian builds it: RTE_MAX_LCORE = 128,
// RTE_MEMPOOL_CACHE_MAX_SIZE = 512; a pool of 2^n - 1 mbufs is the efficient size.
constexpr KeySpec kKeys[] = {
    // ---- the top level: the sections
    {"", "eal", K::kMapping, "mapping", "", 0, 0, "", ""},
    {"", "ports", K::kList, "list", "", 0, 0, "", ""},
    {"", "dataplane", K::kMapping, "mapping", "", 0, 0, "", ""},
    {"", "control", K::kMapping, "mapping", "", 0, 0, "", ""},
    {"", "telemetry", K::kMapping, "mapping", "", 0, 0, "", ""},
    {"", "logging", K::kMapping, "mapping", "", 0, 0, "", ""},
    {"", "limits", K::kMapping, "mapping", "", 0, 0, "", ""},
    {"", "listeners", K::kList, "list", "", 0, 0, "", ""},
    // ---- eal
    {"eal", "lcores", K::kLcores, "list of int", "`[0, 1]`", 0, 127, "no duplicates, not empty",
     "every lcore EAL may use"},
    {"eal", "main_lcore", K::kUint, "int", "`0`", 0, 127, "in `lcores`",
     "lcore running main(); never a polling lcore"},
    {"eal", "main_lcore_cpu", K::kUint, "int", "unset", 0, 127, "",
     "CPU the main lcore runs on (unset: CPU `main_lcore`); it mostly sleeps, so it may share "
     "a polling lcore's CPU"},
    {"eal", "memory_mb", K::kUint, "int", "`256`", 64, 1u << 20, "", "memory EAL reserves (MiB)"},
    {"eal", "hugepages", K::kBool, "bool", "`false`", 0, 0, "",
     "`false` runs EAL with `--no-huge`; `true` also lets dpdk-dumpcap attach"},
    {"eal", "file_prefix", K::kString, "string", "`rocedp`", 0, 0, "1..32 of `A-Za-z0-9_.-`",
     "runtime-file prefix; distinct per daemon on one host"},
    {"eal", "extra_args", K::kList, "list of string", "`[]`", 0, 0,
     "not `-l -c --lcores --main-lcore -m --socket-mem --no-huge --file-prefix` (nor their "
     "abbreviations)",
     "extra EAL arguments, passed as given"},
    // ---- ports
    {"ports", "name", K::kString, "string", "required", 0, 0, "1..32 of `A-Za-z0-9_.-`, unique",
     "our name for the port"},
    {"ports", "devargs", K::kString, "string", "required", 0, 0,
     "no spaces; device (text before the first `,`) unique",
     "a vdev, `ring_pair:LINK:a\\|b`, or a PCI address ([pmd/README.md](pmd/README.md))"},
    {"ports", "mac", K::kString, "string", "device's MAC", 0, 0,
     "`xx:xx:xx:xx:xx:xx`, unicast, unique", "source MAC"},
    {"ports", "address", K::kString, "string", "required", 0, 0,
     "`a.b.c.d/len`, len 1..32, a unicast host address, unique", "port IPv4 address and prefix"},
    {"ports", "ipv6", K::kString, "string", "unset", 0, 0,
     "an IPv6 address (`fd52::20`), unicast (link-local `fe80::` too): not multicast, `::`, `::1` "
     "or IPv4-mapped; unique",
     "port IPv6 address: the port answers Neighbor Solicitations and ICMPv6 echo for it and "
     "resolves IPv6 neighbours (RFC 4861)"},
    {"ports", "mtu", K::kUint, "int", "`1500`", 576, 9000, "", "IP MTU"},
    {"ports", "vlan", K::kUint, "int", "untagged", 1, 4094, "",
     "802.1Q VLAN ID: every frame sent carries the tag; received frames without it are dropped"},
    {"ports", "vlan_priority", K::kUint, "int", "`0`", 0, 7, "",
     "802.1Q priority (PCP) of the frames sent, e.g. the fabric's lossless class; without "
     "`vlan`, priority-tagged frames (VLAN ID 0)"},
    {"ports", "dscp", K::kUint, "int", "`0`", 0, 63, "",
     "DSCP of the RoCEv2 frames (QPs, REQ traffic class, CM MADs); 0: a passive connection "
     "follows the REQ's traffic class"},
    {"ports", "ecn", K::kBool, "bool", "`false`", 0, 0, "",
     "the QPs' frames carry ECT(0) and their send rate follows the peer's CNPs (DCQCN); CE-marked "
     "arrivals are answered with CNPs either way"},
    {"ports", "cnp_dscp", K::kUint, "int", "`48`", 0, 63, "", "DSCP of the CNPs the port sends"},
    {"ports", "dcqcn", K::kMapping, "mapping", "defaults below", 0, 0, "",
     "DCQCN's parameters: the CNPs the port's QPs send, and (with `ecn`) how their rate follows "
     "the CNPs they get"},
    {"ports.dcqcn", "cnp_interval_us", K::kUint, "int", "`4`", 0, 1'000'000, "",
     "least time between two CNPs of a QP"},
    {"ports.dcqcn", "rate_reduce_period_us", K::kUint, "int", "`4`", 0, 1'000'000, "",
     "least time between two rate cuts of a QP"},
    {"ports.dcqcn", "alpha_period_us", K::kUint, "int", "`1`", 1, 1'000'000, "",
     "α (the cut's depth) moves once per period"},
    {"ports.dcqcn", "alpha_keep", K::kUint, "int", "`1019`", 0, 1023, "",
     "of 1024: α's share kept each period; the rest moves it towards 1 in a period with a CNP, "
     "towards 0 without"},
    {"ports.dcqcn", "time_reset_us", K::kUint, "int", "`300`", 1, 10'000'000, "",
     "T: a rate-increase step every T"},
    {"ports.dcqcn", "byte_reset", K::kUint, "int", "`32768`", 64, 1u << 30, "",
     "B: and a step every B bytes sent"},
    {"ports.dcqcn", "fast_recovery", K::kUint, "int", "`5`", 0, 1000, "",
     "F: steps of fast recovery (towards the rate before the cut) before the target grows"},
    {"ports.dcqcn", "ai_rate_mbps", K::kUint, "int", "`5`", 1, 1'000'000, "",
     "additive increase of the target rate per step, Mbit/s"},
    {"ports.dcqcn", "hai_rate_mbps", K::kUint, "int", "`50`", 1, 1'000'000, "",
     "hyper increase per step once both counters passed F, Mbit/s"},
    {"ports.dcqcn", "min_rate_mbps", K::kUint, "int", "`1`", 1, 1'000'000, "",
     "no cut goes below this rate, Mbit/s"},
    {"ports.dcqcn", "first_cnp_rate_mbps", K::kUint, "int", "`0`", 0, 1'000'000, "",
     "the rate the first CNP of an episode cuts from, Mbit/s (0: the line rate)"},
    {"ports", "neighbours", K::kList, "list of `{ip, mac}`", "`[]`", 0, 0, "",
     "static neighbours: ARP entries, and IPv6 neighbour entries"},
    {"ports.neighbours", "ip", K::kString, "string", "required", 0, 0,
     "IPv4: inside the port's subnet; IPv6 (with colons): unicast, the port has `ipv6`; not the "
     "port's own, no duplicates",
     "the neighbour's IPv4 or IPv6 address"},
    {"ports.neighbours", "mac", K::kString, "string", "required", 0, 0, "unicast", "its MAC"},
    {"ports", "fault", K::kMapping, "mapping", "off", 0, 0, "",
     "impairments of this port's traffic"},
    {"ports.fault", "direction", K::kChoice, "`rx`/`tx`/`both`", "`rx`", 0, 0, "",
     "which traffic is impaired"},
    {"ports.fault", "drop_pct", K::kPercent, "number", "`0`", 0, 100, "", "% of frames dropped"},
    {"ports.fault", "duplicate_pct", K::kPercent, "number", "`0`", 0, 100, "",
     "% of frames delivered twice"},
    {"ports.fault", "corrupt_pct", K::kPercent, "number", "`0`", 0, 100, "",
     "% of frames with one byte flipped"},
    {"ports.fault", "ce_pct", K::kPercent, "number", "`0`", 0, 100, "",
     "% of ECN-capable (ECT) IPv4 frames marked CE, as a congested switch marks them"},
    {"ports.fault", "reorder_window", K::kUint, "int", "`0`", 0, 1024, "",
     "shuffle within windows of this many frames (0 = off)"},
    {"ports.fault", "reorder_pct", K::kPercent, "number", "`100`", 0, 100, "",
     "with a window: % of frames that take part"},
    {"ports.fault", "delay_us", K::kUint, "int", "`0`", 0, 1'000'000, "",
     "hold every frame this long"},
    {"ports.fault", "seed", K::kUint, "int", "`1`", 0, kU64Max, "",
     "PRNG seed (replayable chaos runs)"},
    // ---- dataplane
    {"dataplane", "lcores", K::kLcores, "list of int", "`[1]`", 0, 127,
     "not empty, no duplicates, each in `eal.lcores`, none equal to `eal.main_lcore`; at most 64 "
     "with `listeners`",
     "polling lcores"},
    {"dataplane", "burst_size", K::kUint, "int", "`32`", 1, 64, "",
     "packets per rx/tx burst (a polling core's burst arrays hold 64)"},
    {"dataplane", "rx_ring_size", K::kPow2, "int", "`1024`", 64, 16384, "",
     "descriptors per RX queue"},
    {"dataplane", "tx_ring_size", K::kPow2, "int", "`1024`", 64, 16384, "",
     "descriptors per TX queue"},
    {"dataplane", "control_ring_size", K::kPow2, "int", "`1024`", 64, 65536, "",
     "entries of each control↔lcore rte_ring"},
    {"dataplane", "mbuf_count", K::kUint, "int", "`16383`", 1023, kU32Max, "2^n − 1 is best",
     "mbufs in the packet pool"},
    {"dataplane", "mbuf_cache_size", K::kUint, "int", "`256`", 0, 512, "",
     "per-lcore mempool cache"},
    {"dataplane", "idle_sleep_us", K::kUint, "int", "`0`", 0, 10000, "",
     "0: polling lcores spin. N: after 1,024 idle polls in a row a core sleeps N µs per idle poll "
     "(for "
     "hosts whose CPUs are shared, e.g. with the interop guests); work resets the count"},
    // ---- control
    {"control", "lcore", K::kUint, "int", "unset", 0, 127,
     "in `eal.lcores`, not a polling lcore; omit for unpinned", "lcore of the control thread"},
    {"control", "arp_retry_ms", K::kUint, "int", "`200`", 1, 60'000, "",
     "interval between ARP requests for an unresolved peer"},
    {"control", "arp_retries", K::kUint, "int", "`5`", 1, 100, "",
     "requests before a peer is unreachable"},
    {"control", "neighbour_expiry_s", K::kUint, "int", "`300`", 1, 86'400, "",
     "lifetime of learned neighbour entries"},
    // ---- telemetry
    {"telemetry", "enabled", K::kBool, "bool", "`true`", 0, 0, "",
     "register the `/rocedp/*` telemetry commands"},
    {"telemetry", "stats_interval_ms", K::kUint, "int", "`100`", 1, 60'000, "",
     "how often control collects a stats snapshot from the cores"},
    // ---- logging
    {"logging", "level", K::kChoice, "`error`/`warning`/`info`/`debug`", "`info`", 0, 0, "",
     "log threshold (`info` maps to DPDK NOTICE)"},
    {"logging", "file", K::kString, "string", "unset (stderr)", 0, 0, "",
     "append logs to this file"},
    // ---- limits
    {"limits", "max_qps", K::kUint, "int", "`131072`", 1, k24 - 2,
     "QPNs are 24 bits, QP0/QP1 reserved", "queue pairs over all cores"},
    {"limits", "max_cqs", K::kUint, "int", "`131072`", 1, k24, "", "completion queues"},
    {"limits", "max_srqs", K::kUint, "int", "`1024`", 1, k24, "", "shared receive queues"},
    {"limits", "max_pds", K::kUint, "int", "`1024`", 1, k24, "", "protection domains"},
    {"limits", "max_mrs", K::kUint, "int", "`65536`", 1, k24,
     "a 24-bit index and an 8-bit key make a token", "memory regions"},
    {"limits", "max_cq_depth", K::kUint, "int", "`65536`", 1, k24, "", "MaxCqDepth"},
    {"limits", "max_qp_depth", K::kUint, "int", "`4096`", 1, 65536, "",
     "MaxInitiatorQueueDepth / MaxReceiveQueueDepth"},
    {"limits", "max_srq_depth", K::kUint, "int", "`16384`", 1, 1u << 20, "", "MaxSrqDepth"},
    {"limits", "max_sge", K::kUint, "int", "`4`", 1, 4, "a work request holds 4",
     "MaxInitiator/Receive/ReadRequestSge"},
    {"limits", "max_inline_data", K::kUint, "int", "`64`", 0, 64, "in a work request's SGE bytes",
     "MaxInlineDataSize (bytes)"},
    {"limits", "max_read_limit", K::kUint, "int", "`16`", 1, 255, "8 bits in the CM REQ",
     "MaxInbound/OutboundReadLimit"},
    {"limits", "max_registration_size", K::kUint, "int", "`4294967296`", 4096, uint64_t{1} << 48,
     "", "bytes per registration"},
    {"limits", "max_transfer_length", K::kUint, "int", "`1073741824`", 1, uint64_t{1} << 31,
     "RETH DMA length is 32 bits", "MaxTransferLength (bytes)"},
    {"limits", "frmr_page_count", K::kUint, "int", "`256`", 16, 65536, "NDK: ≥ 16",
     "FRMRPageCount"},
    {"limits", "max_listeners", K::kUint, "int", "`1024`", 1, 65536, "per port",
     "listeners before INSUFFICIENT_RESOURCES"},
    {"limits", "max_shared_endpoints", K::kUint, "int", "`1024`", 1, 65536, "",
     "shared endpoints before INSUFFICIENT_RESOURCES"},
    {"limits", "max_connectors", K::kUint, "int", "`131072`", 1, k24, "", "connectors"},
    // ---- listeners
    {"listeners", "port", K::kString, "string", "required", 0, 0, "a configured port",
     "where to listen: the port's adapter serves it, on the port's addresses"},
    {"listeners", "nd_port", K::kUint, "int", "required", 1, 65535, "unique per port",
     "the ND / rdma_cm port (service ID `0x0106 << 16 \\| nd_port`)"},
    {"listeners", "service", K::kChoice, "`echo`/`memory`/`perftest`", "required", 0, 0, "",
     "what the listener serves"},
    {"listeners", "message_bytes", K::kUint, "int", "`4096`", 1, 1u << 24,
     "echo and perftest only; `queue_depth` x `message_bytes` at most "
     "`limits.max_registration_size`",
     "the largest SEND taken (receive buffer size)"},
    {"listeners", "memory_bytes", K::kUint, "int", "`1048576`", 4096, uint64_t{1} << 30,
     "memory and perftest only; at most `limits.max_registration_size`",
     "size of the exported region (perftest: at least the largest message and 4 KiB)"},
    {"listeners", "sends", K::kChoice, "`sink`/`echo`", "`sink`", 0, 0, "perftest only",
     "what a data connection does with a SEND: takes it (`ib_send_bw`) or answers it with the "
     "same bytes (`ib_send_lat`)"},
    {"listeners", "writes", K::kChoice, "`sink`/`echo`", "`sink`", 0, 0, "perftest only",
     "what a data connection does with the client's RDMA WRITEs: lets them land in the region "
     "(`ib_write_bw`), or writes first and answers each with one of the same length into the "
     "client's buffer (`ib_write_lat`: its `-s` at most `message_bytes`, at most 4096 unless "
     "`message_bytes` is exactly `-s`)"},
    {"listeners", "queue_depth", K::kUint, "int", "`64`", 1, 4096,
     "echo and perftest only; at most `limits.max_qp_depth`, twice it at most "
     "`limits.max_cq_depth`",
     "receives posted / send-queue depth per connection"},
    {"listeners", "max_connections", K::kUint, "int", "`64`", 1, 65536, "",
     "further requests are rejected (REJ, consumer reason 28)"},
    {"listeners", "receive_delay_ms", K::kUint, "int", "`0`", 0, 60000, "echo only",
     "post the receives this long after the connection is established instead of before the "
     "Accept: a "
     "peer that sends at once gets RNR NAKs and must retry (the interop RNR case)"},
    {"listeners", "disconnect_after", K::kUint, "int", "`0`", 0, 1u << 30, "echo only",
     "after this many echoes completed the service disconnects (the DREQ comes from rocedpd); 0 = "
     "the "
     "peer ends the connection"},
    {"listeners", "idle_timeout_ms", K::kUint, "int", "`300000`", 0, 86400000, "echo only",
     "a connection that completes no echo for this long is disconnected (a peer gone without a "
     "DREQ holds its slot until then); 0 = never"},
    {"listeners", "keepalive_ms", K::kUint, "int", "`10000`", 0, 3600000,
     "memory and perftest (its control connection) only",
     "a zero-length RDMA WRITE to the peer this often (it touches no memory); a peer that no "
     "longer answers fails it after the QP's retries (local ACK timeout x (retry count + 1)) and "
     "the connection is closed; 0 = never"},
    {"listeners", "tcp_exchange", K::kString, "IPv4 address", "unset", 0, 0, "perftest only",
     "also serve perftest clients without `-R`: their set-up over TCP (perftest's own exchange) "
     "to this host address (`0.0.0.0`: any) and `nd_port`, on the host's kernel stack; the data "
     "QPs connect out of band to the GIDs in the keys"},
};

struct Section {
  std::string_view name;
  std::string_view heading;
};
constexpr Section kSections[] = {
    {"eal", "eal"},
    {"ports", "ports (list, 1 to 8; each gets its own NDK adapter)"},
    {"dataplane", "dataplane"},
    {"control", "control"},
    {"telemetry", "telemetry"},
    {"logging", "logging"},
    {"limits", "limits (adapter limits, reported in NDK_ADAPTER_INFO and enforced at creation)"},
    {"listeners",
     "listeners (list; built-in services of rocedpd; a SIGHUP reload applies changes)"},
};

// 2^n for large powers of two, 2^64-1 for the top, decimal otherwise.
std::string number(uint64_t v) {
  if (v == kU64Max) return "2^64-1";
  if (v >= (uint64_t{1} << 31) && (v & (v - 1)) == 0) {
    int n = 0;
    while ((uint64_t{1} << n) != v) ++n;
    return "2^" + std::to_string(n);
  }
  return std::to_string(v);
}

std::string range_text(const KeySpec& k) {
  std::string r;
  switch (k.kind) {
    case K::kUint:
    case K::kLcores:
      r = number(k.lo) + ".." + number(k.hi);
      break;
    case K::kPow2:
      r = "power of two, " + number(k.lo) + ".." + number(k.hi);
      break;
    case K::kPercent:
      r = "0..100";
      break;
    default:
      break;
  }
  if (!k.rule.empty()) r += (r.empty() ? "" : ", ") + std::string(k.rule);
  return r;
}

// How a key shows in its top-level section's table: "fault.seed", "neighbours[].ip".
std::string display_key(const KeySpec& k, std::string_view top) {
  std::string_view rest = k.section.substr(top.size());
  if (rest.empty()) return std::string(k.key);
  rest.remove_prefix(1);  // '.'
  const bool list = rest == "neighbours";
  return std::string(rest) + (list ? "[]." : ".") + std::string(k.key);
}

}  // namespace

std::span<const KeySpec> config_keys() {
  return kKeys;
}

const KeySpec& config_key(std::string_view section, std::string_view key) {
  for (const KeySpec& k : kKeys)
    if (k.section == section && k.key == key) return k;
  std::fprintf(stderr, "config_key: no %.*s.%.*s in the key table\n",
               static_cast<int>(section.size()), section.data(), static_cast<int>(key.size()),
               key.data());
  std::abort();
}

std::string config_reference() {
  std::string out;
  for (const Section& s : kSections) {
    out += "### " + std::string(s.heading) + "\n";
    out += "| key | type | default | range / rule | meaning |\n|---|---|---|---|---|\n";
    for (const KeySpec& k : kKeys) {
      const bool mine =
          k.section == s.name || (k.section.size() > s.name.size() &&
                                  k.section.starts_with(s.name) && k.section[s.name.size()] == '.');
      if (!mine) continue;
      out += "| `" + display_key(k, s.name) + "` | " + std::string(k.type) + " | " +
             std::string(k.def) + " | " + range_text(k) + " | " + std::string(k.meaning) + " |\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace rocedp::config
