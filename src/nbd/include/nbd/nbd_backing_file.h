// File: nbd/nbd_backing_file.h
//
// A BackingFile (ztier/backing_file.h) on a remote NBD export, through
// libnbd: writeback to another machine (nbdkit, qemu-nbd, rbd-nbd, another
// `ztier serve`). `backing_dev` takes its URI (nbd://HOST[:PORT]/EXPORT,
// nbds:// with TLS, nbd+unix:///EXPORT?socket=PATH); the device opens it
// through DeviceDefaults::open_remote_backing, which `ztier serve` sets to
// OpenNbdBackingFile.
//
//   auto f = ztier::nbd::OpenNbdBackingFile(
//       "nbd+unix:///?socket=/run/remote.sock", {.connections = 4});
//   auto bs = ztier::BackingStore::Open({.file = *f, .encrypt = true});
//
// TLS: nbds:// and nbds+unix:// require it; the URI may name the client's
// certificates (tls-certificates=DIR, the layout libnbd reads) or a PSK
// file (tls-psk-file=FILE): it comes from the operator, so local files are
// allowed (nbd_set_uri_allow_local_file). nbds:// must authenticate the
// server: a PSK, or a readable ca-cert.pem in tls-certificates=DIR or in
// libnbd's default folder (/etc/pki/libnbd for root, $HOME/.pki/libnbd
// otherwise); without one libnbd (1.14) verifies no certificate, and such
// a URI is refused. libnbd verifies a server's
// certificate only against a host name, so over nbds+unix:// none is
// checked: encrypted, not authenticated, unless with a PSK. TLS
// parameters on nbd:// or nbd+unix:// (plain text) are refused.
//
// Layout: the export's first 4096 bytes hold a label (a magic and 16
// random bytes this file wrote when it opened the export); the file is the
// rest (size() is the export's size less 4096, rounded down to 4096, and
// at most max_bytes).
//
// Connections: `connections` handles (at least 1), each with its own
// socket (over TCP with keepalive on: an idle connection whose peer or
// path died is found and closed, and the next command makes a new one). Writes
// go round-robin over all of them, many in flight at once (libnbd's
// asynchronous commands), when the server offers multi-conn (the NBD spec's
// guarantee that a write completed on one connection is seen by the others);
// without it, over the first alone. Reads and TRIMs use the first. With
// multi-conn, a command passes on to the next connection when its own is
// known to be down and not yet due another attempt (see Failures), or is
// being made by another command: after a remote restart, the first
// connection made again serves the commands of those still backing off.
//
// Block sizes: the export's NBD_INFO_BLOCK_SIZE limits are honoured. A
// minimum above 4096 bytes (or a maximum below) is refused at open; the
// maximum caps each write (max_write_bytes(): the store's writer splits
// its IOs to fit) and each TRIM (split here: proto.md lets a server refuse
// a longer one, though it carries no data). A remote that comes back with a
// smaller maximum, one that still takes the writes of every writer alive
// (Failures), caps the writers made after it; a writer asked for larger writes
// meanwhile fails (kIoError), and the next is made to fit.
//
// Durability: a write is sent with FUA where the connection offers it
// (NBD_FLAG_SEND_FUA), so the server has made it durable before its reply
// and the store frees the page's RAM copy only then; the label too. An
// export without FUA is said in the log once: its writes are as durable as
// the server's cache (a remote that loses power loses them).
//
// Discards: when the export takes TRIM, a block the store frees is
// trimmed (BackingStore::DiscardFreed, at the start of each writeback
// pass), so a remote with thin storage (nbdkit's
// memory plugin, a sparse file, a thin volume) gets its space back. At
// most 64 TRIMs are in flight at once (a freed run of 1 GiB is 262144 of
// them on an export taking 4 KiB requests): a read or write on the same
// connection waits behind those, not the whole batch. A Discard starts
// no range (a run of at most 1 GiB) after about timeout_ms, leaving the
// rest to the next pass, so that the writeback pass behind it is not held
// up for the whole batch; ranges are started in the order given, and the
// next pass starts with the first left (BackingStore::DiscardFreed goes
// round the store's blocks), so frees that keep coming at low blocks do
// not keep those at high ones waiting. The
// block is reused only after the remote has answered its TRIM (or refused
// it: an answer all the same, said in the log, one line for a Discard
// with how many, and not again until a Discard has every TRIM carried
// out; the block keeps its space on the remote until written again). A
// block whose write failed outright is reused at once; one whose write
// was sent and not answered (a timeout, a dropped connection) waits for
// a TRIM like a freed one. A TRIM that is
// not answered either (it is sent again later) may still be carried out
// by a stalled server after the block was reused and written: NBD has no
// fence for an abandoned connection. The checksum below turns that into
// -EIO for that page, never into wrong data.
//
// Checksums: the file keeps a 64-bit checksum of what it last wrote to
// each block (8 bytes of memory per block): SipHash-2-4 under a random key
// kept only in memory, so that a remote cannot make other bytes that
// match. A block that reads back other bytes fails with -EIO and a log
// line, never as data: a remote that changed it, or a write that timed
// out on a connection given up on and landed after a later write to the
// same block on a new one (NBD has no fence for an abandoned connection).
//
// Failures (the file never returns data it cannot vouch for):
//   - A command that fails reports the server's error (-EIO for a read or
//     write it refuses); a command on a connection that drops reports
//     -ENOTCONN, and one not answered within `timeout_ms` -ETIMEDOUT (a
//     write or a TRIM has the whole timeout from when it is sent, however
//     long connecting took, a TRIM of a batch from when the one before it
//     was answered if that is later; a write so failed may still land,
//     BackingFile's contract). The store keeps
//     the pages of a failed writeback pass in RAM, and its reads fail with
//     kIoError. A timed-out or dropped connection is closed; every command
//     in flight on it fails so. But a read whose deadline (timeout_ms in
//     all) passes before its command has had (nearly) a whole timeout,
//     connecting having taken the rest, proves no stall: it fails
//     -ETIMEDOUT and leaves the connection up (its command may still be
//     answered, into a buffer of the read's own). A read whose connection
//     drops retries on a new one until its deadline, then fails (-EIO, or
//     -ETIMEDOUT). A
//     server that answers ESHUTDOWN (it is stopping) is left at once
//     (NBD_CMD_DISC, as proto.md requires) and its read goes on the same
//     way, on the server that comes back; a write so answered fails.
//   - Reconnection: a closed connection is made again by the next command
//     that needs it, but no sooner than a backoff after the last failed
//     attempt (100 ms, doubling to 5 s; reset by a success). A connection
//     made again is checked (below: its label read, and written again
//     where it is gone), each step within a timeout of its own, as at
//     open. A read waits at most timeout_ms in all (connecting included,
//     but not that check) before it fails, and fails at once when no
//     attempt is allowed before then (the backoff, or a hold-off below).
//   - A stalled remote (a command or a connection attempt out of time,
//     having had at least nine tenths of timeout_ms): no connection is
//     attempted for timeout_ms after, so the commands behind it fail at
//     once (a writeback pass then fails in about two timeouts, not one per
//     command).
//   - A remote that comes back offering less than at open: read-only;
//     smaller than the part of it this file uses; without multi-conn while
//     writes go over several connections; without FUA where it had it; or
//     with block size limits that refuse 4096-byte requests or writes as
//     large as its live writers' (their io_bytes; not the maximum at open,
//     nor the 32 MiB assumed where the export stated none). The connection
//     is refused (closed, and tried again after the backoff, as a failed
//     one), and the log says why, once:
//     meanwhile reads fail and writeback passes fail (keeping their pages
//     in RAM), and nothing is counted lost. (TRIM may come and go: a block
//     is then freed without one.)
//   - A remote that comes back different (without this file's label:
//     restarted empty, or another export): every block
//     written before, and not freed since (trimmed, or freed where TRIM is
//     refused or not offered), is lost. Its reads fail with -EIO from then on
//     (never zeros); lost_blocks() counts them (bd_lost in the store's stats
//     and the metrics), and the log gets one line. The label is written again
//     and new writes work as before. One that comes back resized, with the
//     label, is the same export: used as before, and no more of it (the
//     part this file uses must still fit, above).
//
// Thread safety: as BackingFile's. Each connection has a mutex; a command
// holds it while it submits or polls (at most 10 ms at a time), never
// while it waits in between; except that (re)connecting holds it: while
// libnbd resolves the host name (getaddrinfo blocks; its time counts
// against the command's timeout) and, after a reconnect, through the
// label check (up to a timeout per step, under a lock the writers' sizing
// and the other connections' checks also take). The other commands of
// that connection wait for it, or pass on to another connection that is
// free (above).
#ifndef ZTIER_NBD_NBD_BACKING_FILE_H_
#define ZTIER_NBD_NBD_BACKING_FILE_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "ztier/backing_file.h"
#include "ztier/status.h"

