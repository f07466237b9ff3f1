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
  libnbd-bin nbdkit fio qemu-utils

.PHONY: all deps build run test test-asan test-tsan bench clean format

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

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-tsan
