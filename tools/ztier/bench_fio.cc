// File: tools/ztier/bench_fio.cc
//
// fio jobs, command lines and JSON parsing for `ztier bench nbd`
// (bench_fio.h). The parser is a small recursive-descent JSON reader
// into a tree; fio's documents are a few tens of KiB.
#include "bench_fio.h"

#include <cstdlib>
#include <optional>

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

// ---- a minimal JSON tree ----

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<JsonValue> items;                       // kArray
  std::vector<std::pair<std::string, JsonValue>> members;  // kObject

  const JsonValue* Get(std::string_view key) const {
    if (type != Type::kObject) return nullptr;
    for (const auto& [k, v] : members) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  std::optional<JsonValue> ParseDocument() {
    JsonValue v;
    if (!ParseValue(&v, 0)) return std::nullopt;
    SkipSpace();
    // Trailing text (fio may print notices after the document) is ignored.
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool ParseValue(JsonValue* v, int depth) {
    if (depth > kMaxDepth) return false;
    SkipSpace();
    if (pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v->type = JsonValue::Type::kString;
      return ParseString(&v->text);
    }
    if (Literal("true")) {
      v->type = JsonValue::Type::kBool;
      v->boolean = true;
      return true;
    }
    if (Literal("false")) {
      v->type = JsonValue::Type::kBool;
      return true;
    }
    if (Literal("null")) return true;
    return ParseNumber(v);
  }

  bool ParseNumber(JsonValue* v) {
    const std::size_t start = pos_;
    while (pos_ < s_.size() &&
           std::string_view("+-0123456789.eE").find(s_[pos_]) !=
               std::string_view::npos) {
      ++pos_;
    }
    if (pos_ == start) return false;
    const std::string token(s_.substr(start, pos_ - start));
    char* end = nullptr;
    v->number = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) return false;
    v->type = JsonValue::Type::kNumber;
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return false;
      const char e = s_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'u':
          // Kept as a '?': no key or value the benchmark reads needs it.
          if (pos_ + 4 > s_.size()) return false;
          pos_ += 4;
          out->push_back('?');
          break;
        default: out->push_back(e);  // '"', '\\', '/'
      }
    }
    return false;
  }

  bool ParseArray(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      v->items.emplace_back();
      if (!ParseValue(&v->items.back(), depth + 1)) return false;
      SkipSpace();
      if (pos_ >= s_.size()) return false;
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return false;
    }
  }

  bool ParseObject(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return false;
      std::string key;
      if (!ParseString(&key)) return false;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return false;
      ++pos_;
      v->members.emplace_back(std::move(key), JsonValue{});
      if (!ParseValue(&v->members.back().second, depth + 1)) return false;
      SkipSpace();
      if (pos_ >= s_.size()) return false;
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return false;
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

Result<FioDirection> Direction(const JsonValue& job, std::string_view name) {
  const JsonValue* d = job.Get(name);
  if (d == nullptr || d->type != JsonValue::Type::kObject) {
    return Err(Status::Corruption("fio JSON: no jobs[0]." + std::string(name)));
  }
  FioDirection out;
  const JsonValue* iops = d->Get("iops");
  const JsonValue* bw = d->Get("bw_bytes");
  if (iops == nullptr || iops->type != JsonValue::Type::kNumber ||
      bw == nullptr || bw->type != JsonValue::Type::kNumber) {
    return Err(Status::Corruption("fio JSON: no numeric iops and bw_bytes "
                                  "under jobs[0]." + std::string(name)));
  }
  out.iops = iops->number;
  out.bw_bytes = bw->number;
  if (const JsonValue* io = d->Get("io_bytes");
      io != nullptr && io->type == JsonValue::Type::kNumber && io->number > 0) {
    out.io_bytes = static_cast<std::uint64_t>(io->number);
  }
  return out;
}

std::string Flag(std::string_view name, std::string_view value) {
  return "--" + std::string(name) + "=" + std::string(value);
}

}  // namespace

std::span<const NbdJob> StandardJobs() { return kJobs; }

std::string JobTitle(const NbdJob& job) {
  const std::string size = job.block_size % 1024 == 0
                               ? std::to_string(job.block_size / 1024) + "k"
                               : std::to_string(job.block_size);
  return std::string(job.rw) + " " + size + " QD" +
         std::to_string(job.iodepth);
}

