// control_server_test.cc: the control server in-process on a temporary
// socket, driven through ctl::Request / Call and raw sockets.
#include "ctl/control_server.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <regex>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ctl/attributes.h"
#include "ctl/status_report.h"
#include "testing/deaf_listener.h"
#include "testing/faulty_file.h"
#include "testing/test_util.h"

namespace ztier::ctl {
namespace {

namespace fs = std::filesystem;

// OpenSSL's allocations fail while this is set, on every thread (the
// backing store's cipher allocates through OpenSSL, not operator new).
std::atomic<bool> openssl_out_of_memory{false};
void* OpenSslMalloc(std::size_t n, const char*, int) {
  return openssl_out_of_memory.load() ? nullptr : std::malloc(n);
}
void* OpenSslRealloc(void* p, std::size_t n, const char*, int) {
  return openssl_out_of_memory.load() ? nullptr : std::realloc(p, n);
}
void OpenSslFree(void* p, const char*, int) { std::free(p); }
// Before OpenSSL's first allocation, or it keeps its own functions.
const bool openssl_hooked =
    CRYPTO_set_mem_functions(OpenSslMalloc, OpenSslRealloc, OpenSslFree) == 1;

// A connected raw socket, closed on scope exit.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    auto fd = Connect(path);
    if (fd.has_value()) fd_ = *fd;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Send(std::string_view data) {
    ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }
  // Everything until the server closes (or `max` bytes).
  std::string ReadToEof(std::size_t max = 1 << 20) {
    std::string out;
    char buf[4096];
    while (out.size() < max) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
};

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ztier_ctl.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (dir_ / "ztier.ctl").string();
    registry_ = std::make_unique<DeviceRegistry>(Defaults());
    ASSERT_TRUE(registry_->Add("zram0").has_value());
    StartServer();
  }
  // The registry's defaults: backing writes through fault_ and
  // refuse_writers_ below.
  DeviceDefaults Defaults() {
    DeviceDefaults defaults;
    defaults.streams = 1;
    // Backing writes fail with fault_ (a -errno) when it is not 0, and
    // each takes write_delay_ms_ longer; no writer can be made while
    // refuse_writers_ is set, for want of memory (as when mmap finds none
    // for its buffers: platform/backing_writers.h).
    defaults.backing_file_wrap =
        testing::FaultyFile([this](const FileIo& io, long result) {
          if (io.kind == FileIo::Kind::kNewWriter) {
            return refuse_writers_.load() ? long{-ENOMEM} : result;
          }
          if (io.kind == FileIo::Kind::kWrite && write_delay_ms_.load() > 0) {
            std::this_thread::sleep_for(
                std::chrono::milliseconds(write_delay_ms_.load()));
          }
          const long f = fault_.load();
          return io.kind == FileIo::Kind::kWrite && f != 0 ? f : result;
        });
    return defaults;
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void StartServer(ControlServerOptions options = {}) {
    server_.reset();
    auto s = ControlServer::Start(path_, registry_.get(), options);
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    server_ = std::move(*s);
  }

  Result<std::string> Show(const std::string& attr,
                           const std::string& dev = "zram0") {
    return Request(path_, dev, attr, nullptr);
  }
  Result<std::string> Store(const std::string& attr, const std::string& value,
                            const std::string& dev = "zram0") {
    return Request(path_, dev, attr, &value);
  }
  // The errno name of a failed request ("" if it succeeded).
  std::string Errno(const std::string& attr, const std::string* value,
                    const std::string& dev = "zram0") {
    auto r = Call(path_, {dev, attr, value ? std::optional(*value)
                                           : std::nullopt});
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    if (!r.has_value() || r->ok) return "";
    return r->errno_name;
  }
  std::string StoreErrno(const std::string& attr, const std::string& value,
                         const std::string& dev = "zram0") {
    return Errno(attr, &value, dev);
  }
  std::string ShowErrno(const std::string& attr,
                        const std::string& dev = "zram0") {
    return Errno(attr, nullptr, dev);
  }
  std::string MmStatColumn(int column) {
    auto mm = Show("mm_stat");
    EXPECT_TRUE(mm.has_value());
    std::istringstream in(mm.value_or(""));
    std::string word;
    for (int i = 0; i <= column; ++i) in >> word;
    return word;
  }

  // The error message of a failed store ("" if it succeeded).
  std::string StoreMessage(const std::string& attr, const std::string& value) {
    auto r = Call(path_, {"zram0", attr, value});
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    return r.has_value() && !r->ok ? r->message : "";
  }
  // Stores `pages` pages of compressible data from page 0 of zram0.
  void WritePages(std::size_t pages) {
    std::vector<std::byte> data(pages * 4096);
    for (std::size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<std::byte>("ztier"[i % 5] + i / 4096);
    }
    ASSERT_OK(registry_->Find("zram0")->Write(0, data));
  }

  std::atomic<long> fault_{0};
  std::atomic<int> write_delay_ms_{0};
  std::atomic<bool> refuse_writers_{false};
  fs::path dir_;
  std::string path_;
  std::unique_ptr<DeviceRegistry> registry_;
  std::unique_ptr<ControlServer> server_;
};

TEST_F(ControlServerTest, DisksizeAndInitstate) {
  EXPECT_EQ(Show("disksize"), "0\n");
  EXPECT_EQ(Show("initstate"), "0\n");
  EXPECT_EQ(StoreErrno("disksize", "0"), "EINVAL");
  EXPECT_EQ(StoreErrno("disksize", "12Q"), "EINVAL");
  EXPECT_EQ(Store("disksize", "1M\n"), "");
  EXPECT_EQ(Show("disksize"), "1048576\n");
  EXPECT_EQ(Show("initstate"), "1\n");
  EXPECT_EQ(StoreErrno("disksize", "2M"), "EBUSY");
  auto busy = Store("disksize", "2M");
  ASSERT_FALSE(busy.has_value());
  EXPECT_EQ(busy.error().code(), StatusCode::kBusy);
  EXPECT_TRUE(busy.error().message().starts_with("EBUSY: ")) << busy.error().message();
  // Page-aligned up, as zram.
  ASSERT_TRUE(registry_->Add("zram1").has_value());
  EXPECT_EQ(Store("disksize", "5000", "zram1"), "");
  EXPECT_EQ(Show("disksize", "zram1"), "8192\n");
}

TEST_F(ControlServerTest, CompAlgorithm) {
  auto list = Show("comp_algorithm");
  ASSERT_TRUE(list.has_value());
  EXPECT_NE(list->find("[lz4]"), std::string::npos) << *list;
  EXPECT_TRUE(list->ends_with("\n"));
  EXPECT_EQ(Store("comp_algorithm", "zstd\n"), "");
  list = Show("comp_algorithm");
  EXPECT_NE(list->find("[zstd]"), std::string::npos) << *list;
  EXPECT_NE(list->find(" lz4 "), std::string::npos) << *list;
  EXPECT_EQ(StoreErrno("comp_algorithm", "nope"), "EINVAL");
  EXPECT_EQ(StoreErrno("comp_algorithm", std::string(128, 'a')), "E2BIG");
  EXPECT_EQ(Store("algorithm_params", "level=3"), "");
  EXPECT_EQ(StoreErrno("algorithm_params", "level"), "EINVAL");
  // comp_params_store(): a dict= that cannot be read is EINVAL.
  EXPECT_EQ(StoreErrno("algorithm_params",
                       "level=3 dict=" + dir_.string() + "/no-such-dict"),
            "EINVAL");
  EXPECT_EQ(Store("disksize", "64K"), "");
  EXPECT_EQ(StoreErrno("comp_algorithm", "lz4"), "EBUSY");
  EXPECT_EQ(StoreErrno("algorithm_params", "level=1"), "EBUSY");
}

TEST_F(ControlServerTest, ResetSemanticsAndBusyWithClient) {
  EXPECT_EQ(StoreErrno("reset", "0"), "EINVAL");
  EXPECT_EQ(StoreErrno("reset", "yes"), "EINVAL");
  EXPECT_EQ(StoreErrno("reset", ""), "EINVAL");
  EXPECT_EQ(StoreErrno("reset", "70000"), "ERANGE");
  ASSERT_EQ(Store("comp_algorithm", "zstd"), "");
  ASSERT_EQ(Store("mem_limit", "1M"), "");
  ASSERT_EQ(Store("disksize", "1M"), "");
  {
    auto d = registry_->Find("zram0");
    auto ref = d->Attach();
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(StoreErrno("reset", "1"), "EBUSY");
    EXPECT_EQ(Show("initstate"), "1\n");
  }
  EXPECT_EQ(Store("reset", "1\n"), "");
  EXPECT_EQ(Show("initstate"), "0\n");
  EXPECT_EQ(Show("disksize"), "0\n");
  EXPECT_NE(Show("comp_algorithm")->find("[lz4]"), std::string::npos);
  EXPECT_EQ(MmStatColumn(3), "0");  // mem_limit cleared
  EXPECT_EQ(Store("reset", "1"), "");  // resetting a reset device is fine
}

TEST_F(ControlServerTest, StatFormats) {
  const std::regex mm("( {0,7}[0-9]+ ){8} {0,7}[0-9]+\n");
  const std::regex io(" {0,7}[0-9]+ {1,8}[0-9]+ 0 {1,8}[0-9]+\n");
  const std::regex dbg("version: 1\n {7}0 {1,8}[0-9]+\n");
  for (bool init : {false, true}) {
    if (init) {
      ASSERT_EQ(Store("disksize", "1M"), "");
      auto d = registry_->Find("zram0");
      std::vector<std::byte> data(8192, std::byte{7});
      ASSERT_OK(d->Write(0, data));
    }
    auto m = Show("mm_stat");
    ASSERT_TRUE(m.has_value());
    EXPECT_TRUE(std::regex_match(*m, mm)) << "'" << *m << "'";
    EXPECT_EQ(m->size(), 9 * 9u) << "'" << *m << "'";  // %8 columns, small values
    auto i = Show("io_stat");
    EXPECT_TRUE(std::regex_match(*i, io)) << "'" << *i << "'";
    auto g = Show("debug_stat");
    EXPECT_TRUE(std::regex_match(*g, dbg)) << "'" << *g << "'";
  }
  EXPECT_EQ(MmStatColumn(0), "8192");  // orig_data_size: two pages
}

TEST_F(ControlServerTest, MemLimitAndMemUsedMax) {
  EXPECT_EQ(Store("mem_used_max", "0"), "");  // uninit: accepted, as zram
  EXPECT_EQ(Store("mem_limit", "2M"), "");
  EXPECT_EQ(MmStatColumn(3), "2097152");
  EXPECT_EQ(Store("disksize", "1M"), "");
  EXPECT_EQ(MmStatColumn(3), "2097152");
  EXPECT_EQ(Store("mem_limit", "100"), "");  // page-aligned up
  EXPECT_EQ(MmStatColumn(3), "4096");
  EXPECT_EQ(Store("mem_limit", "0"), "");
  EXPECT_EQ(MmStatColumn(3), "0");
  EXPECT_EQ(StoreErrno("mem_limit", "lots"), "EINVAL");
  EXPECT_EQ(Store("mem_used_max", "0\n"), "");
  EXPECT_EQ(StoreErrno("mem_used_max", "1"), "EINVAL");
}

TEST_F(ControlServerTest, IdleAndCompact) {
  EXPECT_EQ(StoreErrno("idle", "all"), "EINVAL");  // uninit
  EXPECT_EQ(StoreErrno("compact", "1"), "EINVAL");
  ASSERT_EQ(Store("disksize", "1M"), "");
  EXPECT_EQ(Store("idle", "all"), "");
  EXPECT_EQ(Store("idle", "all\n"), "");
  EXPECT_EQ(Store("idle", "60"), "");
  EXPECT_EQ(StoreErrno("idle", "soon"), "EINVAL");
  EXPECT_EQ(Store("compact", ""), "");
  EXPECT_EQ(Store("compact", "anything at all"), "");
}

TEST_F(ControlServerTest, WrongDirectionUnknownAttributeUnknownDevice) {
  for (const char* wo : {"reset", "algorithm_params", "mem_limit",
                         "mem_used_max", "idle", "compact", "writeback",
                         "recompress", "train_dict"}) {
    EXPECT_EQ(ShowErrno(wo), "EACCES") << wo;
  }
  for (const char* ro :
       {"initstate", "mm_stat", "io_stat", "debug_stat", "bd_stat",
        "block_state"}) {
    EXPECT_EQ(StoreErrno(ro, "1"), "EACCES") << ro;
  }
  EXPECT_EQ(ShowErrno("max_comp_streams"), "ENOENT");
  EXPECT_EQ(StoreErrno("max_comp_streams", "2"), "ENOENT");
  EXPECT_EQ(ShowErrno(""), "ENOENT");
  EXPECT_EQ(ShowErrno("disksize", "zram9"), "ENODEV");
  EXPECT_EQ(StoreErrno("disksize", "1M", "zram9"), "ENODEV");
  EXPECT_EQ(ShowErrno("hot_add", "zram0"), "ENOENT");  // not a device attr
  EXPECT_EQ(ShowErrno("disksize", ""), "ENOENT");      // not a control op
  auto r = Show("disksize", "zram9");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
}

// A request for a device or attribute that is not there says what is:
// `ztier ctl zram1 disksize 1G` before any hot_add must not leave the user
// guessing.
TEST_F(ControlServerTest, UnknownDeviceAndAttributeErrorsSayWhatToDo) {
  ASSERT_TRUE(registry_->Add("swap").has_value());
  auto r = Call(path_, {"zram9", "disksize", std::string("1G")});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->errno_name, "ENODEV");
  EXPECT_NE(r->message.find("no device 'zram9'"), std::string::npos)
      << r->message;
  EXPECT_NE(r->message.find("swap zram0"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("hot_add"), std::string::npos) << r->message;
  r = Call(path_, {"zram0", "max_comp_streams", std::nullopt});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->errno_name, "ENOENT");
  EXPECT_NE(r->message.find("ztier ctl --help"), std::string::npos)
      << r->message;
}

