// dictionary.cc: the PageStore's trained dictionaries (contract in
// include/ztier/page_store.h, "dictionaries"; the state is in
// page_store_impl.h).
//
// Training, under writeback_mu (one post-processing pass at a time):
//   1. Move the idle streams to the current dictionary; release the
//      entries of ids that are not current, that no object uses and that
//      no stream holds, and pick a free id; none free: kResourceExhausted.
//   2. Sample: count the compressed slots with relaxed peeks, then
//      decompress every k-th one under its lock, leaving its access time
//      and marks alone (training is not an access). Every other sample
//      trains; the others are held out to judge the dictionary.
//   3. Train with ZDICT (codec.h); compress the samples with the primary
//      algorithm alone, with the dictionary and (zstd) with its content
//      only, and keep the smaller form, if it beats no dictionary; make a
//      codec with it for each priority whose algorithm takes one, and
//      check the memory against mem_limit.
//   4. Publish under dict_mu: the entry, its codecs in codec_of, the
//      current id, then the generation (release). Each stream remakes its
//      compressor when it next stores; the recompression pass's
//      compressors are dropped, to be made again with the new dictionary.
#include <algorithm>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "page_store_impl.h"

namespace ztier {
namespace {

constexpr std::size_t kMinSamples = 512;
constexpr std::size_t kMaxSamples = 16384;

// A slot whose page can be sampled: a compressed object in RAM (its own,
// or a unit's).
bool Sampleable(std::uint32_t f) {
  return Allocated(f) &&
         !(f & (slot::kSame | slot::kWb | slot::kHuge));
}

// A dictionary in the form a codec is given it.
struct DictForm {
  std::shared_ptr<const std::vector<std::byte>> bytes;
  bool content_only = false;
};

// Priority p's codec (name `name`) with its algorithm_params and `form` in
// place of any dictionary file.
Result<std::shared_ptr<const Codec>> CodecWithDict(const PageStoreOptions& o,
                                                    int p,
                                                    std::string_view name,
                                                    const DictForm& form) {
  ZT_ASSIGN_OR_RETURN(CodecParams params,
                      ParseAlgorithmParams(p == 0 ? o.algorithm_params
                                                  : o.recomp[p - 1]
                                                        .algorithm_params));
  params.dict_path.clear();
  params.dict = form.bytes;
  params.dict_content_only = form.content_only;
  return MakeCodec(name, params);
}

// Bytes the samples take as the store would keep them with `codec`: the
// compressed size, or a page when the result is not below `huge_size`.
std::size_t SampleBytes(const Codec& codec,
                        std::span<const std::span<const std::byte>> samples,
                        std::size_t huge_size) {
  auto c = codec.NewCompressor();
  if (!c.has_value()) return SIZE_MAX;
  std::vector<std::byte> out(kPageSize);
  std::size_t total = 0;
  for (const auto& page : samples) {
    const std::size_t n = (*c)->Compress(page, out);
    total += n == 0 || n >= huge_size ? kPageSize : n;
  }
  return total;
}

}  // namespace

void PageStore::Impl::RefreshStream(internal::Stream& s) {
  std::lock_guard l(dict_mu);
  const std::uint64_t gen = dict_generation.load(std::memory_order_relaxed);
  const int id = dict_current.load(std::memory_order_relaxed);
  // Out of memory (an error, or std::bad_alloc from a compressor's
  // making): the stream keeps its compressor (and its entry, so the id
  // stays valid) and tries again at its next store. Not thrown: a store's
  // batch would be left part installed, and a training's stream taken.
  std::unique_ptr<BatchCompressor> made;
  try {
    auto r = NewBatchCompressor(dicts[id]->codecs[0], stream_batch);
    if (!r.has_value()) return;
    made = std::move(*r);
  } catch (const std::bad_alloc&) {
    return;
  }
  s.batch = std::move(made);
  s.dict_entry = dicts[id];
  s.dict_id = id;
  s.dict_generation = gen;
}

Result<DictionaryInfo> PageStore::TrainDictionary(
    const TrainDictRequest& request) {
  Impl& m = *impl_;
  if (!SupportsDictionary(m.codec->name())) {
    return Err(Status::InvalidArgument(
        "train_dict: " + std::string(m.codec->name()) +
        " takes no dictionary (zstd and lz4 do)"));
  }
  if (request.dict_bytes < kMinDictBytes ||
      request.dict_bytes > kMaxDictBytes) {
    return Err(Status::InvalidArgument(
        "train_dict: size " + std::to_string(request.dict_bytes) +
        " out of range 1024..1048576"));
  }
  std::lock_guard pass_lock(m.writeback_mu);

  // 1. Free ids. Idle streams first move to the current dictionary, so
  // that none keeps an older one's entry (and id) merely for not having
  // stored since.
  m.streams->VisitIdle([&m](internal::Stream& s) {
    if (s.dict_generation !=
        m.dict_generation.load(std::memory_order_acquire)) {
      m.RefreshStream(s);
    }
  });
  int id = 0;
  {
    std::lock_guard l(m.dict_mu);
    const int current = m.dict_current.load(std::memory_order_relaxed);
    for (int d = 1; d < kDictIds; ++d) {
      if (d != current && m.dicts[d] != nullptr &&
          m.dict_objects[d].load(std::memory_order_acquire) == 0 &&
          m.dicts[d].use_count() == 1) {
        m.dict_memory.fetch_sub(m.dicts[d]->memory, std::memory_order_relaxed);
        m.dicts[d].reset();
      }
      if (id == 0 && d != current && m.dicts[d] == nullptr) id = d;
    }
  }
  if (id == 0) {
    return Err(Status::ResourceExhausted(
        "train_dict: all 3 dictionary ids still have pages stored with them; "
        "rewrite, recompress or write back those pages first"));
  }

  // 2. Samples.
  std::size_t want = request.max_samples;
  if (want == 0) {
    want = std::clamp(2 * request.dict_bytes * 100 / kPageSize, kMinSamples,
                      kMaxSamples);
  }
  want = std::min(want, kMaxSamples);  // 64 MiB of pages at most
  std::size_t candidates = 0;
  for (std::size_t i = 0; i < m.slots.size(); ++i) {
    candidates += Sampleable(m.slots[i].flags.load(std::memory_order_relaxed));
  }
  std::vector<std::byte> pages;
  pages.reserve(std::min(want, candidates) * kPageSize);
  // Candidate k is taken where k * want / candidates steps up: `want`
  // pages spread evenly over all of them (a whole stride, candidates /
  // want, would take the first `want` of up to twice as many).
  std::size_t seen = 0;
  const auto step = [&](std::size_t k) {
    return candidates <= want ||
           k * want / candidates != (k + 1) * want / candidates;
  };
  for (std::size_t i = 0; i < m.slots.size() && pages.size() < want * kPageSize;
       ++i) {
    Slot& s = m.slots[i];
    if (!Sampleable(s.flags.load(std::memory_order_relaxed))) continue;
    if (!step(seen++)) continue;
    SlotLock lock(s);
    const std::uint32_t f = SlotTable::Flags(s);
    if (!Sampleable(f)) continue;
    pages.resize(pages.size() + kPageSize);
    std::byte* dst = pages.data() + pages.size() - kPageSize;
    Status st;
    if (f & slot::kUnit) {
      st = m.LoadUnitLocked(i, dst);
    } else {
      m.DecompressInto(LocalDecompressor(m.CodecOf(f)),
                       s.value.load(std::memory_order_relaxed), dst, &st);
    }
    if (!st.ok()) pages.resize(pages.size() - kPageSize);  // loads report it
  }
  const std::size_t n = pages.size() / kPageSize;
  // Every other page trains; the rest judge the result, so that a
  // dictionary is not judged on the pages it copied.
  std::vector<std::span<const std::byte>> samples, held_out;
  for (std::size_t k = 0; k < n; ++k) {
    (k % 2 == 0 ? samples : held_out)
        .emplace_back(pages.data() + k * kPageSize, kPageSize);
  }

  // 3. The dictionary, its better form, and its codecs.
  ZT_ASSIGN_OR_RETURN(std::vector<std::byte> trained,
                      ztier::TrainDictionary(samples, request.dict_bytes));
  const std::span<const std::byte> content = DictionaryContent(trained);
  std::vector<DictForm> forms;
  forms.push_back({std::make_shared<const std::vector<std::byte>>(
                       content.begin(), content.end()),
                   true});
  if (m.codec->name() == "zstd") {
    forms.push_back({std::make_shared<const std::vector<std::byte>>(
                         std::move(trained)),
                     false});
  }
  DictionaryInfo info;
  info.samples = samples.size();
  info.sample_bytes_without = SampleBytes(*m.codec, held_out, m.huge_size);
  info.sample_bytes_with = SIZE_MAX;
  DictForm best;
  std::shared_ptr<const Codec> best_primary;  // best's codec of priority 0
  for (const DictForm& form : forms) {
    ZT_ASSIGN_OR_RETURN(auto codec,
                        CodecWithDict(m.options, 0, m.codec->name(), form));
    const std::size_t bytes = SampleBytes(*codec, held_out, m.huge_size);
    if (bytes < info.sample_bytes_with) {
      info.sample_bytes_with = bytes;
      best = form;
      best_primary = std::move(codec);
    }
  }
  if (info.sample_bytes_with >= info.sample_bytes_without) {
    return Err(Status::FailedPrecondition(
        "train_dict: the dictionary does not make the sampled pages smaller (" +
        std::to_string(info.sample_bytes_without) + " bytes without one, " +
        std::to_string(info.sample_bytes_with) + " with); not used"));
  }
  info.content_only = best.content_only;
  const std::shared_ptr<const std::vector<std::byte>>& bytes = best.bytes;
  auto entry = std::make_shared<Impl::DictEntry>();
  entry->memory = bytes->size();
  for (int p = 0; p < kMaxCodecPriorities; ++p) {
    const std::shared_ptr<const Codec>& base = m.codecs[p];
    entry->codecs[p] = base;
    if (base == nullptr || !SupportsDictionary(base->name())) continue;
    if (p == 0) {
      entry->codecs[0] = best_primary;  // made once, above
    } else {
      ZT_ASSIGN_OR_RETURN(entry->codecs[p],
                          CodecWithDict(m.options, p, base->name(), best));
    }
    // Each codec digests the dictionary on its own; the bytes are shared.
    entry->memory += entry->codecs[p]->dictionary_bytes() - bytes->size();
  }
  const std::uint64_t limit = m.mem_limit.load(std::memory_order_relaxed);
  if (limit != 0 && m.UsedBytes() + entry->memory > limit) {
    return Err(Status::ResourceExhausted(
        "train_dict: the dictionary's " + std::to_string(entry->memory) +
        " bytes would pass mem_limit"));
  }

  // 4. Publish.
  {
    std::lock_guard l(m.dict_mu);
    for (int p = 0; p < kMaxCodecPriorities; ++p) {
      m.codec_of[id][p].store(entry->codecs[p].get(),
                              std::memory_order_release);
    }
    m.dict_memory.fetch_add(entry->memory, std::memory_order_relaxed);
    m.dicts[id] = entry;
    m.dict_current.store(id, std::memory_order_relaxed);
    // seq_cst: pairs with ReclaimLocked's look at it after giving a unit
    // up for a page poor alone, and RetryPoorUnits' look at that mark.
    m.dict_generation.fetch_add(1, std::memory_order_seq_cst);
  }
  m.NotePeak();  // the dictionary's memory is part of mem_used_total
  for (auto& bc : m.recomp_batch) bc.reset();
  // Units kept whole for a page that did not compress alone get another
  // try with the new dictionary, by the next store or discard that returns.
  m.RetryPoorUnits();
  info.id = id;
  info.bytes = bytes->size();
  info.memory = entry->memory;
  return info;
}

}  // namespace ztier
