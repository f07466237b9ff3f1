// File: tools/ztier/usemem_run.cc
//
// One run of `ztier usemem` (usemem_run.h): the region, the worker threads
// and their three timed passes.
#include "usemem_run.h"

#include <cassert>
#include <chrono>
#include <cstring>
#include <latch>
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

// Odd and different in every byte, so that a page of one worker read in
// another's place, or a word left unwritten, cannot match.
std::uint64_t Key(std::size_t worker) {
  return 0x9E3779B97F4A7C15ull * (2 * worker + 1);
}

// Worker `index`: its slice at `base` (`pages` pages), the passes of
// usemem_run.h. The region's memory has no declared type; the workers only
// ever access it as uint64_t (after the fill's memcpy).
void RunWorker(std::size_t index, std::byte* base, std::size_t pages,
               const corpus::PageSet& corpus, double sleep_seconds,
               std::latch& start, UsememWorkerResult& out) {
  const std::uint64_t key = Key(index);
  start.arrive_and_wait();
  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < pages; ++i) {
    std::memcpy(base + i * kPageSize, corpus.page(i % corpus.size()).data(),
                kPageSize);
  }
  const Clock::time_point t1 = Clock::now();
  std::uint64_t* w = reinterpret_cast<std::uint64_t*>(base);
  for (std::size_t i = 0; i < pages * kWordsPerPage; ++i) w[i] += key;
  const Clock::time_point t2 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(sleep_seconds));
  // Counted in locals: the workers' results sit side by side in memory.
  std::uint64_t mismatched = 0;
  const Clock::time_point t3 = Clock::now();
  for (std::size_t i = 0; i < pages; ++i) {
    const std::uint64_t* pw = w + i * kWordsPerPage;
    const ConstPage src = corpus.page(i % corpus.size());
    std::uint64_t diff = 0;
    for (std::size_t j = 0; j < kWordsPerPage; ++j) {
      diff |= pw[j] ^ (CorpusWord(src, j) + key);
    }
    if (diff == 0) continue;
    ++mismatched;
    for (std::size_t j = 0; j < kWordsPerPage; ++j) {
      const std::uint64_t want = CorpusWord(src, j) + key;
      if (pw[j] == want) continue;
      if (out.mismatches.size() < UsememWorkerResult::kMaxReported) {
        out.mismatches.push_back({index, i, j, pw[j], want});
      }
      break;
    }
  }
  const Clock::time_point t4 = Clock::now();
  out.pages_verified = pages;
  out.mismatched = mismatched;
  out.fill_seconds = Seconds(t0, t1);
  out.write_seconds = Seconds(t1, t2);
  out.read_seconds = Seconds(t3, t4);
  const double busy = out.fill_seconds + out.write_seconds + out.read_seconds;
  out.kb_s =
      busy > 0 ? static_cast<double>(pages * kPageSize) / 1024 / busy : 0;
}

}  // namespace

Result<UsememRunResult> RunUsememOnce(const UsememRunConfig& config,
                                      const corpus::PageSet& corpus) {
  assert(config.workers > 0 && config.worker_bytes % kPageSize == 0 &&
         config.worker_bytes > 0 && corpus.size() > 0);
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
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Region> region, Region::Create(o));
  UsememRunResult r{.batched = config.batched,
                    .workers = std::vector<UsememWorkerResult>(config.workers)};
  std::latch start(static_cast<std::ptrdiff_t>(config.workers));
  {
    std::vector<std::jthread> threads;
    for (std::size_t w = 0; w < config.workers; ++w) {
      threads.emplace_back(
          RunWorker, w, region->data() + w * config.worker_bytes,
          config.worker_bytes / kPageSize, std::cref(corpus),
          config.sleep_seconds, std::ref(start), std::ref(r.workers[w]));
    }
  }  // joined
  r.stats = region->Stats();
  const Clock::time_point free_start = Clock::now();
  region.reset();
  r.free_usecs = Seconds(free_start, Clock::now()) * 1e6;
  for (const UsememWorkerResult& w : r.workers) {
    r.total_kb_s += w.kb_s;
    r.pages_verified += w.pages_verified;
    r.mismatches += w.mismatched;
  }
  r.avg_kb_s = r.total_kb_s / static_cast<double>(r.workers.size());
  return r;
}

}  // namespace ztier::tool
