// nbd_backing_file.cc: a BackingFile on a remote NBD export through libnbd
// (contract in include/nbd/nbd_backing_file.h). libnbd's API:
// https://libguestfs.org/libnbd.3.html (asynchronous commands, nbd_poll).
#include "nbd/nbd_backing_file.h"

#include <libnbd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "platform/done_writes.h"
#include "platform/socket.h"

namespace ztier::nbd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::uint64_t kLabelBytes = 4096;
constexpr char kMagic[8] = {'Z', 'T', 'I', 'E', 'R', 'B', 'K', '1'};
constexpr milliseconds kFirstBackoff{100};
constexpr milliseconds kMaxBackoff{5000};
constexpr int kPollSliceMs = 10;  // the longest a poll holds a connection
// The most TRIMs of a Discard sent and not yet answered (NbdFile::Discard).
constexpr std::size_t kTrimsInFlight = 64;
// libnbd's NBD_NULL_COMPLETION, without its C compound literal: no
// callback; the result is collected with nbd_aio_command_completed.
constexpr nbd_completion_callback kNoCompletion{};

std::string LastError() {
  const char* e = nbd_get_error();
  return e != nullptr ? e : "unknown libnbd error";
}

// libnbd's last error as a connection's failure: kIoError, whatever its
// errno (the header's contract for a remote that cannot be reached), the
// errno kept (nbd_get_errno; ErrnoNameOf names ENOENT for a socket that is
// not there, ECONNREFUSED for one nobody listens on, not EIO).
Status ConnectError() {
  return StatusWithErrno(StatusCode::kIoError, LastError(), nbd_get_errno());
}

// A block's checksum under `key`, never 0 (0 means none recorded):
// SipHash-2-4, a keyed pseudorandom function, so that a remote that does
// not know the key (random, kept only in memory) cannot make other bytes
// that match it. An unkeyed hash (std::hash, MurmurHash) would not do: its
// every 8-byte step is invertible, so a hostile remote that changes a block
// can fix up 8 other bytes to keep its sum.
std::uint64_t BlockSum(const std::uint64_t (&key)[2], const std::byte* block) {
  std::uint64_t v0 = key[0] ^ 0x736f6d6570736575ULL;
  std::uint64_t v1 = key[1] ^ 0x646f72616e646f6dULL;
  std::uint64_t v2 = key[0] ^ 0x6c7967656e657261ULL;
  std::uint64_t v3 = key[1] ^ 0x7465646279746573ULL;
  auto rounds = [&](int n) {
    for (int i = 0; i < n; ++i) {
      v0 += v1;
      v1 = std::rotl(v1, 13) ^ v0;
      v0 = std::rotl(v0, 32);
      v2 += v3;
      v3 = std::rotl(v3, 16) ^ v2;
      v0 += v3;
      v3 = std::rotl(v3, 21) ^ v0;
      v2 += v1;
      v1 = std::rotl(v1, 17) ^ v2;
      v2 = std::rotl(v2, 32);
    }
  };
  auto absorb = [&](std::uint64_t m) {
    v3 ^= m;
    rounds(2);
    v0 ^= m;
  };
  for (std::uint64_t i = 0; i < kLabelBytes; i += 8) {
    std::uint64_t m;
    std::memcpy(&m, block + i, 8);
    absorb(m);
  }
  absorb((kLabelBytes & 0xff) << 56);  // the length, mod 256
  v2 ^= 0xff;
  rounds(4);
  return (v0 ^ v1 ^ v2 ^ v3) | 1;
}

int MsLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, kPollSliceMs));
}

// One connection: its handle (null: closed), guarded by mu; `generation`
// advances every time it is made, so a command remembers which handle it
// went out on.
struct Conn {
  std::mutex mu;
  nbd_handle* h = nullptr;
  std::uint64_t generation = 0;
  // What the server offers on this connection: FUA for every write, TRIM.
  // After a reconnect TRIM may differ; FUA may be gained, not lost
  // (NbdFile::StillOffers).
  std::uint32_t write_flags = 0;
  bool can_trim = false;
  Clock::time_point next_try{};
  milliseconds backoff = kFirstBackoff;

  bool Live() const {
    return h != nullptr && nbd_aio_is_dead(h) == 0 && nbd_aio_is_closed(h) == 0;
  }
  // Closes the connection. `abortive` (a timeout, a failed poll, a failed
  // check): it is given up with commands maybe still in its socket, which
  // the kernel drops, resetting the connection. Closed the usual way, the
  // socket would go on sending them: after a link cut, once the link
  // returns, the remote would apply writes this file counted failed (their
  // blocks may be in use again by then), and reply into a closed socket,
  // which nbdkit 1.32 can abort on.
  void Close(bool abortive = true) {
    if (h == nullptr) return;
    if (const int fd = nbd_aio_get_fd(h); abortive && fd >= 0) {
      platform::SetResetOnClose(fd);
    }
    nbd_close(h);
    h = nullptr;
  }
  // A command's error: ESHUTDOWN says the server is going away, and the
  // client must then disconnect (proto.md, "Terminating the transmission
  // phase"): NBD_CMD_DISC, and the connection is closed; the next command
  // makes a new one (the server restarted, say). Returns -errno.
  long CommandError() {
    const int e = nbd_get_errno();
    if (e == ESHUTDOWN) {
      nbd_aio_disconnect(h, 0);
      Close(/*abortive=*/false);
    }
    return -(e != 0 ? e : EIO);
  }
  // An attempt failed: no other before the backoff, which then doubles.
  void Failed() {
    next_try = Clock::now() + backoff;
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
};

// A read's own buffer (NbdFile::Read): libnbd reads into `data`, and the
// read's completion callback copies that to the caller's `out`, unless the
// caller has given up on the command (NbdFile::Wait: its deadline passed
// before the connection's timeout, and the connection is kept). Such a
// read may still be answered after its caller has returned and reused
// `out`: its bytes land here and go nowhere. Once sent, libnbd owns it
// (`Free` at the command's retirement, or when the connection closes); the
// reader touches it only under the connection's mutex, while the command
// is in flight.
struct ReadBuffer {
  std::span<std::byte> out;
  std::unique_ptr<std::byte[]> data;
  bool given_up = false;

