// nbd_block_status_test.cc: structured replies, the base:allocation meta
// context and NBD_CMD_BLOCK_STATUS (docs/nbd_subset.md; doc/proto.md of the
// NetworkBlockDevice/nbd project). A raw protocol client checks the bytes on
// the wire; the real clients (nbdinfo --map, nbdcopy) check that they make
// use of it: a copy out of a nearly empty export gives a sparse file.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "nbd_test_util.h"
#include "nbd/protocol.h"
#include "testing/test_util.h"

namespace ztier::nbd {
namespace {

using testing::GatedReads;
using testing::HaveProgram;
using testing::RandomBytes;
using testing::RawClient;
using testing::RunCommand;
using testing::ServerFixture;
using testing::WriteBackPageZero;

#define REQUIRE_PROGRAM(name)                              \
  if (!HaveProgram(name)) GTEST_SKIP() << name " is not installed"

std::string Quote(const std::string& s) { return "'" + s + "'"; }

constexpr std::uint32_t kPage = 4096;
constexpr std::uint32_t kHoleZero = kStateHole | kStateZero;

// ---- raw protocol helpers ----

void Append(std::vector<std::byte>* out, const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out->insert(out->end(), b, b + n);
}
void AppendU32(std::vector<std::byte>* out, std::uint32_t v) {
  v = ToBig(v);
  Append(out, &v, 4);
}
void AppendString(std::vector<std::byte>* out, const std::string& s) {
  AppendU32(out, static_cast<std::uint32_t>(s.size()));
  Append(out, s.data(), s.size());
}

struct OptionReply {
  std::uint32_t type = 0;
  std::string body;
};

// Sends one option; returns its replies up to and including the ACK or
// error (empty if the connection failed).
std::vector<OptionReply> Option(RawClient& c, std::uint32_t option,
                                const std::vector<std::byte>& data) {
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(option),
                    ToBig(static_cast<std::uint32_t>(data.size()))};
  std::vector<OptionReply> replies;
  if (!c.Send(&h, sizeof(h)) ||
      (!data.empty() && !c.Send(data.data(), data.size()))) {
    return replies;
  }
  for (;;) {
    OptionReplyHeader r;
    if (!c.Recv(&r, sizeof(r))) return {};
    EXPECT_EQ(FromBig(r.option), option);
    OptionReply reply;
    reply.type = FromBig(r.reply_type);
    reply.body.resize(FromBig(r.length));
    if (!reply.body.empty() && !c.Recv(reply.body.data(), reply.body.size())) {
      return {};
    }
    replies.push_back(reply);
    if (reply.type == kRepAck || (reply.type & kRepFlagError) != 0) {
      return replies;
    }
  }
}

std::vector<std::uint32_t> Types(const std::vector<OptionReply>& replies) {
  std::vector<std::uint32_t> t;
  for (const auto& r : replies) t.push_back(r.type);
  return t;
}

// Greeting and client flags.
void Greet(RawClient& c) {
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  ASSERT_EQ(FromBig(g.nbd_magic), kNbdMagic);
  const std::uint32_t flags =
      ToBig(kClientFlagFixedNewstyle | kClientFlagNoZeroes);
  ASSERT_TRUE(c.Send(&flags, 4));
}

std::vector<std::byte> MetaRequest(const std::string& export_name,
                                   const std::vector<std::string>& queries) {
  std::vector<std::byte> d;
  AppendString(&d, export_name);
  AppendU32(&d, static_cast<std::uint32_t>(queries.size()));
  for (const auto& q : queries) AppendString(&d, q);
  return d;
}

// NBD_OPT_GO for `name`; returns the transmission flags (-1 on failure).
int Go(RawClient& c, const std::string& name) {
  std::vector<std::byte> d;
  AppendString(&d, name);
  const std::uint16_t none = 0;
  Append(&d, &none, 2);
  int flags = -1;
  for (const auto& r : Option(c, kOptGo, d)) {
    if (r.type == kRepInfo && r.body.size() == sizeof(InfoExport)) {
      InfoExport ie;
      std::memcpy(&ie, r.body.data(), sizeof(ie));
      flags = FromBig(ie.transmission_flags);
    }
    if (r.type == kRepAck) return flags;
  }
  return -1;
}

// A structured reply chunk as received.
struct Chunk {
  std::uint16_t flags = 0;
  std::uint16_t type = 0;
  std::uint64_t cookie = 0;
  std::vector<std::byte> payload;

