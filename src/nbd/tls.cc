// tls.cc: see tls.h.
//
// How the socket is driven: GnuTLS gets our own pull/push functions, which
// call recv()/sendmsg() with MSG_DONTWAIT (and MSG_NOSIGNAL), so every GnuTLS
// call returns GNUTLS_E_AGAIN instead of blocking. The loops here then wait
// in poll() for the rest of their timeout and call GnuTLS again, as its
// manual asks for non-blocking sessions (with the same arguments).
// GnuTLS's own timers (handshake and record timeouts) are switched off: the
// deadline is kept in one place, here.
//
// Threads: GnuTLS lets one thread send while another receives on a session
// (manual, "Thread safety"), except around key updates. Under TLS 1.3 those
// happen inside ordinary record calls: the client's KeyUpdate is processed
// inside gnutls_record_recv(), and GnuTLS starts its own after 2^24 sent
// records inside gnutls_record_send(); both rewrite the session's table of
// cipher states (epochs) that the other direction is reading. So each GnuTLS
// call on an established session holds the transport's mutex. Because no
// call ever blocks (the waiting is in poll(), outside the lock), the lock is
// held only while one record is encrypted or decrypted: the receiver never
// waits behind a peer that does not read, nor the sender behind one that
// does not write.
#include "nbd/tls.h"

#include <gnutls/gnutls.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "platform/clock.h"
#include "platform/read_file.h"

// gnutls_record_send2 and priority_init2 need 3.6.3; TLS 1.3 is on by
// default from 3.6.5. Since 3.3.0 the library initialises itself when it is
// loaded, so gnutls_global_init() is not called here.
#if GNUTLS_VERSION_NUMBER < 0x030605
#error "ztier needs GnuTLS 3.6.5 or newer"
#endif

namespace ztier::nbd {

// TLS 1.2 and 1.3 only. TLS 1.0 and 1.1 are deprecated (RFC 8996), and every
// NBD client that speaks TLS (libnbd, qemu, nbd-client) links a GnuTLS or
// OpenSSL recent enough for 1.2; offering only these keeps downgrade attacks
// out. Within them, GnuTLS's "NORMAL" set picks ciphers and groups (and
// prefers TLS 1.3).
constexpr char kPriorities[] = "NORMAL:-VERS-TLS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

struct TlsContext::Impl {
  gnutls_certificate_credentials_t creds = nullptr;
  gnutls_priority_t priorities = nullptr;

  ~Impl() {
    if (priorities != nullptr) gnutls_priority_deinit(priorities);
    if (creds != nullptr) gnutls_certificate_free_credentials(creds);
  }
};

namespace {

// The whole of a credential file of at most 1 MiB, read in place
// (ReadRegularFile), so a private key leaves no stray copies behind (the
// caller wipes the result). Any failure is kInvalidArgument: the file is
// one the settings name.
Result<std::string> ReadSmallFile(const std::string& path,
                                  std::string_view what) {
  auto data = platform::ReadRegularFile(path, 1 << 20, what);
  if (!data.has_value()) {
    return Err(Status::InvalidArgument(data.error().message()));
  }
  return data;
}

gnutls_datum_t Datum(std::string& s) {
  return {reinterpret_cast<unsigned char*>(s.data()),
          static_cast<unsigned int>(s.size())};
}

// A point in time `timeout_ms` from now (-1: never).
class Deadline {
 public:
  explicit Deadline(int timeout_ms)
      : forever_(timeout_ms < 0),
        end_(platform::MonotonicClock::now() +
             std::chrono::milliseconds(std::max(timeout_ms, 0))) {}

  // Milliseconds left, rounded up; 0 once passed; -1 for never.
  int RemainingMs() const {
    if (forever_) return -1;
    const auto left = end_ - platform::MonotonicClock::now();
    if (left <= platform::MonotonicClock::duration::zero()) return 0;
    const auto ms =
        std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
  }

 private:
  bool forever_;
  platform::MonotonicClock::time_point end_;
};

// Waits until `fd` is ready for `events` (or has an error or hang-up, which
// the next socket call reports), or fails with "timed out <what>".
Status WaitReady(int fd, short events, const Deadline& deadline,
                 std::string_view what) {
  for (;;) {
    const int ms = deadline.RemainingMs();
    if (ms == 0) return Status::IoError("timed out " + std::string(what));
    struct pollfd p = {fd, events, 0};
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return Status::Ok();
    if (r < 0 && errno != EINTR) return PosixError("poll", errno);
    // Timed out (rechecked above, against rounding) or interrupted.
  }
}

// GnuTLS transport callbacks. The transport pointer is the socket itself.
int FdOf(gnutls_transport_ptr_t ptr) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(ptr));
}