  // A new one for `out`, or null without the memory.
  static ReadBuffer* New(std::span<std::byte> out) {
    auto* b = new (std::nothrow) ReadBuffer;
    if (b == nullptr) return nullptr;
    b->out = out;
    b->data.reset(new (std::nothrow) std::byte[out.size()]);
    if (b->data == nullptr) {
      delete b;
      return nullptr;
    }
    return b;
  }
  // nbd_completion_callback: 0 leaves the command to Wait's
  // nbd_aio_command_completed; 1 retires it (nobody waits for it).
  static int Done(void* self, int* error) {
    auto* b = static_cast<ReadBuffer*>(self);
    if (b->given_up) return 1;
    if (*error == 0) std::memcpy(b->out.data(), b->data.get(), b->out.size());
    return 0;
  }
  static void Free(void* self) { delete static_cast<ReadBuffer*>(self); }
};

class NbdFile final : public BackingFile {
 public:
  NbdFile(std::string uri, NbdBackingOptions options)
      : uri_(std::move(uri)), options_(std::move(options)) {
    for (std::size_t i = 0; i < options_.connections; ++i) {
      conns_.push_back(std::make_unique<Conn>());
    }
  }
  ~NbdFile() override {
    for (auto& c : conns_) c->Close(/*abortive=*/false);
  }

  Status Open();

  const std::string& name() const override { return uri_; }
  std::uint64_t size() const override { return size_; }
  bool direct() const override { return false; }
  long Read(std::uint64_t offset, std::span<std::byte> out) override;
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) override;

  std::uint64_t lost_blocks() const override { return lost_.load(); }
  std::size_t max_write_bytes() const override { return max_write_.load(); }
  // A block freed on an export without TRIM: not counted lost if the
  // remote comes back without the label.
  void Forget(const Range& range) override { Unwritten(range); }
  bool can_discard() const override { return can_trim_; }
  void Discard(std::span<const Range> ranges, std::span<bool> sent) override;
  std::size_t write_connections() const {
    return multi_conn_ ? conns_.size() : 1;
  }
  std::uint32_t timeout_ms() const { return options_.timeout_ms; }
  // A writer of `io_bytes` (NewWriter's) is gone.
  void DropWriter(std::size_t io_bytes) {
    std::lock_guard check(check_mu_);
    live_writes_.erase(live_writes_.find(io_bytes));
  }

  // Makes c's connection if it is closed, its handshake within `deadline`;
  // after a reconnect, checks the remote, each step of the check (the
  // label read, and its rewrite) within a timeout of its own, as at Open.
  // REQUIRES: c.mu held.
  Status Connect(Conn& c, Clock::time_point deadline);
  // Whether the export on `h`, a connection made again or one made at
  // open after the first, still offers what Open found on the first and
  // this file relies on: writable; holding the part of it this file uses;
  // multi-conn, when writes go over several connections; FUA, when it
  // offered it; block size limits that allow 4096-byte requests and
  // writes as large as its writers' (live_writes_). Else kIoError: `who`
  // ("the remote came back") and how. REQUIRES: check_mu_ held.
  Status StillOffers(nbd_handle* h, const std::string& who) const;
  // Lowers max_write_ to h's maximum request where that is smaller (or
  // none was said): the writers made from now on stay within it
  // (BackingStore::NewWriter asks max_write_bytes()). REQUIRES: check_mu_
  // held, and h accepted (StillOffers: it takes every live writer's).
  void LowerMaxWrite(nbd_handle* h);
  // The first write connection, from the `from`th round, that is up or is
  // made now, returned with `lock` holding its mu: a connection down and
  // not yet due another attempt (its backoff) passes the command on, and
  // one whose mu another command holds is tried last. Null, with `lock`
  // empty, when none is; *retry_at is then when the first of them may be
  // tried again. REQUIRES: no Conn::mu held.
  Conn* LockUp(std::size_t from, Clock::time_point deadline,
               std::unique_lock<std::mutex>& lock,
               Clock::time_point* retry_at = nullptr);
  // Waits for `cookie`, sent on c (generation gen) at `sent`: 0; -ENOTCONN
  // when the connection dropped (or was made again) first; else the
  // server's error (-errno); -ETIMEDOUT when the deadline passed first. A
  // command out of time after (nearly) its whole timeout since `sent` shows
  // a stalled remote (HoldOff): c is closed, and every command on it fails.
  // One cut short by its caller's deadline (a read, whose deadline counts
  // its connecting too; a TRIM's is its whole timeout from `sent`, as a
  // write's) proves nothing: a read's command is given up on (`read`, its
  // buffer) and left to end on c, which is kept; any other command still
  // closes c. REQUIRES: c.mu not held.
  long Wait(Conn& c, std::uint64_t gen, std::int64_t cookie,
            Clock::time_point sent, Clock::time_point deadline,
            ReadBuffer* read = nullptr);
  // The file's blocks that bytes [offset, offset + len) touch: [first, end).
  std::pair<std::uint64_t, std::uint64_t> Blocks(std::uint64_t offset,
                                                 std::uint64_t len) const {
    return {offset / kLabelBytes,
            std::min((offset + len + kLabelBytes - 1) / kLabelBytes,
                     size_ / kLabelBytes)};
  }
  // Records blocks [offset, offset + len) as written (not lost), with the
  // checksums of `data`, what was written.
  void Written(std::uint64_t offset, std::size_t len, const std::byte* data);
  // Whether the blocks read at `offset` hold what was last written to
  // them (logged when not).
  bool Matches(std::uint64_t offset, std::span<const std::byte> got);
  // Records the blocks of `range` as freed: no checksum, never lost.
  void Unwritten(const Range& range);
  // A command or a connection attempt begun at `since` ran out of time.
  // When it had (nearly) the whole timeout, the remote is stalled: no
  // connection is attempted for the next timeout_ms, so that the commands
  // after it fail at once instead of each waiting its whole timeout (a
  // writeback pass of thousands of blocks would take hours). "Nearly":
  // nine tenths of the time since `since`: the command's send, or a
  // connection attempt's start, whose deadline may have been set a little
  // before it (a read's is set before it finds a connection; so a read is
  // found stalled only when it was sent within the first tenth of its
  // time). A wait cut short by its caller's deadline proves nothing.
  // Returns whether the remote was found stalled.
  bool HoldOff(Clock::time_point since) {
    const auto now = Clock::now();
    if (now - since < milliseconds(options_.timeout_ms) * 9 / 10) return false;
    hold_until_.store(
        (now + milliseconds(options_.timeout_ms)).time_since_epoch().count());
    return true;
  }
  Clock::time_point hold_until() const {
    return Clock::time_point(Clock::duration(hold_until_.load()));
  }

