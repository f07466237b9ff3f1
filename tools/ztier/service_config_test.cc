// File: tools/ztier/service_config_test.cc
//
// The configuration file (service_config.h) and its size expressions
// (size_expr.h): good files as zram-generator writes them, and bad files,
// each with its own message naming the file and line.
#include "service_config.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include "size_expr.h"

namespace ztier::tool {
namespace {

constexpr double kRam = 24000;  // MiB
constexpr std::uint64_t kMiB = 1 << 20;

double Eval(const char* text, double ram = kRam) {
  auto v = EvalSizeExpression(text, ram);
  EXPECT_TRUE(v.has_value()) << text << ": " << v.error().message();
  return v.value_or(-1);
}

std::string EvalError(const char* text) {
  auto v = EvalSizeExpression(text, kRam);
  EXPECT_FALSE(v.has_value()) << text << " gave " << v.value_or(0);
  return v.has_value() ? "" : v.error().message();
}

TEST(SizeExpressionTest, ZramGeneratorExamples) {
  EXPECT_EQ(Eval("min(ram / 2, 4096)"), 4096);
  EXPECT_EQ(Eval("min(ram / 2, 4096)", 6000), 3000);
  EXPECT_EQ(Eval("ram / 10"), 2400);
  EXPECT_EQ(Eval("2048"), 2048);
  EXPECT_EQ(Eval("max(ram * 0.25, 512)", 1000), 512);
  EXPECT_EQ(Eval("1 + 2 * 3"), 7);
  EXPECT_EQ(Eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(Eval("2 ^ 3 ^ 2"), 512);  // right-associative
  EXPECT_EQ(Eval("-2 + 5"), 3);
  EXPECT_EQ(Eval("10 % 4"), 2);
  EXPECT_EQ(Eval("floor(ram / 7)", 100), 14);
  EXPECT_EQ(Eval("ceil(ram / 7)", 100), 15);
  EXPECT_EQ(Eval("round(2.5)"), 3);
  EXPECT_EQ(Eval("int(-2.7)"), -2);
  EXPECT_EQ(Eval("abs(-3)"), 3);
  EXPECT_EQ(Eval("min(5, 3, 4)"), 3);
  EXPECT_EQ(Eval("log(1000)"), 3);
  EXPECT_NEAR(Eval("log(2, 8)"), 3, 1e-12);
  EXPECT_EQ(Eval("1.5e3"), 1500);
  EXPECT_NEAR(Eval("pi"), 3.14159265, 1e-8);
}

TEST(SizeExpressionTest, ErrorsSayWhereAndWhy) {
  EXPECT_NE(EvalError("ram /").find("at column 6"), std::string::npos);
  EXPECT_NE(EvalError("rams / 2").find("unknown name 'rams'"), std::string::npos);
  EXPECT_NE(EvalError("mix(1, 2)").find("unknown function 'mix()'"),
            std::string::npos);
  EXPECT_NE(EvalError("floor(1, 2)").find("takes 1 argument"), std::string::npos);
  // zram-generator's fasteval also takes round(modulus, x); this subset
  // does not, and says how to write it.
  EXPECT_NE(EvalError("round(256, ram / 4)")
                .find("round() takes 1 argument(s), not 2; round(m, x) (x "
                      "rounded to a multiple of m) is written round(x / m) * m"),
            std::string::npos);
  EXPECT_NE(EvalError("(1 + 2").find("expected ')'"), std::string::npos);
  EXPECT_NE(EvalError("1 2").find("unexpected '2'"), std::string::npos);
  EXPECT_NE(EvalError("ram / 0").find("division by zero"), std::string::npos);
  EXPECT_NE(EvalError("4G").find("MiB, with no suffix"), std::string::npos);
  EXPECT_NE(EvalError("").find("expected a number"), std::string::npos);
  EXPECT_NE(EvalError("1.2.3").find("not a number"), std::string::npos);
  EXPECT_NE(EvalError("10 ^ 400").find("not a finite"), std::string::npos);
  EXPECT_NE(EvalError(std::string(100000, '(').c_str()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(EvalError(std::string(100000, '-').c_str()).find("nested too deeply"),
            std::string::npos);
  std::string powers = "1";
  for (int i = 0; i < 100000; ++i) powers += "^1";
  EXPECT_NE(EvalError(powers.c_str()).find("nested too deeply"),
            std::string::npos);
  EXPECT_EQ(Eval("2 ^ 3 ^ 2"), 512);
  EXPECT_EQ(Eval("((((1))))"), 1);
}

ServiceConfig Parse(const std::string& text, double ram = kRam) {
  auto c = ParseServiceConfig(text, "/etc/ztier/ztier.conf", ram);
  EXPECT_TRUE(c.has_value()) << c.error().message();
  return c.value_or(ServiceConfig{});
}

// writeback-device takes a remote NBD export as well as a path.
TEST(ServiceConfigTest, WritebackDeviceMayBeAnNbdUri) {
  for (const std::string uri :
       {"nbd://10.0.0.2/cold", "nbds://10.0.0.2:10810/cold",
        "nbd+unix:///cold?socket=/run/remote.sock"}) {
    const ServiceConfig c =
        Parse("[zram0]\nzram-size = 64\nwriteback-device = " + uri + "\n");
    ASSERT_EQ(c.devices.size(), 1u);
    EXPECT_EQ(c.devices[0].backing_dev, uri);
  }
}

TEST(ServiceConfigTest, TwoDevicesAsZramGeneratorWritesThem) {
  const ServiceConfig c = Parse(
      "# swap and a scratch file system\n"
      "[zram0]\n"
      "zram-size = min(ram / 2, 4096)\n"
      "compression-algorithm = zstd(level=3)\n"
      "writeback-device = /var/lib/ztier/zram0.img\n"
      "zram-resident-limit = 512\n"
      "\n"
      "[zram1]\n"
      "zram-size=ram/100\n"
      "compression-algorithm=lzo-rle\n"
      "fs-type=ext4\n"
      "mount-point=/var/scratch\n"
      "options=discard,noatime\n"
      "; a comment\n"
      "[ztier]\n"
      "listen = :10809\n"
      "mlock = yes\n");
  ASSERT_EQ(c.devices.size(), 2u);
  const DeviceConfig& swap = c.devices[0];
  EXPECT_EQ(swap.name, "zram0");
  EXPECT_EQ(swap.line, 2);
  EXPECT_EQ(swap.disksize, 4096 * kMiB);
  EXPECT_EQ(swap.mem_limit, 512 * kMiB);
  EXPECT_EQ(swap.comp_algorithm, "zstd");
  EXPECT_EQ(swap.algorithm_params, "level=3");
  EXPECT_EQ(swap.backing_dev, "/var/lib/ztier/zram0.img");
  EXPECT_TRUE(swap.skipped.empty());
  EXPECT_TRUE(swap.is_swap());
  EXPECT_EQ(swap.notes.at("swap-priority"), "100");
  EXPECT_EQ(swap.notes.at("options"), "discard");
  const DeviceConfig& fs = c.devices[1];
  EXPECT_EQ(fs.disksize, 240 * kMiB);
  EXPECT_EQ(fs.comp_algorithm, "lzo");
  EXPECT_FALSE(fs.is_swap());
  EXPECT_EQ(fs.notes.at("fs-type"), "ext4");
  EXPECT_EQ(fs.notes.at("mount-point"), "/var/scratch");
  EXPECT_EQ(fs.notes.at("options"), "discard,noatime");
  EXPECT_FALSE(fs.notes.contains("swap-priority"));
  ASSERT_EQ(c.ztier.size(), 2u);
  EXPECT_EQ(c.ztier[0].key, "listen");
  EXPECT_EQ(c.ztier[0].value, ":10809");
  EXPECT_EQ(c.ztier[1].line, 17);
}

TEST(ServiceConfigTest, PolicyIsAZtierKeyWithItsTokensAsGiven) {
  const ServiceConfig c = Parse(
      "[ztier]\n"
      "policy = period=60s idle_age=10m recompress_cpu=25% "
      "writeback_daily=400M\n");
  ASSERT_EQ(c.ztier.size(), 1u);
  EXPECT_EQ(c.ztier[0].key, "policy");
  EXPECT_EQ(c.ztier[0].value,
            "period=60s idle_age=10m recompress_cpu=25% writeback_daily=400M");
}

// A device's algorithms on one line: "PRIMARY(PARAMS)", then each
// recompression algorithm's "NAME(PARAMS)", then "[RECOMPRESS TOKENS]".
std::string Algorithms(const DeviceConfig& d) {
  std::string s = d.comp_algorithm + "(" + d.algorithm_params + ")";
  for (const RecompAlgorithmConfig& r : d.recomp_algorithms) {
    s += " " + r.name + "(" + r.params + ")";
  }
  return s + " [" + d.recompress_params + "]";
}

// zram-generator.conf(5): "compression-algorithm=lzo-rle zstd(level=3)
// (type=idle)": the primary, recompression algorithms at priority 1, 2, 3
// with their parameters, and a final bare list for recompress.
TEST(ServiceConfigTest, RecompressionAlgorithmsAndParameters) {
  const ServiceConfig c = Parse(
      "[zram0]\n"
      "compression-algorithm = lzo-rle zstd(level=3) (type=idle)\n"
      "[zram1]\n"
      "compression-algorithm = lz4(level=1)  zstd(level=19)\tlzo "
      "deflate(level=9) (type=huge_idle,max_pages=100)\n"
      "[zram2]\n"
      "compression-algorithm = lz4 zstd\n");
  ASSERT_EQ(c.devices.size(), 3u);
  EXPECT_EQ(Algorithms(c.devices[0]), "lzo() zstd(level=3) [type=idle]");
  EXPECT_EQ(Algorithms(c.devices[1]),
            "lz4(level=1) zstd(level=19) lzo() deflate(level=9) "
            "[type=huge_idle max_pages=100]");
  EXPECT_EQ(Algorithms(c.devices[2]), "lz4() zstd() []");
}

TEST(ServiceConfigTest, DefaultsAndSkippedDevices) {
  const ServiceConfig c = Parse(
      "[zram0]\n"
      "[zram1]\n"
      "zram-size = 0\n"
      "[zram2]\n"
      "host-memory-limit = 9000\n"
      "[zram3]\n"
      "host-memory-limit = none\n"
      "mount-point = /mnt\n"
      "compression-algorithm = lz4hc(level=9,)\n",
      6000);
  ASSERT_EQ(c.devices.size(), 4u);
  EXPECT_EQ(c.devices[0].disksize, 3000 * kMiB);  // min(ram / 2, 4096)
  EXPECT_EQ(c.devices[0].comp_algorithm, "lzo");  // the kernel's lzo-rle
  EXPECT_EQ(c.devices[0].mem_limit, 0u);
  EXPECT_TRUE(c.devices[0].skipped.empty());
  EXPECT_EQ(c.devices[1].skipped, "zram-size is 0");
  EXPECT_TRUE(c.devices[2].skipped.empty());  // 6000 MiB <= 9000
  EXPECT_EQ(c.devices[3].notes.at("fs-type"), "ext2");
  EXPECT_EQ(c.devices[3].algorithm_params, "level=9");
  const ServiceConfig big = Parse("[zram0]\nhost-memory-limit = 4096\n", 6000);
  EXPECT_NE(big.devices[0].skipped.find("host-memory-limit is 4096 MiB"),
            std::string::npos);
  EXPECT_TRUE(Parse("").devices.empty());
}

// systemd.syntax(5), as zram-generator reads it: a section given again
// continues the first, a key given again replaces the earlier value, and
// an empty value resets the key to its default (zram-generator's example
// has "options =").
TEST(ServiceConfigTest, RepeatsAndEmptyValuesFollowSystemdSyntax) {
  auto c = ParseServiceConfig(
      "[zram0]\nzram-size = 1\noptions = discard\n"
      "[ztier]\nlisten = :1\nmlock = yes\n"
      "[zram1]\nzram-size = 8\n"
      "[zram0]\nzram-size = 2\noptions =\n"
      "[ztier]\nlisten = :2\nmlock =\n",
      "/etc/ztier/ztier.conf", kRam);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  ASSERT_EQ(c->devices.size(), 2u);
  EXPECT_EQ(c->devices[0].name, "zram0");  // where it first came
  EXPECT_EQ(c->devices[0].line, 1);
  EXPECT_EQ(c->devices[0].disksize, 2u << 20);
  EXPECT_EQ(c->devices[0].notes.at("options"), "discard");  // the default
  EXPECT_EQ(c->devices[1].disksize, 8u << 20);
  ASSERT_EQ(c->ztier.size(), 1u);  // mlock reset
  EXPECT_EQ(c->ztier[0].key, "listen");
  EXPECT_EQ(c->ztier[0].value, ":2");
  EXPECT_EQ(c->ztier[0].line, 13);
  std::string warnings;
  for (const std::string& w : c->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("ztier.conf:10: 'zram-size' of [zram0] is given "
                          "again (after line 2): this value is used"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("ztier.conf:11: 'options' of [zram0] is given "
                          "again empty: it is reset to its default"),
            std::string::npos)
      << warnings;
}

struct BadFile {
  const char* text;
  int line;
  const char* message;
};

// Each bad file, the line its error names, and a piece of the message.
const BadFile kBadFiles[] = {
    {"[zram0\n", 1, "must end with ']'"},
    {"[zram0]\nzram-size\n", 2, "want 'key = value'"},
    {"[zram0]\n= 4\n", 2, "a value with no key"},
    {"[zram0]\nzram-size = ram /\n", 2, "zram-size: bad expression"},
    {"[zram0]\nzram-size = 4G\n", 2, "MiB, with no suffix"},
    {"[zram0]\nzram-size = 10 - ram\n", 2, "is negative"},
    {"[zram0]\nzram-resident-limit = rom\n", 2, "unknown name 'rom'"},
    {"[zram0]\ncompression-algorithm = lz5\n", 2,
     "unknown compression-algorithm 'lz5'"},
    {"[zram0]\ncompression-algorithm = lzo zstd lz4 lz4hc deflate\n", 2,
     "at most 3 recompression algorithms"},
    {"[zram0]\ncompression-algorithm = lzo (type=idle) zstd\n", 2,
     "must come last"},
    {"[zram0]\ncompression-algorithm = (type=idle)\n", 2,
     "no algorithm before"},
    {"[zram0]\ncompression-algorithm = lzo zstd (type=sometimes)\n", 2,
     "recompression parameters '(type=sometimes)'"},
    {"[zram0]\ncompression-algorithm = lzo zstd (max_pages)\n", 2,
     "recompression parameters"},
    {"[zram0]\ncompression-algorithm = lzo zstd(level=99)\n", 2,
     "zstd(level=99)"},
    {"[zram0]\ncompression-algorithm = lzo zsdt\n", 2,
     "unknown compression-algorithm 'zsdt'"},
    {"[zram0]\ncompression-algorithm = zstd(level=3\n", 2, "missing ')'"},
    {"[zram0]\ncompression-algorithm = zstd(level=99)\n", 2, "level"},
    {"[zram0]\ncompression-algorithm = zstd(colour=red)\n", 2, "colour"},
    {"[zram0]\ncompression-algorithm = lz4(algo=zstd)\n", 2,
     "algo= and priority= have no place here"},
    {"[zram0]\ncompression-algorithm = lz4 zstd(priority=3)\n", 2,
     "algo= and priority= have no place here"},
    {"[zram0]\nwriteback-device = zram0.img\n", 2, "absolute path"},
    {"[zram0]\nhost-memory-limit = lots\n", 2, "want an integer (MiB) or none"},
    {"[zram0]\nswap-priority = 40000\n", 2, "from -1 to 32767"},
    {"[zram0]\nswap-priority = -2\n", 2, "from -1 to 32767"},
    {"[zram0]\nmount-point = scratch\n", 2, "absolute path"},
    {"[ztier]\nsocket = /run/z.sock\n", 2, "unknown key 'socket' in [ztier]"},
    {"[zram0]\nzram-size = 64\ncompression-algorithm = \"zstd\n", 3,
     "no closing \" in the value of 'compression-algorithm' (its quote runs "
     "on to the end of the file)"},
    {"[swap]\nname = 'it\n[zram0]\nzram-size = 64\n", 2,
     "no closing ' in the value of 'name'"},
    {"[zram0]\n: 4\n", 2, "a value with no key"},
};

TEST(ServiceConfigTest, EachBadFileHasItsOwnMessage) {
  for (const BadFile& bad : kBadFiles) {
    auto c = ParseServiceConfig(bad.text, "/etc/ztier/ztier.conf", kRam);
    ASSERT_FALSE(c.has_value()) << bad.text;
    EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
    const std::string& m = c.error().message();
    const std::string where =
        "/etc/ztier/ztier.conf:" + std::to_string(bad.line) + ": ";
    EXPECT_EQ(m.rfind(where, 0), 0u) << "want " << where << " in: " << m;
    EXPECT_NE(m.find(bad.message), std::string::npos)
        << "want '" << bad.message << "' in: " << m;
  }
  EXPECT_GE(std::size(kBadFiles), 20u);
}

// What zram-generator warns about and ignores, ztier ignores with a
// warning too: other sections, a device's unknown keys (not [ztier]'s);
// its older memory-limit is host-memory-limit; a byte order mark is not
// text.
TEST(ServiceConfigTest, WhatZramGeneratorIgnoresIsIgnoredWithAWarning) {
  const ServiceConfig c = Parse(
      "\xEF\xBB\xBF# a file an editor saved with a BOM\n"
      "[swap]\nanything = goes\n[swap]\n"
      "[zram0]\nzram-size = 64\nfs-create-options = -m0\n"
      "memory-limit = 1000\n",
      24000);
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].disksize, 64 * kMiB);
  EXPECT_EQ(c.devices[0].skipped,
            "host-memory-limit is 1000 MiB and this host has 24000 MiB");
  ASSERT_EQ(c.warnings.size(), 4u);
  EXPECT_NE(c.warnings[0].find(":2: section [swap] ignored"),
            std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[1].find(":4: section [swap] ignored"),
            std::string::npos) << c.warnings[1];
  EXPECT_NE(c.warnings[2].find(":7: unknown key 'fs-create-options' in "
                               "[zram0]"),
            std::string::npos) << c.warnings[2];
  EXPECT_NE(c.warnings[2].find("ignored, as zram-generator does"),
            std::string::npos) << c.warnings[2];
  EXPECT_NE(c.warnings[3].find(":8: memory-limit is deprecated"),
            std::string::npos) << c.warnings[3];
}

// zram-generator (1.1.2's src/config.rs, read_devices) warns about
// settings before the first section and ignores them; so does ztier. Among
// them a newer zram-generator's set! variables: an expression that names
// one fails on its own line.
TEST(ServiceConfigTest, SettingsOutsideASectionAreIgnoredWithAWarning) {
  const ServiceConfig c = Parse(
      "zram-size = 1024\n"
      "set!top = echo 1\n"
      "[zram0]\nzram-size = 64\n");
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].disksize, 64 * kMiB);
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[0],
            "/etc/ztier/ztier.conf:1: 'zram-size' is outside a section: "
            "ignored, as zram-generator does (put it under [zram0] or "
            "[ztier])");
  EXPECT_EQ(c.warnings[1],
            "/etc/ztier/ztier.conf:2: 'set!top' is outside a section: "
            "ignored (zram-generator 1.2's set! variables, a program's "
            "output, are not supported: an expression that names one "
            "fails)");
  auto uses = ParseServiceConfig("set!top = echo 1\n[zram0]\nzram-size = top\n",
                                 "f", kRam);
  ASSERT_FALSE(uses.has_value());
  EXPECT_NE(uses.error().message().find("f:3: zram-size: "), std::string::npos)
      << uses.error().message();
  EXPECT_NE(uses.error().message().find("'top'"), std::string::npos)
      << uses.error().message();
}

// rust-ini, zram-generator's ini parser, ends a key at its first '=' or
// ':' (rust-ini 0.17's Parser::parse_key; zram-generator 1.1.2 takes
// rust-ini >=0.15, <0.18): "key: value" is a setting too.
TEST(ServiceConfigTest, AColonSeparatesKeyAndValueAsInZramGenerator) {
  const ServiceConfig c = Parse(
      "[zram0]\n"
      "zram-size: 64\n"
      "compression-algorithm :zstd\n"
      "writeback-device = nbd://backup:10809/zram0\n"
      "[ztier]\n"
      "listen: 127.0.0.1:10809\n"
      "metrics-listen = 127.0.0.1:9470\n");
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].disksize, 64 * kMiB);
  EXPECT_EQ(c.devices[0].comp_algorithm, "zstd");
  EXPECT_EQ(c.devices[0].backing_dev, "nbd://backup:10809/zram0");
  ASSERT_EQ(c.ztier.size(), 2u);
  EXPECT_EQ(c.ztier[0].key, "listen");
  EXPECT_EQ(c.ztier[0].value, "127.0.0.1:10809");
  EXPECT_EQ(c.ztier[1].key, "metrics-listen");
  EXPECT_EQ(c.ztier[1].value, "127.0.0.1:9470");
  EXPECT_TRUE(c.warnings.empty());
}

