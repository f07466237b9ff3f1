// make_seeds: writes the seed corpora under fuzz/corpus/<target>/.
//
//   build-fuzz/fuzz/make_fuzz_seeds fuzz/corpus
//
// Deterministic: the same build writes the same files. Run it again (and
// commit the result) when an input format of a target changes.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/protocol.h"
#include "fuzz_util.h"
#include "platform/ublk_abi.h"

using namespace ztier;
using namespace ztier::fuzz;
namespace fs = std::filesystem;

namespace {

fs::path g_root;

void Write(const std::string& target, const std::string& name,
           std::string_view bytes) {
  const fs::path dir = g_root / target;
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) Fail("cannot write " + (dir / name).string());
}
void Write(const std::string& target, const std::string& name,
           const std::vector<std::byte>& bytes) {
  Write(target, name,
        std::string_view(reinterpret_cast<const char*>(bytes.data()),
                         bytes.size()));
}

// Three kinds of page: text, half random / half zeros, a counter pattern.
std::vector<std::pair<std::string, std::vector<std::byte>>> Pages() {
  std::vector<std::pair<std::string, std::vector<std::byte>>> pages;
  std::vector<std::byte> text;
  for (int i = 0; text.size() < kPage; ++i) {
    const std::string line = "line " + std::to_string(i) +
                             ": the quick brown fox jumps over the lazy dog\n";
    for (char c : line) text.push_back(static_cast<std::byte>(c));
  }
  text.resize(kPage);
  pages.emplace_back("text", text);
  std::vector<std::byte> mixed(kPage);
  std::uint64_t x = 0x9e3779b97f4a7c15;
  for (std::size_t i = 0; i < kPage / 2; ++i) {
    x = x * 6364136223846793005 + 1442695040888963407;
    mixed[i] = static_cast<std::byte>(x >> 56);
  }
  pages.emplace_back("mixed", mixed);
  std::vector<std::byte> ints(kPage);
  for (std::size_t i = 0; i < kPage; i += 8) {
    ints[i] = static_cast<std::byte>(i / 8);
    ints[i + 1] = static_cast<std::byte>(i / 2048);
  }
  pages.emplace_back("ints", ints);
  return pages;
}

std::string Slug(std::string s) {
  for (char& c : s) {
    if (c == ' ' || c == '=') c = '_';
  }
  return s;
}

void CodecSeeds() {
  const auto& variants = CodecVariants();
  const auto pages = Pages();
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const CodecVariant& v = variants[i];
    auto c = v.codec->NewCompressor();
    if (!c) Fail("NewCompressor");
    const std::string base = std::to_string(i) + "-" + v.name +
                             (v.params.empty() ? "" : "-" + Slug(v.params));
    for (const auto& [kind, page] : pages) {
      std::vector<std::byte> obj(kPage);
      const std::size_t len = (*c)->Compress(page, obj);
      if (len == 0) continue;
      obj.resize(len);
      obj.insert(obj.begin(), static_cast<std::byte>(i));
      Write("fuzz_codec_decompress", base + "-" + kind, obj);
      // Round trip: each codec's default variant (the first CodecNames()
      // entries) with every page, the other levels with the text page.
      if (i < CodecNames().size() || kind == "text") {
        std::vector<std::byte> in = page;
        in.insert(in.begin(), static_cast<std::byte>(i));
        Write("fuzz_codec_roundtrip", base + "-" + kind, in);
      }
    }
    // A 16-page unit of every page kind in turn (fuzz_codec_decompress's
    // largest output: selector i + 3 * variants).
    std::vector<std::byte> unit;
    for (std::size_t p = 0; p < 16; ++p) {
      const auto& page = pages[p % pages.size()].second;
      unit.insert(unit.end(), page.begin(), page.end());
    }
    std::vector<std::byte> obj(unit.size());
    const std::size_t len = (*c)->Compress(unit, obj);
    if (len == 0) continue;
    obj.resize(len);
    obj.insert(obj.begin(), static_cast<std::byte>(i + 3 * variants.size()));
    Write("fuzz_codec_decompress", base + "-unit16", obj);
  }
}

