// writeback.cc: the PageStore's writeback pass and its reads of written-back
// slots (contract in include/ztier/page_store.h, "writeback").
//
// A pass, after zram's writeback_store() and the zram writeback batching
// series (docs/references.md):
//   1. Select: each scan walks its slots; an eligible slot is marked PP under
//      its lock and bucketed by compressed size (64-byte buckets). Any access
//      clears PP, so PP means "unchanged since it was picked".
//   2. Fill and submit, a group at a time: for every IO the writer has room
//      for, reserve a run of blocks (BackingStore::AllocRange, up to
//      max_io_pages), and for each block take the next candidate, largest
//      first: under its lock, recheck PP, charge the budget and copy the
//      slot out (the page, or the compressed object with `compressed`).
//      Objects to decompress are copied raw under the lock; the whole group
//      is decompressed after, fanned out over worker threads, and its IOs
//      go to the kernel in one system call. Blocks a run did not use are
//      freed. A new group starts once a quarter of the IOs have completed.
//   3. Complete: for each block, relock its slot. PP still set: free the RAM
//      copy and make the slot WB (value = block). PP gone (stored, discarded
//      or read meanwhile): keep the slot, free the block. IO error: keep the
//      slot, free the block, refund the budget.
//   4. Candidates never reached (budget spent, backing store full) lose PP.
// The pass runs on the caller's thread, with the IO asynchronous (io_uring),
// so copying one batch overlaps the disk writing the previous ones.
#include <algorithm>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "page_store_impl.h"

namespace ztier {
namespace {

// Pages one refill copies out and decompresses together, at most (4 MiB of
// scratch for the raw objects).
constexpr std::size_t kMaxGroupPages = 1024;

// Slots any scan may pick, before its filter.
bool WritebackEligible(std::uint32_t f) {
  return Allocated(f) &&
         !(f & (slot::kSame | slot::kWb | slot::kPp | slot::kUnit));
}

bool PassesFilter(std::uint32_t f, unsigned filter) {
  if ((filter & kWritebackIdle) && !(f & slot::kIdle)) return false;
  if ((filter & kWritebackHuge) && !(f & slot::kHuge)) return false;
  if ((filter & kWritebackIncompressible) && !(f & slot::kIncompressible)) {
    return false;
  }
  return true;
}

// A pass's use of the device's budget (WritebackBudget): it charges what
// the budget holds, and gives back only while the budget keeps the setting
// the pass began with, so a value written during the pass is not raised by
// the pass's refunds (they are dropped instead: the conservative side).
class BudgetUse {
 public:
  explicit BudgetUse(WritebackBudget* budget) : budget_(budget) {
    if (budget_ != nullptr) {
      std::lock_guard l(budget_->mu);
      setting_ = budget_->setting;
    }
  }

  // Takes `n` pages, all or none: false when the limit is on and fewer
  // are left. Lock-free: a Set meanwhile replaces the value either before
  // or after the charge, and either is the budget from then on.
  bool Charge(std::uint64_t n = 1) {
    if (budget_ == nullptr ||
        !budget_->enabled.load(std::memory_order_relaxed)) {
      return true;
    }
    std::uint64_t left = budget_->pages.load(std::memory_order_relaxed);
    do {
      if (left < n) return false;
    } while (!budget_->pages.compare_exchange_weak(left, left - n,
                                                   std::memory_order_relaxed));
    return true;
  }

  // Gives back `n` pages this pass charged.
  void Refund(std::uint64_t n = 1) noexcept {
    if (budget_ == nullptr) return;
    std::lock_guard l(budget_->mu);
    if (budget_->setting == setting_ &&
        budget_->enabled.load(std::memory_order_relaxed)) {
      budget_->pages.fetch_add(n, std::memory_order_relaxed);
    }
  }

