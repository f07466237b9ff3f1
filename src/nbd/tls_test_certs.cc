// tls_test_certs.cc: see tls_test_certs.h. The templates follow nbdkit's
// tests/make-pki.sh.
#include "tls_test_certs.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

namespace ztier::nbd::testing {
namespace {

constexpr char kCaTemplate[] =
    "cn = ztier test CA\n"
    "ca\n"
    "cert_signing_key\n"
    "expiration_days = 3650\n";

constexpr char kServerTemplate[] =
    "organization = ztier test\n"
    "cn = localhost\n"
    "dns_name = localhost\n"
    "ip_address = 127.0.0.1\n"
    "ip_address = ::1\n"
    "tls_www_server\n"
    "signing_key\n"
    "expiration_days = 3650\n";

constexpr char kClientTemplate[] =
    "organization = ztier test\n"
    "cn = localhost\n"
    "tls_www_client\n"
    "signing_key\n"
    "expiration_days = 3650\n";

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `certtool args...` with its output (stdout and stderr) in `log`.
Status Certtool(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  std::string name = "certtool";
  argv.push_back(name.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int err =
      ::posix_spawnp(&pid, "certtool", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err == ENOENT) {
    return Status::NotFound(
        "certtool not found (install the gnutls-bin package)");
  }
  if (err != 0) return PosixError("spawn certtool", err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return PosixError("waitpid certtool", errno);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  std::string cmd = "certtool";
  for (const auto& a : args) cmd += " " + a;
  return Status::IoError(cmd + " failed (status " + std::to_string(status) +
                         "): " + ReadFile(log));
}

Status MakeKey(const std::string& path, const std::string& log) {
  ZT_RETURN_IF_ERROR(Certtool({"--generate-privkey", "--key-type=ecdsa",
                               "--no-text", "--outfile", path},
                              log));
  if (::chmod(path.c_str(), 0600) != 0) return PosixError("chmod " + path, errno);
  return Status::Ok();
}

// A key `<name>-key.pem` and a certificate `<name>-cert.pem` from `tmpl`,
// signed by the CA in `dir`.
Status MakeSigned(const std::string& dir, const std::string& name,
                  const char* tmpl, const std::string& log) {
  const std::string info = dir + "/" + name + ".info";
  ZT_RETURN_IF_ERROR(WriteFile(info, tmpl));
  ZT_RETURN_IF_ERROR(MakeKey(dir + "/" + name + "-key.pem", log));
  ZT_RETURN_IF_ERROR(Certtool(
      {"--generate-certificate", "--load-ca-certificate", dir + "/ca-cert.pem",
       "--load-ca-privkey", dir + "/ca-key.pem", "--load-privkey",
       dir + "/" + name + "-key.pem", "--template", info, "--no-text",
       "--outfile", dir + "/" + name + "-cert.pem"},
      log));
  ::unlink(info.c_str());
  return Status::Ok();
}

}  // namespace

Status MakeTestCertificates(const std::string& dir) {
  const std::string log = dir + "/certtool.log";
  const std::string ca_info = dir + "/ca.info";
  ZT_RETURN_IF_ERROR(WriteFile(ca_info, kCaTemplate));
  ZT_RETURN_IF_ERROR(MakeKey(dir + "/ca-key.pem", log));
  ZT_RETURN_IF_ERROR(Certtool(
      {"--generate-self-signed", "--load-privkey", dir + "/ca-key.pem",
       "--template", ca_info, "--no-text", "--outfile", dir + "/ca-cert.pem"},
      log));
  ::unlink(ca_info.c_str());
  ZT_RETURN_IF_ERROR(MakeSigned(dir, "server", kServerTemplate, log));
  ZT_RETURN_IF_ERROR(MakeSigned(dir, "client", kClientTemplate, log));
  ::unlink(log.c_str());
  return Status::Ok();
}

}  // namespace ztier::nbd::testing