ssize_t Pull(gnutls_transport_ptr_t ptr, void* buf, std::size_t n) {
  ssize_t r;
  do {
    r = ::recv(FdOf(ptr), buf, n, MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  return r;  // GnuTLS reads errno (EAGAIN becomes GNUTLS_E_AGAIN).
}

ssize_t VecPush(gnutls_transport_ptr_t ptr, const giovec_t* iov, int iovcnt) {
  struct msghdr msg = {};
  msg.msg_iov = const_cast<giovec_t*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
  ssize_t r;
  do {
    r = ::sendmsg(FdOf(ptr), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  return r;
}

// Whether data can be read within `ms`. GnuTLS calls it only when one of its
// own timers is set (they are off here), but it must exist beside a custom
// pull function.
int PullTimeout(gnutls_transport_ptr_t ptr, unsigned int ms) {
  struct pollfd p = {FdOf(ptr), POLLIN, 0};
  const int wait = ms == GNUTLS_INDEFINITE_TIMEOUT
                       ? -1
                       : static_cast<int>(std::min<unsigned>(ms, INT_MAX));
  int r;
  do {
    r = ::poll(&p, 1, wait);
  } while (r < 0 && errno == EINTR);
  return r;
}

bool IsRetry(ssize_t r) {
  return r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED;
}

Status TlsError(std::string_view what, ssize_t r) {
  return Status::IoError(std::string(what) + ": " +
                         gnutls_strerror(static_cast<int>(r)));
}

class TlsTransport final : public Transport {
 public:
  // Takes ownership of `session`, whose handshake has completed.
  TlsTransport(int fd, gnutls_session_t session)
      : fd_(fd),
        session_(session),
        name_(gnutls_protocol_get_name(gnutls_protocol_get_version(session))),
        record_size_(std::clamp<std::size_t>(
            gnutls_record_get_max_size(session), 512, 16384)),
        gather_(new char[record_size_]) {
    if (name_ == nullptr) name_ = "TLS";
  }

  ~TlsTransport() override {
    // Best effort close_notify, only if the session may still be sound: one
    // non-blocking attempt, no waiting for the peer's answer.
    if (!shut_down_.load(std::memory_order_acquire)) {
      gnutls_bye(session_, GNUTLS_SHUT_WR);
    }
    gnutls_deinit(session_);
  }

  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;

  Result<std::size_t> Recv(void* buf, std::size_t n, int timeout_ms) override;
  Status Send(const struct iovec* iov, int iovcnt, int timeout_ms) override;
  Result<std::size_t> TrySend(const struct iovec*, int) override { return 0; }
  void Shutdown() override;
  const char* name() const override { return name_; }

 private:
  Status ShutDownError() const {
    return Status::IoError("TLS transport shut down");
  }
  // Sends part of [p, p+n) as one or more records straight from `p` (no
  // copy); stores how much went in *sent.
  Status SendRecords(const char* p, std::size_t n, int timeout_ms,
                     std::size_t* sent);
  // Sends all of [p, p+n).
  Status SendAll(const char* p, std::size_t n, int timeout_ms);

  const int fd_;
  const gnutls_session_t session_;
  const char* name_;
  // Plaintext bytes per record when sending: small iovec entries are
  // gathered in gather_ up to this size (used by the sending thread only).
  const std::size_t record_size_;
  const std::unique_ptr<char[]> gather_;
  // Held around every GnuTLS call on session_ (never while waiting: no call
  // blocks). See the file comment.
  std::mutex mu_;
  std::atomic<bool> shut_down_{false};
};

Result<std::size_t> TlsTransport::Recv(void* buf, std::size_t n,
                                       int timeout_ms) {
  const Deadline deadline(timeout_ms);
  for (;;) {
    if (shut_down_.load(std::memory_order_acquire)) return Err(ShutDownError());
    ssize_t r;
    bool pending = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      r = gnutls_record_recv(session_, buf, n);
      // Decrypted bytes may already be buffered: read them before waiting.
      if (IsRetry(r)) pending = gnutls_record_check_pending(session_) > 0;
    }
    if (r > 0) return static_cast<std::size_t>(r);
    // A peer that closes the socket without a close_notify alert counts as
    // a clean end too: NBD ends a session with its own NBD_CMD_DISC, so a
    // truncation attack can only cut the connection short, which the server
    // handles like any lost connection (it never acts on a partial request).
    if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION) {
      if (shut_down_.load(std::memory_order_acquire)) {
        return Err(ShutDownError());
      }
      return 0;
    }
    if (IsRetry(r)) {
      if (pending) continue;
      ZT_RETURN_IF_ERROR(WaitReady(fd_, POLLIN, deadline, "receiving (TLS)"));
      continue;
    }
    if (r == GNUTLS_E_REHANDSHAKE) {
      return Err(Status::IoError("TLS renegotiation is not supported"));
    }
    if (gnutls_error_is_fatal(static_cast<int>(r)) == 0) {
      // A warning alert: ignore it, within the deadline.
      if (deadline.RemainingMs() == 0) {
        return Err(Status::IoError("timed out receiving (TLS)"));
      }
      continue;
    }
    if (shut_down_.load(std::memory_order_acquire)) return Err(ShutDownError());
    return Err(TlsError("TLS receive", r));
  }
}

Status TlsTransport::SendRecords(const char* p, std::size_t n, int timeout_ms,
                                 std::size_t* sent) {
  for (;;) {
    if (shut_down_.load(std::memory_order_acquire)) return ShutDownError();
    ssize_t r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // After GNUTLS_E_AGAIN the record is already encrypted and queued;
      // the same call again finishes sending it.
      r = gnutls_record_send(session_, p, n);
    }
    if (r >= 0) {
      *sent = static_cast<std::size_t>(r);
      return Status::Ok();
    }
    if (!IsRetry(r)) return TlsError("TLS send", r);
    ZT_RETURN_IF_ERROR(
        WaitReady(fd_, POLLOUT, Deadline(timeout_ms), "sending (TLS)"));
  }
}

Status TlsTransport::SendAll(const char* p, std::size_t n, int timeout_ms) {
  while (n > 0) {
    std::size_t sent = 0;
    ZT_RETURN_IF_ERROR(SendRecords(p, n, timeout_ms, &sent));
    p += sent;
    n -= sent;
  }
  return Status::Ok();
}

// Each record costs a header, a tag and (with MSG_DONTWAIT pushes) usually a
// syscall, so an NBD reply (a 16-byte header and its data) should not become
// a 16-byte record plus the rest. Entries are gathered into records of
// record_size_ bytes; only a run of a whole record or more from one entry
// goes straight from the caller's buffer. So a header and the first
// record_size_ - 16 bytes of data share a record, and at most about one
// record per entry is copied.
//
// The gathering is done here rather than with gnutls_record_cork(): corking
// overwrites GnuTLS's note that the client asked for a KeyUpdate, so the
// answer RFC 8446 requires would silently never be sent.
Status TlsTransport::Send(const struct iovec* iov, int iovcnt,
                          int timeout_ms) {
  std::size_t gathered = 0;
  for (int i = 0; i < iovcnt; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    std::size_t left = iov[i].iov_len;
    while (left > 0) {
      if (gathered == 0 && left >= record_size_) {
        std::size_t sent = 0;
        ZT_RETURN_IF_ERROR(SendRecords(p, left, timeout_ms, &sent));
        p += sent;
        left -= sent;
        continue;
      }
      const std::size_t take = std::min(left, record_size_ - gathered);
      std::memcpy(gather_.get() + gathered, p, take);
      p += take;
      left -= take;
      gathered += take;
      if (gathered == record_size_) {
        ZT_RETURN_IF_ERROR(SendAll(gather_.get(), gathered, timeout_ms));
        gathered = 0;
      }
    }
  }
  if (gathered > 0) {
    ZT_RETURN_IF_ERROR(SendAll(gather_.get(), gathered, timeout_ms));
  }
  return Status::Ok();
}

void TlsTransport::Shutdown() {
  // The flag first, so a thread woken by the shutdown sees why.
  if (shut_down_.exchange(true, std::memory_order_acq_rel)) return;
  ::shutdown(fd_, SHUT_RDWR);
}

// Owns a session until it is handed to a TlsTransport.
class SessionGuard {
 public:
  explicit SessionGuard(gnutls_session_t s) : s_(s) {}
  ~SessionGuard() {
    if (s_ != nullptr) gnutls_deinit(s_);
  }
  SessionGuard(const SessionGuard&) = delete;
  SessionGuard& operator=(const SessionGuard&) = delete;
  gnutls_session_t release() { return std::exchange(s_, nullptr); }

 private:
  gnutls_session_t s_;
};

}  // namespace