// rust-ini's quoted value runs on to the next quote of its kind, across
// lines (Parser::parse_val): zram-generator reads the lines between as
// part of the value, and so does ztier, with a warning.
TEST(ServiceConfigTest, AQuotedValueRunsOnAcrossLinesAsInZramGenerator) {
  const ServiceConfig c = Parse(
      "[swap]\n"
      "note = 'the old\n"
      "[zram1]\n"
      "zram-size = 1' device\n"
      "[zram0]\n"
      "zram-size = 64\n");
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].name, "zram0");
  EXPECT_EQ(c.devices[0].line, 5);
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find(":1: section [swap] ignored"), std::string::npos)
      << c.warnings[0];
  EXPECT_EQ(c.warnings[1],
            "/etc/ztier/ztier.conf:2: the quoted value of 'note' runs on to "
            "line 4 (its closing ' is there), as zram-generator reads it");
}

// rust-ini reads a backslash in a key or a value as an escape (Parser::
// parse_str_until, with its default ParseOption: enabled_escape, which
// zram-generator's Ini::load_from_file takes): a backslash before the end
// of a line continues it, \\ is one, \n \t \xHHHH are characters, and any
// other escaped character is itself (a quote among them, which then does
// not close one).
TEST(ServiceConfigTest, BackslashEscapesAsInZramGenerator) {
  const ServiceConfig c = Parse(
      "[zram0]\n"
      "compression-algorithm = lz4 \\\n"
      "    zstd(level=9)\n"
      "zram-\\\nsize = 6\\4\n"
      "writeback-device = \"/var/lib/z\\\"q\\\\\\x0041\"\n"
      "options = discard\\,noatime\n"
      "mount-point = /mnt/a\\tb\n"
      "[zram1]\n"
      "zram-size = 32\n");
  // No escape runs on into the next section, which starts on line 9.
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[1].line, 9);
  EXPECT_TRUE(c.warnings.empty());
  const DeviceConfig& d = c.devices[0];
  EXPECT_EQ(d.comp_algorithm, "lz4");
  ASSERT_EQ(d.recomp_algorithms.size(), 1u);
  EXPECT_EQ(d.recomp_algorithms[0].name, "zstd");
  EXPECT_EQ(d.disksize, 64 * kMiB);
  EXPECT_EQ(d.key_lines.at("zram-size"), 4);
  EXPECT_EQ(d.backing_dev, "/var/lib/z\"q\\A");
  EXPECT_EQ(d.notes.at("options"), "discard,noatime");
  EXPECT_EQ(d.notes.at("mount-point"), "/mnt/a\tb");
  // What rust-ini refuses, ztier refuses, naming the line.
  for (const auto& [text, message] :
       std::initializer_list<std::pair<const char*, const char*>>{
           {"[zram0]\nzram-size = 64\\", "a backslash ends the file"},
           {"[zram0]\nzram-size = 64\\xZZZZ\n",
            "\\xZZZZ is not \\x and "
            "four hex digits"},
           {"[zram0]\nzram-size = 64\\xD800\n", "\\xD800 is not a character"},
           // Fewer than four hex digits: the message names the escape as
           // far as its line goes, not the next line's text.
           {"[zram0]\nzram-size = 6\\x4\n[zram1]\n",
            "\\x4 is not \\x and four hex digits"},
           {"[zram0]\nzram-size = 6\\x4\r\n[zram1]\r\n",
            "\\x4 is not \\x and four hex digits"},
           {"[zram0]\nzram-size = 64\\0\n", "\\0 (a NUL) is not taken"}}) {
    auto bad = ParseServiceConfig(text, "f", kRam);
    ASSERT_FALSE(bad.has_value()) << text;
    EXPECT_EQ(bad.error().message(), std::string("f:2: ") + message) << text;
  }
  // rust-ini reads the four characters after \x with Rust's
  // u32::from_str_radix, which takes a leading '+': \x+041 is A there.
  const ServiceConfig plus = Parse("[zram0]\noptions = a\\x+041b\n");
  ASSERT_EQ(plus.devices.size(), 1u);
  EXPECT_EQ(plus.devices[0].notes.at("options"), "aAb");
}

