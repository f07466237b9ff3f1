// ublk_abi.h: the ublk driver's userspace ABI as Linux 6.12 defines it
// (include/uapi/linux/ublk_cmd.h; the driver is drivers/block/ublk_drv.c),
// written out here because the build host's installed header may be older
// (Debian 12 ships 6.1's, without UBLK_F_USER_COPY, UBLK_F_CMD_IOCTL_ENCODE
// or the ioctl-encoded UBLK_U_* command numbers).
//
// Only what ztier's server uses: the control and IO command numbers, the
// feature flags it asks for, the request descriptor, the device info, the
// parameters (the structs of 6.12's set: basic, discard, devt, zoned) and
// the user-copy offsets. Each struct is checked against the kernel's
// layout below (sizes, offsets).
//
// Thread safety: constants and plain structs only.
#ifndef ZTIER_PLATFORM_UBLK_ABI_H_
#define ZTIER_PLATFORM_UBLK_ABI_H_

#include <linux/ioctl.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace ztier::platform::ublk {

// ---- structures (include/uapi/linux/ublk_cmd.h) ----

// Carried in the 80-byte cmd area of a 128-byte SQE to /dev/ublk-control.
struct CtrlCmd {
  std::uint32_t dev_id;
  std::uint16_t queue_id;  // (u16)-1 unless the command is for a queue
  std::uint16_t len;       // of the buffer at addr
  std::uint64_t addr;
  std::uint64_t data[1];   // inline data (START_DEV: the server's pid)
  std::uint16_t dev_path_len;
  std::uint16_t pad;
  std::uint32_t reserved;
};
static_assert(sizeof(CtrlCmd) == 32);
static_assert(offsetof(CtrlCmd, data) == 16);

struct CtrlDevInfo {
  std::uint16_t nr_hw_queues;
  std::uint16_t queue_depth;
  std::uint16_t state;  // kStateDead, kStateLive, ...
  std::uint16_t pad0;
  std::uint32_t max_io_buf_bytes;
  std::uint32_t dev_id;
  std::int32_t ublksrv_pid;
  std::uint32_t pad1;
  std::uint64_t flags;
  std::uint64_t ublksrv_flags;  // the server's own, unseen by the driver
  std::uint32_t owner_uid;
  std::uint32_t owner_gid;
  std::uint64_t reserved1;
  std::uint64_t reserved2;
};
static_assert(sizeof(CtrlDevInfo) == 64);
static_assert(offsetof(CtrlDevInfo, dev_id) == 12);
static_assert(offsetof(CtrlDevInfo, ublksrv_pid) == 16);
static_assert(offsetof(CtrlDevInfo, flags) == 24);

// One per tag, in the queue's mmapped, read-only descriptor array.
struct IoDesc {
  std::uint32_t op_flags;  // op: bits 0-7, flags: bits 8-31
  std::uint32_t nr_sectors;
  std::uint64_t start_sector;
  std::uint64_t addr;  // unused with UBLK_F_USER_COPY
};
static_assert(sizeof(IoDesc) == 24);
static_assert(offsetof(IoDesc, start_sector) == 8);

// Carried in the 16-byte cmd area of an SQE to /dev/ublkcN.
struct IoCmd {
  std::uint16_t q_id;
  std::uint16_t tag;
  std::int32_t result;  // COMMIT: bytes done, or -errno
  std::uint64_t addr;   // must be 0 with UBLK_F_USER_COPY
};
static_assert(sizeof(IoCmd) == 16);

struct ParamBasic {
  std::uint32_t attrs;
  std::uint8_t logical_bs_shift;
  std::uint8_t physical_bs_shift;
  std::uint8_t io_opt_shift;
  std::uint8_t io_min_shift;
  std::uint32_t max_sectors;
  std::uint32_t chunk_sectors;
  std::uint64_t dev_sectors;
  std::uint64_t virt_boundary_mask;
};
static_assert(sizeof(ParamBasic) == 32);

struct ParamDiscard {
  std::uint32_t discard_alignment;
  std::uint32_t discard_granularity;
  std::uint32_t max_discard_sectors;
  std::uint32_t max_write_zeroes_sectors;
  std::uint16_t max_discard_segments;
  std::uint16_t reserved0;
};
static_assert(sizeof(ParamDiscard) == 20);

struct ParamDevt {  // read-only: GET_PARAMS after START_DEV
  std::uint32_t char_major;
  std::uint32_t char_minor;
  std::uint32_t disk_major;
  std::uint32_t disk_minor;
};
static_assert(sizeof(ParamDevt) == 16);

struct ParamZoned {
  std::uint32_t max_open_zones;
  std::uint32_t max_active_zones;
  std::uint32_t max_zone_append_sectors;
  std::uint8_t reserved[20];
};
static_assert(sizeof(ParamZoned) == 32);