TlsContext::TlsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsContext::~TlsContext() = default;

Result<std::unique_ptr<TlsContext>> TlsContext::Load(
    const std::string& cert_file, const std::string& key_file) {
  ZT_ASSIGN_OR_RETURN(std::string cert,
                      ReadSmallFile(cert_file, "TLS certificate"));
  ZT_ASSIGN_OR_RETURN(std::string key, ReadSmallFile(key_file, "TLS key"));

  auto impl = std::make_unique<Impl>();
  int r = gnutls_certificate_allocate_credentials(&impl->creds);
  if (r < 0) {
    explicit_bzero(key.data(), key.size());
    return Err(Status::ResourceExhausted(
        std::string("TLS credentials: ") + gnutls_strerror(r)));
  }
  const gnutls_datum_t cert_datum = Datum(cert);
  const gnutls_datum_t key_datum = Datum(key);
  r = gnutls_certificate_set_x509_key_mem2(impl->creds, &cert_datum,
                                           &key_datum, GNUTLS_X509_FMT_PEM,
                                           nullptr, 0);
  explicit_bzero(key.data(), key.size());
  if (r < 0) {
    return Err(Status::InvalidArgument("TLS certificate " + cert_file +
                                       " with key " + key_file + ": " +
                                       gnutls_strerror(r)));
  }

  const char* err_pos = nullptr;
  r = gnutls_priority_init2(&impl->priorities, kPriorities, &err_pos, 0);
  if (r < 0) {
    return Err(Status::InvalidArgument(
        std::string("TLS priorities \"") + kPriorities + "\" at \"" +
        (err_pos != nullptr ? err_pos : "") + "\": " + gnutls_strerror(r)));
  }
  return std::unique_ptr<TlsContext>(new TlsContext(std::move(impl)));
}

