// File: tools/ztier/tool_util_test.cc
//
// Tests of the tool's helpers: the flag parser (flags.h), the table and JSON
// writer (bench_stats.h), the machine description (machine_info.h) and the
// log of `ztier serve` (log.h).
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_stats.h"
#include "ctl_cmd.h"
#include "flags.h"
#include "log.h"
#include "machine_info.h"
#include "paths.h"
#include "sd_notify.h"
#include "testing/test_util.h"
#include "tool_common.h"

namespace ztier::tool {
namespace {

using Args = std::vector<std::string_view>;

// The round trip is measured between two real CPUs when the process may
// use two, and named in the machine line; with one CPU it is left out.
TEST(MachineInfoTest, CrossCpuRoundTrip) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const MachineInfo m = GetMachineInfo();
  if (CPU_COUNT(&allowed) < 2) {
    EXPECT_EQ(m.cross_cpu_rtt_ns, 0);
    EXPECT_EQ(MachineLine(m).find("round trip"), std::string::npos);
    return;
  }
  // Measured: a real round trip takes some time. No upper bound: on a
  // busy host each hand-off can wait for a scheduler slice.
  EXPECT_GT(m.cross_cpu_rtt_ns, 5);
  EXPECT_NE(MachineLine(m).find("; cross-CPU round trip "),
            std::string::npos)
      << MachineLine(m);
  // The caller's own affinity is left as it was.
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&allowed, &after));
}

// One figure per 2 MiB step, rounded up; empty only where the kernel has no
// MADV_POPULATE_WRITE (before 5.14).
TEST(MachineInfoTest, FreshMemoryPopulate) {
  const std::vector<double> us = FreshMemoryPopulateUs((5 << 20) + 1);
  if (us.empty()) GTEST_SKIP() << "no MADV_POPULATE_WRITE here";
  ASSERT_EQ(us.size(), 3u);
  for (double u : us) EXPECT_GT(u, 0);
  EXPECT_TRUE(FreshMemoryPopulateUs(0).empty());
}

// An OS error is named by its own errno; any other Status by zram's name
// for its code.
TEST(ErrnoTextTest, NamesTheErrnoOfAnOsError) {
  EXPECT_EQ(ErrnoText(PosixError("bind /x/a.sock", ENOENT)).rfind("ENOENT: ", 0),
            0u);
  EXPECT_EQ(ErrnoText(PosixError("bind :80", EADDRINUSE)).rfind("EADDRINUSE: ", 0),
            0u);
  EXPECT_EQ(ErrnoText(PosixError("mkdir", EACCES)).rfind("EACCES: ", 0), 0u);
  EXPECT_EQ(ErrnoText(Status::NotFound("device 'zram9'")),
            "ENODEV: device 'zram9'");
  // An errno without a name: its code's (PosixError gives it kIoError).
  EXPECT_EQ(ErrnoText(PosixError("ioctl", 4096)).rfind("EIO: ioctl: ", 0), 0u);
}

TEST(FlagSetTest, ParsesBothFormsListsAndInts) {
  std::string json;
  std::vector<std::string> codecs;
  std::int64_t runs = 5;
  bool verbose = false;
  FlagSet flags("t");
  flags.AddString("json", &json, "FILE", "");
  flags.AddList("codec", &codecs, "NAME", "");
  flags.AddInt("runs", &runs, "N", "", 1, 100);
  flags.AddBool("verbose", &verbose, "");
  const Args args = {"--json=out.json", "--codec", "lz4,zstd", "--codec=lzo",
                     "--runs",          "3",       "--verbose"};
  ASSERT_OK(flags.Parse(args));
  EXPECT_EQ(json, "out.json");
  EXPECT_EQ(codecs, (std::vector<std::string>{"lz4", "zstd", "lzo"}));
  EXPECT_EQ(runs, 3);
  EXPECT_TRUE(verbose);
  EXPECT_TRUE(flags.WasSet("runs"));
}