TEST_F(ControlServerTest, BackingDev) {
  EXPECT_EQ(Show("backing_dev"), "none\n");
  EXPECT_EQ(StoreErrno("backing_dev", (dir_ / "no-dir/wb").string()), "ENOENT");
  EXPECT_EQ(StoreErrno("backing_dev", dir_.string()), "EINVAL");
  const std::string wb = (dir_ / "zram0.wb").string();
  EXPECT_EQ(Store("backing_dev", wb + "\n"), "");
  EXPECT_EQ(Show("backing_dev"), wb + "\n");
  EXPECT_EQ(Store("backing_dev", "none\n"), "");
  EXPECT_EQ(Show("backing_dev"), "none\n");
  EXPECT_EQ(Store("backing_dev", wb), "");
  EXPECT_EQ(Store("disksize", "1M"), "");
  EXPECT_EQ(StoreErrno("backing_dev", "none"), "EBUSY");
  EXPECT_EQ(Show("backing_dev"), wb + "\n");

  auto json = Show("status", "");
  ASSERT_TRUE(json.has_value());
  auto devices = DecodeStatusJson(*json);
  ASSERT_TRUE(devices.has_value()) << devices.error().ToString();
  EXPECT_EQ((*devices)[0].backing_dev, wb);

  EXPECT_EQ(Store("reset", "1"), "");
  EXPECT_EQ(Show("backing_dev"), "none\n");
}

