// connection.h: one NBD connection (handshake, then the transmission phase),
// and the worker pool shared by every connection of a server.
//
// Each connection has one thread, its reader. After the handshake it reads
// requests from a 256 KiB input buffer (one recv() brings many requests) and
// checks each once, before any reaches the device (as nbdkit's
// validate_request): a bad magic closes the connection; a WRITE longer than
// max_request_bytes closes it (its payload cannot be trusted); every other bad
// request (out of range, a READ over the limit, unknown command or flag) gets
// an EINVAL reply, after a WRITE's payload has been read and dropped.
//
// Replies are simple unless the client negotiated structured replies; then
// every READ reply is one structured chunk (NBD_REPLY_TYPE_OFFSET_DATA, or
// NBD_REPLY_TYPE_NONE for length 0, or NBD_REPLY_TYPE_ERROR), as the spec
// requires; BLOCK_STATUS answers one NBD_REPLY_TYPE_BLOCK_STATUS chunk (or
// an error chunk), and other commands keep simple replies, which the spec
// allows. BLOCK_STATUS (base:allocation) runs on the reader: it reads page
// states (Device::PageStates), merges runs of equal state, and answers at
// most kMaxExtents descriptors (one with NBD_CMD_FLAG_REQ_ONE), within the
// request's range; a client asks again from where a short answer ends.
//
// Then a request runs in one of two places:
//  * inline, on the reader, when it is small (READ/WRITE up to
//    inline_max_bytes, TRIM/WRITE_ZEROES up to 1 MiB, FLUSH, CACHE) and
//    cannot wait for the backing store: no READ, WRITE, TRIM or
//    WRITE_ZEROES that touches a written-back page (Device::ReadMayWait),
//    which a READ reads, a partial WRITE or WRITE_ZEROES reads first, and
//    any of them waits for while another request's read of it holds its
//    slot lock. Such a
//    request costs a few microseconds, less than handing it to another thread
//    (a wake-up across vCPUs is ~20 us on a VM), so the reader serves it
//    itself: a small WRITE straight from the input buffer, a READ straight
//    into the output buffer, where replies gather until the reader has no
//    complete request left to parse; then one send() carries them all.
//  * on the shared WorkQueue (work_queue.h) otherwise (or always, with
//    inline_max_bytes 0): the reader copies the payload into a Job's
//    pooled buffer, and a worker runs it and sends its reply itself (the
//    connections' queued jobs take turns for the workers). Replies may
//    leave out of order. A TRIM or WRITE_ZEROES (up to 4 GiB) runs 16 MiB
//    at a time: after each step the job goes to the back of its
//    connection's queue, so that one client's long requests hold the
//    workers for a step each, not for their whole length, and every other
//    client's requests keep their turn. Once BeginStop() or Shutdown() is
//    called or the socket fails, the steps left are dropped (the reply is
//    ESHUTDOWN, if it can still go); after DISC they still run.
//
// Memory is bounded per connection: 256 KiB of input buffer, 256 KiB of
// output batch, and at most max_in_flight jobs holding max_in_flight_bytes
// of buffers (one larger request, up to max_request_bytes, may run alone);
// the reader stops reading when either is reached, also while replies wait
// in the send queue. Buffers are kept for reuse, at most
// max_in_flight_bytes of them: up to 1 MiB by the job, larger ones (whole
// MiB) by the connection for its next request of that size (the oldest
// gives way to a new size when they fill the bound). Every buffer
// is a mapping of its own, not malloc's: the connection's end gives the
// memory back to the system. (glibc serves a large block with mmap only
// until one is freed, then raises that threshold, up to 32 MiB, and keeps
// such blocks freed in per-thread arenas: a server whose clients sent
// large requests held well over 100 MB it no longer used;
// tools/bench/nbd_idle_rss.py measures it.)
//
// Sending: one thread at a time owns the send side (sending_, under
// send_mu_), and no thread holds a lock while it sends. A worker never waits
// for a client: it tries to send its reply without blocking; if the socket
// is full (a client that does not read its replies), or the transport is
// TLS, the job joins the connection's send queue and the worker moves on.
// The connection's writer thread, started on first need, sends the queue in
// order. The reader sends its own batches itself, waiting for its turn. A
// client that takes nothing for io_timeout_ms while a reply is pending, or
// that stops in the middle of a request for as long, is disconnected; an
// idle client (between requests) is never timed out.
//
// Locks: send_mu_ guards the send queue and the ownership flag; mu_ guards
// the job free list and in-flight counts. No thread holds both. Device calls
// are made without either.
//
// Lifetime: the reader ends on DISC, EOF, a protocol error, a send error,
// BeginStop() or Shutdown(); it then sends what it batched, waits for its
// jobs to finish, drops the Device::ClientRef, closes the socket and calls
// on_exit (from the reader thread). The owner then Join()s and deletes the
// Connection.
//
// Stopping (proto.md, "Terminating the transmission phase" and
// "Termination of the session during option haggling"): BeginStop() is
// the soft stop. In the handshake, the client's options are answered
// NBD_REP_ERR_SHUTDOWN from then on (ConnectionLimits::server_stopping,
// handshake.h). In transmission, the requests received but not begun, and
// those the client sends meanwhile, are answered ESHUTDOWN (a WRITE is not
// done); those running finish and are answered (a READ or a long request's
// next step not begun yet: ESHUTDOWN). Once every reply is out, read by
// the client, and the reader waits for the next request, it stops
// receiving (SHUT_RD; not sooner: a client's send would fail, EPIPE on a
// Unix socket, and a client such as libnbd or nbd.ko then drops the
// connection and the replies still to come or not read yet), reads what
// the socket holds, and the connection closes.
// Shutdown() is the hard stop: the socket is shut down both ways at once,
// and replies not sent yet are lost.
//
// Log (ConnectionLimits::log, when set), each line naming the connection:
// its handshake's outcome (the export and size, or why it failed), every
// error reply (the request and why; the first kMaxLoggedErrors of a
// connection, then a count), and its close with the reason (the client's
// DISC or EOF, a timeout, a protocol error, a send error, the server
// stopping) and how many requests and error replies it had.
#ifndef ZTIER_NBD_CONNECTION_H_
#define ZTIER_NBD_CONNECTION_H_

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nbd/nbd_counters.h"
#include "nbd/transport.h"
#include "platform/mapping.h"
#include "work_queue.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::nbd {

