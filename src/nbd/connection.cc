// connection.cc: one NBD connection and the shared workers (see
// connection.h for the design).
#include "connection.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <system_error>
#include <utility>

#include "handshake.h"
#include "nbd/protocol.h"
#include "nbd/transport.h"
#include "platform/clock.h"
#include "work_queue.h"

namespace ztier::nbd {
namespace {

constexpr std::size_t kInCapacity = 256 << 10;
constexpr std::size_t kOutCapacity = 256 << 10;
constexpr std::uint32_t kInlineCeiling = 64 << 10;
constexpr std::uint32_t kInlineZeroBytes = 1 << 20;  // TRIM, WRITE_ZEROES
// A WRITE payload over the request limit but at most this long is read
// and dropped (EINVAL); a longer one closes the connection.
constexpr std::uint32_t kMaxDrainedPayload = 1u << 25;
// A queued TRIM or WRITE_ZEROES runs in steps this long (connection.h).
constexpr std::uint64_t kZeroStepBytes = 16 << 20;
constexpr std::size_t kKeepBufferBytes = 1 << 20;
// Error messages in structured ERROR chunks are cut to this many bytes.
constexpr std::size_t kMaxErrorMessage = 256;
constexpr std::size_t kMaxReplyHead = sizeof(ErrorChunk) + kMaxErrorMessage;
// Page states read per Device::PageStates call during BLOCK_STATUS.
constexpr std::size_t kStateBatch = 512;

// Writes the head of a reply into dst (room for kMaxReplyHead bytes) and
// returns its size. A simple reply, unless `structured` and `type` is READ
// or BLOCK_STATUS: then an ERROR chunk (with `message`, cut to
// kMaxErrorMessage) when `error` is set, else, for READ, an OFFSET_DATA
// chunk head (its `length` data bytes follow) or, for a zero-length READ, a
// NONE chunk. `cookie` is as on the wire.
std::size_t PutReplyHead(std::byte* dst, bool structured, std::uint16_t type,
                         std::uint64_t cookie, std::uint64_t offset,
                         std::uint32_t length, std::uint32_t error,
                         std::string_view message) {
  if (!structured || (type != kCmdRead && type != kCmdBlockStatus)) {
    const SimpleReply r = {ToBig(kSimpleReplyMagic), ToBig(error), cookie};
    std::memcpy(dst, &r, sizeof(r));
    return sizeof(r);
  }
  StructuredReplyHeader h = {ToBig(kStructuredReplyMagic),
                             ToBig(kReplyFlagDone), 0, cookie, 0};
  if (error == 0 && length == 0) {
    h.type = ToBig(kReplyTypeNone);
    std::memcpy(dst, &h, sizeof(h));
    return sizeof(h);
  }
  if (error == 0) {
    h.type = ToBig(kReplyTypeOffsetData);
    h.length = ToBig<std::uint32_t>(sizeof(std::uint64_t) + length);
    const OffsetDataChunk c = {h, ToBig(offset)};
    std::memcpy(dst, &c, sizeof(c));
    return sizeof(c);
  }
  message = message.substr(0, kMaxErrorMessage);
  h.type = ToBig(kReplyTypeError);
  h.length = ToBig<std::uint32_t>(sizeof(ErrorChunk) - sizeof(h) +
                                  message.size());
  const ErrorChunk c = {h, ToBig(error),
                        ToBig(static_cast<std::uint16_t>(message.size()))};
  std::memcpy(dst, &c, sizeof(c));
  if (!message.empty()) {  // an empty view's data() may be null
    std::memcpy(dst + sizeof(c), message.data(), message.size());
  }
  return sizeof(c) + message.size();
}

using platform::MonotonicNs;

// Records a READ's or WRITE's latency (request read -> reply sent or
// handed on); other commands have no histogram.
void ObserveLatency(NbdServerCounters* counters, std::uint16_t type,
                    std::uint64_t start_ns) {
  if (counters == nullptr || (type != kCmdRead && type != kCmdWrite)) return;
  const std::uint64_t now = MonotonicNs();
  const std::uint64_t ns = now > start_ns ? now - start_ns : 0;
  (type == kCmdRead ? counters->read_latency : counters->write_latency)
      .Observe(ns);
}

}  // namespace

// ---- Connection ----

Connection::Connection(int fd, DeviceRegistry* registry, WorkQueue* queue,
                       ConnectionLimits limits,
                       std::function<void(Connection*)> on_exit,
                       std::string name)
    : fd_(fd),
      transport_(NewPlainTransport(fd)),
      registry_(registry),
      queue_(queue),
      limits_(limits),
      on_exit_(std::move(on_exit)),
      name_(std::move(name)),
      jobs_(std::max<std::size_t>(1, limits.max_in_flight)) {
  for (Job& j : jobs_) {
    j.conn = this;
    j.lane = &lane_;
    j.next = free_;
    free_ = &j;
  }
}

Connection::~Connection() { assert(!thread_.joinable()); }

bool Connection::Start() {
  try {
    thread_ = std::thread([this] { Main(); });
    return true;
  } catch (const std::system_error&) {
    std::lock_guard l(mu_);
    closed_ = true;
    ::close(fd_);
    return false;
  }
}

bool Connection::StartWriter() {
  try {
    writer_ = std::thread([this] { WriterLoop(); });
    return true;
  } catch (const std::system_error&) {
    Warn("no thread for the reply writer; the connection ends");
    MarkBroken("no thread for the reply writer");
    return false;
  }
}

bool Connection::StopsWork() {
  {
    std::lock_guard l(mu_);
    if (stopping_) return true;
  }
  std::lock_guard l(send_mu_);
  return broken_;
}

void Connection::BeginStop() {
  std::lock_guard l(mu_);
  stopping_ = true;
  StopReceivingIfDone();
  cv_.notify_all();
}

void Connection::StopReceivingIfDone() {
  // Receiving ends once what the socket holds has been read (then EOF);
  // sending goes on. Not before: until then the client may still send
  // (and is answered ESHUTDOWN), since on a Unix socket its send would
  // fail (EPIPE), and a client (libnbd, the kernel's nbd.ko) whose send
  // fails drops the connection with the replies to come, or come but not
  // read yet: such a client sends its next request before it reads what
  // arrived. reader_idle_: the reader is in Serve(), so fd_ is open.
  if (!stopping_ || !reader_idle_ || in_flight_ != 0) return;
  // SIOCOUTQ: on a Unix socket the bytes sent that the peer has not read
  // (net/unix/af_unix.c, unix_ioctl: unix_outq_len), on TCP those not
  // acknowledged. Nothing tells when the client reads them: the server
  // calls BeginStop() again while it waits (nbd_server.cc, Stop).
  int unread = 0;
  if (::ioctl(fd_, SIOCOUTQ, &unread) == 0 && unread > 0) return;
  ::shutdown(fd_, SHUT_RD);
}

void Connection::SetReaderIdle(bool idle) {
  std::lock_guard l(mu_);
  reader_idle_ = idle;
  StopReceivingIfDone();
}

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
  HandshakeOptions options;
  options.max_request_bytes = limits_.max_request_bytes;
  options.timeout_ms = limits_.handshake_timeout_ms;
  options.tls = limits_.tls;
  options.tls_required = limits_.tls_required;
  options.stopping = limits_.server_stopping;
  Result<Negotiated> n = Handshake(fd_, &transport_, registry_, options);
  if (n.has_value()) {
    device_ = std::move(n->device);
    ref_.emplace(std::move(*n->ref));
    size_ = n->size;
    structured_ = n->structured;
    base_allocation_ = n->base_allocation;
    Log("export " + device_->name() + " (" + std::to_string(size_) +
        " bytes)" + (structured_ ? ", structured replies" : "") +
        (base_allocation_ ? ", base:allocation" : ""));
    Serve();
    {
      std::lock_guard l(mu_);
      if (stop_reason_.empty() && stopping_) stop_reason_ = "server stopping";
    }
    Log("closed: " + (stop_reason_.empty() ? "reader ended" : stop_reason_) +
        " (requests: " + std::to_string(requests_) +
        ", error replies: " + std::to_string(errors_.load()) + ")");
  } else {
    Log("closed during the handshake: " + n.error().message());
  }
  ref_.reset();  // Reset() of the device is allowed again
  device_.reset();
  {
    std::lock_guard l(send_mu_);
    writer_stop_ = true;
  }
  send_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  transport_.reset();
  {
    std::lock_guard l(mu_);
    closed_ = true;
    ::close(fd_);
  }
  on_exit_(this);
}