// Request's error names the errno the server's reply named (ErrnoNameOf),
// not its code's: ENOENT rather than kNotFound's ENODEV, ENOSPC rather than
// kResourceExhausted's ENOMEM; its code and message are the reply's.
TEST_F(ControlServerTest, RequestNamesTheRepliedErrno) {
  auto missing = Store("backing_dev", (dir_ / "no-dir/wb").string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(ErrnoNameOf(missing.error()), "ENOENT")
      << missing.error().ToString();
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.error().message().rfind("ENOENT: ", 0), 0u)
      << missing.error().message();

  ASSERT_EQ(Store("backing_dev", (dir_ / "wb").string()), "");
  ASSERT_EQ(Store("disksize", "64K"), "");
  WritePages(4);
  fault_ = -ENOSPC;
  auto full = Store("writeback", "page_indexes=0-3");
  fault_ = 0;
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(ErrnoNameOf(full.error()), "ENOSPC") << full.error().ToString();
  EXPECT_EQ(full.error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.error().message().rfind("ENOSPC: ", 0), 0u)
      << full.error().message();
}

// Request's error for a reply `line` ("ERR ...\n") from a server that
// answers one request with it: a listener at `path` on a thread of its own.
Result<std::string> RequestAnsweredWith(const std::string& path,
                                        const std::string& line) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(
      ::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)),
      0);
  EXPECT_EQ(::listen(listener, 1), 0);
  std::thread server([&] {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_EQ(::send(fd, line.data(), line.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(line.size()));
    // The request read to the client's close: none left unread, which
    // would reset the connection (unix_release_sock()).
    char buf[4096];
    while (::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    ::close(fd);
  });
  auto r = Request(path, "zram0", "disksize", nullptr);
  server.join();
  ::close(listener);
  ::unlink(path.c_str());
  return r;
}

// A reply may name any errno (a backing_dev open's EMFILE, a server that
// spells EAGAIN EWOULDBLOCK): Request's error is that errno, with the code
// PosixError gives it (StatusCodeForErrno); a name that is no errno is
// kIoError with none (ErrnoNameOf then says EIO). The message is the
// reply's either way.
TEST_F(ControlServerTest, RequestReadsAnyRepliedErrnoName) {
  const std::string path = (dir_ / "canned.ctl").string();
  struct Case {
    std::string name;
    StatusCode code;
    int err;
  };
  for (const Case& c : {Case{"EMFILE", StatusCode::kResourceExhausted, EMFILE},
                        Case{"EWOULDBLOCK", StatusCode::kBusy, EAGAIN},
                        Case{"ENOTSUP", StatusCode::kUnsupported, EOPNOTSUPP},
                        Case{"EFOO", StatusCode::kIoError, 0}}) {
    auto r = RequestAnsweredWith(path, "ERR " + c.name + " no\n");
    ASSERT_FALSE(r.has_value()) << c.name;
    EXPECT_EQ(r.error().code(), c.code) << r.error().ToString();
    EXPECT_EQ(r.error().posix_errno(), c.err) << r.error().ToString();
    EXPECT_EQ(r.error().message(), c.name + ": no");
  }
}

// A backing_dev path that is there but may not be opened for reading and
// writing is refused at the store with open()'s errno, as zram's
// backing_dev_store() refuses it with filp_open()'s (EACCES), and stays
// "none". A read-only sysfs attribute is such a file even to root
// (kernfs refuses a write open of a file without a store method).
// A file that open(O_RDWR) refuses with EACCES, root or not: a read-only
// sysfs attribute (kernfs refuses a write open of a file without a store
// method); "" where there is none.
std::string FileThatRefusesWriting() {
  for (const char* p : {"/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
                        "/sys/kernel/address_bits", "/sys/power/state"}) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec) || ::access(p, R_OK) != 0) continue;
    const int fd = ::open(p, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      ::close(fd);
    } else if (errno == EACCES) {
      return p;
    }
  }
  return "";
}

TEST_F(ControlServerTest, BackingDevThatCannotBeOpenedIsEacces) {
  const std::string path = FileThatRefusesWriting();
  if (path.empty()) {
    GTEST_SKIP() << "no file here refuses open(O_RDWR) with EACCES";
  }
  EXPECT_EQ(StoreErrno("backing_dev", path), "EACCES");
  EXPECT_EQ(Show("backing_dev"), "none\n");
  EXPECT_EQ(Store("disksize", "1M"), "");
}

// A disksize store that fails in opening backing_dev answers open()'s
// errno, as `ztier serve` names it when the same store fails at start-up
// (ErrnoNameOf): ENOENT for a folder gone since the backing_dev store,
// not the ENODEV ("no such device") of a missing zram device; EACCES, not
// EIO, for a path that may not be opened read-write (a link put in the
// file's place since). The device stays uninitialised.
TEST_F(ControlServerTest, DisksizeNamesTheErrnoOfItsBackingFile) {
  const fs::path gone = dir_ / "gone";
  ASSERT_TRUE(fs::create_directory(gone));
  ASSERT_EQ(Store("backing_dev", (gone / "wb").string()), "");
  fs::remove(gone);
  EXPECT_EQ(StoreErrno("disksize", "1M"), "ENOENT");
  EXPECT_EQ(Show("initstate"), "0\n");

  const std::string refusing = FileThatRefusesWriting();
  if (refusing.empty()) {
    GTEST_SKIP() << "no file here refuses open(O_RDWR) with EACCES";
  }
  const fs::path wb = dir_ / "wb";
  ASSERT_EQ(Store("backing_dev", wb.string()), "");  // not there yet
  fs::create_symlink(refusing, wb);
  EXPECT_EQ(StoreErrno("disksize", "1M"), "EACCES");
  EXPECT_EQ(Show("initstate"), "0\n");
}

// A recompression algorithm's dict= file that disksize cannot read (gone
// since the algorithm_params store that read it) is EINVAL, as zram answers a
// dict= file it cannot read (comp_params_store()) and params its backend cannot
// set up at disksize (zcomp_create(), zstd_setup_params() in
// backend_zstd.c): never the file's ENOENT, which zram's disksize_store()
// never answers. The device stays uninitialised.
TEST_F(ControlServerTest, DisksizeWithADictionaryGoneIsEinval) {
  const std::string dict = (dir_ / "zstd.dict").string();
  std::ofstream(dict) << std::string(4096, 'z');
  ASSERT_EQ(Store("recomp_algorithm", "algo=zstd"), "");
  ASSERT_EQ(Store("algorithm_params", "priority=1 dict=" + dict), "");
  fs::remove(dict);
  EXPECT_EQ(StoreErrno("disksize", "1M"), "EINVAL");
  EXPECT_EQ(Show("initstate"), "0\n");
}