Result<std::unique_ptr<Transport>> StartTls(int fd, const TlsContext& ctx,
                                            int timeout_ms) {
  const Deadline deadline(timeout_ms);
  gnutls_session_t session = nullptr;
  int r = gnutls_init(&session, GNUTLS_SERVER | GNUTLS_NONBLOCK);
  if (r < 0) return Err(TlsError("TLS session", r));
  SessionGuard guard(session);

  r = gnutls_priority_set(session, ctx.impl().priorities);
  if (r < 0) return Err(TlsError("TLS priorities", r));
  r = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE,
                             ctx.impl().creds);
  if (r < 0) return Err(TlsError("TLS credentials", r));
  gnutls_certificate_server_set_request(session, GNUTLS_CERT_IGNORE);

  gnutls_transport_set_ptr(
      session, reinterpret_cast<gnutls_transport_ptr_t>(
                   static_cast<std::intptr_t>(fd)));
  gnutls_transport_set_pull_function(session, Pull);
  gnutls_transport_set_vec_push_function(session, VecPush);
  gnutls_transport_set_pull_timeout_function(session, PullTimeout);
  gnutls_handshake_set_timeout(session, 0);  // the deadline is ours

  for (;;) {
    r = gnutls_handshake(session);
    if (r == GNUTLS_E_SUCCESS) break;
    if (gnutls_error_is_fatal(r) != 0) {
      // Tell the client why, if the socket takes it now; never wait.
      gnutls_alert_send_appropriate(session, r);
      return Err(TlsError("TLS handshake", r));
    }
    if (IsRetry(r)) {
      // Only this thread uses the session yet, so the direction is ours.
      const short events =
          gnutls_record_get_direction(session) == 0 ? POLLIN : POLLOUT;
      ZT_RETURN_IF_ERROR(
          WaitReady(fd, events, deadline, "in the TLS handshake"));
    } else if (deadline.RemainingMs() == 0) {
      // Non-fatal (a warning alert): go on, but not past the deadline.
      return Err(Status::IoError("timed out in the TLS handshake"));
    }
  }
  return std::unique_ptr<Transport>(
      std::make_unique<TlsTransport>(fd, guard.release()));
}

}  // namespace ztier::nbd