 private:
  // One command on a connection already made, polled to its end under
  // c.mu (for the label). 0 or -errno: -ETIMEDOUT when the deadline passed.
  long SyncLocked(Conn& c, bool write, void* buf, std::uint64_t offset,
                  Clock::time_point deadline);
  // Why SyncLocked failed with `r`, for a message: libnbd's last error,
  // which is not set when the deadline was what failed.
  std::string SyncError(long r) const {
    if (r != -ETIMEDOUT) return LastError();
    return "no answer within the timeout (" +
           std::to_string(options_.timeout_ms) + " ms)";
  }
  void Log(const std::string& line) const {
    if (options_.log) options_.log("backing_dev " + uri_ + ": " + line);
  }

  const std::string uri_;
  const NbdBackingOptions options_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::uint64_t size_ = 0;
  bool multi_conn_ = false;
  bool fua_ = false;  // the first connection offered FUA
  // The export's maximum request, rounded down to 4096, 0: none said; at
  // open (the smallest of its connections'), or lowered by a reconnect
  // accepted with a smaller one (Connect, LowerMaxWrite).
  std::atomic<std::size_t> max_write_{0};
  bool can_trim_ = false;
  // A Discard had TRIMs refused, and logged it; none since had every TRIM
  // carried out (Discard).
  std::atomic<bool> trim_refused_{false};
  alignas(4096) std::byte label_[kLabelBytes] = {};
  std::unique_ptr<std::atomic<std::uint8_t>[]> lost_block_;
  // Per block: BlockSum of what was last written there since the label was
  // last written, 0 for none (never written, trimmed or lost). A read that
  // finds other bytes fails (see Read).
  std::unique_ptr<std::atomic<std::uint64_t>[]> sums_;
  std::uint64_t sum_key_[2] = {};  // BlockSum's key, random (Open)
  std::atomic<std::uint64_t> lost_{0};
  // One remote check (and label rewrite) at a time; guards also
  // live_writes_, and orders the writers made against max_write_'s
  // lowering.
  std::mutex check_mu_;
  // The io_bytes of each writer alive (NewWriter, ~NbdWriter): the largest
  // is what a remote's maximum request must allow. One that lowered it
  // only caps the writers made after (max_write_).
  std::multiset<std::size_t> live_writes_;
  // Why the last check found the remote offering less (StillOffers), once
  // logged; empty once a reconnect is accepted (its label read, and
  // rewritten if need be: Connect). Guarded by check_mu_.
  std::string refused_;
  std::atomic<Clock::rep> hold_until_{0};  // HoldOff()
};

long NbdFile::SyncLocked(Conn& c, bool write, void* buf, std::uint64_t offset,
                         Clock::time_point deadline) {
  const auto start = Clock::now();
  const std::int64_t cookie =
      write ? nbd_aio_pwrite(c.h, buf, kLabelBytes, offset, kNoCompletion,
                             c.write_flags)
            : nbd_aio_pread(c.h, buf, kLabelBytes, offset, kNoCompletion,
                            0);
  if (cookie == -1) return -EIO;
  for (;;) {
    const int r = nbd_aio_command_completed(c.h, static_cast<std::uint64_t>(cookie));
    if (r == 1) return 0;
    if (r == -1) return -EIO;
    if (Clock::now() >= deadline) {
      HoldOff(start);
      c.Close();
      return -ETIMEDOUT;
    }
    if (nbd_poll(c.h, MsLeft(deadline)) == -1) {
      c.Close();
      return -EIO;
    }
  }
}

Status NbdFile::Connect(Conn& c, Clock::time_point deadline) {
  if (c.Live()) return Status::Ok();
  const bool reconnect = c.generation != 0;
  c.Close();
  const auto now = Clock::now();
  if (now < hold_until()) {
    return Status::IoError(
        "the remote did not answer within the timeout (next attempt in " +
        std::to_string(
            std::chrono::duration_cast<milliseconds>(hold_until() - now)
                .count()) +
        " ms)");
  }
  if (now < c.next_try) {
    return Status::IoError("not connected (next attempt in " +
                           std::to_string(std::chrono::duration_cast<milliseconds>(
                                              c.next_try - now)
                                              .count()) +
                           " ms)");
  }
  Status failed;
  const auto start = Clock::now();
  nbd_handle* h = nbd_create();
  if (h == nullptr) return ConnectError();
  // The URI is the operator's (backing_dev), so it may name local files:
  // tls-certificates=DIR, tls-psk-file=FILE.
  nbd_set_uri_allow_local_file(h, true);
  if (nbd_aio_connect_uri(h, uri_.c_str()) == -1) {
    failed = ConnectError();
  } else {
    while (nbd_aio_is_connecting(h) == 1) {
      if (Clock::now() >= deadline) {
        failed = StatusWithErrno(StatusCode::kIoError, "connection timed out",
                                 ETIMEDOUT);
        HoldOff(start);
        break;
      }
      if (nbd_poll(h, MsLeft(deadline)) == -1) {
        failed = ConnectError();
        break;
      }
    }
    if (failed.ok() && nbd_aio_is_ready(h) != 1) failed = ConnectError();
  }
  if (!failed.ok()) {
    nbd_close(h);
    c.Failed();
    return failed;
  }
  c.h = h;
  ++c.generation;
  // Written-back pages are read rarely, so a connection may sit idle for
  // hours: TCP keepalive (the server's settings, platform/socket.h) finds
  // a peer or a path that died meanwhile, and the next command makes a
  // new connection at once rather than wait out its timeout.
  if (const int fd = nbd_aio_get_fd(h); fd >= 0) {
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
        (domain == AF_INET || domain == AF_INET6)) {
      platform::SetKeepAlive(fd);
    }
  }
  c.write_flags = nbd_can_fua(h) == 1 ? LIBNBD_CMD_FLAG_FUA : 0;
  c.can_trim = nbd_can_trim(h) == 1;
  // The backoff starts over once the connection is known good: after the
  // check below, when it is made again.
  if (!reconnect) {
    c.backoff = kFirstBackoff;
    return Status::Ok();
  }
  // A connection made again: is the remote still the one written to? Not
  // used until that is known: a failed check closes it again, and the next
  // Connect checks anew.
  std::lock_guard check(check_mu_);
  if (Status st = StillOffers(h, "the remote came back"); !st.ok()) {
    // Said once, not at every attempt the backoff allows.
    if (st.message() != refused_) {
      refused_ = st.message();
      Log(refused_ +
          ": not used until it offers what it did (meanwhile written-back "
          "pages read as errors, and writeback fails)");
    }
    c.Close();
    c.Failed();
    return st;
  }
  auto unchecked = [&](const char* what, long r) {
    const std::string error = SyncError(r);
    c.Close();
    c.Failed();
    return Status::IoError(std::string(what) + ": " + error);
  };
  // Each step has the whole timeout, as at Open, not what the handshake
  // left of the caller's deadline: a remote whose handshake and label read
  // took longer than one timeout would fail every check, and be closed and
  // made again for ever.
  auto step_deadline = [this] {
    return Clock::now() + milliseconds(options_.timeout_ms);
  };
  alignas(4096) std::byte now_label[kLabelBytes];
  long r = SyncLocked(c, false, now_label, 0, step_deadline());
  if (r != 0) return unchecked("reading the label", r);
  // Accepted: its maximum request caps the writers made from now on
  // (LowerMaxWrite); not before, so a connection refused by its label's
  // read or write lowers nothing. check_mu_ is held throughout, so the
  // writers it was checked against are still those alive.
  // And the refusal logged last (refused_) may be logged again: not
  // before, so a reconnect that offers what it did but then fails its
  // label's read or write does not have the same refusal logged anew at
  // the attempt after.
  auto accepted = [&] {
    refused_.clear();
    LowerMaxWrite(h);
    c.backoff = kFirstBackoff;
    return Status::Ok();
  };
  // The label is the same export's, whatever its size now: resized while
  // its server was restarted, it still holds the part this file uses
  // (StillOffers), and this file uses no more of it than before.
  if (std::memcmp(now_label, label_, kLabelBytes) == 0) return accepted();
  std::uint64_t lost = 0;
  for (std::uint64_t b = 0; b < size_ / kLabelBytes; ++b) {
    if (sums_[b].exchange(0) != 0) {
      lost_block_[b].store(1);
      ++lost;
    }
  }
  lost_ += lost;
  // Said once: a retry after a failed label write finds nothing more lost.
  if (lost != 0) {
    Log("the remote came back without this store's label: " +
        std::to_string(lost) +
        " written-back blocks are lost; their pages read as errors");
  }
  r = SyncLocked(c, true, label_, 0, step_deadline());
  if (r != 0) return unchecked("writing the label", r);
  return accepted();
}

