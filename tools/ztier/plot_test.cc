// File: tools/ztier/plot_test.cc
//
// Tests of plot.h against the real gnuplot (`make deps` installs
// gnuplot-nox): charts are drawn into a temporary folder and the PNGs are
// checked (signature, size from the IHDR chunk); the kept script draws the
// picture again; bad charts and a missing gnuplot are errors.
#include "plot.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>

#include "bench_proc.h"
#include "testing/test_util.h"

namespace ztier::tool {
namespace {

namespace fs = std::filesystem;

// Width and height from a PNG's IHDR chunk; {0, 0} if it is not a PNG.
std::pair<std::uint32_t, std::uint32_t> PngSize(const std::string& bytes) {
  static const std::string kSignature("\x89PNG\r\n\x1a\n", 8);
  if (bytes.size() < 24 || bytes.compare(0, 8, kSignature) != 0 ||
      bytes.compare(12, 4, "IHDR") != 0) {
    return {0, 0};
  }
  auto be32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    }
    return v;
  };
  return {be32(16), be32(20)};
}

Chart LineChart() {
  Chart c{.name = "threads-test",
          .title = "lz4: throughput against threads (page_cluster 'x')",
          .x_label = "threads",
          .y_label = "throughput (MB/s)",
          .log_x = true};
  c.series.push_back({.title = "codec compress",
                      .points = {{1, 834.7, 757.5, 904.5},
                                 {2, 1531.4, 1435.5, 1742.3},
                                 {4, 2900, 2800, 3000}}});
  c.series.push_back({.title = "ideal",
                      .points = {{1, 834.7}, {2, 1669.4}, {4, 3338.8}},
                      .dashed = true,
                      .color = 1});
  return c;
}

Chart BarChart() {
  Chart c{.name = "bars-test",
          .title = "writeback",
          .x_label = "variant",
          .y_label = "throughput (MB/s)",
          .style = PlotStyle::kBars,
          .log_y = true,
          .x_tics = {{0, "sync"}, {1, "batched"}, {2, "fio"}}};
  c.series.push_back({.title = "MB/s",
                      .points = {{0, 71.1, 67.7, 72.6},
                                 {1, 1869.5, 1607.8, 1979.1},
                                 {2, 2451.5, 2147.5, 2810.8}}});
  c.series.push_back({.title = "empty series, left out", .points = {}});
  c.series.push_back({.title = "second",
                      .points = {{0, 50}, {1, 1000}, {2, 2000}}});
  return c;
}

TEST(PlotTest, MedianOfRunsSaysHowManyAndTheBars) {
  EXPECT_EQ(MedianOfRuns(1), "median of 1 run");
  EXPECT_EQ(MedianOfRuns(5), "median of 5 runs, bars min-max");
}

TEST(PlotTest, RendersALineChartToPng) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.File("charts/sub");  // created by Create
  auto plotter = Plotter::Create(dir);
  ASSERT_TRUE(plotter.has_value()) << plotter.error().ToString();
  EXPECT_TRUE(plotter->terminal() == "pngcairo" || plotter->terminal() == "png")
      << plotter->terminal();

  auto png = plotter->Render(LineChart());
  ASSERT_TRUE(png.has_value()) << png.error().ToString();
  EXPECT_EQ(*png, dir + "/threads-test.png");
  const auto size = PngSize(bench::ReadFileText(*png));
  EXPECT_EQ(size.first, 960u);
  EXPECT_EQ(size.second, 600u);

  // The script and data stay beside the picture, with the title, labels
  // and every series in them.
  const std::string gp = bench::ReadFileText(dir + "/threads-test.gp");
  const std::string dat = bench::ReadFileText(dir + "/threads-test.dat");
  EXPECT_NE(gp.find("set title 'lz4: throughput against threads "
                    "(page_cluster ''x'')'"),
            std::string::npos)
      << gp;
  EXPECT_NE(gp.find("set xlabel 'threads'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set ylabel 'throughput (MB/s)'"), std::string::npos);
  EXPECT_NE(gp.find("set logscale x 2"), std::string::npos);
  EXPECT_NE(gp.find("yerrorlines"), std::string::npos);
  EXPECT_NE(gp.find("title 'ideal'"), std::string::npos);
  EXPECT_NE(dat.find("# series: codec compress\n1 834.7 757.5 904.5\n"),
            std::string::npos)
      << dat;
  EXPECT_NE(dat.find("# series: ideal\n1 834.7 834.7 834.7\n"),
            std::string::npos)
      << dat;
  EXPECT_FALSE(fs::exists(dir + "/threads-test.log"));

  // Anyone can draw it again from the kept files.
  fs::remove(*png);
  const std::string cmd =
      "cd '" + dir + "' && gnuplot threads-test.gp >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(PngSize(bench::ReadFileText(*png)).first, 960u);
}