// A bad escape in a setting that runs on (a quote closed on a later
// line, or a backslash at a line's end) is named on the line it is on,
// not on the setting's first.
TEST(ServiceConfigTest, ABadEscapeInAValueThatRunsOnNamesItsOwnLine) {
  for (const auto& [text, message] :
       std::initializer_list<std::pair<const char*, const char*>>{
           {"[zram0]\ncompression-algorithm = 'zstd\n\\xZZZZ'\n",
            "f:3: \\xZZZZ is not \\x and four hex digits"},
           {"[zram0]\nzram-size = 6\\\n4\\0\n",
            "f:3: \\0 (a NUL) is not taken"},
           {"[zram0]\nzram-\\\nsi\\\nze\\xD800 = 4\n",
            "f:4: \\xD800 is not a character"},
           {"[zram0]\nnote = \"a\nb\" c \\\nd\\",
            "f:4: a backslash ends the file"},
           {"[zram0]\nzram-size = 64\\xZZZZ\n",
            "f:2: \\xZZZZ is not \\x and four hex digits"}}) {
    auto bad = ParseServiceConfig(text, "f", kRam);
    ASSERT_FALSE(bad.has_value()) << text;
    EXPECT_EQ(bad.error().message(), message) << text;
  }
}

// zram-generator's ini parser (rust-ini) takes a value's leading quote,
// " or ', and the next one of its kind away, keeps the text after it, and
// trims the whole: files written with quotes work unchanged.
TEST(ServiceConfigTest, QuotedValuesLoseTheirQuotesAsInZramGenerator) {
  const ServiceConfig c = Parse(
      "[zram0]\n"
      "compression-algorithm = \"zstd\"\n"
      "zram-size = \"ram\" / 4\n"
      "writeback-device = ' /var/lib/ztier/zram0.img '\n"
      "options = 'discard,noatime'\n"
      "[ztier]\n"
      "policy = \"period=60s idle_age=10m\"\n"
      "listen = \":10809\"\n");
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].comp_algorithm, "zstd");
  EXPECT_EQ(c.devices[0].disksize, 6000 * kMiB);
  EXPECT_EQ(c.devices[0].backing_dev, "/var/lib/ztier/zram0.img");
  EXPECT_EQ(c.devices[0].notes.at("options"), "discard,noatime");
  ASSERT_EQ(c.ztier.size(), 2u);
  EXPECT_EQ(c.ztier[0].value, "period=60s idle_age=10m");
  EXPECT_EQ(c.ztier[1].value, ":10809");
  EXPECT_TRUE(c.warnings.empty());
  // A quote inside a value is kept; an empty pair is an empty value (the
  // key's default).
  const ServiceConfig d = Parse(
      "[zram0]\nzram-size = 64\nmount-point = /var/it's\n"
      "compression-algorithm = lz4\ncompression-algorithm = \"\"\n");
  EXPECT_EQ(d.devices[0].notes.at("mount-point"), "/var/it's");
  EXPECT_EQ(d.devices[0].comp_algorithm, "lzo");
}

// zram-generator takes a section as a device only when its name is zram
// and a number (src/config.rs: sname.starts_with("zram") &&
// sname[4..].parse::<u64>().is_ok()) and ignores the rest with a warning;
// so does ztier, naming the line.
TEST(ServiceConfigTest, ADeviceSectionIsZramAndANumber) {
  const ServiceConfig c = Parse(
      "[zram0]\nzram-size = 64\n"
      "[zram-swap]\nzram-size = 64\n"
      "[zramfs]\nzram-size = 64\n"
      "[zram1.5]\nzram-size = 64\n"
      "[zram99999999999999999999]\nzram-size = 64\n"
      "[zram]\nzram-size = 64\n"
      "[zram007]\nzram-size = 64\n"
      "[ zram12 ]\nzram-size = 64\n");
  ASSERT_EQ(c.devices.size(), 3u);
  EXPECT_EQ(c.devices[0].name, "zram0");
  EXPECT_EQ(c.devices[1].name, "zram007");
  EXPECT_EQ(c.devices[2].name, "zram12");
  ASSERT_EQ(c.warnings.size(), 5u);
  int line = 3;
  for (const char* name :
       {"zram-swap", "zramfs", "zram1.5", "zram99999999999999999999", "zram"}) {
    EXPECT_EQ(c.warnings[(line - 3) / 2],
              "/etc/ztier/ztier.conf:" + std::to_string(line) + ": section [" +
                  name +
                  "] ignored: a device's section is zram and a number, "
                  "[zram0], [zram1], ..., as zram-generator takes it")
        << c.warnings[(line - 3) / 2];
    line += 2;
  }
}

TEST(ServiceConfigTest, ZramGeneratorsDeprecatedSizeKeys) {
  const ServiceConfig c = Parse(
      "[zram0]\nzram-fraction = 0.25\nmax-zram-size = 2048\n"
      "[zram1]\nzram-fraction = 0.1\nmax-zram-size = none\n"
      "[zram2]\nmax-zram-size = 1000\n"
      "[zram3]\nzram-size = 64\nzram-fraction = 0.9\n",
      24000);
  ASSERT_EQ(c.devices.size(), 4u);
  EXPECT_EQ(c.devices[0].disksize, 2048 * kMiB);   // min(6000, 2048)
  EXPECT_EQ(c.devices[1].disksize, 2400 * kMiB);   // no cap
  EXPECT_EQ(c.devices[2].disksize, 1000 * kMiB);   // min(12000, 1000)
  // They override zram-size, as zram-generator reads them; with no
  // max-zram-size there is no cap: zram-generator's man page says 4096,
  // but its code since 1.1.0 (Debian 12 ships 1.1.2) takes u64::MAX
  // (src/config.rs, set_disksize_if_enabled).
  EXPECT_EQ(c.devices[3].disksize, 21600 * kMiB);  // 24000 * 0.9
  ASSERT_EQ(c.warnings.size(), 5u);
  EXPECT_NE(c.warnings[0].find(":2: zram-fraction and max-zram-size are "
                               "deprecated; this is zram-size = "
                               "min(floor(ram * 0.25), 2048)"),
            std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[3].find(":11: zram-fraction and max-zram-size override "
                               "zram-size"),
            std::string::npos) << c.warnings[3];
  // ram * zram-fraction is rounded down to whole MiB before the cap, as
  // zram-generator casts it to an integer (its config.rs,
  // set_disksize_if_enabled): 1001 * 0.5 is 500 MiB, not 500.5.
  const ServiceConfig odd = Parse(
      "[zram0]\nzram-fraction = 0.5\nmax-zram-size = none\n"
      "[zram1]\nzram-fraction = 0.5\nmax-zram-size = 600\n",
      1001);
  ASSERT_EQ(odd.devices.size(), 2u);
  EXPECT_EQ(odd.devices[0].disksize, 500 * kMiB);
  EXPECT_EQ(odd.devices[1].disksize, 500 * kMiB);
  EXPECT_NE(odd.warnings[0].find("this is zram-size = floor(ram * 0.5)"),
            std::string::npos) << odd.warnings[0];
  // A fraction written as an expression is that number, whatever the
  // precedence of its operators against the ram * in front of it.
  const ServiceConfig expr = Parse(
      "[zram0]\nzram-fraction = 0.5 - 0.25\n"
      "[zram1]\nzram-fraction = 0.1 + 0.1\nmax-zram-size = 4096\n",
      1000);
  ASSERT_EQ(expr.devices.size(), 2u);
  EXPECT_EQ(expr.devices[0].disksize, 250 * kMiB);  // not ram * 0.5 - 0.25
  EXPECT_EQ(expr.devices[1].disksize, 200 * kMiB);  // not ram * 0.1 + 0.1
  EXPECT_NE(expr.warnings[0].find("this is zram-size = floor(ram * (0.5 - "
                                  "0.25))"),
            std::string::npos) << expr.warnings[0];
  // zram-generator parses zram-fraction as a Rust f64 and max-zram-size as
  // a u64 (1.1.2's src/config.rs, parse_line): their spellings of a number
  // are numbers here too.
  const ServiceConfig rust = Parse(
      "[zram0]\nzram-fraction = .25\nmax-zram-size = +2048\n"
      "[zram1]\nzram-fraction = 5E-1\nmax-zram-size = 0004096\n"
      "[zram2]\nzram-fraction = 1.\nmax-zram-size = 100\n"
      "[zram3]\nzram-fraction = +0.1\n"
      "[zram4]\nzram-fraction = inf\nmax-zram-size = 300\n"
      "[zram5]\nzram-fraction = +Infinity\nmax-zram-size = 30\n"
      "[zram6]\nzram-size = 64\nhost-memory-limit = 18446744073709551615\n",
      1000);
  ASSERT_EQ(rust.devices.size(), 7u);
  EXPECT_EQ(rust.devices[0].disksize, 250 * kMiB);
  EXPECT_EQ(rust.devices[1].disksize, 500 * kMiB);
  EXPECT_EQ(rust.devices[2].disksize, 100 * kMiB);
  EXPECT_EQ(rust.devices[3].disksize, 100 * kMiB);
  // Rust's f64 "inf": ram * inf is cast to the largest u64, and the cap is
  // the size.
  EXPECT_EQ(rust.devices[4].disksize, 300 * kMiB);
  EXPECT_EQ(rust.devices[5].disksize, 30 * kMiB);
  // host-memory-limit is a u64 there: the largest is no limit.
  EXPECT_EQ(rust.devices[6].disksize, 64 * kMiB);
  EXPECT_EQ(rust.devices[6].skipped, "");
  // With no cap, ram * inf is no size (zram-generator's product wraps).
  auto uncapped =
      ParseServiceConfig("[zram0]\nzram-fraction = inf\n", "f", kRam);
  ASSERT_FALSE(uncapped.has_value());
  EXPECT_NE(uncapped.error().message().find(
                "f:2: zram-fraction: inf wants a max-zram-size"),
            std::string::npos)
      << uncapped.error().message();
  auto bad = ParseServiceConfig("[zram0]\nzram-fraction = half\n", "f", kRam);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("f:2: zram-fraction: want a "),
            std::string::npos) << bad.error().message();
}

