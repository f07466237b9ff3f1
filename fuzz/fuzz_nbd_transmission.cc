// fuzz_nbd_transmission: the NBD request parser and dispatcher.
//
// Like fuzz_nbd_handshake, but the input follows a fixed, valid handshake
// (client flags, NBD_OPT_GO for zram0: TransmissionPrefix() in fuzz_util.h),
// so every input is a stream of transmission requests (28-byte headers,
// WRITE payloads) served by nbd::Connection: inline for small requests, on
// the work queue for those over 8 KiB.
//
// No stored data may be lost to a request that does not write it: before
// each input zram0's 16 pages are filled with a pattern (so that an input
// meets the same device whatever ran before it), the input's requests are
// read as the server reads them (TouchedPages), and afterwards every page
// no WRITE, TRIM or WRITE_ZEROES reached must still hold its pattern.
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_util.h"

using namespace ztier;
using namespace ztier::fuzz;

namespace {

constexpr std::size_t kPages = kNbdDiskBytes / kPage;

std::uint64_t Big(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// The pages the requests in `in` may change: those a WRITE, TRIM or
// WRITE_ZEROES covers, for every request up to the first header the server
// would stop at (a wrong magic, NBD_CMD_DISC). A WRITE whose payload is
// over the connection's limit may leave the server out of step with the
// stream: every page, then.
std::bitset<kPages> TouchedPages(std::span<const std::uint8_t> in) {
  std::bitset<kPages> touched;
  std::size_t pos = 0;
  while (in.size() - pos >= 28) {
    const std::uint8_t* h = in.data() + pos;
    if (Big(h, 4) != nbd::kRequestMagic) break;
    const auto type = static_cast<std::uint16_t>(Big(h + 6, 2));
    const std::uint64_t offset = Big(h + 16, 8);
    const std::uint64_t length = Big(h + 24, 4);
    pos += 28;
    if (type == nbd::kCmdDisc) break;
    if (type != nbd::kCmdWrite && type != nbd::kCmdTrim &&
        type != nbd::kCmdWriteZeroes) {
      continue;
    }
    if (type == nbd::kCmdWrite && length > NbdLimits().max_request_bytes) {
      touched.set();
      break;
    }
    for (std::size_t p = 0; p < kPages; ++p) {
      const std::uint64_t start = p * kPage;
      if (length != 0 && offset < start + kPage && offset + length > start &&
          offset + length > offset) {
        touched.set(p);
      }
      // A range that wraps past 2^64: the server refuses it; counted as
      // touching every page after its offset all the same.
      if (length != 0 && offset + length < offset && offset < start + kPage) {
        touched.set(p);
      }
    }
    if (type == nbd::kCmdWrite) pos += std::min<std::uint64_t>(length, in.size() - pos);
  }
  return touched;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::vector<std::byte>& pattern = DevicePattern();
  const std::shared_ptr<Device> zram0 = NbdRegistry()->Find("zram0");
  if (zram0 == nullptr || zram0->disksize() != kNbdDiskBytes) {
    Fail("zram0 is gone or resized");
  }
  if (!zram0->Write(0, pattern).ok()) Fail("filling zram0");
  RunNbdConnection(TransmissionPrefix(),
                   std::span(reinterpret_cast<const std::byte*>(data), size));
  const std::bitset<kPages> touched = TouchedPages({data, size});
  std::vector<std::byte> now(kNbdDiskBytes);
  if (!zram0->Read(0, now).ok()) Fail("reading zram0 back");
  for (std::size_t p = 0; p < kPages; ++p) {
    if (!touched.test(p) &&
        std::memcmp(now.data() + p * kPage, pattern.data() + p * kPage,
                    kPage) != 0) {
      Fail("page " + std::to_string(p) +
           " changed, though no request of the input writes it");
    }
  }
  return 0;
}