void NbdFile::LowerMaxWrite(nbd_handle* h) {
  const std::int64_t max_block = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
  if (max_block <= 0) return;
  const std::size_t cap =
      static_cast<std::size_t>(max_block) / kLabelBytes * kLabelBytes;
  if (max_write_.load() == 0 || cap < max_write_.load()) max_write_.store(cap);
}

Status NbdFile::StillOffers(nbd_handle* h, const std::string& who) const {
  auto differs = [&who](const std::string& how) {
    return Status::IoError(who + " " + how);
  };
  if (nbd_is_read_only(h) == 1) return differs("read-only");
  const std::int64_t size = nbd_get_size(h);
  if (size < 0) return Status::IoError(LastError());
  if (static_cast<std::uint64_t>(size) < kLabelBytes + size_) {
    return differs("smaller (" + std::to_string(size) +
                   " bytes) than the part of it this file uses (" +
                   std::to_string(kLabelBytes + size_) + " bytes)");
  }
  // Without multi-conn, a write done on one connection need not be seen
  // on another.
  if (write_connections() > 1 && nbd_can_multi_conn(h) != 1) {
    return differs("without multi-conn (writes go over " +
                   std::to_string(write_connections()) + " connections)");
  }
  if (fua_ && nbd_can_fua(h) != 1) {
    return differs("without FUA (written-back pages would be only as "
                   "durable as the server's cache)");
  }
  // What this file sends: 4096-byte reads and label writes, and writes of
  // at most its writers' buffers; not the maximum it had at open (32 MiB,
  // proto.md's default, where the export stated none), which no write
  // may have come near.
  const std::int64_t min_block = nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM);
  const std::int64_t max_block = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
  const std::int64_t max_write = static_cast<std::int64_t>(std::max<std::size_t>(
      live_writes_.empty() ? 0 : *live_writes_.rbegin(), kLabelBytes));
  if (min_block > static_cast<std::int64_t>(kLabelBytes) ||
      (max_block > 0 && max_block < max_write)) {
    return differs("with block size limits (minimum " +
                   std::to_string(min_block) + ", maximum " +
                   std::to_string(max_block) +
                   " bytes) that do not allow 4096-byte requests and writes "
                   "of " + std::to_string(max_write) + " bytes");
  }
  return Status::Ok();
}

long NbdFile::Wait(Conn& c, std::uint64_t gen, std::int64_t cookie,
                   Clock::time_point sent, Clock::time_point deadline,
                   ReadBuffer* read) {
  for (;;) {
    std::lock_guard l(c.mu);
    if (c.generation != gen || !c.Live()) return -ENOTCONN;
    const int r =
        nbd_aio_command_completed(c.h, static_cast<std::uint64_t>(cookie));
    if (r == 1) return 0;
    if (r == -1) {
      // A read on a server shutting down is tried again on a new
      // connection, as one whose connection dropped.
      const long e = c.CommandError();
      return e == -ESHUTDOWN ? -ENOTCONN : e;
    }
    if (Clock::now() >= deadline) {
      if (HoldOff(sent) || read == nullptr) {
        c.Close();  // every command on it fails
      } else {
        read->given_up = true;  // in flight (above): `read` is alive
      }
      return -ETIMEDOUT;
    }
    if (nbd_poll(c.h, MsLeft(deadline)) == -1) {
      c.Close();
      return -ENOTCONN;
    }
  }
}

void NbdFile::Written(std::uint64_t offset, std::size_t len,
                      const std::byte* data) {
  const auto [first, end] = Blocks(offset, len);
  for (std::uint64_t b = first; b < end; ++b) {
    sums_[b].store(BlockSum(sum_key_, data + (b - first) * kLabelBytes));
    lost_block_[b].store(0);
  }
}

bool NbdFile::Matches(std::uint64_t offset, std::span<const std::byte> got) {
  // Whole blocks only (the store reads whole, aligned blocks).
  if (offset % kLabelBytes != 0) return true;
  const auto [first, end] = Blocks(offset, got.size() / kLabelBytes * kLabelBytes);
  for (std::uint64_t b = first; b < end; ++b) {
    const std::uint64_t want = sums_[b].load();
    if (want != 0 &&
        BlockSum(sum_key_, got.data() + (b - first) * kLabelBytes) != want) {
      Log("block " + std::to_string(b) +
          " does not hold what was written to it; its read fails");
      return false;
    }
  }
  return true;
}

