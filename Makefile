# ztier: the two set-up commands are `make run` and `make test`.
# Each installs the Debian packages it needs (as root, on Debian 12), builds,
# and then runs the main job or the tests.

JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
CORPUS ?= testdata
# CI sets CI=true: warnings are errors there.
ifeq ($(CI),true)
CMAKE_FLAGS += -DZTIER_WERROR=ON
endif

DEB_PACKAGES = build-essential cmake pkg-config libgtest-dev libgmock-dev \
  libbenchmark-dev liblz4-dev libzstd-dev libdeflate-dev liblzo2-dev liburing-dev libssl-dev zstd \
  libnbd-bin libnbd-dev python3-libnbd nbdkit fio qemu-utils libgnutls28-dev gnutls-bin gnuplot-nox \
  python3 procps prometheus curl groff-base systemd iproute2 tcpdump

.PHONY: all deps build install uninstall run test test-kernel test-asan test-tsan check-locks bench bench-ublk bench-remote bench-docs soak clean format fuzz fuzz-deps

all: build

# Installs only what is missing (a package removed but not purged is
# missing); runs apt-get update first when it must.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | \
	    grep -q 'install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing && \
	  case " $$missing " in *" prometheus "*) \
	    echo "deps: prometheus is here for promtool (the metrics tests); its servers, which Debian starts, are stopped and disabled"; \
	    $$SUDO systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true;; \
	  esac; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# `make install [PREFIX=/usr/local] [DESTDIR=...]`: builds, then installs the
# tool, libztier (with ztier.pc and the CMake package), its headers, the
# systemd unit, the example configuration and the man pages under PREFIX
# (cmake/install.cmake lists where each goes), staged under DESTDIR if set.
# The configuration goes under PREFIX/etc, but for PREFIX=/usr in /etc
# (GNU's rule, as GNUInstallDirs has it); SYSCONFDIR=DIR says otherwise.
PREFIX ?= /usr/local
SYSCONFDIR ?= $(if $(filter /usr /usr/,$(PREFIX)),/etc,etc)
# What `make install` put where (DESTDIR included), for `make uninstall`:
# its own record, as cmake's install_manifest.txt has no DESTDIR and is
# rewritten by every `cmake --install` of the build (install_test too).
INSTALLED = $(BUILD)/ztier-installed.txt
install: build
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_SYSCONFDIR=$(SYSCONFDIR) >/dev/null
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix $(PREFIX)
	sed 's|^|$(DESTDIR)|' $(BUILD)/install_manifest.txt > $(INSTALLED)

# `make uninstall`: removes what the last `make install` from this build
# installed ($(INSTALLED)), but not while ztier.service runs (stop and
# disable it first), then the folders named ztier that held them once empty
# (include/ztier, lib/cmake/ztier, share/doc/ztier; etc/ztier unless a
# ztier.conf is left in it). The record stays until every file is gone.
uninstall:
	@test -f $(INSTALLED) || \
	  { echo "uninstall: no $(INSTALLED): nothing was installed from $(BUILD)"; exit 1; }
	@if systemctl is-active --quiet ztier 2>/dev/null; then \
	  echo "uninstall: ztier.service is running; first: systemctl disable --now ztier"; exit 1; fi
	@rc=0; while IFS= read -r f || [ -n "$$f" ]; do rm -fv "$$f" || rc=1; done < $(INSTALLED); \
	  if [ $$rc = 0 ]; then \
	    sed -n 's|/[^/]*$$||p' $(INSTALLED) | sort -u | while IFS= read -r d; do \
	      case $$d in */ztier) ! rmdir "$$d" 2>/dev/null || \
	        echo "removed directory '$$d'";; esac; done; \
	    rm -f $(INSTALLED); else \
	    echo "uninstall: some files stayed; $(INSTALLED) still lists them"; exit 1; fi