namespace ztier::nbd {

struct NbdBackingOptions {
  std::size_t connections = 4;       // 1..64
  std::uint32_t timeout_ms = 30000;  // per command, and a read in all
  // The most of the export used (the device's disksize): the per-block
  // checksums (9 bytes a block) are for that much only. 0: all of it.
  std::uint64_t max_bytes = 0;
  // Event lines ("backing_dev nbd://...: ..."), null: none.
  std::function<void(const std::string&)> log;
};

// Whether `path` is an NBD URI (nbd:, nbds:, nbd+unix:, nbds+unix:). The
// same with or without libnbd, so a build without it still names the URI
// it cannot open.
inline bool IsNbdUri(std::string_view path) {
  for (std::string_view scheme : {"nbd:", "nbds:", "nbd+unix:", "nbds+unix:"}) {
    if (path.starts_with(scheme)) return true;
  }
  return false;
}

// Connects (each connection within timeout_ms), checks the export (at
// least two blocks, writable) and writes the label; checks each connection
// after the first as a reconnect is (Failures: one that offers less than
// the first fails the open; the smallest maximum request caps the
// writes). Errors: kInvalidArgument (a bad URI or option, TLS settings as
// above, an export too small or read-only, a connection offering less
// than the first), kIoError
// (cannot connect or write, saying why; a connection that cannot be made
// keeps its errno, ErrnoNameOf: ENOENT for no socket at the path,
// ECONNREFUSED, ETIMEDOUT), kUnsupported (built without libnbd).
Result<std::shared_ptr<BackingFile>> OpenNbdBackingFile(
    const std::string& uri, const NbdBackingOptions& options);

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_NBD_BACKING_FILE_H_
