# ztier: the two set-up commands are `make run` and `make test`.
# Each installs the Debian packages it needs (as root, on Debian 12), builds,
# and then runs the main job or the tests.

JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
CORPUS ?= ../shared/corpus
# CI sets CI=true: warnings are errors there.
ifeq ($(CI),true)
CMAKE_FLAGS += -DZTIER_WERROR=ON
endif

DEB_PACKAGES = build-essential cmake pkg-config libgtest-dev libgmock-dev \
  libbenchmark-dev liblz4-dev libzstd-dev libdeflate-dev liblzo2-dev liburing-dev libssl-dev zstd \
  libnbd-bin nbdkit fio qemu-utils libgnutls28-dev gnutls-bin

.PHONY: all deps build run test test-asan test-tsan bench clean format fuzz fuzz-deps

all: build

# Installs only what is missing; runs apt-get update first when it must.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The main job: a 1 GiB compressed RAM device (zram0, lz4) served over NBD on
# ./ztier.sock, control socket ./ztier.ctl, in the foreground until Ctrl-C.
SERVE_FLAGS ?=
run: build
	./$(BUILD)/ztier serve $(SERVE_FLAGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan:
	$(MAKE) test BUILD=build-asan \
	  CMAKE_FLAGS="$(CMAKE_FLAGS) -DZTIER_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug"

# Unit tests under ThreadSanitizer.
test-tsan:
	$(MAKE) test BUILD=build-tsan \
	  CMAKE_FLAGS="$(CMAKE_FLAGS) -DZTIER_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo"

bench: build
	./$(BUILD)/ztier bench engine --corpus-dir $(CORPUS) --json $(BUILD)/bench-engine.json
	./$(BUILD)/ztier bench nbd --corpus-dir $(CORPUS) --json $(BUILD)/bench-nbd.json
	./$(BUILD)/ztier bench latency --cpus 1 --corpus $(CORPUS)/anon-python.pages.zst --json $(BUILD)/bench-latency-1.json
	./$(BUILD)/ztier bench latency --cpus 2 --corpus $(CORPUS)/anon-python.pages.zst --json $(BUILD)/bench-latency-2.json
	./$(BUILD)/ztier bench writeback --corpus $(CORPUS)/anon-python.pages.zst --json $(BUILD)/bench-writeback.json
	./$(BUILD)/ztier usemem --workers 4 --size 256M --budget 60% --corpus $(CORPUS)/anon-python.pages.zst --compare-batching --json $(BUILD)/usemem.json
	./$(BUILD)/ztier bench readahead --corpus $(CORPUS)/anon-python.pages.zst --json $(BUILD)/bench-readahead.json

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
  fuzz_nbd_transmission fuzz_ctl fuzz_writeback_tokens fuzz_algorithm_params

fuzz-deps: deps
	@missing=""; for p in $(FUZZ_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(FUZZ_BUILD)/CMakeCache.txt: | fuzz-deps
	CC=clang-$(FUZZ_CLANG) CXX=clang++-$(FUZZ_CLANG) \
	  cmake -S . -B $(FUZZ_BUILD) -DZTIER_FUZZ=ON

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

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz
