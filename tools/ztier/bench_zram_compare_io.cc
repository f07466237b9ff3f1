// File: tools/ztier/bench_zram_compare_io.cc
//
// The IO driver of `ztier bench zram-compare` (bench_zram_compare_io.h):
// one thread loop per kind of call (io_uring, or a synchronous call) and
// the start gate that lets every thread set up before the clock starts.
#include "bench_zram_compare_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <thread>

#include "platform/unique_fd.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;
constexpr std::uint64_t kBlock = kMaxBlockPages * kPageSize;

AlignedBuffer AllocAligned(std::size_t bytes) {
  AlignedBuffer b(static_cast<std::byte*>(std::aligned_alloc(kPageSize, bytes)));
  if (b != nullptr) std::memset(b.get(), 0, bytes);
  return b;
}

// `t`'s block device opened O_DIRECT; none (-1) for a Device.
Result<platform::UniqueFd> OpenDirect(const IoTarget& t, bool writes) {
  if (t.device != nullptr) return platform::UniqueFd();
  const int fd = ::open(t.path.c_str(),
                        (writes ? O_WRONLY : O_RDONLY) | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return Err(PosixError("open " + t.path + " O_DIRECT", errno));
  return platform::UniqueFd(fd);
}

// An IO of `want` bytes on `path` that returned `n` (errno `err` if < 0).
Status IoStatus(long n, std::size_t want, const std::string& path, int err) {
  if (n == static_cast<long>(want)) return Status::Ok();
  return n < 0 ? PosixError("IO on " + path, err)
               : Status::IoError("short IO on " + path + ": " +
                                 std::to_string(n) + " of " +
                                 std::to_string(want) + " bytes");
}

// One synchronous IO at `off` on t.device, else on `fd`: a write of `src`,
// or (null) a read into `out`.
Status SyncIo(const IoTarget& t, int fd, std::uint64_t off,
              const std::byte* src, std::span<std::byte> out) {
  if (Device* d = t.device) {
    return src != nullptr ? d->Write(off, {src, out.size()})
                          : d->Read(off, out);
  }
  const auto at = static_cast<off_t>(off);
  const ssize_t n = src != nullptr ? ::pwrite(fd, src, out.size(), at)
                                   : ::pread(fd, out.data(), out.size(), at);
  return IoStatus(n, out.size(), t.path, errno);
}

// The byte offsets one thread visits (see the header); Next() is false
// once a one-pass sequence ends.
struct Blocks {
  Blocks(const IoPattern& p, std::size_t t)
      : first(t * ShareBytes(p)), size(p.block_bytes),
        count(ShareBytes(p) / p.block_bytes), random(p.random && p.seconds > 0),
        once(p.seconds <= 0), rng(t + 1) {}
  bool Next(std::uint64_t* off) {
    if (once && next == count) return false;
    std::uint64_t b = next++ % count;
    if (random) {  // splitmix64
      std::uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      b = (z ^ (z >> 31)) % count;
    }
    *off = first + b * size;
    return true;
  }
  const std::uint64_t first, size, count;
  const bool random, once;
  std::uint64_t rng, next = 0;
};

// Called by a worker once set up: waits for the others, then returns the
// deadline (time_point::max() for one pass).
using Start = std::function<Clock::time_point()>;

Status SyncWorker(const IoTarget& t, const IoPattern& p,
                  const DataPages& data, std::size_t thread,
                  const Start& start, std::uint64_t& ops) {
  ZT_ASSIGN_OR_RETURN(const platform::UniqueFd fd, OpenDirect(t, p.writes));
  AlignedBuffer buffer = AllocAligned(p.block_bytes);
  if (buffer == nullptr) return Status::ResourceExhausted("read buffer");
  Blocks blocks(p, thread);
  const Clock::time_point deadline = start();
  for (std::uint64_t off;
       (ops == 0 || Clock::now() < deadline) && blocks.Next(&off); ++ops) {
    ZT_RETURN_IF_ERROR(
        SyncIo(t, fd.get(), off,
               p.writes ? data.ForAreaPage(off / kPageSize) : nullptr,
               {buffer.get(), p.block_bytes}));
  }
  return Status::Ok();
}

// Keeps p.depth IOs in flight: submit, wait for one, reap all, resubmit.
Status UringWorker(const IoTarget& t, const IoPattern& p,
                   const DataPages& data, std::size_t thread,
                   const Start& start, std::uint64_t& ops) {
  ZT_ASSIGN_OR_RETURN(const platform::UniqueFd fd, OpenDirect(t, p.writes));
  io_uring ring;
  if (const int r = io_uring_queue_init(p.depth, &ring, 0); r < 0) {
    return PosixError("io_uring_queue_init", -r);
  }
  const std::unique_ptr<io_uring, void (*)(io_uring*)> exit(
      &ring, io_uring_queue_exit);
  AlignedBuffer buffers = AllocAligned(std::size_t{p.depth} * p.block_bytes);
  if (buffers == nullptr) return Status::ResourceExhausted("read buffers");
  Blocks blocks(p, thread);
  std::size_t in_flight = 0;
  const auto queue = [&](std::uint64_t slot) {  // false: the sequence ended
    std::uint64_t off;
    if (!blocks.Next(&off)) return false;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (p.writes) {
      io_uring_prep_write(sqe, fd.get(), data.ForAreaPage(off / kPageSize),
                          p.block_bytes, off);
    } else {
      io_uring_prep_read(sqe, fd.get(), buffers.get() + slot * p.block_bytes,
                         p.block_bytes, off);
    }
    io_uring_sqe_set_data64(sqe, slot);
    ++in_flight;
    return true;
  };
  const Clock::time_point deadline = start();
  for (std::uint64_t slot = 0; slot < p.depth && queue(slot); ++slot) {
  }
  Status status;
  while (in_flight > 0) {
    if (const int r = io_uring_submit_and_wait(&ring, 1); r < 0 && r != -EINTR) {
      return PosixError("io_uring_submit_and_wait on " + t.path, -r);
    }
    io_uring_cqe* cqe;
    while (io_uring_peek_cqe(&ring, &cqe) == 0) {
      const std::uint64_t slot = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      --in_flight;
      if (status.ok()) status = IoStatus(res, p.block_bytes, t.path, -res);
      if (!status.ok()) continue;  // drain what is in flight, then fail
      ++ops;
      if (Clock::now() < deadline) queue(slot);
    }
  }
  return status;
}

}  // namespace

