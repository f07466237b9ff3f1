#!/bin/sh
# testing/install/install_test.sh SRC BUILD LIBDIR SYSCONFDIR CMAKE CC CXX [SANITIZE]
#
# `make install` end to end, on the build in BUILD (built already; nothing is
# rebuilt): `cmake --install BUILD --prefix /opt/ztier` into a fresh
# temporary DESTDIR, then
#   1. every file cmake/install.cmake lists is there: the tool (which runs,
#      and fails cleanly when a corpus it needs is missing),
#      the systemd unit with absolute paths under the prefix and no
#      @placeholder@ left, the example configuration (docs too), the public
#      headers, libztier.a without the NBD and control front ends (no GnuTLS
#      symbol), ztier.pc, the CMake package files naming no path of the
#      checkout, and both man pages, which groff formats without a warning;
#   2. a C program (consumer_c.c) built with only
#      `pkg-config --cflags --libs --static ztier` (PKG_CONFIG_PATH and
#      PKG_CONFIG_SYSROOT_DIR into DESTDIR), and a C++ program
#      (consumer_cxx.cc) built by a CMake project (consumer_cmake/) with
#      find_package(ztier) and CMAKE_PREFIX_PATH in DESTDIR, both outside the
#      source tree, are run: each stores data through the library and reads
#      it back (exit 0 only when it round-trips; the C program's 77 means
#      userfaultfd is unusable here, which is reported and tolerated);
#      The C program is also built by a C-only CMake project
#      (consumer_cmake_c/), which links with the C compiler;
#   3. neither program needs GnuTLS: both are linked with --no-as-needed, so
#      anything ztier.pc or ztierTargets.cmake drags in becomes a NEEDED
#      entry, and no libgnutls may be among them (readelf -d), nor any gnutls
#      symbol in them (nm).
# LIBDIR and SYSCONFDIR are the build's CMAKE_INSTALL_LIBDIR and
# CMAKE_INSTALL_SYSCONFDIR (`make install PREFIX=/usr` makes the latter
# /etc), relative to the prefix or absolute.
# Prints each step; exits 1 at the first failure.
set -eu