TEST(PlotTest, RendersABarChartWithLogYAndSkipsEmptySeries) {
  testing::ScopedTempDir tmp;
  auto plotter = Plotter::Create(tmp.path());
  ASSERT_TRUE(plotter.has_value()) << plotter.error().ToString();
  auto png = plotter->Render(BarChart());
  ASSERT_TRUE(png.has_value()) << png.error().ToString();
  EXPECT_EQ(PngSize(bench::ReadFileText(*png)).second, 600u);
  const std::string gp = bench::ReadFileText(tmp.File("bars-test.gp"));
  EXPECT_NE(gp.find("with boxes"), std::string::npos) << gp;
  EXPECT_NE(gp.find("with vectors heads"), std::string::npos) << gp;  // bars
  EXPECT_NE(gp.find("with labels"), std::string::npos) << gp;  // medians
  EXPECT_NE(gp.find("'sync' 0"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("empty series"), std::string::npos) << gp;
  // Two drawn series: data blocks 0 and 1, no third.
  EXPECT_NE(gp.find("index 1"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("index 2"), std::string::npos) << gp;
}

TEST(PlotTest, RendersIntoARelativeFolder) {
  testing::ScopedTempDir tmp;
  const fs::path old_cwd = fs::current_path();
  fs::current_path(tmp.path());
  auto plotter = Plotter::Create("rel/charts");
  Result<std::string> png =
      plotter.has_value() ? plotter->Render(LineChart())
                          : Result<std::string>(Err(plotter.error()));
  fs::current_path(old_cwd);
  ASSERT_TRUE(png.has_value()) << png.error().ToString();
  EXPECT_EQ(*png, "rel/charts/threads-test.png");
  EXPECT_EQ(PngSize(bench::ReadFileText(tmp.File(*png))).first, 960u);
}

TEST(PlotTest, AChartWithNoDataIsAnError) {
  testing::ScopedTempDir tmp;
  auto plotter = Plotter::Create(tmp.path());
  ASSERT_TRUE(plotter.has_value()) << plotter.error().ToString();
  Chart c = LineChart();
  for (PlotSeries& s : c.series) s.points.clear();
  auto png = plotter->Render(c);
  ASSERT_FALSE(png.has_value());
  EXPECT_EQ(png.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(png.error().message().find("no data"), std::string::npos)
      << png.error().message();
  EXPECT_FALSE(fs::exists(tmp.File("threads-test.png")));
  EXPECT_FALSE(fs::exists(tmp.File("threads-test.gp")));

  c.series.clear();
  EXPECT_EQ(ValidateChart(c).code(), StatusCode::kInvalidArgument);
}

TEST(PlotTest, RejectsBadNamesAndValues) {
  Chart c = LineChart();
  EXPECT_OK(ValidateChart(c));
  for (const char* bad : {"", "../escape", "a b", ".hidden", "x/y"}) {
    c.name = bad;
    EXPECT_EQ(ValidateChart(c).code(), StatusCode::kInvalidArgument) << bad;
  }
  c = LineChart();
  c.series[0].points[1].y = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ValidateChart(c).code(), StatusCode::kInvalidArgument);
  c = LineChart();
  c.series[0].points[0].x = 0;  // log x
  EXPECT_EQ(ValidateChart(c).code(), StatusCode::kInvalidArgument);
  c = LineChart();
  c.series[0].points[0].y_min = 900;  // above y
  EXPECT_EQ(ValidateChart(c).code(), StatusCode::kInvalidArgument);
  c = BarChart();
  c.series[2].points[0].y = 0;  // log y
  EXPECT_EQ(ValidateChart(c).code(), StatusCode::kInvalidArgument);
}

TEST(PlotTest, MissingGnuplotIsAClearError) {
  testing::ScopedTempDir tmp;
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ASSERT_EQ(setenv("PATH", tmp.path().c_str(), 1), 0);  // no gnuplot there
  auto plotter = Plotter::Create(tmp.File("charts"));
  ASSERT_EQ(setenv("PATH", saved.c_str(), 1), 0);
  ASSERT_FALSE(plotter.has_value());
  EXPECT_EQ(plotter.error().code(), StatusCode::kNotFound);
  EXPECT_NE(plotter.error().message().find("gnuplot"), std::string::npos);
}

}  // namespace
}  // namespace ztier::tool
