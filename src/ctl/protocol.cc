// protocol.cc: framing of control requests and replies (see protocol.h).
#include "ctl/protocol.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace ztier::ctl {
namespace {

constexpr std::string_view kRequestMagic = "REQ ";
constexpr std::string_view kOkMagic = "OK ";
constexpr std::string_view kErrMagic = "ERR ";
// An ERR line: magic, errno name, message, slack.
constexpr std::size_t kMaxErrorLine = 4 + 32 + kMaxErrorMessageBytes + 8;

// A decimal length of 1..9 digits, nothing else.
std::optional<std::size_t> ParseLength(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  std::size_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Whether `input` could still begin with `magic` (or does).
bool PrefixMatches(std::string_view input, std::string_view magic) {
  const std::size_t n = std::min(input.size(), magic.size());
  return input.substr(0, n) == magic.substr(0, n);
}

RequestParse Malformed(std::string_view errno_name, std::string message) {
  RequestParse r;
  r.state = ParseState::kMalformed;
  r.errno_name = std::string(errno_name);
  r.message = std::move(message);
  return r;
}

}  // namespace

RequestParse ParseRequest(std::string_view input, std::size_t max_bytes) {
  if (!PrefixMatches(input, kRequestMagic)) {
    return Malformed("EINVAL", "malformed request: expected 'REQ '");
  }
  const std::size_t nl =
      input.substr(0, kMaxHeaderBytes).find('\n');
  if (nl == std::string_view::npos) {
    if (input.size() >= kMaxHeaderBytes) {
      return Malformed("EINVAL", "malformed request: header line too long");
    }
    return {};  // kNeedMore
  }
  // "REQ D A V": exactly three fields, single spaces.
  std::string_view rest = input.substr(kRequestMagic.size(),
                                       nl - kRequestMagic.size());
  std::string_view fields[3];
  for (int i = 0; i < 3; ++i) {
    const std::size_t sp = rest.find(' ');
    if ((i < 2) != (sp != std::string_view::npos)) {
      return Malformed("EINVAL",
                       "malformed request: header needs 3 lengths");
    }
    fields[i] = rest.substr(0, sp);
    rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
  }
  const auto device_len = ParseLength(fields[0]);
  const auto attribute_len = ParseLength(fields[1]);
  const bool has_value = fields[2] != "-";
  const auto value_len = has_value ? ParseLength(fields[2]) : std::size_t{0};
  if (!device_len || !attribute_len || !value_len) {
    return Malformed("EINVAL", "malformed request: bad length in header");
  }
  const std::size_t header = nl + 1;
  // Each length is < 1e9, so the sum cannot overflow.
  const std::size_t total = header + *device_len + *attribute_len + *value_len;
  if (total > max_bytes) {
    return Malformed("E2BIG", "request of " + std::to_string(total) +
                                  " bytes exceeds the limit of " +
                                  std::to_string(max_bytes));
  }
  if (input.size() < total) return {};  // kNeedMore
  RequestParse r;
  r.state = ParseState::kDone;
  r.consumed = total;
  std::size_t at = header;
  r.request.device = std::string(input.substr(at, *device_len));
  at += *device_len;
  r.request.attribute = std::string(input.substr(at, *attribute_len));
  at += *attribute_len;
  if (has_value) r.request.value = std::string(input.substr(at, *value_len));
  return r;
}

std::string EncodeRequest(const WireRequest& request) {
  std::string out(kRequestMagic);
  out += std::to_string(request.device.size());
  out += ' ';
  out += std::to_string(request.attribute.size());
  out += ' ';
  out += request.value ? std::to_string(request.value->size()) : "-";
  out += '\n';
  out += request.device;
  out += request.attribute;
  if (request.value) out += *request.value;
  return out;
}

ReplyParse ParseReply(std::string_view input, std::size_t max_text) {
  ReplyParse r;
  const bool ok = PrefixMatches(input, kOkMagic);
  if (!ok && !PrefixMatches(input, kErrMagic)) {
    r.state = ParseState::kMalformed;
    r.message = "malformed reply: expected 'OK ' or 'ERR '";
    return r;
  }
  const std::size_t limit = ok ? kOkMagic.size() + 12 : kMaxErrorLine;
  const std::size_t nl = input.substr(0, limit).find('\n');
  if (nl == std::string_view::npos) {
    if (input.size() >= limit) {
      r.state = ParseState::kMalformed;
      r.message = "malformed reply: header line too long";
    }
    return r;
  }
  if (ok) {
    const auto len = ParseLength(input.substr(kOkMagic.size(),
                                              nl - kOkMagic.size()));
    if (!len || *len > max_text) {
      r.state = ParseState::kMalformed;
      r.message = "malformed reply: bad or oversized text length";
      return r;
    }
    if (input.size() < nl + 1 + *len) return r;  // kNeedMore
    r.state = ParseState::kDone;
    r.consumed = nl + 1 + *len;
    r.reply.ok = true;
    r.reply.text = std::string(input.substr(nl + 1, *len));
    return r;
  }
  std::string_view line = input.substr(kErrMagic.size(), nl - kErrMagic.size());
  const std::size_t sp = line.find(' ');
  r.reply.errno_name = std::string(line.substr(0, sp));
  r.reply.message =
      sp == std::string_view::npos ? std::string() : std::string(line.substr(sp + 1));
  if (r.reply.errno_name.empty()) {
    r.state = ParseState::kMalformed;
    r.message = "malformed reply: no errno name";
    return r;
  }
  r.state = ParseState::kDone;
  r.consumed = nl + 1;
  return r;
}

std::string EncodeOk(std::string_view text) {
  std::string out(kOkMagic);
  out += std::to_string(text.size());
  out += '\n';
  out += text;
  return out;
}

std::string EncodeError(std::string_view errno_name, std::string_view message) {
  std::string out(kErrMagic);
  out += errno_name;
  out += ' ';
  const std::size_t n = std::min(message.size(), kMaxErrorMessageBytes);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  }
  out += '\n';
  return out;
}

}  // namespace ztier::ctl
