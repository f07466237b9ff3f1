// ublk_disk.cc: one ublk disk and its queue threads (contract in
// ublk/ublk_disk.h; the server flow of kublk.c, tools/testing/selftests/
// ublk, and ublk_drv.c of Linux 6.12).
#include "ublk/ublk_disk.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <future>
#include <system_error>
#include <utility>

#include "platform/event_fd.h"
#include "ublk/request.h"

namespace ztier::ublk {

namespace abi = platform::ublk;

struct UblkDisk::Queue {
  std::uint16_t id = 0;
  platform::Mapping buffers;  // depth * max_io_bytes
  std::promise<Status> ready;  // the ring made and every tag fetched
  std::thread thread;
  // The waiters' results for this queue (room for depth, reserved at
  // start), and the eventfd that wakes the queue thread to commit them,
  // read by its ring into wake_value (here, not on the queue thread's
  // stack: it outlives the ring, see UblkQueueRing::ArmWake).
  platform::EventFd wake;
  std::uint64_t wake_value = 0;
  // Set when the queue thread has left on a ring error: its requests are
  // failed by the driver, and the waiters skip those still queued.
  std::atomic<bool> dead{false};
  // The queue thread's: what each tag last committed, for a refused
  // commit (made at start; CommitRetries in request.h).
  std::optional<CommitRetries> commits;
  internal::Mutex done_mu;
  std::vector<platform::UblkQueueRing::Completion> done ZT_GUARDED_BY(done_mu);
};

namespace {
// An idle queue thread looks at stopping_ this often (ms), a busy one at
// each wake-up: after STOP_DEV every fetch is aborted at once, so this
// bounds only a start that failed before START_DEV, a failed STOP_DEV and
// a kernel that does not abort. Each look is a wake-up of every queue
// thread of every disk on an idle host: once a second each.
constexpr int kIdleWaitMs = 1000;
// How long Stop waits for a blocking DEL_DEV (before 6.9) before it goes
// on without it (DeleteBlockingWithin).
constexpr int kBlockingDeleteWaitMs = 2000;
}  // namespace

Status CheckDiskOptions(const UblkDiskOptions& options) {
  // The driver rounds the IO buffer down to its page (ublk_ctrl_add_dev()),
  // and refuses a max_sectors above that.
  const std::uint64_t page = platform::UblkPageBytes();
  if (options.max_io_bytes < page || options.max_io_bytes % page != 0 ||
      options.max_io_bytes > abi::kMaxIoBufBytes) {
    return Status::InvalidArgument(
        "ublk max IO size must be a multiple of the page size (" +
        std::to_string(page >> 10) + " KiB here) up to 32 MiB");
  }
  if (options.depth == 0 || options.depth > abi::kMaxQueueDepth) {
    return Status::InvalidArgument("ublk queue depth must be 1..4096");
  }
  return Status::Ok();
}

UblkDisk::UblkDisk(platform::UblkControl* control,
                   std::shared_ptr<Device> device, Device::ClientRef ref,
                   const UblkDiskOptions& options)
    : control_(control), device_(std::move(device)), ref_(std::move(ref)),
      options_(options) {}

Result<std::unique_ptr<UblkDisk>> UblkDisk::Start(
    platform::UblkControl* control, std::shared_ptr<Device> device,
    const UblkDiskOptions& options) {
  ZT_RETURN_IF_ERROR(CheckDiskOptions(options));
  ZT_ASSIGN_OR_RETURN(Device::ClientRef ref, device->Attach());
  std::unique_ptr<UblkDisk> disk(
      new UblkDisk(control, device, std::move(ref), options));
  disk->disksize_ = device->disksize();

  abi::CtrlDevInfo info{};
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  info.nr_hw_queues = static_cast<std::uint16_t>(
      options.queues != 0 ? options.queues : std::min(cpus, abi::kMaxNrQueues));
  info.queue_depth = options.depth;
  info.max_io_buf_bytes = options.max_io_bytes;
  info.dev_id = options.dev_id;
  info.ublksrv_pid = ::getpid();
  info.ublksrv_flags = kUblkServerMark;
  // Never UBLK_F_UNPRIVILEGED_DEV: the driver refuses it with USER_COPY.
  info.flags = abi::kFUserCopy | abi::kFCmdIoctlEncode;
  auto added = control->AddDevice(info);
  if (!added.has_value() && added.error().code() == StatusCode::kBusy &&
      options.dev_id != UINT32_MAX) {
    info.dev_id = UINT32_MAX;  // the wanted id is taken: any
    added = control->AddDevice(info);
  }
  if (!added.has_value()) return Err(added.error());
  disk->added_ = true;
  disk->dev_id_ = added->dev_id;
  if ((added->flags & abi::kFUserCopy) == 0) {
    // A driver before 6.5 drops the flags it does not know.
    disk->Stop();
    return Err(Status::Unsupported(
        "this kernel's ublk driver has no UBLK_F_USER_COPY (Linux 6.5 or "
        "later), which ztier needs"));
  }
  // The driver may lower the queue count (to nr_cpu_ids) and rounds the
  // buffer size down to a page.
  disk->queues_.resize(added->nr_hw_queues);
  if (Status s = disk->Run(); !s.ok()) {
    disk->Stop();
    return Err(std::move(s));
  }
  return disk;
}

Status UblkDisk::Run() {
  ZT_ASSIGN_OR_RETURN(char_fd_,
                      platform::OpenUblkChar(platform::UblkCharPath(dev_id_),
                                             platform::kUblkCharOpenTimeoutMs));
  abi::Params p{};
  p.types = abi::kParamBasic | abi::kParamDiscard;
  // No UBLK_ATTR_VOLATILE_CACHE: memory is the medium, as zram, so the
  // block layer sends no FLUSH and strips FUA.
  p.basic.logical_bs_shift = 12;
  p.basic.physical_bs_shift = 12;
  p.basic.io_opt_shift = 12;
  p.basic.io_min_shift = 12;
  p.basic.max_sectors = options_.max_io_bytes >> 9;
  p.basic.dev_sectors = disksize_ >> 9;
  // Discard and write zeroes in whole pages, one range a request
  // (the driver serves a single segment only).
  constexpr std::uint32_t kMaxRangeSectors = (UINT32_MAX >> 9) & ~7u;
  p.discard.discard_granularity = 4096;
  p.discard.max_discard_sectors = kMaxRangeSectors;
  p.discard.max_write_zeroes_sectors = kMaxRangeSectors;
  p.discard.max_discard_segments = 1;
  ZT_RETURN_IF_ERROR(control_->SetParams(dev_id_, p));

  for (std::size_t i = 0; i < queues_.size(); ++i) {
    auto q = std::make_unique<Queue>();
    q->id = static_cast<std::uint16_t>(i);
    ZT_ASSIGN_OR_RETURN(q->wake, platform::EventFd::Create());
    {
      internal::MutexLock lock(q->done_mu);
      q->done.reserve(options_.depth);
    }
    q->commits.emplace(options_.depth);
    ZT_ASSIGN_OR_RETURN(
        q->buffers,
        platform::Mapping::Anonymous(
            std::size_t{options_.depth} * options_.max_io_bytes,
            platform::Commit::kOnTouch,
            "mmap ublk queue " + std::to_string(i) + " buffers"));
    if (options_.populate) {
      ZT_RETURN_IF_ERROR(q->buffers.Populate("populate ublk queue buffers"));
    }
    queues_[i] = std::move(q);
  }
  waiting_.resize(queues_.size() * options_.depth);
  const std::size_t waiters = std::max<std::size_t>(2, queues_.size());
  try {
    for (std::size_t i = 0; i < waiters; ++i) {
      waiters_.emplace_back([this] { WaiterMain(); });
    }
  } catch (const std::system_error& e) {
    return Status::ResourceExhausted(
        std::string("no thread for a ublk waiter: ") + e.what());
  }
  std::vector<std::future<Status>> ready;
  for (auto& q : queues_) {
    ready.push_back(q->ready.get_future());
    Queue* raw = q.get();
    try {
      q->thread = std::thread([this, raw] { QueueMain(raw); });
    } catch (const std::system_error& e) {
      // No thread to be had (a task limit): this disk fails to start, and
      // the device goes on over NBD; the server, and every device, too.
      q->ready.set_value(Status::ResourceExhausted("no thread for ublk queue " +
                                                   std::to_string(q->id) +
                                                   ": " + e.what()));
    }
  }
  Status first;
  for (auto& f : ready) {
    Status s = f.get();
    if (first.ok() && !s.ok()) first = std::move(s);
  }
  ZT_RETURN_IF_ERROR(first);
  // Returns once every tag of every queue is fetched, which it is.
  ZT_RETURN_IF_ERROR(control_->Start(dev_id_, ::getpid()));
  started_ = true;
  return Status::Ok();
}

void UblkDisk::QueueMain(Queue* q) {
  if (Status s = platform::SetIoFlusher();
      !s.ok() && !flusher_warned_.exchange(true)) {
    Log("warning: ublk queue threads are not IO flushers (" + s.message() +
        "): swapping to " + block_path() + " may deadlock under memory "
        "pressure; run as root or with CAP_SYS_RESOURCE");
  }
  auto made = platform::UblkQueueRing::Create(char_fd_, q->id, options_.depth);
  if (!made.has_value()) {
    q->ready.set_value(made.error());
    return;
  }
  platform::UblkQueueRing& ring = **made;
  if (Status s = ring.FetchAll(); !s.ok()) {
    q->ready.set_value(std::move(s));
    return;
  }
  q->ready.set_value(Status::Ok());
  ring.ArmWake(q->wake.fd(), &q->wake_value);

  const Limits limits{disksize_, options_.max_io_bytes};
  using Completion = platform::UblkQueueRing::Completion;
  // Room for every tag and the wake read.
  std::vector<Completion> done(options_.depth + 1u);
  std::vector<Completion> results;  // the waiters', swapped out of q->done
  results.reserve(options_.depth);
  std::size_t live = options_.depth;  // tags fetched, not yet aborted
  std::size_t handed = 0;  // tags with the waiters, not yet committed
  bool give_up = false;    // a commit refused for good: leave
  while (live > 0 && !give_up) {
    auto n = ring.Wait(done, kIdleWaitMs);
    if (!n.has_value()) {
      // Not LogIoErrorOnce: the end of a queue is never left unsaid.
      Log("warning: " + block_path() + ": queue " + std::to_string(q->id) +
          " stops: " + n.error().ToString());
      q->dead.store(true, std::memory_order_relaxed);
      break;
    }
    // Stop() has sent STOP_DEV (or had no disk to stop) and nothing is
    // with the waiters: leave, busy or not. After a STOP_DEV that worked
    // the driver has drained the disk and aborts every tag at once; one
    // that failed leaves the disk live, and IO may keep coming, so waiting
    // for an idle ring could wait for ever. Closing the ring then has the
    // driver fail what is left and stop the disk itself
    // (ublk_uring_cmd_cancel_fn() in ublk_drv.c).
    if (stopping_.load(std::memory_order_acquire) && handed == 0) break;
    if (*n == 0) continue;
    for (std::size_t i = 0; i < *n; ++i) {
      const std::uint16_t tag = done[i].tag;
      if (tag == platform::UblkQueueRing::kWakeTag) {
        // A waiter has results. (A failed read, which an eventfd never
        // gives, is armed again after a pause, not in a spin; the results
        // are looked for all the same.)
        if (done[i].res < 0) {
          Log("warning: " + block_path() + ": queue " + std::to_string(q->id) +
              ": wake read failed: " + ErrnoText(done[i].res));
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ring.ArmWake(q->wake.fd(), &q->wake_value);
        {
          internal::MutexLock lock(q->done_mu);
          results.swap(q->done);  // both keep room for depth
        }
        for (const Completion& c : results) Finish(*q, ring, c.tag, c.res);
        handed -= results.size();
        results.clear();
        continue;
      }
      if (done[i].res != abi::kIoResOk && done[i].res != abi::kIoResAbort) {
        // Refused. A refused commit has not completed its request, whose
        // IO would wait for ever: it is committed again if the refusal may
        // pass, else the queue gives up at once (CommitRetries).
        const std::int32_t res = done[i].res;
        const CommitRetries::Action a = q->commits->Refused(tag, res);
        if (a.kind == CommitRetries::Action::kRetry) {
          if (!IoErrorLogged()) {
            LogIoErrorOnce(block_path() + ": queue " + std::to_string(q->id) +
                           " tag " + std::to_string(tag) +
                           ": commit refused for a while (" + ErrnoText(res) +
                           "); committing it again");
          }
          // Committed again after this round's one pause (below).
          q->commits->QueueRetry(tag, a);
          continue;
        }
        if (a.kind == CommitRetries::Action::kGiveUp) {
          const std::string why =
              CommitRetries::RefusedForAWhile(res)
                  ? "still refused after " +
                        std::to_string(CommitRetries::kCommitRetries) +
                        " tries in about 12 s (the kernel keeps short of "
                        "memory for it)"
                  : "refused for good (an error no retry mends)";
          Log("warning: " + block_path() + ": queue " + std::to_string(q->id) +
              " stops: the commit of tag " + std::to_string(tag) + " was " +
              why + ": " + ErrnoText(res) +
              ". The kernel fails this queue's IO from now on; stop using " +
              block_path() + " and restart the server to serve it again");
          q->dead.store(true, std::memory_order_relaxed);
          give_up = true;
          break;
        }
      }
      if (done[i].res != abi::kIoResOk) {
        // Aborted (the device stops) or a refused fetch: no more for this
        // tag.
        --live;
        if (done[i].res != abi::kIoResAbort && !IoErrorLogged()) {
          LogIoErrorOnce(block_path() + ": queue " + std::to_string(q->id) +
                         " tag " + std::to_string(tag) +
                         ": fetch refused: " + ErrnoText(done[i].res));
        }
        continue;
      }
      q->commits->Fetched(tag);
      const abi::IoDesc desc = ring.desc(tag);  // ours until the commit
      std::int32_t result;
      auto req = ParseDescriptor(desc, limits);
      // Once stopping, no more hand-offs: `handed` must drain to 0.
      if (req.has_value() && req->op == Op::kRead &&
          !stopping_.load(std::memory_order_relaxed) &&
          device_->ReadMayStall(req->offset, req->length)) {
        {
          std::lock_guard lock(wait_mu_);
          waiting_[(wait_head_ + wait_count_) % waiting_.size()] = {q, tag,
                                                                    *req};
          ++wait_count_;
        }
        wait_cv_.notify_one();
        ++handed;
        continue;
      }
      if (!req.has_value()) {
        result = req.error();
      } else {
        const std::span<std::byte> buf(
            q->buffers.data() + std::size_t{tag} * options_.max_io_bytes,
            options_.max_io_bytes);
        result = 0;
        if (req->op == Op::kWrite) {
          if (!ring.ReadRequest(tag, 0, buf.first(req->length)).ok()) {
            result = -EIO;
          }
        }
        if (result == 0) result = ServeRequest(*device_, *req, buf);
        if (req->op == Op::kRead && result > 0 &&
            !ring.WriteRequest(tag, 0, buf.first(req->length)).ok()) {
          result = -EIO;
        }
      }
      Finish(*q, ring, tag, result);
    }
    // One pause for all the commits refused in this round, not one each.
    if (!give_up && q->commits->HasRetries()) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(q->commits->RetryPauseMs()));
      q->commits->TakeRetries([&ring](std::uint16_t tag, std::int32_t result) {
        ring.Commit(tag, result);
      });
    }
  }
  if (!stop_asked_.load(std::memory_order_acquire)) {
    // Gone before a stop: for the status report (each way is logged).
    queues_given_up_.fetch_add(1, std::memory_order_relaxed);
    if (live == 0) {
      Log("warning: " + block_path() + ": queue " + std::to_string(q->id) +
          " ended: the kernel aborted its requests without a stop from this "
          "server (the disk was stopped or deleted from outside)");
    }
  }
  // Leaving closes the ring (made.value()'s destructor), which cancels any
  // command still in the kernel.
}

