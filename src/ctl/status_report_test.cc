// status_report_test.cc: the status report's JSON (every field, notes, older
// reports without the new keys) and the zramctl-style table's options.
#include "ctl/status_report.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace ztier::ctl {
namespace {

DeviceStatus Sample() {
  DeviceStatus d;
  d.name = "zram0";
  d.algorithm = "lz4";
  d.initstate = 1;
  d.disksize = 1 << 30;
  d.orig_data_size = 8 << 20;
  d.compr_data_size = 2 << 20;
  d.mem_used_total = 4 << 20;
  d.mem_limit = 64 << 20;
  d.mem_used_max = 5 << 20;
  d.same_pages = 17;
  d.huge_pages = 3;
  d.streams = 2;
  d.clients = 1;
  d.failed_reads = 11;
  d.failed_writes = 12;
  d.invalid_io = 13;
  d.notify_free = 14;
  d.pages_compacted = 15;
  d.huge_pages_since = 16;
  d.writeback_limit = 1000;
  d.writeback_limit_enable = 1;
  d.incompressible_pages = 21;
  d.recompress_attempts = 22;
  d.recompressed_pages = 23;
  d.priorities = {{0, "lz4", 100}, {2, "zstd", 23}};
  d.notes = {{"swap-priority", "100"}, {"mount-point", "/mnt/a b"},
             {"options", "discard,\"x\""}};
  return d;
}

TEST(StatusReportTest, JsonRoundTripsEveryField) {
  // Every key, each number its own: decoding and encoding again gives the
  // same text, so neither side drops or moves a key.
  const std::string json =
      "{\"version\":1,\"devices\":[\n{\"name\":\"zram0\","
      "\"algorithm\":\"lz4\",\"initstate\":101,\"disksize\":102,"
      "\"orig_data_size\":103,\"compr_data_size\":104,"
      "\"mem_used_total\":105,\"mem_limit\":106,\"mem_used_max\":107,"
      "\"same_pages\":108,\"huge_pages\":109,\"streams\":110,"
      "\"clients\":111,\"bd_count\":112,\"bd_reads\":113,\"bd_writes\":114,"
      "\"failed_reads\":115,\"failed_writes\":116,\"invalid_io\":117,"
      "\"notify_free\":118,\"pages_compacted\":119,"
      "\"huge_pages_since\":120,\"writeback_limit\":121,"
      "\"writeback_limit_enable\":122,\"incompressible_pages\":123,"
      "\"recompress_attempts\":124,\"recompressed_pages\":125,"
      "\"dict_id\":126,\"dict_memory\":127,\"dict_pages\":128,"
      "\"units\":129,\"unit_pages\":130,\"units_reclaimed\":131,"
      "\"units_reclaim_refused\":132,\"bd_lost\":133,"
      "\"ublk_queues\":134,\"ublk_queues_given_up\":135,"
      "\"priorities\":[{\"priority\":0,\"algorithm\":\"lz4\","
      "\"pages\":100},{\"priority\":2,\"algorithm\":\"zstd\","
      "\"pages\":23}],\"ublk\":\"/dev/ublkb0\","
      "\"backing_dev\":\"/dev/vdb\","
      "\"notes\":{\"mount-point\":\"/mnt/a b\",\"options\":\"discard,"
      "\\\"x\\\"\",\"swap-priority\":\"100\"}}\n]}\n";
  auto d = DecodeStatusJson(json);
  ASSERT_TRUE(d.has_value()) << d.error().ToString();
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ(EncodeStatusJson(*d), json);
  EXPECT_EQ((*d)[0].disksize, 102u);
  EXPECT_EQ((*d)[0].bd_lost, 133u);
  EXPECT_EQ((*d)[0].ublk, "/dev/ublkb0");
  EXPECT_EQ((*d)[0].ublk_queues_given_up, 135u);
  EXPECT_EQ((*d)[0].notes.at("options"), "discard,\"x\"");
  // A device without notes has an empty object.
  DeviceStatus bare;
  bare.name = "zram1";
  EXPECT_NE(EncodeStatusJson({bare}).find("\"notes\":{}}"), std::string::npos);
}

// A path may hold any bytes; the report stays UTF-8 that any JSON reader
// takes: well-formed sequences as they are, every other byte U+FFFD.
TEST(StatusReportTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  DeviceStatus d;
  d.name = "zram0";
  d.backing_dev = "/srv/caf\xc3\xa9/\xff\xc3(\xed\xa0\x80\xf0\x9f\x98\x80\x7f";
  const std::string json = EncodeStatusJson({d});
  EXPECT_NE(json.find("\"/srv/caf\xc3\xa9/\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd"
                      "\xf0\x9f\x98\x80\\u007f\""),
            std::string::npos)
      << json;
  auto back = DecodeStatusJson(json);
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  EXPECT_EQ((*back)[0].backing_dev,
            "/srv/caf\xc3\xa9/?"
            "?(?"
            "??\xf0\x9f\x98\x80\x7f");
}

TEST(StatusReportTest, OlderReportsAndBadNotes) {
  auto old = DecodeStatusJson(
      R"({"version":1,"devices":[{"name":"zram0","disksize":4096}]})");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ((*old)[0].failed_reads, 0u);
  EXPECT_TRUE((*old)[0].notes.empty());
  EXPECT_FALSE(DecodeStatusJson(
                   R"({"devices":[{"name":"zram0","notes":[1]}]})")
                   .has_value());
  EXPECT_FALSE(DecodeStatusJson(
                   R"({"devices":[{"name":"zram0","notes":{"a":1}}]})")
                   .has_value());
}

TEST(StatusReportTest, TableDefaultBytesNoHeadingsAndColumns) {
  const std::vector<DeviceStatus> devs = {Sample()};
  EXPECT_EQ(FormatStatusTable(devs),
            "NAME  ALGORITHM DISKSIZE DATA COMPR TOTAL STREAMS CLIENTS\n"
            "zram0 lz4             1G   8M    2M    4M       2       1\n");
  TableOptions o;
  o.bytes = true;
  o.no_headings = true;
  EXPECT_EQ(FormatStatusTable(devs, o),
            "zram0 lz4 1073741824 8388608 2097152 4194304 2 1\n");
  auto cols = ParseStatusColumns("name,ZERO-PAGES,mem-limit,mem-used,"
                                 "migrated,comp-ratio,mountpoint");
  ASSERT_TRUE(cols.has_value()) << cols.error().ToString();
  o = TableOptions();
  o.columns = *cols;
  EXPECT_EQ(FormatStatusTable(devs, o),
            "NAME  ZERO-PAGES MEM-LIMIT MEM-USED MIGRATED COMP-RATIO MOUNTPOINT\n"
            "zram0         17       64M       5M       15       2.00 /mnt/a b\n");
  o.raw = true;
  EXPECT_EQ(FormatStatusTable(devs, o),
            "NAME ZERO-PAGES MEM-LIMIT MEM-USED MIGRATED COMP-RATIO MOUNTPOINT\n"
            "zram0 17 64M 5M 15 2.00 /mnt/a\\x20b\n");
  auto plus = ParseStatusColumns("+ZERO-PAGES");
  ASSERT_TRUE(plus.has_value());
  EXPECT_EQ(plus->size(), 9u);
  EXPECT_EQ(plus->back(), "ZERO-PAGES");
  auto bad = ParseStatusColumns("NAME,BOGUS");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("BOGUS"), std::string::npos);
  EXPECT_FALSE(ParseStatusColumns("").has_value());
  EXPECT_FALSE(ParseStatusColumns("NAME,").has_value());
  // Every column has a cell; COMP-RATIO is 0.00 with nothing stored.
  o = TableOptions();
  o.columns.assign(std::begin(kStatusColumns), std::end(kStatusColumns));
  o.raw = true;
  DeviceStatus empty;
  empty.name = "zram1";
  const std::string all = FormatStatusTable({empty}, o);
  EXPECT_NE(all.find("zram1 0B 0B 0B  0 0 0B 0B 0B 0 0.00  0\n"),
            std::string::npos)
      << all;
}

