// File: tools/ztier/bench_zram_compare_io.cc
//
// The kernel (io_uring) and library (Device) drivers of `ztier bench
// zram-compare` (bench_zram_compare_io.h), and the start gate that lets
// every thread set up before the clock starts.
#include "bench_zram_compare_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

// Called by a worker once it is set up: waits for every other thread, then
// returns the deadline of the timed work (time_point::max() for one pass).
using WaitForStart = std::function<Clock::time_point()>;
using Worker = std::function<Status(std::size_t thread,
                                    const WaitForStart& wait,
                                    std::uint64_t* ops)>;

// Runs `worker` on p.threads threads from a common start; the result's time
// is from the start until the last thread returns.
Result<IoResult> RunThreads(const IoPattern& p, const Worker& worker) {
  std::latch ready(static_cast<std::ptrdiff_t>(p.threads));
  std::latch go(1);
  Clock::time_point deadline = Clock::time_point::max();
  std::vector<Status> statuses(p.threads);
  std::vector<std::uint64_t> ops(p.threads, 0);
  std::vector<std::thread> threads;
  threads.reserve(p.threads);
  for (std::size_t t = 0; t < p.threads; ++t) {
    threads.emplace_back([&, t] {
      bool arrived = false;
      const WaitForStart wait = [&] {
        arrived = true;
        ready.count_down();
        go.wait();
        return deadline;
      };
      statuses[t] = worker(t, wait, &ops[t]);
      if (!arrived) ready.count_down();
    });
  }
  ready.wait();
  const Clock::time_point start = Clock::now();
  if (p.seconds > 0) {
    deadline = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(p.seconds));
  }
  go.count_down();
  for (std::thread& th : threads) th.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  for (const Status& s : statuses) {
    if (!s.ok()) return Err(s);
  }
  IoResult r;
  for (std::uint64_t n : ops) r.ops += n;
  r.bytes = r.ops * p.block_bytes;
  r.seconds = seconds;
  return r;
}

// The blocks one thread visits (see the header).
class BlockSequence {
 public:
  BlockSequence(const IoPattern& p, std::size_t thread)
      : first_(thread * ShareBytes(p)),
        block_(p.block_bytes),
        blocks_(ShareBytes(p) / p.block_bytes),
        random_(p.random && p.seconds > 0),
        one_pass_(p.seconds <= 0),
        rng_(thread + 1) {}

  // The byte offset of the next block; false once a one-pass sequence ends.
  bool Next(std::uint64_t* offset) {
    std::uint64_t b;
    if (random_) {
      b = SplitMix() % blocks_;
    } else {
      if (one_pass_ && next_ == blocks_) return false;
      b = next_;
      next_ = next_ + 1 == blocks_ && !one_pass_ ? 0 : next_ + 1;
    }
    *offset = first_ + b * block_;
    return true;
  }

