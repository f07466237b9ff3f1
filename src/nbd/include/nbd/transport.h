// transport.h: the byte stream of one NBD connection: the plain socket, or
// TLS over it once the client has asked for NBD_OPT_STARTTLS (tls.h).
//
// Timeouts are in milliseconds; -1 waits forever. A timeout is an error
// (kIoError, "timed out ..."), after which the connection is closed: the
// stream may be in the middle of a record.
//
// Thread safety: one thread may receive while another sends (a connection's
// reader and whichever thread owns its send side, connection.h). Two threads
// never send at once, nor receive at once. Shutdown() may be called from any
// thread at any time. A Transport does not own the socket: the connection
// closes it after the transport is destroyed.
#ifndef ZTIER_NBD_TRANSPORT_H_
#define ZTIER_NBD_TRANSPORT_H_

#include <sys/uio.h>

#include <cstddef>
#include <memory>

#include "ztier/status.h"

namespace ztier::nbd {

class Transport {
 public:
  virtual ~Transport() = default;

  // Receives between 1 and `n` bytes into `buf` and returns how many, or 0
  // at the end of the stream (the peer closed it). Waits at most
  // `timeout_ms` for the first byte.
  virtual Result<std::size_t> Recv(void* buf, std::size_t n,
                                   int timeout_ms) = 0;

  // Sends every byte of iov[0..iovcnt) (`iov` is not modified; iovcnt at
  // most 16). Fails when the peer takes nothing for `timeout_ms` at a time.
  // Allocates no memory.
  virtual Status Send(const struct iovec* iov, int iovcnt, int timeout_ms) = 0;

  // Sends what the socket takes now, without waiting, and returns the number
  // of bytes sent (0 to the total); the caller sends the rest later with
  // Send(). A transport that cannot stop in the middle of a record (TLS)
  // sends nothing and returns 0.
  virtual Result<std::size_t> TrySend(const struct iovec* iov, int iovcnt) = 0;

  // Makes a blocked Recv() or Send() return an error soon, and every later
  // one fail. Idempotent.
  virtual void Shutdown() = 0;

  // "plain" or "TLS1.3" (the negotiated protocol), for logs and tests.
  virtual const char* name() const = 0;
};

// The plain socket `fd` (borrowed, not closed).
std::unique_ptr<Transport> NewPlainTransport(int fd);

// Helpers over any transport.

// Reads exactly `n` bytes; the end of the stream is kIoError
// ("connection closed").
Status RecvExact(Transport* t, void* buf, std::size_t n, int timeout_ms);
// Reads and drops `n` bytes.
Status RecvDiscard(Transport* t, std::size_t n, int timeout_ms);
// Sends `n` bytes from `buf`.
Status SendBytes(Transport* t, const void* buf, std::size_t n, int timeout_ms);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_TRANSPORT_H_
