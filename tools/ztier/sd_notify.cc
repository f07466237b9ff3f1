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
  return Annotate("NOTIFY_SOCKET", platform::SendUnixDatagram(socket_, state));
}

}  // namespace ztier::tool
