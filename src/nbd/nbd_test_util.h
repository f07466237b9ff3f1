// nbd_test_util.h: helpers for the NBD server tests: a temp folder, a
// server on a Unix socket in it, a raw protocol client, and a way to run the
// real NBD clients (nbdinfo, nbdcopy, qemu-io, fio) as subprocesses.
#ifndef ZTIER_NBD_NBD_TEST_UTIL_H_
#define ZTIER_NBD_NBD_TEST_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "nbd/nbd_server.h"
#include "ztier/backing_file.h"
#include "ztier/device.h"

namespace ztier::nbd::testing {

// True when built with ASan or TSan: the tests then move less data.
bool UnderSanitizer();

// A fresh folder under $TMPDIR (or /tmp), removed with its files.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A registry with device "zram0" of `size` bytes (initialised), served on
// <tmp>/nbd.sock.
class ServerFixture {
 public:
  // zram0 of `size` bytes, in a registry with `defaults`.
  explicit ServerFixture(std::uint64_t size = 64 << 20,
                         NbdServerOptions options = {},
                         DeviceDefaults defaults = {});
  ~ServerFixture();
  Device& device() { return *device_; }
  DeviceRegistry& registry() { return registry_; }
  NbdServer& server() { return *server_; }
  const std::string& socket() const { return socket_; }
  std::string Uri(const std::string& name = "zram0") const {
    return "nbd+unix:///" + name + "?socket=" + socket_;
  }
  TempDir& tmp() { return tmp_; }
  // Waits (up to 5 s) until the server counts `n` connections.
  bool WaitConnections(std::size_t n);

 private:
  TempDir tmp_;
  std::string socket_;
  DeviceRegistry registry_;
  std::shared_ptr<Device> device_;
  std::unique_ptr<NbdServer> server_;
};

struct CommandResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout and stderr together
};
// Runs `command` with /bin/sh; returns its exit code and output.
CommandResult RunCommand(const std::string& command);
// True when `name` is found on $PATH (testing::Have: under CI=true a
// missing one also fails the test).
bool HaveProgram(const std::string& name);

// A raw protocol client over a Unix socket, for malformed traffic. Every
// read waits at most 10 s (then fails) so a broken server cannot hang a test.
class RawClient {
 public:
  explicit RawClient(const std::string& socket_path);
  ~RawClient();
  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Handshake: greeting, client flags, NBD_OPT_GO for `name`. Returns the
  // export size, or -1 on failure (*rep_error gets an error reply type).
  std::int64_t Go(const std::string& name, std::uint32_t* rep_error = nullptr);

  bool Send(const void* data, std::size_t n);
  bool SendRequest(std::uint16_t type, std::uint16_t flags,
                   std::uint64_t cookie, std::uint64_t offset,
                   std::uint32_t length,
                   std::span<const std::byte> payload = {});
  // Reads a simple reply header (and `read_length` data bytes if no error).
  bool ReadReply(std::uint32_t* error, std::uint64_t* cookie,
                 std::vector<std::byte>* data = nullptr,
                 std::uint32_t read_length = 0);
  bool Recv(void* data, std::size_t n);
  // True once the server has closed the connection (EOF within 10 s).
  bool WaitClosed();

  // Convenience: write then read back through this connection.
  bool Write(std::uint64_t offset, std::span<const std::byte> data,
             std::uint32_t* error);
  bool Read(std::uint64_t offset, std::uint32_t length,
            std::vector<std::byte>* out, std::uint32_t* error);
  void Close();

 private:
  int fd_ = -1;
  std::uint64_t next_cookie_ = 1;
};

// Backing reads that wait until Open(), then take `after_open` each: a
// backing store in an outage, and slow once it is back.
// DeviceDefaults::backing_file_wrap = Wrap() puts it around a device's
// backing file.
class GatedReads {
 public:
  explicit GatedReads(std::chrono::milliseconds after_open = {})
      : after_open_(after_open) {}
  BackingFileWrap Wrap();
  // Waits (up to 10 s) until `n` backing reads have begun.
  bool WaitReads(int n);
  void Open();
  int reads();

 private:
  const std::chrono::milliseconds after_open_;
  std::mutex mu_;
  std::condition_variable cv_;
  int reads_ = 0;
  bool open_ = false;
};

// Makes f's zram0 a device of data.size() bytes over the backing file "wb"
// of the fixture's folder (wrapped as its DeviceDefaults say), writes
// `data`, and writes page 0 back. Fails the test (ASSERT) on any error.
void WriteBackPageZero(ServerFixture& f, const std::vector<std::byte>& data);

// Deterministic pseudo-random bytes.
std::vector<std::byte> RandomBytes(std::size_t n, std::uint64_t seed);
bool WriteFile(const std::string& path, std::span<const std::byte> data);
std::vector<std::byte> ReadFile(const std::string& path);

}  // namespace ztier::nbd::testing

#endif  // ZTIER_NBD_NBD_TEST_UTIL_H_