  std::uint32_t U32(std::size_t at) const {
    std::uint32_t v;
    std::memcpy(&v, payload.data() + at, 4);
    return FromBig(v);
  }
  std::uint64_t U64(std::size_t at) const {
    std::uint64_t v;
    std::memcpy(&v, payload.data() + at, 8);
    return FromBig(v);
  }
  // NBD_REPLY_TYPE_ERROR: the error value.
  std::uint32_t Error() const { return U32(0); }
  // NBD_REPLY_TYPE_BLOCK_STATUS: (length, flags) pairs.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> Extents() const {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> e;
    for (std::size_t at = 4; at + 8 <= payload.size(); at += 8) {
      e.emplace_back(U32(at), U32(at + 4));
    }
    return e;
  }
};

bool ReadChunk(RawClient& c, Chunk* chunk) {
  StructuredReplyHeader h;
  if (!c.Recv(&h, sizeof(h))) return false;
  EXPECT_EQ(FromBig(h.magic), kStructuredReplyMagic);
  if (FromBig(h.magic) != kStructuredReplyMagic) return false;
  chunk->flags = FromBig(h.flags);
  chunk->type = FromBig(h.type);
  chunk->cookie = h.cookie;
  chunk->payload.resize(FromBig(h.length));
  return chunk->payload.empty() ||
         c.Recv(chunk->payload.data(), chunk->payload.size());
}

// Sends a request and reads its (one-chunk) structured reply.
Chunk Request(RawClient& c, std::uint16_t type, std::uint16_t flags,
              std::uint64_t offset, std::uint32_t length) {
  static std::uint64_t next_cookie = 100;
  const std::uint64_t cookie = next_cookie++;
  Chunk chunk;
  EXPECT_TRUE(c.SendRequest(type, flags, cookie, offset, length));
  EXPECT_TRUE(ReadChunk(c, &chunk));
  EXPECT_EQ(chunk.cookie, cookie);
  EXPECT_EQ(chunk.flags, kReplyFlagDone);
  return chunk;
}

// A connection that negotiated structured replies (and base:allocation for
// `name` when `meta`) and chose `name`.
void Connect(RawClient& c, const std::string& name, bool meta) {
  Greet(c);
  ASSERT_EQ(Types(Option(c, kOptStructuredReply, {})),
            std::vector<std::uint32_t>{kRepAck});
  if (meta) {
    const auto r =
        Option(c, kOptSetMetaContext, MetaRequest(name, {"base:allocation"}));
    ASSERT_EQ(Types(r), (std::vector<std::uint32_t>{kRepMetaContext, kRepAck}));
  }
  const int flags = Go(c, name);
  ASSERT_GE(flags, 0);
  EXPECT_EQ(flags, kTransmissionFlags | kTFlagSendDf);
}

// ---- raw protocol tests ----

TEST(NbdBlockStatusTest, WithoutNegotiationBlockStatusIsEinvalAndReadSimple) {
  ServerFixture f(1 << 20);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), 1 << 20);
  ASSERT_TRUE(c.SendRequest(kCmdBlockStatus, 0, 7, 0, kPage));
  std::uint32_t error = 0;
  std::uint64_t cookie = 0;
  ASSERT_TRUE(c.ReadReply(&error, &cookie));  // a simple reply
  EXPECT_EQ(error, kErrInval);
  EXPECT_EQ(cookie, 7u);
  // READ is unchanged: a simple reply with its data.
  const auto data = RandomBytes(kPage, 1);
  ASSERT_TRUE(c.Write(kPage, data, &error));
  ASSERT_EQ(error, 0u);
  std::vector<std::byte> back;
  ASSERT_TRUE(c.Read(kPage, kPage, &back, &error));
  EXPECT_EQ(error, 0u);
  EXPECT_EQ(back, data);
  // DF is not advertised without structured replies, so it is refused.
  ASSERT_TRUE(c.SendRequest(kCmdRead, kCmdFlagDf, 8, 0, kPage));
  ASSERT_TRUE(c.ReadReply(&error, &cookie));
  EXPECT_EQ(error, kErrInval);
}

