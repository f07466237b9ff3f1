// File: tools/ztier/tool_common.cc
//
// The shared subcommand helpers of tool_common.h.
#include "tool_common.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ztier/codec.h"
#include "ztier/device.h"
#include "ztier/page.h"

namespace ztier::tool {

std::string ErrnoText(const Status& s) {
  return std::string(ErrnoNameOf(s)) + ": " + s.message();
}

void PrintError(std::string_view command, const std::string& message) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(command.size()),
               command.data(), message.c_str());
}

int ReportFailure(std::string_view command, const std::string& message) {
  PrintError(command, message);
  return 1;
}

int ReportUsageError(std::string_view command, const std::string& message) {
  const int n = static_cast<int>(command.size());
  std::fprintf(stderr, "%.*s: %s\nRun '%.*s --help' for usage.\n", n,
               command.data(), message.c_str(), n, command.data());
  return 2;
}


namespace fs = std::filesystem;

std::string AbsoluteNote(const std::string& path) {
  std::error_code ec;
  const std::string abs = fs::absolute(path, ec).lexically_normal().string();
  return ec || abs == path ? "" : " (" + abs + ")";
}

std::string BackingDevValue(const std::string& value) {
  if (value.empty() || value.front() == '/' || value == "none" ||
      value.find("://") != std::string::npos) {
    return value;
  }
  std::error_code ec;
  const auto abs = fs::absolute(value, ec);
  return ec ? value : abs.lexically_normal().string();
}

Status CheckCodecName(std::string_view name, std::string_view noun) {
  if (IsCodecName(name)) return Status::Ok();
  std::string list;
  for (std::string_view k : CodecNames()) {
    list += (list.empty() ? "" : ", ") + std::string(k);
  }
  return Status::InvalidArgument("unknown " + std::string(noun) + " '" +
                                 std::string(name) + "' (known: " + list + ")");
}

Status AddCodecs(std::span<const std::string> names,
                 std::vector<std::string>* codecs) {
  for (const std::string& name : names) {
    ZT_RETURN_IF_ERROR(CheckCodecName(name));
    if (std::find(codecs->begin(), codecs->end(), name) == codecs->end()) {
      codecs->push_back(name);
    }
  }
  return Status::Ok();
}

Result<std::uint64_t> ParseSizeFlag(const std::string& text, std::uint64_t min,
                                    std::string_view min_text) {
  auto size = ParseSize(text);
  if (size.has_value() && *size > UINT64_MAX / 2) {
    return Err(Status::InvalidArgument("--size " + text + ": too large"));
  }
  if (!size.has_value() || *size < min) {
    return Err(Status::InvalidArgument(
        "--size " + text + ": " +
        (size.has_value() ? "must be at least " + std::string(min_text)
                          : size.error().message())));
  }
  return (*size + kPageSize - 1) / kPageSize * kPageSize;
}

Result<corpus::PageSet> LoadCorpus(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Err(Status::NotFound(
        "no corpus: the corpus file '" + path + "'" + AbsoluteNote(path) +
        " is missing.\nPass a corpus with --corpus FILE (a .pages.zst file, "
        "or any plain file read as 4096-byte pages)."));
  }
  auto set = corpus::LoadPageSet(path);
  if (!set.has_value()) {
    return Err(Status(set.error().code(), "cannot load corpus " + path + ": " +
                                              set.error().ToString()));
  }
  return set;
}

Result<std::string> MakeTempDir(std::string_view prefix) {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / (std::string(prefix) + ".XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Err(PosixError("mkdtemp " + tmpl, errno));
  }
  return tmpl;
}

Result<TempDir> TempDir::Create(std::string_view prefix) {
  ZT_ASSIGN_OR_RETURN(std::string path, MakeTempDir(prefix));
  return TempDir(std::move(path));
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace ztier::tool
