// socket_util.h: the socket calls the NBD server makes, behind small
// functions that return Status (errno becomes a Status only in PosixError).
//
// Every send uses MSG_NOSIGNAL: a peer that went away is an error value,
// never SIGPIPE.
//
// Thread safety: plain functions over file descriptors the caller owns.
#ifndef ZTIER_NBD_SOCKET_UTIL_H_
#define ZTIER_NBD_SOCKET_UTIL_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>

#include "ztier/status.h"

namespace ztier::nbd {

// Reads exactly `n` bytes. kIoError on EOF ("connection closed") or error.
Status ReadExact(int fd, void* buf, std::size_t n);
// Reads and drops `n` bytes.
Status Discard(int fd, std::size_t n);
// Writes all of `n` bytes.
Status WriteAll(int fd, const void* buf, std::size_t n);
// Writes every byte of iov[0..iovcnt) with sendmsg; `iov` is modified.
Status SendAll(int fd, struct iovec* iov, int iovcnt);

// A Unix socket listening at `path`, created with mode 0600: it is bound in
// a fresh 0700 directory beside `path` and renamed into place, so it is never
// reachable with wider permissions. A stale socket at `path` (nobody accepts)
// is replaced; a live one is kBusy; any other file is kInvalidArgument.
// On success stores the socket's device and inode in *dev / *ino (for a safe
// unlink later) and returns the fd.
Result<int> ListenUnix(const std::string& path, dev_t* dev, ino_t* ino);
// Removes `path` if it is still the socket identified by dev/ino.
void UnlinkUnixSocket(const std::string& path, dev_t dev, ino_t ino);

// A TCP socket listening on "HOST:PORT", "[V6HOST]:PORT" or ":PORT"
// (127.0.0.1). PORT 0 picks a free port; *port gets the bound one.
Result<int> ListenTcp(const std::string& spec, int* port);

// Sets TCP_NODELAY (no-op on a non-TCP socket).
void SetNoDelay(int fd);

// The peer of a connected socket, for logs: "tcp 127.0.0.1:40112",
// "tcp [::1]:40112", or "unix" (Unix peers have no name).
std::string PeerName(int fd, bool tcp);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_SOCKET_UTIL_H_