TEST(FlagSetTest, RejectsBadInput) {
  auto parse = [](Args args) {
    std::int64_t runs = 0;
    std::string s;
    FlagSet flags("t");
    flags.AddInt("runs", &runs, "N", "", 1, 10);
    flags.AddString("json", &s, "FILE", "");
    return flags.Parse(args);
  };
  EXPECT_EQ(parse({"--nosuch"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"--runs"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"--runs", "5x"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"--runs", "11"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"--runs="}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"stray"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"--json", "a", "--json", "b"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(parse({"--nosuch"}).message().find("--nosuch"), std::string::npos);
  // A whole number past int64 is out of range, as 11 is, not "not a whole
  // number".
  for (const char* big : {"99999999999999999999", "-99999999999999999999"}) {
    const Status s = parse({"--runs", big});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              std::string("t: --runs: ") + big + " is out of range [1, 10]");
  }
}

// An output file whose folder is missing is refused by Parse, before the
// command's work, with the flag and the folder named.
TEST(FlagSetTest, OutputFileNeedsAnExistingFolder) {
  ztier::testing::ScopedTempDir dir;
  auto parse = [](Args args) {
    std::string json;
    FlagSet flags("t");
    flags.AddOutputFile("json", &json, "FILE", "");
    flags.Short("json", 'j');
    return flags.Parse(args);
  };
  EXPECT_OK(parse({}));
  EXPECT_OK(parse({"--json", "here.json"}));  // the working folder
  const std::string ok = dir.File("x.json");
  EXPECT_OK(parse({"--json", ok}));
  const std::string missing = dir.File("no/such/x.json");
  const Status st = parse({"--json=" + missing});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--json " + missing + ": no folder " +
                              dir.File("no/such")),
            std::string::npos)
      << st.message();
  EXPECT_EQ(parse({"-j" + missing}).code(), StatusCode::kInvalidArgument);
  // An empty name (`--json "$OUT"` with OUT unset) would write no file and
  // still succeed: refused, with the flag named.
  for (const Args& empty :
       {Args{"--json="}, Args{"--json", ""}, Args{"-j", ""}}) {
    const Status e = parse(empty);
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << empty[0];
    EXPECT_NE(e.message().find("--json: empty FILE"), std::string::npos)
        << e.message();
  }
}

// NotEmpty refuses an empty value of that flag only, in every form; an
// undeclared name is ignored.
TEST(FlagSetTest, NotEmptyRefusesAnEmptyValue) {
  auto parse = [](Args args) {
    std::string ctl = "default", other = "default";
    FlagSet flags("t");
    flags.AddString("ctl", &ctl, "PATH", "");
    flags.AddString("other", &other, "X", "");
    flags.Short("ctl", 'c');
    flags.NotEmpty("ctl");
    flags.NotEmpty("nosuch");
    return flags.Parse(args);
  };
  EXPECT_OK(parse({"--ctl", "x", "--other="}));
  for (const Args& empty : {Args{"--ctl="}, Args{"--ctl", ""}, Args{"-c", ""}}) {
    const Status e = parse(empty);
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << empty[0];
    EXPECT_NE(e.message().find("t: --ctl: empty PATH"), std::string::npos)
        << e.message();
  }
}

