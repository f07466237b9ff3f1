// File: tools/ztier/writeback_run.cc
//
// One measurement of `ztier bench writeback` (see writeback_run.h).
#include "writeback_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "bench_fio.h"
#include "bench_proc.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kFillChunkPages = 256;

BdStat GetBdStat(const PageStoreStats& s) {
  return {.count = s.bd_count, .reads = s.bd_reads, .writes = s.bd_writes};
}

// Deletes `path`; a missing file is fine.
Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return PosixError("unlink " + path, errno);
  }
  return Status::Ok();
}

// Deletes the file when it goes out of scope (also on error).
class FileRemover {
 public:
  explicit FileRemover(std::string path) : path_(std::move(path)) {}
  ~FileRemover() { ::unlink(path_.c_str()); }
  FileRemover(const FileRemover&) = delete;
  FileRemover& operator=(const FileRemover&) = delete;

 private:
  std::string path_;
};

// Slot i holds corpus page i % corpus.size(), stored in runs of consecutive
// corpus pages.
Status Fill(PageStore& store, const corpus::PageSet& corpus) {
  const std::uint64_t n = store.num_pages();
  for (std::uint64_t slot = 0; slot < n;) {
    const std::size_t first = slot % corpus.size();
    const std::size_t count = static_cast<std::size_t>(std::min<std::uint64_t>(
        {n - slot, corpus.size() - first, kFillChunkPages}));
    Status s = store.StoreBatch(
        slot, corpus.bytes().subspan(first * kPageSize, count * kPageSize));
    if (!s.ok()) {
      return Status(s.code(), "filling slots " + std::to_string(slot) + ".." +
                                  std::to_string(slot + count - 1) + ": " +
                                  s.message());
    }
    slot += count;
  }
  return Status::Ok();
}

// Times one writeback of every idle slot; an error unless all went.
Status TimedWriteback(PageStore& store, const WritebackRunConfig& config,
                      WritebackSample* out) {
  const WritebackRequest request{
      .scans = {{kWritebackIdle, 0, store.num_pages()}},
      .in_flight = config.in_flight,
      .max_io_pages = config.max_io_pages,
      .compressed = config.compressed};
  const auto t0 = Clock::now();
  Result<WritebackResult> r = store.Writeback(request);
  out->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!r.has_value()) {
    return Status(r.error().code(), "writeback: " + r.error().message());
  }
  out->candidates = r->candidates;
  out->written = r->written;
  if (r->candidates == 0) {
    return Status::InvalidArgument(
        "writeback found no page to write: every corpus page is "
        "same-filled (kept as one word, never written back)");
  }
  if (!r->status.ok() || r->written != r->candidates) {
    return Status::IoError(
        "writeback (in_flight " + std::to_string(config.in_flight) +
        ", max_io_pages " + std::to_string(config.max_io_pages) + ") wrote " +
        std::to_string(r->written) + " of " + std::to_string(r->candidates) +
        " candidate pages (changed " + std::to_string(r->changed) +
        ", failed " + std::to_string(r->failed) + "): " + r->status.ToString());
  }
  out->mb_s = out->seconds > 0 ? static_cast<double>(out->written) * kPageSize /
                                     out->seconds / 1e6
                               : 0;
  return Status::Ok();
}

// Reads back every stride-th slot and compares it with its corpus page.
Status Verify(PageStore& store, const corpus::PageSet& corpus,
              std::size_t stride, WritebackSample* out) {
  alignas(kPageSize) std::byte page[kPageSize];
  for (std::uint64_t slot = 0; slot < store.num_pages(); slot += stride) {
    const bool wb = store.Inspect(slot).wb;
    if (Status s = store.Load(slot, MutablePage(page, kPageSize)); !s.ok()) {
      return Status(s.code(), "reading back slot " + std::to_string(slot) +
                                  " after writeback: " + s.message());
    }
    const std::size_t want = slot % corpus.size();
    if (std::memcmp(page, corpus.page(want).data(), kPageSize) != 0) {
      return Status::Corruption("slot " + std::to_string(slot) +
                                (wb ? " (written back)" : "") +
                                " reads back different from corpus page " +
                                std::to_string(want) + " it was filled with");
    }
    ++out->verified;
    out->verified_from_disk += wb;
  }
  return Status::Ok();
}

}  // namespace