 private:
  WritebackBudget* const budget_;  // null: no limit
  std::uint64_t setting_ = 0;      // the budget's setting at the start
};

// bs.AllocRange, and when no block is free, once more after sending the
// discards of the blocks freed since the pass began: on a file that takes
// discards (a remote) a freed block waits for its TRIM's answer, and the
// store is not full while blocks_used() says it has room. Call it holding
// no slot lock (DiscardFreed may wait on the network).
std::uint64_t AllocOrDiscard(BackingStore& bs, std::size_t want,
                             std::size_t* got) {
  const std::uint64_t first = bs.AllocRange(want, got);
  if (*got != 0 || bs.DiscardFreed() == 0) return first;
  return bs.AllocRange(want, got);
}

// Empty waiting reaps in a row ReapAll tries again after.
constexpr int kMaxEmptyReaps = 8;

// For a pass that gives its IOs back: reaps `writer` until none of its IOs
// is in flight, each block to `done` (which must not throw). A waiting
// Reap that reports nothing, or throws (std::bad_alloc), is no end of the
// writes: the io_uring writer's wait refused for want of memory
// (platform/uring_writer.cc), whose writes still end. Such a reap is tried
// again after a pause, 1 ms doubling, up to kMaxEmptyReaps in a row (255
// ms in all). Returns whether every IO was reaped.
template <typename Fn>
bool ReapAll(BlockWriter& writer, Fn&& done) noexcept {
  int empty = 0;
  while (writer.in_flight() != 0) {
    try {
      if (writer.Reap(/*wait=*/true, done) != 0) {
        empty = 0;
        continue;
      }
    } catch (...) {
    }
    if (empty == kMaxEmptyReaps) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << empty));
    ++empty;
  }
  return true;
}

// A 4096-aligned page for reading compressed blocks.
std::byte* AlignedScratch() {
  alignas(kPageSize) thread_local std::byte page[kPageSize];
  return page;
}

}  // namespace

Status PageStore::Impl::LoadWrittenBack(std::uint64_t index, std::uint32_t f,
                                        std::uint64_t b, std::byte* out) {
  Add(bd_reads);
  if (!(f & slot::kWbCompressed)) {
    return options.backing->ReadBlock(b, MutablePage(out, kPageSize));
  }
  std::byte* block = AlignedScratch();
  ZT_RETURN_IF_ERROR(
      options.backing->ReadBlock(b, MutablePage(block, kPageSize)));
  const std::size_t len = f & slot::kSizeMask;
  Status st = LocalDecompressor(CodecOf(f)).Decompress(
      std::span<const std::byte>(block, len),
      std::span<std::byte>(out, kPageSize));
  if (!st.ok()) {
    return DecompressError(std::move(st),
                           "slot " + std::to_string(index) +
                               " (written back, block " + std::to_string(b) +
                               ")");
  }
  return st;
}

namespace internal {

// One pass's state; lives on the caller's stack.
class WritebackPass {
 public:
  WritebackPass(PageStore::Impl& m, const WritebackRequest& req,
                BlockWriter& writer, WorkerPool* workers)
      : m_(m),
        req_(req),
        budget_(req.budget),
        writer_(writer),
        workers_(workers),
        scratch_pages_(std::max(
            writer.max_io_blocks(),
            std::min<std::size_t>(req.in_flight * writer.max_io_blocks(),
                                  kMaxGroupPages))),
        scratch_(new std::byte[scratch_pages_ * kPageSize]) {
    group_.reserve(req.in_flight);  // never more IOs begun at once
  }
  // A pass an exception (std::bad_alloc) ended early:
  //  - the blocks of its IOs go back: those begun and not submitted
  //    unwritten, those in flight as they complete (not installed), each
  //    refunded to the budget; else they would stay allocated, counted in
  //    bd_count until a reset, and a device that ran out of memory often
  //    enough would find its backing store full. (WritebackUnits gives its
  //    own IOs back before it lets an exception through; while it runs, the
  //    pages' IOs are all reaped.)
  //  - the candidates it (or the units' pass after it) marked PP lose the
  //    mark, or no later pass would pick them again (WritebackEligible) and
  //    cold pages would stay in RAM for good.
  ~WritebackPass() {
    if (finished_) return;
    GiveBackBlocks();
    for (const WritebackScan& scan : req_.scans) {
      m_.ClearPassMarks(scan.lo, scan.hi);
    }
  }
  WritebackPass(const WritebackPass&) = delete;
  WritebackPass& operator=(const WritebackPass&) = delete;

