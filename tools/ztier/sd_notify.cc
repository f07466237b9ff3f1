// File: tools/ztier/sd_notify.cc
#include "sd_notify.h"

#include <cstdlib>

#include "platform/socket.h"

namespace ztier::tool {

ServiceNotifier::ServiceNotifier() {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env != nullptr) socket_ = env;
}

Status ServiceNotifier::Notify(std::string_view state) const {
  if (socket_.empty()) return Status::Ok();
  const Status s = platform::SendUnixDatagram(socket_, state);
  if (s.ok()) return s;
  return Status(s.code(), "NOTIFY_SOCKET " + s.message());
}

}  // namespace ztier::tool