class Connection;

class TlsContext;  // tls.h

struct ConnectionLimits {
  std::uint32_t max_request_bytes = 32 << 20;
  std::uint32_t inline_max_bytes = 16 << 10;  // clamped to 64 KiB
  std::size_t max_in_flight = 64;
  std::uint64_t max_in_flight_bytes = 64 << 20;
  int handshake_timeout_ms = 10000;  // the whole handshake; -1: none
  int io_timeout_ms = 30000;  // a stalled request or reply; -1: none
  const TlsContext* tls = nullptr;  // credentials for NBD_OPT_STARTTLS
  bool tls_required = false;
  // For a swap device (--prealloc): once the handshake is done, every job
  // gets a buffer of this many bytes (at most 1 MiB) and the writer thread
  // starts, so that requests up to this size never allocate. 0: lazily.
  std::uint32_t prealloc_job_bytes = 0;
  // Where the connection's log lines go (above); null: nowhere. Called from
  // the reader and the workers, one whole line at a time. A line that is a
  // warning (an error reply, a connection ended for want of memory or a
  // thread) starts with "warning: ".
  std::function<void(const std::string&)> log;
  // Set by the server once it stops (null: never): the handshake answers
  // options NBD_REP_ERR_SHUTDOWN, the reader requests ESHUTDOWN. Must
  // outlive the connection.
  const std::atomic<bool>* server_stopping = nullptr;
  // The server's counters (nbd_counters.h), updated lock-free by the reader
  // and the workers; null: nothing counted. Must outlive the connection and
  // its jobs (the server's WorkQueue).
  NbdServerCounters* counters = nullptr;
};

// Error replies logged per connection; the rest are only counted.
inline constexpr std::uint64_t kMaxLoggedErrors = 32;

