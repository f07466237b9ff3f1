// fuzz_nbd_handshake: the NBD server fed a raw client byte stream.
//
// The input is everything a client sends, from its flags on: the fixed
// newstyle handshake (options), then, if it picks an export, transmission
// requests. It runs through a real nbd::Connection on a socketpair
// (RunNbdConnection in fuzz_util.h) against zram0 (64 KiB, initialised) and
// zram1 (not initialised). Must not crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  ztier::fuzz::RunNbdConnection(
      {}, std::span(reinterpret_cast<const std::byte*>(data), size));
  return 0;
}