TEST_F(ControlServerTest, WritebackErrnos) {
  EXPECT_EQ(StoreErrno("writeback", "idle"), "EINVAL");  // uninit
  ASSERT_EQ(Store("disksize", "64K"), "");
  EXPECT_EQ(StoreErrno("writeback", "idle"), "ENODEV");  // no backing_dev
  ASSERT_EQ(Store("reset", "1"), "");
  ASSERT_EQ(Store("backing_dev", (dir_ / "wb").string()), "");
  ASSERT_EQ(Store("disksize", "64K"), "");  // 16 pages
  EXPECT_EQ(StoreErrno("writeback", "page_index=16"), "ERANGE");
  EXPECT_EQ(StoreErrno("writeback", "page_indexes=5-2"), "ERANGE");
  EXPECT_EQ(StoreErrno("writeback", "page_index=abc"), "EINVAL");
  EXPECT_EQ(StoreErrno("writeback", "bogus"), "EINVAL");
  EXPECT_EQ(StoreErrno("writeback", ""), "EINVAL");
  EXPECT_EQ(Store("writeback", "huge\n"), "");  // nothing to write

  WritePages(8);
  fault_ = -EIO;
  EXPECT_EQ(StoreErrno("writeback", "page_indexes=0-3"), "EIO");
  fault_ = -ENOSPC;
  EXPECT_EQ(StoreErrno("writeback", "page_indexes=0-3"), "ENOSPC");
  fault_ = 0;
  // No memory for the pass's writer is no memory, as zram's
  // writeback_store() answers a failed allocation: not a full device.
  refuse_writers_ = true;
  EXPECT_EQ(StoreErrno("writeback", "page_indexes=0-3"), "ENOMEM");
  refuse_writers_ = false;
  EXPECT_EQ(Show("bd_stat"), "       0        0        0\n");

  EXPECT_EQ(Store("writeback_limit_enable", "1"), "");
  EXPECT_EQ(Store("writeback_limit", "2"), "");
  EXPECT_EQ(StoreErrno("writeback", "page_indexes=0-3"), "EIO");
  const std::string message =
      StoreMessage("writeback", "page_indexes=0-7");  // limit now 0
  EXPECT_NE(message.find("writeback_limit"), std::string::npos) << message;
  EXPECT_EQ(Show("writeback_limit"), "0\n");
  EXPECT_EQ(Store("writeback_limit_enable", "0"), "");
  EXPECT_EQ(Store("writeback", "page_indexes=0-7"), "");
  EXPECT_EQ(Show("bd_stat"), "       8        0        8\n");
  EXPECT_EQ(MmStatColumn(0), "32768");  // written-back pages still count
}

// An encrypted backing store whose IOs cannot be sealed for want of memory
// (OpenSSL has none for the cipher's context): the pass ran out of memory,
// ENOMEM as zram's failed allocations, not ENOSPC as if the backing store
// were full; the pages stay in RAM and a pass with memory writes them.
TEST_F(ControlServerTest, WritebackOutOfMemoryForSealingIsEnomem) {
  ASSERT_TRUE(openssl_hooked) << "OpenSSL allocated before the test's hook";
  server_.reset();
  DeviceDefaults defaults = Defaults();
  defaults.backing_encrypt = true;
  registry_ = std::make_unique<DeviceRegistry>(defaults);
  ASSERT_TRUE(registry_->Add("zram0").has_value());
  StartServer();
  ASSERT_EQ(Store("backing_dev", (dir_ / "wb").string()), "");
  ASSERT_EQ(Store("disksize", "64K"), "");
  WritePages(8);
  // Each request is served on a new connection thread, whose cipher
  // context is still to be made.
  openssl_out_of_memory = true;
  const std::string errno_name = StoreErrno("writeback", "page_indexes=0-7");
  openssl_out_of_memory = false;
  EXPECT_EQ(errno_name, "ENOMEM");
  EXPECT_EQ(Show("bd_stat"), "       0        0        0\n");
  EXPECT_EQ(Store("writeback", "page_indexes=0-7"), "");
  EXPECT_EQ(Show("bd_stat"), "       8        0        8\n");
}

// recomp_algorithm, recompress, algorithm_params priority=/algo= and
// block_state with zram's errno names (recomp_algorithm_store(),
// recompress_store(), algorithm_params_store() in zram_drv.c).
TEST_F(ControlServerTest, RecompressionAttributesAndErrnos) {
  EXPECT_EQ(Show("recomp_algorithm"), "");
  for (const char* bad :
       {"priority=1", "algo=nosuch", "algo=zstd priority=4", "algo"}) {
    EXPECT_EQ(StoreErrno("recomp_algorithm", bad), "EINVAL") << bad;
  }
  EXPECT_EQ(StoreErrno("recompress", "type=idle"), "EINVAL");  // uninit
  EXPECT_EQ(StoreErrno("train_dict", ""), "EINVAL");          // uninit
  ASSERT_EQ(Store("recomp_algorithm", "algo=zstd\n"), "");
  EXPECT_EQ(Show("recomp_algorithm"), "#1: lzo lz4 lz4hc [zstd] deflate\n");
  for (const char* bad :
       {"algo=deflate level=1", "priority=1 level=99", "priority=4 level=1"}) {
    EXPECT_EQ(StoreErrno("algorithm_params", bad), "EINVAL") << bad;
  }
  EXPECT_EQ(StoreErrno("algorithm_params", "algo=zstd dict=/nonexistent/d"),
            "EINVAL");
  ASSERT_EQ(Store("algorithm_params", "algo=zstd level=9"), "");
  EXPECT_EQ(ShowErrno("block_state"), "EINVAL");  // uninitialised
  ASSERT_EQ(Store("disksize", "64K"), "");
  EXPECT_EQ(StoreErrno("recomp_algorithm", "algo=lz4hc"), "EBUSY");
  EXPECT_EQ(StoreErrno("algorithm_params", "priority=1 level=3"), "EBUSY");
  // Bad type, valueless token, threshold at the huge class, no algorithm
  // at that priority or by that name; a number past u64.
  for (const char* bad : {"type=incompressible", "idle", "threshold=4096",
                          "priority=2", "algo=deflate"}) {
    EXPECT_EQ(StoreErrno("recompress", bad), "EINVAL") << bad;
  }
  EXPECT_EQ(StoreErrno("recompress", "max_pages=18446744073709551616"),
            "ERANGE");
  WritePages(2);
  ASSERT_EQ(Store("idle", "all"), "");
  auto state = Show("block_state");
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  // "%12zd %12u.%06d %c%c%c%c%c%c\n": 40 bytes a line.
  EXPECT_EQ(state->size(), 2u * 40) << *state;
  EXPECT_EQ(state->substr(0, 13), "           0 ") << *state;
  EXPECT_EQ(state->substr(26, 7), "000000 ") << *state;
  EXPECT_EQ(state->substr(33, 7), "...i..\n") << *state;
  EXPECT_EQ(state->substr(40 + 33, 7), "...i..\n") << *state;
  EXPECT_EQ(Store("recompress", "type=idle max_pages=1"), "");
  state = Show("block_state");
  ASSERT_TRUE(state.has_value());
  // One slot tried: no longer idle, and recompressed (r) or marked
  // incompressible (n); the other untouched.
  const std::string flags = state->substr(33, 6) + state->substr(40 + 33, 6);
  EXPECT_EQ(std::count(flags.begin(), flags.end(), 'i'), 1) << *state;
  EXPECT_EQ(std::count(flags.begin(), flags.end(), 'r') +
                std::count(flags.begin(), flags.end(), 'n'),
            1)
      << *state;
}

// A block_state longer than the reply limit is refused by name, not cut.
// recomp_algorithm_store() hands algo= to __comp_algorithm_store(), which
// refuses a name of 128 bytes or more with E2BIG before looking it up, as
// comp_algorithm does.
TEST_F(ControlServerTest, RecompAlgorithmNameTooLongIsE2big) {
  const std::string long_name(128, 'z');
  EXPECT_EQ(StoreErrno("comp_algorithm", long_name), "E2BIG");
  EXPECT_EQ(StoreErrno("recomp_algorithm", "algo=" + long_name), "E2BIG");
  EXPECT_EQ(StoreErrno("recomp_algorithm", "algo=" + long_name + " priority=2"),
            "E2BIG");
  EXPECT_EQ(StoreErrno("recomp_algorithm", "algo=" + std::string(127, 'z')),
            "EINVAL");  // short enough: unknown
  // The token checks come first, as the kernel's.
  EXPECT_EQ(StoreErrno("recomp_algorithm", "algo=" + long_name + " priority=4"),
            "EINVAL");
}

