// File: testing/install/consumer_cxx.cc
//
// A C++ program built by install_test.sh through a CMake project
// (consumer_cmake/) that finds the installed libztier with
// find_package(ztier) and links ztier::ztier. Two round trips:
//   1. a PageStore (ztier/page_store.h) with zstd: 64 distinct pages stored,
//      loaded back and compared; one page overwritten and reloaded.
//   2. a Region (ztier/region.h): written, paged out, read back through
//      faults and compared (skipped when userfaultfd is not usable here).
// Exit status 0 when both round-trip (or the Region part is skipped), 1 on
// any failure.
#include <ztier/page_store.h>
#include <ztier/region.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr std::size_t kPages = 64;

void Fill(std::size_t page, std::byte* out) {
  static const char kText[] = "installed libztier, C++ consumer, page ";
  for (std::size_t i = 0; i < ztier::kPageSize; ++i) {
    out[i] =
        i < 8 ? static_cast<std::byte>(page >> (8 * i))
              : static_cast<std::byte>(kText[(i + page) % (sizeof kText - 1)]);
  }
}

int PageStoreRoundTrip() {
  ztier::PageStoreOptions options;
  options.num_pages = kPages;
  options.codec = "zstd";
  auto store = ztier::PageStore::Create(options);
  if (!store) {
    std::fprintf(stderr, "PageStore::Create: %s\n",
                 store.error().ToString().c_str());
    return 1;
  }
  alignas(4096) std::array<std::byte, ztier::kPageSize> page{};
  alignas(4096) std::array<std::byte, ztier::kPageSize> got{};
  for (std::size_t p = 0; p < kPages; ++p) {
    Fill(p, page.data());
    if (ztier::Status s = (*store)->Store(p, page); !s.ok()) {
      std::fprintf(stderr, "Store %zu: %s\n", p, s.ToString().c_str());
      return 1;
    }
  }
  for (std::size_t p = 0; p < kPages; ++p) {
    Fill(p, page.data());
    if (ztier::Status s = (*store)->Load(p, got); !s.ok()) {
      std::fprintf(stderr, "Load %zu: %s\n", p, s.ToString().c_str());
      return 1;
    }
    if (std::memcmp(page.data(), got.data(), page.size()) != 0) {
      std::fprintf(stderr, "page %zu differs after the round trip\n", p);
      return 1;
    }
  }
  Fill(1000, page.data());
  if (!(*store)->Store(3, page).ok() || !(*store)->Load(3, got).ok() ||
      std::memcmp(page.data(), got.data(), page.size()) != 0) {
    std::fprintf(stderr, "overwritten page 3 did not come back\n");
    return 1;
  }
  const ztier::PageStoreStats st = (*store)->Stats();
  if (st.orig_data_size != kPages * ztier::kPageSize ||
      st.compr_data_size == 0 || st.compr_data_size >= st.orig_data_size) {
    std::fprintf(stderr, "stats: orig %llu compr %llu\n",
                 static_cast<unsigned long long>(st.orig_data_size),
                 static_cast<unsigned long long>(st.compr_data_size));
    return 1;
  }
  std::printf("ok: PageStore zstd, %zu pages in %llu compressed bytes\n",
              kPages, static_cast<unsigned long long>(st.compr_data_size));
  return 0;
}

int RegionRoundTrip() {
  constexpr std::size_t kSize = 1 << 20;
  ztier::RegionOptions options;
  options.size = kSize;
  options.codec = "lz4";
  auto region = ztier::Region::Create(options);
  if (!region) {
    const ztier::StatusCode c = region.error().code();
    if (c == ztier::StatusCode::kUnsupported ||
        c == ztier::StatusCode::kPermissionDenied) {
      std::printf("skip: Region: %s\n", region.error().ToString().c_str());
      return 0;
    }
    std::fprintf(stderr, "Region::Create: %s\n",
                 region.error().ToString().c_str());
    return 1;
  }
  std::byte* mem = (*region)->data();
  for (std::size_t p = 0; p < kSize / ztier::kPageSize; ++p) {
    Fill(p, mem + p * ztier::kPageSize);
  }
  if (ztier::Status s = (*region)->Pageout(mem, kSize); !s.ok()) {
    std::fprintf(stderr, "Pageout: %s\n", s.ToString().c_str());
    return 1;
  }
  if ((*region)->Stats().zswpout == 0) {
    std::fprintf(stderr, "Region: nothing was paged out\n");
    return 1;
  }
  alignas(4096) std::array<std::byte, ztier::kPageSize> want{};
  for (std::size_t p = 0; p < kSize / ztier::kPageSize; ++p) {
    Fill(p, want.data());
    if (std::memcmp(mem + p * ztier::kPageSize, want.data(), want.size()) !=
        0) {
      std::fprintf(stderr, "Region: page %zu differs after the round trip\n",
                   p);
      return 1;
    }
  }
  const ztier::RegionStats s = (*region)->Stats();
  if (s.zswpin == 0) {
    std::fprintf(stderr, "Region: no page came back from the pool\n");
    return 1;
  }
  std::printf("ok: Region, zswpout %llu zswpin %llu\n",
              static_cast<unsigned long long>(s.zswpout),
              static_cast<unsigned long long>(s.zswpin));
  return 0;
}

}  // namespace

int main() {
  if (PageStoreRoundTrip() != 0) return 1;
  return RegionRoundTrip();
}