Conn* NbdFile::LockUp(std::size_t from, Clock::time_point deadline,
                      std::unique_lock<std::mutex>& lock,
                      Clock::time_point* retry_at) {
  if (retry_at != nullptr) *retry_at = Clock::time_point::max();
  // c, locked by l: taken when up, or when made now; no attempt once the
  // deadline has passed (it would fail, and back c off, for nothing).
  auto take = [&](Conn& c, std::unique_lock<std::mutex>& l) {
    bool up = c.Live();
    if (!up && Clock::now() < deadline) {
      // Callers cannot throw (a writer's Queue): a connection that cannot
      // even build its error message is down.
      try {
        up = Connect(c, deadline).ok();
      } catch (const std::bad_alloc&) {
      }
    }
    if (up) {
      lock = std::move(l);
      return true;
    }
    if (retry_at != nullptr) {
      *retry_at = std::min(*retry_at, std::max(c.next_try, hold_until()));
    }
    return false;
  };
  // In turn from `from`, passing over a connection whose mutex is held
  // (another command's reconnect holds it up to its whole timeout); then
  // those, waiting for them.
  const std::size_t n = write_connections();
  std::uint64_t busy = 0;  // bit k: (from + k) % n; n <= 64
  for (std::size_t k = 0; k < n; ++k) {
    Conn& c = *conns_[(from + k) % n];
    std::unique_lock l(c.mu, std::try_to_lock);
    if (!l.owns_lock()) {
      busy |= std::uint64_t{1} << k;
    } else if (take(c, l)) {
      return &c;
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    if ((busy >> k & 1) == 0) continue;
    Conn& c = *conns_[(from + k) % n];
    std::unique_lock l(c.mu);
    if (take(c, l)) return &c;
  }
  return nullptr;
}

long NbdFile::Read(std::uint64_t offset, std::span<std::byte> out) {
  const auto [first, end] = Blocks(offset, out.size());
  auto lost = [&] {
    for (std::uint64_t b = first; b < end; ++b) {
      if (lost_block_[b].load() != 0) return true;
    }
    return false;
  };
  if (lost()) return -EIO;
  const auto deadline = Clock::now() + milliseconds(options_.timeout_ms);
  for (;;) {
    std::int64_t cookie = -1;
    std::uint64_t gen = 0;
    Clock::time_point sent, retry_at;
    // Each attempt has a buffer of its own: an earlier one's stays with
    // its connection until that closes.
    ReadBuffer* const buffer = ReadBuffer::New(out);
    if (buffer == nullptr) return -ENOMEM;
    std::unique_lock<std::mutex> l;
    Conn* const c = LockUp(0, deadline, l, &retry_at);
    if (c == nullptr) {
      ReadBuffer::Free(buffer);
    } else if (Clock::now() >= deadline) {
      // Connecting (a reconnect's label check, timed on its own) took the
      // read's time: its pread would be sent only to be given up at once.
      ReadBuffer::Free(buffer);
      return -ETIMEDOUT;
    } else {
      sent = Clock::now();
      // libnbd owns `buffer` from here, failed or not.
      cookie = nbd_aio_pread(
          c->h, buffer->data.get(), out.size(), offset + kLabelBytes,
          nbd_completion_callback{.callback = &ReadBuffer::Done,
                                  .user_data = buffer,
                                  .free = &ReadBuffer::Free},
          0);
      gen = c->generation;
      if (cookie == -1) retry_at = Clock::time_point{};  // again at once
      l.unlock();
    }
    if (cookie != -1) {
      const long r = Wait(*c, gen, cookie, sent, deadline, buffer);
      if (r == 0) {
        if (lost()) return -EIO;
        return Matches(offset, out) ? static_cast<long>(out.size()) : -EIO;
      }
      if (r != -ENOTCONN) return r;  // the server's own error, or the deadline
      retry_at = Clock::time_point{};  // dropped: made again at once
    }
    // Not connected, or the connection dropped: again, until the deadline;
    // at once -EIO when the backoff or a hold-off allows no attempt before
    // it (sleeping to the deadline would only hold this thread).
    const auto now = Clock::now();
    if (now >= deadline || retry_at >= deadline) return -EIO;
    std::this_thread::sleep_until(std::min(std::max(retry_at, now + milliseconds(1)),
                                           deadline));
    if (Clock::now() >= deadline) return -EIO;
  }
}

// TRIMs on one connection, at most kTrimsInFlight at a time, each
// waited for in turn. A block whose TRIM is answered (done or refused), or
// freed on a remote without TRIM, is no longer written: a remote that comes
// back without the label does not count it lost.
void NbdFile::Discard(std::span<const Range> ranges, std::span<bool> sent) {
  std::fill(sent.begin(), sent.end(), false);
  std::unique_lock<std::mutex> l;
  Conn* const up =
      LockUp(0, Clock::now() + milliseconds(options_.timeout_ms), l);
  if (up == nullptr) return;
  Conn& c = *up;
  if (!c.can_trim) {
    // Come back without TRIM: nothing to send, and the blocks are free
    // (still holding what was written, as after a refused TRIM).
    std::fill(sent.begin(), sent.end(), true);
    for (const Range& r : ranges) Unwritten(r);
    return;
  }
  const std::uint64_t gen = c.generation;
  // Each TRIM no longer than the export's maximum request (proto.md,
  // "Block size constraints": a server may refuse a longer one, EINVAL or
  // EOVERFLOW, though it carries no payload). Read after LockUp: a
  // reconnect it made may have lowered it, and no connection accepted
  // takes less (Connect). Later pieces go on this connection only (gen):
  // one made again may take less.
  const std::uint64_t cap = max_write_.load();
  auto pieces = [cap](const Range& r) {
    return cap == 0 ? std::uint64_t{1} : (r.len + cap - 1) / cap;
  };
  std::vector<std::uint64_t> unanswered(ranges.size(), 0);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    unanswered[i] = pieces(ranges[i]);
  }
  // At most kTrimsInFlight sent and not yet answered: a freed run of
  // 1 GiB on an export taking 4 KiB requests is 262144 TRIMs, which, all
  // in libnbd's queue at once, held its memory (about 170 bytes each) and
  // put the reads and writes on this connection behind the whole batch
  // (long enough, their timeout: the connection then closed as stalled,
  // and every TRIM failed with it).
  struct Trim {
    std::size_t range;  // in `ranges`
    Range piece;
    std::int64_t cookie = -1;
    Clock::time_point sent{};
  };
  std::array<Trim, kTrimsInFlight> window;
  std::size_t head = 0, count = 0;
  std::size_t next_range = 0;
  std::uint64_t next_done = 0;  // bytes of ranges[next_range] sent
  // No range is started after about timeout_ms (the first always is): the
  // rest is left unanswered, for the next pass, which starts with them
  // (ranges go in the order given: ztier/backing_file.h), so
  // the writeback pass behind this one waits that long and one range more
  // (at most BackingStore's 1 GiB), not the whole batch: a fully freed
  // 64 GiB device on an export taking 4 KiB requests is 16M TRIMs. A
  // range started is finished: one cut short would be sent whole again by
  // the next pass, and one longer than a pass could take would never be
  // answered.
  const auto stop_at = Clock::now() + milliseconds(options_.timeout_ms);
  // Sends pieces until the window is full or none is left; stops for good
  // once c is no longer the connection the batch began on, or at the
  // first range after stop_at. REQUIRES: c.mu held.
  bool stop = false;
  auto send = [&] {
    while (!stop && count < kTrimsInFlight && next_range < ranges.size()) {
      if (c.generation != gen || !c.Live() ||
          (next_range != 0 && next_done == 0 && Clock::now() >= stop_at)) {
        stop = true;
        break;
      }
      const Range& r = ranges[next_range];
      const std::uint64_t len =
          cap == 0 ? r.len : std::min(cap, r.len - next_done);
      Trim& t = window[(head + count) % kTrimsInFlight];
      t = {next_range, {r.offset + next_done, len}, -1, Clock::now()};
      t.cookie = nbd_aio_trim(c.h, len, t.piece.offset + kLabelBytes,
                              kNoCompletion, 0);
      ++count;
      next_done += len;
      if (next_done >= r.len) {
        ++next_range;
        next_done = 0;
      }
    }
  };
  send();
  l.unlock();
  // TRIMs carried out, and refused (the first of them for the log).
  std::uint64_t done = 0, refused = 0;
  long first_error = 0;
  Range first_refused;
  while (count != 0) {
    const Trim t = window[head];
    head = (head + 1) % kTrimsInFlight;
    --count;
    if (t.cookie != -1) {
      // Each TRIM has its whole timeout, however long connecting took, as
      // a write has (NbdWriter::Queue), from when it was sent or, if
      // later, from when the one before it was answered: a remote that
      // answers them in turn, each in time, has not stalled, however long
      // the batch. Out of time, a TRIM shows a stalled remote.
      const auto since = std::max(t.sent, Clock::now());
      const long r = Wait(c, gen, t.cookie, since,
                          since + milliseconds(options_.timeout_ms));
      // A dropped connection or a deadline: not known to be done. The
      // server's own refusal (an error reply): answered, nothing more to
      // do, but the blocks still hold what was written and their space
      // stays in use on the remote, which the log says (below). Asked for
      // again, a refused TRIM would keep its blocks from reuse for as long
      // as the remote refuses.
      if (r != -ENOTCONN && r != -ETIMEDOUT) {
        if (r == 0) {
          ++done;
        } else if (refused++ == 0) {
          first_error = r;
          first_refused = t.piece;
        }
        Unwritten(t.piece);
        if (--unanswered[t.range] == 0) sent[t.range] = true;
      }
    }
    if (!stop && next_range < ranges.size()) {
      std::lock_guard again(c.mu);
      send();
    }
  }
  // One line for the Discard, once none of its TRIMs is in flight (none
  // is left behind, never waited for, should it throw), and only for the
  // first with refusals since one whose TRIMs were all carried out: a
  // remote that refuses some and carries out others (at random, or by
  // region) is said once, not at every refusal that follows a success
  // (thousands of lines a batch). Where, as the export's offset, which
  // the server's own log gives, not the file's (kLabelBytes below it).
  if (refused != 0) {
    if (!trim_refused_.exchange(true)) {
      // A line that cannot be made is lost; the answers are kept (thrown,
      // the caller would ask for every range again).
      try {
        Log("the remote refused " + std::to_string(refused) + " of " +
            std::to_string(refused + done) + " TRIMs answered (the first: " +
            std::string(std::strerror(static_cast<int>(-first_error))) +
            ", " + std::to_string(first_refused.len) +
            " bytes at export offset " +
            std::to_string(first_refused.offset + kLabelBytes) +
            "): freed blocks are reused without their space given back");
      } catch (const std::bad_alloc&) {
      }
    }
  } else if (done != 0) {
    trim_refused_.store(false);
  }
}