// block_state's lines are "%12llu %12u.%06d %c%c%c%c%c%c\n", 40 bytes
// (PageStore::FormatBlockState): the 16 MiB reply limit holds 419,430 of
// them (16,777,200 bytes); one more is E2BIG.
TEST_F(ControlServerTest, BlockStatePastTheReplyLimitIsE2big) {
  constexpr std::uint64_t kFit = kMaxReplyTextBytes / 40;
  ASSERT_EQ(kFit, 419'430u);
  ASSERT_EQ(Store("disksize", std::to_string((kFit + 1) * 4096)), "");
  // Same-filled pages: no pool memory.
  auto d = registry_->Find("zram0");
  ASSERT_OK(d->WriteZeroes(0, kFit * 4096, true));
  auto all = Show("block_state");
  ASSERT_TRUE(all.has_value()) << all.error().ToString();
  EXPECT_EQ(all->size(), kFit * 40);
  EXPECT_EQ(all->find('\n'), 39u);
  EXPECT_TRUE(all->starts_with("           0 ")) << all->substr(0, 40);
  EXPECT_TRUE(all->ends_with(".000000 s.....\n"))
      << all->substr(all->size() - 40);

  ASSERT_OK(d->WriteZeroes(kFit * 4096, 4096, true));
  const std::string message = [&] {
    auto r = Call(path_, {"zram0", "block_state", std::nullopt});
    EXPECT_TRUE(r.has_value());
    EXPECT_FALSE(r.has_value() && r->ok);
    EXPECT_EQ(r.has_value() ? r->errno_name : "", "E2BIG");
    return r.has_value() ? r->message : "";
  }();
  EXPECT_NE(message.find(std::to_string(kMaxReplyTextBytes)),
            std::string::npos) << message;
}

// Each boolean attribute takes what the kernel's zram takes for it:
// compressed_writeback kstrtobool (lib/kstrtox.c), refusing the rest with
// one EINVAL; writeback_limit_enable kstrtoull (writeback_limit_enable_store
// in zram_drv.c: any nonzero number enables, "y" is EINVAL).
TEST_F(ControlServerTest, BooleanAttributesParseAsTheKernelsDo) {
  const std::vector<std::string> yes = {"1", "y", "Y", "yes", "t", "T",
                                        "true", "on", "ON", "oN", "1\n",
                                        "10", "yikes"};
  const std::vector<std::string> no = {"0", "n", "N", "no", "f", "F",
                                       "false", "off", "OFF", "oF", "0\n",
                                       "01", "never"};
  const std::vector<std::string> bad = {"", "2", "5", "-1", "o", "ox", "x",
                                        " 1", "\n", "ja"};
  for (const char* attr : {"compressed_writeback"}) {
    SCOPED_TRACE(attr);
    for (const auto& v : yes) {
      EXPECT_EQ(Store(attr, v), "") << "'" << v << "'";
      EXPECT_EQ(Show(attr), "1\n") << "'" << v << "'";
      ASSERT_EQ(Store(attr, "0"), "");
    }
    ASSERT_EQ(Store(attr, "1"), "");
    for (const auto& v : no) {
      EXPECT_EQ(Store(attr, v), "") << "'" << v << "'";
      EXPECT_EQ(Show(attr), "0\n") << "'" << v << "'";
      ASSERT_EQ(Store(attr, "1"), "");
    }
    for (const auto& v : bad) {
      auto r = Call(path_, {"zram0", attr, v});
      ASSERT_TRUE(r.has_value());
      EXPECT_FALSE(r->ok) << "'" << v << "'";
      EXPECT_EQ(r->errno_name, "EINVAL") << "'" << v << "'";
      EXPECT_NE(r->message.find("not a boolean"), std::string::npos)
          << r->message;
      EXPECT_EQ(Show(attr), "1\n") << "unchanged after '" << v << "'";
    }
  }
  for (const char* v : {"1", "5", "18446744073709551615", "1\n"}) {
    EXPECT_EQ(Store("writeback_limit_enable", v), "") << v;
    EXPECT_EQ(Show("writeback_limit_enable"), "1\n") << v;
    ASSERT_EQ(Store("writeback_limit_enable", "0"), "");
    EXPECT_EQ(Show("writeback_limit_enable"), "0\n");
  }
  for (const char* v : {"y", "on", "", "-1", "x"}) {
    EXPECT_EQ(StoreErrno("writeback_limit_enable", v), "EINVAL") << v;
  }
}

TEST_F(ControlServerTest, WritebackTunables) {
  EXPECT_EQ(Show("writeback_limit"), "0\n");
  EXPECT_EQ(Store("writeback_limit", "1000\n"), "");
  EXPECT_EQ(Show("writeback_limit"), "1000\n");
  EXPECT_EQ(StoreErrno("writeback_limit", "lots"), "EINVAL");
  EXPECT_EQ(StoreErrno("writeback_limit", "-1"), "EINVAL");
  EXPECT_EQ(StoreErrno("writeback_limit", "99999999999999999999"), "ERANGE");
  EXPECT_EQ(Show("writeback_limit"), "1000\n");

  EXPECT_EQ(Show("writeback_limit_enable"), "0\n");
  EXPECT_EQ(Store("writeback_limit_enable", "5"), "");  // kstrtoull
  EXPECT_EQ(Show("writeback_limit_enable"), "1\n");
  EXPECT_EQ(Store("writeback_limit_enable", "0\n"), "");
  EXPECT_EQ(Show("writeback_limit_enable"), "0\n");
  EXPECT_EQ(StoreErrno("writeback_limit_enable", "yes"), "EINVAL");

  EXPECT_EQ(Show("writeback_batch_size"), "32\n");
  EXPECT_EQ(StoreErrno("writeback_batch_size", "0"), "EINVAL");
  // At most what the writeback io_uring ring holds; the message says so.
  EXPECT_EQ(Store("writeback_batch_size", "1024"), "");
  EXPECT_EQ(StoreErrno("writeback_batch_size", "1025"), "EINVAL");
  {
    const std::string v = "1025";
    auto r = Call(path_, {"zram0", "writeback_batch_size", v});
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->message.find("1..1024"), std::string::npos) << r->message;
  }
  EXPECT_EQ(Show("writeback_batch_size"), "1024\n");
  EXPECT_EQ(StoreErrno("writeback_batch_size", "4294967296"), "ERANGE");
  EXPECT_EQ(StoreErrno("writeback_batch_size", "x"), "EINVAL");
  EXPECT_EQ(Store("writeback_batch_size", "8\n"), "");
  EXPECT_EQ(Show("writeback_batch_size"), "8\n");

  EXPECT_EQ(Show("compressed_writeback"), "0\n");
  EXPECT_EQ(Store("compressed_writeback", "yes\n"), "");
  EXPECT_EQ(Show("compressed_writeback"), "1\n");
  EXPECT_EQ(Store("compressed_writeback", "off"), "");
  EXPECT_EQ(Show("compressed_writeback"), "0\n");
  EXPECT_EQ(Store("compressed_writeback", "1"), "");
  EXPECT_EQ(StoreErrno("compressed_writeback", "maybe"), "EINVAL");
  EXPECT_EQ(StoreErrno("compressed_writeback", ""), "EINVAL");

  EXPECT_EQ(Show("bd_stat"), "       0        0        0\n");
  ASSERT_EQ(Store("disksize", "1M"), "");
  EXPECT_EQ(StoreErrno("compressed_writeback", "0"), "EBUSY");
  EXPECT_EQ(Show("compressed_writeback"), "1\n");
  // Any time, initialised or not.
  EXPECT_EQ(Store("writeback_limit", "7"), "");
  EXPECT_EQ(Store("writeback_limit_enable", "1"), "");
  EXPECT_EQ(Store("writeback_batch_size", "1"), "");
  ASSERT_EQ(Store("reset", "1"), "");
  EXPECT_EQ(Show("writeback_limit"), "7\n");  // reset keeps them, as zram
  EXPECT_EQ(Show("writeback_limit_enable"), "1\n");
  EXPECT_EQ(Show("writeback_batch_size"), "1\n");
}

