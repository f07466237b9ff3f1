// connection.cc: one NBD connection and the shared workers (see
// connection.h for the design).
#include "nbd/connection.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "nbd/handshake.h"
#include "nbd/protocol.h"
#include "nbd/socket_util.h"

namespace ztier::nbd {
namespace {

constexpr std::size_t kInCapacity = 256 << 10;
constexpr std::size_t kOutCapacity = 256 << 10;
constexpr std::uint32_t kInlineCeiling = 64 << 10;
constexpr std::uint32_t kInlineZeroBytes = 1 << 20;  // TRIM, WRITE_ZEROES
constexpr std::size_t kKeepBufferBytes = 1 << 20;

}  // namespace

// ---- WorkQueue ----

WorkQueue::WorkQueue(std::size_t workers) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { Loop(); });
  }
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  assert(head_ == nullptr);
}

void WorkQueue::Push(Job* job) {
  job->next = nullptr;
  {
    std::lock_guard l(mu_);
    if (tail_ == nullptr) {
      head_ = tail_ = job;
    } else {
      tail_->next = job;
      tail_ = job;
    }
  }
  cv_.notify_one();
}

void WorkQueue::Loop() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || head_ != nullptr; });
    if (head_ == nullptr) return;  // stop_ and drained
    Job* job = head_;
    head_ = job->next;
    if (head_ == nullptr) tail_ = nullptr;
    l.unlock();
    job->conn->RunJob(job);
    l.lock();
  }
}

// ---- Connection ----

Connection::Connection(int fd, DeviceRegistry* registry, WorkQueue* queue,
                       ConnectionLimits limits,
                       std::function<void(Connection*)> on_exit)
    : fd_(fd),
      registry_(registry),
      queue_(queue),
      limits_(limits),
      on_exit_(std::move(on_exit)),
      jobs_(std::max<std::size_t>(1, limits.max_in_flight)) {
  for (Job& j : jobs_) {
    j.conn = this;
    j.next = free_;
    free_ = &j;
  }
}

Connection::~Connection() { assert(!thread_.joinable()); }

void Connection::Start() { thread_ = std::thread([this] { Main(); }); }

void Connection::Shutdown() {
  std::lock_guard l(mu_);
  stopping_ = true;
  if (!closed_) ::shutdown(fd_, SHUT_RDWR);
  cv_.notify_all();
}

void Connection::Join() {
  if (thread_.joinable()) thread_.join();
}

void Connection::Main() {
  Result<Negotiated> n = Handshake(fd_, registry_, limits_.max_request_bytes);
  if (n.has_value()) {
    device_ = std::move(n->device);
    ref_.emplace(std::move(*n->ref));
    size_ = n->size;
    Serve();
  }
  ref_.reset();  // Reset() of the device is allowed again
  device_.reset();
  {
    std::lock_guard l(mu_);
    closed_ = true;
    ::close(fd_);
  }
  on_exit_(this);
}

void Connection::Serve() {
  in_ = std::make_unique_for_overwrite<std::byte[]>(kInCapacity);
  out_ = std::make_unique_for_overwrite<std::byte[]>(kOutCapacity);
  for (;;) {
    if (in_end_ - in_begin_ < sizeof(Request)) {
      // Nothing complete left to parse: send what gathered, then wait.
      if (!FlushBatch() || !Fill(sizeof(Request))) break;
    }
    Request r;
    std::memcpy(&r, in_.get() + in_begin_, sizeof(r));
    in_begin_ += sizeof(r);
    if (FromBig(r.magic) != kRequestMagic) break;  // lost sync: close
    const std::uint16_t type = FromBig(r.type);
    const std::uint16_t flags = FromBig(r.flags);
    const std::uint64_t offset = FromBig(r.offset);
    const std::uint32_t length = FromBig(r.length);
    if (type == kCmdDisc) break;
    // A payload this large is not read: close rather than drain it.
    if (type == kCmdWrite && length > limits_.max_request_bytes) break;

    if (const std::uint32_t error = Validate(type, flags, offset, length)) {
      if (type == kCmdWrite && !SkipInput(length)) break;
      if (!AddReply(r.cookie, error)) break;
      continue;
    }
    const std::uint32_t inline_max =
        std::min(limits_.inline_max_bytes, kInlineCeiling);
    bool small = false;
    switch (type) {
      case kCmdRead:
      case kCmdWrite: small = length <= inline_max; break;
      case kCmdTrim:
      case kCmdWriteZeroes:
        small = inline_max > 0 && length <= kInlineZeroBytes;
        break;
      default: small = true; break;  // FLUSH, CACHE: nothing to do
    }
    const bool ok = small ? RunInline(type, flags, r.cookie, offset, length)
                          : Hand(type, flags, r.cookie, offset, length);
    if (!ok) break;
  }
  FlushBatch();
  WaitIdle();
}

