// handshake.cc: the fixed newstyle handshake (contract in handshake.h).
//
// Structure after nbdkit's server/protocol-handshake-newstyle.c: one loop
// reads an option header, reads its whole payload (one over
// kMaxOptionLength is read, dropped and answered NBD_REP_ERR_TOO_BIG), and
// answers it; only GO and EXPORT_NAME leave the loop.
#include "handshake.h"

#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "nbd/protocol.h"
#include "nbd/tls.h"
#include "nbd/transport.h"
#include "platform/clock.h"

namespace ztier::nbd {
namespace {

// A client's export name as an error message and the log may show it: the
// first 64 bytes, with every byte outside printable ASCII as \xHH (no
// forged log line, no broken UTF-8 in a reply), then "..." if longer.
std::string Printable(std::string_view name) {
  constexpr std::size_t kMax = 64;
  std::string out;
  for (std::size_t i = 0; i < name.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (name.size() > kMax) out += "...";
  return out;
}

template <typename T>
void Put(std::vector<std::byte>* out, T v) {
  const T be = ToBig(v);
  const std::size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &be, sizeof(T));
}

template <typename T>
T Get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return FromBig(v);
}

// The transport of the handshake and its deadline.
struct Io {
  Io(Transport* transport, int timeout_ms)
      : t(transport),
        deadline(timeout_ms < 0
                     ? platform::MonotonicClock::time_point::max()
                     : platform::MonotonicClock::now() +
                           std::chrono::milliseconds(timeout_ms)) {}
  // Milliseconds left until the deadline (-1: none; 0 once it has passed).
  int Remaining() const {
    if (deadline == platform::MonotonicClock::time_point::max()) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - platform::MonotonicClock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
  }
  Transport* t;
  platform::MonotonicClock::time_point deadline;
};

// Reads exactly `n` bytes by the deadline. Each wait gets only the time
// left, so a client that sends a byte now and then cannot stretch the
// handshake past it (RecvExact's timeout bounds each wait, not the whole).
Status Recv(Io& io, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const int left = io.Remaining();
    if (left == 0) return Status::IoError("timed out: the handshake took too long");
    ZT_ASSIGN_OR_RETURN(std::size_t got, io.t->Recv(p, n, left));
    if (got == 0) return Status::IoError("connection closed");
    p += got;
    n -= got;
  }
  return Status::Ok();
}

Status SendReply(Io& io, std::uint32_t option, std::uint32_t type,
                 const void* data, std::size_t length) {
  OptionReplyHeader h;
  h.magic = ToBig(kOptReplyMagic);
  h.option = ToBig(option);
  h.reply_type = ToBig(type);
  h.length = ToBig(static_cast<std::uint32_t>(length));
  struct iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(data), length}};
  return io.t->Send(iov, length > 0 ? 2 : 1, io.Remaining());
}