TEST(NbdBlockStatusTest, MetaContextOptions) {
  ServerFixture f(1 << 20);
  ASSERT_TRUE(f.registry().Add("zram1").has_value());
  RawClient c(f.socket());
  Greet(c);
  // Before STRUCTURED_REPLY both meta context options are invalid.
  EXPECT_EQ(Types(Option(c, kOptSetMetaContext,
                         MetaRequest("zram0", {"base:allocation"}))),
            std::vector<std::uint32_t>{kRepErrInvalid});
  EXPECT_EQ(Types(Option(c, kOptListMetaContext, MetaRequest("zram0", {}))),
            std::vector<std::uint32_t>{kRepErrInvalid});
  ASSERT_EQ(Types(Option(c, kOptStructuredReply, {})),
            std::vector<std::uint32_t>{kRepAck});
  // LIST: no query, "base:" and "base:allocation" list it, with id 0.
  for (const auto& queries : std::vector<std::vector<std::string>>{
           {}, {"base:"}, {"base:allocation"}, {"x-other:", "base:"}}) {
    const auto r =
        Option(c, kOptListMetaContext, MetaRequest("zram0", queries));
    ASSERT_EQ(Types(r), (std::vector<std::uint32_t>{kRepMetaContext, kRepAck}));
    ASSERT_EQ(r[0].body.size(), 4 + kBaseAllocation.size());
    EXPECT_EQ(r[0].body.substr(0, 4), std::string(4, '\0'));
    EXPECT_EQ(r[0].body.substr(4), kBaseAllocation);
  }
  // Unknown namespaces and leaf names are ignored; SET ignores "base:".
  EXPECT_EQ(Types(Option(c, kOptListMetaContext,
                         MetaRequest("zram0", {"qemu:dirty-bitmap:b",
                                               "base:nothing"}))),
            std::vector<std::uint32_t>{kRepAck});
  EXPECT_EQ(Types(Option(c, kOptSetMetaContext,
                         MetaRequest("zram0", {"base:"}))),
            std::vector<std::uint32_t>{kRepAck});
  // Malformed: a query longer than the option, trailing bytes.
  std::vector<std::byte> bad = MetaRequest("zram0", {});
  bad[bad.size() - 1] = std::byte{1};  // one query...
  AppendU32(&bad, 100);               // ...of 100 bytes that are not there
  EXPECT_EQ(Types(Option(c, kOptSetMetaContext, bad)),
            std::vector<std::uint32_t>{kRepErrInvalid});
  std::vector<std::byte> trailing = MetaRequest("zram0", {"base:allocation"});
  trailing.push_back(std::byte{0});
  EXPECT_EQ(Types(Option(c, kOptListMetaContext, trailing)),
            std::vector<std::uint32_t>{kRepErrInvalid});
  EXPECT_EQ(Types(Option(c, kOptListMetaContext, MetaRequest("nope", {}))),
            std::vector<std::uint32_t>{kRepErrUnknown});
  // SET: one context with a nonzero id, even when asked twice.
  const auto set = Option(c, kOptSetMetaContext,
                          MetaRequest("zram0", {"base:allocation",
                                                "base:allocation"}));
  ASSERT_EQ(Types(set), (std::vector<std::uint32_t>{kRepMetaContext, kRepAck}));
  EXPECT_EQ(set[0].body.substr(4), kBaseAllocation);
  // Selected for zram0 but GO picks zram1: BLOCK_STATUS stays refused.
  ASSERT_TRUE(f.registry().Find("zram1")->SetDisksize(1 << 20).ok());
  ASSERT_GE(Go(c, "zram1"), 0);
  const Chunk r = Request(c, kCmdBlockStatus, 0, 0, kPage);
  EXPECT_EQ(r.type, kReplyTypeError);
  EXPECT_EQ(r.Error(), kErrInval);
}

