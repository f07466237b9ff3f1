// nbd_test_util.cc: see nbd_test_util.h.
#include "nbd_test_util.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "nbd/protocol.h"
#include "platform/socket.h"
#include "testing/faulty_file.h"
#include "testing/test_util.h"

namespace ztier::nbd::testing {

bool UnderSanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") +
                     "/ztier-nbd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ServerFixture::ServerFixture(std::uint64_t size, NbdServerOptions options,
                             DeviceDefaults defaults)
    : socket_(tmp_.File("nbd.sock")), registry_(std::move(defaults)) {
  device_ = *registry_.Add("zram0");
  if (!device_->SetDisksize(size).ok()) std::abort();
  options.unix_path = socket_;
  auto s = NbdServer::Start(options, &registry_);
  if (!s.has_value()) {
    std::fprintf(stderr, "server: %s\n", s.error().ToString().c_str());
    std::abort();
  }
  server_ = std::move(*s);
}

ServerFixture::~ServerFixture() { server_.reset(); }

bool ServerFixture::WaitConnections(std::size_t n) {
  for (int i = 0; i < 500; ++i) {
    if (server_->connections() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

bool HaveProgram(const std::string& name) {
  return ::ztier::testing::Have(name);
}

// ---- RawClient ----

RawClient::RawClient(const std::string& socket_path) {
  const Result<int> fd = platform::ConnectUnix(socket_path);
  fd_ = fd.has_value() ? *fd : -1;
}

RawClient::~RawClient() { Close(); }

void RawClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawClient::Send(const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const Result<std::size_t> w = platform::Send(fd_, p, n, false);
    if (!w.has_value() || *w == 0) return false;
    p += *w;
    n -= *w;
  }
  return true;
}

bool RawClient::Recv(void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    struct pollfd pfd = {fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 10000) <= 0) return false;
    const Result<std::size_t> r = platform::Receive(fd_, p, n);
    if (!r.has_value() || *r == 0) return false;
    p += *r;
    n -= *r;
  }
  return true;
}

bool RawClient::WaitClosed() {
  char buf[4096];
  for (;;) {
    struct pollfd pfd = {fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 10000) <= 0) return false;
    const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET;
  }
}

std::int64_t RawClient::Go(const std::string& name, std::uint32_t* rep_error) {
  if (fd_ < 0) return -1;
  NewstyleGreeting g;
  if (!Recv(&g, sizeof(g))) return -1;
  if (FromBig(g.nbd_magic) != kNbdMagic || FromBig(g.ihaveopt) != kIHaveOpt) {
    return -1;
  }
  const std::uint32_t cflags =
      ToBig(kClientFlagFixedNewstyle | kClientFlagNoZeroes);
  if (!Send(&cflags, 4)) return -1;
  std::vector<std::byte> data;
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    data.insert(data.end(), b, b + n);
  };
  const std::uint32_t len = ToBig(static_cast<std::uint32_t>(name.size()));
  put(&len, 4);
  put(name.data(), name.size());
  const std::uint16_t n_info = 0;
  put(&n_info, 2);
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptGo),
                    ToBig(static_cast<std::uint32_t>(data.size()))};
  if (!Send(&h, sizeof(h)) || !Send(data.data(), data.size())) return -1;
  std::int64_t size = -1;
  for (;;) {
    OptionReplyHeader r;
    if (!Recv(&r, sizeof(r))) return -1;
    std::vector<std::byte> body(FromBig(r.length));
    if (!body.empty() && !Recv(body.data(), body.size())) return -1;
    const std::uint32_t type = FromBig(r.reply_type);
    if (type == kRepAck) return size;
    if ((type & kRepFlagError) != 0) {
      if (rep_error != nullptr) *rep_error = type;
      return -1;
    }
    if (type == kRepInfo && body.size() == sizeof(InfoExport)) {
      InfoExport ie;
      std::memcpy(&ie, body.data(), sizeof(ie));
      if (FromBig(ie.info) == kInfoExport) {
        size = static_cast<std::int64_t>(FromBig(ie.export_size));
      }
    }
  }
}