namespace {

// An anonymous mapping of `bytes` (Connection's comment says why not
// malloc); empty without the memory (a memlock or overcommit limit).
platform::Mapping NewBuffer(std::size_t bytes) {
  auto m = platform::Mapping::Anonymous(bytes, platform::Commit::kCharged,
                                        "mmap NBD buffer");
  return m.has_value() ? std::move(*m) : platform::Mapping();
}

// The size of the buffer for a request of `length` bytes: larger than a
// job keeps, a whole number of MiB (at most `max_request`, the largest a
// request may be), so that a spare serves the requests of nearby sizes.
std::uint64_t BufferBytes(std::uint64_t length, std::uint64_t max_request) {
  if (length <= kKeepBufferBytes) return length;
  const std::uint64_t whole =
      (length + kKeepBufferBytes - 1) / kKeepBufferBytes * kKeepBufferBytes;
  return std::max(length, std::min(whole, max_request));
}

}  // namespace

std::size_t Connection::PreallocatedBytes() const {
  return std::min<std::size_t>(limits_.prealloc_job_bytes, kKeepBufferBytes);
}

void Connection::Serve() {
  // Without the memory for its buffers (a memlock or overcommit limit) the
  // connection ends; the server goes on.
  in_ = NewBuffer(kInCapacity);
  out_ = NewBuffer(kOutCapacity);
  bool have = !in_.empty() && !out_.empty();
  if (have) {
    std::lock_guard l(mu_);
    try {
      // Each spare is 2 MiB or more; past 256 of them a buffer is dropped.
      spares_.reserve(std::min<std::uint64_t>(
          limits_.max_in_flight_bytes / (2 * kKeepBufferBytes), 256));
    } catch (const std::bad_alloc&) {
      have = false;
    }
  }
  const std::size_t bytes = PreallocatedBytes();
  if (have && bytes != 0) {
    for (Job& j : jobs_) {
      j.reserve = NewBuffer(bytes);
      have = have && !j.reserve.empty() &&
             j.reserve.Populate("populate NBD buffer").ok();  // resident
    }
  }
  if (!have) {
    Warn("no memory for the connection's buffers; it ends");
    return;
  }
  if (bytes != 0) {
    std::lock_guard l(send_mu_);
    if (!StartWriter()) return;
  }
  for (;;) {
    if (in_end_ - in_begin_ < sizeof(Request)) {
      // Nothing complete left to parse: send what gathered, then wait
      // (idle, if nothing of the next request is here: a stop may then
      // end receiving).
      if (!FlushBatch()) break;
      const bool idle = in_end_ == in_begin_;
      if (idle) SetReaderIdle(true);
      const bool filled = Fill(sizeof(Request));
      if (idle) SetReaderIdle(false);
      if (!filled) break;
    }
    Request r;
    std::memcpy(&r, in_.data() + in_begin_, sizeof(r));
    in_begin_ += sizeof(r);
    if (FromBig(r.magic) != kRequestMagic) {  // lost sync: close
      char magic[16];
      std::snprintf(magic, sizeof(magic), "0x%08x", FromBig(r.magic));
      Stop("bad request magic " + std::string(magic) + " (lost sync)");
      break;
    }
    const std::uint16_t type = FromBig(r.type);
    const std::uint16_t flags = FromBig(r.flags);
    const std::uint64_t offset = FromBig(r.offset);
    const std::uint32_t length = FromBig(r.length);
    ++requests_;
    if (limits_.counters != nullptr) {
      request_start_ns_ = MonotonicNs();
      limits_.counters->CountRequest(type);
    }
    if (type == kCmdDisc) {
      Stop("the client sent NBD_CMD_DISC");
      break;
    }
    if (type == kCmdWrite && length > limits_.max_request_bytes) {
      // proto.md, "Block size constraints": a payload up to 2^25 bytes
      // SHOULD NOT be taken for an attack, even over the advertised
      // maximum, and a client that did not ask for the sizes may not know
      // it: read it, drop it and answer EINVAL. A larger one is not read:
      // close rather than drain it.
      if (length > kMaxDrainedPayload) {
        Stop("NBD_CMD_WRITE of " + std::to_string(length) +
             " bytes, over the request limit of " +
             std::to_string(limits_.max_request_bytes));
        break;
      }
      constexpr std::string_view kOver = "longer than the request limit";
      LogError(type, offset, length, kErrInval, kOver);
      if (!SkipInput(length)) break;
      if (!AddErrorReply(type, r.cookie, kErrInval, kOver)) break;
      continue;
    }
    if (limits_.server_stopping != nullptr &&
        limits_.server_stopping->load(std::memory_order_relaxed)) {
      if (!RefuseStopping(type, r.cookie, length)) break;
      continue;
    }

    std::string_view why;
    if (const std::uint32_t error = Validate(type, flags, offset, length, &why)) {
      LogError(type, offset, length, error, why);
      if (type == kCmdWrite && !SkipInput(length)) break;
      if (!AddErrorReply(type, r.cookie, error, why)) break;
      continue;
    }
    // proto.md, NBD_CMD_WRITE_ZEROES: with NBD_CMD_FLAG_FAST_ZERO the server
    // MUST fail quickly with ENOTSUP (and leave the export as it is) unless
    // the zeroing is faster than a WRITE. Zeroing part of a written-back
    // page reads it from the backing store first, as a WRITE would: it may
    // wait up to --backing-timeout.
    if (type == kCmdWriteZeroes && (flags & kCmdFlagFastZero) != 0 &&
        length != 0 && EdgeMayWait(offset, length)) {
      constexpr std::string_view kSlow =
          "fast zero refused: part of a written-back page";
      LogError(type, offset, length, kErrNotSup, kSlow);
      if (!AddErrorReply(type, r.cookie, kErrNotSup, kSlow)) break;
      continue;
    }
    const std::uint32_t inline_max =
        std::min(limits_.inline_max_bytes, kInlineCeiling);
    bool small = false;
    // A request that touches a written-back page may wait for the backing
    // store (up to --backing-timeout while a remote is away): a READ reads
    // it, a WRITE or WRITE_ZEROES of part of it reads it first, and any
    // request on it (a whole-page TRIM too) waits for its slot lock while
    // another request's read of it holds the lock (PageStore's LoadLocked).
    // Such a request goes to the workers, so that this connection's other
    // requests do not wait behind it.
    switch (type) {
      case kCmdRead:
      case kCmdWrite:
        small = length <= inline_max && !device_->ReadMayWait(offset, length);
        break;
      case kCmdTrim:
      case kCmdWriteZeroes:
        small = inline_max > 0 && length <= kInlineZeroBytes &&
                !device_->ReadMayWait(offset, length);
        break;
      default: small = true; break;  // FLUSH, CACHE: nothing to do
    }
    const bool ok = small ? RunInline(type, flags, r.cookie, offset, length)
                          : Hand(type, flags, r.cookie, offset, length);
    if (!ok) break;
    // Inline: the reply is in the output batch (sent when the batch is).
    if (small) ObserveLatency(limits_.counters, type, request_start_ns_);
  }
  FlushBatch();
  WaitIdle();
}