// A request handed to a worker; owned by its connection, reused.
struct Job {
  Connection* conn = nullptr;
  WorkQueue::Lane* lane = nullptr;  // its connection's, in the WorkQueue
  Job* next = nullptr;  // free list / queue link
  std::uint16_t type = 0;
  std::uint16_t flags = 0;
  std::uint64_t cookie = 0;  // as on the wire (opaque, echoed back)
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  std::uint32_t done = 0;  // TRIM, WRITE_ZEROES: bytes done (in steps)
  std::uint64_t charged = 0;  // bytes counted in max_in_flight_bytes
  std::uint32_t error = 0;  // the reply's NBD error
  bool structured = false;  // a READ answers in a structured chunk
  std::size_t sent = 0;     // reply bytes already sent (send queue)
  std::uint64_t start_ns = 0;  // when the request was read (MonotonicNs)
  // Its own mapping (Connection::NewBuffer), empty until a request larger
  // than `reserve` needs one; buffer.size() is its capacity.
  platform::Mapping buffer;
  // --prealloc's buffer (ConnectionLimits::prealloc_job_bytes), made at
  // set-up and never given up: a larger request takes `buffer` instead.
  platform::Mapping reserve;
  std::byte* data = nullptr;  // this request's: reserve's or buffer's
};

class Connection {
 public:
  // Takes ownership of the connected socket `fd`. `name` names it in the
  // log ("#3 (tcp 127.0.0.1:40112)").
  Connection(int fd, DeviceRegistry* registry, WorkQueue* queue,
             ConnectionLimits limits, std::function<void(Connection*)> on_exit,
             std::string name = "");
  ~Connection();  // REQUIRES: Join() has returned (or Start() never ran)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts the reader thread. False when no thread can be had
  // (pthread_create's EAGAIN: a task or memory limit): the socket is then
  // closed, and the caller drops the connection instead of the process
  // ending.
  bool Start();
  // Any thread: the soft stop (above). The server sets
  // ConnectionLimits::server_stopping first, and calls it again while it
  // waits for the connection to end: no event says when the client has
  // read its replies, and then receiving may stop.
  void BeginStop();
  void Shutdown();  // any thread: the hard stop; the reader stops soon
  void Join();

  // Worker side: runs `job` against the device, replies, recycles the job
  // (a long TRIM or WRITE_ZEROES: one step, then queues it again).
  void RunJob(Job* job);
  // The WorkQueue's run function for connections' jobs.
  static void Run(Job* job) { job->conn->RunJob(job); }

 private:
  void Main();
  void Serve();
  // True once work not begun is to be dropped: the connection stops
  // (BeginStop() or Shutdown(); the reply is ESHUTDOWN, if it can go), or
  // the socket failed. Takes mu_, then send_mu_ (never both at once).
  bool StopsWork();
  // Stops receiving (SHUT_RD) once the connection stops, its reader is
  // idle, no job is in flight and the client has read every reply
  // ("Stopping" above). REQUIRES: mu_ held.
  void StopReceivingIfDone();
  // Takes mu_: the reader waits (or not) for a request (reader_idle_).
  void SetReaderIdle(bool idle);
  // 0, or the NBD error of a bad request with *why saying what is wrong.
  std::uint32_t Validate(std::uint16_t type, std::uint16_t flags,
                         std::uint64_t offset, std::uint32_t length,
                         std::string_view* why) const;
  // Whether a write of [offset, offset + length) reads a page at either
  // end that may wait for the backing store: one it covers only in part
  // (Device::ReadMayWait). NBD_CMD_FLAG_FAST_ZERO is refused for it.
  bool EdgeMayWait(std::uint64_t offset, std::uint32_t length) const;
  bool RunInline(std::uint16_t type, std::uint16_t flags, std::uint64_t cookie,
                 std::uint64_t offset, std::uint32_t length);
  // NBD_CMD_BLOCK_STATUS for base:allocation, into the output batch.
  bool BlockStatus(std::uint16_t flags, std::uint64_t cookie,
                   std::uint64_t offset, std::uint32_t length);
  bool Hand(std::uint16_t type, std::uint16_t flags, std::uint64_t cookie,
            std::uint64_t offset, std::uint32_t length);
  // A request not begun because the server stops: ESHUTDOWN, after a
  // WRITE's payload of `length` bytes has been read and dropped.
  bool RefuseStopping(std::uint16_t type, std::uint64_t cookie,
                      std::uint32_t length);
  // Input buffer.
  bool Fill(std::size_t n);
  bool SkipInput(std::size_t n);
  bool ReadPayload(std::byte* dst, std::size_t n);
  // Output batch.
  bool AddReply(std::uint64_t cookie, std::uint32_t error);
  // An error reply to a request of `type`: a structured ERROR chunk with
  // `why` when structured replies are in use and `type` is READ or
  // BLOCK_STATUS, else a simple reply.
  bool AddErrorReply(std::uint16_t type, std::uint64_t cookie,
                     std::uint32_t error, std::string_view why);
  bool FlushBatch();
  void SendReply(Job* job);
  void WriterLoop();
  // The buffer each job gets at start (ConnectionLimits::prealloc_job_bytes,
  // at most 1 MiB): its reserve, kept beside any larger buffer.
  std::size_t PreallocatedBytes() const;
  // Starts writer_; on failure marks the connection broken and returns
  // false. REQUIRES: send_mu_ held.
  bool StartWriter();
  // The socket failed (`why`, for the close's reason): shuts it down.
  // REQUIRES: send_mu_ held.
  void MarkBroken(std::string why);
  // Log.
  void Log(const std::string& line) const;
  // Log's line as a warning: "warning: " first (ConnectionLimits::log).
  void Warn(const std::string& line) const;
  // Logs an error reply to a request (any thread).
  void LogError(std::uint16_t type, std::uint64_t offset, std::uint32_t length,
                std::uint32_t error, std::string_view why);
  // Records why the reader stops (the first reason wins; once the socket
  // has failed, MarkBroken's reason stands for `reason`); returns false.
  // Takes send_mu_, then mu_ (never both at once).
  bool Stop(std::string reason);
  // Jobs.
  // A buffer of `bytes` (BufferBytes): a spare of that size, else new;
  // empty without the memory.
  platform::Mapping TakeBuffer(std::size_t bytes);
  Job* AcquireJob(std::uint64_t bytes);
  void Release(Job* job);
  void WaitIdle();

