// recompress.cc: the PageStore's recompression pass (contract in
// include/ztier/page_store.h, "Recompress"), after zram's recompress_store()
// and recompress_slot() in drivers/block/zram/zram_drv.c.
//
// The kernel recompresses one slot at a time, holding the slot's lock and a
// stream from reading the page to installing the result. Here a pass works
// a batch (kMaxPassBatchSize slots) at a time, and holds each slot's lock only
// twice, briefly:
//   1. Select: mark each candidate PP under its lock, bucketed by size;
//      largest first, as the kernel's select_pp_slot().
//   2. Copy out, per candidate, under its lock: recheck PP (any access
//      clears it), copy the object, clear IDLE. Counted against max_pages,
//      unless step 3 finds it does not decompress (then it is left as it
//      is, IDLE given back in step 4, and the pass goes on; the kernel
//      stops at a slot it cannot read and counts a slot once it compressed
//      it again).
//   3. With no lock held: compress the batch with each secondary codec in
//      ascending priority, a slot going on only while it has no win. One
//      batch codec call per priority does all of a page's work on the lane
//      that takes it: decompress the old object (the first time), compress,
//      and for a win allocate and copy the new object. So the parallel
//      backend fans out everything but the two lock holds.
//   4. Install, per candidate, under its lock: if PP is still set, the old
//      object is freed and the new one installed (access time kept); else
//      the new one is dropped. No win after the top priority:
//      INCOMPRESSIBLE. PP is cleared either way.
// Client stores, loads and discards never wait for the codecs, only for one
// slot's copy or swap.
#include <algorithm>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "page_store_impl.h"

namespace ztier {
namespace internal {

// One pass's state; lives on the caller's stack. REQUIRES: the store's
// writeback_mu held for its whole life.
class RecompressPass {
 public:
  RecompressPass(PageStore::Impl& m, const RecompressRequest& req, int first,
                 int end)
      : m_(m),
        req_(req),
        first_(first),
        end_(end),
        batch_(kMaxPassBatchSize),
        raw_(new std::byte[batch_ * kPageSize]),
        page_(new std::byte[batch_ * kPageSize]),
        out_(new std::byte[batch_ * kPageSize]) {
    std::tie(dict_, dict_id_) = m_.CurrentDict();
    // A slot at priority q is tried at [max(first, q + 1), end): it is a
    // candidate only if one of those has a codec.
    for (int q = 0; q < kMaxCodecPriorities; ++q) {
      for (int p = std::max(first_, q + 1); p < end_; ++p) {
        usable_[q] = usable_[q] || m_.codecs[p] != nullptr;
      }
    }
  }

  // A pass an exception (std::bad_alloc: a compressor made on first use,
  // a vector's growth) ended early: the objects made for its batch and not
  // installed are freed (they would count in mem_used_total for good), and
  // every slot loses PP (no later pass would pick it again; passes are one
  // at a time, under writeback_mu, so every PP is this pass's).
  ~RecompressPass() {
    if (finished_) return;
    for (const Item& it : items_) {
      if (it.handle != kInvalidHandle) m_.pool->Free(it.handle);
    }
    m_.ClearPassMarks(0, m_.slots.size());
  }
  RecompressPass(const RecompressPass&) = delete;
  RecompressPass& operator=(const RecompressPass&) = delete;

  // Step 1.
  void Select() {
    store_detail::LargestFirst picked;
    for (std::uint64_t i = 0; i < m_.slots.size(); ++i) {
      Slot& s = m_.slots[i];
      if (!Eligible(s.flags.load(std::memory_order_relaxed))) continue;
      SlotLock lock(s);
      const std::uint32_t f = SlotTable::Flags(s);
      if (!Eligible(f)) continue;
      SlotTable::SetFlags(s, slot::kPp);
      picked.Add(i, f);
    }
    order_ = picked.Order();
    result_.candidates = order_.size();
  }