std::vector<std::string> FioCommonFlags() {
  return {"--ioengine=nbd", "--buffer_compress_percentage=50",
          "--refill_buffers", "--group_reporting", "--output-format=json"};
}

std::vector<std::string> FioJobArgs(const std::string& fio_path,
                                    const NbdJob& job, const std::string& uri,
                                    std::uint64_t area_bytes,
                                    std::int64_t seconds) {
  // --uri is an option of the nbd engine: it must follow --ioengine.
  std::vector<std::string> argv = {fio_path, Flag("name", job.name)};
  for (std::string& f : FioCommonFlags()) argv.push_back(std::move(f));
  argv.push_back(Flag("uri", uri));
  argv.push_back(Flag("rw", job.rw));
  argv.push_back(Flag("bs", std::to_string(job.block_size)));
  argv.push_back(Flag("iodepth", std::to_string(job.iodepth)));
  argv.push_back(Flag("size", std::to_string(area_bytes)));
  argv.push_back("--time_based");
  argv.push_back(Flag("runtime", std::to_string(seconds)));
  return argv;
}

std::vector<std::string> FioFillArgs(const std::string& fio_path,
                                     const std::string& uri,
                                     std::uint64_t area_bytes) {
  std::vector<std::string> argv = {fio_path, "--name=fill"};
  for (std::string& f : FioCommonFlags()) argv.push_back(std::move(f));
  argv.push_back(Flag("uri", uri));
  argv.push_back("--rw=write");
  argv.push_back(Flag("bs", std::to_string(128 * 1024)));
  argv.push_back("--iodepth=8");
  argv.push_back(Flag("size", std::to_string(area_bytes)));
  return argv;
}

Result<FioFigures> ParseFioJson(std::string_view text) {
  // The document starts at the first '{' at the start of a line.
  std::size_t start = std::string_view::npos;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{' && (i == 0 || text[i - 1] == '\n')) {
      start = i;
      break;
    }
  }
  if (start == std::string_view::npos) {
    return Err(Status::Corruption("fio printed no JSON document"));
  }
  JsonParser parser(text.substr(start));
  std::optional<JsonValue> doc = parser.ParseDocument();
  if (!doc.has_value()) return Err(Status::Corruption("fio JSON: malformed"));
  const JsonValue* jobs = doc->Get("jobs");
  if (jobs == nullptr || jobs->type != JsonValue::Type::kArray ||
      jobs->items.empty() ||
      jobs->items[0].type != JsonValue::Type::kObject) {
    return Err(Status::Corruption("fio JSON: no jobs[0]"));
  }
  const JsonValue& job = jobs->items[0];
  FioFigures fig;
  ZT_ASSIGN_OR_RETURN(fig.read, Direction(job, "read"));
  ZT_ASSIGN_OR_RETURN(fig.write, Direction(job, "write"));
  if (const JsonValue* e = job.Get("error");
      e != nullptr && e->type == JsonValue::Type::kNumber) {
    fig.error = static_cast<std::int64_t>(e->number);
  }
  const JsonValue* usr = job.Get("usr_cpu");
  const JsonValue* sys = job.Get("sys_cpu");
  if (usr != nullptr && usr->type == JsonValue::Type::kNumber &&
      sys != nullptr && sys->type == JsonValue::Type::kNumber) {
    fig.cpu_percent = usr->number + sys->number;
  }
  return fig;
}

Result<FioFigures> RunFio(const std::vector<std::string>& argv,
                          const std::string& dir,
                          std::chrono::milliseconds timeout) {
  const std::string out = dir + "/fio.json";
  const std::string err = dir + "/fio.err";
  ZT_ASSIGN_OR_RETURN(ExitInfo e,
                      RunToCompletion(argv, {.cwd = dir, .stdout_path = out,
                                             .stderr_path = err},
                                      timeout));
  if (!e.ok()) {
    return Err(Status::IoError(CommandLine(argv) + ": " + e.Describe() +
                               "; stderr:\n" + ReadFileText(err, 4096)));
  }
  auto fig = ParseFioJson(ReadFileText(out));
  if (!fig.has_value()) {
    return Err(Status::Corruption(CommandLine(argv) + ": " +
                                  fig.error().message()));
  }
  if (fig->error != 0) {
    return Err(Status::IoError(CommandLine(argv) + ": fio job error " +
                               std::to_string(fig->error) + "; stderr:\n" +
                               ReadFileText(err, 4096)));
  }
  return *fig;
}

}  // namespace ztier::tool::bench