Result<DataPages> DataPages::From(std::span<const corpus::PageSet* const> sets,
                                  std::size_t max_pages_each) {
  const auto take = [&](const corpus::PageSet* s) {
    return max_pages_each == 0 ? s->size() : std::min(s->size(), max_pages_each);
  };
  std::size_t total = 0;
  for (const corpus::PageSet* s : sets) total += take(s);
  total -= total % kMaxBlockPages;
  if (total == 0) {
    return Err(Status::InvalidArgument(
        "the corpus pages make less than one 128 KiB block"));
  }
  DataPages d;
  d.bytes_ = AllocAligned(total * kPageSize);
  if (d.bytes_ == nullptr) return Err(Status::ResourceExhausted("data pages"));
  for (const corpus::PageSet* s : sets) {
    const std::size_t n = std::min(take(s), total - d.count_);
    std::memcpy(d.bytes_.get() + d.count_ * kPageSize, s->bytes().data(),
                n * kPageSize);
    d.count_ += n;
  }
  return d;
}

std::uint64_t ShareBytes(const IoPattern& p) {
  return p.threads == 0 ? 0 : p.area_bytes / p.threads / kBlock * kBlock;
}

IoPattern PatternFor(const bench::NbdJob& job, std::size_t threads,
                     std::uint64_t area_bytes, std::int64_t seconds) {
  return {.random = job.rw.starts_with("rand"), .writes = job.writes,
          .block_bytes = job.block_size, .depth = job.iodepth,
          .threads = threads, .area_bytes = area_bytes,
          .seconds = static_cast<double>(seconds)};
}