// AfterParse hooks run once per successful Parse, in the order added, with
// the flags already set; never after an error.
TEST(FlagSetTest, AfterParseRunsOnceTheFlagsAreSet) {
  std::string dir;
  std::vector<std::string> seen;
  FlagSet flags("t");
  flags.AddString("plot", &dir, "DIR", "");
  flags.AfterParse([&] { seen.push_back("a:" + dir); });
  flags.AfterParse([&] { seen.push_back("b"); });
  EXPECT_EQ(flags.Parse(Args{"--nosuch"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(seen.empty());
  EXPECT_OK(flags.Parse(Args{"--plot", "charts"}));
  EXPECT_EQ(seen, (std::vector<std::string>{"a:charts", "b"}));
}

TEST(FlagSetTest, ShortFlagsAndClusters) {
  struct Parsed {
    bool bytes = false, quiet = false;
    std::string output;
    Status status;
  };
  auto parse = [](Args args) {
    Parsed p;
    FlagSet flags("t");
    flags.AddBool("bytes", &p.bytes, "");
    flags.AddBool("noheadings", &p.quiet, "");
    flags.AddString("output", &p.output, "LIST", "");
    flags.Short("bytes", 'b');
    flags.Short("noheadings", 'n');
    flags.Short("output", 'o');
    p.status = flags.Parse(args);
    return p;
  };
  Parsed p = parse({"-b", "-o", "NAME,DATA"});
  ASSERT_OK(p.status);
  EXPECT_TRUE(p.bytes);
  EXPECT_FALSE(p.quiet);
  EXPECT_EQ(p.output, "NAME,DATA");
  p = parse({"-bnoNAME"});
  ASSERT_OK(p.status);
  EXPECT_TRUE(p.bytes && p.quiet);
  EXPECT_EQ(p.output, "NAME");
  p = parse({"-nb", "--output=DATA"});
  ASSERT_OK(p.status);
  EXPECT_TRUE(p.bytes && p.quiet);
  EXPECT_EQ(p.output, "DATA");
  EXPECT_EQ(parse({"-x"}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parse({"-bx"}).status.message().find("-x"), std::string::npos);
  EXPECT_EQ(parse({"-o"}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"-"}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse({"-o", "A", "--output", "B"}).status.code(),
            StatusCode::kInvalidArgument);  // the same flag twice
  // The usage shows the alias.
  bool b = false;
  FlagSet flags("t");
  flags.AddBool("bytes", &b, "exact sizes");
  flags.AddBool("raw", &b, "raw");
  flags.Short("bytes", 'b');
  const std::string usage = flags.Usage();
  EXPECT_NE(usage.find("  -b, --bytes  exact sizes\n"), std::string::npos)
      << usage;
  EXPECT_NE(usage.find("      --raw    raw\n"), std::string::npos) << usage;
}

TEST(FlagSetTest, SectionsHeadTheirFlagsInTheUsage) {
  bool b = false;
  FlagSet flags("t", "[x]");
  flags.AddBool("first", &b, "1");
  flags.Section("more");
  flags.AddBool("second", &b, "2");
  flags.AddBool("third", &b, "3");
  flags.Section("last");
  flags.AddBool("fourth", &b, "4");
  EXPECT_EQ(flags.Usage(),
            "usage: t [x]\n"
            "\nflags:\n      --first   1\n"
            "\nmore:\n      --second  2\n      --third   3\n"
            "\nlast:\n      --fourth  4\n");
}

TEST(ParseSizeFlagTest, RoundsUpToPagesWithoutWrapping) {
  EXPECT_EQ(ParseSizeFlag("5000", 4096, "4K").value(), 8192u);
  for (const char* huge : {"18446744073709551615", "16E"}) {
    EXPECT_FALSE(ParseSizeFlag(huge, 4096, "4K").has_value()) << huge;
  }
}

TEST(BackingDevValueTest, OnlyARelativePathIsMadeAbsolute) {
  for (const char* same : {"", "none", "/dev/sdb1", "nbd://host/export",
                           "nbd+unix:///x?socket=/run/s.sock"}) {
    EXPECT_EQ(BackingDevValue(same), same);
  }
  EXPECT_EQ(BackingDevValue("wb.img"),
            (std::filesystem::current_path() / "wb.img").string());
}

TEST(SplitCommaListTest, SkipsEmptyItems) {
  EXPECT_EQ(SplitCommaList("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(SplitCommaList("").empty());
  // --recomp-algorithm 'zstd(level=9,dict=F)': its params stay together.
  EXPECT_EQ(SplitCommaList("zstd(level=9,dict=/d),lz4hc"),
            (std::vector<std::string>{"zstd(level=9,dict=/d)", "lz4hc"}));
}

TEST(TextTableTest, PadsColumns) {
  TextTable t({"a", "num"}, {Align::kLeft, Align::kRight});
  t.AddRow({"long", "1"});
  EXPECT_EQ(t.Render(), "a     num\nlong    1\n");
}

TEST(JsonWriterTest, NestsAndEscapes) {
  JsonWriter w;
  w.BeginObject();
  w.Key("s");
  w.String("a\"b\\c\n\x01");
  w.Key("list");
  w.BeginArray();
  w.Int(-1);
  w.Double(NAN);
  w.Bool(true);
  w.EndArray();
  w.Key("empty");
  w.BeginObject();
  w.EndObject();
  w.EndObject();
  EXPECT_EQ(w.Take(),
            "{\n  \"s\": \"a\\\"b\\\\c\\n\\u0001\",\n  \"list\": [\n    -1,\n"
            "    null,\n    true\n  ],\n  \"empty\": {}\n}\n");
}

TEST(PathsTest, SocketsGoInTheRuntimeDirectoryAndZtierCtlWins) {
  const char* old_ctl = std::getenv("ZTIER_CTL");
  const std::string saved = old_ctl != nullptr ? old_ctl : "";
  ::unsetenv("ZTIER_CTL");
  auto dir = DefaultRuntimeDir();
  if (::geteuid() == 0) {
    ASSERT_TRUE(dir.has_value());
    EXPECT_EQ(*dir, "/run/ztier");
    EXPECT_EQ(DefaultCtlPath().value_or(""), "/run/ztier/ztier.ctl");
  } else if (std::getenv("XDG_RUNTIME_DIR") != nullptr) {
    EXPECT_EQ(dir.value_or(""), std::string(std::getenv("XDG_RUNTIME_DIR")) +
                                    "/ztier");
  }
  ::setenv("ZTIER_CTL", "/tmp/elsewhere.ctl", 1);
  EXPECT_EQ(DefaultCtlPath().value_or(""), "/tmp/elsewhere.ctl");
  EXPECT_EQ(ResolveCtlPath("").value_or(""), "/tmp/elsewhere.ctl");
  EXPECT_EQ(ResolveCtlPath("/x/y.ctl").value_or(""), "/x/y.ctl");
  if (old_ctl != nullptr) {
    ::setenv("ZTIER_CTL", saved.c_str(), 1);
  } else {
    ::unsetenv("ZTIER_CTL");
  }
  // MakeRuntimeDir makes it private and accepts one that exists.
  ztier::testing::ScopedTempDir tmp;
  const std::string made = tmp.File("rt");
  ASSERT_TRUE(MakeRuntimeDir(made).ok());
  ASSERT_TRUE(MakeRuntimeDir(made).ok());
  struct stat st;
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(MakeRuntimeDir(tmp.File("no/such/parent")).code(),
            StatusCode::kNotFound);
}

// A line longer than the pipe that is stderr, its writer interrupted by
// signals while the pipe is full (a short write, then EINTR): the whole
// line comes out all the same, once the pipe is read.
TEST(LogTest, SignalsNeitherDropNorCutALine) {
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = [](int) {};  // no SA_RESTART: writev fails with EINTR
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &old), 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const int saved_stderr = ::dup(STDERR_FILENO);
  ASSERT_GE(saved_stderr, 0);
  ASSERT_EQ(::dup2(pipe_fds[1], STDERR_FILENO), STDERR_FILENO);
  ::close(pipe_fds[1]);

  std::string message;
  for (int i = 0; message.size() < (256u << 10); ++i) {
    message += std::to_string(i) + " ";
  }
  std::thread logger([&] { Log(LogLevel::kInfo, message); });
  // The pipe fills (64 KiB) and the writer waits: interrupt it, again and
  // again, for a while.
  for (int i = 0; i < 200; ++i) {
    ::pthread_kill(logger.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0 ||
           (n < 0 && errno == EINTR)) {
      if (n > 0) got.append(buf, static_cast<std::size_t>(n));
    }
  });
  logger.join();
  ::dup2(saved_stderr, STDERR_FILENO);  // the pipe's last writer: EOF
  ::close(saved_stderr);
  reader.join();
  ::close(pipe_fds[0]);
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(got.size(), ("ztier serve: " + message + "\n").size());
  EXPECT_TRUE(got == "ztier serve: " + message + "\n")
      << "the line's first bytes: " << got.substr(0, 40) << ", its last: "
      << got.substr(got.size() - std::min<std::size_t>(got.size(), 40));
}

// A NOTIFY_SOCKET that is not there: Notify's error keeps sendto()'s
// ENOENT (ErrnoNameOf), not the ENODEV of kNotFound, and names the socket.
TEST(ServiceNotifierTest, AFailedSendNamesItsErrno) {
  ztier::testing::ScopedTempDir dir;
  const std::string path = dir.File("notify");
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", path.c_str(), 1), 0);
  const ServiceNotifier notifier;
  ASSERT_EQ(::unsetenv("NOTIFY_SOCKET"), 0);
  ASSERT_TRUE(notifier.enabled());
  const Status s = notifier.Notify("READY=1");
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_EQ(ErrnoNameOf(s), "ENOENT") << s.ToString();
  EXPECT_NE(s.message().find("NOTIFY_SOCKET"), std::string::npos);
  EXPECT_NE(s.message().find(path), std::string::npos);
}

}  // namespace
}  // namespace ztier::tool
