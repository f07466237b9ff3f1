// protocol.h: the NBD wire format, as far as ztier speaks it.
//
// Constants and packed structs of the NBD protocol (doc/proto.md of the
// NetworkBlockDevice/nbd project). Every integer on the wire is big-endian;
// the structs hold wire bytes, so read and write their fields with Load*/
// Store* below, never directly. docs/nbd_subset.md says which parts of the
// protocol ztier implements.
//
// Thread safety: constants and pure functions only.
#ifndef ZTIER_NBD_PROTOCOL_H_
#define ZTIER_NBD_PROTOCOL_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "ztier/status.h"

namespace ztier::nbd {

// ---- Handshake (fixed newstyle) ----

inline constexpr std::uint64_t kNbdMagic = 0x4e42444d41474943;  // "NBDMAGIC"
inline constexpr std::uint64_t kIHaveOpt = 0x49484156454F5054;  // "IHAVEOPT"
inline constexpr std::uint64_t kOptReplyMagic = 0x0003e889045565a9;

// Handshake flags (server -> client, 16 bits).
inline constexpr std::uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr std::uint16_t kFlagNoZeroes = 1 << 1;
// Client flags (client -> server, 32 bits).
inline constexpr std::uint32_t kClientFlagFixedNewstyle = 1 << 0;
inline constexpr std::uint32_t kClientFlagNoZeroes = 1 << 1;

// Options (client -> server), as the 32-bit integers they are on the wire.
enum : std::uint32_t {
  kOptExportName = 1,
  kOptAbort = 2,
  kOptList = 3,
  kOptStartTls = 5,
  kOptInfo = 6,
  kOptGo = 7,
  kOptStructuredReply = 8,
  kOptListMetaContext = 9,
  kOptSetMetaContext = 10,
};

// Option reply types (server -> client). Errors have bit 31 set.
inline constexpr std::uint32_t kRepAck = 1;
inline constexpr std::uint32_t kRepServer = 2;
inline constexpr std::uint32_t kRepInfo = 3;
inline constexpr std::uint32_t kRepMetaContext = 4;
inline constexpr std::uint32_t kRepFlagError = 1u << 31;
inline constexpr std::uint32_t kRepErrUnsup = kRepFlagError | 1;
inline constexpr std::uint32_t kRepErrPolicy = kRepFlagError | 2;
inline constexpr std::uint32_t kRepErrInvalid = kRepFlagError | 3;
inline constexpr std::uint32_t kRepErrPlatform = kRepFlagError | 4;
inline constexpr std::uint32_t kRepErrTlsReqd = kRepFlagError | 5;
inline constexpr std::uint32_t kRepErrUnknown = kRepFlagError | 6;
inline constexpr std::uint32_t kRepErrShutdown = kRepFlagError | 7;
inline constexpr std::uint32_t kRepErrBlockSizeReqd = kRepFlagError | 8;
inline constexpr std::uint32_t kRepErrTooBig = kRepFlagError | 9;

// NBD_REP_INFO item types (in OPT_INFO / OPT_GO).
inline constexpr std::uint16_t kInfoExport = 0;
inline constexpr std::uint16_t kInfoName = 1;
inline constexpr std::uint16_t kInfoDescription = 2;
inline constexpr std::uint16_t kInfoBlockSize = 3;

// Transmission flags (16 bits, sent with the export's size).
inline constexpr std::uint16_t kTFlagHasFlags = 1 << 0;
inline constexpr std::uint16_t kTFlagReadOnly = 1 << 1;
inline constexpr std::uint16_t kTFlagSendFlush = 1 << 2;
inline constexpr std::uint16_t kTFlagSendFua = 1 << 3;
inline constexpr std::uint16_t kTFlagRotational = 1 << 4;
inline constexpr std::uint16_t kTFlagSendTrim = 1 << 5;
inline constexpr std::uint16_t kTFlagSendWriteZeroes = 1 << 6;
inline constexpr std::uint16_t kTFlagSendDf = 1 << 7;
inline constexpr std::uint16_t kTFlagCanMultiConn = 1 << 8;
inline constexpr std::uint16_t kTFlagSendResize = 1 << 9;
inline constexpr std::uint16_t kTFlagSendCache = 1 << 10;
inline constexpr std::uint16_t kTFlagSendFastZero = 1 << 11;

// What ztier advertises for every export.
inline constexpr std::uint16_t kTransmissionFlags =
    kTFlagHasFlags | kTFlagSendFlush | kTFlagSendFua | kTFlagSendTrim |
    kTFlagSendWriteZeroes | kTFlagSendFastZero | kTFlagSendCache |
    kTFlagCanMultiConn;
// ... plus NBD_FLAG_SEND_DF once structured replies are negotiated (the spec
// forbids it otherwise; a READ is always one content chunk).
inline constexpr std::uint16_t TransmissionFlags(bool structured) {
  return structured ? (kTransmissionFlags | kTFlagSendDf) : kTransmissionFlags;
}

// ---- Metadata contexts (the spec's "Metadata querying") ----

// The one context ztier offers, and the id it is given on this server.
inline constexpr std::string_view kBaseAllocation = "base:allocation";
inline constexpr std::uint32_t kBaseAllocationId = 1;
// base:allocation status flags.
inline constexpr std::uint32_t kStateHole = 1 << 0;
inline constexpr std::uint32_t kStateZero = 1 << 1;
// Most descriptors in one NBD_REPLY_TYPE_BLOCK_STATUS chunk (the spec says
// SHOULD NOT exceed 2^20); a longer answer is cut short, which the spec
// allows: the client asks again from where it ends.
inline constexpr std::size_t kMaxExtents = 8192;

// Longest option payload ztier reads; a longer one is dropped and answered
// NBD_REP_ERR_TOO_BIG (handshake.h). Names are at most 4096 bytes by the
// spec.
inline constexpr std::uint32_t kMaxOptionLength = 64 * 1024;
inline constexpr std::uint32_t kMaxNameLength = 4096;
// Options a client may send before choosing an export.
inline constexpr int kMaxOptions = 128;

// ---- Transmission ----

inline constexpr std::uint32_t kRequestMagic = 0x25609513;
inline constexpr std::uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr std::uint32_t kStructuredReplyMagic = 0x668e33ef;

// Structured reply chunk flags and types.
inline constexpr std::uint16_t kReplyFlagDone = 1 << 0;
inline constexpr std::uint16_t kReplyTypeNone = 0;
inline constexpr std::uint16_t kReplyTypeOffsetData = 1;
inline constexpr std::uint16_t kReplyTypeOffsetHole = 2;
inline constexpr std::uint16_t kReplyTypeBlockStatus = 5;
inline constexpr std::uint16_t kReplyTypeError = (1 << 15) + 1;
inline constexpr std::uint16_t kReplyTypeErrorOffset = (1 << 15) + 2;

// Commands.
enum : std::uint16_t {
  kCmdRead = 0,
  kCmdWrite = 1,
  kCmdDisc = 2,
  kCmdFlush = 3,
  kCmdTrim = 4,
  kCmdCache = 5,
  kCmdWriteZeroes = 6,
  kCmdBlockStatus = 7,
};

// Command flags.
inline constexpr std::uint16_t kCmdFlagFua = 1 << 0;
inline constexpr std::uint16_t kCmdFlagNoHole = 1 << 1;
inline constexpr std::uint16_t kCmdFlagDf = 1 << 2;
inline constexpr std::uint16_t kCmdFlagReqOne = 1 << 3;
inline constexpr std::uint16_t kCmdFlagFastZero = 1 << 4;

// Error values on the wire (Linux's numbers, fixed by the protocol whatever
// the host's errno values are).
inline constexpr std::uint32_t kErrPerm = 1;
inline constexpr std::uint32_t kErrIo = 5;
inline constexpr std::uint32_t kErrNoMem = 12;
inline constexpr std::uint32_t kErrInval = 22;
inline constexpr std::uint32_t kErrNoSpc = 28;
inline constexpr std::uint32_t kErrOverflow = 75;
inline constexpr std::uint32_t kErrNotSup = 95;
inline constexpr std::uint32_t kErrShutdown = 108;

// ---- Wire structs (all fields big-endian) ----

// S: the first message of the fixed newstyle handshake.
struct [[gnu::packed]] NewstyleGreeting {
  std::uint64_t nbd_magic;   // kNbdMagic
  std::uint64_t ihaveopt;    // kIHaveOpt
  std::uint16_t flags;       // kFlagFixedNewstyle | kFlagNoZeroes
};
static_assert(sizeof(NewstyleGreeting) == 18);

// C: an option request header; `length` bytes of data follow.
struct [[gnu::packed]] OptionHeader {
  std::uint64_t magic;   // kIHaveOpt
  std::uint32_t option;  // kOpt*
  std::uint32_t length;  // bytes of option data that follow
};
static_assert(sizeof(OptionHeader) == 16);

// S: an option reply header; `length` bytes of reply data follow.
struct [[gnu::packed]] OptionReplyHeader {
  std::uint64_t magic;       // kOptReplyMagic
  std::uint32_t option;      // the option being answered
  std::uint32_t reply_type;  // kRep*
  std::uint32_t length;      // bytes of reply data that follow
};
static_assert(sizeof(OptionReplyHeader) == 20);

// S: NBD_REP_INFO data, NBD_INFO_EXPORT.
struct [[gnu::packed]] InfoExport {
  std::uint16_t info;                // kInfoExport
  std::uint64_t export_size;         // bytes
  std::uint16_t transmission_flags;  // kTFlag*
};
static_assert(sizeof(InfoExport) == 12);

// S: NBD_REP_INFO data, NBD_INFO_BLOCK_SIZE.
struct [[gnu::packed]] InfoBlockSize {
  std::uint16_t info;       // kInfoBlockSize
  std::uint32_t minimum;    // smallest request granularity (1: bytes)
  std::uint32_t preferred;  // the size that avoids read-modify-write
  std::uint32_t maximum;    // largest READ/WRITE payload accepted
};
static_assert(sizeof(InfoBlockSize) == 14);

// S: the reply to NBD_OPT_EXPORT_NAME (followed by 124 zero bytes unless
// the client set kClientFlagNoZeroes).
struct [[gnu::packed]] ExportNameReply {
  std::uint64_t export_size;         // bytes
  std::uint16_t transmission_flags;  // kTFlag*
};
static_assert(sizeof(ExportNameReply) == 10);

// C: a transmission request; WRITE is followed by `length` bytes.
struct [[gnu::packed]] Request {
  std::uint32_t magic;   // kRequestMagic
  std::uint16_t flags;   // kCmdFlag*
  std::uint16_t type;    // kCmd*
  std::uint64_t cookie;  // opaque to the server, echoed in the reply
  std::uint64_t offset;  // bytes from the start of the export
  std::uint32_t length;  // bytes
};
static_assert(sizeof(Request) == 28);

// S: a simple reply; a successful READ's data follows.
struct [[gnu::packed]] SimpleReply {
  std::uint32_t magic;   // kSimpleReplyMagic
  std::uint32_t error;   // 0 or kErr*
  std::uint64_t cookie;  // the request's cookie
};
static_assert(sizeof(SimpleReply) == 16);

// S: a structured reply chunk header; `length` bytes of payload follow.
struct [[gnu::packed]] StructuredReplyHeader {
  std::uint32_t magic;   // kStructuredReplyMagic
  std::uint16_t flags;   // kReplyFlag*
  std::uint16_t type;    // kReplyType*
  std::uint64_t cookie;  // the request's cookie
  std::uint32_t length;  // payload bytes
};
static_assert(sizeof(StructuredReplyHeader) == 20);

// S: the head of an NBD_REPLY_TYPE_OFFSET_DATA chunk; the data follows.
struct [[gnu::packed]] OffsetDataChunk {
  StructuredReplyHeader header;  // length = 8 + data bytes
  std::uint64_t offset;
};
static_assert(sizeof(OffsetDataChunk) == 28);

// S: the head of an NBD_REPLY_TYPE_ERROR chunk; `message_length` bytes of
// message follow.
struct [[gnu::packed]] ErrorChunk {
  StructuredReplyHeader header;  // length = 6 + message bytes
  std::uint32_t error;           // kErr*, nonzero
  std::uint16_t message_length;
};
static_assert(sizeof(ErrorChunk) == 26);

// S: one block status descriptor (NBD_REPLY_TYPE_BLOCK_STATUS, after the
// 32-bit context id).
struct [[gnu::packed]] BlockDescriptor {
  std::uint32_t length;  // bytes, nonzero
  std::uint32_t flags;   // kState*
};
static_assert(sizeof(BlockDescriptor) == 8);

// ---- Byte order ----

// An enumerator (kOpt*, kCmd*) is swapped as its underlying integer.
template <typename T>
constexpr auto ToBig(T v) {
  if constexpr (std::is_enum_v<T>) {
    return ToBig(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::endian::native == std::endian::little) {
    return std::byteswap(v);
  } else {
    return v;
  }
}
template <typename T>
constexpr auto FromBig(T v) {
  return ToBig(v);
}

// ---- Errors ----

// The one place where a Status becomes an NBD error (0 for OK):
// kResourceExhausted -> ENOSPC (mem_limit reached), kInvalidArgument,
// kOutOfRange, kFailedPrecondition, kNotFound -> EINVAL, kIoError,
// kCorruption, kBusy -> EIO, kUnsupported -> ENOTSUP.
std::uint32_t ToNbdError(const Status& status);

// "NBD_CMD_READ", ... ("NBD_CMD_<n>" for an unknown one).
std::string_view CommandName(std::uint16_t type);
// "EINVAL", "ENOSPC", ... for a kErr* value ("E?" for another).
std::string_view NbdErrorName(std::uint32_t error);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_PROTOCOL_H_
