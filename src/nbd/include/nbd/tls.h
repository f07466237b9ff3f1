// tls.h: TLS for NBD connections (NBD_OPT_STARTTLS), with GnuTLS.
//
// A TlsContext holds the server's certificate chain, its private key and the
// protocol priorities, loaded once when the server starts. StartTls() runs
// the server side of a TLS handshake on one accepted socket and returns a
// Transport (transport.h) that encrypts every byte after it.
//
// The server authenticates itself with its certificate; client certificates
// are not requested (any client that completes the handshake is served).
//
// Errors:
//   Load: kInvalidArgument naming the file and the reason (missing or
//         unreadable file, not PEM, key does not match the certificate).
//   StartTls: kIoError; "timed out ..." when the handshake did not finish in
//         time, otherwise GnuTLS's reason (a client that sends something
//         other than a TLS ClientHello, or hangs up).
//   Transport calls: kIoError, as transport.h says.
//   In a build without TLS (ZTIER_TLS=OFF, tls_none.cc): Load and StartTls
//         always fail with kUnsupported saying so.
//
// Threading: a TlsContext is immutable after Load() and may be shared by any
// number of concurrent StartTls() calls and transports (GnuTLS allows
// read-only sharing of credentials). It must outlive every transport made
// from it.
//
// The TLS transport keeps transport.h's rule (one thread receives while
// another sends). GnuTLS documents that "a gnutls_session_t object could also
// be shared by two threads, one sending, the other receiving" (GnuTLS manual,
// "Thread safety"), with exceptions for re-handshakes and key updates. This
// transport starts neither (a TLS 1.2 renegotiation request from the client
// is an error), but TLS 1.3 key updates also run inside ordinary record calls
// (the client's KeyUpdate inside a receive, GnuTLS's automatic one after 2^24
// records inside a send), so every GnuTLS call is made under a per-transport
// mutex. No GnuTLS call blocks (tls.cc), so the lock is held for one record's
// cryptography at most and never while waiting for the peer. Shutdown() never
// calls into GnuTLS: it shuts the socket down, which wakes a thread blocked
// in Recv or Send.
//
// The socket: the transport borrows `fd` and never closes it. Its file status
// flags (blocking or not) are left as they are: every socket call made here
// passes MSG_DONTWAIT and waits in poll(), so the plain transport that carried
// the handshake before STARTTLS needs nothing undone. Once StartTls() is
// called, only the TLS transport may touch the socket.
#ifndef ZTIER_NBD_TLS_H_
#define ZTIER_NBD_TLS_H_

#include <memory>
#include <string>

#include "nbd/transport.h"
#include "ztier/status.h"

namespace ztier::nbd {

class TlsContext final {
 public:
  // Loads the PEM certificate chain in `cert_file` (the server's certificate
  // first, then any intermediates) and the PEM private key in `key_file`.
  static Result<std::unique_ptr<TlsContext>> Load(const std::string& cert_file,
                                                  const std::string& key_file);
  ~TlsContext();

  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // For tls.cc: the GnuTLS credentials and priorities (opaque here so that
  // this header does not pull in gnutls.h).
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit TlsContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs the server side of the TLS handshake on the connected socket `fd`
// (borrowed: never closed here) and returns the encrypted transport over it.
// Fails within about `timeout_ms` (-1: no limit) when the client sends
// nothing, too little, or bytes that are not TLS. On failure the socket is in
// an unknown state and must be closed.
Result<std::unique_ptr<Transport>> StartTls(int fd, const TlsContext& ctx,
                                            int timeout_ms);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_TLS_H_