// 6.12's struct ublk_params. Later kernels append members (dma, segment);
// they take a shorter `len` as the older layout.
struct Params {
  std::uint32_t len;
  std::uint32_t types;  // kParamBasic | ...
  ParamBasic basic;
  ParamDiscard discard;
  ParamDevt devt;
  ParamZoned zoned;
};
static_assert(offsetof(Params, basic) == 8);
static_assert(offsetof(Params, discard) == 40);
static_assert(offsetof(Params, devt) == 60);
static_assert(offsetof(Params, zoned) == 76);
static_assert(sizeof(Params) == 112);

// ---- command numbers ----
// Control commands: _IOR/_IOWR('u', nr, struct ublksrv_ctrl_cmd).
inline constexpr std::uint32_t kCmdGetDevInfo = _IOR('u', 0x02, CtrlCmd);
inline constexpr std::uint32_t kCmdAddDev = _IOWR('u', 0x04, CtrlCmd);
inline constexpr std::uint32_t kCmdDelDev = _IOWR('u', 0x05, CtrlCmd);
inline constexpr std::uint32_t kCmdStartDev = _IOWR('u', 0x06, CtrlCmd);
inline constexpr std::uint32_t kCmdStopDev = _IOWR('u', 0x07, CtrlCmd);
inline constexpr std::uint32_t kCmdSetParams = _IOWR('u', 0x08, CtrlCmd);
inline constexpr std::uint32_t kCmdGetParams = _IOR('u', 0x09, CtrlCmd);
inline constexpr std::uint32_t kCmdGetFeatures = _IOR('u', 0x13, CtrlCmd);
inline constexpr std::uint32_t kCmdDelDevAsync = _IOR('u', 0x14, CtrlCmd);
// IO commands: _IOWR('u', nr, struct ublksrv_io_cmd).
inline constexpr std::uint32_t kIoFetchReq = _IOWR('u', 0x20, IoCmd);
inline constexpr std::uint32_t kIoCommitAndFetchReq = _IOWR('u', 0x21, IoCmd);
static_assert(kCmdAddDev == 0xc0207504u);
static_assert(kIoFetchReq == 0xc0107520u);

// A FETCH or COMMIT_AND_FETCH completes with kIoResOk when a request is
// there, and with kIoResAbort when the device stops (no re-fetch then).
inline constexpr int kIoResOk = 0;
inline constexpr int kIoResAbort = -ENODEV;

// ---- feature flags (ublksrv_ctrl_dev_info.flags) ----
inline constexpr std::uint64_t kFCmdIoctlEncode = 1ull << 6;
inline constexpr std::uint64_t kFUserCopy = 1ull << 7;

// ---- device states ----
inline constexpr std::uint16_t kStateDead = 0;
inline constexpr std::uint16_t kStateLive = 1;
inline constexpr std::uint16_t kStateQuiesced = 2;
inline constexpr std::uint16_t kStateFailIo = 3;

// ---- request ops and flags (ublksrv_io_desc.op_flags) ----
inline constexpr std::uint8_t kOpRead = 0;
inline constexpr std::uint8_t kOpWrite = 1;
inline constexpr std::uint8_t kOpFlush = 2;
inline constexpr std::uint8_t kOpDiscard = 3;
inline constexpr std::uint8_t kOpWriteSame = 4;
inline constexpr std::uint8_t kOpWriteZeroes = 5;
inline constexpr std::uint32_t kIoFFua = 1u << 13;
inline constexpr std::uint32_t kIoFNoUnmap = 1u << 15;
inline constexpr std::uint32_t kIoFSwap = 1u << 16;

// ---- parameters ----
inline constexpr std::uint32_t kParamBasic = 1u << 0;
inline constexpr std::uint32_t kParamDiscard = 1u << 1;

// ---- the char device's offsets ----
// The descriptor arrays: queue q's at kCmdBufOffset + q * MaxCmdBufBytes(),
// QueueCmdBufBytes(depth) long (ublk_ch_mmap()).
inline constexpr std::uint64_t kCmdBufOffset = 0;
inline constexpr std::uint32_t kMaxQueueDepth = 4096;
inline constexpr std::uint32_t kMaxNrQueues = 1u << 12;
// User copy: pread/pwrite of request (q, tag)'s data at byte `off` is at
// kIoBufOffset + (q << kQidOff) + (tag << kTagOff) + off.
inline constexpr std::uint64_t kIoBufOffset = 0x80000000ull;
inline constexpr unsigned kIoBufBits = 25;  // 32 MiB per request at most
inline constexpr unsigned kTagOff = kIoBufBits;
inline constexpr unsigned kTagBits = 16;
inline constexpr unsigned kQidOff = kTagOff + kTagBits;
inline constexpr unsigned kQidBits = 12;
inline constexpr std::uint32_t kMaxIoBufBytes = 1u << kIoBufBits;

}  // namespace ztier::platform::ublk

#endif  // ZTIER_PLATFORM_UBLK_ABI_H_