std::uint32_t Connection::Validate(std::uint16_t type, std::uint16_t flags,
                                   std::uint64_t offset, std::uint32_t length,
                                   std::string_view* why) const {
  // FUA is accepted everywhere and means nothing: memory is the medium.
  std::uint16_t allowed = kCmdFlagFua;
  switch (type) {
    case kCmdRead:
      if (length > limits_.max_request_bytes) {
        *why = "longer than the request limit";
        // With structured replies a client may ask for more, and is to
        // retry smaller on EOVERFLOW (proto.md, "NBD_CMD_READ").
        return structured_ ? kErrOverflow : kErrInval;
      }
      // DF is advertised with structured replies; a READ is one chunk.
      if (structured_) allowed |= kCmdFlagDf;
      break;
    case kCmdBlockStatus:
      if (!base_allocation_) {
        *why = "no metadata context was negotiated";
        return kErrInval;
      }
      if (length == 0) {
        *why = "zero length";
        return kErrInval;
      }
      allowed |= kCmdFlagReqOne;
      break;
    case kCmdWrite:
    case kCmdTrim:
    case kCmdCache:
      break;
    case kCmdFlush:
      if ((flags & ~allowed) == 0) return 0;  // offset/length unused
      *why = "unknown flags";
      return kErrInval;
    case kCmdWriteZeroes:
      allowed |= kCmdFlagNoHole | kCmdFlagFastZero;
      break;
    default:  // unknown
      *why = "unsupported command";
      return kErrInval;
  }
  if ((flags & ~allowed) != 0) {
    *why = "unknown flags";
    return kErrInval;
  }
  if (offset > size_ || length > size_ - offset) {
    *why = "beyond the end of the export";
    // proto.md, "Error values": ENOSPC for a write past the end, EINVAL
    // for any other request.
    return type == kCmdWrite || type == kCmdWriteZeroes ? kErrNoSpc
                                                         : kErrInval;
  }
  return 0;
}