  const int fd_;
  // Plain until the handshake upgrades it to TLS; fixed afterwards.
  std::unique_ptr<Transport> transport_;
  DeviceRegistry* const registry_;
  WorkQueue* const queue_;
  const ConnectionLimits limits_;
  const std::function<void(Connection*)> on_exit_;
  const std::string name_;
  std::thread thread_;

  // Set by the reader during the handshake, read-only afterwards.
  std::shared_ptr<Device> device_;
  std::optional<Device::ClientRef> ref_;
  std::uint64_t size_ = 0;
  bool structured_ = false;       // NBD_OPT_STRUCTURED_REPLY negotiated
  bool base_allocation_ = false;  // base:allocation selected

  // Reader-only state.
  std::string stop_reason_;  // guarded by mu_: why the reader stopped
  std::uint64_t requests_ = 0;
  std::uint64_t request_start_ns_ = 0;  // the current request's read time
  platform::Mapping in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  platform::Mapping out_;
  std::size_t out_used_ = 0;

  std::mutex send_mu_;
  std::condition_variable send_cv_;
  bool broken_ = false;   // guarded by send_mu_: the socket failed
  std::string broken_why_;  // guarded by send_mu_: how (MarkBroken)
  bool sending_ = false;  // guarded by send_mu_: a thread owns the send side
  Job* queue_head_ = nullptr;  // guarded by send_mu_: replies to send
  Job* queue_tail_ = nullptr;  // guarded by send_mu_
  bool writer_stop_ = false;   // guarded by send_mu_
  std::thread writer_;         // started under send_mu_; joined by Main()

  std::atomic<std::uint64_t> errors_{0};  // error replies sent

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> jobs_;      // fixed; max_in_flight entries
  WorkQueue::Lane lane_;       // its jobs queued for the workers (queue_'s)
  Job* free_ = nullptr;        // guarded by mu_
  std::size_t in_flight_ = 0;  // guarded by mu_
  std::uint64_t in_flight_bytes_ = 0;  // guarded by mu_
  // Buffers larger than a job keeps (1 MiB), each a whole number of MiB,
  // kept for the next request of that size (Release, TakeBuffer); room
  // reserved in Serve() for as many as max_in_flight_bytes holds, at most
  // 256. Guarded by mu_.
  std::vector<platform::Mapping> spares_;
  // Bytes of the buffers kept by free jobs (their reserves aside), and of
  // spares_ (Release): at most max_in_flight_bytes. Guarded by mu_.
  std::uint64_t kept_bytes_ = 0;
  bool stopping_ = false;      // guarded by mu_
  // Guarded by mu_: the reader waits for the next request, with nothing of
  // it received and its replies sent.
  bool reader_idle_ = false;
  bool closed_ = false;        // guarded by mu_: fd_ is closed
};

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_CONNECTION_H_
