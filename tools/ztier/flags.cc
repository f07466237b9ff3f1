// File: tools/ztier/flags.cc
//
// The flag parser of flags.h. Numbers go through std::from_chars so that
// "5x", "" and overflow are all rejected rather than read as a prefix.
#include "flags.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

namespace ztier::tool {

std::vector<std::string> SplitCommaList(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  int depth = 0;  // parentheses open: "zstd(level=9,dict=F)" is one item
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c != ',' || (depth > 0 && i < text.size())) continue;
    if (i > start) items.emplace_back(text.substr(start, i - start));
    start = i + 1;
  }
  return items;
}

void FlagSet::AddString(std::string name, std::string* out,
                        std::string value_name, std::string help) {
  Declare({std::move(name), Kind::kString, out, std::move(value_name),
           std::move(help)});
}

void FlagSet::AddOutputFile(std::string name, std::string* out,
                            std::string value_name, std::string help) {
  AddString(std::move(name), out, std::move(value_name), std::move(help));
  flags_.back().output_file = true;
  flags_.back().not_empty = true;
}

void FlagSet::AddList(std::string name, std::vector<std::string>* out,
                      std::string value_name, std::string help) {
  Declare({std::move(name), Kind::kList, out, std::move(value_name),
           std::move(help)});
}

void FlagSet::AddInt(std::string name, std::int64_t* out,
                     std::string value_name, std::string help, std::int64_t min,
                     std::int64_t max) {
  Declare({std::move(name), Kind::kInt, out, std::move(value_name),
           std::move(help), min, max});
}

void FlagSet::AddBool(std::string name, bool* out, std::string help) {
  Declare({std::move(name), Kind::kBool, out, "", std::move(help)});
}

void FlagSet::Declare(Flag flag) {
  flag.section = section_;
  flags_.push_back(std::move(flag));
}

void FlagSet::Short(std::string_view name, char letter) {
  Flag* f = Find(name);
  if (f != nullptr && letter != 'h') f->letter = letter;
}

void FlagSet::NotEmpty(std::string_view name) {
  Flag* f = Find(name);
  if (f != nullptr && f->kind == Kind::kString) f->not_empty = true;
}

void FlagSet::AfterParse(std::function<void()> hook) {
  after_parse_.push_back(std::move(hook));
}

Status FlagSet::ParseShort(std::span<const std::string_view> args,
                           std::size_t* i) {
  const std::string_view word = args[*i];
  for (std::size_t k = 1; k < word.size(); ++k) {
    Flag* flag = nullptr;
    for (Flag& f : flags_) {
      if (f.letter == word[k]) flag = &f;
    }
    if (flag == nullptr) {
      return Status::InvalidArgument(command_ + ": unknown flag -" +
                                     std::string(1, word[k]));
    }
    if (flag->kind == Kind::kBool) {
      ZT_RETURN_IF_ERROR(Set(*flag, "true"));
      continue;
    }
    if (k + 1 < word.size()) return Set(*flag, word.substr(k + 1));
    if (*i + 1 < args.size()) return Set(*flag, args[++*i]);
    return Status::InvalidArgument(command_ + ": -" + std::string(1, word[k]) +
                                   " needs a value (" + flag->value_name + ")");
  }
  return Status::Ok();
}

FlagSet::Flag* FlagSet::Find(std::string_view name) {
  for (Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool FlagSet::WasSet(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return f.seen;
  }
  return false;
}

Status FlagSet::Set(Flag& flag, std::string_view value) {
  const std::string where = command_ + ": --" + flag.name;
  if (flag.seen && flag.kind != Kind::kList) {
    return Status::InvalidArgument(where + " given more than once");
  }
  flag.seen = true;
  switch (flag.kind) {
    case Kind::kString:
      if (flag.not_empty && value.empty()) {
        return Status::InvalidArgument(where + ": empty " + flag.value_name);
      }
      *static_cast<std::string*>(flag.out) = std::string(value);
      return Status::Ok();
    case Kind::kList: {
      auto* out = static_cast<std::vector<std::string>*>(flag.out);
      for (std::string& item : SplitCommaList(value)) {
        out->push_back(std::move(item));
      }
      return Status::Ok();
    }
    case Kind::kInt: {
      std::int64_t v = 0;
      const char* end = value.data() + value.size();
      auto [ptr, ec] = std::from_chars(value.data(), end, v);
      if (!value.empty() && ec == std::errc::result_out_of_range &&
          ptr == end) {
        return Status::InvalidArgument(
            where + ": " + std::string(value) + " is out of range [" +
            std::to_string(flag.min) + ", " + std::to_string(flag.max) + "]");
      }
      if (value.empty() || ec != std::errc() || ptr != end) {
        return Status::InvalidArgument(where + ": '" + std::string(value) +
                                       "' is not a whole number");
      }
      if (v < flag.min || v > flag.max) {
        return Status::InvalidArgument(
            where + ": " + std::to_string(v) + " is out of range [" +
            std::to_string(flag.min) + ", " + std::to_string(flag.max) + "]");
      }
      *static_cast<std::int64_t*>(flag.out) = v;
      return Status::Ok();
    }
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(flag.out) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(flag.out) = false;
      } else {
        return Status::InvalidArgument(where + ": '" + std::string(value) +
                                       "' is not true or false");
      }
      return Status::Ok();
  }
  return Status::Ok();
}