bool Connection::EdgeMayWait(std::uint64_t offset, std::uint32_t length) const {
  const std::uint64_t end = offset + length;
  const bool head = offset % kPageSize != 0;
  const bool tail = end % kPageSize != 0;
  return (head && device_->ReadMayWait(offset, 1)) ||
         (tail && device_->ReadMayWait(end - 1, 1));
}

bool Connection::RunInline(std::uint16_t type, std::uint16_t flags,
                           std::uint64_t cookie, std::uint64_t offset,
                           std::uint32_t length) {
  Status s;
  switch (type) {
    case kCmdRead: {
      // Header and data go straight into the output batch.
      if (out_used_ + std::max(sizeof(OffsetDataChunk) + length,
                               kMaxReplyHead) > kOutCapacity &&
          !FlushBatch()) {
        return false;
      }
      std::byte* header = out_.data() + out_used_;
      std::byte* data =
          header + (structured_ ? sizeof(OffsetDataChunk) : sizeof(SimpleReply));
      s = device_->Read(offset, std::span<std::byte>(data, length));
      const std::uint32_t error = ToNbdError(s);
      if (error != 0) LogError(type, offset, length, error, s.message());
      // On error the head (an ERROR chunk's message) may cover the data.
      const std::size_t head = PutReplyHead(header, structured_, type, cookie,
                                            offset, length, error, s.message());
      assert(error != 0 || length == 0 ||
             header + head == data);
      out_used_ += head + (error == 0 ? length : 0);
      return true;
    }
    case kCmdBlockStatus:
      return BlockStatus(flags, cookie, offset, length);
    case kCmdWrite:
      if (!Fill(length)) return false;
      s = device_->Write(
          offset, std::span<const std::byte>(in_.data() + in_begin_, length));
      in_begin_ += length;
      break;
    case kCmdTrim:
      s = device_->Trim(offset, length);
      break;
    case kCmdWriteZeroes:
      // FAST_ZERO: a zeroing that would read the backing store was
      // refused in Serve(); any other is as fast as it gets.
      s = device_->WriteZeroes(offset, length, (flags & kCmdFlagNoHole) != 0);
      break;
    case kCmdFlush:
      s = device_->Flush();
      break;
    case kCmdCache:
      break;  // everything is in memory already
  }
  const std::uint32_t error = ToNbdError(s);
  if (error != 0) LogError(type, offset, length, error, s.message());
  return AddReply(cookie, error);
}

