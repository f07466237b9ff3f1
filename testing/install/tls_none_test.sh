#!/bin/sh
# testing/install/tls_none_test.sh ZTIER: in a build configured with
# -DZTIER_TLS=OFF (no GnuTLS; src/nbd/tls_none.cc), `ztier serve --tls on`
# and `--tls require` must refuse to start (exit status not 0), with a message
# saying that this build has no TLS, and must not have created its sockets.
# Also checks that the binary has no GnuTLS among its NEEDED libraries.
set -eu
ZTIER=$1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ztier-tls-none.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() {
  echo "tls_none_test: FAIL: $*" >&2
  exit 1
}
# Real PEM files are not needed: no TLS code reads them in this build.
: >"$TMP/cert.pem"
: >"$TMP/key.pem"
for mode in on require; do
  rc=0
  "$ZTIER" serve --tls "$mode" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" \
    --unix "$TMP/s.sock" --ctl "$TMP/s.ctl" >"$TMP/out" 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "serve --tls $mode started: $(cat "$TMP/out")"
  grep -q "built without TLS" "$TMP/out" || fail "serve --tls $mode said: $(cat "$TMP/out")"
  [ ! -e "$TMP/s.sock" ] || fail "serve --tls $mode created its NBD socket"
done
if readelf -d "$ZTIER" | grep NEEDED | grep -i gnutls; then
  fail "$ZTIER links GnuTLS"
fi
echo "tls_none_test: ok: $(head -1 "$TMP/out")"
