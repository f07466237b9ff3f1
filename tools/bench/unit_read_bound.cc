// unit_read_bound.cc: what a random 4 KiB read from a 16-page unit costs
// the codec alone, against a page stored by itself (docs/benchmarks.md,
// bench ratio). Built and run by unit_read_bound.sh.
//
//   unit_read_bound FILE.pages
//
// FILE holds raw 4096-byte pages. For lz4 and zstd (level 3), every page is
// compressed alone and every aligned run of 16 pages as one input; then,
// one thread, the pages are read in one random order, three times:
//   per-page      decompress the page's own object;
//   unit whole    decompress the page's whole unit (what ztier does);
//   unit prefix   decompress the unit only up to the end of the page
//                 (LZ4_decompress_safe_partial; zstd, streaming into an
//                 output that ends there);
//   anchor        a unit design that reads a page with one other: each
//                 page after the unit's first is compressed alone with
//                 that first page as its dictionary (raw content), so a
//                 read decompresses the first page, then the page with it
//                 (LZ4_decompress_safe_usingDict, ZSTD_decompress_usingDict).
// Then the pages are read in order, three times, from objects packed back
// to back as a pool packs them: each page's own object, each unit's object
// (one call per 16 pages), and each unit's object copied into one buffer
// first (what ztier does: a unit's object lies in several pieces of the
// pool, units.cc), the bound under `bench ratio`'s sequential reads; and,
// for lz4, each unit's object read in place from its 4096-byte pieces by
// a block decoder that follows the LZ4 block format across them
// (DecodeLz4Pieces below, the design that would drop that copy), checked
// against the pages.
// Prints the MB/s of pages read and each unit figure over per-page, and
// the compressed bytes of units and of anchors over per-page's: what each
// design saves in memory against what its reads cost. The bytes themselves
// are a floor under any pool's mem_used_total for that design.
//
// Then, for zstd, units of 16 with a dictionary trained from the same
// pages (ZDICT_trainFromBuffer, 16 KiB and 64 KiB), each unit compressed
// with the dictionary and the parameters zstd picks for a 64 KiB input
// (ZSTD_compress_usingDict): the floor of units and a dictionary, the
// dictionary's own bytes besides.
#include <lz4.h>
#include <zdict.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kUnit = 16;

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// `n` bytes at `src` compressed, with the `dict_len` bytes at `dict` as
// raw-content dictionary when dict_len > 0.
std::vector<char> Compress(bool lz4, const char* src, std::size_t n,
                           const char* dict = nullptr,
                           std::size_t dict_len = 0) {
  std::vector<char> out(ZSTD_compressBound(n) + LZ4_compressBound(n));
  std::size_t len = 0;
  if (lz4) {
    LZ4_stream_t stream;
    LZ4_initStream(&stream, sizeof(stream));
    LZ4_loadDict(&stream, dict, static_cast<int>(dict_len));
    len = static_cast<std::size_t>(LZ4_compress_fast_continue(
        &stream, src, out.data(), static_cast<int>(n),
        static_cast<int>(out.size()), 1));
  } else {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    len = ZSTD_compress_usingDict(cctx, out.data(), out.size(), src, n, dict,
                                  dict_len, 3);
    ZSTD_freeCCtx(cctx);
  }
  out.resize(len);
  return out;
}

// Decompresses the `len` bytes at `src` into `n` bytes at `out`: one
// codec call.
void Decompress(bool lz4, ZSTD_DCtx* dctx, const char* src, std::size_t len,
                char* out, std::size_t n) {
  if (lz4) {
    LZ4_decompress_safe(src, out, static_cast<int>(len), static_cast<int>(n));
  } else {
    ZSTD_decompressDCtx(dctx, out, n, src, len);
  }
}