// proto.md, "Conventions": a string is at most 4096 bytes, so a longer
// query or export name makes the request invalid; an option too long for
// the server to take is NBD_REP_ERR_TOO_BIG ("Option reply types"; for
// LIST_META_CONTEXT, "too many queries"). Neither ends the negotiation
// (the server "MUST ... simply error inbound options": "Termination of the
// session during option haggling"), and BLOCK_STATUS works once
// base:allocation is selected.
TEST(NbdBlockStatusTest,
     OverlongMetaContextRequestsAreRefusedAndTheHandshakeGoesOn) {
  ServerFixture f(1 << 20);
  RawClient c(f.socket());
  Greet(c);
  ASSERT_EQ(Types(Option(c, kOptStructuredReply, {})),
            std::vector<std::uint32_t>{kRepAck});
  const std::string long_query = "base:" + std::string(kMaxNameLength, 'x');
  for (const std::uint32_t option : {kOptListMetaContext, kOptSetMetaContext}) {
    EXPECT_EQ(Types(Option(c, option, MetaRequest("zram0", {long_query}))),
              std::vector<std::uint32_t>{kRepErrInvalid});
    EXPECT_EQ(Types(Option(c, option,
                           MetaRequest(std::string(kMaxNameLength + 1, 'z'),
                                       {"base:allocation"}))),
              std::vector<std::uint32_t>{kRepErrInvalid});
    // Valid strings, but more of them than the server takes in one option.
    std::vector<std::string> many(kMaxOptionLength / 4000 + 1,
                                  "x-other:" + std::string(4000, 'q'));
    many.push_back("base:allocation");
    EXPECT_EQ(Types(Option(c, option, MetaRequest("zram0", many))),
              std::vector<std::uint32_t>{kRepErrTooBig});
  }
  const auto r =
      Option(c, kOptSetMetaContext, MetaRequest("zram0", {"base:allocation"}));
  ASSERT_EQ(Types(r), (std::vector<std::uint32_t>{kRepMetaContext, kRepAck}));
  ASSERT_GE(Go(c, "zram0"), 0);
  const Chunk status = Request(c, kCmdBlockStatus, 0, 0, kPage);
  EXPECT_EQ(status.type, kReplyTypeBlockStatus);
}

// proto.md, NBD_OPT_SET_META_CONTEXT: "Issuing this command replaces all
// previously-set metadata contexts (including when this command fails)";
// one answered NBD_REP_ERR_TOO_BIG fails too, and leaves none selected.
TEST(NbdBlockStatusTest, AnOverlongSetMetaContextClearsTheSelection) {
  ServerFixture f(1 << 20);
  RawClient c(f.socket());
  Greet(c);
  ASSERT_EQ(Types(Option(c, kOptStructuredReply, {})),
            std::vector<std::uint32_t>{kRepAck});
  ASSERT_EQ(Types(Option(c, kOptSetMetaContext,
                         MetaRequest("zram0", {"base:allocation"}))),
            (std::vector<std::uint32_t>{kRepMetaContext, kRepAck}));
  std::vector<std::string> many(kMaxOptionLength / 4000 + 1,
                                "x-other:" + std::string(4000, 'q'));
  many.push_back("base:allocation");
  ASSERT_EQ(Types(Option(c, kOptSetMetaContext, MetaRequest("zram0", many))),
            std::vector<std::uint32_t>{kRepErrTooBig});
  ASSERT_GE(Go(c, "zram0"), 0);
  const Chunk r = Request(c, kCmdBlockStatus, 0, 0, kPage);
  EXPECT_EQ(r.type, kReplyTypeError) << "base:allocation still selected";
  EXPECT_EQ(r.Error(), kErrInval);
}