void NbdSeeds() {
  using W = NbdWriter;
  // Requests (for both targets): within the 64 KiB zram0.
  auto requests = [](W& w) {
    w.Request(nbd::kCmdWrite, 0, 1, 0, 4096).Payload(4096, 'a');
    w.Request(nbd::kCmdRead, 0, 2, 0, 4096);
    w.Request(nbd::kCmdWrite, nbd::kCmdFlagFua, 3, 5000, 100).Payload(100, 'b');
    w.Request(nbd::kCmdRead, 0, 4, 4000, 200);
    w.Request(nbd::kCmdWrite, 0, 5, 16384, 16384).Payload(16384, 'c');
    w.Request(nbd::kCmdRead, 0, 6, 0, 65536);
    w.Request(nbd::kCmdTrim, 0, 7, 4096, 8192);
    w.Request(nbd::kCmdWriteZeroes, nbd::kCmdFlagNoHole, 8, 100, 9000);
    w.Request(nbd::kCmdFlush, 0, 9, 0, 0);
    w.Request(nbd::kCmdCache, 0, 10, 0, 4096);
    w.Request(nbd::kCmdRead, 0, 11, 65000, 4096);  // past the end: EINVAL
    w.Request(nbd::kCmdBlockStatus, 0, 12, 0, 4096);  // unsupported
  };
  {
    W w;
    w.ClientFlags().Option(nbd::kOptGo, W::InfoPayload("", {}));
    requests(w);
    w.Request(nbd::kCmdDisc, 0, 13, 0, 0);
    Write("fuzz_nbd_handshake", "go-default-requests", w.bytes());
  }
  {
    W w;
    w.ClientFlags().Option(
        nbd::kOptGo, W::InfoPayload("zram0", {nbd::kInfoExport, nbd::kInfoName,
                                              nbd::kInfoDescription,
                                              nbd::kInfoBlockSize}));
    w.Request(nbd::kCmdRead, 0, 1, 0, 512).Request(nbd::kCmdDisc, 0, 2, 0, 0);
    Write("fuzz_nbd_handshake", "go-zram0-infos", w.bytes());
  }
  {
    W w;
    w.ClientFlags().Option(nbd::kOptExportName, "zram0");
    w.Request(nbd::kCmdWrite, 0, 1, 8192, 512).Payload(512, 'x');
    w.Request(nbd::kCmdRead, 0, 2, 8192, 512).Request(nbd::kCmdDisc, 0, 3, 0, 0);
    Write("fuzz_nbd_handshake", "export-name", w.bytes());
  }
  {
    W w;
    w.ClientFlags().Option(nbd::kOptList, "");
    w.Option(nbd::kOptInfo, W::InfoPayload("zram1", {nbd::kInfoBlockSize}));
    w.Option(nbd::kOptInfo, W::InfoPayload("nosuch", {}));
    w.Option(nbd::kOptStructuredReply, "");
    w.Option(nbd::kOptStartTls, "");
    w.Option(nbd::kOptAbort, "");
    Write("fuzz_nbd_handshake", "list-info-abort", w.bytes());
  }
  {
    W w;
    w.ClientFlags().Option(nbd::kOptGo, W::InfoPayload("zram1", {}));
    w.Option(nbd::kOptExportName, "");
    w.Request(nbd::kCmdFlush, 0, 1, 0, 0);
    Write("fuzz_nbd_handshake", "go-uninitialised", w.bytes());
  }
  {
    W w;
    requests(w);
    w.Request(nbd::kCmdDisc, 0, 13, 0, 0);
    Write("fuzz_nbd_transmission", "mixed", w.bytes());
  }
  {
    W w;
    w.Request(nbd::kCmdWrite, 0, 1, 0, 65536).Payload(65536, 'q');
    w.Request(nbd::kCmdRead, 0, 2, 0, 65536);
    Write("fuzz_nbd_transmission", "whole-device", w.bytes());
  }
  {
    W w;
    w.Request(nbd::kCmdWrite, 0, 1, 70000, 16).Payload(16, 'z');  // EINVAL
    w.Request(nbd::kCmdRead, 0x40, 2, 0, 16);  // bad flag
    w.Request(nbd::kCmdWriteZeroes, nbd::kCmdFlagFastZero, 3, 0, 65536);
    w.Request(nbd::kCmdTrim, 0, 4, 0, 65536);
    w.Request(nbd::kCmdFlush, nbd::kCmdFlagFua, 5, 0, 0);
    Write("fuzz_nbd_transmission", "errors-and-zeroes", w.bytes());
  }
}