bool Connection::Hand(std::uint16_t type, std::uint16_t flags,
                      std::uint64_t cookie, std::uint64_t offset,
                      std::uint32_t length) {
  const bool has_buffer = type == kCmdRead || type == kCmdWrite;
  const std::uint64_t bytes =
      has_buffer ? BufferBytes(length, limits_.max_request_bytes) : 0;
  Job* job = AcquireJob(bytes);
  if (job == nullptr) {
    // The socket failed, or the connection stops while the request waited
    // for a job: a soft stop still answers it.
    {
      std::lock_guard l(send_mu_);
      if (broken_) return false;
    }
    return RefuseStopping(type, cookie, length);
  }
  job->type = type;
  job->flags = flags;
  job->cookie = cookie;
  job->offset = offset;
  job->length = length;
  job->done = 0;
  job->structured = structured_;
  job->start_ns = request_start_ns_;
  job->data = nullptr;
  if (has_buffer && length <= job->reserve.size()) {
    job->data = job->reserve.data();
  } else if (has_buffer) {
    // Without the memory (a memlock or overcommit limit), this request
    // fails with ENOMEM; the connection and the server go on.
    if (job->buffer.size() < length) {
      job->buffer = platform::Mapping();  // unmapped before the new one
      job->buffer = TakeBuffer(bytes);
    }
    job->data = job->buffer.data();
    if (job->buffer.empty()) {
      Release(job);
      if (type == kCmdWrite && !SkipInput(length)) return false;
      constexpr std::string_view kWhy = "no memory for the request's buffer";
      LogError(type, offset, length, kErrNoMem, kWhy);
      return AddErrorReply(type, cookie, kErrNoMem, kWhy);
    }
  }
  if (type == kCmdWrite && !ReadPayload(job->data, length)) {
    Release(job);
    return false;
  }
  queue_->Push(job);
  return true;
}

bool Connection::RefuseStopping(std::uint16_t type, std::uint64_t cookie,
                                std::uint32_t length) {
  // proto.md, "Terminating the transmission phase": the error of the
  // requests a stopping server does not serve SHOULD be NBD_ESHUTDOWN. As
  // the READs a worker drops then (RunJob), it is neither logged nor
  // counted: the close's log line says the server stopped.
  if (type == kCmdWrite && !SkipInput(length)) return false;
  return AddErrorReply(type, cookie, kErrShutdown, "the server is stopping");
}

void Connection::RunJob(Job* job) {
  const std::span<std::byte> data(job->data,
                                  job->data == nullptr ? 0 : job->length);
  Status s;
  // A READ, or a long request's step after the first, is not done once its
  // reply cannot go (the socket failed: the client has gone) or the server
  // stops (the reply is then ESHUTDOWN): it would change nothing the client
  // can see, and a read of a written-back page can hold a worker for the
  // backing store's whole timeout while other connections' requests wait.
  // A WRITE that reached a worker is always done, and answered if it can.
  bool abandoned = (job->type == kCmdRead || job->done > 0) && StopsWork();
  if (!abandoned) {
    switch (job->type) {
      case kCmdRead:
        s = device_->Read(job->offset, data);
        break;
      case kCmdWrite:
        s = device_->Write(job->offset, data);
        break;
      case kCmdTrim:
      case kCmdWriteZeroes: {
        // One step, up to the next multiple of kZeroStepBytes (so that the
        // steps between the request's ends are whole pages).
        const std::uint64_t at = job->offset + job->done;
        const std::uint64_t end = job->offset + job->length;
        const std::uint64_t step =
            std::min(end, (at / kZeroStepBytes + 1) * kZeroStepBytes) - at;
        s = job->type == kCmdTrim
                ? device_->Trim(at, step)
                : device_->WriteZeroes(at, step,
                                       (job->flags & kCmdFlagNoHole) != 0);
        job->done += static_cast<std::uint32_t>(step);
        if (s.ok() && job->done < job->length) {
          // The rest after the jobs queued meanwhile; not done at all once
          // the connection is being shut down or its socket failed (a
          // client that sent DISC still gets its replies, as proto.md asks).
          abandoned = StopsWork();
          if (!abandoned) {
            queue_->PushBack(job);
            return;
          }
        }
        break;
      }
      default:
        break;
    }
  }
  job->error = abandoned ? kErrShutdown : ToNbdError(s);
  if (job->error != 0 && !abandoned) {
    LogError(job->type, job->offset, job->length, job->error, s.message());
  }
  job->sent = 0;
  // SendReply may recycle the job and let the connection end: copy first.
  NbdServerCounters* const counters = limits_.counters;
  const std::uint16_t type = job->type;
  const std::uint64_t start_ns = job->start_ns;
  SendReply(job);
  ObserveLatency(counters, type, start_ns);
}

// ---- input ----

bool Connection::Fill(std::size_t n) {
  assert(n <= kInCapacity);
  if (in_end_ - in_begin_ >= n) return true;
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ + n > kInCapacity) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  while (in_end_ - in_begin_ < n) {
    // Between requests a client may stay idle as long as it likes; within
    // one, it must keep sending.
    const int timeout = in_end_ == in_begin_ && n == sizeof(Request)
                            ? -1
                            : limits_.io_timeout_ms;
    Result<std::size_t> r =
        transport_->Recv(in_.data() + in_end_, kInCapacity - in_end_, timeout);
    if (!r.has_value()) return Stop("receiving: " + r.error().message());
    if (*r == 0) {
      return Stop(in_end_ == in_begin_
                      ? "the client closed the connection"
                      : "the client closed the connection inside a request");
    }
    in_end_ += *r;
  }
  return true;
}

