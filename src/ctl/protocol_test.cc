// protocol_test.cc: framing of control requests and replies, and the status
// report's JSON and table.
#include "ctl/protocol.h"

#include <cstring>
#include <random>

#include "ctl/status_report.h"
#include "testing/test_util.h"

namespace ztier::ctl {
namespace {

TEST(ProtocolTest, RequestRoundTripsAtEveryPrefix) {
  WireRequest req;
  req.device = "zram0";
  req.attribute = "algorithm_params";
  req.value = "level=3 dict=/x\nsecond line";
  const std::string wire = EncodeRequest(req);
  EXPECT_EQ(wire.substr(0, wire.find('\n')), "REQ 5 16 27");
  for (std::size_t n = 0; n < wire.size(); ++n) {
    EXPECT_EQ(ParseRequest(wire.substr(0, n)).state, ParseState::kNeedMore) << n;
  }
  RequestParse p = ParseRequest(wire + "REQ trailing");
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_EQ(p.consumed, wire.size());
  EXPECT_EQ(p.request.device, "zram0");
  EXPECT_EQ(p.request.attribute, "algorithm_params");
  ASSERT_TRUE(p.request.value.has_value());
  EXPECT_EQ(*p.request.value, *req.value);
}

TEST(ProtocolTest, ShowHasNoValueAndEmptyValueIsAStore) {
  WireRequest show{"", "status", std::nullopt};
  EXPECT_EQ(EncodeRequest(show), "REQ 0 6 -\nstatus");
  RequestParse p = ParseRequest(EncodeRequest(show));
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_FALSE(p.request.value.has_value());
  EXPECT_TRUE(p.request.device.empty());

  WireRequest store{"zram0", "compact", std::string()};
  p = ParseRequest(EncodeRequest(store));
  ASSERT_EQ(p.state, ParseState::kDone);
  ASSERT_TRUE(p.request.value.has_value());
  EXPECT_EQ(*p.request.value, "");
}

TEST(ProtocolTest, MalformedRequests) {
  for (const char* bad : {"GET / HTTP/1.0\r\n", "R", "REQ\n", "REQ 1 2\n",
                          "REQ 1 2 3 4\n", "REQ a 2 3\n", "REQ -1 2 3\n",
                          "REQ 1  2 3\n", "REQ +1 2 3\n", "REQ 1 2 -3\n",
                          "REQ 1234567890 1 1\n", "\0\0\0\0"}) {
    const std::string in(bad, std::strlen(bad) == 0 ? 4 : std::strlen(bad));
    RequestParse p = ParseRequest(in);
    if (in == "R") {
      EXPECT_EQ(p.state, ParseState::kNeedMore);
      continue;
    }
    EXPECT_EQ(p.state, ParseState::kMalformed) << bad;
    EXPECT_EQ(p.errno_name, "EINVAL") << bad;
  }
  // No newline within the header limit.
  EXPECT_EQ(ParseRequest("REQ " + std::string(100, '1')).state,
            ParseState::kMalformed);
}

TEST(ProtocolTest, OversizedRequestIsE2bigBeforeItsBody) {
  RequestParse p = ParseRequest("REQ 5 8 100000\nzram0");
  EXPECT_EQ(p.state, ParseState::kMalformed);
  EXPECT_EQ(p.errno_name, "E2BIG");
  // Exactly at the limit is fine.
  const std::string header = "REQ 0 1 ";
  std::string value(kMaxRequestBytes, 'x');
  const std::string head = header + "XXXXX\n";  // width of the length
  value.resize(kMaxRequestBytes - head.size() - 1);
  WireRequest req{"", "a", value};
  const std::string wire = EncodeRequest(req);
  ASSERT_EQ(wire.size(), kMaxRequestBytes);
  EXPECT_EQ(ParseRequest(wire).state, ParseState::kDone);
  req.value->push_back('y');
  EXPECT_EQ(ParseRequest(EncodeRequest(req)).errno_name, "E2BIG");
}

TEST(ProtocolTest, RandomBytesNeverCrash) {
  std::mt19937 rng(301);
  for (int i = 0; i < 2000; ++i) {
    std::string in(rng() % 80, '\0');
    for (char& c : in) c = static_cast<char>(rng());
    if (i % 2 == 0) in = "REQ " + in;
    (void)ParseRequest(in);
    (void)ParseReply(in);
    (void)ParseReply("OK " + in);
    (void)ParseReply("ERR " + in);
  }
}

TEST(ProtocolTest, Replies) {
  const std::string ok = EncodeOk("lzo [lz4]\n");
  EXPECT_EQ(ok, "OK 10\nlzo [lz4]\n");
  for (std::size_t n = 0; n < ok.size(); ++n) {
    EXPECT_EQ(ParseReply(ok.substr(0, n)).state, ParseState::kNeedMore) << n;
  }
  ReplyParse p = ParseReply(ok);
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_TRUE(p.reply.ok);
  EXPECT_EQ(p.reply.text, "lzo [lz4]\n");
  EXPECT_EQ(p.consumed, ok.size());

  const std::string err = EncodeError("EBUSY", "device has\n1 client\0x");
  EXPECT_EQ(err, "ERR EBUSY device has 1 client\n");
  p = ParseReply(err);
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_FALSE(p.reply.ok);
  EXPECT_EQ(p.reply.errno_name, "EBUSY");
  EXPECT_EQ(p.reply.message, "device has 1 client");

  EXPECT_EQ(EncodeError("EINVAL", std::string(5000, 'm')).size(),
            4 + 6 + 1 + kMaxErrorMessageBytes + 1);
  EXPECT_EQ(ParseReply("OK x\n").state, ParseState::kMalformed);
  EXPECT_EQ(ParseReply("OK 999999999\n", 100).state, ParseState::kMalformed);
  EXPECT_EQ(ParseReply("HTTP/1.1").state, ParseState::kMalformed);
  EXPECT_EQ(ParseReply("ERR \n").state, ParseState::kMalformed);
}

TEST(StatusReportTest, HumanSizesLikeZramctl) {
  EXPECT_EQ(FormatHumanSize(0), "0B");
  EXPECT_EQ(FormatHumanSize(512), "512B");
  EXPECT_EQ(FormatHumanSize(1023), "1023B");
  EXPECT_EQ(FormatHumanSize(1024), "1K");
  EXPECT_EQ(FormatHumanSize(4096), "4K");
  EXPECT_EQ(FormatHumanSize(1536), "1.5K");
  EXPECT_EQ(FormatHumanSize(4718592), "4.5M");  // 4.5 MiB
  EXPECT_EQ(FormatHumanSize(1ULL << 30), "1G");
  EXPECT_EQ(FormatHumanSize(8267825152ULL), "7.7G");
  EXPECT_EQ(FormatHumanSize(1048575), "1024K");   // util-linux: no carry
  EXPECT_EQ(FormatHumanSize(1024 + 51), "1K");    // 1.0498 -> 1.0
  EXPECT_EQ(FormatHumanSize(1024 + 52), "1.1K");  // 1.0507 -> 1.1
  EXPECT_EQ(FormatHumanSize(UINT64_MAX), "16E");
}

TEST(StatusReportTest, JsonRoundTripAndTable) {
  DeviceStatus a;
  a.name = "zram0";
  a.algorithm = "lzo-rle";
  a.initstate = 1;
  a.disksize = 8267825152ULL;
  a.orig_data_size = 1288490189;
  a.compr_data_size = 445750886;
  a.mem_used_total = 463793766;
  a.streams = 8;
  a.clients = 1;
  DeviceStatus b;
  b.name = "zram1";
  b.algorithm = "zstd";
  b.streams = 8;
  const std::string json = EncodeStatusJson({a, b});
  auto back = DecodeStatusJson(json);
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].name, "zram0");
  EXPECT_EQ((*back)[0].algorithm, "lzo-rle");
  EXPECT_EQ((*back)[0].disksize, a.disksize);
  EXPECT_EQ((*back)[0].mem_used_total, a.mem_used_total);
  EXPECT_EQ((*back)[0].clients, 1u);
  EXPECT_EQ((*back)[1].initstate, 0u);