  // Steps 2-4, then PP off the candidates never reached.
  RecompressResult Run() {
    while (!stopped_ && next_ < order_.size() &&
           result_.attempted < req_.max_pages) {
      CopyOut();
      if (items_.empty()) continue;
      for (int p = first_; p < end_; ++p) {
        if (m_.codecs[p] != nullptr) CompressWith(p);
      }
      Install();
      UncountDamaged();
      // Counted batch by batch, so that a pace callback sees the progress.
      Add(m_.recompress_attempts, result_.attempted - counted_);
      counted_ = result_.attempted;
      if (req_.pace && !req_.pace()) stopped_ = true;
    }
    for (; next_ < order_.size(); ++next_) {
      Slot& s = m_.slots[order_[next_]];
      SlotLock lock(s);
      SlotTable::ClearFlags(s, slot::kPp);
    }
    Add(m_.recompress_attempts, result_.attempted - counted_);
    Add(m_.recompressed_pages, result_.recompressed);
    finished_ = true;
    return std::move(result_);
  }

 private:
  // A candidate of the current batch. Between the lock holds, only the
  // lane that has it in a batch codec call touches it.
  struct Item {
    std::uint64_t index;
    std::size_t old_size;  // object bytes (kPageSize when HUGE)
    int old_priority;
    bool huge;
    const Codec* old_codec;  // what the old object was made with
    bool idle;               // IDLE when copied out (which clears it)
    bool ready = false;      // page(k) holds its page
    bool bad = false;        // did not decompress: left as it is
    bool no_memory = false;  // a win the pool could not hold
    bool tried_top = false;  // compressed with the top priority's codec
    int won = 0;             // the winning priority; 0: none (yet)
    std::size_t length = 0;  // the winner's bytes
    Handle handle = kInvalidHandle;  // the winner's new object
  };

  std::byte* raw(std::size_t k) { return raw_.get() + k * kPageSize; }
  std::byte* page(std::size_t k) { return page_.get() + k * kPageSize; }
  std::byte* out(std::size_t k) { return out_.get() + k * kPageSize; }

  // A slot this pass may pick (flags f): as scan_slots_for_recompress().
  bool Eligible(std::uint32_t f) const {
    if (!Allocated(f) ||
        (f & (slot::kSame | slot::kWb | slot::kIncompressible | slot::kPp |
              slot::kUnit))) {
      return false;
    }
    if ((req_.filter & kRecompressIdle) && !(f & slot::kIdle)) return false;
    if ((req_.filter & kRecompressHuge) && !(f & slot::kHuge)) return false;
    if (!usable_[Priority(f)]) return false;  // at the top, or no codec above
    return (f & slot::kSizeMask) >= req_.threshold;
  }

  // Step 2 for the next batch of candidates.
  void CopyOut() {
    items_.clear();
    while (items_.size() < batch_ && next_ < order_.size() &&
           result_.attempted < req_.max_pages) {
      const std::uint64_t index = order_[next_++];
      Slot& s = m_.slots[index];
      SlotLock lock(s);
      const std::uint32_t f = SlotTable::Flags(s);
      if (!(f & slot::kPp)) {  // touched since it was picked
        ++result_.changed;
        continue;
      }
      const std::size_t k = items_.size();
      const std::size_t n = m_.pool->ReadInto(
          s.value.load(std::memory_order_relaxed),
          std::span<std::byte>(raw(k), kPageSize));
      // Touched by the pass: not idle any more, so that a later writeback
      // of idle pages does not pick it for the same age (as the kernel).
      SlotTable::ClearFlags(s, slot::kIdle);
      items_.push_back(Item{index, n, Priority(f), (f & slot::kHuge) != 0,
                            &m_.CodecOf(f), (f & slot::kIdle) != 0});
      ++result_.attempted;
    }
  }

  // Step 3 for priority p: the items still without a win that may use it,
  // in one batch codec call; Prepare and Finish run on its lanes.
  void CompressWith(int p) {
    batch_items_.clear();
    slot_of_.clear();
    for (std::size_t k = 0; k < items_.size(); ++k) {
      const Item& it = items_[k];
      if (it.bad || it.won != 0 || p < it.old_priority + 1) continue;
      batch_items_.push_back(
          BatchItem{std::span<const std::byte>(page(k), kPageSize),
                    std::span<std::byte>(out(k), kPageSize)});
      slot_of_.push_back(k);
    }
    if (batch_items_.empty()) return;
    BatchCompressor* bc = CompressorFor(p);
    if (bc == nullptr) return;
    // The callbacks capture one pointer (no allocation).
    struct Context {
      RecompressPass* pass;
      int priority;
    } ctx{this, p};
    const BatchCompressor::ItemSink prepare = [c = &ctx](std::size_t j) {
      c->pass->Prepare(j);
    };
    const BatchCompressor::ItemSink finish = [c = &ctx](std::size_t j) {
      c->pass->Finish(j, c->priority);
    };
    bc->Compress(batch_items_, &finish, &prepare);
    if (p == m_.top_priority) {
      for (const std::size_t k : slot_of_) items_[k].tried_top = true;
    }
  }