bool Connection::SkipInput(std::size_t n) {
  const std::size_t have = std::min(n, in_end_ - in_begin_);
  in_begin_ += have;
  const Status s = RecvDiscard(transport_.get(), n - have, limits_.io_timeout_ms);
  return s.ok() || Stop("receiving a refused payload: " + s.message());
}

bool Connection::ReadPayload(std::byte* dst, std::size_t n) {
  if (n == 0) return true;  // dst may be null (a job without a buffer)
  const std::size_t have = std::min(n, in_end_ - in_begin_);
  std::memcpy(dst, in_.data() + in_begin_, have);
  in_begin_ += have;
  const Status s = RecvExact(transport_.get(), dst + have, n - have,
                             limits_.io_timeout_ms);
  return s.ok() || Stop("receiving a payload: " + s.message());
}

// ---- output ----

bool Connection::AddReply(std::uint64_t cookie, std::uint32_t error) {
  if (out_used_ + sizeof(SimpleReply) > kOutCapacity && !FlushBatch()) {
    return false;
  }
  const SimpleReply reply = {ToBig(kSimpleReplyMagic), ToBig(error), cookie};
  std::memcpy(out_.data() + out_used_, &reply, sizeof(reply));
  out_used_ += sizeof(reply);
  return true;
}

bool Connection::AddErrorReply(std::uint16_t type, std::uint64_t cookie,
                               std::uint32_t error, std::string_view why) {
  if (out_used_ + kMaxReplyHead > kOutCapacity && !FlushBatch()) return false;
  out_used_ += PutReplyHead(out_.data() + out_used_, structured_, type, cookie,
                            0, 0, error, why);
  return true;
}

bool Connection::BlockStatus(std::uint16_t flags, std::uint64_t cookie,
                             std::uint64_t offset, std::uint32_t length) {
  // The reply's payload (a 4-byte context id, then 8 bytes an extent) stays
  // within the advertised maximum payload (NBD_INFO_BLOCK_SIZE), as
  // proto.md requires of every chunk.
  const std::size_t max_extents =
      (flags & kCmdFlagReqOne)
          ? 1
          : std::max<std::size_t>(
                1, std::min<std::size_t>(kMaxExtents,
                                         (limits_.max_request_bytes - 4) / 8));
  const std::size_t room = std::max(
      sizeof(StructuredReplyHeader) + sizeof(std::uint32_t) +
          max_extents * sizeof(BlockDescriptor),
      kMaxReplyHead);
  if (out_used_ + room > kOutCapacity && !FlushBatch()) return false;
  std::byte* const head = out_.data() + out_used_;
  std::byte* const descriptors =
      head + sizeof(StructuredReplyHeader) + sizeof(std::uint32_t);
  // Descriptors [0, n) are final but for the last, whose length grows while
  // the pages after it have its state; it is written when the next begins.
  std::size_t n = 0;
  std::uint32_t run_length = 0;
  std::uint32_t run_flags = 0;
  auto put = [&](std::size_t i, std::uint32_t len, std::uint32_t fl) {
    const BlockDescriptor d = {ToBig(len), ToBig(fl)};
    std::memcpy(descriptors + i * sizeof(d), &d, sizeof(d));
  };
  const std::uint64_t end = offset + length;  // Validate(): within size_
  const std::uint64_t last_page = (end - 1) / kPageSize;
  std::uint64_t pos = offset;
  SlotState states[kStateBatch];
  Status s;
  bool full = false;
  while (pos < end && !full) {
    const std::uint64_t page = pos / kPageSize;
    const std::size_t count = static_cast<std::size_t>(
        std::min<std::uint64_t>(kStateBatch, last_page - page + 1));
    s = device_->PageStates(page, std::span<SlotState>(states, count));
    if (!s.ok()) break;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t page_end =
          std::min<std::uint64_t>((page + i + 1) * kPageSize, end);
      const auto piece = static_cast<std::uint32_t>(page_end - pos);
      const std::uint32_t fl = states[i] == SlotState::kEmpty
                                   ? (kStateHole | kStateZero)
                               : states[i] == SlotState::kZero ? kStateZero
                                                               : 0;
      if (n > 0 && fl == run_flags) {
        run_length += piece;
      } else if (n == max_extents) {
        full = true;  // the answer ends here; the client asks again
        break;
      } else {
        if (n > 0) put(n - 1, run_length, run_flags);
        ++n;
        run_length = piece;
        run_flags = fl;
      }
      pos = page_end;
    }
  }
  if (n == 0) {  // no page state could be read
    const std::uint32_t error = ToNbdError(s);
    LogError(kCmdBlockStatus, offset, length, error, s.message());
    return AddErrorReply(kCmdBlockStatus, cookie, error, s.message());
  }
  // A later failure only shortens the answer, which the spec allows.
  put(n - 1, run_length, run_flags);
  const auto payload = static_cast<std::uint32_t>(
      sizeof(std::uint32_t) + n * sizeof(BlockDescriptor));
  const StructuredReplyHeader h = {
      ToBig(kStructuredReplyMagic), ToBig(kReplyFlagDone),
      ToBig(kReplyTypeBlockStatus), cookie, ToBig(payload)};
  std::memcpy(head, &h, sizeof(h));
  const std::uint32_t context = ToBig(kBaseAllocationId);
  std::memcpy(head + sizeof(h), &context, sizeof(context));
  out_used_ += sizeof(h) + payload;
  return true;
}