// An LZ4 block (lz4's doc/lz4_Block_format.md) read from the pieces
// [piece, piece + n), in order, into the `cap` bytes at `dst`: the bytes
// written, or -1 for a malformed block. Sequences that lie inside one
// piece, with room to copy 16 or 32 bytes at a time, take the fast loop;
// the rest (the last ones, those across a boundary) are read a byte at a
// time across pieces.
struct Piece {
  const std::uint8_t* p;
  std::size_t n;
};

void Copy8(std::uint8_t* d, const std::uint8_t* s) { std::memcpy(d, s, 8); }
void Copy16(std::uint8_t* d, const std::uint8_t* s) { std::memcpy(d, s, 16); }
// Copies [s, s + (e - d)) to d, 32 bytes at a time (up to 31 past e).
void Wild32(std::uint8_t* d, const std::uint8_t* s, std::uint8_t* e) {
  do {
    Copy16(d, s);
    Copy16(d + 16, s + 16);
    d += 32;
    s += 32;
  } while (d < e);
}

// A match of `ml` bytes at distance `off` < 16; writes up to 8 past it.
void ShortMatch(std::uint8_t* op, std::size_t off, std::size_t ml) {
  std::uint8_t* const e = op + ml;
  if (off >= 8) {
    for (; op < e; op += 8) Copy8(op, op - off);
    return;
  }
  // Its first bytes one by one, up to a multiple of the period of 8 or
  // more, then 8 at a time from that far back.
  const std::size_t dist = off * ((8 + off - 1) / off);
  for (std::size_t i = 0; i < dist; ++i) op[i] = op[i - off];
  for (std::uint8_t* d = op + dist; d < e; d += 8) Copy8(d, d - dist);
}

// Reads a length's extra bytes (255 and more follow) from [*ip, iend).
bool ExtraLength(const std::uint8_t** ip, const std::uint8_t* iend,
                 std::size_t* len) {
  unsigned b;
  do {
    if (*ip >= iend) return false;
    b = *(*ip)++;
    *len += b;
  } while (b == 255);
  return true;
}

// The fast loop over one piece: stops before the first sequence that does
// not lie inside [*ipp, iend) with 64 bytes of output to spare. False: a
// match reaches before dst.
bool FastSequences(const std::uint8_t** ipp, const std::uint8_t* iend,
                   std::uint8_t** opp, std::uint8_t* dst, std::uint8_t* oend) {
  const std::uint8_t* ip = *ipp;
  std::uint8_t* op = *opp;
  bool ok = true;
  while (iend - ip >= 32 && oend - op >= 64) {
    const std::uint8_t* const seq = ip;
    std::uint8_t* const out = op;
    const unsigned token = *ip++;
    std::size_t ll = token >> 4;
    if (ll != 15) {
      Copy16(op, ip);
    } else if (!ExtraLength(&ip, iend, &ll) ||
               static_cast<std::size_t>(iend - ip) < ll + 18 ||
               static_cast<std::size_t>(oend - op) < ll + 64) {
      ip = seq;
      break;
    } else {
      Wild32(op, ip, op + ll);
    }
    op += ll;
    ip += ll;
    const std::size_t off = ip[0] | std::size_t{ip[1]} << 8;
    ip += 2;
    const std::uint8_t* const match = op - off;
    std::size_t ml = token & 15;
    if (ml != 15 && off >= 8 && match >= dst) {
      // off >= 8: each 8 bytes are read after the ones they start from
      // were written.
      Copy8(op, match);
      Copy8(op + 8, match + 8);
      std::memcpy(op + 16, match + 16, 2);
      op += ml + 4;
      continue;
    }
    if (ml == 15 && (!ExtraLength(&ip, iend, &ml) ||
                     static_cast<std::size_t>(oend - op) < ml + 4 + 64)) {
      ip = seq;
      op = out;
      break;
    }
    ml += 4;
    if (off == 0 || match < dst) {
      ok = false;
      break;
    }
    if (off >= 16) {
      Wild32(op, match, op + ml);
    } else {
      ShortMatch(op, off, ml);
    }
    op += ml;
  }
  *ipp = ip;
  *opp = op;
  return ok;
}

