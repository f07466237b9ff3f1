// protocol.h: the wire format of the control socket (docs/control_protocol.md).
//
// A request is one ASCII header line followed by three raw fields whose
// lengths the header gives, so that a value may hold any bytes (spaces,
// newlines) without quoting:
//
//   REQ <device_len> <attribute_len> <value_len or '-'>\n
//   <device bytes><attribute bytes><value bytes>
//
// '-' means "no value": a show (read) of the attribute; a length, even 0, is
// a store (write). device_len 0 addresses the zram-control operations
// (hot_add, hot_remove, status).
//
// A reply is either
//   OK <text_len>\n<text bytes>            the attribute's text ("" on store)
//   ERR <ERRNO_NAME> <message>\n           one line; the message has no
//                                          control characters
//
// These functions only frame and unframe bytes; they do no IO. Parsing is
// incremental: given the bytes received so far, the parser says it needs
// more, found a complete message (and how many bytes it used), or found the
// stream malformed (after which the connection is closed, since the framing
// is lost).
//
// Thread safety: pure functions.
#ifndef ZTIER_CTL_PROTOCOL_H_
#define ZTIER_CTL_PROTOCOL_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ztier::ctl {

// Largest request (header and fields) a server accepts.
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;
// Longest request header line, newline included.
inline constexpr std::size_t kMaxHeaderBytes = 64;
// Largest OK text a client accepts (a status dump of many devices fits).
inline constexpr std::size_t kMaxReplyTextBytes = 16 << 20;
// Longest error message sent (longer ones are cut).
inline constexpr std::size_t kMaxErrorMessageBytes = 1024;

struct WireRequest {
  std::string device;     // empty: a zram-control operation
  std::string attribute;
  std::optional<std::string> value;  // none: show; set: store
};

struct WireReply {
  bool ok = false;
  std::string text;        // ok: the attribute text
  std::string errno_name;  // !ok: "EINVAL", "EBUSY", ...
  std::string message;     // !ok: what failed
};

enum class ParseState { kNeedMore, kDone, kMalformed };

struct RequestParse {
  ParseState state = ParseState::kNeedMore;
  std::size_t consumed = 0;  // kDone: bytes of `input` the request used
  WireRequest request;       // kDone
  std::string errno_name;    // kMalformed: EINVAL, or E2BIG when too large
  std::string message;       // kMalformed
};

// Parses the request at the start of `input`, bounded by `max_bytes`.
RequestParse ParseRequest(std::string_view input,
                          std::size_t max_bytes = kMaxRequestBytes);
std::string EncodeRequest(const WireRequest& request);

struct ReplyParse {
  ParseState state = ParseState::kNeedMore;
  std::size_t consumed = 0;
  WireReply reply;
  std::string message;  // kMalformed: what was wrong
};

ReplyParse ParseReply(std::string_view input,
                      std::size_t max_text = kMaxReplyTextBytes);
std::string EncodeOk(std::string_view text);
// Control characters in `message` become spaces; it is cut to
// kMaxErrorMessageBytes.
std::string EncodeError(std::string_view errno_name, std::string_view message);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_PROTOCOL_H_
