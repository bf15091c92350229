#pragma once
// pcap files through libpcap (Ethernet link type only): the conformance test,
// `rocedpctl decode` and the encoder samples. Not for the data path.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

struct PcapFrame {
  std::vector<std::uint8_t> data;
  std::uint32_t orig_len = 0;  // length on the wire (data may be shorter if snapped)
  std::int64_t ts_sec = 0;
  std::int64_t ts_usec = 0;
};

class PcapReader {
 public:
  PcapReader();
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  // False with error() set if the file cannot be opened or is not Ethernet.
  bool open(const std::string& path);
  // False at end of file or on a read error (then error() is non-empty).
  bool next(PcapFrame& frame);
  const std::string& error() const { return error_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

class PcapWriter {
 public:
  PcapWriter();
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  bool open(const std::string& path);
  // Frames get increasing timestamps 1 µs apart unless given.
  void write(Bytes frame);
  void write(Bytes frame, std::int64_t ts_sec, std::int64_t ts_usec);
  void close();
  const std::string& error() const { return error_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
  std::int64_t next_usec_ = 0;
};

// Whole file into memory; false with `error` set on failure.
bool read_pcap(const std::string& path, std::vector<PcapFrame>& frames, std::string& error);

}  // namespace rocedp::wire
