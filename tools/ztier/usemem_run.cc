// File: tools/ztier/usemem_run.cc
//
// One run of `ztier usemem` (usemem_run.h): the region, the worker threads
// and their three timed passes.
#include "usemem_run.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <thread>

#include "ztier/page.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kWordsPerPage = kPageSize / sizeof(std::uint64_t);

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Word j of a corpus page, read without assuming its alignment.
std::uint64_t CorpusWord(ConstPage page, std::size_t j) {
  std::uint64_t v;
  std::memcpy(&v, page.data() + j * sizeof(v), sizeof(v));
  return v;
}

// Mismatches found by the workers, the first few kept for the report.
class MismatchLog {
 public:
  void Add(const UsememMismatch& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.size() < UsememRunResult::kMaxReported) first_.push_back(m);
  }
  std::vector<UsememMismatch> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::sort(first_.begin(), first_.end(),
              [](const UsememMismatch& a, const UsememMismatch& b) {
                return a.worker != b.worker ? a.worker < b.worker
                                            : a.page < b.page;
              });
    return std::move(first_);
  }

 private:
  std::mutex mu_;
  std::vector<UsememMismatch> first_;
};

struct WorkerArgs {
  std::size_t index = 0;
  std::byte* base = nullptr;  // the worker's slice
  std::size_t pages = 0;
  const corpus::PageSet* corpus = nullptr;
  double sleep_seconds = 0;
  std::latch* start = nullptr;
  MismatchLog* log = nullptr;
  UsememWorkerResult* out = nullptr;
};

// The region's memory as 8-byte words. The mapping has no declared type;
// the workers only ever access it as uint64_t (after the fill's memcpy).
std::uint64_t* Words(std::byte* p) {
  return reinterpret_cast<std::uint64_t*>(p);
}

void RunWorker(const WorkerArgs& a) {
  const corpus::PageSet& corpus = *a.corpus;
  const std::size_t corpus_pages = corpus.size();
  const std::uint64_t key = UsememKey(a.index);
  a.start->arrive_and_wait();

  // fill: from the pre-loaded corpus, page after page.
  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < a.pages; ++i) {
    std::memcpy(a.base + i * kPageSize, corpus.page(i % corpus_pages).data(),
                kPageSize);
  }
  // write: every 8-byte word.
  const Clock::time_point t1 = Clock::now();
  std::uint64_t* w = Words(a.base);
  const std::size_t words = a.pages * kWordsPerPage;
  for (std::size_t i = 0; i < words; ++i) w[i] += key;
  const Clock::time_point t2 = Clock::now();

  std::this_thread::sleep_for(std::chrono::duration<double>(a.sleep_seconds));

  // read: every word, each page compared with what it must hold.
  // Counted in locals: the workers' results sit side by side in memory.
  std::uint64_t verified = 0;
  std::uint64_t mismatches = 0;
  const Clock::time_point t3 = Clock::now();
  for (std::size_t i = 0; i < a.pages; ++i) {
    const std::uint64_t* pw = w + i * kWordsPerPage;
    const ConstPage src = corpus.page(i % corpus_pages);
    std::uint64_t diff = 0;
    for (std::size_t j = 0; j < kWordsPerPage; ++j) {
      diff |= pw[j] ^ (CorpusWord(src, j) + key);
    }
    ++verified;
    if (diff == 0) continue;
    ++mismatches;
    for (std::size_t j = 0; j < kWordsPerPage; ++j) {
      const std::uint64_t want = CorpusWord(src, j) + key;
      if (pw[j] != want) {
        a.log->Add({.worker = a.index,
                    .page = i,
                    .word = j,
                    .got = pw[j],
                    .want = want});
        break;
      }
    }
  }
  const Clock::time_point t4 = Clock::now();

  UsememWorkerResult& out = *a.out;
  out.pages_verified = verified;
  out.mismatches = mismatches;
  out.fill_seconds = Seconds(t0, t1);
  out.write_seconds = Seconds(t1, t2);
  out.read_seconds = Seconds(t3, t4);
  const double busy = out.fill_seconds + out.write_seconds + out.read_seconds;
  const double bytes = static_cast<double>(a.pages * kPageSize);
  out.kb_s = busy > 0 ? bytes / 1024.0 / busy : 0;
}

}  // namespace

RegionOptions UsememRegionOptions(const UsememRunConfig& config) {
  RegionOptions o;
  o.size = config.workers * config.worker_bytes;
  o.budget = config.budget_bytes;
  o.codec = config.codec;
  o.max_pool_percent = config.max_pool_percent;
  o.page_cluster = config.page_cluster;
  o.batch_backend =
      config.batched ? BatchBackend::kParallel : BatchBackend::kSerial;
  o.batch_size = kMaxBatchSize;
  o.batch_stores = config.batched;
  return o;
}

std::uint64_t UsememKey(std::size_t worker) {
  // Odd and different in every byte, so a page of one worker read in
  // another's place, or a word left unwritten, cannot match.
  return 0x9E3779B97F4A7C15ull * (2 * worker + 1);
}

Result<UsememRunResult> RunUsememOnce(const UsememRunConfig& config,
                                      const corpus::PageSet& corpus) {
  assert(config.workers > 0 && config.worker_bytes % kPageSize == 0 &&
         config.worker_bytes > 0 && corpus.size() > 0);
  const Clock::time_point created = Clock::now();
  auto region = Region::Create(UsememRegionOptions(config));
  if (!region.has_value()) return Err(region.error());

  UsememRunResult r;
  r.batched = config.batched;
  r.workers.resize(config.workers);
  MismatchLog log;
  std::latch start(static_cast<std::ptrdiff_t>(config.workers));
  {
    std::vector<std::jthread> threads;
    threads.reserve(config.workers);
    for (std::size_t w = 0; w < config.workers; ++w) {
      WorkerArgs args{.index = w,
                      .base = (*region)->data() + w * config.worker_bytes,
                      .pages = config.worker_bytes / kPageSize,
                      .corpus = &corpus,
                      .sleep_seconds = config.sleep_seconds,
                      .start = &start,
                      .log = &log,
                      .out = &r.workers[w]};
      threads.emplace_back([args] { RunWorker(args); });
    }
  }  // joined

  r.stats = (*region)->Stats();
  const Clock::time_point free_start = Clock::now();
  region->reset();
  const Clock::time_point freed = Clock::now();
  r.free_usecs = Seconds(free_start, freed) * 1e6;
  r.wall_seconds = Seconds(created, freed);

  for (const UsememWorkerResult& w : r.workers) {
    r.total_kb_s += w.kb_s;
    r.pages_verified += w.pages_verified;
    r.mismatches += w.mismatches;
  }
  r.avg_kb_s = r.total_kb_s / static_cast<double>(r.workers.size());
  r.first_mismatches = log.Take();
  return r;
}

}  // namespace ztier::tool