Result<WritebackSample> RunStoreWriteback(const WritebackRunConfig& config,
                                          const corpus::PageSet& corpus,
                                          const PhaseFn& phase) {
  if (corpus.size() == 0) return Err(Status::InvalidArgument("empty corpus"));
  ZT_RETURN_IF_ERROR(RemoveFile(config.image_path));
  FileRemover remover(config.image_path);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<BackingStore> backing,
                      BackingStore::Open({.path = config.image_path,
                                          .size_bytes = config.size_bytes}));
  WritebackSample out;
  out.direct = backing->direct();
  PageStoreOptions options;
  options.num_pages = config.size_bytes / kPageSize;
  options.codec = config.codec;
  options.backing = std::move(backing);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store,
                      PageStore::Create(options));
  out.slots = store->num_pages();

  phase("fill");
  ZT_RETURN_IF_ERROR(Fill(*store, corpus));
  store->MarkIdleAll();
  const PageStoreStats before = store->Stats();
  out.bd_before = GetBdStat(before);
  out.mem_used_before = before.mem_used_total;

  phase("writeback");
  ZT_RETURN_IF_ERROR(TimedWriteback(*store, config, &out));
  const PageStoreStats after = store->Stats();
  out.bd_after = GetBdStat(after);
  out.mem_used_after = after.mem_used_total;

  phase("verify");
  ZT_RETURN_IF_ERROR(Verify(*store, corpus, config.verify_stride, &out));
  return out;
}

std::vector<std::string> FioSeqWriteArgs(const FioRunConfig& config) {
  return {config.fio_path,
          "--name=seqwrite",
          "--filename=" + config.file_path,
          "--size=" + std::to_string(config.size_bytes),
          "--rw=write",
          "--bs=128k",
          "--ioengine=io_uring",
          "--direct=1",
          "--iodepth=32",
          "--output-format=json"};
}

Result<FioSample> RunFioSeqWrite(const FioRunConfig& config) {
  ZT_RETURN_IF_ERROR(RemoveFile(config.file_path));
  FileRemover remover(config.file_path);
  const std::string out = config.scratch_dir + "/fio.json";
  const std::string err = config.scratch_dir + "/fio.err";
  FileRemover out_remover(out);
  FileRemover err_remover(err);
  const std::vector<std::string> argv = FioSeqWriteArgs(config);
  // At least 1 MB/s, plus two minutes for fio's start and layout.
  const std::chrono::milliseconds timeout(120'000 + config.size_bytes / 1000);
  auto e = bench::RunToCompletion(
      argv, {.cwd = config.scratch_dir, .stdout_path = out, .stderr_path = err},
      timeout);
  if (!e.has_value()) return Err(e.error());
  if (!e->ok()) {
    return Err(Status::IoError(bench::CommandLine(argv) + ": " +
                               e->Describe() + "; stderr:\n" +
                               bench::ReadFileText(err, 4096)));
  }
  auto fig = bench::ParseFioJson(bench::ReadFileText(out));
  if (!fig.has_value()) {
    return Err(Status::Corruption(bench::CommandLine(argv) + ": " +
                                  fig.error().message()));
  }
  if (fig->error != 0 || fig->write.bw_bytes <= 0) {
    return Err(Status::IoError(
        bench::CommandLine(argv) + ": fio job error " +
        std::to_string(fig->error) + " (write bw " +
        std::to_string(fig->write.bw_bytes) + " B/s); stderr:\n" +
        bench::ReadFileText(err, 4096)));
  }
  FioSample s;
  s.bw_bytes = fig->write.bw_bytes;
  s.mb_s = s.bw_bytes / 1e6;
  s.io_bytes =
      fig->write.io_bytes != 0 ? fig->write.io_bytes : config.size_bytes;
  s.seconds = static_cast<double>(s.io_bytes) / s.bw_bytes;
  return s;
}

}  // namespace ztier::tool