  // The whole pass (Run and the units after it) returned: nothing for the
  // destructor to undo.
  void Finished() { finished_ = true; }

  // Whether the pass ended early: the budget spent, or no room left on the
  // backing store. One failed write does not stop it.
  bool stopped() const { return stopped_; }

  // Step 1: marks candidates PP and orders them largest first.
  void Select() {
    store_detail::LargestFirst picked;
    for (const WritebackScan& scan : req_.scans) {
      for (std::uint64_t i = scan.lo; i < scan.hi; ++i) {
        Slot& s = m_.slots[i];
        if (!WritebackEligible(s.flags.load(std::memory_order_relaxed))) {
          continue;
        }
        SlotLock lock(s);
        const std::uint32_t f = SlotTable::Flags(s);
        if (!WritebackEligible(f) || !PassesFilter(f, scan.filter)) continue;
        SlotTable::SetFlags(s, slot::kPp);
        picked.Add(i, f);
      }
    }
    order_ = picked.Order();
    result_.candidates = order_.size();
  }

  // Steps 2-4.
  WritebackResult Run() {
    const auto done = [this](const BlockWriter::Done& d) { Complete(d); };
    // Refill only once a quarter of the IOs are free, so that each refill
    // (its fan-out and its system call) covers several IOs while the rest
    // keep the disk busy.
    const std::size_t refill_at =
        req_.in_flight - std::max<std::size_t>(1, req_.in_flight / 4);
    for (;;) {
      FillGroup();
      if (writer_.in_flight() == 0) break;
      do {
        writer_.Reap(/*wait=*/true, done);
      } while (writer_.in_flight() > refill_at && MoreToDo());
    }
    // Step 4.
    for (; next_ < order_.size(); ++next_) {
      Slot& s = m_.slots[order_[next_]];
      SlotLock lock(s);
      SlotTable::ClearFlags(s, slot::kPp);
    }
    reaped_ = true;
    return std::move(result_);
  }

 private:
  // One candidate copied out: where its bytes went and what they are.
  struct Copy {
    std::uint64_t index;
    std::span<std::byte> block;
    bool decompress;     // the object is in the scratch: decompress it
    std::size_t length;  // object length (when decompress)
    const Codec* codec;  // what it was made with (when decompress)
  };

  bool MoreToDo() const { return !stopped_ && next_ < order_.size(); }

  // Step 2 for every IO the writer has room for: copy out, decompress all
  // at once, submit all at once (the writer submits them in one call).
  void FillGroup() {
    BackingStore& bs = *m_.options.backing;
    copies_.clear();
    group_.clear();
    const std::size_t max_io = writer_.max_io_blocks();
    while (MoreToDo() && writer_.HasRoom() &&
           copies_.size() + max_io <= scratch_pages_) {
      const std::size_t want = std::min(max_io, order_.size() - next_);
      std::size_t got = 0;
      const std::uint64_t first = AllocOrDiscard(bs, want, &got);
      if (got == 0) {
        Stop(Status::ResourceExhausted("backing store " + bs.path() +
                                       " is full"));
        result_.full = true;
        break;
      }
      BlockWriter::Io* io = writer_.Begin(first);
      group_.push_back({io, first, got});  // reserved: does not throw
      FillIo(io, got);
      for (std::size_t k = writer_.BlocksIn(io); k < got; ++k) {
        bs.FreeUnwritten(first + k);
      }
      group_.back().blocks = writer_.BlocksIn(io);
    }
    Decompress();
    for (Begun& g : group_) {
      writer_.Submit(g.io);
      g.io = nullptr;
    }
  }

