// File: tools/ztier/bench_fio.cc
//
// fio jobs, command lines and output for the benchmarks (bench_fio.h).
// fio's JSON is read by a small recursive walk that keeps every number
// under its dotted path ("jobs.0.read.iops"); the documents are a few tens
// of KiB.
#include "bench_fio.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "bench_proc.h"

namespace ztier::tool::bench {
namespace {

constexpr NbdJob kJobs[] = {
    {"randwrite-4k-qd1", "randwrite", 4096, 1, true},
    {"randwrite-4k-qd32", "randwrite", 4096, 32, true},
    {"randread-4k-qd1", "randread", 4096, 1, false},
    {"randread-4k-qd32", "randread", 4096, 32, false},
    {"write-128k-qd8", "write", 128 * 1024, 8, true},
    {"read-128k-qd8", "read", 128 * 1024, 8, false},
};

using Numbers = std::map<std::string, double, std::less<>>;

void SkipSpace(std::string_view s, std::size_t& i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
}

// The string at s[i] into *out, escapes undone only as far as the escaped
// character itself (no key or value the benchmarks read has one).
bool ReadString(std::string_view s, std::size_t& i, std::string* out) {
  if (i >= s.size() || s[i] != '"') return false;
  out->clear();
  for (++i; i < s.size(); ++i) {
    if (s[i] == '"') return ++i, true;
    if (s[i] == '\\') ++i;
    if (i < s.size()) out->push_back(s[i]);
  }
  return false;
}

// The value at s[i], its numbers into *out under `path`; false when it is
// not well-formed JSON.
bool Walk(std::string_view s, std::size_t& i, const std::string& path,
          int depth, Numbers* out) {
  SkipSpace(s, i);
  if (i >= s.size() || depth > 64) return false;
  const char open = s[i];
  if (open == '{' || open == '[') {
    const char close = open == '{' ? '}' : ']';
    SkipSpace(s, ++i);
    if (i < s.size() && s[i] == close) return ++i, true;
    for (std::size_t n = 0;; ++n) {
      std::string key = std::to_string(n);
      if (open == '{') {
        SkipSpace(s, i);
        if (!ReadString(s, i, &key)) return false;
        SkipSpace(s, i);
        if (i >= s.size() || s[i++] != ':') return false;
      }
      if (!Walk(s, i, path + "." + key, depth + 1, out)) return false;
      SkipSpace(s, i);
      if (i >= s.size()) return false;
      const char sep = s[i++];
      if (sep == close) return true;
      if (sep != ',') return false;
    }
  }
  std::string text;
  if (open == '"') return ReadString(s, i, &text);
  for (std::string_view word : {"true", "false", "null"}) {
    if (s.substr(i, word.size()) == word) return i += word.size(), true;
  }
  const std::size_t start = i;
  i = std::min(s.size(), s.find_first_not_of("+-0123456789.eE", i));
  const std::string token(s.substr(start, i - start));
  char* end = nullptr;
  (*out)[path] = std::strtod(token.c_str(), &end);
  return !token.empty() && end == token.c_str() + token.size();
}

// The untimed fill: one sequential pass over the area.
constexpr NbdJob kFill = {"fill", "write", 128 * 1024, 8, true};

// fio NAME COMMON --uri=URI --rw=RW --bs=BS --iodepth=D --size=AREA: --uri
// is an option of the nbd engine, so it follows --ioengine.
std::vector<std::string> Args(const std::string& fio, const NbdJob& job,
                              const std::string& uri, std::uint64_t area) {
  std::vector<std::string> argv = {fio, "--name=" + std::string(job.name)};
  for (std::string& f : FioCommonFlags()) argv.push_back(std::move(f));
  argv.insert(argv.end(), {"--uri=" + uri, "--rw=" + std::string(job.rw),
                           "--bs=" + std::to_string(job.block_size),
                           "--iodepth=" + std::to_string(job.iodepth),
                           "--size=" + std::to_string(area)});
  return argv;
}

}  // namespace

std::span<const NbdJob> StandardJobs() { return kJobs; }

std::string JobTitle(const NbdJob& job) {
  const std::string size = job.block_size % 1024 == 0
                               ? std::to_string(job.block_size / 1024) + "k"
                               : std::to_string(job.block_size);
  return std::string(job.rw) + " " + size + " QD" + std::to_string(job.iodepth);
}

std::vector<std::string> FioCommonFlags() {
  return {"--ioengine=nbd", "--buffer_compress_percentage=50",
          "--refill_buffers", "--group_reporting", "--output-format=json"};
}

std::vector<std::string> FioJobArgs(const std::string& fio_path,
                                    const NbdJob& job, const std::string& uri,
                                    std::uint64_t area_bytes,
                                    std::int64_t seconds) {
  std::vector<std::string> argv = Args(fio_path, job, uri, area_bytes);
  argv.insert(argv.end(),
              {"--time_based", "--runtime=" + std::to_string(seconds)});
  return argv;
}

std::vector<std::string> FioFillArgs(const std::string& fio_path,
                                     const std::string& uri,
                                     std::uint64_t area_bytes) {
  return Args(fio_path, kFill, uri, area_bytes);
}

Result<FioFigures> ParseFioJson(std::string_view text) {
  std::size_t i = text.starts_with('{') ? 0 : text.find("\n{");
  if (i == std::string_view::npos) {
    return Err(Status::Corruption("fio printed no JSON document"));
  }
  if (text[i] == '\n') ++i;
  Numbers n;
  if (!Walk(text, i, "", 0, &n)) {
    return Err(Status::Corruption("fio JSON: malformed"));
  }
  const auto get = [&](const std::string& key, double missing) {
    auto it = n.find(".jobs.0." + key);
    return it == n.end() ? missing : it->second;
  };
  constexpr double kNone = -1;  // what no count or rate in fio's JSON is
  FioFigures fig;
  for (auto [d, name] : {std::pair{&fig.read, std::string("read")},
                         {&fig.write, std::string("write")}}) {
    d->iops = get(name + ".iops", kNone);
    d->bw_bytes = get(name + ".bw_bytes", kNone);
    d->io_bytes =
        static_cast<std::uint64_t>(std::max(0.0, get(name + ".io_bytes", 0)));
    if (d->iops == kNone || d->bw_bytes == kNone) {
      return Err(Status::Corruption(
          "fio JSON: no numeric iops and bw_bytes under jobs[0]." + name));
    }
  }
  fig.error = static_cast<std::int64_t>(get("error", 0));
  const double usr = get("usr_cpu", kNone), sys = get("sys_cpu", kNone);
  if (usr != kNone && sys != kNone) fig.cpu_percent = usr + sys;
  return fig;
}

Result<FioFigures> RunFio(const std::vector<std::string>& argv,
                          const std::string& dir,
                          std::chrono::milliseconds timeout) {
  const std::string out = dir + "/fio.json";
  const std::string err = dir + "/fio.err";
  ZT_ASSIGN_OR_RETURN(
      ExitInfo e,
      RunToCompletion(
          argv, {.cwd = dir, .stdout_path = out, .stderr_path = err}, timeout));
  Result<FioFigures> fig = Err(Status::IoError(e.Describe()));
  if (e.ok()) fig = ParseFioJson(ReadFileText(out));
  if (fig.has_value() && fig->error != 0) {
    fig = Err(Status::IoError("fio job error " + std::to_string(fig->error)));
  }
  if (!fig.has_value()) {
    return Err(Status(fig.error().code(),
                      CommandLine(argv) + ": " + fig.error().message() +
                          "; stderr:\n" + ReadFileText(err, 4096)));
  }
  return *fig;
}

}  // namespace ztier::tool::bench