bool RawClient::SendRequest(std::uint16_t type, std::uint16_t flags,
                            std::uint64_t cookie, std::uint64_t offset,
                            std::uint32_t length,
                            std::span<const std::byte> payload) {
  Request r = {ToBig(kRequestMagic), ToBig(flags), ToBig(type), cookie,
               ToBig(offset), ToBig(length)};
  return Send(&r, sizeof(r)) &&
         (payload.empty() || Send(payload.data(), payload.size()));
}

bool RawClient::ReadReply(std::uint32_t* error, std::uint64_t* cookie,
                          std::vector<std::byte>* data,
                          std::uint32_t read_length) {
  SimpleReply r;
  if (!Recv(&r, sizeof(r))) return false;
  if (FromBig(r.magic) != kSimpleReplyMagic) return false;
  *error = FromBig(r.error);
  *cookie = r.cookie;
  if (data != nullptr && *error == 0) {
    data->resize(read_length);
    return read_length == 0 || Recv(data->data(), read_length);
  }
  return true;
}

bool RawClient::Write(std::uint64_t offset, std::span<const std::byte> data,
                      std::uint32_t* error) {
  const std::uint64_t cookie = next_cookie_++;
  if (!SendRequest(kCmdWrite, 0, cookie, offset,
                   static_cast<std::uint32_t>(data.size()), data)) {
    return false;
  }
  std::uint64_t got = 0;
  return ReadReply(error, &got) && got == cookie;
}

bool RawClient::Read(std::uint64_t offset, std::uint32_t length,
                     std::vector<std::byte>* out, std::uint32_t* error) {
  const std::uint64_t cookie = next_cookie_++;
  if (!SendRequest(kCmdRead, 0, cookie, offset, length)) return false;
  std::uint64_t got = 0;
  return ReadReply(error, &got, out, length) && got == cookie;
}

BackingFileWrap GatedReads::Wrap() {
  return ztier::testing::FaultyFile([this](const FileIo& io, long result) {
    if (io.kind == FileIo::Kind::kRead) {
      std::unique_lock l(mu_);
      ++reads_;
      cv_.notify_all();
      cv_.wait_for(l, std::chrono::seconds(30), [&] { return open_; });
      l.unlock();
      std::this_thread::sleep_for(after_open_);
    }
    return result;
  });
}

bool GatedReads::WaitReads(int n) {
  std::unique_lock l(mu_);
  return cv_.wait_for(l, std::chrono::seconds(10), [&] { return reads_ == n; });
}

void GatedReads::Open() {
  std::lock_guard l(mu_);
  open_ = true;
  cv_.notify_all();
}

int GatedReads::reads() {
  std::lock_guard l(mu_);
  return reads_;
}

void WriteBackPageZero(ServerFixture& f, const std::vector<std::byte>& data) {
  ASSERT_OK(f.device().Reset());
  ASSERT_OK(f.device().SetBackingDev(f.tmp().File("wb")));
  ASSERT_OK(f.device().SetDisksize(data.size()));
  ASSERT_OK(f.device().Write(0, data));
  WritebackResult r;
  ASSERT_OK(f.device().Writeback("page_index=0", &r));
  ASSERT_EQ(r.written, 1u);
}

std::vector<std::byte> RandomBytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<std::byte>(rng());
  return out;
}

bool WriteFile(const std::string& path, std::span<const std::byte> data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()),
          static_cast<std::streamsize>(data.size()));
  return f.good();
}

std::vector<std::byte> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> v((std::istreambuf_iterator<char>(f)),
                      std::istreambuf_iterator<char>());
  std::vector<std::byte> out(v.size());
  std::memcpy(out.data(), v.data(), v.size());
  return out;
}

}  // namespace ztier::nbd::testing