TEST(NbdBlockStatusTest, StructuredWithoutMetaContextRefusesBlockStatus) {
  ServerFixture f(1 << 20);
  RawClient c(f.socket());
  Connect(c, "zram0", /*meta=*/false);
  const Chunk r = Request(c, kCmdBlockStatus, 0, 0, kPage);
  EXPECT_EQ(r.type, kReplyTypeError);
  EXPECT_EQ(r.Error(), kErrInval);
  // The message follows the error and its length.
  ASSERT_GE(r.payload.size(), 6u);
  const std::size_t len = (static_cast<unsigned>(r.payload[4]) << 8) |
                          static_cast<unsigned>(r.payload[5]);
  EXPECT_EQ(r.payload.size(), 6 + len);
  EXPECT_GT(len, 0u);
}

TEST(NbdBlockStatusTest, ExtentsReqOneAndPastTheEnd) {
  constexpr std::uint64_t kSize = 16 * kPage;
  ServerFixture f(kSize);
  // Pages: 0 hole, 1-2 data, 3-4 hole, 5 zero (allocated), 6-15 hole.
  ASSERT_TRUE(f.device().Write(kPage, RandomBytes(2 * kPage, 2)).ok());
  ASSERT_TRUE(f.device().WriteZeroes(5 * kPage, kPage, /*no_hole=*/true).ok());
  RawClient c(f.socket());
  Connect(c, "zram0", /*meta=*/true);

  Chunk r = Request(c, kCmdBlockStatus, 0, 0, kSize);
  ASSERT_EQ(r.type, kReplyTypeBlockStatus);
  EXPECT_EQ(r.U32(0), kBaseAllocationId);
  using E = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
  EXPECT_EQ(r.Extents(), (E{{kPage, kHoleZero},
                            {2 * kPage, 0},
                            {2 * kPage, kHoleZero},
                            {kPage, kStateZero},
                            {10 * kPage, kHoleZero}}));
  // Unaligned: [6000, 16000) is data to 12288, then hole.
  r = Request(c, kCmdBlockStatus, 0, 6000, 10000);
  EXPECT_EQ(r.Extents(), (E{{12288 - 6000, 0}, {16000 - 12288, kHoleZero}}));
  // REQ_ONE: exactly one extent, never past the request's length.
  r = Request(c, kCmdBlockStatus, kCmdFlagReqOne, 0, kSize);
  EXPECT_EQ(r.Extents(), (E{{kPage, kHoleZero}}));
  r = Request(c, kCmdBlockStatus, kCmdFlagReqOne, kPage, 100);
  EXPECT_EQ(r.Extents(), (E{{100, 0}}));
  r = Request(c, kCmdBlockStatus, kCmdFlagReqOne, kPage, 8 * kPage);
  EXPECT_EQ(r.Extents(), (E{{2 * kPage, 0}}));
  // Past the end, zero length, and a flag BLOCK_STATUS does not take.
  for (const auto& [flags, offset, length] :
       std::vector<std::tuple<std::uint16_t, std::uint64_t, std::uint32_t>>{
           {0, kSize - kPage, 2 * kPage},
           {0, kSize + kPage, kPage},
           {0, 0, 0},
           {kCmdFlagDf, 0, kPage}}) {
    r = Request(c, kCmdBlockStatus, flags, offset, length);
    EXPECT_EQ(r.type, kReplyTypeError) << offset << "+" << length;
    EXPECT_EQ(r.Error(), kErrInval);
  }
  // Trimming data makes a hole again; the connection still works.
  ASSERT_TRUE(f.device().Trim(kPage, 2 * kPage).ok());
  r = Request(c, kCmdBlockStatus, 0, 0, 5 * kPage);
  EXPECT_EQ(r.Extents(), (E{{5 * kPage, kHoleZero}}));
}