bool Connection::FlushBatch() {
  if (out_used_ == 0) return true;
  const struct iovec iov = {out_.data(), out_used_};
  out_used_ = 0;
  std::unique_lock l(send_mu_);
  // After the queue: its head may be a reply sent in part.
  send_cv_.wait(l, [this] {
    return broken_ || (!sending_ && queue_head_ == nullptr);
  });
  if (broken_) return false;
  sending_ = true;
  l.unlock();
  const Status s = transport_->Send(&iov, 1, limits_.io_timeout_ms);
  l.lock();
  sending_ = false;
  if (!s.ok()) MarkBroken("sending replies: " + s.message());
  send_cv_.notify_all();
  l.unlock();
  return s.ok() || Stop("sending replies: " + s.message());
}

// The reply of `job` (its head, built in head[kMaxReplyHead], and its data
// for a successful READ) less the `job->sent` bytes already sent, as iovecs
// in out[]; returns how many. The head is the same each time it is built.
static int ReplyIov(const Job* job, std::byte* head, struct iovec out[2]) {
  const std::size_t head_size =
      PutReplyHead(head, job->structured, job->type, job->cookie, job->offset,
                   job->length, job->error, {});
  const bool with_data = job->type == kCmdRead && job->error == 0;
  const struct iovec parts[2] = {{head, head_size},
                                 {job->data, with_data ? job->length : 0}};
  std::size_t skip = job->sent;
  int n = 0;
  for (const struct iovec& p : parts) {
    if (skip >= p.iov_len) {
      skip -= p.iov_len;
      continue;
    }
    out[n++] = {static_cast<char*>(p.iov_base) + skip, p.iov_len - skip};
    skip = 0;
  }
  return n;
}

void Connection::SendReply(Job* job) {
  std::unique_lock l(send_mu_);
  if (broken_) {
    l.unlock();
    Release(job);
    return;
  }
  if (!sending_ && queue_head_ == nullptr) {
    // The socket is free: try to send it now, without waiting.
    sending_ = true;
    l.unlock();
    std::byte head[kMaxReplyHead];
    struct iovec iov[2];
    const int n = ReplyIov(job, head, iov);
    std::size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    Result<std::size_t> sent = transport_->TrySend(iov, n);
    l.lock();
    sending_ = false;
    send_cv_.notify_all();
    if (!sent.has_value()) {
      MarkBroken("sending replies: " + sent.error().message());
    }
    if (!sent.has_value() || *sent == total) {
      l.unlock();
      Release(job);
      return;
    }
    job->sent += *sent;
  }
  // The client is slow (or the transport cannot send without waiting):
  // the writer sends it. A reply sent in part goes first, since its bytes
  // have begun on the wire (others may have queued while we tried).
  if (job->sent > 0) {
    job->next = queue_head_;
    queue_head_ = job;
    if (queue_tail_ == nullptr) queue_tail_ = job;
  } else {
    job->next = nullptr;
    if (queue_tail_ == nullptr) {
      queue_head_ = queue_tail_ = job;
    } else {
      queue_tail_->next = job;
      queue_tail_ = job;
    }
  }
  if (!writer_.joinable() && !StartWriter()) {
    // Nothing will send the queued replies: give their jobs back, so that
    // the reader's WaitIdle ends and the connection closes.
    Job* left = std::exchange(queue_head_, nullptr);
    queue_tail_ = nullptr;
    l.unlock();
    while (left != nullptr) {
      Job* const next = left->next;
      Release(left);
      left = next;
    }
    return;
  }
  send_cv_.notify_all();
}

void Connection::WriterLoop() {
  std::unique_lock l(send_mu_);
  for (;;) {
    send_cv_.wait(l, [this] {
      return (queue_head_ != nullptr && (broken_ || !sending_)) ||
             (writer_stop_ && queue_head_ == nullptr);
    });
    if (queue_head_ == nullptr) return;  // stopping, and nothing left
    Job* job = queue_head_;
    queue_head_ = job->next;
    if (queue_head_ == nullptr) queue_tail_ = nullptr;
    if (!broken_) {
      sending_ = true;
      l.unlock();
      std::byte head[kMaxReplyHead];
      struct iovec iov[2];
      const int n = ReplyIov(job, head, iov);
      const Status s = transport_->Send(iov, n, limits_.io_timeout_ms);
      l.lock();
      sending_ = false;
      if (!s.ok()) MarkBroken("sending replies: " + s.message());
      send_cv_.notify_all();
    }
    l.unlock();
    Release(job);
    l.lock();
  }
}

void Connection::MarkBroken(std::string why) {
  // The peer is gone or stuck: wake the reader so that the connection ends.
  if (!broken_) {
    broken_ = true;
    broken_why_ = std::move(why);
    ::shutdown(fd_, SHUT_RDWR);
  }
}

// ---- jobs ----

