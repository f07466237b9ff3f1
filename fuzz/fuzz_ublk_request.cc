// fuzz_ublk_request: the ublk front end's descriptor parser and request
// server (src/ublk/include/ublk/request.h), on hostile descriptors.
//
// Input: a run of 24-byte descriptors (struct ublksrv_io_desc, as the
// driver puts them in the shared queue memory), each parsed with
// ParseDescriptor against a 64 KiB device (max_io_bytes 32 KiB); a READ
// or WRITE taken is served with ServeRequest into a buffer of exactly its
// length (so ASan sees a byte too far), a WRITE's bytes made from its
// descriptor. Checks:
//  - a refused descriptor is -EOPNOTSUPP or -EINVAL; a taken one lies
//    within the device, and a READ or WRITE within max_io_bytes and not
//    empty;
//  - ServeRequest commits the length for a READ or WRITE and 0 for the
//    others (a 64 KiB RAM device has no reason to fail);
//  - a READ returns what the requests before it left (a model of the
//    device: WRITE bytes, WRITE_ZEROES zeros; a DISCARD leaves its pages
//    unknown, as zram may keep a partial page's data).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "ublk/request.h"

using namespace ztier;
using namespace ztier::fuzz;

namespace {

constexpr std::uint64_t kDisk = 64 << 10;
constexpr std::uint32_t kMaxIo = 32 << 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  DeviceDefaults defaults;
  defaults.streams = 1;
  Device device("zram0", defaults);
  if (!device.SetDisksize(kDisk).ok()) Fail("zram0 setup");
  std::vector<std::byte> model(kDisk);         // zeros: a fresh device
  std::vector<bool> known(kDisk / kPage, true);
  const ublk::Limits limits{.disksize = kDisk, .max_io_bytes = kMaxIo};
  for (std::size_t pos = 0; pos + sizeof(platform::ublk::IoDesc) <= size &&
                            pos < 64 * sizeof(platform::ublk::IoDesc);
       pos += sizeof(platform::ublk::IoDesc)) {
    platform::ublk::IoDesc desc;
    std::memcpy(&desc, data + pos, sizeof(desc));
    const auto req = ublk::ParseDescriptor(desc, limits);
    if (!req) {
      if (req.error() != -EOPNOTSUPP && req.error() != -EINVAL) {
        Fail("ParseDescriptor: " + std::to_string(req.error()));
      }
      continue;
    }
    const bool io = req->op == ublk::Op::kRead || req->op == ublk::Op::kWrite;
    if (req->offset > kDisk || req->length > kDisk - req->offset ||
        (io && (req->length == 0 || req->length > kMaxIo))) {
      Fail("ParseDescriptor took offset " + std::to_string(req->offset) +
           " length " + std::to_string(req->length));
    }
    std::vector<std::byte> buffer(io ? req->length : 0);
    if (req->op == ublk::Op::kWrite) {
      for (std::size_t i = 0; i < buffer.size(); ++i) {
        buffer[i] = static_cast<std::byte>(desc.start_sector + i * 7 + pos);
      }
    }
    const std::int32_t r = ublk::ServeRequest(device, *req, buffer);
    if (r != (io ? static_cast<std::int32_t>(req->length) : 0)) {
      Fail("ServeRequest committed " + std::to_string(r));
    }
    const std::size_t first = req->offset / kPage;
    const std::size_t end = (req->offset + req->length + kPage - 1) / kPage;
    switch (req->op) {
      case ublk::Op::kWrite:
        std::memcpy(model.data() + req->offset, buffer.data(), buffer.size());
        break;
      case ublk::Op::kWriteZeroes:
        std::memset(model.data() + req->offset, 0, req->length);
        break;
      case ublk::Op::kDiscard:
        for (std::size_t p = first; p < end; ++p) known[p] = false;
        break;
      case ublk::Op::kRead:
        for (std::size_t i = 0; i < buffer.size(); ++i) {
          const std::uint64_t at = req->offset + i;
          if (known[at / kPage] && buffer[i] != model[at]) {
            Fail("READ at " + std::to_string(at) + " differs from the model");
          }
        }
        break;
      case ublk::Op::kFlush:
        break;
    }
    if (req->op == ublk::Op::kWrite || req->op == ublk::Op::kWriteZeroes) {
      // Whole pages written are known again; a partial page only if it was.
      for (std::size_t p = first; p < end; ++p) {
        if (req->offset <= p * kPage &&
            req->offset + req->length >= (p + 1) * kPage) {
          known[p] = true;
        }
      }
    }
  }
  return 0;
}
