// tls_test_certs.h: a throwaway PKI for the TLS tests, made with GnuTLS's
// `certtool` (Debian package gnutls-bin). Linked into tests only.
//
// MakeTestCertificates(dir) writes, in the existing folder `dir`:
//   ca-key.pem, ca-cert.pem          a self-signed CA;
//   server-key.pem, server-cert.pem  signed by the CA, for the DNS name
//                                    "localhost" and the addresses 127.0.0.1
//                                    and ::1, TLS WWW server usage;
//   client-key.pem, client-cert.pem  signed by the CA, TLS WWW client usage.
// That is the layout libnbd's `tls-certificates=DIR` (and qemu's
// tls-creds-x509 dir=) reads: a client trusts ca-cert.pem and may present
// client-cert.pem/client-key.pem. Keys are ECDSA P-256 (fast to make), the
// certificates valid for ten years. Private keys are mode 0600.
//
// Errors: kNotFound when certtool is not installed; kIoError with certtool's
// output when it fails; the error of whatever file could not be written.
//
// Threading: a plain function; concurrent calls need different folders.
#ifndef ZTIER_NBD_TLS_TEST_CERTS_H_
#define ZTIER_NBD_TLS_TEST_CERTS_H_

#include <string>

#include "ztier/status.h"

namespace ztier::nbd::testing {

Status MakeTestCertificates(const std::string& dir);

}  // namespace ztier::nbd::testing

#endif  // ZTIER_NBD_TLS_TEST_CERTS_H_