// A READ of a written-back page holds the page's slot lock while it waits
// for the backing store (a remote's, during an outage, for up to its
// timeout). BLOCK_STATUS runs on the connection's reader: a range over that
// page is answered at once, the page as data (it is, until a writer changes
// it), not after the read, and the requests behind it (here a read from RAM)
// are not held either.
TEST(NbdBlockStatusTest, AReadOfAWrittenBackPageHoldsNoBlockStatus) {
  GatedReads gate;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  ServerFixture f(8 * kPage, {}, std::move(defaults));
  // Pages 0-1 data (0 written back), 2-7 zeros.
  auto data = RandomBytes(8 * kPage, 8);
  std::fill(data.begin() + 2 * kPage, data.end(), std::byte{0});
  ASSERT_NO_FATAL_FAILURE(WriteBackPageZero(f, data));
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 8 * kPage);
  ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 1, 0, kPage));  // written back
  ASSERT_TRUE(gate.WaitReads(1));  // blocked, holding page 0's slot lock
  RawClient b(f.socket());
  Connect(b, "zram0", /*meta=*/true);
  ASSERT_TRUE(b.SendRequest(kCmdBlockStatus, 0, 2, 0, 8 * kPage));
  ASSERT_TRUE(b.SendRequest(kCmdRead, 0, 3, kPage, kPage));  // in RAM
  Chunk status, read;
  const bool replied = ReadChunk(b, &status) && ReadChunk(b, &read);
  const int reads = gate.reads();
  gate.Open();  // else the server's stop waits for the backing read
  ASSERT_TRUE(replied) << "BLOCK_STATUS waited for another request's read";
  EXPECT_EQ(reads, 1);  // the first read was still blocked
  EXPECT_EQ(status.cookie, 2u);
  ASSERT_EQ(status.type, kReplyTypeBlockStatus);
  using E = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
  EXPECT_EQ(status.Extents(), (E{{2 * kPage, 0}, {6 * kPage, kStateZero}}));
  EXPECT_EQ(read.cookie, 3u);
  ASSERT_EQ(read.type, kReplyTypeOffsetData);
  ASSERT_EQ(read.payload.size(), 8 + kPage);
  EXPECT_EQ(read.U64(0), kPage);
  EXPECT_TRUE(std::equal(read.payload.begin() + 8, read.payload.end(),
                         data.begin() + kPage));
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  std::vector<std::byte> got;
  ASSERT_TRUE(a.ReadReply(&err, &cookie, &got, kPage));
  EXPECT_EQ(cookie, 1u);
  EXPECT_EQ(err, 0u);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
}

// Data in every other page (1, 3, 5, ...): one extent per page.
void WriteOddPages(ServerFixture& f, std::uint64_t pages) {
  const std::vector<std::byte> page(kPage, std::byte{0x11});
  for (std::uint64_t i = 1; i < pages; i += 2) {
    ASSERT_TRUE(f.device().Write(i * kPage, page).ok());
  }
}

TEST(NbdBlockStatusTest, ManyRunsAreCutAtTheExtentLimit) {
  const std::uint64_t pages = 2 * kMaxExtents + 64;
  ServerFixture f(pages * kPage);
  ASSERT_NO_FATAL_FAILURE(WriteOddPages(f, pages));
  RawClient c(f.socket());
  Connect(c, "zram0", /*meta=*/true);
  const Chunk r = Request(c, kCmdBlockStatus, 0, 0,
                          static_cast<std::uint32_t>(pages * kPage));
  ASSERT_EQ(r.type, kReplyTypeBlockStatus);
  const auto extents = r.Extents();
  ASSERT_EQ(extents.size(), kMaxExtents);
  for (std::size_t i = 0; i < extents.size(); ++i) {
    ASSERT_EQ(extents[i].first, kPage) << i;
    ASSERT_EQ(extents[i].second, i % 2 == 0 ? kHoleZero : 0u) << i;
  }
  // The client goes on from where the answer ended.
  const Chunk next = Request(c, kCmdBlockStatus, 0, kMaxExtents * kPage, kPage);
  EXPECT_EQ(next.Extents().size(), 1u);
}