if [ $# -ne 7 ] && [ $# -ne 8 ]; then
  echo "usage: $0 SRC BUILD LIBDIR SYSCONFDIR CMAKE CC CXX [SANITIZE]" >&2
  exit 2
fi
SRC=$1
BUILD=$2
LIBDIR=$3
SYSCONFDIR=$4
CMAKE=$5
CC=$6
CXX=$7
# A sanitizer build (ZTIER_SANITIZE) installs an instrumented library: its
# consumers link the same runtime.
SAN=""
if [ -n "${8:-}" ]; then SAN="-fsanitize=$8"; fi
PREFIX=/opt/ztier

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ztier-install-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
DEST=$TMP/root
ROOT=$DEST$PREFIX
case $LIBDIR in
  /*) LIB=$DEST$LIBDIR ;;
  *) LIB=$ROOT/$LIBDIR ;;
esac
case $SYSCONFDIR in
  /*) ETC=$SYSCONFDIR ;;
  *) ETC=$PREFIX/$SYSCONFDIR ;;
esac

fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}
need_file() {
  [ -f "$1" ] || fail "missing after install: ${1#"$DEST"}"
}

echo "== cmake --install $BUILD --prefix $PREFIX (DESTDIR=$DEST)"
DESTDIR=$DEST "$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 ||
  { cat "$TMP/install.log" >&2; fail "cmake --install failed"; }

echo "== installed files"
need_file "$ROOT/bin/ztier"
[ -x "$ROOT/bin/ztier" ] || fail "bin/ztier is not executable"
"$ROOT/bin/ztier" --version >"$TMP/version" || fail "installed ztier --version failed"
grep -q '^ztier ' "$TMP/version" || fail "ztier --version printed: $(cat "$TMP/version")"
# Without corpora (an installed ztier whose checkout is gone: its corpus
# flags default to the checkout's testdata/), a command that needs one
# fails with exit status 1 and says which flag gives one; it does not crash.
for cmd in "bench engine --runs 1 --corpus-dir $TMP/no-corpora" \
           "bench readahead --corpus $TMP/no-corpora/x.pages.zst"; do
  rc=0
  # shellcheck disable=SC2086 # the command's words
  "$ROOT/bin/ztier" $cmd >"$TMP/out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "ztier $cmd without a corpus exited $rc: $(cat "$TMP/out")"
  grep -q -- "--corpus" "$TMP/out" || fail "ztier $cmd: no hint of --corpus: $(cat "$TMP/out")"
done

UNIT=$ROOT/lib/systemd/system/ztier.service
need_file "$UNIT"
if grep -n '@[A-Za-z_]*@' "$UNIT"; then fail "placeholders left in ztier.service"; fi
grep -qx "ExecStart=$PREFIX/bin/ztier serve --config $ETC/ztier/ztier.conf" "$UNIT" ||
  fail "ztier.service: ExecStart does not name $PREFIX: $(grep ExecStart= "$UNIT")"
# Everything else is dist/ztier.service as it is.
sed "s|@ZTIER_BINDIR@|$PREFIX/bin|g; s|@ZTIER_SYSCONFDIR@|$ETC|g" \
  "$SRC/dist/ztier.service" | cmp -s - "$UNIT" || fail "ztier.service differs from dist/ztier.service"

for f in "$DEST$ETC/ztier/ztier.conf.example" "$ROOT/share/doc/ztier/ztier.conf.example"; do
  need_file "$f"
  cmp -s "$SRC/dist/ztier.conf" "$f" || fail "${f#"$DEST"} is not dist/ztier.conf"
done
[ ! -e "$DEST$ETC/ztier/ztier.conf" ] || fail "install wrote $ETC/ztier/ztier.conf itself"

# Every engine layer's installed API (src/LAYER/include/ztier/), and no
# other layer's headers.
for h in "$SRC"/src/*/include/ztier/*.h; do
  need_file "$ROOT/include/ztier/$(basename "$h")"
  cmp -s "$h" "$ROOT/include/ztier/$(basename "$h")" || fail "header $(basename "$h") differs"
done
# Each header compiles on its own against the installed include folder
# only (C++23; region_c.h also as C99 and C11), and before C++23 a C++
# header says what it needs rather than failing inside <expected>.
for h in "$ROOT"/include/ztier/*.h; do
  printf '#include <ztier/%s>\nint main() { return 0; }\n' "$(basename "$h")" >"$TMP/h.cc"
  "$CXX" -std=c++23 -Wall -Wextra -Werror -fsyntax-only -I"$ROOT/include" "$TMP/h.cc" ||
    fail "$(basename "$h") does not compile on its own (C++23)"
done
printf '#include <ztier/region_c.h>\nint main(void) { return 0; }\n' >"$TMP/h.c"
for std in c99 c11; do
  "$CC" -std=$std -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$ROOT/include" "$TMP/h.c" ||
    fail "region_c.h does not compile as $std"
done
printf '#include <ztier/region.h>\nint main() { return 0; }\n' >"$TMP/h20.cc"
if "$CXX" -std=c++20 -fsyntax-only -I"$ROOT/include" "$TMP/h20.cc" >"$TMP/h20.log" 2>&1; then
  fail "ztier/region.h compiled as C++20"
fi
grep -q 'need C++23' "$TMP/h20.log" || fail "ztier/region.h as C++20 does not say it needs C++23: $(head -3 "$TMP/h20.log")"
for d in platform nbd ctl corpus uffd; do
  [ ! -e "$ROOT/include/$d" ] || fail "installed a layer's internal headers: include/$d"
done

need_file "$LIB/libztier.a"
# The engine only: the Region and PageStore are in, the NBD server, TLS,
# the control socket and the corpus loader are not, and nothing in it calls
# GnuTLS.
ar t "$LIB/libztier.a" >"$TMP/members"
for m in region.cc.o region_c.cc.o page_store.cc.o device.cc.o; do
  grep -qx "$m" "$TMP/members" || fail "libztier.a lacks $m"
done
for m in nbd_server.cc.o tls.cc.o tls_none.cc.o handshake.cc.o control_server.cc.o corpus.cc.o capture.cc.o; do
  if grep -qx "$m" "$TMP/members"; then fail "libztier.a holds $m (a server front end or the corpus loader)"; fi
done
if nm -A "$LIB/libztier.a" 2>/dev/null | grep -i gnutls; then fail "libztier.a refers to GnuTLS"; fi

need_file "$LIB/pkgconfig/ztier.pc"
grep -qx "prefix=$PREFIX" "$LIB/pkgconfig/ztier.pc" || fail "ztier.pc: prefix is not $PREFIX"
for f in ztierConfig.cmake ztierConfigVersion.cmake ztierTargets.cmake; do
  need_file "$LIB/cmake/ztier/$f"
done
# Relocatable: nothing installed for consumers names the checkout or build.
if grep -rlF -e "$SRC" -e "$BUILD" "$LIB/cmake/ztier" "$LIB/pkgconfig"; then
  fail "package files name the source or build folder"
fi

need_file "$ROOT/share/man/man8/ztier.8"
need_file "$ROOT/share/man/man5/ztier.conf.5"
for m in "$ROOT/share/man/man8/ztier.8" "$ROOT/share/man/man5/ztier.conf.5"; do
  out=$(groff -man -Tutf8 -ww -z "$m" 2>&1) || fail "groff failed on ${m#"$DEST"}: $out"
  [ -z "$out" ] || fail "groff warns on ${m#"$DEST"}: $out"
  lines=$(groff -man -Tutf8 "$m" 2>/dev/null | wc -l)
  [ "$lines" -gt 40 ] || fail "${m#"$DEST"} renders to only $lines lines"
done

# No GnuTLS in a consumer: not among its NEEDED libraries, no symbol of it.
check_no_gnutls() {
  readelf -d "$1" >"$TMP/dyn" || fail "readelf -d $1"
  grep -q NEEDED "$TMP/dyn" || fail "$1: no NEEDED entries (readelf)"
  if grep NEEDED "$TMP/dyn" | grep -i gnutls; then fail "$1 links GnuTLS"; fi
  if nm "$1" 2>/dev/null | grep -i gnutls; then fail "$1 holds GnuTLS symbols"; fi
}
# 0: round trip; 77: userfaultfd unusable (reported); else a failure.
run_consumer() {
  rc=0
  "$1" || rc=$?
  case $rc in
    0) ;;
    77) echo "install_test: note: $(basename "$1") skipped its Region (no userfaultfd)" ;;
    *) fail "$(basename "$1") exited $rc" ;;
  esac
}

echo "== C consumer: pkg-config --static ztier"
mkdir "$TMP/c"
cp "$SRC/testing/install/consumer_c.c" "$TMP/c/"
export PKG_CONFIG_PATH="$LIB/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$DEST"
flags=$(pkg-config --cflags --libs --static ztier) || fail "pkg-config --static ztier failed"
echo "pkg-config: $flags"
case " $flags " in
  *" -I$ROOT/include "*) ;;
  *) fail "pkg-config --cflags does not point into DESTDIR: $flags" ;;
esac
# shellcheck disable=SC2086 # the flags are words
(cd "$TMP/c" && "$CC" -std=c99 -Wall -Werror $SAN -o consumer_c consumer_c.c \
  -Wl,--no-as-needed $flags) || fail "the C consumer does not build"
check_no_gnutls "$TMP/c/consumer_c"
run_consumer "$TMP/c/consumer_c"

echo "== C++ consumer: find_package(ztier)"
mkdir "$TMP/cxx"
cp "$SRC/testing/install/consumer_cmake/CMakeLists.txt" "$SRC/testing/install/consumer_cxx.cc" "$TMP/cxx/"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
"$CMAKE" -S "$TMP/cxx" -B "$TMP/cxx/build" -DCMAKE_PREFIX_PATH="$ROOT" \
  -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--no-as-needed $SAN" >"$TMP/cxx.log" 2>&1 ||
  { cat "$TMP/cxx.log" >&2; fail "find_package(ztier) project does not configure"; }
"$CMAKE" --build "$TMP/cxx/build" >>"$TMP/cxx.log" 2>&1 ||
  { cat "$TMP/cxx.log" >&2; fail "the C++ consumer does not build"; }
# It compiled against the installed headers, not the checkout's.
grep -rqF -- "$ROOT/include" "$TMP/cxx/build/CMakeFiles/consumer_cxx.dir/flags.make" ||
  fail "the C++ consumer was not compiled with $ROOT/include"
check_no_gnutls "$TMP/cxx/build/consumer_cxx"
run_consumer "$TMP/cxx/build/consumer_cxx"

echo "== C consumer: find_package(ztier) from a C-only project"
mkdir "$TMP/cmc"
cp "$SRC/testing/install/consumer_cmake_c/CMakeLists.txt" "$SRC/testing/install/consumer_c.c" "$TMP/cmc/"
"$CMAKE" -S "$TMP/cmc" -B "$TMP/cmc/build" -DCMAKE_PREFIX_PATH="$ROOT" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >"$TMP/cmc.log" 2>&1 ||
  { cat "$TMP/cmc.log" >&2; fail "find_package(ztier) C project does not configure"; }
"$CMAKE" --build "$TMP/cmc/build" >>"$TMP/cmc.log" 2>&1 ||
  { tail -20 "$TMP/cmc.log" >&2; fail "the C consumer does not link through find_package(ztier)"; }
run_consumer "$TMP/cmc/build/consumer_c"

# 4. `make uninstall` (the Makefile's rule, on a record of this install as
#    `make install` writes it) removes every file installed and the folders
#    named ztier it made, but leaves a user's ztier.conf (and its folder).
echo "== make uninstall"
: >"$DEST$ETC/ztier/ztier.conf"
sed "s|^|$DEST|" "$BUILD/install_manifest.txt" >"$TMP/installed.txt"
make -s -C "$SRC" uninstall INSTALLED="$TMP/installed.txt" >"$TMP/uninstall.log" 2>&1 ||
  { cat "$TMP/uninstall.log" >&2; fail "make uninstall failed"; }
[ ! -e "$TMP/installed.txt" ] || fail "make uninstall kept its record"
[ -f "$DEST$ETC/ztier/ztier.conf" ] || fail "make uninstall removed the user's ztier.conf"
rm "$DEST$ETC/ztier/ztier.conf"
left=$(find "$DEST" -type f -o -type d -name ztier ! -path "$ROOT" ! -path "$DEST$ETC/ztier")
[ -z "$left" ] || fail "make uninstall left: $left"

echo "install_test: ok"