  // On a lane: the page of batch item j, decompressed on first use (a
  // HUGE object is the page). One that does not decompress is dropped
  // from the batch (an empty source is not compressed).
  void Prepare(std::size_t j) {
    const std::size_t k = slot_of_[j];
    Item& it = items_[k];
    if (it.ready) return;
    if (it.huge) {
      std::memcpy(page(k), raw(k), kPageSize);
    } else {
      Decompressor& d = LocalDecompressor(*it.old_codec);
      const Status st =
          d.Decompress(std::span<const std::byte>(raw(k), it.old_size),
                       std::span<std::byte>(page(k), kPageSize));
      if (!st.ok()) {
        // Left as it is (a failed decompression only if damaged).
        m_.CountIfDamaged(st);
        it.bad = true;
        batch_items_[j].src = {};
        return;
      }
    }
    it.ready = true;
  }

  // On a lane: batch item j compressed with priority p. A win is
  // allocated and copied into the pool here.
  void Finish(std::size_t j, int p) {
    Item& it = items_[slot_of_[j]];
    const std::size_t len = batch_items_[j].length;
    if (it.bad || !Wins(it, len)) return;
    it.won = p;
    it.length = len;
    it.handle = m_.pool->Malloc(len);
    if (it.handle == kInvalidHandle) {
      it.no_memory = true;
      return;
    }
    m_.pool->Write(it.handle, batch_items_[j].dst.first(len));
  }

  // recompress_slot()'s rule: a smaller size class, and under the
  // threshold if there is one. A result at the huge size would be kept raw:
  // never a win.
  bool Wins(const Item& it, std::size_t len) const {
    if (len == 0 || len >= m_.huge_size) return false;
    if (req_.threshold != 0 && len >= req_.threshold) return false;
    return m_.pool->ClassSizeFor(len) < m_.pool->ClassSizeFor(it.old_size);
  }

  // The pass's compressor for priority p, with the current dictionary,
  // made on first use (a failure to make one, out of memory, skips that
  // priority); kept between passes until a dictionary is trained.
  BatchCompressor* CompressorFor(int p) {
    std::unique_ptr<BatchCompressor>& bc = m_.recomp_batch[p];
    if (bc == nullptr) {
      BatchOptions bo;
      bo.backend = m_.options.batch_backend;
      bo.max_batch = batch_;
      bo.pool = m_.workers.get();
      auto made = NewBatchCompressor(dict_->codecs[p], bo);
      if (!made.has_value()) return nullptr;
      bc = std::move(*made);
    }
    return bc.get();
  }

  // The batch's slots that did not decompress were not compressed again:
  // not attempts (so a later batch may take their place under max_pages).
  void UncountDamaged() {
    for (const Item& it : items_) {
      if (!it.bad) continue;
      --result_.attempted;
      ++result_.damaged;
    }
  }

  // Step 4. After a failed allocation, the pass installs nothing more.
  void Install() {
    for (Item& it : items_) {
      // Not reject_alloc_fail, which counts the clients' stores the pool
      // refused (page_store.h); the pass's result says it.
      if (it.no_memory && result_.status.ok()) {
        result_.status = Status::ResourceExhausted("pool is full");
        stopped_ = true;
      }
      Handle h = it.handle;
      it.handle = kInvalidHandle;  // installed or freed below
      if (h != kInvalidHandle && !result_.status.ok()) {
        m_.pool->Free(h);
        h = kInvalidHandle;
      }
      Slot& s = m_.slots[it.index];
      SlotLock lock(s);
      const std::uint32_t f = SlotTable::Flags(s);
      SlotTable::ClearFlags(s, slot::kPp);
      if (!(f & slot::kPp)) {  // stored, discarded or read meanwhile
        if (h != kInvalidHandle) m_.pool->Free(h);
        ++result_.changed;
      } else if (it.bad) {
        // Never read: idle as it was (recompress_slot() clears ZRAM_IDLE
        // once it read the page).
        if (it.idle) SlotTable::SetFlags(s, slot::kIdle);
      } else if (h != kInvalidHandle) {
        Swap(s, f, it, h);
      } else if (it.won == 0 && !it.bad && it.tried_top) {
        SlotTable::SetFlags(s, slot::kIncompressible);
        Add(m_.incompressible_pages);
        ++result_.incompressible;
      }
    }
  }