  // For the destructor: every block of the pass's IOs back to the backing
  // store, refunded. Does not throw. Only IOs the writer never reports
  // (ReapAll gave up) leave their blocks allocated: the kernel may still
  // write them.
  void GiveBackBlocks() noexcept {
    BackingStore& bs = *m_.options.backing;
    for (const Begun& g : group_) {
      if (g.io == nullptr) continue;  // submitted
      for (std::size_t k = 0; k < g.blocks; ++k) bs.FreeUnwritten(g.first + k);
      budget_.Refund(writer_.BlocksIn(g.io));  // charged as added
    }
    group_.clear();
    if (reaped_) return;
    ReapAll(writer_, [this](const BlockWriter::Done& d) { NotInstalled(d); });
  }

  // Copies candidates into `io`'s blocks, at most `got` of them.
  void FillIo(BlockWriter::Io* io, std::size_t got) {
    while (writer_.BlocksIn(io) < got && MoreToDo()) {
      const std::uint64_t index = order_[next_];
      Slot& s = m_.slots[index];
      SlotLock lock(s);
      const std::uint32_t f = SlotTable::Flags(s);
      if (!(f & slot::kPp)) {  // touched since it was picked
        ++next_;
        ++result_.changed;
        continue;
      }
      if (!budget_.Charge()) {
        result_.limit_reached = true;
        Stop(Status::IoError("writeback_limit reached"));
        break;
      }
      ++next_;
      CopyOut(index, s, f, writer_.Add(io, index));
    }
  }

  // Copies slot s (flags f) into block. REQUIRES: s locked.
  void CopyOut(std::uint64_t index, Slot& s, std::uint32_t f,
               std::span<std::byte> block) {
    const Handle h = s.value.load(std::memory_order_relaxed);
    Copy c{index, block, false, 0, &m_.CodecOf(f)};
    if (f & slot::kHuge) {
      m_.pool->ReadInto(h, block);
    } else if (req_.compressed) {
      const std::size_t n = m_.pool->ReadInto(h, block);
      std::memset(block.data() + n, 0, kPageSize - n);
    } else {
      // Raw object into the scratch now; decompressed into the block after
      // the slot is unlocked.
      std::span<std::byte> obj(scratch_.get() + copies_.size() * kPageSize,
                               kPageSize);
      c.length = m_.pool->ReadInto(h, obj);
      c.decompress = true;
    }
    copies_.push_back(c);
  }

  // Decompresses the group's objects, one fan-out per codec (recompressed
  // slots use their secondary codec, and objects of older dictionaries
  // theirs). The codecs stay: dictionaries change only between passes.
  void Decompress() {
    done_.assign(copies_.size(), false);
    for (std::size_t first = 0; first < copies_.size(); ++first) {
      if (!copies_[first].decompress || done_[first]) continue;
      const Codec* codec = copies_[first].codec;
      items_.clear();
      for (std::size_t k = first; k < copies_.size(); ++k) {
        const Copy& c = copies_[k];
        if (!c.decompress || c.codec != codec) continue;
        items_.push_back(BatchItem{std::span<const std::byte>(
                                       scratch_.get() + k * kPageSize, c.length),
                                   c.block});
      }
      DecompressBatch(*codec, items_, workers_);
      // A page that does not decompress must not become WB: its block is
      // written but Complete() frees it and keeps the slot in RAM, where a
      // load reports the corruption.
      std::size_t j = 0;
      for (std::size_t k = first; k < copies_.size(); ++k) {
        const Copy& c = copies_[k];
        if (!c.decompress || c.codec != codec) continue;
        done_[k] = true;
        const Status& st = items_[j++].status;
        if (!st.ok()) {
          m_.CountIfDamaged(st);
          bad_.push_back(c.index);
        }
      }
    }
  }

  // A block whose page is not installed: refunded and freed (with a
  // discard where it was written, or may be).
  void NotInstalled(const BlockWriter::Done& d) noexcept {
    BackingStore& bs = *m_.options.backing;
    budget_.Refund();
    if (d.status.ok()) Add(m_.bd_writes);  // written, not installed
    if (d.may_hold_data()) {
      bs.Free(d.block);
    } else {
      bs.FreeUnwritten(d.block);
    }
  }

