// fuzz_service_config: ParseServiceConfig, the `ztier serve --config` file
// (tools/ztier/service_config.h), with its size expressions (size_expr.h).
//
// Input: bytes 0 and 1 give the host's MemTotal (`ram`, 1 to 262,141 MiB);
// the rest is the file's text. Inputs naming a dictionary file (dict=) are
// skipped: MakeCodec would read it. An error must be kInvalidArgument
// saying "FILE:LINE: ..."; a file taken must give what the header promises:
// devices with zram names, each once, a size or the reason it is skipped,
// a codec MakeCodec makes with its parameters, an absolute path or NBD URI
// as backing device, and [ztier] entries with a key and a value at a line
// of the file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "nbd/nbd_backing_file.h"
#include "service_config.h"

using namespace ztier;
using namespace ztier::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size < 2) return 0;
  const double ram = 1 + 4.0 * (data[0] | (data[1] << 8));
  const std::string_view text(reinterpret_cast<const char*>(data) + 2,
                              size - 2);
  if (text.find("dict") != std::string_view::npos) return 0;
  auto config = tool::ParseServiceConfig(text, "fuzz.conf", ram);
  if (!config) {
    const Status& e = config.error();
    if (e.code() != StatusCode::kInvalidArgument ||
        !e.message().starts_with("fuzz.conf:")) {
      Fail("error not 'fuzz.conf:LINE: ...' kInvalidArgument: " + e.ToString());
    }
    return 0;
  }
  const std::size_t lines = 1 + static_cast<std::size_t>(
                                    std::count(text.begin(), text.end(), '\n'));
  std::set<std::string> names;
  for (const tool::DeviceConfig& d : config->devices) {
    if (!d.name.starts_with("zram")) Fail("device name " + d.name);
    if (!names.insert(d.name).second) Fail("device twice: " + d.name);
    if (d.line < 1 || static_cast<std::size_t>(d.line) > lines) {
      Fail(d.name + ": line " + std::to_string(d.line));
    }
    if (d.disksize == 0 && d.skipped.empty()) {
      Fail(d.name + ": size 0 and not skipped");
    }
    if (!MakeCodec(d.comp_algorithm, d.algorithm_params)) {
      Fail(d.name + ": MakeCodec refuses " + d.comp_algorithm + " '" +
           d.algorithm_params + "'");
    }
    if (d.recomp_algorithms.size() > 3) Fail(d.name + ": over 3 recomp");
    for (const auto& r : d.recomp_algorithms) {
      if (!MakeCodec(r.name, r.params)) Fail(d.name + ": recomp " + r.name);
    }
    if (!d.backing_dev.empty() && d.backing_dev[0] != '/' &&
        !nbd::IsNbdUri(d.backing_dev)) {
      Fail(d.name + ": backing_dev " + d.backing_dev);
    }
  }
  for (const tool::ConfigEntry& e : config->ztier) {
    if (e.key.empty() || e.value.empty() || e.line < 1 ||
        static_cast<std::size_t>(e.line) > lines) {
      Fail("[ztier] entry '" + e.key + "' at line " + std::to_string(e.line));
    }
  }
  return 0;
}