Status SendError(Io& io, std::uint32_t option, std::uint32_t type,
                 const std::string& message) {
  return SendReply(io, option, type, message.data(), message.size());
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

// What the options so far have negotiated for the transmission phase.
struct Extensions {
  bool structured = false;   // NBD_OPT_STRUCTURED_REPLY acknowledged
  bool base_allocation = false;  // selected by the last SET_META_CONTEXT...
  std::string meta_export;       // ...for this export (its device's name)

  // What NBD_OPT_SET_META_CONTEXT does first: it replaces the selection
  // "including when this command fails" (proto.md).
  void ClearSelection() {
    base_allocation = false;
    meta_export.clear();
  }

  // Fills the negotiated extensions of `out`, which selected `device`.
  void Apply(const Device& device, Negotiated* out) const {
    out->structured = structured;
    out->base_allocation =
        structured && base_allocation && meta_export == device.name();
  }
};

// Answers NBD_OPT_INFO / NBD_OPT_GO. On GO success fills *out and sets
// *done. A negotiation error has been answered: the loop goes on.
Status InfoOrGo(Io& io, std::uint32_t option, const std::vector<std::byte>& data,
                DeviceRegistry* registry, std::uint32_t max_request_bytes,
                const Extensions& ext, Negotiated* out, bool* done) {
  // u32 name length, name, u16 count, count * u16 info types.
  if (data.size() < 6) {
    return SendError(io, option, kRepErrInvalid, "option data too short");
  }
  const std::uint32_t name_len = Get<std::uint32_t>(data.data());
  if (name_len > kMaxNameLength || name_len > data.size() - 6) {
    return SendError(io, option, kRepErrInvalid, "bad export name length");
  }
  const std::string name(reinterpret_cast<const char*>(data.data()) + 4,
                         name_len);
  const std::byte* p = data.data() + 4 + name_len;
  const std::uint16_t n_info = Get<std::uint16_t>(p);
  p += 2;
  if (data.size() != 6 + name_len + 2u * n_info) {
    return SendError(io, option, kRepErrInvalid, "bad information request list");
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
    return SendError(io, option, kRepErrUnknown,
                     "no export named '" + Printable(name) + "'");
  }
  // Attach before answering, so that a reset cannot slip in between.
  Result<Device::ClientRef> ref = device->Attach();
  if (!ref.has_value()) {
    // Busy: its disksize is being set, or it is being reset, now.
    return SendError(
        io, option, kRepErrUnknown,
        "export '" + device->name() + "' " +
            (ref.error().code() == StatusCode::kBusy
                 ? "is busy (" + ref.error().message() + "); try again"
                 : std::string("is not initialised (set its disksize)")));
  }
  const std::uint64_t size = device->disksize();

  InfoExport ie;
  ie.info = ToBig(kInfoExport);
  ie.export_size = ToBig(size);
  ie.transmission_flags = ToBig(TransmissionFlags(ext.structured));
  ZT_RETURN_IF_ERROR(SendReply(io, option, kRepInfo, &ie, sizeof(ie)));
  if (want_name) {
    std::vector<std::byte> b;
    Put<std::uint16_t>(&b, kInfoName);
    const auto* s = reinterpret_cast<const std::byte*>(device->name().data());
    b.insert(b.end(), s, s + device->name().size());
    ZT_RETURN_IF_ERROR(SendReply(io, option, kRepInfo, b.data(), b.size()));
  }
  if (want_description) {
    std::vector<std::byte> b;
    Put<std::uint16_t>(&b, kInfoDescription);
    const std::string text = Describe(*device);
    const auto* s = reinterpret_cast<const std::byte*>(text.data());
    b.insert(b.end(), s, s + text.size());
    ZT_RETURN_IF_ERROR(SendReply(io, option, kRepInfo, b.data(), b.size()));
  }
  // Block sizes are sent whether asked or not: clients must honour the
  // maximum, and any request size works (minimum 1).
  InfoBlockSize bs;
  bs.info = ToBig(kInfoBlockSize);
  bs.minimum = ToBig<std::uint32_t>(1);
  bs.preferred = ToBig<std::uint32_t>(4096);
  bs.maximum = ToBig(max_request_bytes);
  ZT_RETURN_IF_ERROR(SendReply(io, option, kRepInfo, &bs, sizeof(bs)));
  ZT_RETURN_IF_ERROR(SendReply(io, option, kRepAck, nullptr, 0));
  if (option == kOptGo) {
    ext.Apply(*device, out);
    out->device = std::move(device);
    out->ref.emplace(std::move(*ref));
    out->size = size;
    *done = true;
  }
  return Status::Ok();
}

Status List(Io& io, std::uint32_t option, const std::vector<std::byte>& data,
            DeviceRegistry* registry) {
  if (!data.empty()) {
    return SendError(io, option, kRepErrInvalid, "NBD_OPT_LIST takes no data");
  }
  for (const auto& d : registry->List()) {
    std::vector<std::byte> b;
    Put<std::uint32_t>(&b, static_cast<std::uint32_t>(d->name().size()));
    const std::string text = d->name() + Describe(*d);
    const auto* s = reinterpret_cast<const std::byte*>(text.data());
    b.insert(b.end(), s, s + text.size());
    ZT_RETURN_IF_ERROR(SendReply(io, option, kRepServer, b.data(), b.size()));
  }
  return SendReply(io, option, kRepAck, nullptr, 0);
}

// NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT. Data: u32 export
// name length, the name, u32 query count, then each query as u32 length and
// string. Queries that ztier does not know are ignored, as the spec wants;
// "base:allocation" matches both options, "base:" (a wildcard) and an empty
// query list only LIST.
Status MetaContext(Io& io, std::uint32_t option,
                   const std::vector<std::byte>& data,
                   DeviceRegistry* registry, Extensions* ext) {
  const bool set = option == kOptSetMetaContext;
  if (set) ext->ClearSelection();  // replaces it, even when it fails
  if (!ext->structured) {
    return SendError(io, option, kRepErrInvalid,
                     "negotiate NBD_OPT_STRUCTURED_REPLY first");
  }
  const std::byte* p = data.data();
  const std::byte* const end = p + data.size();
  auto take_string = [&](std::string* out) {
    if (end - p < 4) return false;
    const std::uint32_t n = Get<std::uint32_t>(p);
    p += 4;
    if (n > kMaxNameLength || n > static_cast<std::size_t>(end - p)) {
      return false;
    }
    out->assign(reinterpret_cast<const char*>(p), n);
    p += n;
    return true;
  };
  std::string name;
  if (!take_string(&name) || end - p < 4) {
    return SendError(io, option, kRepErrInvalid, "bad meta context request");
  }
  const std::uint32_t n_queries = Get<std::uint32_t>(p);
  p += 4;
  bool match = !set && n_queries == 0;
  for (std::uint32_t i = 0; i < n_queries; ++i) {
    std::string query;
    if (!take_string(&query)) {
      return SendError(io, option, kRepErrInvalid, "bad meta context query");
    }
    if (query == kBaseAllocation || (!set && query == "base:")) match = true;
  }
  if (p != end) {
    return SendError(io, option, kRepErrInvalid,
                     "trailing bytes after the meta context queries");
  }
  std::shared_ptr<Device> device = Resolve(registry, name);
  if (device == nullptr) {
    return SendError(io, option, kRepErrUnknown,
                     "no export named '" + Printable(name) + "'");
  }
  if (match) {
    // LIST's ids are reserved (the spec: SHOULD be zero).
    // Sized once and filled: GCC 12's -Wstringop-overflow misreads an
    // insert after a 4-byte Put here (a false positive under -O2 -Werror).
    std::vector<std::byte> b(sizeof(std::uint32_t) + kBaseAllocation.size());
    const std::uint32_t id = ToBig<std::uint32_t>(set ? kBaseAllocationId : 0);
    std::memcpy(b.data(), &id, sizeof(id));
    std::memcpy(b.data() + sizeof(id), kBaseAllocation.data(),
                kBaseAllocation.size());
    ZT_RETURN_IF_ERROR(
        SendReply(io, option, kRepMetaContext, b.data(), b.size()));
    if (set) {
      ext->base_allocation = true;
      ext->meta_export = device->name();
    }
  }
  return SendReply(io, option, kRepAck, nullptr, 0);
}

// NBD_OPT_EXPORT_NAME: no error reply exists; a bad export closes.
Result<Negotiated> ExportName(Io& io, const std::vector<std::byte>& data,
                              DeviceRegistry* registry, bool no_zeroes,
                              const Extensions& ext) {
  const std::string name(reinterpret_cast<const char*>(data.data()),
                         data.size());
  std::shared_ptr<Device> device = Resolve(registry, name);
  if (device == nullptr) {
    return Err(Status::NotFound("no export named '" + Printable(name) + "'"));
  }
  ZT_ASSIGN_OR_RETURN(Device::ClientRef ref, device->Attach());
  Negotiated n;
  n.size = device->disksize();
  ext.Apply(*device, &n);
  n.device = std::move(device);
  n.ref.emplace(std::move(ref));
  struct {
    ExportNameReply r;
    char zeroes[124];
  } __attribute__((packed)) reply = {};
  reply.r.export_size = ToBig(n.size);
  reply.r.transmission_flags = ToBig(TransmissionFlags(n.structured));
  ZT_RETURN_IF_ERROR(SendBytes(
      io.t, &reply, no_zeroes ? sizeof(reply.r) : sizeof(reply),
      io.Remaining()));
  return n;
}

}  // namespace

