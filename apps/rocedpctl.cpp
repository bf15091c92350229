// rocedpctl: operator tool. Subcommands are rows of kCommands; each returns
// the process exit status (0 ok, 1 the check failed, 2 usage/unreadable input).

#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <string_view>

#include "dataplane/wire/decode.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Command {
  std::string_view name;
  std::string_view args;
  std::string_view help;
  int (*run)(std::span<char*> args);
};

// decode FILE.pcap...: one line per frame; exit 1 if any RoCEv2 packet fails
// to parse, fails its ICRC or does not re-encode to the same bytes.
int cmd_decode(std::span<char*> args) {
  bool quiet = false;
  int files = 0;
  bool any_failed = false;
  for (char* a : args) {
    const std::string_view arg(a);
    if (arg == "-q" || arg == "--quiet") {
      quiet = true;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "rocedpctl decode: unknown option %s\n", a);
      return kExitUsage;
    }
    ++files;
  }
  if (files == 0) {
    std::fprintf(stderr, "usage: rocedpctl decode [-q] FILE.pcap...\n");
    return kExitUsage;
  }
  for (char* a : args) {
    const std::string_view arg(a);
    if (arg == "-q" || arg == "--quiet") continue;
    rocedp::wire::DecodeStats stats;
    std::string error;
    if (files > 1) std::cout << "== " << arg << '\n';
    if (!rocedp::wire::decode_capture(std::string(arg), quiet ? nullptr : &std::cout, stats,
                                      error)) {
      std::cout.flush();
      std::fprintf(stderr, "rocedpctl decode: cannot read %s: %s\n", a, error.c_str());
      return kExitUsage;
    }
    std::cout << arg << ": " << stats.frames << " frames, " << stats.roce << " RoCEv2 packets ok, "
              << stats.failed << " failed, " << stats.skipped << " skipped (not RoCEv2)\n";
    for (const auto& [type, count] : stats.by_type)
      std::cout << "  " << count << "  " << type << '\n';
    any_failed = any_failed || stats.failed != 0;
  }
  return any_failed ? kExitFailed : kExitOk;
}

int cmd_help(std::span<char*> args);

// Later issues add telemetry queries here.
constexpr Command kCommands[] = {
    {"decode", "[-q] FILE.pcap...",
     "decode every RoCEv2 packet; verify parse, ICRC and re-encoding (exit 1 on any failure)",
     cmd_decode},
    {"help", "", "this text", cmd_help},
};

void usage(std::FILE* to) {
  std::fprintf(to, "usage: rocedpctl COMMAND [ARGS]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(to, "  %-8.*s %-22.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.args.size()), c.args.data(), static_cast<int>(c.help.size()),
                 c.help.data());
  }
}

int cmd_help(std::span<char*>) {
  usage(stdout);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return kExitUsage;
  }
  const std::string_view name(argv[1]);
  if (name == "-h" || name == "--help") return cmd_help({});
  for (const Command& c : kCommands) {
    if (c.name == name)
      return c.run(std::span<char*>(argv + 2, static_cast<std::size_t>(argc - 2)));
  }
  std::fprintf(stderr, "rocedpctl: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return kExitUsage;
}
