// tls_none.cc: tls.h for a build without TLS (CMake option ZTIER_TLS=OFF),
// which needs no GnuTLS. There is never a TlsContext: Load() fails with
// kUnsupported saying so, and `ztier serve --tls on|require` prints that
// message and exits. A server without a context never offers STARTTLS
// (nbd_server.h), so StartTls() is never reached; it fails the same way.
#include <memory>
#include <string>
#include <utility>

#include "nbd/tls.h"

namespace ztier::nbd {

namespace {

constexpr char kNoTls[] =
    "this ztier was built without TLS (CMake option ZTIER_TLS=OFF); "
    "rebuild with -DZTIER_TLS=ON (needs GnuTLS) to serve NBD over TLS";

}  // namespace

struct TlsContext::Impl {};

TlsContext::TlsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsContext::~TlsContext() = default;

Result<std::unique_ptr<TlsContext>> TlsContext::Load(
    const std::string& /*cert_file*/, const std::string& /*key_file*/) {
  return Err(Status::Unsupported(kNoTls));
}

Result<std::unique_ptr<Transport>> StartTls(int /*fd*/,
                                            const TlsContext& /*ctx*/,
                                            int /*timeout_ms*/) {
  return Err(Status::Unsupported(kNoTls));
}

}  // namespace ztier::nbd