namespace {

Status SendGreeting(Io& io) {
  NewstyleGreeting g;
  g.nbd_magic = ToBig(kNbdMagic);
  g.ihaveopt = ToBig(kIHaveOpt);
  g.flags = ToBig<std::uint16_t>(kFlagFixedNewstyle | kFlagNoZeroes);
  return SendBytes(io.t, &g, sizeof(g), io.Remaining());
}

// Reads the client's flags; sets *no_zeroes and *fixed (fixed newstyle).
Status RecvClientFlags(Io& io, bool* no_zeroes, bool* fixed) {
  std::uint32_t client_flags = 0;
  ZT_RETURN_IF_ERROR(Recv(io, &client_flags, sizeof(client_flags)));
  client_flags = FromBig(client_flags);
  if ((client_flags & ~(kClientFlagFixedNewstyle | kClientFlagNoZeroes)) != 0) {
    return Status::InvalidArgument("unknown client flags");
  }
  *no_zeroes = (client_flags & kClientFlagNoZeroes) != 0;
  *fixed = (client_flags & kClientFlagFixedNewstyle) != 0;
  return Status::Ok();
}

// Reads one option: header and its whole payload into *data. A payload
// over kMaxOptionLength is read and dropped (within the handshake's
// deadline, as any other): *too_big is set and *data left empty; but
// NBD_OPT_EXPORT_NAME, which has no error reply, fails at once.
Status RecvOption(Io& io, std::uint32_t* option, std::vector<std::byte>* data,
                  bool* too_big) {
  OptionHeader h;
  ZT_RETURN_IF_ERROR(Recv(io, &h, sizeof(h)));
  if (FromBig(h.magic) != kIHaveOpt) {
    return Status::InvalidArgument("bad option magic");
  }
  *option = FromBig(h.option);
  std::uint32_t length = FromBig(h.length);
  *too_big = length > kMaxOptionLength;
  if (!*too_big) {
    data->resize(length);
    return Recv(io, data->data(), length);
  }
  if (*option == kOptExportName) {
    return Status::InvalidArgument(
        "NBD_OPT_EXPORT_NAME with an export name too long");
  }
  data->resize(kMaxOptionLength);
  while (length > 0) {
    const std::uint32_t n = std::min(length, kMaxOptionLength);
    ZT_RETURN_IF_ERROR(Recv(io, data->data(), n));
    length -= n;
  }
  data->clear();
  return Status::Ok();
}

// NBD_OPT_STARTTLS: acknowledged in the clear, then the TLS handshake.
// *upgraded says whether the transport is TLS now: a refused STARTTLS (with
// data) is answered and the session stays in the clear.
Status StartTlsOption(int fd, std::unique_ptr<Transport>* transport, Io& io,
                      bool has_data, const TlsContext& tls, bool* upgraded) {
  *upgraded = false;
  if (has_data) {
    return SendError(io, kOptStartTls, kRepErrInvalid,
                     "NBD_OPT_STARTTLS takes no data");
  }
  ZT_RETURN_IF_ERROR(SendReply(io, kOptStartTls, kRepAck, nullptr, 0));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Transport> secure,
                      StartTls(fd, tls, io.Remaining()));
  *transport = std::move(secure);
  io.t = transport->get();
  *upgraded = true;
  return Status::Ok();
}

}  // namespace