Result<IoResult> RunIo(const IoTarget& t, const IoPattern& p,
                       const DataPages& data) {
  if (p.threads == 0 || p.depth == 0 || p.block_bytes == 0 ||
      p.block_bytes % kPageSize != 0 || p.block_bytes > kBlock ||
      p.area_bytes % kBlock != 0 || ShareBytes(p) == 0) {
    return Err(Status::InvalidArgument(
        "IO pattern: threads and depth >= 1, a block of whole pages up to "
        "128 KiB, an area of whole 128 KiB blocks, at least one per thread"));
  }
  const auto worker = t.device != nullptr || p.sync ? SyncWorker : UringWorker;
  std::latch ready(static_cast<std::ptrdiff_t>(p.threads)), go(1);
  Clock::time_point begin, deadline = Clock::time_point::max();
  std::vector<Status> statuses(p.threads);
  std::vector<std::uint64_t> ops(p.threads, 0);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < p.threads; ++i) {
    threads.emplace_back([&, i] {
      bool waited = false;
      const Start start = [&] {
        waited = true;
        ready.count_down();
        go.wait();
        return deadline;
      };
      statuses[i] = worker(t, p, data, i, start, ops[i]);
      if (!waited) ready.count_down();
    });
  }
  ready.wait();
  begin = Clock::now();
  if (p.seconds > 0) {
    deadline = begin + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(p.seconds));
  }
  go.count_down();
  for (std::thread& th : threads) th.join();
  IoResult r{.seconds =
                 std::chrono::duration<double>(Clock::now() - begin).count()};
  for (std::size_t i = 0; i < p.threads; ++i) {
    if (!statuses[i].ok()) return Err(statuses[i]);
    r.ops += ops[i];
  }
  r.bytes = r.ops * p.block_bytes;
  return r;
}

Status VerifyArea(const IoTarget& t, std::uint64_t area_bytes,
                  const DataPages& data, std::uint64_t stride) {
  ZT_ASSIGN_OR_RETURN(const platform::UniqueFd fd, OpenDirect(t, false));
  AlignedBuffer page = AllocAligned(kPageSize);
  if (page == nullptr) return Status::ResourceExhausted("verify buffer");
  for (std::uint64_t p = 0; p < area_bytes / kPageSize; p += stride) {
    ZT_RETURN_IF_ERROR(
        SyncIo(t, fd.get(), p * kPageSize, nullptr, {page.get(), kPageSize}));
    if (std::memcmp(page.get(), data.ForAreaPage(p), kPageSize) != 0) {
      return Status::Corruption("page " + std::to_string(p) +
                                " reads back different from what was "
                                "written");
    }
  }
  return Status::Ok();
}

std::vector<std::string> FioArgs(const std::string& fio_path,
                                 const bench::NbdJob& job, std::size_t threads,
                                 std::uint64_t area_bytes, std::int64_t seconds,
                                 const std::string& uri,
                                 const std::string& dev) {
  const std::uint64_t share =
      ShareBytes(PatternFor(job, threads, area_bytes, seconds));
  std::vector<std::string> argv =
      bench::FioJobArgs(fio_path, job, uri, share, seconds);
  argv.push_back("--numjobs=" + std::to_string(threads));
  argv.push_back("--offset_increment=" + std::to_string(share));
  if (dev.empty()) return argv;
  for (std::string& a : argv) {
    if (a == "--ioengine=nbd") a = "--ioengine=io_uring";
    if (a.starts_with("--uri=")) a = "--filename=" + dev;
  }
  argv.push_back("--direct=1");
  return argv;
}

}  // namespace ztier::tool