std::uint32_t Connection::Validate(std::uint16_t type, std::uint16_t flags,
                                   std::uint64_t offset,
                                   std::uint32_t length) const {
  // FUA is accepted everywhere and means nothing: memory is the medium.
  std::uint16_t allowed = kCmdFlagFua;
  switch (type) {
    case kCmdRead:
      if (length > limits_.max_request_bytes) return kErrInval;
      break;
    case kCmdWrite:
    case kCmdTrim:
    case kCmdCache:
      break;
    case kCmdFlush:
      return (flags & ~allowed) != 0 ? kErrInval : 0;  // offset/length unused
    case kCmdWriteZeroes:
      allowed |= kCmdFlagNoHole | kCmdFlagFastZero;
      break;
    default:  // BLOCK_STATUS (no meta context negotiated), unknown
      return kErrInval;
  }
  if ((flags & ~allowed) != 0) return kErrInval;
  if (offset > size_ || length > size_ - offset) return kErrInval;
  return 0;
}

bool Connection::RunInline(std::uint16_t type, std::uint16_t flags,
                           std::uint64_t cookie, std::uint64_t offset,
                           std::uint32_t length) {
  Status s;
  switch (type) {
    case kCmdRead: {
      // Header and data go straight into the output batch.
      if (out_used_ + sizeof(SimpleReply) + length > kOutCapacity &&
          !FlushBatch()) {
        return false;
      }
      std::byte* header = out_.get() + out_used_;
      std::byte* data = header + sizeof(SimpleReply);
      s = device_->Read(offset, std::span<std::byte>(data, length));
      const std::uint32_t error = ToNbdError(s);
      const SimpleReply reply = {ToBig(kSimpleReplyMagic), ToBig(error),
                                 cookie};
      std::memcpy(header, &reply, sizeof(reply));
      out_used_ += sizeof(reply) + (error == 0 ? length : 0);
      return true;
    }
    case kCmdWrite:
      if (!Fill(length)) return false;
      s = device_->Write(offset, std::span<const std::byte>(
                                     in_.get() + in_begin_, length));
      in_begin_ += length;
      break;
    case kCmdTrim:
      s = device_->Trim(offset, length);
      break;
    case kCmdWriteZeroes:
      // FAST_ZERO needs nothing: zeroing never falls back to writing.
      s = device_->WriteZeroes(offset, length, (flags & kCmdFlagNoHole) != 0);
      break;
    case kCmdFlush:
      s = device_->Flush();
      break;
    case kCmdCache:
      break;  // everything is in memory already
  }
  return AddReply(cookie, ToNbdError(s));
}

bool Connection::Hand(std::uint16_t type, std::uint16_t flags,
                      std::uint64_t cookie, std::uint64_t offset,
                      std::uint32_t length) {
  const bool has_buffer = type == kCmdRead || type == kCmdWrite;
  Job* job = AcquireJob(has_buffer ? length : 0);
  if (job == nullptr) return false;
  job->type = type;
  job->flags = flags;
  job->cookie = cookie;
  job->offset = offset;
  job->length = length;
  if (has_buffer && job->capacity < length) {
    job->buffer.reset();
    job->buffer = std::make_unique_for_overwrite<std::byte[]>(length);
    job->capacity = length;
  }
  if (type == kCmdWrite && !ReadPayload(job->buffer.get(), length)) {
    Release(job);
    return false;
  }
  queue_->Push(job);
  return true;
}