long DecodeLz4Pieces(const Piece* piece, std::size_t n, std::uint8_t* dst,
                     std::size_t cap) {
  std::uint8_t* op = dst;
  std::uint8_t* const oend = dst + cap;
  std::size_t k = 0;
  const std::uint8_t* ip = piece[0].p;
  const std::uint8_t* iend = ip + piece[0].n;
  // Moves to the next piece with a byte left; false at the end of the last.
  const auto more = [&] {
    while (ip == iend) {
      if (++k == n) return false;
      ip = piece[k].p;
      iend = ip + piece[k].n;
    }
    return true;
  };
  // A length's extra bytes, across pieces.
  const auto extra = [&](std::size_t* len) {
    unsigned b;
    do {
      if (!more()) return false;
      b = *ip++;
      *len += b;
    } while (b == 255);
    return true;
  };
  for (;;) {
    if (!FastSequences(&ip, iend, &op, dst, oend)) return -1;
    // One sequence, byte by byte across pieces.
    if (!more()) return -1;
    const unsigned token = *ip++;
    std::size_t ll = token >> 4;
    if ((ll == 15 && !extra(&ll)) || static_cast<std::size_t>(oend - op) < ll) {
      return -1;
    }
    while (ll > 0) {
      if (!more()) return -1;
      const std::size_t c = std::min<std::size_t>(ll, iend - ip);
      std::memcpy(op, ip, c);
      op += c;
      ip += c;
      ll -= c;
    }
    if (ip == iend && k + 1 == n) return op - dst;  // the last literals
    std::size_t off = 0;
    for (int i = 0; i < 2; ++i) {
      if (!more()) return -1;
      off |= std::size_t{*ip++} << (8 * i);
    }
    std::size_t ml = token & 15;
    if (ml == 15 && !extra(&ml)) return -1;
    ml += 4;
    if (off == 0 || off > static_cast<std::size_t>(op - dst) ||
        static_cast<std::size_t>(oend - op) < ml) {
      return -1;
    }
    // Exact, in chunks that double: [op - off, op) is whole periods.
    const std::uint8_t* const match = op - off;
    for (std::size_t chunk = off; ml > 0; chunk = op - match) {
      const std::size_t c = std::min(chunk, ml);
      std::memcpy(op, match, c);
      op += c;
      ml -= c;
    }
  }
}

// Objects copied back to back into one buffer.
class Packed {
 public:
  explicit Packed(const std::vector<std::vector<char>>& objs) {
    for (const std::vector<char>& o : objs) {
      start_.push_back(bytes_.size());
      bytes_.insert(bytes_.end(), o.begin(), o.end());
    }
    start_.push_back(bytes_.size());
  }
  const char* at(std::size_t i) const { return &bytes_[start_[i]]; }
  std::size_t size(std::size_t i) const { return start_[i + 1] - start_[i]; }

 private:
  std::vector<char> bytes_;
  std::vector<std::size_t> start_;
};

// Prints each read's MB/s for `pages` pages read in `seconds`, and every
// read after the first over the first (per-page), on the rest of a line.
void PrintRates(std::size_t pages,
                std::initializer_list<std::pair<const char*, double>> seconds) {
  const double mb = static_cast<double>(pages * kPage) / 1e6;
  const double base = seconds.begin()->second;
  const char* sep = "";
  for (const auto& [name, s] : seconds) {
    std::printf("%s%s %.0f MB/s", sep, name, mb / s);
    if (*sep != '\0') std::printf(" (%.3fx)", base / s);
    sep = ", ";
  }
  std::printf("\n");
}