// Each reply's payload stays within the advertised maximum payload: with
// 4 KiB requests, (4096 - 4) / 8 = 511 extents a reply.
TEST(NbdBlockStatusTest, ExtentsFitTheAdvertisedMaximumPayload) {
  const std::uint64_t pages = 2048;
  NbdServerOptions o;
  o.max_request_bytes = 4096;
  ServerFixture f(pages * kPage, o);
  ASSERT_NO_FATAL_FAILURE(WriteOddPages(f, pages));
  RawClient c(f.socket());
  Connect(c, "zram0", /*meta=*/true);
  const Chunk r = Request(c, kCmdBlockStatus, 0, 0,
                          static_cast<std::uint32_t>(pages * kPage));
  ASSERT_EQ(r.type, kReplyTypeBlockStatus);
  EXPECT_EQ(r.Extents().size(), 511u);
}

TEST(NbdBlockStatusTest, StructuredReads) {
  constexpr std::uint64_t kSize = 1 << 20;
  ServerFixture f(kSize);
  const auto data = RandomBytes(kSize, 3);
  ASSERT_TRUE(f.device().Write(0, data).ok());
  RawClient c(f.socket());
  Connect(c, "zram0", /*meta=*/false);
  // Small (served on the reader) and large (by a worker), with and without
  // DF, unaligned: one OFFSET_DATA chunk, marked done.
  for (const auto& [offset, length, flags] :
       std::vector<std::tuple<std::uint64_t, std::uint32_t, std::uint16_t>>{
           {0, kPage, 0},
           {100, 5000, kCmdFlagDf},
           {kPage, 512 << 10, 0},
           {3, kSize - 3, kCmdFlagDf}}) {
    const Chunk r = Request(c, kCmdRead, flags, offset, length);
    ASSERT_EQ(r.type, kReplyTypeOffsetData) << offset << "+" << length;
    ASSERT_EQ(r.payload.size(), 8 + length);
    EXPECT_EQ(r.U64(0), offset);
    EXPECT_EQ(0, std::memcmp(r.payload.data() + 8, data.data() + offset,
                             length));
  }
  // Zero length: a NONE chunk.
  Chunk r = Request(c, kCmdRead, 0, 0, 0);
  EXPECT_EQ(r.type, kReplyTypeNone);
  EXPECT_TRUE(r.payload.empty());
  // Errors are ERROR chunks, never simple replies.
  r = Request(c, kCmdRead, 0, kSize - 10, 20);
  EXPECT_EQ(r.type, kReplyTypeError);
  EXPECT_EQ(r.Error(), kErrInval);
  r = Request(c, kCmdRead, kCmdFlagReqOne, 0, kPage);
  EXPECT_EQ(r.type, kReplyTypeError);
  EXPECT_EQ(r.Error(), kErrInval);
  // Over the request limit (32 MiB by default): EOVERFLOW, which tells the
  // client to retry smaller (proto.md, NBD_CMD_READ), not that it erred.
  r = Request(c, kCmdRead, 0, 0, (32u << 20) + 1);
  EXPECT_EQ(r.type, kReplyTypeError);
  EXPECT_EQ(r.Error(), kErrOverflow);
  // Other commands keep simple replies.
  std::uint32_t error = 1;
  ASSERT_TRUE(c.Write(0, RandomBytes(kPage, 4), &error));
  EXPECT_EQ(error, 0u);
}

// ---- real clients ----

// One line of `nbdinfo --map`: offset, length, type.
struct MapLine {
  std::uint64_t offset, length;
  int type;
  bool operator==(const MapLine&) const = default;
};

std::vector<MapLine> ParseMap(const std::string& text) {
  std::vector<MapLine> lines;
  static const std::regex line(R"(^\s*(\d+)\s+(\d+)\s+(\d+)\s)");
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string l = text.substr(start, end - start) + " ";
    std::smatch m;
    if (std::regex_search(l, m, line)) {
      lines.push_back({std::stoull(m[1]), std::stoull(m[2]), std::stoi(m[3])});
    }
    start = end + 1;
  }
  return lines;
}