  // Replaces slot s's object (flags f, PP set) by h. REQUIRES: s locked.
  void Swap(Slot& s, std::uint32_t f, const Item& it, Handle h)
      ZT_REQUIRES(s) {
    m_.pool->Free(s.value.load(std::memory_order_relaxed));
    Sub(m_.compr_data_size, f & slot::kSizeMask);
    if (f & slot::kHuge) Sub(m_.huge_pages);
    if (Priority(f) != 0) Sub(m_.priority_pages[Priority(f)]);
    m_.UncountDict(f);
    s.value.store(h, std::memory_order_relaxed);
    // The dictionary's id only where the winning codec used it: an object
    // of a codec without one (deflate, lzo, lz4hc) must not hold an id,
    // and with it the dictionary's memory, that it never reads with.
    const bool used_dict = dict_id_ != 0 &&
                           SupportsDictionary(dict_->codecs[it.won]->name());
    const std::uint32_t content =
        static_cast<std::uint32_t>(it.length) | PriorityBits(it.won) |
        DictBits(used_dict ? dict_id_ : 0) | (f & slot::kIdle);
    SlotTable::SetContent(s, content);
    m_.CountDict(content);
    Add(m_.compr_data_size, it.length);
    Add(m_.priority_pages[it.won]);
    ++result_.recompressed;
    result_.bytes_before += f & slot::kSizeMask;
    result_.bytes_after += it.length;
  }

  PageStore::Impl& m_;
  std::shared_ptr<const PageStore::Impl::DictEntry> dict_;  // the current
  int dict_id_ = 0;
  const RecompressRequest& req_;
  const int first_;
  const int end_;
  const std::size_t batch_;
  std::unique_ptr<std::byte[]> raw_;   // copied objects, one page each
  std::unique_ptr<std::byte[]> page_;  // their pages
  std::unique_ptr<std::byte[]> out_;   // the secondary codecs' results
  std::vector<std::uint64_t> order_;
  std::size_t next_ = 0;
  std::uint64_t counted_ = 0;  // of result_.attempted, in the store's count
  bool stopped_ = false;
  bool finished_ = false;  // Run() returned
  std::vector<Item> items_;
  std::vector<BatchItem> batch_items_;
  std::vector<std::size_t> slot_of_;  // batch_items_[j] is items_[slot_of_[j]]
  bool usable_[kMaxCodecPriorities] = {};  // by a candidate's priority
  RecompressResult result_;
};

}  // namespace internal

Result<RecompressResult> PageStore::Recompress(
    const RecompressRequest& request) {
  Impl& m = *impl_;
  if (request.threshold != 0 && request.threshold >= m.huge_size) {
    return Err(Status::InvalidArgument(
        "recompress: threshold " + std::to_string(request.threshold) +
        " is not below the huge class size " + std::to_string(m.huge_size)));
  }
  const int first = std::max(request.priority, 1);
  const int end = std::min(request.priority_end, m.top_priority + 1);
  bool any = false;
  for (int p = first; p < end; ++p) any = any || m.codecs[p] != nullptr;
  if (!any) {
    return Err(Status::InvalidArgument(
        "no recompression algorithm at priority " + std::to_string(first) +
        (end - first > 1 ? ".." + std::to_string(end - 1) : std::string())));
  }
  std::lock_guard pass_lock(m.writeback_mu);
  internal::RecompressPass pass(m, request, first, end);
  pass.Select();
  RecompressResult result = pass.Run();
  // The point of the pass is memory, and each win freed an object of a
  // larger class, leaving holes across those classes' zspages: compact
  // them now (zram leaves that to its `compact` attribute). Compact()
  // releases the spare zspages too. Not with a reserve: the pages it frees
  // stay in it, and the map it builds takes memory a swap server may lack
  // (docs/swap.md).
  if (result.recompressed != 0 && !m.options.prealloc) m.pool->Compact();
  return result;
}

}  // namespace ztier