void CtlSeeds() {
  struct Seed {
    std::string name;
    std::vector<ctl::WireRequest> requests;
  };
  using R = ctl::WireRequest;
  const std::vector<Seed> seeds = {
      {"show-attributes",
       {R{"zram0", "disksize", {}}, R{"zram0", "initstate", {}},
        R{"zram0", "comp_algorithm", {}}, R{"zram0", "mm_stat", {}},
        R{"zram0", "io_stat", {}}, R{"zram0", "debug_stat", {}},
        R{"zram0", "bd_stat", {}}, R{"zram0", "backing_dev", {}},
        R{"zram0", "writeback_limit", {}}}},
      {"reset-reconfigure",
       {R{"zram0", "reset", "1"}, R{"zram0", "comp_algorithm", "zstd"},
        R{"zram0", "algorithm_params", "level=5"},
        R{"zram0", "disksize", "128K"}, R{"zram0", "mem_limit", "1M"},
        R{"zram0", "initstate", {}}}},
      {"idle-compact-writeback",
       {R{"zram0", "idle", "all"}, R{"zram0", "compact", "1"},
        R{"zram0", "writeback", "idle"},
        R{"zram0", "writeback_limit_enable", "1"},
        R{"zram0", "writeback_limit", "10"},
        R{"zram0", "writeback_batch_size", "4"},
        R{"zram0", "mem_used_max", "0"}}},
      {"control-ops",
       {R{"", "hot_add", {}}, R{"zram1", "disksize", "4096"},
        R{"", "status", {}}, R{"", "hot_remove", "1"},
        R{"", "hot_remove", "zram7"}}},
      {"errors",
       {R{"zram9", "disksize", {}}, R{"zram0", "nosuch", {}},
        R{"zram0", "mm_stat", "1"}, R{"zram0", "reset", {}},
        R{"zram0", "comp_algorithm", "lz4hc"},
        R{"zram0", "compressed_writeback", "on"}}},
  };
  for (const Seed& s : seeds) {
    std::string bytes;
    for (const R& r : s.requests) bytes += ctl::EncodeRequest(r);
    Write("fuzz_ctl", s.name, bytes);
  }
}

void TokenSeeds() {
  // Byte 0: device size selector of fuzz_writeback_tokens (3: 16 pages).
  const std::vector<std::pair<std::string, std::string>> wb = {
      {"idle", "\x03idle"},
      {"huge-idle", "\x03huge_idle\n"},
      {"type", "\x03type=incompressible"},
      {"index", "\x03page_index=3"},
      {"indexes-mode", "\x03page_indexes=1-5 page_index=15 huge"},
      {"big-device", "\x05page_indexes=1000-1048575"},
      {"huge", "\x07huge"},
  };
  for (const auto& [name, text] : wb) Write("fuzz_writeback_tokens", name, text);
  const std::vector<std::pair<std::string, std::string>> ap = {
      {"level", "level=3"},
      {"zstd-fast", "algo=zstd level=-7"},
      {"priority", "priority=1 algo=lz4hc level=12"},
      {"winbits", "deflate.winbits=-15 level=9\n"},
      {"dict", "dict=/nonexistent/dict level=1"},
      {"plus", "level=+4\tpriority=0"},
  };
  for (const auto& [name, text] : ap) Write("fuzz_algorithm_params", name, text);
}

// fuzz_service_config: two bytes of MemTotal (16 GiB: 4096 * 4 + 1 MiB),
// then a file.
void ConfigSeeds() {
  const std::pair<const char*, const char*> files[] = {
      {"example",
       "# ztier.conf\n[zram0]\nzram-size = min(ram / 2, 4096)\n"
       "compression-algorithm = zstd(level=3)\n"
       "writeback-device = /var/lib/ztier/zram0.img\n\n"
       "[ztier]\nlisten = 127.0.0.1:10809\npolicy = period=60s\n"},
      {"two-devices",
       "[zram0]\nzram-size = ram * 0.25 + 16\nzram-resident-limit = 512\n"
       "compression-algorithm = lz4 zstd(level=9) (type=idle)\n"
       "swap-priority = 50\n[zram1]\nzram-size = 0\nfs-type = ext4\n"
       "mount-point = /var/tmp\noptions = discard\n"},
      {"deprecated",
       "[zram0]\nzram-fraction = 0.5\nmax-zram-size = none\n"
       "memory-limit = 2048\nhost-memory-limit = none\n"},
      {"expressions",
       "[zram0]\nzram-size = max(floor(log(2, ram)) * 100, ceil(pi ^ 2), "
       "round(e), abs(-3) % 2, int(1.5e3))\n"
       "writeback-device = nbd+unix:///x?socket=/run/r.sock\n"
       "[other]\nkey = ignored\n"},
  };
  for (const auto& [name, text] : files) {
    std::string bytes = {static_cast<char>(0x00), static_cast<char>(0x10)};
    bytes += text;
    Write("fuzz_service_config", name, bytes);
  }
}