TEST(StatusReportTest, PrioritiesAndRecompressionCounters) {
  const DeviceStatus s = Sample();
  const std::string json = EncodeStatusJson({s});
  for (const char* key :
       {"\"incompressible_pages\":21", "\"recompress_attempts\":22",
        "\"recompressed_pages\":23",
        "\"priorities\":[{\"priority\":0,\"algorithm\":\"lz4\",\"pages\":100},"
        "{\"priority\":2,\"algorithm\":\"zstd\",\"pages\":23}]"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << "\n" << json;
  }
  auto back = DecodeStatusJson(json);
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  const DeviceStatus& d = back->at(0);
  EXPECT_EQ(d.incompressible_pages, 21u);
  EXPECT_EQ(d.recompress_attempts, 22u);
  EXPECT_EQ(d.recompressed_pages, 23u);
  ASSERT_EQ(d.priorities.size(), 2u);
  EXPECT_EQ(d.priorities[1].priority, 2u);
  EXPECT_EQ(d.priorities[1].algorithm, "zstd");
  EXPECT_EQ(d.priorities[1].pages, 23u);
  EXPECT_EQ(FormatStatusRecompression({s}),
            "zram0: recomp_algorithm #2 zstd (23 pages); 23 recompressed, 21 "
            "incompressible\n");
  DeviceStatus plain = Sample();
  plain.priorities = {{0, "lz4", 100}};
  EXPECT_EQ(FormatStatusRecompression({plain}), "");
  EXPECT_FALSE(DecodeStatusJson(
                   "{\"devices\":[{\"name\":\"a\",\"priorities\":{}}]}")
                   .has_value());
}

TEST(StatusReportTest, DictionaryAndUnitLines) {
  DeviceStatus s = Sample();
  s.priorities = {{0, "zstd", 100}};
  s.dict_id = 2;
  s.dict_memory = 311296;
  s.dict_pages = 5120;
  s.units = 3;
  s.unit_pages = 40;
  EXPECT_EQ(FormatStatusRecompression({s}),
            "zram0: dictionary 2 in use; 311296 bytes; 5120 pages made with "
            "dictionaries\n"
            "zram0: 3 units holding 40 live pages\n");
}

// CollectStatus reads a real device's priorities after a recompression.
TEST(StatusReportTest, CollectsTheDevicesPriorities) {
  DeviceRegistry registry({});
  auto dev = registry.Add("zram0");
  ASSERT_TRUE(dev.has_value());
  Device& d = **dev;
  ASSERT_OK(d.SetRecompAlgorithm("algo=zstd"));
  ASSERT_OK(d.SetDisksize(1 << 20));
  // Bytes from 16 values: huge for lz4, about half a page for zstd.
  std::mt19937 rng(1);
  std::vector<std::byte> page(4096);
  for (int i = 0; i < 4; ++i) {
    for (auto& b : page) b = static_cast<std::byte>('a' + rng() % 16);
    ASSERT_OK(d.Write(static_cast<std::uint64_t>(i) * 4096, page));
  }
  const std::vector<DeviceStatus> before = CollectStatus(registry);
  ASSERT_EQ(before[0].priorities.size(), 2u);
  EXPECT_EQ(before[0].priorities[0].algorithm, "lz4");
  EXPECT_EQ(before[0].priorities[0].pages, 4u);
  EXPECT_EQ(before[0].priorities[1].priority, 1u);
  EXPECT_EQ(before[0].priorities[1].algorithm, "zstd");
  EXPECT_EQ(before[0].priorities[1].pages, 0u);
  RecompressResult r;
  ASSERT_OK(d.Recompress("", &r));
  const std::vector<DeviceStatus> after = CollectStatus(registry);
  EXPECT_EQ(after[0].priorities[1].pages, r.recompressed);
  EXPECT_EQ(after[0].priorities[0].pages, 4u - r.recompressed);
  EXPECT_EQ(after[0].recompressed_pages, r.recompressed);
  EXPECT_EQ(after[0].recompress_attempts, r.attempted);
  EXPECT_EQ(after[0].incompressible_pages, r.incompressible);
  EXPECT_EQ(r.attempted, 4u);
  EXPECT_EQ(r.recompressed, 4u);
}

// A front end that keeps a disk per device, whose queues may have given
// up: what DeviceWatcher::Describe says of it.
class DescribingWatcher final : public DeviceWatcher {
 public:
  void OnInitialized(Device&) override {}
  Status BeforeRelease(Device&) override { return Status::Ok(); }
  Report Describe(const Device& device) const override {
    if (device.name() != "zram0") return {};
    return {"/dev/ublkb0", 4, given_up};
  }
  std::uint32_t given_up = 0;
};

// A disk whose queue has given up serves nothing: the report says so, and
// so does `ztier status` (FormatStatusUblk), not only the server's log.
TEST(StatusReportTest, UblkQueuesGivenUpAreReported) {
  DeviceRegistry registry({});
  ASSERT_TRUE(registry.Add("zram0").has_value());
  ASSERT_TRUE(registry.Add("zram1").has_value());
  DescribingWatcher watcher;
  registry.SetWatcher(&watcher);
  std::vector<DeviceStatus> fine = CollectStatus(registry);
  ASSERT_EQ(fine.size(), 2u);
  EXPECT_EQ(fine[0].ublk, "/dev/ublkb0");
  EXPECT_EQ(fine[0].ublk_queues, 4u);
  EXPECT_EQ(fine[1].ublk, "");
  EXPECT_EQ(FormatStatusUblk(fine), "zram0: /dev/ublkb0, 4 queues\n");
  watcher.given_up = 1;
  auto decoded = DecodeStatusJson(EncodeStatusJson(CollectStatus(registry)));
  registry.SetWatcher(nullptr);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().ToString();
  EXPECT_EQ((*decoded)[0].ublk_queues_given_up, 1u);
  EXPECT_EQ(FormatStatusUblk(*decoded),
            "zram0: /dev/ublkb0: 1 of 4 queues given up, their IO fails (the "
            "server's log says why); restart the server to serve them again\n");
  // An older server's report has no ublk keys: no lines.
  EXPECT_EQ(FormatStatusUblk({DeviceStatus{}}), "");
}

TEST(StatusReportTest, NotesOneLinePerDevice) {
  DeviceStatus bare;
  bare.name = "zram1";
  EXPECT_EQ(FormatStatusNotes({Sample(), bare}),
            "zram0: mount-point=/mnt/a b options=discard,\"x\" "
            "swap-priority=100\n");
  EXPECT_EQ(FormatStatusNotes({bare}), "");
}

}  // namespace
}  // namespace ztier::ctl