 private:
  std::uint64_t SplitMix() {
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  const std::uint64_t first_;
  const std::uint64_t block_;
  const std::uint64_t blocks_;
  const bool random_;
  const bool one_pass_;
  std::uint64_t next_ = 0;
  std::uint64_t rng_;
};

using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;

AlignedBuffer AllocAligned(std::size_t bytes) {
  return AlignedBuffer(
      static_cast<std::byte*>(std::aligned_alloc(kPageSize, bytes)));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Result<Fd> OpenDirect(const std::string& dev_path, int mode) {
  const int fd = ::open(dev_path.c_str(), mode | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return Err(PosixError("open " + dev_path + " O_DIRECT", errno));
  return Fd(fd);
}

// One kernel thread: keeps p.depth IOs in flight until the deadline.
Status KernelWorker(const std::string& dev_path, const IoPattern& p,
                    const DataPages& data, std::size_t thread,
                    const WaitForStart& wait, std::uint64_t* ops) {
  ZT_ASSIGN_OR_RETURN(Fd fd, OpenDirect(dev_path,
                                        p.writes ? O_WRONLY : O_RDONLY));
  io_uring ring;
  if (const int r = io_uring_queue_init(p.depth, &ring, 0); r < 0) {
    return PosixError("io_uring_queue_init(" + std::to_string(p.depth) + ")",
                      -r);
  }
  struct RingExit {
    io_uring* ring;
    ~RingExit() { io_uring_queue_exit(ring); }
  } ring_exit{&ring};
  AlignedBuffer buffers;
  if (!p.writes) {
    buffers = AllocAligned(std::size_t{p.depth} * p.block_bytes);
    if (buffers == nullptr) return Status::ResourceExhausted("read buffers");
    std::memset(buffers.get(), 0, std::size_t{p.depth} * p.block_bytes);
  }
  BlockSequence seq(p, thread);
  std::size_t in_flight = 0;
  // Queues the next IO in buffer `slot`; false when the sequence ended.
  const auto queue = [&](std::uint64_t slot) {
    std::uint64_t offset;
    if (!seq.Next(&offset)) return false;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (p.writes) {
      io_uring_prep_write(sqe, fd.get(), data.ForAreaPage(offset / kPageSize),
                          p.block_bytes, offset);
    } else {
      io_uring_prep_read(sqe, fd.get(), buffers.get() + slot * p.block_bytes,
                         p.block_bytes, offset);
    }
    io_uring_sqe_set_data64(sqe, slot);
    ++in_flight;
    return true;
  };

  const Clock::time_point deadline = wait();
  Status status;
  for (std::uint64_t slot = 0; slot < p.depth && queue(slot); ++slot) {
  }
  std::vector<std::pair<std::uint64_t, int>> done;
  done.reserve(p.depth);
  while (in_flight > 0) {
    const int r = io_uring_submit_and_wait(&ring, 1);
    if (r < 0 && r != -EINTR) {
      // Nothing can complete; what was queued is abandoned with the ring.
      return PosixError("io_uring_submit_and_wait on " + dev_path, -r);
    }
    done.clear();
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
      done.emplace_back(io_uring_cqe_get_data64(cqe), cqe->res);
    }
    io_uring_cq_advance(&ring, static_cast<unsigned>(done.size()));
    for (const auto& [slot, res] : done) {
      --in_flight;
      if (res != static_cast<int>(p.block_bytes) && status.ok()) {
        status = res < 0 ? PosixError((p.writes ? "write " : "read ") +
                                          dev_path, -res)
                         : Status::IoError("short IO on " + dev_path + ": " +
                                           std::to_string(res) + " of " +
                                           std::to_string(p.block_bytes) +
                                           " bytes");
      }
      if (!status.ok()) continue;  // drain what is in flight, then fail
      ++*ops;
      if (Clock::now() < deadline) queue(slot);
    }
  }
  return status;
}

// One synchronous IO at `offset`: a write of `src` or a read into `out`.
using SyncIo = std::function<Status(std::uint64_t offset, const std::byte* src,
                                    std::span<std::byte> out)>;

// One thread of synchronous calls, one after another until the deadline
// (pread/pwrite, or a library call).
Status SyncWorker(const IoPattern& p, const DataPages& data,
                  std::size_t thread, const WaitForStart& wait,
                  std::uint64_t* ops, const SyncIo& io) {
  AlignedBuffer buffer = AllocAligned(p.block_bytes);
  if (buffer == nullptr) return Status::ResourceExhausted("read buffer");
  std::memset(buffer.get(), 0, p.block_bytes);
  const std::span<std::byte> out(buffer.get(), p.block_bytes);
  BlockSequence seq(p, thread);
  const Clock::time_point deadline = wait();
  std::uint64_t offset;
  while (seq.Next(&offset)) {
    ZT_RETURN_IF_ERROR(io(offset,
                          p.writes ? data.ForAreaPage(offset / kPageSize)
                                   : nullptr,
                          out));
    ++*ops;
    if (Clock::now() >= deadline) break;
  }
  return Status::Ok();
}

// pread/pwrite on `dev_path` for SyncWorker.
Status KernelSyncWorker(const std::string& dev_path, const IoPattern& p,
                        const DataPages& data, std::size_t thread,
                        const WaitForStart& wait, std::uint64_t* ops) {
  ZT_ASSIGN_OR_RETURN(Fd fd, OpenDirect(dev_path,
                                        p.writes ? O_WRONLY : O_RDONLY));
  return SyncWorker(p, data, thread, wait, ops,
                    [&](std::uint64_t off, const std::byte* src,
                        std::span<std::byte> out) -> Status {
                      const ssize_t n =
                          src != nullptr
                              ? ::pwrite(fd.get(), src, out.size(),
                                         static_cast<off_t>(off))
                              : ::pread(fd.get(), out.data(), out.size(),
                                        static_cast<off_t>(off));
                      if (n == static_cast<ssize_t>(out.size())) {
                        return Status::Ok();
                      }
                      return n < 0 ? PosixError("IO on " + dev_path, errno)
                                   : Status::IoError("short IO on " + dev_path);
                    });
}

Status CheckPattern(const IoPattern& p) {
  const std::uint64_t block = kMaxBlockPages * kPageSize;
  if (p.threads == 0 || p.depth == 0 || p.block_bytes == 0 ||
      p.block_bytes % kPageSize != 0 || p.block_bytes > block ||
      p.area_bytes % block != 0 || ShareBytes(p) == 0) {
    return Status::InvalidArgument(
        "IO pattern: threads and depth >= 1, a block of whole pages up to "
        "128 KiB, an area of whole 128 KiB blocks, at least one per thread");
  }
  return Status::Ok();
}

}  // namespace

void AlignedFree::operator()(std::byte* p) const { std::free(p); }

Result<DataPages> DataPages::From(std::span<const corpus::PageSet* const> sets,
                                  std::size_t max_pages_each) {
  std::size_t total = 0;
  for (const corpus::PageSet* s : sets) {
    total += max_pages_each == 0 ? s->size()
                                 : std::min(s->size(), max_pages_each);
  }
  total -= total % kMaxBlockPages;
  if (total == 0) {
    return Err(Status::InvalidArgument(
        "the corpus pages make less than one 128 KiB block"));
  }
  DataPages d;
  d.bytes_ = AllocAligned(total * kPageSize);
  if (d.bytes_ == nullptr) {
    return Err(Status::ResourceExhausted("data pages: out of memory"));
  }
  std::size_t at = 0;
  for (const corpus::PageSet* s : sets) {
    std::size_t n = max_pages_each == 0 ? s->size()
                                        : std::min(s->size(), max_pages_each);
    n = std::min(n, total - at);
    std::memcpy(d.bytes_.get() + at * kPageSize, s->bytes().data(),
                n * kPageSize);
    at += n;
  }
  d.count_ = total;
  return d;
}

const std::byte* DataPages::ForAreaPage(std::uint64_t p) const {
  return bytes_.get() + (p % count_) * kPageSize;
}

std::uint64_t ShareBytes(const IoPattern& p) {
  const std::uint64_t block = kMaxBlockPages * kPageSize;
  return p.threads == 0 ? 0 : p.area_bytes / p.threads / block * block;
}

Result<IoResult> RunKernelIo(const std::string& dev_path, const IoPattern& p,
                             const DataPages& data) {
  ZT_RETURN_IF_ERROR(CheckPattern(p));
  return RunThreads(p, [&](std::size_t t, const WaitForStart& wait,
                           std::uint64_t* ops) {
    return p.sync ? KernelSyncWorker(dev_path, p, data, t, wait, ops)
                  : KernelWorker(dev_path, p, data, t, wait, ops);
  });
}

Result<IoResult> RunLibraryIo(Device& device, const IoPattern& p,
                              const DataPages& data) {
  ZT_RETURN_IF_ERROR(CheckPattern(p));
  return RunThreads(p, [&](std::size_t t, const WaitForStart& wait,
                           std::uint64_t* ops) {
    return SyncWorker(p, data, t, wait, ops,
                      [&](std::uint64_t off, const std::byte* src,
                          std::span<std::byte> out) {
                        return src != nullptr
                                   ? device.Write(off, {src, out.size()})
                                   : device.Read(off, out);
                      });
  });
}

Status VerifyArea(const PageReader& read, std::uint64_t area_bytes,
                  const DataPages& data, std::uint64_t stride) {
  AlignedBuffer page = AllocAligned(kPageSize);
  if (page == nullptr) return Status::ResourceExhausted("verify buffer");
  const std::span<std::byte> out(page.get(), kPageSize);
  for (std::uint64_t p = 0; p < area_bytes / kPageSize; p += stride) {
    ZT_RETURN_IF_ERROR(read(p * kPageSize, out));
    if (std::memcmp(out.data(), data.ForAreaPage(p), kPageSize) != 0) {
      return Status::Corruption("page " + std::to_string(p) +
                                " reads back different from what was "
                                "written");
    }
  }
  return Status::Ok();
}

Result<PageReader> KernelPageReader(const std::string& dev_path) {
  ZT_ASSIGN_OR_RETURN(Fd fd, OpenDirect(dev_path, O_RDONLY));
  auto shared = std::make_shared<Fd>(std::move(fd));
  return PageReader([shared, dev_path](std::uint64_t offset,
                                       std::span<std::byte> out) -> Status {
    const ssize_t n = ::pread(shared->get(), out.data(), out.size(),
                              static_cast<off_t>(offset));
    if (n == static_cast<ssize_t>(out.size())) return Status::Ok();
    return n < 0 ? PosixError("pread " + dev_path, errno)
                 : Status::IoError("short read of " + dev_path);
  });
}

IoPattern PatternFor(const bench::NbdJob& job, std::size_t threads,
                     std::uint64_t area_bytes, std::int64_t seconds) {
  return {.random = job.rw.starts_with("rand"),
          .writes = job.writes,
          .block_bytes = job.block_size,
          .depth = job.iodepth,
          .threads = threads,
          .area_bytes = area_bytes,
          .seconds = static_cast<double>(seconds)};
}

std::vector<std::string> NbdFioArgs(const std::string& fio_path,
                                    const bench::NbdJob& job,
                                    std::size_t threads,
                                    std::uint64_t area_bytes,
                                    std::int64_t seconds,
                                    const std::string& uri) {
  const std::uint64_t share =
      ShareBytes(PatternFor(job, threads, area_bytes, seconds));
  std::vector<std::string> argv =
      bench::FioJobArgs(fio_path, job, uri, share, seconds);
  argv.push_back("--numjobs=" + std::to_string(threads));
  argv.push_back("--offset_increment=" + std::to_string(share));
  return argv;
}

std::vector<std::string> KernelFioArgs(const std::string& fio_path,
                                       const bench::NbdJob& job,
                                       std::size_t threads,
                                       std::uint64_t area_bytes,
                                       std::int64_t seconds,
                                       const std::string& dev_path) {
  std::vector<std::string> argv =
      NbdFioArgs(fio_path, job, threads, area_bytes, seconds, "");
  for (std::string& a : argv) {
    if (a == "--ioengine=nbd") a = "--ioengine=io_uring";
    if (a.starts_with("--uri=")) a = "--filename=" + dev_path;
  }
  argv.push_back("--direct=1");
  return argv;
}

}  // namespace ztier::tool