TEST(ServiceConfigTest, UnreadableFiles) {
  auto missing = LoadServiceConfig("/nonexistent/ztier.conf");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.error().message().find(
                "configuration file /nonexistent/ztier.conf: No such file"),
            std::string::npos)
      << missing.error().message();
  auto dir = LoadServiceConfig("/");
  ASSERT_FALSE(dir.has_value());
  EXPECT_NE(dir.error().message().find("is a directory"), std::string::npos);
}

// The file is read at every SIGHUP by the thread that waits for SIGTERM: a
// FIFO must be an error at once, not a wait for a writer's data, and a
// file too large for a configuration is refused rather than read whole.
TEST(ServiceConfigTest, OnlyABoundedRegularFileIsRead) {
  std::string dir =
      (std::filesystem::temp_directory_path() / "ztier_conf.XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string fifo = dir + "/fifo.conf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A writer that never writes: a blocking read would wait for it.
  const int writer = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  auto loading =
      std::async(std::launch::async, [&] { return LoadServiceConfig(fifo); });
  const bool returned =
      loading.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  ::close(writer);  // ends a read that waited (the old code), EOF
  auto from_fifo = loading.get();
  EXPECT_TRUE(returned) << "LoadServiceConfig waited on a FIFO";
  ASSERT_FALSE(from_fifo.has_value());
  EXPECT_NE(from_fifo.error().message().find("not a regular file"),
            std::string::npos)
      << from_fifo.error().message();

  const std::string big = dir + "/big.conf";
  {
    std::ofstream out(big);
    out << "[zram0]\nzram-size = 16\n";
    const std::string comment = "# " + std::string(1021, 'c') + "\n";
    for (std::size_t n = 0; n <= kMaxConfigFileBytes; n += comment.size()) {
      out << comment;
    }
  }
  auto from_big = LoadServiceConfig(big);
  ASSERT_FALSE(from_big.has_value()) << "a file over the limit was read";
  EXPECT_EQ(from_big.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(from_big.error().message().find(big + ": larger than 1048576 bytes"),
            std::string::npos)
      << from_big.error().message();
  std::filesystem::remove_all(dir);
}

TEST(ServiceConfigTest, AlgorithmItemErrorsNameTheirProblem) {
  auto ok = ParseAlgorithmItem("zstd(level=9)", "--recomp-algorithm");
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_EQ(ok->params, "level=9");
  auto open = ParseAlgorithmItem("zstd(level=9", "--recomp-algorithm");
  ASSERT_FALSE(open.has_value());
  EXPECT_NE(open.error().message().find("no ')' closes"), std::string::npos)
      << open.error().message();
  auto after = ParseAlgorithmItem("zstd(level=9)x", "--recomp-algorithm");
  ASSERT_FALSE(after.has_value());
  EXPECT_NE(after.error().message().find("text after ')'"), std::string::npos)
      << after.error().message();
}

TEST(ServiceConfigTest, Booleans) {
  for (const char* t : {"yes", "YES", "true", "on", "1", " yes "}) {
    EXPECT_EQ(ParseConfigBool(t), true) << t;
  }
  for (const char* t : {"no", "false", "Off", "0"}) {
    EXPECT_EQ(ParseConfigBool(t), false) << t;
  }
  for (const char* t : {"", "y", "2", "yess"}) {
    EXPECT_EQ(ParseConfigBool(t), std::nullopt) << t;
  }
}

TEST(ServiceConfigTest, HostMemTotalIsThisHosts) {
  auto ram = HostMemTotalMib();
  ASSERT_TRUE(ram.has_value());
  EXPECT_GT(*ram, 64);
}

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(ZTIER_SOURCE_DIR) + "/" + relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The files a user copies: README.md's ```ini blocks and dist/ztier.conf.
TEST(ServiceConfigTest, TheDocumentedExamplesParse) {
  const std::string readme = ReadSourceFile("README.md");
  ASSERT_FALSE(readme.empty());
  int blocks = 0;
  for (std::size_t at = readme.find("```ini\n"); at != std::string::npos;
       at = readme.find("```ini\n", at)) {
    at += 7;
    const std::size_t end = readme.find("```", at);
    ASSERT_NE(end, std::string::npos);
    auto config = ParseServiceConfig(readme.substr(at, end - at), "README.md",
                                     kRam);
    ASSERT_TRUE(config.has_value()) << config.error().message();
    EXPECT_FALSE(config->devices.empty());
    ++blocks;
  }
  EXPECT_GE(blocks, 1);
  const std::string dist = ReadSourceFile("dist/ztier.conf");
  ASSERT_FALSE(dist.empty());
  auto config = ParseServiceConfig(dist, "dist/ztier.conf", kRam);
  ASSERT_TRUE(config.has_value()) << config.error().message();
}

}  // namespace
}  // namespace ztier::tool