// fuzz_ublk_request: runs of descriptors on its 64 KiB device.
void UblkSeeds() {
  namespace u = platform::ublk;
  auto desc = [](std::uint32_t op_flags, std::uint32_t sectors,
                 std::uint64_t start) {
    u::IoDesc d{.op_flags = op_flags, .nr_sectors = sectors,
                .start_sector = start, .addr = 0};
    std::string bytes(sizeof(d), '\0');
    std::memcpy(bytes.data(), &d, sizeof(d));
    return bytes;
  };
  Write("fuzz_ublk_request", "write-read",
        desc(u::kOpWrite, 8, 0) + desc(u::kOpRead, 8, 0) +
            desc(u::kOpWrite | u::kIoFFua, 16, 24) + desc(u::kOpRead, 32, 16));
  Write("fuzz_ublk_request", "partial-pages",
        desc(u::kOpWrite, 3, 5) + desc(u::kOpRead, 8, 0) +
            desc(u::kOpWriteZeroes | u::kIoFNoUnmap, 2, 6) +
            desc(u::kOpRead, 8, 0));
  Write("fuzz_ublk_request", "discard-zeroes-flush",
        desc(u::kOpWrite, 64, 0) + desc(u::kOpDiscard, 16, 8) +
            desc(u::kOpWriteZeroes, 8, 32) + desc(u::kOpFlush, 0, 0) +
            desc(u::kOpRead, 64, 0) + desc(u::kOpWrite | u::kIoFSwap, 8, 120));
  Write("fuzz_ublk_request", "refused",
        desc(u::kOpWriteSame, 8, 0) + desc(u::kOpRead, 0, 0) +
            desc(u::kOpRead, 72, 0) + desc(u::kOpWrite, 8, 126) +
            desc(0xff, 8, 0));
}

// fuzz_dictionary: the fuzz dictionaries (a trained zstd one and its
// content) with an object each codec compressed with them, and a
// dictionary that is only its magic and some bytes.
void DictionarySeeds() {
  const auto pages = Pages();
  const struct {
    const char* name;
    std::uint8_t selector;  // bit 0: zstd; bit 1: plain content
    bool content;
  } kCases[] = {{"lz4-content", 0, true},
                {"zstd-trained", 1, false},
                {"zstd-content", 3, true}};
  for (const auto& k : kCases) {
    const auto dict = FuzzDictionary(k.content);
    CodecParams params;
    params.dict = dict;
    params.dict_content_only = (k.selector & 2) != 0;
    auto codec = MakeCodec((k.selector & 1) != 0 ? "zstd" : "lz4", params);
    if (!codec) Fail("MakeCodec: " + codec.error().ToString());
    auto c = (*codec)->NewCompressor();
    if (!c) Fail("NewCompressor");
    std::vector<std::byte> obj(kPage);
    obj.resize((*c)->Compress(pages[0].second, obj));
    std::string bytes = {static_cast<char>(k.selector),
                         static_cast<char>(dict->size() & 0xff),
                         static_cast<char>(dict->size() >> 8)};
    bytes.append(reinterpret_cast<const char*>(dict->data()), dict->size());
    bytes.append(reinterpret_cast<const char*>(obj.data()), obj.size());
    Write("fuzz_dictionary", k.name, bytes);
  }
  // ZSTD_MAGIC_DICTIONARY (0xEC30A437, little-endian) and a short rest.
  Write("fuzz_dictionary", "zstd-magic-only",
        std::string("\x01\x10\x00\x37\xa4\x30\xec", 7) +
            std::string(12, 'x'));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  CodecSeeds();
  NbdSeeds();
  CtlSeeds();
  TokenSeeds();
  ConfigSeeds();
  UblkSeeds();
  DictionarySeeds();
  return 0;
}
