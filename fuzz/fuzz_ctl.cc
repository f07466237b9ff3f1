// fuzz_ctl: the control socket's request framing and its request handler.
//
// The input is a byte stream as the control server receives it: requests
// are parsed off its front with ctl::ParseRequest (as the server does, up to
// 16 per input) and each complete one goes to ctl::HandleRequest on a fresh
// registry holding zram0 (64 KiB, initialised). Checks:
//  - ParseRequest consumes within the input; a parsed request re-encodes
//    (EncodeRequest) to bytes that parse back to the same request;
//  - every reply encodes (EncodeOk / EncodeError) to bytes ParseReply reads
//    back whole;
//  - ParseReply on the raw input does not crash;
//  - no request loses stored data: zram0 starts with 16 pages of a pattern,
//    and after every request, until one that may drop them has succeeded
//    (a store of zram0's reset or disksize, hot_remove of zram0), it still
//    holds them, whether the request was refused or done (writeback,
//    recompress, compact, idle and the limits move or account pages, never
//    change them).
// Requests that would touch the host are skipped, not handled: backing_dev
// stores (they create files), algorithm_params with dict= (it reads a file),
// disksize stores over 1 MiB, hot_add past 4 devices.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/attributes.h"
#include "ctl/protocol.h"
#include "fuzz_util.h"

using namespace ztier;
using namespace ztier::fuzz;

namespace {

bool Harmless(const ctl::WireRequest& r, const DeviceRegistry& registry) {
  if (r.attribute == "hot_add") return registry.List().size() < 4;
  if (!r.value.has_value()) return true;
  const std::string_view v = *r.value;
  if (r.attribute == "backing_dev") return false;
  if (r.attribute == "algorithm_params") {
    return v.find("dict") == std::string_view::npos;
  }
  if (r.attribute == "disksize") {
    auto size = ParseSize(v);
    return !size || *size <= (1 << 20);
  }
  return true;
}

void CheckReply(const ctl::WireReply& reply) {
  const std::string wire = reply.ok
                               ? ctl::EncodeOk(reply.text)
                               : ctl::EncodeError(reply.errno_name,
                                                  reply.message);
  const ctl::ReplyParse back = ctl::ParseReply(wire);
  if (back.state != ctl::ParseState::kDone || back.consumed != wire.size() ||
      back.reply.ok != reply.ok || (reply.ok && back.reply.text != reply.text) ||
      (!reply.ok && back.reply.errno_name != reply.errno_name)) {
    Fail("reply does not survive EncodeOk/EncodeError + ParseReply");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  (void)ctl::ParseReply(input);  // the client's parser, same bytes

  DeviceDefaults defaults;
  defaults.streams = 1;
  DeviceRegistry registry(defaults);
  auto z0 = registry.Add("zram0");
  const std::vector<std::byte>& pattern = DevicePattern();
  if (!z0 || !(*z0)->SetDisksize(pattern.size()).ok()) Fail("zram0 setup");
  if (!(*z0)->Write(0, pattern).ok()) Fail("filling zram0");
  bool intact = true;  // no reset, hot_remove or disksize has succeeded
  std::vector<std::byte> now(pattern.size());

  std::string_view rest = input;
  for (int i = 0; i < 16; ++i) {
    const ctl::RequestParse p = ctl::ParseRequest(rest);
    if (p.state != ctl::ParseState::kDone) break;
    if (p.consumed == 0 || p.consumed > rest.size()) {
      Fail("ParseRequest consumed " + std::to_string(p.consumed) + " of " +
           std::to_string(rest.size()));
    }
    rest.remove_prefix(p.consumed);

    const std::string wire = ctl::EncodeRequest(p.request);
    const ctl::RequestParse again = ctl::ParseRequest(wire);
    if (again.state != ctl::ParseState::kDone ||
        again.consumed != wire.size() ||
        again.request.device != p.request.device ||
        again.request.attribute != p.request.attribute ||
        again.request.value != p.request.value) {
      Fail("request does not survive EncodeRequest + ParseRequest");
    }
    if (!Harmless(p.request, registry)) continue;
    const ctl::WireReply reply = ctl::HandleRequest(registry, p.request);
    CheckReply(reply);
    // What may drop zram0's data: a store of its reset or disksize, or
    // zram0 leaving the registry (hot_remove).
    const ctl::WireRequest& q = p.request;
    const std::string& a = q.attribute;
    if ((reply.ok && q.value.has_value() && q.device == "zram0" &&
         (a == "reset" || a == "disksize")) ||
        registry.Find("zram0") != *z0) {
      intact = false;
    }
    if (intact) {
      const Status read = (*z0)->Read(0, now);
      if (!read.ok() || now != pattern) {
        Fail("zram0's data changed (" + read.ToString() + ") after '" + a +
             "' (" + (reply.ok ? "done" : "refused: " + reply.message) + ")");
      }
    }
  }
  return 0;
}