TEST_F(ControlServerTest, HotAddHotRemoveAndStatus) {
  EXPECT_EQ(Show("hot_add", ""), "1\n");
  EXPECT_EQ(Show("hot_add", ""), "2\n");
  EXPECT_EQ(StoreErrno("hot_add", "1", ""), "EACCES");
  EXPECT_EQ(ShowErrno("hot_remove", ""), "EACCES");
  EXPECT_EQ(Show("initstate", "zram2"), "0\n");
  EXPECT_EQ(Store("hot_remove", "1\n", ""), "");
  EXPECT_EQ(StoreErrno("hot_remove", "1", ""), "ENODEV");
  EXPECT_EQ(ShowErrno("disksize", "zram1"), "ENODEV");
  EXPECT_EQ(Show("hot_add", ""), "1\n");  // the lowest free number again

  // A device with a client cannot go.
  ASSERT_EQ(Store("disksize", "1M", "zram2"), "");
  {
    auto ref = registry_->Find("zram2")->Attach();
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(StoreErrno("hot_remove", "2", ""), "EBUSY");

    auto json = Show("status", "");
    ASSERT_TRUE(json.has_value());
    auto devices = DecodeStatusJson(*json);
    ASSERT_TRUE(devices.has_value()) << devices.error().ToString() << *json;
    ASSERT_EQ(devices->size(), 3u);
    EXPECT_EQ((*devices)[0].name, "zram0");
    EXPECT_EQ((*devices)[0].initstate, 0u);
    EXPECT_EQ((*devices)[0].algorithm, "lz4");
    EXPECT_EQ((*devices)[2].name, "zram2");
    EXPECT_EQ((*devices)[2].initstate, 1u);
    EXPECT_EQ((*devices)[2].disksize, 1u << 20);
    EXPECT_EQ((*devices)[2].clients, 1u);
    EXPECT_EQ((*devices)[2].streams, 1u);
  }
  EXPECT_EQ(Store("hot_remove", "zram2", ""), "");  // by name
  EXPECT_EQ(StoreErrno("hot_remove", "zram2", ""), "ENODEV");
  EXPECT_EQ(StoreErrno("hot_remove", "", ""), "ENODEV");
  // kstrtoint: past INT_MAX is ERANGE, not a device that is not there.
  EXPECT_EQ(StoreErrno("hot_remove", "2147483648", ""), "ERANGE");
  EXPECT_EQ(StoreErrno("hot_remove", "4294967296", ""), "ERANGE");
  EXPECT_EQ(StoreErrno("nonsense", "", ""), "ENOENT");
}

// hot_add has no cap, as zram's (zram_add() in zram_drv.c takes any free
// id: idr_alloc(..., 0, 0, ...)); a status report of so many devices that
// it is past the 16 MiB reply limit is E2BIG from the server, saying so,
// not a reply the client must refuse as malformed. The devices are still
// there, one at a time.
TEST_F(ControlServerTest, StatusPastTheReplyLimitIsE2big) {
  // Each device with a backing_dev path of 4000 bytes ("./" over and
  // over), so that some 4,000 devices, not 26,000, fill the report.
  std::string wb = dir_.string();
  while (wb.size() < 4000) wb += "/.";
  wb += "/wb";
  auto size = [&] {
    return EncodeStatusJson(CollectStatus(*registry_)).size();
  };
  ASSERT_OK(registry_->Find("zram0")->SetBackingDev(wb));
  const std::size_t one = size();
  std::size_t devices = 1;
  while (size() <= kMaxReplyTextBytes) {
    // Later entries have longer names: at least `one` bytes each.
    const std::size_t more = (kMaxReplyTextBytes - size()) / one + 1;
    for (std::size_t i = 0; i < more; ++i, ++devices) {
      auto d = registry_->HotAdd();
      ASSERT_TRUE(d.has_value());
      ASSERT_OK((*d)->SetBackingDev(wb));
    }
  }
  auto r = Call(path_, {"", "status", std::nullopt});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->errno_name, "E2BIG");
  EXPECT_NE(r->message.find(std::to_string(devices) + " devices"),
            std::string::npos) << r->message;
  EXPECT_NE(r->message.find(std::to_string(kMaxReplyTextBytes)),
            std::string::npos) << r->message;
  // hot_add goes on, and each device answers on its own.
  EXPECT_EQ(Show("hot_add", ""), std::to_string(devices) + "\n");
  EXPECT_EQ(Show("backing_dev", "zram" + std::to_string(devices - 1)),
            wb + "\n");
}

// hot_remove_store() reads the id with kstrtoint(buf, 10): a leading '+'
// is part of the number ("+1" removes zram1), and a negative id
// is EINVAL, not a device that is not there.
TEST_F(ControlServerTest, HotRemoveParsesTheIdAsKstrtoint) {
  EXPECT_EQ(Show("hot_add", ""), "1\n");
  EXPECT_EQ(StoreErrno("hot_remove", "-1", ""), "EINVAL");
  // INT_MIN is an int, and negative; one below it is not an int.
  EXPECT_EQ(StoreErrno("hot_remove", "-2147483648", ""), "EINVAL");
  EXPECT_EQ(StoreErrno("hot_remove", "-2147483649", ""), "ERANGE");
  EXPECT_EQ(Store("hot_remove", "+1\n", ""), "");
  EXPECT_EQ(registry_->Find("zram1"), nullptr);
  EXPECT_EQ(StoreErrno("hot_remove", "+1", ""), "ENODEV");
}

TEST_F(ControlServerTest, SocketModeIs0600AndStopRemovesIt) {
  struct stat st;
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // No staging directory is left behind.
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  server_->Stop();
  EXPECT_FALSE(fs::exists(path_));
  server_->Stop();  // twice is fine
}

// A listener that accepts nothing (a stopped or wedged server) with its
// backlog full makes a blocking connect(2) wait for room
// (unix_stream_connect() in net/unix/af_unix.c); Connect waits at most its
// timeout, so `ztier status` against such a server ends.
TEST_F(ControlServerTest, ConnectToAServerThatAcceptsNothingTimesOut) {
  const std::string path = (dir_ / "stuck.ctl").string();
  ztier::testing::DeafListener deaf(path);
  ASSERT_EQ(deaf.error(), "");
  auto connected =
      std::async(std::launch::async, [&] { return Connect(path, 200); });
  const bool ended =
      connected.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  deaf.Close();  // wakes a connect still waiting
  ASSERT_TRUE(ended) << "connect still waiting after 10 s";
  const Result<int> r = connected.get();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("accepts no connection"),
            std::string::npos)
      << r.error().ToString();
}

TEST_F(ControlServerTest, RefusesLiveServerAndNonSocketReplacesStale) {
  auto second = ControlServer::Start(path_, registry_.get());
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kBusy);
  EXPECT_EQ(Show("initstate"), "0\n");  // the first one still serves

  const std::string file = (dir_ / "plain").string();
  std::ofstream(file) << "keep me";
  // A file that is not a socket: the path is wrong (as for the NBD and
  // metrics servers), and the file is kept.
  auto on_file = ControlServer::Start(file, registry_.get());
  ASSERT_FALSE(on_file.has_value());
  EXPECT_EQ(on_file.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_file.error().message().find("not a socket"), std::string::npos)
      << on_file.error().ToString();
  std::ifstream in(file);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "keep me");

  // A stale socket: bound, then its process went away without unlinking.
  server_.reset();
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  ASSERT_TRUE(fs::is_socket(path_));
  auto c = Connect(path_);
  EXPECT_FALSE(c.has_value());
  StartServer();
  EXPECT_EQ(Show("initstate"), "0\n");

  auto too_long = ControlServer::Start("/tmp/" + std::string(200, 'x'),
                                       registry_.get());
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.error().code(), StatusCode::kInvalidArgument);
}