  // Step 3 for one block.
  void Complete(const BlockWriter::Done& d) {
    BackingStore& bs = *m_.options.backing;
    Slot& s = m_.slots[d.tag];
    const bool bad = !bad_.empty() &&
                     std::find(bad_.begin(), bad_.end(), d.tag) != bad_.end();
    if (!d.status.ok() || bad) {
      NotInstalled(d);
      {
        SlotLock lock(s);
        SlotTable::ClearFlags(s, slot::kPp);
      }
      ++result_.failed;
      if (!d.status.ok()) {
        result_.status = d.status;
        // A full file system will refuse the rest too, and an IO that could
        // not be sealed for want of memory leaves little for the next.
        if (d.status.code() == StatusCode::kResourceExhausted) {
          stopped_ = true;
          result_.full = d.full;
        }
      }
      return;
    }
    std::uint32_t content = 0;
    {
      SlotLock lock(s);
      const std::uint32_t f = SlotTable::Flags(s);
      if (!(f & slot::kPp)) {
        // As zram's writeback_store(): the write counts in bd_writes, and
        // only a page installed on the backing store is charged.
        bs.Free(d.block);
        budget_.Refund();
        Add(m_.bd_writes);
        ++result_.changed;
        return;
      }
      content = ContentFor(f);
      const std::uint32_t ac_time = s.ac_time;
      m_.FreeSlotLocked(s);  // pool object, counters, pages_stored
      s.value.store(d.block, std::memory_order_relaxed);
      SlotTable::SetContent(s, content);
      m_.CountDict(content);
      s.ac_time = ac_time;
      Add(m_.pages_stored);
      Add(m_.wb_pages);
    }
    Add(m_.bd_writes);
    ++result_.written;
  }

  // The WB content for a slot with flags f written in this pass. REQUIRES:
  // its PP is still set, so its content is what was copied.
  std::uint32_t ContentFor(std::uint32_t f) const {
    if (!req_.compressed || (f & slot::kHuge)) return slot::kWb;
    // The priority and dictionary stay: a read decompresses with that
    // codec.
    return slot::kWb | slot::kWbCompressed |
           (f & (slot::kSizeMask | slot::kPrioMask | slot::kDictMask));
  }

  void Stop(Status st) {
    stopped_ = true;
    result_.status = std::move(st);
  }

  PageStore::Impl& m_;
  const WritebackRequest& req_;
  BudgetUse budget_;
  BlockWriter& writer_;
  WorkerPool* workers_;
  const std::size_t scratch_pages_;
  std::unique_ptr<std::byte[]> scratch_;  // raw objects, one page each
  std::vector<std::uint64_t> order_;
  std::size_t next_ = 0;
  bool stopped_ = false;
  bool finished_ = false;  // Finished() was called
  // Run() returned: every page IO is reaped (IOs in flight after it are the
  // units', which WritebackUnits answers for).
  bool reaped_ = false;
  WritebackResult result_;
  std::vector<Copy> copies_;             // this group's, in block order
  // An IO of this group, begun, and its blocks from `first`: `blocks` of
  // them allocated (at first all the allocation got, then those filled).
  struct Begun {
    BlockWriter::Io* io;  // null once submitted
    std::uint64_t first;
    std::size_t blocks;
  };
  std::vector<Begun> group_;  // this group's IOs
  std::vector<BatchItem> items_;
  std::vector<bool> done_;  // copies_[k] decompressed in this group
  std::vector<std::uint64_t> bad_;  // slots whose object did not decompress
};

}  // namespace internal