  EXPECT_EQ(FormatStatusTable(*back),
            "NAME  ALGORITHM DISKSIZE DATA  COMPR  TOTAL STREAMS CLIENTS\n"
            "zram0 lzo-rle       7.7G 1.2G 425.1M 442.3M       8       1\n"
            "zram1 zstd            0B   0B     0B     0B       8       0\n");
  EXPECT_EQ(FormatStatusTable({}), "");
  EXPECT_EQ(EncodeStatusJson({}), "{\"version\":1,\"devices\":[]}\n");
  auto empty = DecodeStatusJson(EncodeStatusJson({}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
}

TEST(StatusReportTest, DecodeRejectsGarbageAndIgnoresUnknownKeys) {
  for (const char* bad :
       {"", "[]", "{", "{\"devices\":{}}", "{\"devices\":[1]}",
        "{\"devices\":[{\"name\":\"a\",\"disksize\":-1}]}",
        "{\"devices\":[{\"name\":\"a\",\"disksize\":\"1\"}]}",
        "{\"devices\":[{}]}", "{\"devices\":[]} x",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}) {
    EXPECT_FALSE(DecodeStatusJson(bad).has_value()) << bad;
  }
  auto ok = DecodeStatusJson(
      "{\"devices\":[{\"name\":\"z\\u0041\",\"new\":[true,null,{}],"
      "\"disksize\":4096}],\"extra\":1.5e3}");
  ASSERT_TRUE(ok.has_value()) << ok.error().ToString();
  EXPECT_EQ((*ok)[0].name, "zA");
  EXPECT_EQ((*ok)[0].disksize, 4096u);
}

}  // namespace
}  // namespace ztier::ctl