TEST_F(ControlServerTest, NoServerIsAClearError) {
  server_.reset();
  auto r = Show("disksize");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_NE(r.error().message().find(path_), std::string::npos);
}

TEST_F(ControlServerTest, GarbageAndOversizedRequestsGetErrors) {
  RawClient stalled(path_);  // holds a half request throughout
  ASSERT_TRUE(stalled.ok());
  stalled.Send("REQ 5 ");

  {
    RawClient garbage(path_);
    garbage.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string reply = garbage.ReadToEof();
    EXPECT_TRUE(reply.starts_with("ERR EINVAL ")) << reply;
    EXPECT_TRUE(reply.ends_with("\n"));
    EXPECT_EQ(Show("initstate"), "0\n");
  }
  {
    RawClient binary(path_);
    binary.Send(std::string("\0\xff\x01\n", 4));
    EXPECT_TRUE(binary.ReadToEof().starts_with("ERR EINVAL "));
  }
  {
    RawClient big(path_);
    big.Send("REQ 5 8 1000000\nzram0disksize");
    EXPECT_TRUE(big.ReadToEof().starts_with("ERR E2BIG "));
  }
  // Through the client, which sends it all: the server hangs up early, and
  // the client still reads the reply.
  const std::string huge(1 << 20, 'x');
  EXPECT_EQ(StoreErrno("algorithm_params", huge), "E2BIG");
  // The server is fine, and two requests on one connection both work.
  RawClient two(path_);
  ASSERT_TRUE(two.ok());
  for (int i = 0; i < 2; ++i) {
    auto r = Exchange(two.fd(), {"zram0", "disksize", std::nullopt});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->text, "0\n");
  }
  // stalled + two, once the server has counted the closed ones out.
  for (int i = 0; i < 2000 && server_->connections() > 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server_->connections(), 2u);
}