namespace {

// One unit of a WritebackUnits group.
struct UnitWritebackJob {
  std::uint64_t u = 0;
  std::uint64_t gen = 0;
  int nblocks = 0;  // the blocks its object takes: one per 4 KiB or part
  std::uint64_t blocks[internal::kMaxUnitPieces];
  int alloc = 0;  // blocks[0, alloc) allocated
  int got = 0;    // blocks[0, got) in IOs
  bool io_failed = false;
  bool not_written = false;  // no blocks for it (store full, or stopped)
  // Bit k: block k was written, or its write may still land
  // (BlockWriter::Done::may_land); it is given back with a discard.
  std::uint32_t written = 0;
  std::uint32_t ok = 0;        // blocks whose write succeeded
  std::uint32_t reported = 0;  // blocks whose IO was reaped
};
static_assert(internal::kMaxUnitPieces <= 32);

// For a group an exception (std::bad_alloc) ended before it completed: its
// IOs reaped, each job's blocks given back (with a discard where written)
// and its charge refunded; the caller's pass clears the PP marks
// (~WritebackPass). If the reaping gives up with IOs still in flight
// (ReapAll), the blocks in an IO not yet reported stay allocated (the
// kernel may still be writing them).
void AbandonUnitJobs(BackingStore& bs, BlockWriter& writer,
                     BudgetUse& budget,
                     std::span<UnitWritebackJob> jobs) noexcept {
  const bool all_reaped =
      ReapAll(writer, [&](const BlockWriter::Done& d) noexcept {
        UnitWritebackJob& j = jobs[d.tag / internal::kMaxUnitPieces];
        const std::uint32_t bit = std::uint32_t{1}
                                  << (d.tag % internal::kMaxUnitPieces);
        j.reported |= bit;
        if (d.may_hold_data()) j.written |= bit;
      });
  for (const UnitWritebackJob& j : jobs) {
    for (int k = 0; k < j.alloc; ++k) {
      if (!all_reaped && k < j.got && !(j.reported >> k & 1)) continue;
      if (j.written >> k & 1) {
        bs.Free(j.blocks[k]);
      } else {
        bs.FreeUnwritten(j.blocks[k]);
      }
    }
    budget.Refund(static_cast<std::uint64_t>(j.nblocks));
  }
}

}  // namespace