# The main job: a 1 GiB compressed RAM device (zram0, lz4) served over NBD on
# /run/ztier/ztier.sock (as root; else $XDG_RUNTIME_DIR/ztier/), control
# socket ztier.ctl beside it, in the foreground until Ctrl-C.
SERVE_FLAGS ?=
run: build
	./$(BUILD)/ztier serve $(SERVE_FLAGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# A real Linux kernel on ztier (testing/guest/): Debian's 6.12 kernel boots
# under qemu (software emulation) with a busybox initramfs assembled from
# Debian packages and cached in $(BUILD)/guest; its NBD client attaches to a
# `ztier serve` on this machine's loopback. Swap (beside the guest's own
# zram), ext4 with writeback, and the zram attributes against the kernel's;
# then ztier inside the guest as its ublk disks (`ztier serve --ublk`): fio
# verify, ext4 and fstrim, swap, hot_add/hot_remove, EBUSY while in use,
# and a SIGKILLed server's disk (testing/guest/kernel_tests.py says more).
KERNEL_PACKAGES = qemu-system-x86 python3 xz-utils
test-kernel: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(KERNEL_PACKAGES)"
	python3 testing/guest/kernel_tests.py --ztier $(BUILD)/ztier --guest $(BUILD)/guest

# The sanitizer builds keep asserts on and line tables only (-g1), which
# is all their reports need: -O1 -g1 compiles in about 60% of the time of
# -O2 -g. TSan at -O1, as its documentation advises; ASan at -O0, since
# GCC 12 at -O1 with ASan reports uninitialised uses inside libstdc++'s
# <regex> that are not there (-Wmaybe-uninitialized, an error in CI).
sanitize_flags = -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$(1) -g1" \
  -DCMAKE_C_FLAGS_DEBUG="$(1) -g1"

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan:
	$(MAKE) test BUILD=build-asan \
	  CMAKE_FLAGS='$(CMAKE_FLAGS) -DZTIER_SANITIZE=address,undefined $(call sanitize_flags,-O0)'

# Unit tests under ThreadSanitizer.
test-tsan:
	$(MAKE) test BUILD=build-tsan \
	  CMAKE_FLAGS='$(CMAKE_FLAGS) -DZTIER_SANITIZE=thread $(call sanitize_flags,-O1)'

# Lock discipline checked by the compiler: the engine's libraries built by
# clang with its thread-safety analysis (src/platform/include/platform/thread_annotations.h)
# and every warning an error, in build-locks. Fails when a path touches a
# slot's content or a pool class's state without the lock the annotations
# say it needs. clang-19 as for fuzzing (clang-16's __cpp_concepts is too
# old for libstdc++ 12's <expected>).
LOCKS_CLANG ?= 19
LOCKS_BUILD = build-locks
check-locks: deps
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="clang-$(LOCKS_CLANG)"
	CC=clang-$(LOCKS_CLANG) CXX=clang++-$(LOCKS_CLANG) \
	  cmake -S . -B $(LOCKS_BUILD) $(CMAKE_FLAGS) -DZTIER_WERROR=ON \
	  -DCMAKE_CXX_FLAGS="-Wthread-safety"
	cmake --build $(LOCKS_BUILD) -j $(JOBS) --target ztier_core ztier_ctl ztier_ublk

# `make bench` runs every experiment and writes docs/benchmarks.md from
# docs/benchmarks.md.in with their results (tools/bench/render_docs.sh), so
# the document is always the output of the code. Each experiment NAME
# leaves in $(BENCH_RESULTS): NAME.txt (its stdout, the tables), NAME.json,
# NAME.cmd (its command line) and NAME.time (its seconds); and its charts
# (--plot) in $(BENCH_CHARTS), which are committed so that the document
# shows them. `make bench-docs` renders the document again from those files
# alone. Run it on a quiet machine: other load moves every figure.
#
# Estimated durations on the 2-vCPU development machine, from each
# experiment's configuration (--help), about 29.5 minutes in all plus the
# build, and bench-ublk's ~9 more (its guest under emulation); keep the
# rest under 30:
#   bench-engine     ~2 min: 5 codecs x 3 corpora x (1 warm-up + 5 runs) x
#                    13 variants of 4096 pages (took 1 min 50 s before)
#   bench-nbd        ~7.5 min: fio 5 runs x 6 jobs x 4 servers (ztier lz4
#                    and zstd, nbdkit, nbdkit zstd) x 3 s = 6 min, plus
#                    fills, server starts and nbdcopy of 3 corpora (3
#                    servers took 5.2 min)
#   bench-latency-1  ~2.6 min: (1 warm-up + 5 runs) x 2 modes x 12 s, plus
#                    set-up
#   bench-latency-2  ~2.6 min: the same on 2 CPUs
#   bench-policy     ~1.5 min: (1 warm-up + 3 runs) x 2 variants x 10 s,
#                    plus a 132 MiB fill each
#   bench-writeback  ~2.5 min: 6 runs (1 warm-up) of a 1 GiB store: sync
#                    ~15 s, batched ~0.6 s, fio ~0.5 s, 2 fills ~5 s
#   usemem           ~1.5 min: 5 runs x 2 variants of 4 x 256 MiB, ~6 s each
#   bench-recompress ~1.5 min: 3 corpora x (1 warm-up + 9 runs) x (2
#                    passes over a 64 MiB store, each with its lz4 fill,
#                    compaction and check, and one zstd fill); 5 runs took
#                    40 s on a quiet machine
#   bench-readahead  ~1 min: 5 runs x 2 variants of 256 MiB, then 16384
#                    fault-in touches x 3
#   bench-zram-compare ~8 min: 6 runs (1 warm-up) x 12 jobs x 4 paths x
#                    2 codecs (lz4, lzo-rle) x 1 s, plus fills and part (a)
#                    (needs root and a free /dev/zram0, else ztier alone);
#                    all codecs and paths (plain `ztier bench zram-compare`)
#                    take ~17 min
#   bench-ublk       ~9 min: one guest under qemu TCG (boot, fills
#                    ~20 s), then 5 runs x 6 jobs x 3 targets (zram,
#                    ztier-ublk, ztier-nbd) x (5 s + ~1 s of fio start-up
#                    under emulation; 541 s in all); needs qemu-system-x86
#                    (KERNEL_PACKAGES), builds $(BUILD)/guest as
#                    test-kernel does. Alone: `make bench-ublk`.
#
# BENCH_QUICK=1 runs the same set with the smallest settings (about 3
# minutes, figures meaningless) to try the whole chain; point
# BENCH_RESULTS, BENCH_CHARTS and BENCH_DOC elsewhere then, e.g.
#   make bench BENCH_QUICK=1 BENCH_RESULTS=/tmp/b/results \
#     BENCH_CHARTS=/tmp/b/charts BENCH_DOC=/tmp/b/benchmarks.md
BENCH_RESULTS ?= $(BUILD)/bench-results
BENCH_CHARTS ?= docs/charts
BENCH_DOC ?= docs/benchmarks.md
BENCH_CORPUS = $(CORPUS)/anon-python.pages.zst
BENCH_PLOT = --plot $(BENCH_CHARTS)
ifeq ($(BENCH_QUICK),1)
BENCH_ENGINE_ARGS = --runs 1
BENCH_NBD_ARGS = --runs 1 --seconds 1 --size 64M
BENCH_LATENCY_ARGS = --runs 1 --seconds 1
BENCH_POLICY_ARGS = --runs 1 --seconds 2 --size 16M
BENCH_WRITEBACK_ARGS = --runs 1 --size 64M
BENCH_USEMEM_ARGS = --size 16M --runs 1 --sleep 0
BENCH_READAHEAD_ARGS = --runs 1 --size 16M --fault-pages 2048
BENCH_RECOMPRESS_ARGS = --runs 1 --size 1M
BENCH_RATIO_ARGS = --runs 1
BENCH_ZRAM_COMPARE_ARGS = --runs 1 --size 16M --corpus-pages 256 --codec lz4
BENCH_UBLK_ARGS = --quick
else
BENCH_POLICY_ARGS = --runs 3
# Nine runs: the pass's parallel/serial ratio is a ratio of two noisy
# timings, and five runs' median moved by 0.2 from one run to the next.
BENCH_RECOMPRESS_ARGS = --runs 9
BENCH_RATIO_ARGS = --runs 5
BENCH_USEMEM_ARGS = --size 256M --runs 5
BENCH_ZRAM_COMPARE_ARGS = --codec lz4 --codec lzo-rle --paths ztier-lib \
  --paths kernel-psync --paths kernel-fio --paths ztier-nbd
endif
# $(call bench_run,NAME,ARGS[,RUNNER]): `ztier ARGS --json NAME.json`, stdout
# also to NAME.txt (stderr, with the progress line on a terminal, is not
# saved); fails when ztier fails (bash's pipefail: make's sh has none).
# NAME's results of an earlier run are removed first, and NAME.txt is
# written only when the run succeeds, so a failed run leaves no mix of two.
# RUNNER, when given, is the command line that runs ztier with ARGS.
bench_runner = $(or $(1),./$(BUILD)/ztier)
bench_run = @echo "== $(1): ztier $(2)" && \
  rm -f $(BENCH_RESULTS)/$(1).json $(BENCH_RESULTS)/$(1).txt \
    $(BENCH_RESULTS)/$(1).time && \
  echo "$(call bench_runner,$(3)) $(2) --json $(BENCH_RESULTS)/$(1).json" \
    > $(BENCH_RESULTS)/$(1).cmd && \
  start=$$(date +%s) && \
  bash -o pipefail -c '$(call bench_runner,$(3)) $(2) --json $(BENCH_RESULTS)/$(1).json \
    | tee $(BENCH_RESULTS)/$(1).txt.part' && \
  mv $(BENCH_RESULTS)/$(1).txt.part $(BENCH_RESULTS)/$(1).txt && \
  echo $$(( $$(date +%s) - start )) > $(BENCH_RESULTS)/$(1).time

bench: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(KERNEL_PACKAGES)"
	@mkdir -p $(BENCH_RESULTS) $(BENCH_CHARTS)
	$(call bench_run,bench-engine,bench engine --corpus-dir $(CORPUS) $(BENCH_ENGINE_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-nbd,bench nbd --corpus-dir $(CORPUS) --codec lz4 --codec zstd $(BENCH_NBD_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-latency-1,bench latency --cpus 1 --corpus $(BENCH_CORPUS) $(BENCH_LATENCY_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-latency-2,bench latency --cpus 2 --corpus $(BENCH_CORPUS) $(BENCH_LATENCY_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-policy,bench policy --corpus $(BENCH_CORPUS) $(BENCH_POLICY_ARGS))
	$(call bench_run,bench-writeback,bench writeback --corpus $(BENCH_CORPUS) $(BENCH_WRITEBACK_ARGS) $(BENCH_PLOT))
	$(call bench_run,usemem,usemem --workers 4 --budget 60% --corpus $(BENCH_CORPUS) --compare-batching $(BENCH_USEMEM_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-recompress,bench recompress --corpus-dir $(CORPUS) $(BENCH_RECOMPRESS_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-ratio,bench ratio --corpus-dir $(CORPUS) $(BENCH_RATIO_ARGS))
	$(call bench_run,bench-ratio-zstd9,bench ratio --corpus-dir $(CORPUS) --codec zstd --algorithm-params level=9 $(BENCH_RATIO_ARGS))
	$(call bench_run,bench-readahead,bench readahead --corpus $(BENCH_CORPUS) $(BENCH_READAHEAD_ARGS) $(BENCH_PLOT))
	$(call bench_run,bench-zram-compare,bench zram-compare --corpus-dir $(CORPUS) $(BENCH_ZRAM_COMPARE_ARGS))
	$(call bench_run,bench-ublk,bench ublk $(BENCH_UBLK_ARGS))
	$(MAKE) bench-docs

# `ztier bench ublk` alone (testing/guest/bench_ublk.py): the guest's zram,
# ztier over ublk and ztier over NBD, in one guest; its results go where
# `make bench` puts them, and `make bench-docs` renders them.
bench-ublk: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(KERNEL_PACKAGES)"
	@mkdir -p $(BENCH_RESULTS)
	$(call bench_run,bench-ublk,bench ublk $(BENCH_UBLK_ARGS))

# Writeback to another machine (tools/bench/remote_writeback.sh, as root):
# `ztier bench writeback --backing` to nbdkit memory across a veth link
# between two network namespaces, beside the local file, ~5 min (6 runs of
# bench-writeback's plus one NBD write at a time, ~13 s, and batched,
# ~1.4 s). Alone, as bench-ublk: its results go where `make bench` puts
# them, and `make bench-docs` renders them.
bench-remote: build
	@mkdir -p $(BENCH_RESULTS)
	$(call bench_run,bench-remote-writeback,bench writeback --corpus $(BENCH_CORPUS) $(BENCH_WRITEBACK_ARGS),tools/bench/remote_writeback.sh ./$(BUILD)/ztier)

bench-docs:
	sh tools/bench/render_docs.sh docs/benchmarks.md.in $(BENCH_RESULTS) \
	  $(BENCH_CHARTS) $(BENCH_DOC)

# A bounded soak (not part of `make test` or CI): tools/soak/soak.sh mixes
# verified fio, writeback, trim, compact, mem_limit, reset and the corpus
# through nbdcopy against `ztier serve` for SOAK_MINUTES, then prints a
# summary; it fails on any error. It needs jq to read fio's JSON.
SOAK_MINUTES ?= 20
soak: build
	@command -v jq >/dev/null || $(MAKE) deps DEB_PACKAGES=jq
	tools/soak/soak.sh --ztier ./$(BUILD)/ztier --corpus $(CORPUS) --minutes $(SOAK_MINUTES)

# libFuzzer targets (fuzz/), built with clang under ASan+UBSan in build-fuzz,
# each run for FUZZ_SECONDS on a copy of its seed corpus (fuzz/corpus/<t>);
# plus fuzz/regressions/<t> (inputs that once crashed it); crash inputs go to
# build-fuzz/artifacts/. Fails if any target crashes.
# clang-19: clang-16's __cpp_concepts is too old for libstdc++ 12's <expected>.
FUZZ_SECONDS ?= 60
FUZZ_CLANG ?= 19
FUZZ_BUILD = build-fuzz
FUZZ_PACKAGES = clang-$(FUZZ_CLANG) libclang-rt-$(FUZZ_CLANG)-dev
FUZZ_TARGETS = fuzz_codec_decompress fuzz_codec_roundtrip fuzz_nbd_handshake \
  fuzz_nbd_transmission fuzz_ctl fuzz_writeback_tokens fuzz_algorithm_params \
  fuzz_service_config fuzz_ublk_request fuzz_dictionary

# The same install step as deps, for the fuzzing compiler's packages.
fuzz-deps: deps
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(FUZZ_PACKAGES)"

$(FUZZ_BUILD)/CMakeCache.txt: | fuzz-deps
	CC=clang-$(FUZZ_CLANG) CXX=clang++-$(FUZZ_CLANG) \
	  cmake -S . -B $(FUZZ_BUILD) $(CMAKE_FLAGS) -DZTIER_FUZZ=ON

fuzz: fuzz-deps $(FUZZ_BUILD)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	@mkdir -p $(FUZZ_BUILD)/artifacts; failed=""; \
	for t in $(FUZZ_TARGETS); do \
	  rm -rf $(FUZZ_BUILD)/corpus/$$t; mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  cp fuzz/corpus/$$t/* $(FUZZ_BUILD)/corpus/$$t/; \
	  if [ -d fuzz/regressions/$$t ]; then \
	    cp fuzz/regressions/$$t/* $(FUZZ_BUILD)/corpus/$$t/; fi; \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  if ./$(FUZZ_BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=25 \
	      -rss_limit_mb=2048 -print_final_stats=1 \
	      -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- \
	      $(FUZZ_BUILD)/corpus/$$t >$(FUZZ_BUILD)/$$t.log 2>&1; then \
	    grep -E '^#[0-9]+.*(DONE|exec/s)' $(FUZZ_BUILD)/$$t.log | tail -1; \
	  else \
	    tail -40 $(FUZZ_BUILD)/$$t.log; failed="$$failed $$t"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then \
	  echo "fuzz: crashes in:$$failed (inputs: $(FUZZ_BUILD)/artifacts/)"; exit 1; \
	fi

# The same clang-format on every machine: clang-19's, as the fuzzers' clang.
format:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES=clang-format-$(FUZZ_CLANG)
	clang-format-$(FUZZ_CLANG) -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz $(LOCKS_BUILD)
