// fuzz_util.h: what the fuzz targets (and make_seeds.cc) share: the codec
// variants, the in-memory NBD device and the socketpair driver that feeds a
// byte stream to one server-side nbd::Connection, and the NBD client
// messages the seeds are made of.
//
// Not thread-safe: each fuzz target runs one input at a time.
#ifndef ZTIER_FUZZ_FUZZ_UTIL_H_
#define ZTIER_FUZZ_FUZZ_UTIL_H_

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "connection.h"  // nbd's private header (src/nbd/connection.h)
#include "nbd/protocol.h"
#include "ztier/codec.h"
#include "ztier/device.h"

namespace ztier::fuzz {

inline constexpr std::size_t kPage = 4096;

// Stops the process with a message: libFuzzer records the input as a crash.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

// ---- Codecs ----

struct CodecVariant {
  std::string name;
  std::string params;  // algorithm_params; "dict", "rawdict": a dictionary
  std::shared_ptr<const Codec> codec;
};

// A dictionary trained (ZDICT format: a header and entropy tables before
// its content) on 256 pages of text-like words, the same in every run; with
// `content`, its content alone (the plain form). Built once.
inline std::shared_ptr<const std::vector<std::byte>> FuzzDictionary(
    bool content) {
  static const auto dicts = [] {
    std::vector<std::vector<std::byte>> pages(256);
    std::uint32_t x = 12345;
    for (auto& page : pages) {
      while (page.size() < kPage) {
        x = x * 1103515245 + 12345;
        for (int i = 0, n = 2 + static_cast<int>(x >> 29); i < n; ++i) {
          page.push_back(static_cast<std::byte>('a' + (x >> (i + 12)) % 8));
        }
        page.push_back(std::byte{' '});
      }
      page.resize(kPage);
    }
    const std::vector<std::span<const std::byte>> samples(pages.begin(),
                                                          pages.end());
    auto trained = TrainDictionary(samples, 8192);
    if (!trained) Fail("TrainDictionary: " + trained.error().ToString());
    auto dict = std::make_shared<const std::vector<std::byte>>(
        std::move(*trained));
    const auto part = DictionaryContent(*dict);
    auto raw = std::make_shared<const std::vector<std::byte>>(part.begin(),
                                                              part.end());
    return std::pair{dict, raw};
  }();
  return content ? dicts.second : dicts.first;
}

// Every registered codec at its default level, then a few other levels
// (those MakeCodec refuses are left out), then lz4 and zstd with a
// dictionary in memory (as a store's trained one), zstd's both as plain
// content and auto-detected. Built once.
inline const std::vector<CodecVariant>& CodecVariants() {
  static const std::vector<CodecVariant> variants = [] {
    std::vector<CodecVariant> v;
    auto add = [&v](std::string_view name, std::string_view params) {
      auto c = MakeCodec(name, params);
      if (c) v.push_back({std::string(name), std::string(params), *c});
    };
    auto dict = FuzzDictionary(false);
    auto raw = FuzzDictionary(true);
    auto add_dict = [&v](std::string_view name,
                         std::shared_ptr<const std::vector<std::byte>> bytes,
                         bool content_only) {
      CodecParams params;
      params.dict = std::move(bytes);
      params.dict_content_only = content_only;
      auto c = MakeCodec(name, params);
      if (!c) Fail("MakeCodec with a dictionary: " + c.error().ToString());
      v.push_back({std::string(name), content_only ? "rawdict" : "dict", *c});
    };
    for (std::string_view name : CodecNames()) add(name, "");
    add("lz4", "level=8");
    add("lz4hc", "level=1");
    add("lz4hc", "level=12");
    add("zstd", "level=-7");
    add("zstd", "level=1");
    add("zstd", "level=12");
    add("deflate", "level=1");
    add("deflate", "level=12");
    add_dict("lz4", raw, false);
    add_dict("zstd", dict, false);
    add_dict("zstd", raw, true);
    return v;
  }();
  return variants;
}

// ---- NBD ----

inline constexpr std::uint64_t kNbdDiskBytes = 64 << 10;  // 16 pages

// What the data checks fill a device of kNbdDiskBytes with: each byte its
// page's index and its place, mixed, so that a page changed, moved or
// dropped shows. Built once.
inline const std::vector<std::byte>& DevicePattern() {
  static const std::vector<std::byte> pattern = [] {
    std::vector<std::byte> d(kNbdDiskBytes);
    for (std::size_t i = 0; i < d.size(); ++i) {
      d[i] = static_cast<std::byte>((i / kPage) * 37 + (i % 251));
    }
    return d;
  }();
  return pattern;
}

// The registry the NBD targets serve: zram0 (64 KiB, lz4, initialised) and
// zram1 (uninitialised). Kept for the whole run.
inline DeviceRegistry* NbdRegistry() {
  static DeviceRegistry* registry = [] {
    DeviceDefaults d;
    d.streams = 1;
    auto* r = new DeviceRegistry(d);
    auto z0 = r->Add("zram0");
    if (!z0 || !(*z0)->SetDisksize(kNbdDiskBytes).ok()) Fail("zram0 setup");
    if (!r->Add("zram1")) Fail("zram1 setup");
    return r;
  }();
  return registry;
}

inline nbd::WorkQueue* NbdQueue() {
  static auto* queue = new nbd::WorkQueue(1, nbd::Connection::Run);
  return queue;
}

// Limits small enough that the queue path (requests over inline_max_bytes)
// is reachable with a 64 KiB device.
inline nbd::ConnectionLimits NbdLimits() {
  nbd::ConnectionLimits l;
  l.max_request_bytes = 1 << 20;
  l.inline_max_bytes = 8 << 10;
  l.max_in_flight = 4;
  l.max_in_flight_bytes = 128 << 10;
  return l;
}

// Runs one server-side Connection (handshake, then transmission) over a
// socketpair: writes prefix + data into the client end, then shuts down its
// writing side, and reads (and drops) the server's replies until the server
// closes. Single-threaded on this side: one poll() loop does both.
inline void RunNbdConnection(std::span<const std::byte> prefix,
                             std::span<const std::byte> data) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    Fail("socketpair");
  }
  auto* conn = new nbd::Connection(sv[1], NbdRegistry(), NbdQueue(),
                                   NbdLimits(), [](nbd::Connection*) {});
  conn->Start();
  const int fd = sv[0];
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  std::vector<std::byte> input(prefix.begin(), prefix.end());
  input.insert(input.end(), data.begin(), data.end());
  std::size_t sent = 0;
  bool shut = false;
  static std::byte sink[64 << 10];
  for (;;) {
    if (!shut && sent == input.size()) {
      ::shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      Fail("poll");
    }
    if (!shut && (p.revents & POLLOUT) != 0) {
      const ssize_t n = ::send(fd, input.data() + sent, input.size() - sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        sent = input.size();  // the server closed: stop writing
      }
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0) break;  // the server closed the connection
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
  }
  conn->Join();
  delete conn;
  ::close(fd);
}