Result<Negotiated> Handshake(int fd, std::unique_ptr<Transport>* transport,
                             DeviceRegistry* registry,
                             const HandshakeOptions& options) {
  Io io(transport->get(), options.timeout_ms);
  ZT_RETURN_IF_ERROR(SendGreeting(io));
  bool no_zeroes = false;
  bool fixed = false;
  ZT_RETURN_IF_ERROR(RecvClientFlags(io, &no_zeroes, &fixed));
  // proto.md, "TLS support": without fixed newstyle on both sides the
  // server MUST stay in NOTLS mode, and so cannot serve such a client when
  // TLS is required.
  if (!fixed && options.tls != nullptr && options.tls_required) {
    return Err(Status::PermissionDenied(
        "TLS is required, and a client without fixed newstyle cannot "
        "negotiate it"));
  }
  const bool tls_offered = options.tls != nullptr && fixed;

  bool secure = false;
  Extensions ext;
  std::vector<std::byte> data;
  for (int n = 0; n < kMaxOptions; ++n) {
    std::uint32_t option = 0;
    bool too_big = false;
    ZT_RETURN_IF_ERROR(RecvOption(io, &option, &data, &too_big));
    if (option == kOptAbort) {
      // The client may not wait for the ACK; ignore a failed send.
      SendReply(io, option, kRepAck, nullptr, 0).IgnoreError();
      return Err(Status::IoError("client aborted the handshake"));
    }
    if (options.stopping != nullptr && options.stopping->load()) {
      // proto.md, "Termination of the session during option haggling": a
      // server being shut down SHOULD error every option but NBD_OPT_ABORT
      // with NBD_REP_ERR_SHUTDOWN; the client MUST then abort.
      if (option == kOptExportName) {
        return Err(Status::IoError(
            "NBD_OPT_EXPORT_NAME while the server is stopping"));
      }
      ZT_RETURN_IF_ERROR(SendError(io, option, kRepErrShutdown,
                                   "ztier is stopping: try again later"));
      continue;
    }
    if (tls_offered && option == kOptStartTls) {
      if (secure) {
        ZT_RETURN_IF_ERROR(SendError(io, option, kRepErrInvalid,
                                     "TLS is already in use"));
      } else {
        bool upgraded = false;
        ZT_RETURN_IF_ERROR(StartTlsOption(fd, transport, io,
                                          too_big || !data.empty(),
                                          *options.tls, &upgraded));
        if (upgraded) {
          secure = true;
          ext = Extensions();  // negotiated again over TLS, if at all
        }

      }
      continue;
    }
    if (options.tls != nullptr && options.tls_required && !secure) {
      if (option == kOptExportName) {
        return Err(Status::FailedPrecondition(
            "NBD_OPT_EXPORT_NAME without TLS, which the server requires"));
      }
      ZT_RETURN_IF_ERROR(
          SendError(io, option, kRepErrTlsReqd,
                    "this server requires TLS: use NBD_OPT_STARTTLS first"));
      continue;
    }
    if (too_big) {
      // proto.md, "Option reply types": NBD_REP_ERR_TOO_BIG, "the request
      // ... is too large to process"; negotiation goes on. A
      // SET_META_CONTEXT so refused still replaces the selection, as any
      // failed one (MetaContext).
      if (option == kOptSetMetaContext) ext.ClearSelection();
      ZT_RETURN_IF_ERROR(SendError(io, option, kRepErrTooBig,
                                   "option data over " +
                                       std::to_string(kMaxOptionLength) +
                                       " bytes, the most ztier reads"));
      continue;
    }
    switch (option) {
      case kOptExportName:
        return ExportName(io, data, registry, no_zeroes, ext);
      case kOptList:
        ZT_RETURN_IF_ERROR(List(io, option, data, registry));
        break;
      case kOptInfo:
      case kOptGo: {
        Negotiated out;
        bool done = false;
        ZT_RETURN_IF_ERROR(InfoOrGo(io, option, data, registry,
                                    options.max_request_bytes, ext, &out,
                                    &done));
        if (done) return out;
        break;
      }
      case kOptStructuredReply:
        if (!data.empty()) {
          ZT_RETURN_IF_ERROR(SendError(io, option, kRepErrInvalid,
                                       "NBD_OPT_STRUCTURED_REPLY takes no data"));
          break;
        }
        ext.structured = true;
        ZT_RETURN_IF_ERROR(SendReply(io, option, kRepAck, nullptr, 0));
        break;
      case kOptListMetaContext:
      case kOptSetMetaContext:
        ZT_RETURN_IF_ERROR(MetaContext(io, option, data, registry, &ext));
        break;
      default:
        // STARTTLS without credentials, and anything unknown.
        ZT_RETURN_IF_ERROR(SendError(io, option, kRepErrUnsup,
                                     "option not supported by ztier"));
        break;
    }
  }
  return Err(Status::InvalidArgument("too many options"));
}

void RefuseHandshake(Transport* transport, const std::string& message,
                     int timeout_ms) {
  Io io(transport, timeout_ms);
  bool no_zeroes = false;
  bool fixed = false;
  if (!SendGreeting(io).ok() || !RecvClientFlags(io, &no_zeroes, &fixed).ok()) {
    return;
  }
  std::vector<std::byte> data;
  for (int n = 0; n < kMaxOptions; ++n) {
    std::uint32_t option = 0;
    bool too_big = false;
    if (!RecvOption(io, &option, &data, &too_big).ok()) return;
    if (option == kOptAbort) {
      SendReply(io, option, kRepAck, nullptr, 0).IgnoreError();
      return;
    }
    if (option == kOptExportName) return;  // no error reply exists: close
    if (!SendError(io, option, kRepErrPolicy, message).ok()) return;
  }
}

}  // namespace ztier::nbd