// Over the cap, a new client takes the place of the oldest connection
// waiting for a request: stalled or trickling clients cannot keep every
// other client (`ztier ctl`, `ztier status`) out for their idle timeout.
TEST_F(ControlServerTest, OverTheCapANewClientTakesTheOldestWaitingPlace) {
  ControlServerOptions o;
  o.max_connections = 2;
  o.idle_timeout_ms = 60'000;  // the test never waits for it
  StartServer(o);
  RawClient a(path_);
  RawClient b(path_);
  a.Send("REQ 0 6 -\nsta");  // incomplete
  b.Send("R");
  // Wait until both are being served.
  for (int i = 0; i < 2000 && server_->connections() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(server_->connections(), 2u);
  // A third is served at once, in the place of the oldest, a.
  EXPECT_EQ(Show("initstate"), "0\n") << "third client";
  EXPECT_EQ(a.ReadToEof(), "") << "the oldest waiting client is closed";
  EXPECT_LE(server_->connections(), 2u);
  // b, younger, keeps its place and is answered.
  b.Send("EQ 5 9 -\nzram0initstate");
  ASSERT_EQ(::shutdown(b.fd(), SHUT_WR), 0);
  EXPECT_EQ(b.ReadToEof(), "OK 2\n0\n");
}

// A request that arrives a byte at a time, each well within the idle
// timeout, is still cut off idle_timeout_ms after its first byte.
TEST_F(ControlServerTest, ATricklingRequestTimesOutFromItsFirstByte) {
  ControlServerOptions o;
  o.idle_timeout_ms = 1500;
  StartServer(o);
  RawClient slow(path_);
  const std::string request = "REQ 0 6 -\nstatus";
  std::size_t sent = 0;
  struct pollfd p = {slow.fd(), POLLIN, 0};
  const auto t0 = std::chrono::steady_clock::now();
  while (sent < request.size()) {
    slow.Send(request.substr(sent++, 1));
    if (::poll(&p, 1, 500) > 0) break;  // answered: no more bytes
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(sent, request.size()) << "the whole request went through";
  EXPECT_GE(waited, std::chrono::milliseconds(1400));
  EXPECT_TRUE(slow.ReadToEof().starts_with("ERR ETIMEDOUT "));
}

// A request whose first bytes came in while the one before it was being
// worked on has idle_timeout_ms from the end of that work (its reply
// sent), not from the start of it: a slow writeback does not time out
// the request queued behind it.
TEST_F(ControlServerTest, ARequestBehindASlowOneTimesOutFromItsReply) {
  ControlServerOptions o;
  o.idle_timeout_ms = 1000;
  StartServer(o);
  ASSERT_EQ(Store("backing_dev", (dir_ / "wb").string()), "");
  ASSERT_EQ(Store("disksize", "64K"), "");
  WritePages(2);
  // The writeback of 2 pages: 1.2 s or more (one write or two), past the
  // timeout.
  write_delay_ms_ = 1200;
  RawClient c(path_);
  ASSERT_TRUE(c.ok());
  // The writeback, then the first half of a show of initstate.
  c.Send("REQ 5 9 16\nzram0writebackpage_indexes=0-1" "REQ 5 9 -\nzram0");
  struct pollfd p = {c.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1) << "no reply to the writeback";
  const auto replied = std::chrono::steady_clock::now();
  write_delay_ms_ = 0;
  char buf[4096];
  const ssize_t n = ::recv(c.fd(), buf, sizeof(buf), 0);
  ASSERT_GT(n, 0);
  const std::string first(buf, static_cast<std::size_t>(n));
  EXPECT_TRUE(first.starts_with("OK 0\n")) << first;
  // Well within idle_timeout_ms of the reply, the rest of the request.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c.Send("initstate");
  ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
  const std::string rest =
      first.substr(std::min<std::size_t>(first.size(), 5)) + c.ReadToEof();
  EXPECT_EQ(rest, "OK 2\n1\n")
      << "after "
      << std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - replied)
             .count()
      << " ms";
}

// A client that ends its side inside a request is told why it gets no
// answer; the server goes on.
TEST_F(ControlServerTest, ARequestCutShortByTheClientGetsEinval) {
  RawClient cut(path_);
  cut.Send("REQ 5 7 -\nzram0mm_sta");
  ASSERT_EQ(::shutdown(cut.fd(), SHUT_WR), 0);
  const std::string reply = cut.ReadToEof();
  EXPECT_TRUE(reply.starts_with("ERR EINVAL request truncated")) << reply;
  EXPECT_EQ(Show("initstate"), "0\n");
}

// A client that pipelines requests and takes their replies slowly, each
// read within the idle timeout, keeps the server waiting on it, not
// working for it: over the cap, a new client takes its place
// (control_server.h), as it would a trickling request's.
TEST_F(ControlServerTest, OverTheCapASlowReaderGivesWay) {
  ControlServerOptions o;
  o.max_connections = 1;
  o.idle_timeout_ms = 1000;
  StartServer(o);
  RawClient slow(path_);
  ASSERT_TRUE(slow.ok());
  std::string requests;
  for (int i = 0; i < 100'000; ++i) requests += "REQ 5 7 -\nzram0mm_stat";
  std::size_t sent = 0;
  // Keeps as many requests queued as the socket takes, without blocking.
  const auto top_up = [&] {
    while (sent < requests.size()) {
      const ssize_t n = ::send(slow.fd(), requests.data() + sent,
                               requests.size() - sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  };
  top_up();
  // Reads 64 KiB every 300 ms (well within the idle timeout) and queues
  // more, for three idle timeouts: the server always has a reply it cannot
  // send yet.
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    std::vector<char> buf(64 << 10);
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (::recv(slow.fd(), buf.data(), buf.size(), MSG_DONTWAIT) == 0) return;
      top_up();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  auto r = Show("initstate");
  stop.store(true);
  reader.join();
  EXPECT_EQ(r, "0\n") << (r.has_value() ? "" : r.error().ToString());
}

// Over the cap, a connection waiting for its next request gives way before
// one whose client is still to take a reply: the latter may be a client
// reading a long reply (ztier status) that only a full socket keeps waiting.
TEST_F(ControlServerTest, OverTheCapAnIdleConnectionGivesWayBeforeAReply) {
  ControlServerOptions o;
  o.max_connections = 2;
  o.idle_timeout_ms = 30'000;
  StartServer(o);
  RawClient reader(path_);
  ASSERT_TRUE(reader.ok());
  constexpr int kRequests = 20'000;  // replies past what the socket takes
  std::string requests;
  for (int i = 0; i < kRequests; ++i) requests += "REQ 5 8 -\nzram0disksize";
  std::size_t sent = 0;
  while (sent < requests.size()) {
    const ssize_t n =
        ::send(reader.fd(), requests.data() + sent, requests.size() - sent,
               MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  // The server now waits for `reader` to take a reply.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RawClient idle(path_);  // younger, waiting for its first request
  ASSERT_TRUE(idle.ok());
  for (int i = 0; i < 2000 && server_->connections() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(server_->connections(), 2u);
  EXPECT_EQ(Show("initstate"), "0\n");
  // `reader` kept its place: every reply to what it sent comes.
  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (sent < requests.size() && !done.load()) {
      const ssize_t n =
          ::send(reader.fd(), requests.data() + sent, requests.size() - sent,
                 MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
  });
  std::string in;
  std::size_t replies = 0;
  char buf[65536];
  const std::string one = "OK 2\n0\n";
  while (replies < kRequests) {
    const ssize_t n = ::recv(reader.fd(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
    std::size_t whole = in.size() / one.size();
    replies += whole;
    in.erase(0, whole * one.size());
  }
  done.store(true);
  ::shutdown(reader.fd(), SHUT_RDWR);
  writer.join();
  EXPECT_EQ(replies, static_cast<std::size_t>(kRequests));
}

TEST_F(ControlServerTest, StopWhileClientsAreConnected) {
  RawClient idle(path_);
  RawClient half(path_);
  half.Send("REQ 5 8 ");
  for (int i = 0; i < 2000 && server_->connections() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Stop must not wait for the 30 s idle timeout.
  auto stopped = std::async(std::launch::async, [&] { server_->Stop(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(20)),
            std::future_status::ready);
  stopped.wait();
  EXPECT_EQ(idle.ReadToEof(), "");
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(ControlServerTest, ConcurrentClients) {
  ASSERT_EQ(Store("disksize", "1M"), "");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if (t == 0) {
          auto n = Request(path_, "", "hot_add", nullptr);
          if (!n.has_value()) ++failures;
          std::string v = n.value_or("x\n");
          v.pop_back();
          if (!Request(path_, "", "hot_remove", &v).has_value()) ++failures;
        } else if (t == 1) {
          if (!Request(path_, "", "status", nullptr).has_value()) ++failures;
        } else {
          auto m = Request(path_, "zram0", "mm_stat", nullptr);
          if (!m.has_value() || m->size() != 81) ++failures;
          const std::string all = "all";
          if (!Request(path_, "zram0", "idle", &all).has_value()) ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(registry_->List().size(), 1u);
}

// What a client reads back from an ERR line's errno name is the code the
// server's Status had (through StatusCodeErrnoName), for every code with
// a name of its own.
// A server that hangs up with the request unread resets the connection
// (unix_release_sock(), net/unix/af_unix.c): Exchange's error names
// recv()'s ECONNRESET (ErrnoNameOf), not the EIO of its code.
TEST(ExchangeTest, AConnectionResetNamesItsErrno) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::thread server([fd = sv[1]] {
    pollfd pfd = {fd, POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 10000), 1);  // the request is there, unread
    ::close(fd);
  });
  auto r = Exchange(sv[0], {"zram0", "disksize", std::nullopt});
  server.join();
  ::close(sv[0]);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(ErrnoNameOf(r.error()), "ECONNRESET") << r.error().ToString();
  EXPECT_EQ(r.error().message().rfind("control reply: recv: ", 0), 0u)
      << r.error().message();
}

TEST(StatusCodeFromErrnoNameTest, ReadsBackWhatServersSend) {
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound,
        StatusCode::kResourceExhausted, StatusCode::kIoError,
        StatusCode::kUnsupported, StatusCode::kBusy, StatusCode::kOutOfRange,
        StatusCode::kPermissionDenied}) {
    EXPECT_EQ(StatusCodeFromErrnoName(StatusCodeErrnoName(c)), c)
        << StatusCodeName(c);
  }
  EXPECT_EQ(StatusCodeFromErrnoName("E2BIG"), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeFromErrnoName("ENOENT"), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeFromErrnoName("ENOSPC"), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeFromErrnoName("EACCES"), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeFromErrnoName("ETIMEDOUT"), StatusCode::kIoError);
  EXPECT_EQ(StatusCodeFromErrnoName(""), StatusCode::kIoError);
  EXPECT_EQ(StatusCodeFromErrnoName("EFOO"), StatusCode::kIoError);
  // Any errno a backing file's open names (disksize, backing_dev) reads
  // back as PosixError gives it that errno.
  for (int err : {EMFILE, ENFILE, EDQUOT, EROFS, ELOOP, ECONNREFUSED}) {
    EXPECT_EQ(StatusCodeFromErrnoName(ErrnoName(err)), StatusCodeForErrno(err))
        << ErrnoName(err);
  }
}

// In a child (fork): a disksize store of 1G made under mlockall(MCL_FUTURE)
// with a locked-memory limit of 1 MiB and no CAP_IPC_LOCK, as `ztier serve
// --mlock` runs where it warns of RLIMIT_MEMLOCK: "ERRNO: message", or
// "skip: why".
std::string DisksizeUnderALockedMemoryLimit() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct caps[2]{};
  if (::syscall(SYS_capget, &header, caps) != 0) return "skip: capget";
  caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
  if (::syscall(SYS_capset, &header, caps) != 0) return "skip: capset";
  const rlimit limit{1 << 20, 1 << 20};
  if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "skip: setrlimit";
  DeviceRegistry registry{DeviceDefaults{}};
  if (!registry.Add("zram0").has_value()) return "skip: no device";
  if (::mlockall(MCL_FUTURE | MCL_ONFAULT) != 0) return "skip: mlockall";
  const WireReply r =
      HandleRequest(registry, {"zram0", "disksize", std::string("1G")});
  ::munlockall();
  return r.ok ? "ok" : r.errno_name + ": " + r.message;
}

// Its slot table's mmap is refused with EAGAIN there (mmap(2): too much
// memory locked): disksize answers ENOMEM, as zram's disksize_store() for
// a table it cannot allocate; not EAGAIN, which it never answers, nor
// EBUSY, which says the device is set up already.
TEST(DisksizeStoreTest, ALockedMemoryLimitIsEnomem) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "mlockall under a sanitizer";
#endif
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string said = DisksizeUnderALockedMemoryLimit();
    const bool written = ::write(out[1], said.data(), said.size()) ==
                         static_cast<ssize_t>(said.size());
    ::_exit(written ? 0 : 1);
  }
  ::close(out[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;)
    said.append(buf, n);
  ::close(out[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  if (said.starts_with("skip: ")) GTEST_SKIP() << said;
  EXPECT_TRUE(said.starts_with("ENOMEM: ")) << said;
}

}  // namespace
}  // namespace ztier::ctl
