// handshake.cc: the fixed newstyle handshake (contract in handshake.h).
//
// Structure after nbdkit's server/protocol-handshake-newstyle.c: one loop
// reads an option header, reads its whole payload (bounded by
// kMaxOptionLength), and answers it; only GO and EXPORT_NAME leave the loop.
#include "nbd/handshake.h"

#include <sys/uio.h>

#include <cstring>
#include <string>
#include <vector>

#include "nbd/protocol.h"
#include "nbd/socket_util.h"

namespace ztier::nbd {
namespace {

template <typename T>
void Put(std::vector<std::byte>* out, T v) {
  const T be = ToBig(v);
  const auto* p = reinterpret_cast<const std::byte*>(&be);
  out->insert(out->end(), p, p + sizeof(T));
}

template <typename T>
T Get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return FromBig(v);
}

Status SendReply(int fd, std::uint32_t option, std::uint32_t type,
                 const void* data, std::size_t length) {
  OptionReplyHeader h;
  h.magic = ToBig(kOptReplyMagic);
  h.option = ToBig(option);
  h.reply_type = ToBig(type);
  h.length = ToBig(static_cast<std::uint32_t>(length));
  struct iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(data), length}};
  return SendAll(fd, iov, length > 0 ? 2 : 1);
}

Status SendError(int fd, std::uint32_t option, std::uint32_t type,
                 const std::string& message) {
  return SendReply(fd, option, type, message.data(), message.size());
}

// The device `name` selects ("" is the default). Null if none.
std::shared_ptr<Device> Resolve(DeviceRegistry* registry,
                                const std::string& name) {
  if (!name.empty()) return registry->Find(name);
  if (auto d = registry->Find("zram0")) return d;
  auto all = registry->List();
  return all.empty() ? nullptr : all.front();
}

std::string Describe(const Device& d) {
  if (!d.initialized()) return "ztier zram device (not initialised)";
  return "ztier zram device, " + std::to_string(d.disksize()) + " bytes, " +
         d.algorithm();
}

// Answers NBD_OPT_INFO / NBD_OPT_GO. On GO success fills *out and sets
// *done. A negotiation error has been answered: the loop goes on.
Status InfoOrGo(int fd, std::uint32_t option, const std::vector<std::byte>& data,
                DeviceRegistry* registry, std::uint32_t max_request_bytes,
                Negotiated* out, bool* done) {
  // u32 name length, name, u16 count, count * u16 info types.
  if (data.size() < 6) {
    return SendError(fd, option, kRepErrInvalid, "option data too short");
  }
  const std::uint32_t name_len = Get<std::uint32_t>(data.data());
  if (name_len > kMaxNameLength || name_len > data.size() - 6) {
    return SendError(fd, option, kRepErrInvalid, "bad export name length");
  }
  const std::string name(reinterpret_cast<const char*>(data.data()) + 4,
                         name_len);
  const std::byte* p = data.data() + 4 + name_len;
  const std::uint16_t n_info = Get<std::uint16_t>(p);
  p += 2;
  if (data.size() != 6 + name_len + 2u * n_info) {
    return SendError(fd, option, kRepErrInvalid, "bad information request list");
  }
  bool want_name = false;
  bool want_description = false;
  for (std::uint16_t i = 0; i < n_info; ++i) {
    const std::uint16_t t = Get<std::uint16_t>(p + 2 * i);
    if (t == kInfoName) want_name = true;
    if (t == kInfoDescription) want_description = true;
  }

  std::shared_ptr<Device> device = Resolve(registry, name);
  if (device == nullptr) {
    return SendError(fd, option, kRepErrUnknown,
                     "no export named '" + name + "'");
  }
  // Attach before answering, so that a reset cannot slip in between.
  Result<Device::ClientRef> ref = device->Attach();
  if (!ref.has_value()) {
    return SendError(fd, option, kRepErrUnknown,
                     "export '" + device->name() +
                         "' is not initialised (set its disksize)");
  }
  const std::uint64_t size = device->disksize();

  InfoExport ie;
  ie.info = ToBig(kInfoExport);
  ie.export_size = ToBig(size);
  ie.transmission_flags = ToBig(kTransmissionFlags);
  ZT_RETURN_IF_ERROR(SendReply(fd, option, kRepInfo, &ie, sizeof(ie)));
  if (want_name) {
    std::vector<std::byte> b;
    Put<std::uint16_t>(&b, kInfoName);
    const auto* s = reinterpret_cast<const std::byte*>(device->name().data());
    b.insert(b.end(), s, s + device->name().size());
    ZT_RETURN_IF_ERROR(SendReply(fd, option, kRepInfo, b.data(), b.size()));
  }
  if (want_description) {
    std::vector<std::byte> b;
    Put<std::uint16_t>(&b, kInfoDescription);
    const std::string text = Describe(*device);
    const auto* s = reinterpret_cast<const std::byte*>(text.data());
    b.insert(b.end(), s, s + text.size());
    ZT_RETURN_IF_ERROR(SendReply(fd, option, kRepInfo, b.data(), b.size()));
  }
  // Block sizes are sent whether asked or not: clients must honour the
  // maximum, and any request size works (minimum 1).
  InfoBlockSize bs;
  bs.info = ToBig(kInfoBlockSize);
  bs.minimum = ToBig<std::uint32_t>(1);
  bs.preferred = ToBig<std::uint32_t>(4096);
  bs.maximum = ToBig(max_request_bytes);
  ZT_RETURN_IF_ERROR(SendReply(fd, option, kRepInfo, &bs, sizeof(bs)));
  ZT_RETURN_IF_ERROR(SendReply(fd, option, kRepAck, nullptr, 0));
  if (option == kOptGo) {
    out->device = std::move(device);
    out->ref.emplace(std::move(*ref));
    out->size = size;
    *done = true;
  }
  return Status::Ok();
}

