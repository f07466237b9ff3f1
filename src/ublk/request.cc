// request.cc: descriptors parsed, requests served, errors mapped (contract
// in ublk/request.h).
#include "ublk/request.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace ztier::ublk {

namespace abi = platform::ublk;

std::expected<Request, int> ParseDescriptor(const abi::IoDesc& desc,
                                            const Limits& limits) {
  Request r;
  const std::uint32_t op = desc.op_flags & 0xff;
  const std::uint32_t flags = desc.op_flags & ~0xffu;
  switch (op) {
    case abi::kOpRead: r.op = Op::kRead; break;
    case abi::kOpWrite: r.op = Op::kWrite; break;
    case abi::kOpFlush: r.op = Op::kFlush; break;
    case abi::kOpDiscard: r.op = Op::kDiscard; break;
    case abi::kOpWriteZeroes: r.op = Op::kWriteZeroes; break;
    default: return std::unexpected(-EOPNOTSUPP);
  }
  r.fua = (flags & abi::kIoFFua) != 0;
  r.no_unmap = (flags & abi::kIoFNoUnmap) != 0;
  r.swap = (flags & abi::kIoFSwap) != 0;
  if (r.op == Op::kFlush) return r;  // no range
  const std::uint64_t bytes = static_cast<std::uint64_t>(desc.nr_sectors) << 9;
  if (desc.start_sector > (UINT64_MAX >> 9)) return std::unexpected(-EINVAL);
  r.offset = desc.start_sector << 9;
  if (bytes == 0) return std::unexpected(-EINVAL);
  if ((r.op == Op::kRead || r.op == Op::kWrite) && bytes > limits.max_io_bytes) {
    return std::unexpected(-EINVAL);
  }
  if (r.offset > limits.disksize || bytes > limits.disksize - r.offset) {
    return std::unexpected(-EINVAL);
  }
  if (bytes > UINT32_MAX) return std::unexpected(-EINVAL);
  r.length = static_cast<std::uint32_t>(bytes);
  return r;
}

std::int32_t KernelErrno(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kResourceExhausted: return -ENOSPC;
    case StatusCode::kIoError:
    case StatusCode::kCorruption: return -EIO;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return -EINVAL;
    case StatusCode::kUnsupported: return -EOPNOTSUPP;
    default: return -EIO;
  }
}

std::int32_t ServeRequest(Device& device, const Request& req,
                          std::span<std::byte> buffer) {
  Status s;
  switch (req.op) {
    case Op::kRead:
      s = device.Read(req.offset, buffer.first(req.length));
      // No memory for a backing read (ENOMEM) is no full disk: a read
      // fails as zram's does, with EIO (ENOSPC, mem_limit's refusal of a
      // write, would read "critical space allocation error" in the
      // kernel's log, and the disk leaves it unlogged).
      if (s.code() == StatusCode::kResourceExhausted) return -EIO;
      break;
    case Op::kWrite:
      s = device.WritePages(req.offset, buffer.first(req.length));
      if (s.ok() && req.fua) s = device.Flush();
      break;
    case Op::kFlush:
      return KernelErrno(device.Flush());
    case Op::kDiscard:
      return KernelErrno(device.Trim(req.offset, req.length));
    case Op::kWriteZeroes:
      s = device.WriteZeroes(req.offset, req.length, req.no_unmap);
      if (s.ok() && req.fua) s = device.Flush();
      return KernelErrno(s);
  }
  if (!s.ok()) return KernelErrno(s);
  return static_cast<std::int32_t>(req.length);
}

std::string ErrnoText(std::int32_t res) {
  const std::string_view name = ErrnoName(-res);
  const std::string text = std::strerror(-res);
  return name.empty() ? text : std::string(name) + " (" + text + ")";
}

namespace {
const char* OpName(std::uint32_t op) {
  switch (op) {
    case abi::kOpRead: return "read";
    case abi::kOpWrite: return "write";
    case abi::kOpFlush: return "flush";
    case abi::kOpDiscard: return "discard";
    case abi::kOpWriteZeroes: return "write_zeroes";
    default: return "op";
  }
}
}  // namespace

std::string FailedRequestLine(const std::string& path,
                              const abi::IoDesc& desc, std::int32_t result) {
  return path + ": " + OpName(desc.op_flags & 0xff) + " of " +
         std::to_string(desc.nr_sectors) + " sectors at sector " +
         std::to_string(desc.start_sector) + " failed: " + ErrnoText(result);
}

std::size_t FormatTraceLine(const abi::IoDesc& desc, std::int32_t result,
                            char* out) {
  const int n = std::snprintf(
      out, kTraceLineMax, "%u 0x%x %u %" PRIu64 " %d\n", desc.op_flags & 0xff,
      desc.op_flags & ~0xffu, desc.nr_sectors, desc.start_sector, result);
  return n < 0 ? 0 : static_cast<std::size_t>(n);
}

bool ParseTraceLine(const std::string& line, abi::IoDesc* desc,
                    std::int32_t* result) {
  const std::size_t first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line[first] == '#') return false;
  unsigned op = 0, flags = 0, nr = 0;
  std::uint64_t start = 0;
  int res = 0;
  const int got = std::sscanf(line.c_str() + first, "%u %x %u %" SCNu64 " %d",
                              &op, &flags, &nr, &start, &res);
  if (got < 4 || op > 0xff) return false;
  *desc = abi::IoDesc{};
  desc->op_flags = op | (flags & ~0xffu);
  desc->nr_sectors = nr;
  desc->start_sector = start;
  if (got == 5) *result = res;
  return true;
}

CommitRetries::CommitRetries(std::uint16_t depth) : tags_(depth) {
  retries_.reserve(depth);  // one command per tag is ever out
}

void CommitRetries::Committed(std::uint16_t tag, std::int32_t result) {
  Tag& t = tags_[tag];
  t.committing = true;
  t.result = result;
}

void CommitRetries::Fetched(std::uint16_t tag) {
  Tag& t = tags_[tag];
  t.committing = false;
  t.tries = 0;
}

bool CommitRetries::RefusedForAWhile(std::int32_t res) {
  return res == -ENOMEM || res == -EAGAIN || res == -EINTR;
}

CommitRetries::Action CommitRetries::Refused(std::uint16_t tag,
                                             std::int32_t res) {
  Tag& t = tags_[tag];
  if (!t.committing) return {};
  if (!RefusedForAWhile(res) || t.tries >= kCommitRetries) {
    return {Action::kGiveUp, t.result, 0};
  }
  const std::uint32_t delay =
      t.tries >= 6 ? kCommitRetryMaxMs : std::uint32_t{1} << t.tries;
  ++t.tries;
  return {Action::kRetry, t.result, std::min(delay, kCommitRetryMaxMs)};
}

void CommitRetries::QueueRetry(std::uint16_t tag, const Action& retry) {
  retries_.push_back({tag, retry.result});
  pause_ms_ = std::max(pause_ms_, retry.delay_ms);
}

}  // namespace ztier::ublk