TEST(NbdBlockStatusClientsTest, NbdinfoMapAndCapabilities) {
  REQUIRE_PROGRAM("nbdinfo");
  constexpr std::uint64_t kSize = 64 << 20;
  ServerFixture f(kSize);
  // Data at [1 MiB, 1 MiB + 8 KiB) and at the last page; zeros (allocated)
  // at [2 MiB, 2 MiB + 4 KiB).
  ASSERT_TRUE(f.device().Write(1 << 20, RandomBytes(2 * kPage, 5)).ok());
  ASSERT_TRUE(f.device().Write(kSize - kPage, RandomBytes(kPage, 6)).ok());
  ASSERT_TRUE(f.device().WriteZeroes(2 << 20, kPage, true).ok());

  const auto can = RunCommand("nbdinfo --can structured-reply " + Quote(f.Uri()));
  EXPECT_EQ(can.exit_code, 0) << can.output;
  const auto df = RunCommand("nbdinfo --can df " + Quote(f.Uri()));
  EXPECT_EQ(df.exit_code, 0) << df.output;
  const auto info = RunCommand("nbdinfo " + Quote(f.Uri()));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("base:allocation"), std::string::npos)
      << info.output;

  const auto map = RunCommand("nbdinfo --map " + Quote(f.Uri()));
  ASSERT_EQ(map.exit_code, 0) << map.output;
  const std::vector<MapLine> want = {
      {0, 1 << 20, 3},
      {1 << 20, 2 * kPage, 0},
      {(1 << 20) + 2 * kPage, (1 << 20) - 2 * kPage, 3},
      {2 << 20, kPage, 2},
      {(2 << 20) + kPage, kSize - (2 << 20) - 2 * kPage, 3},
      {kSize - kPage, kPage, 0}};
  EXPECT_EQ(ParseMap(map.output), want) << map.output;
  const auto totals = RunCommand("nbdinfo --map --totals " + Quote(f.Uri()));
  ASSERT_EQ(totals.exit_code, 0) << totals.output;
  EXPECT_NE(totals.output.find(std::to_string(3 * kPage) + " "),
            std::string::npos)
      << totals.output;
}

TEST(NbdBlockStatusClientsTest, NbdcopyOfANearlyEmptyExportIsSparse) {
  REQUIRE_PROGRAM("nbdcopy");
  const std::uint64_t size =
      testing::UnderSanitizer() ? (256ull << 20) : (1ull << 30);
  ServerFixture f(size);
  const auto a = RandomBytes(64 << 10, 7);
  const auto b = RandomBytes(kPage, 8);
  ASSERT_TRUE(f.device().Write(0, a).ok());
  ASSERT_TRUE(f.device().Write(size / 2 + 512, b).ok());
  const std::string out = f.tmp().File("copy.img");
  const auto r = RunCommand("nbdcopy " + Quote(f.Uri()) + " " + Quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), size);
  // Written: 64 KiB + two pages; allow file system slack, not a full copy.
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, 8ull << 20)
      << "st_blocks " << st.st_blocks;
  // Identical content: compare the parts with data, and check the rest is
  // zero, without reading the whole file into memory twice.
  FILE* file = std::fopen(out.c_str(), "rb");
  ASSERT_NE(file, nullptr);
  std::vector<std::byte> chunk(1 << 20);
  std::vector<std::byte> want(1 << 20);
  bool same = true;
  for (std::uint64_t pos = 0; pos < size && same; pos += chunk.size()) {
    ASSERT_EQ(std::fread(chunk.data(), 1, chunk.size(), file), chunk.size());
    ASSERT_TRUE(f.device().Read(pos, want).ok());
    same = chunk == want;
    if (!same) ADD_FAILURE() << "differs in the MiB at " << pos;
  }
  std::fclose(file);
  std::remove(out.c_str());
}

}  // namespace
}  // namespace ztier::nbd