// Blocks freed (trimmed, or free without a TRIM): nothing of theirs is
// read before they are written again, so they hold nothing to check, nor
// to count lost if the remote comes back without its label.
void NbdFile::Unwritten(const Range& range) {
  const auto [first, end] = Blocks(range.offset, range.len);
  for (std::uint64_t b = first; b < end; ++b) sums_[b].store(0);
}

// Writes round-robin over the write connections that are up; results come
// back through Reap, in any order. A write's result goes into done_ when
// known: in Queue when it cannot be sent, in Reap when its command ends;
// Reap then reports what done_ holds (platform/done_writes.h), so a write
// queued from `done` is reported by a later Reap, as with the other
// writers (ztier/backing_file.h).
class NbdWriter final : public BackingFileWriter {
 public:
  // May throw std::bad_alloc (NewWriter's caller).
  NbdWriter(NbdFile& file, std::size_t ios, std::size_t io_bytes)
      : file_(file),
        io_bytes_(io_bytes),
        buffers_(
            static_cast<std::byte*>(std::aligned_alloc(4096, ios * io_bytes))),
        ios_(ios),
        done_(ios) {}
  ~NbdWriter() override {
    while (pending_ != 0) Reap(true, [](std::size_t, long) {});
    file_.DropWriter(io_bytes_);
  }
  bool ok() const { return buffers_ != nullptr; }

  std::byte* buffer(std::size_t io) override {
    return buffers_.get() + io * io_bytes_;
  }