platform::Mapping Connection::TakeBuffer(std::size_t bytes) {
  platform::Mapping evicted;  // unmapped out of the lock
  if (bytes > kKeepBufferBytes) {
    std::lock_guard l(mu_);
    for (auto it = spares_.begin(); it != spares_.end(); ++it) {
      if (it->size() != bytes) continue;
      platform::Mapping m = std::move(*it);
      spares_.erase(it);
      kept_bytes_ -= bytes;
      return m;
    }
    // None of this size, and no room to keep one: the oldest spare goes,
    // so that a client whose requests changed size gets spares of the new
    // size as its requests end (and this one's mapping has the room).
    if (!spares_.empty() && kept_bytes_ + bytes > limits_.max_in_flight_bytes) {
      evicted = std::move(spares_.front());
      spares_.erase(spares_.begin());
      kept_bytes_ -= evicted.size();
    }
  }
  evicted = platform::Mapping();  // unmapped before the new one is mapped
  platform::Mapping m = NewBuffer(bytes);
  if (!m.empty() && limits_.counters != nullptr) {
    limits_.counters->request_buffers_mapped.fetch_add(
        1, std::memory_order_relaxed);
  }
  return m;
}

Job* Connection::AcquireJob(std::uint64_t bytes) {
  std::unique_lock l(mu_);
  // A job may keep a buffer (up to 1 MiB; its reserve aside) from an
  // earlier request: it is charged for it, whatever this request needs (a
  // TRIM needs none), so that kept buffers taken by small requests cannot
  // take the connection past max_in_flight_bytes.
  auto charge = [&](const Job* job) {
    return std::max<std::uint64_t>(bytes, job->buffer.size());
  };
  auto ready = [&] {
    return stopping_ || (free_ != nullptr &&
                         (in_flight_ == 0 || in_flight_bytes_ + charge(free_) <=
                                                 limits_.max_in_flight_bytes));
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
  const std::uint64_t charged = charge(job);
  kept_bytes_ -= job->buffer.size();
  ++in_flight_;
  in_flight_bytes_ += charged;
  job->charged = charged;
  return job;
}

void Connection::Release(Job* job) {
  platform::Mapping dropped;  // unmapped after the lock
  // Notify under the lock: once it is released the reader may finish and
  // the Connection may be deleted.
  std::lock_guard l(mu_);
  // A buffer (the reserve aside) is kept for reuse only while the kept
  // ones stay within max_in_flight_bytes: so a client cannot make the
  // connection hold max_in_flight MiB beside the buffers of the requests in
  // flight. One larger than 1 MiB becomes a spare, so that the job's next
  // (maybe small) request is not charged for it.
  const std::size_t size = job->buffer.size();
  if (size != 0) {
    if (kept_bytes_ + size > limits_.max_in_flight_bytes ||
        (size > kKeepBufferBytes && spares_.size() == spares_.capacity())) {
      dropped = std::move(job->buffer);
    } else {
      if (size > kKeepBufferBytes) {
        spares_.push_back(std::move(job->buffer));  // reserved: no throw
      }
      kept_bytes_ += size;
    }
  }
  --in_flight_;
  in_flight_bytes_ -= job->charged;
  job->next = free_;
  free_ = job;
  StopReceivingIfDone();  // its reply is out (or cannot go)
  cv_.notify_all();
}

void Connection::WaitIdle() {
  std::unique_lock l(mu_);
  cv_.wait(l, [this] { return in_flight_ == 0; });
  // The accounting, once every job is back: kept_bytes_ is what the free
  // jobs keep (their reserves aside), and the spares; within bound.
  std::uint64_t kept = 0;
  for (const Job& j : jobs_) kept += j.buffer.size();
  for (const platform::Mapping& m : spares_) kept += m.size();
  assert(in_flight_bytes_ == 0);
  assert(kept == kept_bytes_);
  assert(kept <= limits_.max_in_flight_bytes);
  (void)kept;
}

// ---- log ----

void Connection::Log(const std::string& line) const {
  if (limits_.log) limits_.log("nbd " + name_ + ": " + line);
}

void Connection::Warn(const std::string& line) const {
  if (limits_.log) limits_.log("warning: nbd " + name_ + ": " + line);
}

void Connection::LogError(std::uint16_t type, std::uint64_t offset,
                          std::uint32_t length, std::uint32_t error,
                          std::string_view why) {
  // Every error reply passes here, logged or not.
  if (limits_.counters != nullptr) limits_.counters->CountErrorReply(error);
  const std::uint64_t n = errors_.fetch_add(1) + 1;
  if (!limits_.log || n > kMaxLoggedErrors) return;
  std::string line = std::string(CommandName(type)) + " offset " +
                     std::to_string(offset) + " length " +
                     std::to_string(length) + ": error " +
                     std::string(NbdErrorName(error)) + ": " + std::string(why);
  if (n == kMaxLoggedErrors) {
    line += " (further error replies of this connection are only counted)";
  }
  Warn(line);
}

bool Connection::Stop(std::string reason) {
  {
    // The reader's receive ends (EOF) once a failed send has shut the
    // socket down: that failure is the reason, not the client.
    std::lock_guard l(send_mu_);
    if (broken_) reason = broken_why_;
  }
  std::lock_guard l(mu_);
  if (stop_reason_.empty()) {
    stop_reason_ = stopping_ ? "server stopping" : std::move(reason);
  }
  return false;
}

}  // namespace ztier::nbd
