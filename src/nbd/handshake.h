// handshake.h: the fixed newstyle handshake of one NBD connection.
//
// The server greets (NBDMAGIC, IHAVEOPT, FIXED_NEWSTYLE|NO_ZEROES), reads the
// client's flags, then answers options until the client picks an export with
// NBD_OPT_GO or NBD_OPT_EXPORT_NAME, or gives up. Supported: EXPORT_NAME,
// ABORT, LIST, INFO, GO (with NBD_INFO_EXPORT, _NAME, _DESCRIPTION,
// _BLOCK_SIZE), STRUCTURED_REPLY, LIST_META_CONTEXT and SET_META_CONTEXT
// (the one context base:allocation; both need STRUCTURED_REPLY first, else
// NBD_REP_ERR_INVALID), and STARTTLS when the server has TLS credentials;
// every other option gets NBD_REP_ERR_UNSUP, and one whose data is over
// kMaxOptionLength NBD_REP_ERR_TOO_BIG (its data read and dropped;
// EXPORT_NAME closes instead). A client without NBD_FLAG_C_FIXED_NEWSTYLE
// is answered the same (proto.md allows it) but is not offered TLS.
// STARTTLS forgets structured replies and meta contexts negotiated before
// it (the spec: the client must negotiate them again). base:allocation is
// in force only if the last SET_META_CONTEXT selected it for the export
// that GO/EXPORT_NAME picks. The empty export name selects the default
// device: "zram0" if present, else the first by name. An unknown
// export is NBD_REP_ERR_UNKNOWN; so is a device that is not initialised (no
// disksize yet) or busy (its disksize being set, or a reset), with a
// message saying which. Once HandshakeOptions::stopping is set, every
// option but ABORT is answered NBD_REP_ERR_SHUTDOWN (EXPORT_NAME, which has
// no error reply, closes), as proto.md asks of a server being shut down.
//
// Thread safety: runs on the connection's own thread; reads the registry.
#ifndef ZTIER_NBD_HANDSHAKE_H_
#define ZTIER_NBD_HANDSHAKE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::nbd {

class TlsContext;  // tls.h
class Transport;   // transport.h

struct Negotiated {
  std::shared_ptr<Device> device;
  // Held for the connection's life: Device::Reset() is kBusy meanwhile.
  std::optional<Device::ClientRef> ref;
  std::uint64_t size = 0;  // the export's size in bytes
  // NBD_OPT_STRUCTURED_REPLY was acknowledged: READ must use structured
  // replies, BLOCK_STATUS may be used.
  bool structured = false;
  // base:allocation was selected for this export (implies `structured`).
  bool base_allocation = false;
};

struct HandshakeOptions {
  std::uint32_t max_request_bytes = 32 << 20;
  // The whole handshake must end within this (ms; -1: no limit). A client
  // that connects and then says nothing holds a connection slot until then.
  int timeout_ms = 10000;
  // Server credentials for NBD_OPT_STARTTLS; null: the option is answered
  // NBD_REP_ERR_UNSUP.
  const TlsContext* tls = nullptr;
  // With `tls`: until TLS is up, every option but STARTTLS and ABORT is
  // refused with NBD_REP_ERR_TLS_REQD (EXPORT_NAME, which has no error
  // reply, closes the connection).
  bool tls_required = false;
  // Set (by another thread) once the server stops; null: never. Checked as
  // each option arrives.
  const std::atomic<bool>* stopping = nullptr;
};

// Runs the handshake on `*transport`, the plain socket `fd` (blocking). On
// success the connection is in the transmission phase on the returned
// device; after NBD_OPT_STARTTLS, *transport has been replaced by the TLS
// transport. Any error (the client left, aborted, broke the protocol, timed
// out, failed the TLS handshake, or chose a bad export with
// NBD_OPT_EXPORT_NAME) means: close the connection.
Result<Negotiated> Handshake(int fd, std::unique_ptr<Transport>* transport,
                             DeviceRegistry* registry,
                             const HandshakeOptions& options);

// For a connection the server will not serve (over its connection limit):
// greets, then answers every option with NBD_REP_ERR_POLICY and `message`
// until the client aborts or leaves, or `timeout_ms` passes. Clients such as
// nbdinfo show the message. Never succeeds in selecting an export.
void RefuseHandshake(Transport* transport, const std::string& message,
                     int timeout_ms);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_HANDSHAKE_H_