  void Queue(std::size_t io, std::uint64_t offset, std::size_t len) override {
    Io& x = ios_[io];
    x = Io{};
    x.offset = offset;
    x.len = len;
    ++pending_;
    std::unique_lock<std::mutex> l;
    Conn* const c = file_.LockUp(
        next_conn_++, Clock::now() + milliseconds(file_.timeout_ms()), l);
    if (c == nullptr) {
      done_.Add(io, -EIO);  // reported by the next Reap
      return;
    }
    x.conn = c;
    // The write has its whole timeout, however long connecting took.
    x.deadline = Clock::now() + milliseconds(file_.timeout_ms());
    x.cookie = nbd_aio_pwrite(c->h, buffer(io), len, offset + kLabelBytes,
                              kNoCompletion, c->write_flags);
    x.gen = c->generation;
    if (x.cookie == -1) {
      done_.Add(io, -EIO);
      return;
    }
    x.in_flight = true;
  }

  std::size_t Reap(
      bool wait, const std::function<void(std::size_t, long)>& done) override {
    for (;;) {
      // Every command ended goes into done_ before any `done` runs (which
      // may reuse a reported IO's buffer): done_ has a slot per IO.
      for (std::size_t io = 0; io < ios_.size(); ++io) {
        Io& x = ios_[io];
        if (!x.in_flight) continue;
        const long result = Poll(x);
        if (result == 0) continue;  // still in flight
        x.in_flight = false;
        if (result > 0) file_.Written(x.offset, x.len, buffer(io));
        done_.Add(io, result);
      }
      const std::size_t reported =
          done_.Report([&](std::size_t io, long result) {
            --pending_;
            done(io, result);
          });
      // Nothing reported: every write pending is in flight.
      if (reported != 0 || !wait || pending_ == 0) return reported;
      // Wait on the connection of the first write in flight.
      for (Io& x : ios_) {
        if (!x.in_flight) continue;
        Conn& c = *x.conn;
        std::lock_guard l(c.mu);
        if (c.generation == x.gen && c.Live()) {
          if (nbd_poll(c.h, MsLeft(x.deadline)) == -1) c.Close();
        }
        break;
      }
    }
  }

 private:
  struct Io {
    bool in_flight = false;  // its command went out, and has not ended
    std::uint64_t offset = 0;
    std::size_t len = 0;
    Conn* conn = nullptr;  // set when the command went out
    std::uint64_t gen = 0;
    std::int64_t cookie = -1;
    Clock::time_point deadline{};
  };

  // x's result if its command has ended (len, or -errno), else 0.
  long Poll(Io& x) {
    Conn& c = *x.conn;
    std::lock_guard l(c.mu);
    if (c.generation != x.gen || !c.Live()) return -ENOTCONN;
    // Done already, or once what the socket holds now is read (checked
    // again after that read: Reap's wait would not see a reply it took).
    for (int tries = 0; tries < 2; ++tries) {
      const int r =
          nbd_aio_command_completed(c.h, static_cast<std::uint64_t>(x.cookie));
      if (r == 1) return static_cast<long>(x.len);
      if (r == -1) return c.CommandError();  // refused: not written
      if (tries == 0 && nbd_poll(c.h, 0) == -1) {
        c.Close();
        return -ENOTCONN;
      }
    }
    if (Clock::now() >= x.deadline) {
      file_.HoldOff(x.deadline - milliseconds(file_.timeout_ms()));
      c.Close();  // a stalled server: every command on it fails
      return -ETIMEDOUT;
    }
    return 0;
  }

  // std::aligned_alloc's, given back with std::free.
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };

  NbdFile& file_;
  const std::size_t io_bytes_;
  // Owned from the start: a std::bad_alloc from a member made after it
  // (ios_, done_) frees it as the constructor unwinds.
  const std::unique_ptr<std::byte, Free> buffers_;
  std::vector<Io> ios_;
  // Results known and not yet reported (Queue's failures, commands ended).
  internal::DoneWrites done_;
  std::size_t pending_ = 0;  // queued, not yet reported
  std::size_t next_conn_ = 0;
};

Result<std::unique_ptr<BackingFileWriter>> NbdFile::NewWriter(
    std::size_t ios, std::size_t io_bytes) {
  {
    // Sized before a reconnect lowered max_write_ (Connect): writes the
    // remote would refuse. The next writer is sized anew.
    std::lock_guard check(check_mu_);
    if (const std::size_t cap = max_write_.load(); cap != 0 && io_bytes > cap) {
      return Err(Status::IoError(
          "writes of " + std::to_string(io_bytes) +
          " bytes: the remote now takes requests of at most " +
          std::to_string(cap)));
    }
    live_writes_.insert(io_bytes);
  }
  std::unique_ptr<NbdWriter> w;
  try {
    w = std::make_unique<NbdWriter>(*this, ios, io_bytes);
  } catch (...) {
    DropWriter(io_bytes);
    throw;
  }
  if (!w->ok()) {  // its destructor drops it from live_writes_
    return Err(Status::ResourceExhausted("NBD writer buffers"));
  }
  return std::unique_ptr<BackingFileWriter>(std::move(w));
}