// Units (unit_table.h) are written after the pages, a group at a time, each
// whole: under the run's locks it is checked (every live page passes the
// scan's filter and lies in the scan), charged one budget page per block,
// its pages marked PP and its object copied out; its blocks are written;
// under the locks again it becomes WB only if it is the same unit and no
// page of it was touched (PP still set on each), else its blocks are freed.
void PageStore::Impl::WritebackUnits(const WritebackRequest& req,
                                     BlockWriter& writer,
                                     WritebackResult* result) {
  if (unit_pages == 0) return;
  BackingStore& bs = *options.backing;
  BudgetUse budget(req.budget);
  constexpr std::size_t kGroup = 16;  // units (1 MiB of copies) at a time
  using Job = UnitWritebackJob;
  std::vector<Job> jobs;
  jobs.reserve(kGroup);  // no allocation while a unit is locked
  std::unique_ptr<std::byte[]> data(
      new std::byte[kGroup * internal::kMaxUnitPieces * kPageSize]);
  auto members_of = [&](std::uint64_t u, auto&& fn) {
    for (std::size_t k = 0; k < unit_pages; ++k) {
      Slot& s = slots[u * unit_pages + k];
      SlotTable::AssertHeld(s);
      const std::uint32_t f = SlotTable::Flags(s);
      if (f & slot::kUnit) fn(s, f);
    }
  };
  // stopped: no more IO (no room left). spent: no more units picked (the
  // budget), while those picked and charged are still written.
  bool stopped = false;
  bool spent = false;
  auto stop = [&](Status st) {
    stopped = true;
    result->status = std::move(st);
  };
  for (const WritebackScan& scan : req.scans) {
    std::uint64_t u = (scan.lo + unit_pages - 1) / unit_pages;
    const std::uint64_t end = scan.hi / unit_pages;
    while (u < end && !stopped && !spent) {
      // Pick and copy out up to kGroup units.
      jobs.clear();
      try {
        for (; u < end && jobs.size() < kGroup && !stopped && !spent; ++u) {
          internal::Unit& e = units[u];
          const UnitLock run(*this, u);
          bool ok = e.gen != 0 && !e.wb;
          if (ok) {
            members_of(u, [&](Slot&, std::uint32_t f) {
              ok = ok && !(f & (slot::kPp | slot::kWb)) &&
                   PassesFilter(f, scan.filter);
            });
          }
          const auto blocks =
              static_cast<int>((e.bytes + kPageSize - 1) / kPageSize);
          if (ok && !budget.Charge(static_cast<std::uint64_t>(blocks))) {
            spent = true;
            result->limit_reached = true;
            result->status = Status::IoError("writeback_limit reached");
            ok = false;
          }
          if (ok) {
            result->candidates += std::popcount(e.live.load());
            Job& j = jobs.emplace_back();
            j.u = u;
            j.gen = e.gen;
            j.nblocks = blocks;
            std::byte* dst = data.get() + (jobs.size() - 1) *
                                              internal::kMaxUnitPieces *
                                              kPageSize;
            const std::size_t n = GatherUnitLocked(e, dst);
            std::memset(dst + n, 0, blocks * kPageSize - n);
            members_of(u, [](Slot& s, std::uint32_t) {
              SlotTable::AssertHeld(s);
              SlotTable::SetFlags(s, slot::kPp);
            });
          }
        }
        // Blocks and IOs. A tag is a job and a block of its object.
        const auto done = [&](const BlockWriter::Done& d) {
          Job& j = jobs[d.tag / internal::kMaxUnitPieces];
          const std::uint32_t bit = std::uint32_t{1}
                                    << (d.tag % internal::kMaxUnitPieces);
          j.reported |= bit;
          if (d.may_hold_data()) j.written |= bit;
          if (d.status.ok()) j.ok |= bit;
          if (!d.status.ok()) {
            j.io_failed = true;
            result->status = d.status;
            // A full file system will refuse the rest too (memory short
            // for sealing: as the pages' pass).
            if (d.status.code() == StatusCode::kResourceExhausted) {
              stopped = true;
              result->full = d.full;
            }
          }
        };
        for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
          Job& j = jobs[ji];
          const std::byte* src =
              data.get() + ji * internal::kMaxUnitPieces * kPageSize;
          while (j.got < j.nblocks) {
            std::size_t got = 0;
            const std::uint64_t b =
                stopped ? 0
                        : AllocOrDiscard(
                              bs, static_cast<std::size_t>(j.nblocks - j.got),
                              &got);
            for (std::size_t k = 0; k < got; ++k) j.blocks[j.alloc + k] = b + k;
            j.alloc += static_cast<int>(got);
            if (got == 0) {
              // Not written: the unit stays in RAM, not counted as failed.
              j.not_written = true;
              if (!stopped) {
                stop(Status::ResourceExhausted("backing store " + bs.path() +
                                               " is full"));
                result->full = true;
              }
              break;
            }
            for (std::size_t k = 0; k < got;) {
              while (!writer.HasRoom()) writer.Reap(/*wait=*/true, done);
              BlockWriter::Io* io = writer.Begin(b + k);
              for (std::size_t n = 0; n < writer.max_io_blocks() && k < got;
                   ++n, ++k) {
                const int piece = j.got++;
                std::memcpy(
                    writer.Add(io, ji * internal::kMaxUnitPieces + piece)
                        .data(),
                    src + piece * kPageSize, kPageSize);
              }
              writer.Submit(io);
            }
          }
        }
        while (writer.in_flight() != 0) writer.Reap(/*wait=*/true, done);
      } catch (...) {
        // std::bad_alloc: the group's blocks and budget go back before the
        // exception leaves (~WritebackPass clears the PP marks).
        AbandonUnitJobs(bs, writer, budget, jobs);
        throw;
      }
      // Complete.
      for (Job& j : jobs) {
        internal::Unit& e = units[j.u];
        const UnitLock run(*this, j.u);
        bool same = e.gen == j.gen && !j.io_failed && !j.not_written;
        members_of(j.u, [&](Slot& s, std::uint32_t f) {
          SlotTable::AssertHeld(s);
          same = same && (f & slot::kPp);
          SlotTable::ClearFlags(s, slot::kPp);
        });
        const auto live =
            static_cast<std::uint64_t>(std::popcount(e.live.load()));
        if (same) {
          for (int k = 0; k < e.pieces; ++k) pool->Free(e.piece[k]);
          for (int k = 0; k < j.nblocks; ++k) e.piece[k] = j.blocks[k];
          e.pieces = static_cast<std::uint8_t>(j.nblocks);
          e.wb = 1;
          Sub(compr_data_size, e.bytes);
          members_of(j.u, [](Slot& s, std::uint32_t) {
            SlotTable::AssertHeld(s);
            SlotTable::ClearFlags(s, slot::kIdle);
            SlotTable::SetFlags(s, slot::kWb);
          });
          Add(wb_pages, live);
          Add(bd_writes, static_cast<std::uint64_t>(j.nblocks));
          result->written += live;
        } else {
          // Blocks written (before a failed IO, or before the store ran
          // out of blocks for the rest) are freed with a discard, as a
          // written page's block is, so that no copy stays on the backing
          // device; so are blocks whose write may still land.
          for (int k = 0; k < j.got; ++k) {
            if (j.written >> k & 1) {
              bs.Free(j.blocks[k]);
            } else {
              bs.FreeUnwritten(j.blocks[k]);
            }
          }
          // Only a unit installed on the backing store is charged; every
          // block written counts in bd_writes (zram's writeback_store()).
          budget.Refund(static_cast<std::uint64_t>(j.nblocks));
          Add(bd_writes, static_cast<std::uint64_t>(std::popcount(j.ok)));
          if (j.io_failed) {
            result->failed += live;
          } else if (!j.not_written) {
            result->changed += live;
          }
        }
      }
    }
  }
}