// Client messages, big-endian, for seeds and the transmission prefix.
class NbdWriter {
 public:
  template <typename T>
  NbdWriter& Put(T v) {
    const T be = nbd::ToBig(v);
    const auto* p = reinterpret_cast<const std::byte*>(&be);
    out_.insert(out_.end(), p, p + sizeof(T));
    return *this;
  }
  NbdWriter& Bytes(std::string_view s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
    return *this;
  }
  // The client's flags (fixed newstyle, no zeroes).
  NbdWriter& ClientFlags() {
    return Put<std::uint32_t>(nbd::kClientFlagFixedNewstyle |
                              nbd::kClientFlagNoZeroes);
  }
  NbdWriter& Option(std::uint32_t option, std::string_view payload) {
    Put(nbd::kIHaveOpt).Put(option).Put<std::uint32_t>(payload.size());
    return Bytes(payload);
  }
  // NBD_OPT_GO / NBD_OPT_INFO payload: name, then `infos` info requests.
  static std::string InfoPayload(std::string_view name,
                                 std::vector<std::uint16_t> infos) {
    NbdWriter w;
    w.Put<std::uint32_t>(name.size()).Bytes(name);
    w.Put<std::uint16_t>(infos.size());
    for (std::uint16_t i : infos) w.Put(i);
    return w.String();
  }
  NbdWriter& Request(std::uint16_t type, std::uint16_t flags,
                     std::uint64_t cookie, std::uint64_t offset,
                     std::uint32_t length) {
    Put(nbd::kRequestMagic).Put(flags).Put(type).Put(cookie).Put(offset);
    return Put(length);
  }
  NbdWriter& Payload(std::size_t n, std::uint8_t fill) {
    out_.insert(out_.end(), n, std::byte{fill});
    return *this;
  }
  const std::vector<std::byte>& bytes() const { return out_; }
  std::string String() const {
    return std::string(reinterpret_cast<const char*>(out_.data()), out_.size());
  }

 private:
  std::vector<std::byte> out_;
};

// What fuzz_nbd_transmission puts before its input: the client's flags and
// NBD_OPT_GO for the default export (zram0).
inline const std::vector<std::byte>& TransmissionPrefix() {
  static const std::vector<std::byte> prefix = [] {
    NbdWriter w;
    w.ClientFlags().Option(nbd::kOptGo, NbdWriter::InfoPayload("", {}));
    return w.bytes();
  }();
  return prefix;
}

}  // namespace ztier::fuzz

#endif  // ZTIER_FUZZ_FUZZ_UTIL_H_