void Connection::RunJob(Job* job) {
  const std::span<std::byte> data(job->buffer.get(),
                                  job->buffer ? job->length : 0);
  Status s;
  switch (job->type) {
    case kCmdRead: s = device_->Read(job->offset, data); break;
    case kCmdWrite: s = device_->Write(job->offset, data); break;
    case kCmdTrim: s = device_->Trim(job->offset, job->length); break;
    case kCmdWriteZeroes:
      s = device_->WriteZeroes(job->offset, job->length,
                               (job->flags & kCmdFlagNoHole) != 0);
      break;
    default: break;
  }
  const std::uint32_t error = ToNbdError(s);
  SimpleReply reply = {ToBig(kSimpleReplyMagic), ToBig(error), job->cookie};
  struct iovec iov[2] = {{&reply, sizeof(reply)},
                         {data.data(), data.size()}};
  const bool with_data = job->type == kCmdRead && error == 0;
  {
    std::lock_guard l(send_mu_);
    SendLocked(iov, with_data ? 2 : 1);
  }
  Release(job);
}

// ---- input ----

bool Connection::Fill(std::size_t n) {
  assert(n <= kInCapacity);
  if (in_end_ - in_begin_ >= n) return true;
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ + n > kInCapacity) {
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  while (in_end_ - in_begin_ < n) {
    const ssize_t r =
        ::recv(fd_, in_.get() + in_end_, kInCapacity - in_end_, 0);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    in_end_ += static_cast<std::size_t>(r);
  }
  return true;
}

bool Connection::SkipInput(std::size_t n) {
  const std::size_t have = std::min(n, in_end_ - in_begin_);
  in_begin_ += have;
  return Discard(fd_, n - have).ok();
}

bool Connection::ReadPayload(std::byte* dst, std::size_t n) {
  const std::size_t have = std::min(n, in_end_ - in_begin_);
  std::memcpy(dst, in_.get() + in_begin_, have);
  in_begin_ += have;
  return ReadExact(fd_, dst + have, n - have).ok();
}

// ---- output ----

bool Connection::AddReply(std::uint64_t cookie, std::uint32_t error) {
  if (out_used_ + sizeof(SimpleReply) > kOutCapacity && !FlushBatch()) {
    return false;
  }
  const SimpleReply reply = {ToBig(kSimpleReplyMagic), ToBig(error), cookie};
  std::memcpy(out_.get() + out_used_, &reply, sizeof(reply));
  out_used_ += sizeof(reply);
  return true;
}

bool Connection::FlushBatch() {
  if (out_used_ == 0) return true;
  struct iovec iov = {out_.get(), out_used_};
  out_used_ = 0;
  std::lock_guard l(send_mu_);
  return SendLocked(&iov, 1);
}

bool Connection::SendLocked(struct iovec* iov, int n) {
  if (broken_) return false;
  if (!SendAll(fd_, iov, n).ok()) {
    // The peer is gone: wake the reader so that the connection ends.
    broken_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    return false;
  }
  return true;
}

// ---- jobs ----

Job* Connection::AcquireJob(std::uint64_t bytes) {
  std::unique_lock l(mu_);
  auto ready = [&] {
    return stopping_ ||
           (free_ != nullptr &&
            (in_flight_ == 0 ||
             in_flight_bytes_ + bytes <= limits_.max_in_flight_bytes));
  };
  if (!ready()) {
    // Let the client see the replies we hold while we wait.
    l.unlock();
    if (!FlushBatch()) return nullptr;
    l.lock();
    cv_.wait(l, ready);
  }
  if (stopping_) return nullptr;
  Job* job = free_;
  free_ = job->next;
  ++in_flight_;
  in_flight_bytes_ += bytes;
  job->charged = bytes;
  return job;
}

void Connection::Release(Job* job) {
  if (job->capacity > kKeepBufferBytes) {
    job->buffer.reset();
    job->capacity = 0;
  }
  // Notify under the lock: once it is released the reader may finish and
  // the Connection may be deleted.
  std::lock_guard l(mu_);
  --in_flight_;
  in_flight_bytes_ -= job->charged;
  job->next = free_;
  free_ = job;
  cv_.notify_all();
}

void Connection::WaitIdle() {
  std::unique_lock l(mu_);
  cv_.wait(l, [this] { return in_flight_ == 0; });
}

}  // namespace ztier::nbd
