// handshake.h: the fixed newstyle handshake of one NBD connection.
//
// The server greets (NBDMAGIC, IHAVEOPT, FIXED_NEWSTYLE|NO_ZEROES), reads the
// client's flags, then answers options until the client picks an export with
// NBD_OPT_GO or NBD_OPT_EXPORT_NAME, or gives up. Supported: EXPORT_NAME,
// ABORT, LIST, INFO, GO (with NBD_INFO_EXPORT, _NAME, _DESCRIPTION,
// _BLOCK_SIZE); every other option gets NBD_REP_ERR_UNSUP. The empty export
// name selects the default device: "zram0" if present, else the first by
// name. An unknown export is NBD_REP_ERR_UNKNOWN; so is a device that is not
// initialised (no disksize yet), with a message saying so.
//
// Thread safety: runs on the connection's own thread; reads the registry.
#ifndef ZTIER_NBD_HANDSHAKE_H_
#define ZTIER_NBD_HANDSHAKE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::nbd {

struct Negotiated {
  std::shared_ptr<Device> device;
  // Held for the connection's life: Device::Reset() is kBusy meanwhile.
  std::optional<Device::ClientRef> ref;
  std::uint64_t size = 0;  // the export's size in bytes
};

// Runs the handshake on the connected socket `fd` (blocking). On success the
// connection is in the transmission phase on the returned device. Any error
// (the client left, aborted, broke the protocol, or chose a bad export with
// NBD_OPT_EXPORT_NAME) means: close the connection.
Result<Negotiated> Handshake(int fd, DeviceRegistry* registry,
                             std::uint32_t max_request_bytes);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_HANDSHAKE_H_
