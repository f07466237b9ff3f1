// json_string.h: a string as JSON text, for every JSON that ztier writes
// (the status report, the benchmarks' results and the capture sidecar).
//
// JSON text is UTF-8 (RFC 8259): well-formed UTF-8 sequences (RFC 3629: no
// overlong form, no surrogate, nothing past U+10FFFF) pass as they are, and
// every other byte (a path or a command line may hold any) becomes
// U+FFFD, so that every JSON reader takes the result. '"' and '\' are
// escaped, newline, carriage return and tab written as \n, \r and \t,
// and the other control characters and DEL as \u00XX.
//
//   std::string out;
//   ztier::ctl::AppendJsonString(out, "caf\xc3\xa9\xff");  // "café\ufffd"
//
// Thread safety: a pure function.
#ifndef ZTIER_CTL_JSON_STRING_H_
#define ZTIER_CTL_JSON_STRING_H_

#include <string>
#include <string_view>

namespace ztier::ctl {

// Appends `s` to `out` as a JSON string, quotes included.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_JSON_STRING_H_