Status FlagSet::Parse(std::span<const std::string_view> args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      ZT_RETURN_IF_ERROR(ParseShort(args, &i));
      continue;
    }
    if (!arg.starts_with("--") || arg.size() == 2) {
      return Status::InvalidArgument(command_ + ": unexpected argument '" +
                                     std::string(arg) + "'");
    }
    arg.remove_prefix(2);
    const std::size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    Flag* flag = Find(name);
    if (flag == nullptr) {
      return Status::InvalidArgument(command_ + ": unknown flag --" +
                                     std::string(name));
    }
    if (eq != std::string_view::npos) {
      ZT_RETURN_IF_ERROR(Set(*flag, arg.substr(eq + 1)));
    } else if (flag->kind == Kind::kBool) {
      ZT_RETURN_IF_ERROR(Set(*flag, "true"));
    } else if (i + 1 < args.size()) {
      ZT_RETURN_IF_ERROR(Set(*flag, args[++i]));
    } else {
      return Status::InvalidArgument(command_ + ": --" + std::string(name) +
                                     " needs a value (" + flag->value_name +
                                     ")");
    }
  }
  ZT_RETURN_IF_ERROR(CheckOutputFolders());
  for (const std::function<void()>& hook : after_parse_) hook();
  return Status::Ok();
}


Status FlagSet::CheckOutputFolders() const {
  namespace fs = std::filesystem;
  for (const Flag& f : flags_) {
    if (!f.output_file) continue;
    const auto& path = *static_cast<const std::string*>(f.out);
    if (path.empty()) continue;
    const fs::path folder = fs::path(path).parent_path();
    std::error_code ec;
    if (folder.empty() || fs::is_directory(folder, ec)) continue;
    return Status::InvalidArgument(command_ + ": --" + f.name + " " + path +
                                   ": no folder " + folder.string());
  }
  return Status::Ok();
}

std::optional<int> FlagSet::ParseOrUsageError(
    std::span<const std::string_view> args) {
  if (Status s = Parse(args); !s.ok()) {
    std::fprintf(stderr, "%s\nRun '%s --help' for usage.\n",
                 s.message().c_str(), command_.c_str());
    return 2;
  }
  return std::nullopt;
}

std::optional<int> FlagSet::ParseCommandLine(
    std::span<const std::string_view> args, std::string_view about) {
  if (HelpRequested(args)) {
    const std::string text =
        command_ + ": " + std::string(about) + "\n\n" + Usage();
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  return ParseOrUsageError(args);
}

std::string FlagSet::Usage() const {
  std::string text = "usage: " + command_ + " " + synopsis_ + "\n";
  std::vector<std::string> left;
  std::size_t width = 0;
  for (const Flag& f : flags_) {
    std::string l = f.letter != 0 ? std::string("  -") + f.letter + ", --"
                                  : std::string("      --");
    l += f.name;
    if (!f.value_name.empty()) l += " " + f.value_name;
    width = std::max(width, l.size());
    left.push_back(std::move(l));
  }
  for (std::size_t i = 0; i < flags_.size(); ++i) {
    const std::string& section = flags_[i].section;
    if (i == 0 || section != flags_[i - 1].section) {
      text += "\n" + (section.empty() ? "flags" : section) + ":\n";
    }
    text += left[i] + std::string(width + 2 - left[i].size(), ' ') +
            flags_[i].help + "\n";
  }
  return text;
}

bool FlagSet::HelpRequested(std::span<const std::string_view> args) {
  for (std::string_view a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace ztier::tool