Result<WritebackResult> PageStore::Writeback(const WritebackRequest& request) {
  Impl& m = *impl_;
  if (m.options.backing == nullptr) {
    return Err(Status::NotFound("no backing store"));
  }
  for (const WritebackScan& scan : request.scans) {
    if (scan.lo > scan.hi || scan.hi > m.slots.size()) {
      return Err(Status::OutOfRange("writeback scan [" +
                                    std::to_string(scan.lo) + ", " +
                                    std::to_string(scan.hi) + ") past " +
                                    std::to_string(m.slots.size())));
    }
  }
  std::lock_guard pass_lock(m.writeback_mu);
  // The blocks freed since the last pass: discarded on a remote that
  // wants it, and free for this pass.
  m.options.backing->DiscardFreed();
  ZT_ASSIGN_OR_RETURN(
      std::unique_ptr<BlockWriter> writer,
      m.options.backing->NewWriter({.in_flight = request.in_flight,
                                    .max_io_blocks = request.max_io_pages}));
  // Decompression fans out over the store's workers, or over a pass-local
  // pool on a machine with more than one core.
  std::unique_ptr<WorkerPool> local;
  WorkerPool* workers = m.workers.get();
  if (workers == nullptr && !request.compressed &&
      std::thread::hardware_concurrency() > 1) {
    // No spinning: each fan-out is a whole refill (up to 1024 pages), so a
    // wake-up is cheap beside it, and a spinning worker would take CPU from
    // the IO path on a small machine.
    local = std::make_unique<WorkerPool>(
        std::min<std::size_t>(std::thread::hardware_concurrency() - 1, 7),
        /*spin_us=*/0);
    workers = local.get();
  }
  internal::WritebackPass pass(m, request, *writer, workers);
  pass.Select();
  WritebackResult result = pass.Run();
  if (!pass.stopped()) m.WritebackUnits(request, *writer, &result);
  pass.Finished();
  // The point of writeback is RAM: give the emptied classes' spare zspages
  // back too, not only the pages of the objects freed.
  if (result.written != 0) m.pool->ReleaseSpares();
  return result;
}

bool PageStore::has_backing() const {
  return impl_->options.backing != nullptr;
}

}  // namespace ztier