Status List(int fd, std::uint32_t option, const std::vector<std::byte>& data,
            DeviceRegistry* registry) {
  if (!data.empty()) {
    return SendError(fd, option, kRepErrInvalid, "NBD_OPT_LIST takes no data");
  }
  for (const auto& d : registry->List()) {
    std::vector<std::byte> b;
    Put<std::uint32_t>(&b, static_cast<std::uint32_t>(d->name().size()));
    const std::string text = d->name() + Describe(*d);
    const auto* s = reinterpret_cast<const std::byte*>(text.data());
    b.insert(b.end(), s, s + text.size());
    ZT_RETURN_IF_ERROR(SendReply(fd, option, kRepServer, b.data(), b.size()));
  }
  return SendReply(fd, option, kRepAck, nullptr, 0);
}

// NBD_OPT_EXPORT_NAME: no error reply exists; a bad export closes.
Result<Negotiated> ExportName(int fd, const std::vector<std::byte>& data,
                              DeviceRegistry* registry, bool no_zeroes) {
  const std::string name(reinterpret_cast<const char*>(data.data()),
                         data.size());
  std::shared_ptr<Device> device = Resolve(registry, name);
  if (device == nullptr) {
    return Err(Status::NotFound("no export named '" + name + "'"));
  }
  ZT_ASSIGN_OR_RETURN(Device::ClientRef ref, device->Attach());
  Negotiated n;
  n.size = device->disksize();
  n.device = std::move(device);
  n.ref.emplace(std::move(ref));
  struct {
    ExportNameReply r;
    char zeroes[124];
  } __attribute__((packed)) reply = {};
  reply.r.export_size = ToBig(n.size);
  reply.r.transmission_flags = ToBig(kTransmissionFlags);
  ZT_RETURN_IF_ERROR(WriteAll(
      fd, &reply, no_zeroes ? sizeof(reply.r) : sizeof(reply)));
  return n;
}

}  // namespace

Result<Negotiated> Handshake(int fd, DeviceRegistry* registry,
                             std::uint32_t max_request_bytes) {
  NewstyleGreeting g;
  g.nbd_magic = ToBig(kNbdMagic);
  g.ihaveopt = ToBig(kIHaveOpt);
  g.flags = ToBig<std::uint16_t>(kFlagFixedNewstyle | kFlagNoZeroes);
  ZT_RETURN_IF_ERROR(WriteAll(fd, &g, sizeof(g)));

  std::uint32_t client_flags = 0;
  ZT_RETURN_IF_ERROR(ReadExact(fd, &client_flags, sizeof(client_flags)));
  client_flags = FromBig(client_flags);
  if ((client_flags & ~(kClientFlagFixedNewstyle | kClientFlagNoZeroes)) != 0) {
    return Err(Status::InvalidArgument("unknown client flags"));
  }
  const bool no_zeroes = (client_flags & kClientFlagNoZeroes) != 0;

  std::vector<std::byte> data;
  for (int n = 0; n < kMaxOptions; ++n) {
    OptionHeader h;
    ZT_RETURN_IF_ERROR(ReadExact(fd, &h, sizeof(h)));
    if (FromBig(h.magic) != kIHaveOpt) {
      return Err(Status::InvalidArgument("bad option magic"));
    }
    const std::uint32_t option = FromBig(h.option);
    const std::uint32_t length = FromBig(h.length);
    if (length > kMaxOptionLength) {
      return Err(Status::InvalidArgument("option data too long"));
    }
    data.resize(length);
    ZT_RETURN_IF_ERROR(ReadExact(fd, data.data(), length));

    switch (option) {
      case kOptExportName:
        return ExportName(fd, data, registry, no_zeroes);
      case kOptAbort:
        // The client may not wait for the ACK; ignore a failed send.
        SendReply(fd, option, kRepAck, nullptr, 0).IgnoreError();
        return Err(Status::IoError("client aborted the handshake"));
      case kOptList:
        ZT_RETURN_IF_ERROR(List(fd, option, data, registry));
        break;
      case kOptInfo:
      case kOptGo: {
        Negotiated out;
        bool done = false;
        ZT_RETURN_IF_ERROR(InfoOrGo(fd, option, data, registry,
                                    max_request_bytes, &out, &done));
        if (done) return out;
        break;
      }
      default:
        // STRUCTURED_REPLY, STARTTLS, meta contexts and anything unknown.
        ZT_RETURN_IF_ERROR(SendError(fd, option, kRepErrUnsup,
                                     "option not supported by ztier"));
        break;
    }
  }
  return Err(Status::InvalidArgument("too many options"));
}

}  // namespace ztier::nbd