std::size_t Bytes(const std::vector<std::vector<char>>& objs) {
  std::size_t n = 0;
  for (const std::vector<char>& o : objs) n += o.size();
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: unit_read_bound FILE.pages\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> data((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
  const std::size_t units = data.size() / kPage / kUnit;
  if (units == 0) {
    std::fprintf(stderr, "%s: fewer than %zu pages\n", argv[1], kUnit);
    return 1;
  }
  const std::size_t pages = units * kUnit;
  std::vector<std::size_t> order(pages);
  for (std::size_t i = 0; i < pages; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  std::vector<char> out(kUnit * kPage);
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  for (const bool lz4 : {true, false}) {
    std::vector<std::vector<char>> page_obj(pages), unit_obj(units),
        anchor_obj(pages);
    for (std::size_t i = 0; i < pages; ++i) {
      page_obj[i] = Compress(lz4, &data[i * kPage], kPage);
      const std::size_t first = i - i % kUnit;
      anchor_obj[i] = i == first ? page_obj[i]
                                 : Compress(lz4, &data[i * kPage], kPage,
                                            &data[first * kPage], kPage);
    }
    for (std::size_t u = 0; u < units; ++u) {
      unit_obj[u] = Compress(lz4, &data[u * kUnit * kPage], kUnit * kPage);
    }
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = Clock::now();
      for (const std::size_t i : order) {
        const std::vector<char>& o = page_obj[i];
        Decompress(lz4, dctx, o.data(), o.size(), out.data(), kPage);
      }
      const auto t1 = Clock::now();
      for (const std::size_t i : order) {
        const std::vector<char>& o = unit_obj[i / kUnit];
        Decompress(lz4, dctx, o.data(), o.size(), out.data(), kUnit * kPage);
      }
      const auto t2 = Clock::now();
      for (const std::size_t i : order) {
        const std::vector<char>& o = unit_obj[i / kUnit];
        const std::size_t want = (i % kUnit + 1) * kPage;
        if (lz4) {
          LZ4_decompress_safe_partial(o.data(), out.data(),
                                      static_cast<int>(o.size()),
                                      static_cast<int>(want), kUnit * kPage);
          continue;
        }
        ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
        ZSTD_inBuffer src{o.data(), o.size(), 0};
        ZSTD_outBuffer dst{out.data(), want, 0};
        while (dst.pos < want) {
          const std::size_t r = ZSTD_decompressStream(dctx, &dst, &src);
          if (ZSTD_isError(r) || r == 0) break;
        }
      }
      const auto t3 = Clock::now();
      char* anchor = &out[kPage];  // the unit's first page, decompressed
      for (const std::size_t i : order) {
        const std::size_t first = i - i % kUnit;
        const std::vector<char>& a = anchor_obj[first];
        const std::vector<char>& o = anchor_obj[i];
        Decompress(lz4, dctx, a.data(), a.size(), anchor, kPage);
        if (i == first) continue;
        if (lz4) {
          LZ4_decompress_safe_usingDict(o.data(), out.data(),
                                        static_cast<int>(o.size()), kPage,
                                        anchor, kPage);
        } else {
          ZSTD_decompress_usingDict(dctx, out.data(), kPage, o.data(), o.size(),
                                    anchor, kPage);
        }
      }
      const auto t4 = Clock::now();
      std::printf("%s %s run %d: ", argv[1], lz4 ? "lz4" : "zstd", rep + 1);
      PrintRates(pages, {{"per-page", Seconds(t0, t1)},
                         {"unit whole", Seconds(t1, t2)},
                         {"unit prefix", Seconds(t2, t3)},
                         {"anchor", Seconds(t3, t4)}});
    }
    // Objects in order, back to back, as a pool packs them.
    const Packed packed_pages(page_obj), packed_units(unit_obj);
    const auto decode_in_pieces = [&](std::size_t u) {
      Piece piece[kUnit + 1];
      std::size_t n = 0;
      for (std::size_t at = 0; at < packed_units.size(u); at += kPage) {
        piece[n++] = {
            reinterpret_cast<const std::uint8_t*>(packed_units.at(u) + at),
            std::min(kPage, packed_units.size(u) - at)};
      }
      return DecodeLz4Pieces(
          piece, n, reinterpret_cast<std::uint8_t*>(out.data()), kUnit * kPage);
    };
    for (std::size_t u = 0; lz4 && u < units; ++u) {
      const long got = decode_in_pieces(u);
      if (got != static_cast<long>(kUnit * kPage) ||
          std::memcmp(out.data(), &data[u * kUnit * kPage], kUnit * kPage)) {
        std::fprintf(stderr, "%s: unit %zu reads back different in pieces\n",
                     argv[1], u);
        return 1;
      }
    }
    std::vector<char> gathered(LZ4_compressBound(kUnit * kPage) +
                               ZSTD_compressBound(kUnit * kPage));
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < pages; ++i) {
        Decompress(lz4, dctx, packed_pages.at(i), packed_pages.size(i),
                   &out[i % kUnit * kPage], kPage);
      }
      const auto t1 = Clock::now();
      for (std::size_t u = 0; u < units; ++u) {
        Decompress(lz4, dctx, packed_units.at(u), packed_units.size(u),
                   out.data(), kUnit * kPage);
      }
      const auto t2 = Clock::now();
      for (std::size_t u = 0; u < units; ++u) {
        std::copy_n(packed_units.at(u), packed_units.size(u), gathered.data());
        Decompress(lz4, dctx, gathered.data(), packed_units.size(u), out.data(),
                   kUnit * kPage);
      }
      const auto t3 = Clock::now();
      for (std::size_t u = 0; lz4 && u < units; ++u) decode_in_pieces(u);
      const auto t4 = Clock::now();
      std::printf("%s %s in order, run %d: ", argv[1], lz4 ? "lz4" : "zstd",
                  rep + 1);
      if (lz4) {
        PrintRates(pages, {{"per-page", Seconds(t0, t1)},
                           {"unit", Seconds(t1, t2)},
                           {"unit gathered", Seconds(t2, t3)},
                           {"unit in pieces", Seconds(t3, t4)}});
      } else {
        PrintRates(pages, {{"per-page", Seconds(t0, t1)},
                           {"unit", Seconds(t1, t2)},
                           {"unit gathered", Seconds(t2, t3)}});
      }
    }
    const double per_page = static_cast<double>(Bytes(page_obj));
    std::printf(
        "%s %s compressed bytes over per-page: units of %zu %.3f, anchor "
        "%.3f (per-page %zu, units %zu, anchor %zu bytes)\n",
        argv[1], lz4 ? "lz4" : "zstd", kUnit, Bytes(unit_obj) / per_page,
        Bytes(anchor_obj) / per_page, Bytes(page_obj), Bytes(unit_obj),
        Bytes(anchor_obj));
  }
  ZSTD_freeDCtx(dctx);

  std::vector<std::size_t> sizes(pages, kPage);
  std::size_t units_alone = 0;
  for (std::size_t u = 0; u < units; ++u) {
    units_alone += Compress(false, &data[u * kUnit * kPage], kUnit * kPage).size();
  }
  for (const std::size_t dict_cap : {std::size_t{16} << 10, std::size_t{64} << 10}) {
    std::vector<char> dict(dict_cap);
    const std::size_t dict_len = ZDICT_trainFromBuffer(
        dict.data(), dict.size(), data.data(), sizes.data(),
        static_cast<unsigned>(pages));
    if (ZDICT_isError(dict_len)) {
      std::printf("%s zstd dictionary of %zu bytes: training failed: %s\n",
                  argv[1], dict_cap, ZDICT_getErrorName(dict_len));
      continue;
    }
    std::size_t with = 0;
    for (std::size_t u = 0; u < units; ++u) {
      with += Compress(false, &data[u * kUnit * kPage], kUnit * kPage,
                       dict.data(), dict_len)
                  .size();
    }
    std::printf(
        "%s zstd units of %zu with a %zu-byte dictionary: %zu bytes, %.3f of "
        "units alone (%zu bytes); with the dictionary's bytes %zu\n",
        argv[1], kUnit, dict_len, with,
        static_cast<double>(with) / static_cast<double>(units_alone),
        units_alone, with + dict_len);
  }
  return 0;
}