void UblkDisk::Finish(Queue& q, platform::UblkQueueRing& ring,
                      std::uint16_t tag, std::int32_t result) {
  const abi::IoDesc desc = ring.desc(tag);
  // Formatted only for the one line logged: the request path allocates
  // nothing after that.
  if (result < 0 && result != -ENOSPC && !IoErrorLogged()) {
    LogIoErrorOnce(FailedRequestLine(block_path(), desc, result));
  }
  if (options_.trace != nullptr) {
    char line[kTraceLineMax];
    const std::size_t len = FormatTraceLine(desc, result, line);
    internal::MutexLock lock(*options_.trace_mu);
    std::fwrite(line, 1, len, options_.trace);
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  q.commits->Committed(tag, result);
  ring.Commit(tag, result);
}

void UblkDisk::WaiterMain() {
  // A waiter serves a swap device's reads as the queue threads do (their
  // warning covers it).
  (void)platform::SetIoFlusher();
  for (;;) {
    Waiting w;
    {
      std::unique_lock lock(wait_mu_);
      wait_cv_.wait(lock, [&] { return wait_count_ != 0 || waiters_stop_; });
      if (wait_count_ == 0) return;  // stopped, and nothing left
      w = waiting_[wait_head_];
      wait_head_ = (wait_head_ + 1) % waiting_.size();
      --wait_count_;
    }
    // Its queue has gone: nobody would commit the result.
    if (w.q->dead.load(std::memory_order_relaxed)) continue;
    const std::span<std::byte> buf(
        w.q->buffers.data() + std::size_t{w.tag} * options_.max_io_bytes,
        w.req.length);
    std::int32_t result = ServeRequest(*device_, w.req, buf);
    if (result > 0 &&
        !platform::UblkWriteRequest(char_fd_, w.q->id, w.tag, 0, buf).ok()) {
      result = -EIO;
    }
    {
      internal::MutexLock lock(w.q->done_mu);
      w.q->done.push_back({w.tag, result});  // within the room reserved
    }
    w.q->wake.Signal();
  }
}

void UblkDisk::StopWaiters() {
  {
    std::lock_guard lock(wait_mu_);
    waiters_stop_ = true;
  }
  wait_cv_.notify_all();
  for (std::thread& t : waiters_) t.join();
  waiters_.clear();
}

void UblkDisk::Stop(platform::UniqueFd claim) {
  if (stopped_) return;
  stopped_ = true;
  stop_asked_.store(true, std::memory_order_release);
  if (started_) {
    // The kernel drains IO in flight (the queues serve it), removes the
    // disk and aborts every fetched tag, which ends the queue threads.
    if (Status s = control_->Stop(dev_id_); !s.ok()) {
      Log("warning: " + s.ToString());
    }
  }
  claim.Reset();  // the disk is gone (or STOP_DEV failed): let go of it
  stopping_.store(true, std::memory_order_release);
  for (auto& q : queues_) {
    if (q != nullptr && q->thread.joinable()) q->thread.join();
  }
  // A queue thread ends with no read left with the waiters, but for one
  // that ended on a ring error: the waiters skip its reads not yet begun,
  // and one begun ends within the backing store's timeout.
  StopWaiters();
  queues_.clear();  // buffers unmapped; the rings closed with their threads
  platform::CloseFd(char_fd_);  // before DEL_DEV, which waits for openers
  char_fd_ = -1;
  if (added_) {
    Status s = control_->DeleteAsync(dev_id_);
    if (s.code() == StatusCode::kUnsupported) {
      // Before 6.9: a disk still held (swap left on it at a SIGTERM)
      // would hold this stop, and the server's exit, for ever.
      const std::string path = block_path();
      s = DeleteBlockingWithin(
          options_.control_path, dev_id_, kBlockingDeleteWaitMs,
          [path, log = options_.log](const Status& late) {
            if (!log) return;
            log(late.ok() ? "ublk: " + path + " deleted at last"
                          : "warning: ublk: " + late.ToString());
          });
    }
    if (!s.ok()) Log("warning: " + s.ToString());
  }
  ref_.reset();
}

Status DeleteBlockingWithin(const std::string& control_path,
                            std::uint32_t dev_id, int wait_ms,
                            std::function<void(const Status&)> late) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool waited_out = false;  // the caller went on without it
    Status status;
  };
  auto shared = std::make_shared<Shared>();
  const std::string path = platform::UblkBlockPath(dev_id);
  try {
    std::thread([dev_id, shared, control_path, late = std::move(late)] {
      auto control = platform::UblkControl::Open(control_path);
      Status done = control.has_value() ? (*control)->Delete(dev_id)
                                        : std::move(control.error());
      bool waited_out;
      {
        std::lock_guard lock(shared->mu);
        shared->done = true;
        waited_out = shared->waited_out;
        if (!waited_out) shared->status = done;
      }
      shared->cv.notify_all();
      if (waited_out && late) late(done);
    }).detach();
  } catch (const std::system_error& e) {
    return Status::ResourceExhausted(path + " is left undeleted: no thread (" +
                                     e.what() + ")");
  }
  std::unique_lock lock(shared->mu);
  if (shared->cv.wait_for(lock, std::chrono::milliseconds(wait_ms),
                          [&] { return shared->done; })) {
    return std::move(shared->status);
  }
  // Decided under the lock: the thread calls `late` from now on (maybe
  // before the caller has logged this).
  shared->waited_out = true;
  return Status::Busy("deleting " + path + " waits until " +
                      platform::StoppedBlockDeviceHolder(path) +
                      " lets go of it (this kernel has no asynchronous "
                      "delete, Linux 6.9+); going on meanwhile");
}

UblkDisk::~UblkDisk() { Stop(); }

void UblkDisk::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

bool UblkDisk::IoErrorLogged() const {
  return io_error_logged_.load(std::memory_order_relaxed);
}

void UblkDisk::LogIoErrorOnce(const std::string& line) {
  if (!io_error_logged_.exchange(true)) {
    Log("warning: " + line +
        " (further IO errors of this disk are not logged)");
  }
}

}  // namespace ztier::ublk
