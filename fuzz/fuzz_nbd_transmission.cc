// fuzz_nbd_transmission: the NBD request parser and dispatcher.
//
// Like fuzz_nbd_handshake, but the input follows a fixed, valid handshake
// (client flags, NBD_OPT_GO for zram0: TransmissionPrefix() in fuzz_util.h),
// so every input is a stream of transmission requests (28-byte headers,
// WRITE payloads) served by nbd::Connection: inline for small requests, on
// the work queue for those over 8 KiB.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  ztier::fuzz::RunNbdConnection(
      ztier::fuzz::TransmissionPrefix(),
      std::span(reinterpret_cast<const std::byte*>(data), size));
  return 0;
}
