#include "dataplane/wire/pcap_io.hpp"

#include <pcap/pcap.h>

namespace rocedp::wire {

struct PcapReader::Impl {
  pcap_t* p = nullptr;
  ~Impl() {
    if (p) pcap_close(p);
  }
};

PcapReader::PcapReader() : impl_(std::make_unique<Impl>()) {}
PcapReader::~PcapReader() = default;

bool PcapReader::open(const std::string& path) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  impl_->p = pcap_open_offline(path.c_str(), errbuf);
  if (impl_->p == nullptr) {
    error_ = errbuf;
    return false;
  }
  if (pcap_datalink(impl_->p) != DLT_EN10MB) {
    error_ = path + ": link type is not Ethernet";
    return false;
  }
  return true;
}

bool PcapReader::next(PcapFrame& frame) {
  if (impl_->p == nullptr) return false;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(impl_->p, &hdr, &data);
  if (rc == 1) {
    frame.data.assign(data, data + hdr->caplen);
    frame.orig_len = hdr->len;
    frame.ts_sec = hdr->ts.tv_sec;
    frame.ts_usec = hdr->ts.tv_usec;
    return true;
  }
  if (rc == PCAP_ERROR) error_ = pcap_geterr(impl_->p);
  return false;
}

struct PcapWriter::Impl {
  pcap_t* p = nullptr;
  pcap_dumper_t* d = nullptr;
  void close() {
    if (d) pcap_dump_close(d);
    if (p) pcap_close(p);
    d = nullptr;
    p = nullptr;
  }
  ~Impl() { close(); }
};

PcapWriter::PcapWriter() : impl_(std::make_unique<Impl>()) {}
PcapWriter::~PcapWriter() = default;

bool PcapWriter::open(const std::string& path) {
  impl_->close();
  impl_->p = pcap_open_dead(DLT_EN10MB, 65535);
  if (impl_->p == nullptr) {
    error_ = "pcap_open_dead failed";
    return false;
  }
  impl_->d = pcap_dump_open(impl_->p, path.c_str());
  if (impl_->d == nullptr) {
    error_ = pcap_geterr(impl_->p);
    return false;
  }
  return true;
}

void PcapWriter::write(Bytes frame) {
  write(frame, next_usec_ / 1000000, next_usec_ % 1000000);
  ++next_usec_;
}

void PcapWriter::write(Bytes frame, std::int64_t ts_sec, std::int64_t ts_usec) {
  if (impl_->d == nullptr) return;
  pcap_pkthdr hdr{};
  hdr.ts.tv_sec = static_cast<time_t>(ts_sec);
  hdr.ts.tv_usec = static_cast<suseconds_t>(ts_usec);
  hdr.caplen = static_cast<bpf_u_int32>(frame.size());
  hdr.len = hdr.caplen;
  pcap_dump(reinterpret_cast<u_char*>(impl_->d), &hdr, frame.data());
}

void PcapWriter::close() {
  impl_->close();
}

bool read_pcap(const std::string& path, std::vector<PcapFrame>& frames, std::string& error) {
  PcapReader r;
  if (!r.open(path)) {
    error = r.error();
    return false;
  }
  PcapFrame f;
  while (r.next(f)) frames.push_back(f);
  if (!r.error().empty()) {
    error = r.error();
    return false;
  }
  return true;
}

}  // namespace rocedp::wire
