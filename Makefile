# LayerFS in C. `make help` lists the targets.

DEBIAN_PACKAGES := build-essential pkg-config clang clang-format clang-tidy cppcheck \
	libsqlite3-dev sqlite3 liburing-dev libssl-dev libjansson-dev libcmocka-dev \
	libfuse3-dev fuse3 fuse-overlayfs libbpf-dev bpftool libelf-dev libmnl-dev git rsync linux-perf
# Build-time libraries, through pkg-config.
PKGS := sqlite3 liburing libcrypto jansson

BUILD ?= build
CC ?= cc
VERSION := 0.1.0
PREFIX ?= /usr/local

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS ?= -O2 -g
INCLUDES := -Iuserspace-lib/include -Iuserspace-lib/src -Icgroup -Ibackends -Ibpf -Icli -Idaemon
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIC $(INCLUDES) \
	$(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS) $(EXTRA_CFLAGS)
LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LDFLAGS += $(EXTRA_LDFLAGS)

LIB_SRC := $(wildcard userspace-lib/src/*.c cgroup/*.c backends/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
DAEMON_SRC := $(wildcard daemon/*.c)
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o) $(BUILD)/bpf/watcher.o
# The BPF watcher: clang builds the program, bpftool its skeleton (Debian 12's bpftool
# 7.1 and libbpf 1.1: the program and loader use nothing newer).
BPF_CLANG ?= clang
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I/usr/include/$(shell $(CC) -dumpmachine) -Ibpf
BPF_LIBS := -lbpf -lelf -lz -lmnl
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS := $(shell pkg-config --libs fuse3 2>/dev/null)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps demo check unit e2e adversarial sanitize lint format bench install clean help
.DELETE_ON_ERROR:
.SECONDARY:

all: $(BUILD)/liblayerfs.a $(BUILD)/liblayerfs.so $(BUILD)/layerfs $(BUILD)/layerfs-daemon $(BUILD)/layerfs.pc \
	$(UNIT_BIN) $(BUILD)/fuse-floor

help:
	@echo "make deps      install the Debian packages the build and the tests need (as root)"
	@echo "make           build liblayerfs (.a, .so, layerfs.pc), the layerfs CLI and the tests"
	@echo "make demo      deps + build + a short end-to-end run of the CLI"
	@echo "make check     deps + build + every test (unit, end-to-end, sanitizers) + lint"
	@echo "make adversarial  the attacks kept as tests (tests/adversarial)"
	@echo "make sanitize  the tests again, built with ASan + UBSan"
	@echo "make lint      clang-format (check), cppcheck and clang-tidy"
	@echo "make bench     the Store against git, Workspaces against ext4, overlayfs, fuse-overlayfs,"
	@echo "               and Sandbox teardown against the cgroup.kill floor"

# Installs only what is missing, so it costs nothing on a ready machine.
deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root to install:" $$missing >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(BUILD)/%.o: %.c $(wildcard userspace-lib/include/*.h userspace-lib/src/*.h cgroup/*.h backends/*.h cli/*.h tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/liblayerfs.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/liblayerfs.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,liblayerfs.so.0 -o $@ $^ $(LDFLAGS) $(LIBS)

$(BUILD)/layerfs.pc: userspace-lib/layerfs.pc.in
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@LIBS@|$(LIBS)|g' $< > $@

$(BUILD)/layerfs: $(CLI_OBJ) $(BUILD)/liblayerfs.a
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS)

$(BUILD)/daemon/%.o: daemon/%.c $(wildcard userspace-lib/include/*.h userspace-lib/src/*.h cgroup/*.h daemon/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@

$(BUILD)/layerfs-daemon: $(DAEMON_OBJ) $(BUILD)/liblayerfs.a
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS) $(FUSE_LIBS) $(BPF_LIBS) -lpthread

# The FUSE floor of bench/workspace_fs.sh: the same transport as the daemon, no work.
$(BUILD)/fuse-floor: bench/fuse_floor.c
	$(CC) $(ALL_CFLAGS) $(FUSE_CFLAGS) -o $@ $< $(LDFLAGS) $(FUSE_LIBS)

$(BUILD)/bpf/watcher.bpf.o: bpf/watcher.bpf.c bpf/watcher.h
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/bpf/watcher.skel.h: $(BUILD)/bpf/watcher.bpf.o
	bpftool gen skeleton $< name watcher_bpf > $@

$(BUILD)/bpf/watcher.o: bpf/watcher.c bpf/watcher.h bpf/bpf_watcher.h $(BUILD)/bpf/watcher.skel.h
	$(CC) $(ALL_CFLAGS) -I$(BUILD)/bpf -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(BUILD)/liblayerfs.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS) -lcmocka

demo: deps all
	BUILD=$(BUILD) tests/e2e/demo.sh

unit: all
	tests/unit/run.sh $(UNIT_BIN)

e2e: all
	BUILD=$(BUILD) tests/e2e/run.sh

# Attacks on the runtime, each kept as a test (tests/adversarial/README.md).
adversarial: all
	BUILD=$(BUILD) tests/e2e/run.sh tests/adversarial

check: deps
	$(MAKE) lint
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) e2e
	$(MAKE) adversarial
	$(MAKE) sanitize

# Reports of detached daemons (whose stderr is a log removed at close) go to files
# beside the build; any report fails the run.
SAN_LOGS := $(CURDIR)/build-san/sanitizer
sanitize: deps
	@rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	ASAN_OPTIONS=log_path=$(SAN_LOGS)/asan UBSAN_OPTIONS=log_path=$(SAN_LOGS)/ubsan \
	$(MAKE) BUILD=build-san EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		EXTRA_LDFLAGS="-fsanitize=address,undefined" CFLAGS="-O1 -g" CRASH_ROUNDS=4 unit e2e adversarial
	@if [ -n "$$(ls -A $(SAN_LOGS))" ]; then head -50 $(SAN_LOGS)/*; echo "sanitize: the reports above failed the run"; exit 1; fi

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
lint: $(BUILD)/bpf/watcher.skel.h
	clang-format --dry-run -Werror $(FORMAT_FILES)
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem -D_GNU_SOURCE $(INCLUDES) -I$(BUILD)/bpf userspace-lib cgroup backends bpf/watcher.c cli daemon tests bench
	clang-tidy --quiet $(LIB_SRC) $(CLI_SRC) $(DAEMON_SRC) bpf/watcher.c bench/fuse_floor.c -- -std=gnu11 -D_GNU_SOURCE $(INCLUDES) -I$(BUILD)/bpf \
		$(shell pkg-config --cflags $(PKGS)) $(FUSE_CFLAGS)

format:
	clang-format -i $(FORMAT_FILES)

bench: deps all
	BUILD=$(BUILD) bench/store_vs_git.sh
	BENCH_BIG_MIB=1024 BUILD=$(BUILD) bench/workspace_fs.sh
	BUILD=$(BUILD) bench/runtime.sh

install: all
	install -Dm755 $(BUILD)/layerfs $(DESTDIR)$(PREFIX)/bin/layerfs
	install -Dm755 $(BUILD)/layerfs-daemon $(DESTDIR)$(PREFIX)/bin/layerfs-daemon
	install -Dm644 $(BUILD)/liblayerfs.a $(DESTDIR)$(PREFIX)/lib/liblayerfs.a
	install -Dm755 $(BUILD)/liblayerfs.so $(DESTDIR)$(PREFIX)/lib/liblayerfs.so
	install -Dm644 userspace-lib/include/layerfs.h $(DESTDIR)$(PREFIX)/include/layerfs.h
	install -Dm644 $(BUILD)/layerfs.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/layerfs.pc

clean:
	rm -rf build build-san
