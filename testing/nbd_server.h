// testing/nbd_server.h: an NBD server (nbdkit) as a child of a test, ready
// once a client gets through the handshake. Used by the remote backing
// tests (src/nbd/nbd_backing_file_test.cc, tools/ztier/*_test.cc).
//
//   std::string error;
//   pid_t pid = ztier::testing::SpawnNbdServer(
//       {"nbdkit", "-f", "-U", sock, "memory", "8M"},
//       "nbd+unix:///?socket=" + sock, dir.File("remote.log"), &error);
//   ASSERT_GT(pid, 0) << error;
#ifndef ZTIER_TESTING_NBD_SERVER_H_
#define ZTIER_TESTING_NBD_SERVER_H_

#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "testing/test_util.h"

namespace ztier::testing {

// Starts an NBD server (nbdkit, or `ip netns exec NS nbdkit ...`) as
// SpawnWithLog does, args[0] looked up on $PATH, then waits until a client
// gets through the handshake at `uri` (nbdinfo, up to 200 tries). Returns
// its pid, or -1 with *error saying why (its log).
inline pid_t SpawnNbdServer(std::vector<std::string> args,
                            const std::string& uri,
                            const std::string& log_path, std::string* error) {
  std::string path = Sh("command -v '" + args[0] + "'").out;
  while (!path.empty() && path.back() == '\n') path.pop_back();
  args[0] = path;
  const pid_t pid = path.empty() ? -1 : SpawnWithLog(args, log_path);
  const bool ready =
      pid > 0 &&
      Sh("for i in $(seq 200); do timeout 2 nbdinfo --size '" + uri +
         "' >/dev/null 2>&1 && exit 0; sleep 0.05; done; exit 1")
              .exit_code == 0;
  if (ready) return pid;
  *error = args[0] + " did not start serving " + uri + ": " +
           Sh("cat '" + log_path + "' 2>&1").out;
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  return -1;
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_NBD_SERVER_H_