Status NbdFile::Open() {
  // Each step (a connection made, the label written) has the whole
  // timeout, as the header says: not one deadline for them all, which a
  // slow handshake (TLS, a distant remote) times several connections out of.
  auto deadline = [this] {
    return Clock::now() + milliseconds(options_.timeout_ms);
  };
  Conn& c = *conns_[0];
  std::lock_guard l(c.mu);
  ZT_RETURN_IF_ERROR(Connect(c, deadline()));
  const std::int64_t size = nbd_get_size(c.h);
  if (size < 0) return Status::IoError(LastError());
  if (nbd_is_read_only(c.h) == 1) {
    return Status::InvalidArgument("the export is read-only");
  }
  const auto export_size = static_cast<std::uint64_t>(size);
  size_ = export_size < 2 * kLabelBytes
              ? 0
              : (export_size - kLabelBytes) / kLabelBytes * kLabelBytes;
  if (size_ == 0) {
    return Status::InvalidArgument("the export (" + std::to_string(size) +
                                   " bytes) is smaller than two blocks");
  }
  if (options_.max_bytes != 0) {
    size_ = std::min(size_, std::max(options_.max_bytes / kLabelBytes,
                                     std::uint64_t{1}) * kLabelBytes);
  }
  // NBD_INFO_BLOCK_SIZE (proto.md, "Block size constraints"): a client
  // that asked for it (libnbd does) must honour it. Blocks are 4096
  // bytes, so a larger minimum cannot be served; the maximum caps the
  // writes (BackingStore::NewWriter).
  const std::int64_t min_block = nbd_get_block_size(c.h, LIBNBD_SIZE_MINIMUM);
  const std::int64_t max_block = nbd_get_block_size(c.h, LIBNBD_SIZE_MAXIMUM);
  if (min_block > static_cast<std::int64_t>(kLabelBytes) ||
      (max_block > 0 && max_block < static_cast<std::int64_t>(kLabelBytes))) {
    return Status::InvalidArgument("the export's block size limits (minimum " +
                                   std::to_string(min_block) + ", maximum " +
                                   std::to_string(max_block) +
                                   " bytes) do not allow 4096-byte requests");
  }
  max_write_.store(max_block > 0 ? static_cast<std::size_t>(max_block) /
                                        kLabelBytes * kLabelBytes
                                  : 0);
  multi_conn_ = nbd_can_multi_conn(c.h) == 1;
  fua_ = c.write_flags != 0;
  can_trim_ = c.can_trim;
  if (c.write_flags == 0) {
    Log("the export offers no FUA: written-back pages are as durable as "
        "the server's cache");
  }
  const std::size_t blocks = size_ / kLabelBytes;
  lost_block_.reset(new (std::nothrow) std::atomic<std::uint8_t>[blocks]());
  sums_.reset(new (std::nothrow) std::atomic<std::uint64_t>[blocks]());
  if (lost_block_ == nullptr || sums_ == nullptr) {
    return Status::ResourceExhausted(
        "no memory for the checksums of " + std::to_string(blocks) +
        " blocks (9 bytes each)");
  }
  std::memcpy(label_, kMagic, sizeof(kMagic));
  if (getrandom(label_ + sizeof(kMagic), 16, 0) != 16) {
    return Status::IoError("getrandom for the label");
  }
  if (getrandom(sum_key_, sizeof(sum_key_), 0) !=
      static_cast<ssize_t>(sizeof(sum_key_))) {
    return Status::IoError("getrandom for the checksum key");
  }
  if (const long r = SyncLocked(c, true, label_, 0, deadline()); r != 0) {
    return Status::IoError("writing the label: " + SyncError(r));
  }
  // The other connections are checked as a reconnect is (Connect): a
  // server (or a balancer in front of several) may offer one connection
  // less than the first, and each is used as the first is. One that
  // offers less fails the open; a smaller maximum request caps the writes.
  for (std::size_t i = 1; i < write_connections(); ++i) {
    Conn& ci = *conns_[i];
    std::lock_guard li(ci.mu);
    ZT_RETURN_IF_ERROR(Connect(ci, deadline()));
    std::lock_guard check(check_mu_);
    if (Status st = StillOffers(
            ci.h, "connection " + std::to_string(i + 1) + " of " +
                      std::to_string(write_connections()) + " opened");
        !st.ok()) {
      return Status::InvalidArgument(st.message() +
                                     ", unlike the first connection");
    }
    LowerMaxWrite(ci.h);
  }
  return Status::Ok();
}

// The value of query parameter `name` of `uri` (after '?', '&'-separated),
// or nullopt when it has none.
std::optional<std::string> QueryParam(std::string_view uri,
                                      std::string_view name) {
  const std::size_t q = uri.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = uri.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    if (item.starts_with(name) && item.substr(name.size()).starts_with('=')) {
      return std::string(item.substr(name.size() + 1));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// The URI's TLS settings make sense. Over TCP (nbds://) the server must be
// authenticated: by a PSK, or by a CA, the ca-cert.pem of tls-certificates=
// DIR or of libnbd's default folders (/etc/pki/libnbd for root,
// $HOME/.pki/libnbd and $HOME/.config/pki/libnbd otherwise); libnbd (1.14)
// verifies no certificate where it finds none (it then loads the system's CAs
// but turns verification off). TLS parameters on a plain scheme, which libnbd
// ignores, are refused.
Status CheckTlsParams(std::string_view uri) {
  const std::optional<std::string> dir = QueryParam(uri, "tls-certificates");
  const bool psk = QueryParam(uri, "tls-psk-file").has_value();
  if (uri.starts_with("nbds:")) {
    if (psk) return Status::Ok();
    // Where libnbd (lib/crypto.c) looks for ca-cert.pem.
    std::vector<std::string> dirs;
    if (dir.has_value()) {
      dirs.push_back(*dir);
    } else if (::geteuid() == 0) {
      dirs.push_back("/etc/pki/libnbd");
    } else if (const char* home = std::getenv("HOME")) {
      dirs.push_back(std::string(home) + "/.pki/libnbd");
      dirs.push_back(std::string(home) + "/.config/pki/libnbd");
    }
    std::string tried;
    for (const std::string& d : dirs) {
      const std::string ca = d + "/ca-cert.pem";
      if (::access(ca.c_str(), R_OK) == 0) return Status::Ok();
      tried += (tried.empty() ? "" : ", ") + ca;
    }
    return Status::InvalidArgument(
        "nbds:// needs the server's CA (tls-certificates=DIR, a folder "
        "holding ca-cert.pem" +
        (tried.empty() ? std::string()
                       : std::string(dir.has_value() ? "; cannot read "
                                                     : "; none readable: ") +
                             tried) +
        ") or a pre-shared key (tls-psk-file=FILE): without either, the "
        "server's certificate is not verified, and anyone in the path could "
        "read and change written-back pages");
  }
  if (!uri.starts_with("nbds+unix:") &&
      (dir.has_value() || psk || QueryParam(uri, "tls-username"))) {
    return Status::InvalidArgument(
        "TLS parameters on a plain-text URI (the connection would not use "
        "TLS): use nbds:// or nbds+unix://");
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<BackingFile>> OpenNbdBackingFile(
    const std::string& uri, const NbdBackingOptions& options) {
  if (!IsNbdUri(uri)) {
    return Err(Status::InvalidArgument("not an NBD URI: " + uri));
  }
  if (Status st = CheckTlsParams(uri); !st.ok()) {
    return Err(Status(st.code(), uri + ": " + st.message()));
  }
  if (options.connections < 1 || options.connections > 64) {
    return Err(Status::InvalidArgument("connections must be 1..64"));
  }
  if (options.timeout_ms == 0) {
    return Err(Status::InvalidArgument("timeout must be above 0"));
  }
  auto file = std::make_shared<NbdFile>(uri, options);
  // Annotate keeps a failed connection's errno (ENOENT, ECONNREFUSED).
  if (Status st = file->Open(); !st.ok()) return Err(Annotate(uri, st));
  return std::shared_ptr<BackingFile>(std::move(file));
}

}  // namespace ztier::nbd
