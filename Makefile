# LayerFS in C. `make help` lists the targets.

# What `make`, `make demo`, `make install` and `make deb` need (the compiler, the libraries
# and tools of the build, and what the demo runs)...
BUILD_PACKAGES := build-essential pkg-config clang bpftool libsqlite3-dev liburing-dev libssl-dev \
	libjansson-dev libfuse3-dev fuse3 libbpf-dev libelf-dev libmnl-dev libcmocka-dev
# ...and what `make check` adds: lint, the tests' tools (pgrep, python3, sqlite3), the
# benchmarks' rivals, the packaging checks (lintian, systemd-analyze, man) and the fresh
# root of fresh-check (debootstrap), and perf (a test counts the commit's tree sorts with a
# uprobe).
CHECK_PACKAGES := clang-format clang-tidy cppcheck sqlite3 procps python3 fuse-overlayfs git rsync \
	lintian systemd man-db debootstrap linux-perf
DEBIAN_PACKAGES := $(BUILD_PACKAGES) $(CHECK_PACKAGES)
# Build-time libraries, through pkg-config. libcrypto's header only: it is not linked but
# loaded when a long input is first hashed (userspace-lib/base/hash.c), so that no process
# pays for loading it at its start.
PKGS := sqlite3 liburing libcrypto jansson libmnl
LINK_PKGS := $(filter-out libcrypto,$(PKGS))

BUILD ?= build
CC ?= cc
VERSION := 0.1.0
SOVERSION := 0
# Where `make install` puts things (DESTDIR is prepended to each). The daemon's place is
# compiled into the library (config.h), so build with the PREFIX you install with.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
BASHCOMPLETIONDIR ?= $(DATADIR)/bash-completion/completions
# systemd reads /usr/local/lib/systemd/system too; Debian packages use /lib/systemd/system.
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
DAEMON_PATH := $(LIBEXECDIR)/layerfs/layerfs-daemon
# The Sandbox init goes beside the daemon: the namespaces runtime looks for it there.
INIT_PATH := $(LIBEXECDIR)/layerfs/layerfs-init

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# Fortified as Debian builds it (dpkg-buildflags), so that what fails its build (an ignored
# result of a call marked warn_unused_result) fails here first; undefined first, since
# some compilers define it already (Ubuntu's gcc: 3), and a redefinition fails -Werror.
CFLAGS ?= -O2 -g -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2
# The layers, bottom to top (docs/architecture.md): each folder's files are compiled with
# the include paths of their own folder and of the layers below it only, so an include
# that goes up a layer fails to compile (tests/lint/layers.sh says so by name first).
# include/layerfs.h, the public header, is everyone's. $(BUILD) holds config.h.
BASE_INC := -Iinclude -Iuserspace-lib/base
STORE_INC := $(BASE_INC) -Iuserspace-lib/store
CGROUP_INC := $(BASE_INC) -Icgroup
# The control socket's protocol (proto/, docs/protocol.md): frames, the call table, the
# codec; the library, the daemon and later the VM agent speak through it.
PROTO_INC := $(BASE_INC) -Iproto -I$(BUILD)
BPF_INC := $(CGROUP_INC) -Ibpf -I$(BUILD)/bpf
BACKENDS_INC := $(CGROUP_INC) -Ibpf -Ibackends
CLIENT_INC := $(STORE_INC) -Icgroup -Ibackends -Iproto -Iuserspace-lib/client -I$(BUILD)
# The FUSE transports (fuse/): mount setup, our own loops and libfuse's, over a table of a
# filesystem's operations; the daemon serves its Workspaces through them, the bench's
# floor (bench/fuse_floor.c) its in-memory files.
FUSE_INC := $(BACKENDS_INC) -Ifuse
DAEMON_INC := $(CLIENT_INC) -Ibpf -I$(BUILD)/bpf -Ifuse -Idaemon
CLI_INC := $(BASE_INC) -Icli -I$(BUILD)
# layerfs-init, the namespaces runtime's Sandbox init: base, the kernel layer's seccomp
# filter and the backends' rtnetlink, nothing of the Store, the client or the daemon.
INIT_INC := $(BACKENDS_INC) -Iinit
# The unit tests and the linters see every layer.
INCLUDES := $(CLIENT_INC) -Ibpf -I$(BUILD)/bpf -Ifuse -Idaemon -Icli -Iinit

# The libraries' flags come from pkg-config, and pkg-config knows them only once their
# -dev packages are installed. Reading them when this file is read (as `LIBS :=
# $(shell pkg-config ...)` did) gave an empty link line on a bare machine, because `deps`
# ran later. So they live in $(BUILD)/config.mk, which make builds (installing the missing
# packages as root, or saying which are missing otherwise) and then restarts with,
# before any target, whatever the goals and their order.
CONFIG_FREE_GOALS := clean help deps format fresh-check deb uninstall print-version
ifneq ($(filter-out $(CONFIG_FREE_GOALS),$(or $(MAKECMDGOALS),all)),)
include $(BUILD)/config.mk
endif

ALL_CFLAGS = -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIC -fvisibility=hidden $(LAYER_INC) $(PKG_CFLAGS) $(CFLAGS) $(EXTRA_CFLAGS)
LIBS := $(PKG_LIBS)
LDFLAGS += $(EXTRA_LDFLAGS)

LIB_SRC := $(wildcard userspace-lib/base/*.c userspace-lib/store/*.c cgroup/*.c backends/*.c backends/*/*.c userspace-lib/client/*.c proto/*.c) \
	bpf/watcher_set.c
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
FUSE_SRC := $(wildcard fuse/*.c)
FUSE_OBJ := $(FUSE_SRC:%.c=$(BUILD)/%.o)
DAEMON_SRC := $(wildcard daemon/*.c)
BPF_LOADER_SRC := bpf/watcher.c bpf/watcher_load.c bpf/watcher_offsets.c
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o) $(BPF_LOADER_SRC:%.c=$(BUILD)/%.o)
INIT_SRC := $(wildcard init/*.c)
INIT_OBJ := $(INIT_SRC:%.c=$(BUILD)/%.o)
# The BPF watcher: clang builds the program (with libbpf-dev's bpf_helpers.h, Debian 12's
# libbpf 1.1), and watcher-gen, a host tool linked with libelf, turns the object into a
# header of its instructions, map loads and .rodata layout, which the daemon's loader
# (bpf/watcher_load.c) compiles in: the daemon loads it in plain bpf(2) and links no
# libbpf. bpftool is the tests' (test_watcher_root.sh lists the objects with it).
BPF_CLANG ?= clang
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I/usr/include/$(CC_TRIPLET) -Ibpf
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# Made at build time from one source each: layerfs(1) from `layerfs --help` and every
# command's --help, layerfs-daemon(8) from the daemon's --help, liblayerfs(3) from
# layerfs.h and the README's C example (packaging/man/).
MAN_PAGES := $(BUILD)/man/layerfs.1 $(BUILD)/man/layerfs-daemon.8 $(BUILD)/man/liblayerfs.3
UNITS := $(BUILD)/systemd/layerfs-reclaim.service $(BUILD)/systemd/layerfs-delegate.conf
INSTALLED := $(BUILD)/liblayerfs.a $(BUILD)/liblayerfs.so $(BUILD)/layerfs $(BUILD)/layerfs-daemon $(BUILD)/layerfs-init \
	$(BUILD)/layerfs.pc $(MAN_PAGES) $(UNITS)

.PHONY: all deps demo check unit e2e e2e-uring load adversarial packaging fresh-check sanitize lint format bench bench-scale \
	install uninstall deb print-version clean help FORCE
.DELETE_ON_ERROR:
.SECONDARY:

all: $(INSTALLED) $(UNIT_BIN) $(BUILD)/fuse-floor $(BUILD)/lifecycle-floor $(BUILD)/lifecycle-lib $(BUILD)/export-floor

help:
	@echo "make deps      install the Debian packages the build and the tests need (as root)"
	@echo "make           build liblayerfs (.a, .so, layerfs.pc), the CLI, the daemon, man pages, tests"
	@echo "make demo      build (installing the packages it needs) + a short end-to-end run of the CLI"
	@echo "make check     deps + build + every test (unit, end-to-end, load, adversarial, packaging,"
	@echo "               sanitizers, fresh-check) + lint"
	@echo "make adversarial  the attacks kept as tests (tests/adversarial)"
	@echo "make load      Sandboxes at once under SIGKILLs and reclaim, nothing left after (tests/load;"
	@echo "               LOAD_SANDBOXES=32 LOAD_WORKSPACES=4 LOAD_ROUNDS=4 for the full size)"
	@echo "make packaging make install's layout, man pages against --help, completion, systemd units,"
	@echo "               make deb under lintian (tests/packaging)"
	@echo "make fresh-check  the README's first command in a fresh Debian 12 root, then the .deb"
	@echo "               installed, used and removed there (tests/fresh)"
	@echo "make sanitize  the tests again, built with ASan + UBSan"
	@echo "make lint      the layer rule of the includes (tests/lint), clang-format (check), cppcheck, clang-tidy"
	@echo "make bench     the Store against git, Workspaces against ext4, overlayfs, fuse-overlayfs,"
	@echo "               and Sandbox teardown against the cgroup.kill floor, then bench-scale"
	@echo "make bench-scale  a generated project of SCALE_FILES (1000000) files beside git: import,"
	@echo "               status, commit, diff, export, gc, with peak RSS (bench/scale.sh; about an hour)"
	@echo "make install   everything under PREFIX (default /usr/local), DESTDIR prepended; uninstall"
	@echo "make deb       build/deb/: layerfs, liblayerfs$(SOVERSION) and liblayerfs-dev .deb packages"

# $(call install_packages,PACKAGES): installs those not installed, as root; otherwise names
# them and says how to install them. Costs nothing on a ready machine.
define install_packages
missing=$$(for p in $(1); do \
	dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
done); \
if [ -n "$$missing" ]; then \
	if [ "$$(id -u)" != 0 ]; then \
		echo "make: these Debian packages are missing:" $$missing >&2; \
		echo "make: install them as root with: apt-get install" $$missing >&2; \
		echo "make: (or run 'make deps' as root, which installs what 'make check' needs too)" >&2; \
		exit 1; \
	fi; \
	echo "installing:" $$missing; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
fi
endef

deps:
	@$(call install_packages,$(DEBIAN_PACKAGES))

# What pkg-config and the compiler say, once the build's packages are there.
$(BUILD)/config.mk: Makefile
	@$(call install_packages,$(BUILD_PACKAGES))
	@mkdir -p $(@D)
	@set -e; pkg=$$(pkg-config --cflags $(PKGS)); libs=$$(pkg-config --libs $(LINK_PKGS)); \
	fuse=$$(pkg-config --cflags fuse3); fuse_libs=$$(pkg-config --libs fuse3); \
	triplet=$$($(CC) -dumpmachine); \
	pkg=$$(echo $$pkg); libs=$$(echo $$libs); fuse=$$(echo $$fuse); fuse_libs=$$(echo $$fuse_libs); \
	printf 'PKG_CFLAGS := %s\nPKG_LIBS := %s\nFUSE_CFLAGS := %s\nFUSE_LIBS := %s\nCC_TRIPLET := %s\n' \
		"$$pkg" "$$libs" "$$fuse" "$$fuse_libs" "$$triplet" >$@.tmp
	@mv $@.tmp $@

# What the build was configured with, for the code; rewritten only when it changes, so
# that a `make PREFIX=/usr` rebuilds what depends on it and nothing else does.
$(BUILD)/config.h: FORCE
	@mkdir -p $(@D)
	@printf '/* Made by the Makefile. */\n#define LAYERFS_VERSION "%s"\n#define LAYERFS_DAEMON_PATH "%s"\n' \
		'$(VERSION)' '$(DAEMON_PATH)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
FORCE:
$(BUILD)/dirs: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(VERSION)' '$(BINDIR)' '$(LIBDIR)' '$(INCLUDEDIR)' '$(DAEMON_PATH)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi

HEADERS := $(wildcard include/*.h userspace-lib/*/*.h cgroup/*.h bpf/*.h backends/*.h backends/*/*.h proto/*.h fuse/*.h cli/*.h tests/unit/*.h)
# Each folder's include paths (the layers above).
$(BUILD)/userspace-lib/base/%.o: LAYER_INC = $(BASE_INC)
$(BUILD)/userspace-lib/store/%.o: LAYER_INC = $(STORE_INC)
$(BUILD)/cgroup/%.o: LAYER_INC = $(CGROUP_INC)
$(BUILD)/bpf/%.o: LAYER_INC = $(BPF_INC)
$(BUILD)/backends/%.o: LAYER_INC = $(BACKENDS_INC)
$(BUILD)/proto/%.o: LAYER_INC = $(PROTO_INC)
$(BUILD)/userspace-lib/client/%.o: LAYER_INC = $(CLIENT_INC)
$(BUILD)/fuse/%.o: LAYER_INC = $(FUSE_INC)
$(BUILD)/daemon/%.o: LAYER_INC = $(DAEMON_INC)
$(BUILD)/cli/%.o: LAYER_INC = $(CLI_INC)
$(BUILD)/init/%.o: LAYER_INC = $(INIT_INC)
$(BUILD)/tests/%.o: LAYER_INC = $(INCLUDES)
$(BUILD)/bench/fuse_floor.o: LAYER_INC = $(FUSE_INC)
$(BUILD)/lifecycle-floor: LAYER_INC = $(BASE_INC)
$(BUILD)/export-floor: LAYER_INC = $(BASE_INC)
$(BUILD)/lifecycle-lib: LAYER_INC = -Iinclude
$(BUILD)/%.o: %.c $(HEADERS) $(BUILD)/config.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/liblayerfs.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports exactly the functions of layerfs.h: everything is compiled
# with hidden visibility and layerfs.h marks its declarations LFS_PUBLIC
# (tests/packaging/test_exports.sh compares the two). It names every library it needs
# (-z defs). The CLI, the daemon and the unit tests link liblayerfs.a, whose internal
# functions they may use.
$(BUILD)/api-functions: include/layerfs.h packaging/api-functions.sh
	sh packaging/api-functions.sh $< >$@
$(BUILD)/liblayerfs.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,liblayerfs.so.$(SOVERSION) -Wl,-z,defs -o $@ $(LIB_OBJ) $(LDFLAGS) $(LIBS)

$(BUILD)/layerfs.pc: userspace-lib/layerfs.pc.in $(BUILD)/dirs $(BUILD)/config.mk
	sed -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
		-e 's|@LIBS@|$(strip $(LIBS))|g' $< >$@

$(BUILD)/layerfs: $(CLI_OBJ) $(BUILD)/liblayerfs.a
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS)

$(BUILD)/daemon/%.o: daemon/%.c $(HEADERS) $(wildcard daemon/*.h) $(BUILD)/config.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@

$(BUILD)/fuse/%.o: fuse/%.c $(HEADERS) $(BUILD)/config.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@

$(BUILD)/layerfs-daemon: $(DAEMON_OBJ) $(FUSE_OBJ) $(BUILD)/liblayerfs.a
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS) $(FUSE_LIBS) -lpthread

# Of liblayerfs.a it takes only the objects it calls (base, seccomp, rtnetlink), and of
# the libraries only libmnl: its exec is most of what a Sandbox's create adds to native's.
$(BUILD)/layerfs-init: $(INIT_OBJ) $(BUILD)/liblayerfs.a
	$(CC) -o $@ $^ $(LDFLAGS) -Wl,--as-needed $(LIBS)

$(BUILD)/man/layerfs.1: $(BUILD)/layerfs packaging/man/help2man.sh
	@mkdir -p $(@D)
	sh packaging/man/help2man.sh $< 1 >$@
$(BUILD)/man/layerfs-daemon.8: $(BUILD)/layerfs-daemon packaging/man/help2man.sh
	@mkdir -p $(@D)
	sh packaging/man/help2man.sh $< 8 >$@
$(BUILD)/man/liblayerfs.3: include/layerfs.h README.md packaging/man/header2man.sh $(BUILD)/api-functions
	@mkdir -p $(@D)
	sh packaging/man/header2man.sh $< README.md $(VERSION) >$@

$(BUILD)/systemd/%: packaging/systemd/%.in $(BUILD)/dirs
	@mkdir -p $(@D)
	sed -e 's|@BINDIR@|$(BINDIR)|g' $< >$@

# The FUSE floor of bench/workspace_fs.sh: the daemon's transports (fuse/), mount setup
# and dispatch, serving an in-memory filesystem that does no work.
$(BUILD)/bench/fuse_floor.o: bench/fuse_floor.c $(HEADERS) $(BUILD)/config.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@
$(BUILD)/fuse-floor: $(BUILD)/bench/fuse_floor.o $(FUSE_OBJ) $(BUILD)/liblayerfs.a
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS) $(FUSE_LIBS) -lpthread

# The kernel's floors of bench/lifecycle.sh: posix_spawn, clone3 into a cgroup, cgroup.kill.
$(BUILD)/lifecycle-floor: bench/lifecycle_floor.c bench/samples.h
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LDFLAGS)
# The kernel's floor of an export (bench/export_floor.sh): 10,000 creates and writes with
# plain system calls, threads or io_uring chains, and nothing of the Store.
$(BUILD)/export-floor: bench/export_floor.c bench/samples.h
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LDFLAGS) -luring -lpthread
# The same lifecycle through the library from one process, as a client sees it: only
# layerfs.h (the public header), linked like the CLI.
$(BUILD)/lifecycle-lib: bench/lifecycle_lib.c bench/samples.h include/layerfs.h $(BUILD)/liblayerfs.a
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/liblayerfs.a $(LDFLAGS) $(LIBS)

$(BUILD)/bpf/watcher.bpf.o: bpf/watcher.bpf.c bpf/watcher.h
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/watcher-gen: bpf/watcher_gen.c bpf/watcher_obj.h
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -Ibpf $(CFLAGS) -o $@ $< -lelf

$(BUILD)/bpf/watcher_obj.gen.h: $(BUILD)/bpf/watcher.bpf.o $(BUILD)/watcher-gen
	$(BUILD)/watcher-gen $< >$@.tmp && mv $@.tmp $@

$(BUILD)/bpf/watcher_load.o: $(BUILD)/bpf/watcher_obj.gen.h

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(BUILD)/liblayerfs.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS) -lcmocka

demo: all
	BUILD=$(BUILD) tests/e2e/demo.sh

unit: all
	tests/unit/run.sh $(UNIT_BIN)

# Every test runs on the default runtime (namespaces where the host can make them); the
# ones whose runtime changes what they check run on native as well, the runtime of hosts
# without namespaces.
# test_runtime.sh runs the whole runtime contract once per watcher in TEST_WATCHERS (all
# three when unset, a minute or more each). make check runs each watcher once in the
# normal build: bpf, the one every other test uses, in the default pass; the fallbacks,
# proc and cgroup, in the native pass (where it ran bpf again). The sanitizer build runs
# bpf (SANITIZE_WATCHERS). test_watcher.sh runs all three in every pass.
E2E_WATCHERS ?= bpf
NATIVE_WATCHERS ?= proc cgroup
NATIVE_E2E := test_runtime.sh test_watcher.sh test_workspace_posix.sh test_limits.sh test_workspace.sh \
	test_exec_start_failure.sh
NATIVE_ADVERSARIAL := test_fuse_trap.sh test_home_trust.sh test_terminal.sh test_text_output.sh \
	test_private_files.sh test_command_mounts.sh test_hidden_process.sh test_teardown_truth.sh \
	test_caller_state.sh test_cwd_escape.sh
# The Workspace's tests run on libfuse's FUSE loop (fuse/fuse_libfuse.c, the fallback
# where our own cannot mount) as well as on our own (the default, fuse/fuse_dev.c, with
# passthrough where the kernel offers it); test_workspace.sh and the POSIX checks once more
# on ours without passthrough (FUSE_DEV_NO_PASSTHROUGH_E2E: without passthrough only READ
# and WRITE are served differently, which the crash test does not look at).
# test_workspace_passthrough.sh picks its own. The sanitizer build splits the Workspace's
# tests between the libfuse pass and the dev pass without passthrough instead of running
# them in both (SANITIZE_FUSE_*, by `make sanitize`).
FUSE_LIBFUSE_E2E := test_workspace.sh test_workspace_posix.sh test_workspace_crash.sh test_dir_nlink.sh \
	test_changed_dir_memory.sh
FUSE_DEV_NO_PASSTHROUGH_E2E := test_workspace.sh test_workspace_posix.sh
# The same tests once more over io_uring rings (fuse/fuse_uring.c). The kernel offers
# them only while its switch, one for the whole host, is on: the pass turns it on and
# gives it back as it found it, whether the pass fails or is interrupted; a kernel
# without the switch leaves the pass out. About 70 s here; URING_PASSES=no leaves it
# out (the sanitizer build: test_workspace_uring.sh of the default pass runs the rings'
# code there, and the pass would cost another minute and a half under ASan).
FUSE_URING_E2E := test_workspace.sh test_workspace_posix.sh test_workspace_crash.sh
FUSE_URING_NO_PASSTHROUGH_E2E := test_workspace.sh test_workspace_posix.sh
FUSE_URING_SWITCH := /sys/module/fuse/parameters/enable_uring
URING_PASSES ?= yes
# $(call uring_pass,TESTS[,MORE ENVIRONMENT])
uring_pass = @if [ "$(URING_PASSES)" != yes ]; then echo "the io_uring pass of $(firstword $(1)) left out (URING_PASSES=$(URING_PASSES))"; \
	elif [ -w $(FUSE_URING_SWITCH) ]; then \
	was=$$(cat $(FUSE_URING_SWITCH)); trap 'echo $$was >$(FUSE_URING_SWITCH)' EXIT; trap 'exit 130' INT TERM; \
	echo 1 >$(FUSE_URING_SWITCH); $(call run_pass,LAYERFS_FUSE_TRANSPORT=uring $(2),$(1)); \
	else echo "the io_uring pass of $(firstword $(1)) left out: no $(FUSE_URING_SWITCH)"; fi
FUSE_LIBFUSE_ADVERSARIAL := test_fuse_trap.sh test_shared_mmap.sh test_hard_links.sh test_disk_full.sh \
	test_daemon_fds.sh test_deep_tree.sh test_commit_big_directory.sh test_long_commit.sh \
	test_setid_write.sh test_evict_storm.sh
# NATIVE_PASSES=no leaves the native passes out: the sanitizer build runs the code that
# differs between runtimes (and every line of the FUSE loops) in the default and FUSE
# passes, and its native passes cost eight minutes of make check's thirty.
NATIVE_PASSES ?= yes
# Tests at once in each pass (tests/e2e/run.sh): each has its own home and cgroup root, and
# most of a test's time is one process waiting on another: three at once keep 2 CPUs
# busy (a quiet make check took 17 minutes at 3; a CI run took 31 at 2).
TEST_JOBS ?= 3
# Every pass runs even when one before it failed, so that one failure hides no other; the
# target fails at the end, naming the passes that failed.
FAILED_PASSES = $(BUILD)/failed-passes
run_pass = BUILD=$(BUILD) TEST_JOBS=$(TEST_JOBS) $(1) tests/e2e/run.sh $(2) || \
	echo "$(or $(firstword $(2)),tests/e2e) $(or $(strip $(1)),(default))" >>$(FAILED_PASSES)
native_pass = $(if $(filter yes,$(NATIVE_PASSES)),$(call run_pass,LAYERFS_RUNTIME=native TEST_WATCHERS="$(NATIVE_WATCHERS)",$(1)),@echo "the native pass of $(firstword $(1)) left out (NATIVE_PASSES=$(NATIVE_PASSES))")
end_passes = @if [ -s $(FAILED_PASSES) ]; then echo "failed passes:"; sed 's/^/  /' $(FAILED_PASSES); rm -f $(FAILED_PASSES); exit 1; fi
e2e: all
	@rm -f $(FAILED_PASSES)
	$(call run_pass,TEST_WATCHERS=$(E2E_WATCHERS),)
	$(call native_pass,tests/e2e $(NATIVE_E2E))
	$(call run_pass,LAYERFS_FUSE_TRANSPORT=libfuse,tests/e2e $(FUSE_LIBFUSE_E2E))
	$(call run_pass,LAYERFS_FUSE_TRANSPORT=dev LAYERFS_FUSE_PASSTHROUGH=0,tests/e2e $(FUSE_DEV_NO_PASSTHROUGH_E2E))
	$(call uring_pass,tests/e2e $(FUSE_URING_E2E))
	$(call uring_pass,tests/e2e $(FUSE_URING_NO_PASSTHROUGH_E2E),LAYERFS_FUSE_PASSTHROUGH=0)
	$(end_passes)

# The io_uring passes alone.
e2e-uring: all
	@rm -f $(FAILED_PASSES)
	$(call uring_pass,tests/e2e $(FUSE_URING_E2E))
	$(call uring_pass,tests/e2e $(FUSE_URING_NO_PASSTHROUGH_E2E),LAYERFS_FUSE_PASSTHROUGH=0)
	$(end_passes)

# Sandboxes at once under faults: SIGKILLed daemons, commands and CLI calls, reclaim
# meanwhile; then nothing left and every commit whole (tests/load/README.md). make check runs
# it small; the full size is `make load LOAD_SANDBOXES=32 LOAD_WORKSPACES=4 LOAD_ROUNDS=4`.
LOAD_SANDBOXES ?= 4
LOAD_WORKSPACES ?= 2
LOAD_ROUNDS ?= 3
load: all
	@rm -f $(FAILED_PASSES)
	$(call run_pass,LOAD_SANDBOXES=$(LOAD_SANDBOXES) LOAD_WORKSPACES=$(LOAD_WORKSPACES) LOAD_ROUNDS=$(LOAD_ROUNDS) $(if $(LOAD_SEED),LOAD_SEED=$(LOAD_SEED)),tests/load)
	$(end_passes)

# Attacks on the runtime, each kept as a test (tests/adversarial/README.md).
adversarial: all
	@rm -f $(FAILED_PASSES)
	$(call run_pass,,tests/adversarial)
	$(call native_pass,tests/adversarial $(NATIVE_ADVERSARIAL))
	$(call run_pass,LAYERFS_FUSE_TRANSPORT=libfuse,tests/adversarial $(FUSE_LIBFUSE_ADVERSARIAL))
	$(end_passes)

# make install's layout, the man pages against --help, the completion, the systemd units
# and make deb under lintian (tests/packaging/README.md).
packaging: all
	BUILD=$(BUILD) tests/e2e/run.sh tests/packaging

# The README's first command in a fresh Debian 12 root (tests/fresh/README.md).
fresh-check:
	@$(call install_packages,debootstrap git)
	bash tests/fresh/fresh_check.sh

# Every phase after the build runs even when one before it failed (a CI run shows every
# failure, not the first); check fails at the end naming the phases that failed. Each
# phase's wall time is printed as it ends ("make check: e2e took 512 s") and all of them
# again at the end, so that a run shows where its time went.
CHECK_PHASES := unit e2e load adversarial packaging sanitize fresh-check
check: deps
	@failed=""; times=""; check_start=$$(date +%s); \
	for phase in all lint $(CHECK_PHASES); do \
		start=$$(date +%s); \
		$(MAKE) $$phase || failed="$$failed $$phase"; \
		took="make check: $$phase took $$(($$(date +%s) - start)) s"; echo "$$took"; times="$$times$$took\n"; \
		if [ $$phase = all ] && [ -n "$$failed" ]; then echo "make check: the build failed"; exit 1; fi; \
	done; \
	printf "$$times"; echo "make check: $$(($$(date +%s) - check_start)) s in all"; \
	if [ -n "$$failed" ]; then echo "make check: failed phases:$$failed"; exit 1; fi; \
	echo "make check: every phase passed ($(strip lint $(CHECK_PHASES)))"

# Reports of detached daemons (whose stderr is a log removed at close) go to files
# beside the build; any report fails the run.
# The sanitizer build looks for memory errors and undefined behaviour in code the tests
# run, at three to five times the normal build's cost: what it runs again is the code,
# with less of what is only volume or repetition (docs/testing.md, "What make check runs").
# - The dev loop's Workspace tests split between its two passes: test_workspace_posix.sh
#   and test_workspace_crash.sh with passthrough, test_workspace.sh (most data read and
#   written) without, so that the daemon serves READ and WRITE on our loop under ASan; the
#   normal build runs each in both.
# - Fewer rounds: CRASH_ROUNDS=4 (each kill step once), LOAD_ROUNDS=2, FSOPS_OPS=2000
#   random operations in test_workspace.sh (8000), checked every 500 as before.
# - test_sparse.sh with a 640 MiB sparse file (SPARSE_UNIT_MIB=128) for 5 GiB: every check
#   of holes, extents and offsets the same; past 4 GiB in the normal build.
# - The attacks of issue 13 at smaller sizes that still fail on the old code: a commit of
#   2,000 files in one directory (20,000; more than the 4 tree sorts allowed), walks of
#   10,000 and 20,000 levels (40,000 and 100,000 in the normal build, which proves the
#   walks keep no stack per level and no path per level in memory), a 4 MiB file with 201 names (16 MiB; read 201 times
#   or once is still told apart).
# Its phases all run (make -k) when one fails: a failed e2e pass no longer hides what the
# sanitizers would find in load and adversarial.
SAN_LOGS := $(CURDIR)/build-san/sanitizer
SANITIZE_WATCHERS := bpf
SANITIZE_FUSE_LIBFUSE_E2E := test_workspace_posix.sh test_workspace_crash.sh
SANITIZE_FUSE_DEV_NO_PASSTHROUGH_E2E := test_workspace.sh
sanitize: deps
	@rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	ASAN_OPTIONS=log_path=$(SAN_LOGS)/asan:log_exe_name=1 UBSAN_OPTIONS=log_path=$(SAN_LOGS)/ubsan:log_exe_name=1 \
	CRASH_ROUNDS=4 FSOPS_OPS=2000 SPARSE_UNIT_MIB=128 \
	BIG_DIRECTORY_FILES=2000 DEEP_TREE_DEPTH=10000 DEEP_STORE_DEPTH=20000 HARD_LINKS_MIB=4 \
	$(MAKE) -k BUILD=build-san EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		EXTRA_LDFLAGS="-fsanitize=address,undefined" CFLAGS="-O1 -g" NATIVE_PASSES=no URING_PASSES=no LOAD_ROUNDS=2 \
		E2E_WATCHERS=$(SANITIZE_WATCHERS) FUSE_LIBFUSE_E2E="$(SANITIZE_FUSE_LIBFUSE_E2E)" \
		FUSE_DEV_NO_PASSTHROUGH_E2E="$(SANITIZE_FUSE_DEV_NO_PASSTHROUGH_E2E)" \
		unit e2e load adversarial || tests_failed=1; \
	empty=$$(find $(SAN_LOGS) -type f -empty); \
	if [ -n "$$empty" ]; then echo "sanitize: empty report files (their writers died before they wrote; docs/testing.md):"; \
		ls -l $$empty; fi; \
	if [ -n "$$(find $(SAN_LOGS) -type f ! -empty)" ]; then find $(SAN_LOGS) -type f ! -empty -exec head -50 {} +; \
		echo "sanitize: the reports above (named by program and pid) failed the run"; exit 1; fi; \
	exit $${tests_failed:-0}

# clang-tidy and cppcheck on every core: lint is a tenth of make check.
LINT_JOBS ?= $(shell nproc)
TIDY_FLAGS = -std=gnu11 -D_GNU_SOURCE $(INCLUDES) $(PKG_CFLAGS) $(FUSE_CFLAGS)
# A checkout without git (a `git archive` of it) lints the same files.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || \
	find include userspace-lib proto fuse cli daemon init cgroup backends bpf tests bench -name '*.[ch]' | sort)
lint: $(BUILD)/bpf/watcher_obj.gen.h $(BUILD)/config.h
	bash tests/lint/layers.sh
	bash tests/lint/test_layers.sh
	clang-format --dry-run -Werror $(FORMAT_FILES)
	cppcheck -j $(LINT_JOBS) --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem -D_GNU_SOURCE $(INCLUDES) include userspace-lib proto cgroup backends $(BPF_LOADER_SRC) bpf/watcher_set.c bpf/watcher_gen.c fuse cli daemon init tests bench
	printf '%s\n' $(LIB_SRC) $(CLI_SRC) $(FUSE_SRC) $(DAEMON_SRC) $(INIT_SRC) $(BPF_LOADER_SRC) bpf/watcher_gen.c bench/fuse_floor.c bench/lifecycle_floor.c bench/lifecycle_lib.c bench/export_floor.c | \
		xargs -P $(LINT_JOBS) -n 16 sh -c 'clang-tidy --quiet "$$@" -- $(TIDY_FLAGS)' clang-tidy

format:
	clang-format -i $(FORMAT_FILES)

bench: deps all
	BUILD=$(BUILD) bench/store_vs_git.sh
	BENCH_BIG_MIB=1024 BUILD=$(BUILD) bench/workspace_fs.sh
	BUILD=$(BUILD) bench/runtime.sh
	BUILD=$(BUILD) bench/watcher.sh
	BUILD=$(BUILD) bench/lifecycle.sh
	$(MAKE) bench-scale

# The 1,000,000-file project of issue 18 (bench/README.md); SCALE_FILES=100000 for a quick look.
SCALE_FILES ?= 1000000
bench-scale: deps all
	BUILD=$(BUILD) bench/scale.sh $(SCALE_FILES)

# Every file with its directory made; the .so as liblayerfs.so.VERSION with the soname
# link (.so.0, what programs load) and the link-time link (.so, in -dev packages).
install: $(INSTALLED)
	install -Dm755 $(BUILD)/layerfs $(DESTDIR)$(BINDIR)/layerfs
	install -Dm755 $(BUILD)/layerfs-daemon $(DESTDIR)$(DAEMON_PATH)
	install -Dm755 $(BUILD)/layerfs-init $(DESTDIR)$(INIT_PATH)
	install -Dm644 $(BUILD)/liblayerfs.so $(DESTDIR)$(LIBDIR)/liblayerfs.so.$(VERSION)
	ln -sfn liblayerfs.so.$(VERSION) $(DESTDIR)$(LIBDIR)/liblayerfs.so.$(SOVERSION)
	ln -sfn liblayerfs.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/liblayerfs.so
	install -Dm644 $(BUILD)/liblayerfs.a $(DESTDIR)$(LIBDIR)/liblayerfs.a
	install -Dm644 include/layerfs.h $(DESTDIR)$(INCLUDEDIR)/layerfs.h
	install -Dm644 $(BUILD)/layerfs.pc $(DESTDIR)$(LIBDIR)/pkgconfig/layerfs.pc
	install -Dm644 $(BUILD)/man/layerfs.1 $(DESTDIR)$(MANDIR)/man1/layerfs.1
	install -Dm644 $(BUILD)/man/layerfs-daemon.8 $(DESTDIR)$(MANDIR)/man8/layerfs-daemon.8
	install -Dm644 $(BUILD)/man/liblayerfs.3 $(DESTDIR)$(MANDIR)/man3/liblayerfs.3
	install -Dm644 packaging/bash-completion/layerfs $(DESTDIR)$(BASHCOMPLETIONDIR)/layerfs
	install -Dm644 $(BUILD)/systemd/layerfs-reclaim.service $(DESTDIR)$(SYSTEMDUNITDIR)/layerfs-reclaim.service
	install -Dm644 $(BUILD)/systemd/layerfs-delegate.conf $(DESTDIR)$(DATADIR)/layerfs/systemd/layerfs-delegate.conf
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/layerfs $(DESTDIR)$(DAEMON_PATH) $(DESTDIR)$(INIT_PATH) $(DESTDIR)$(LIBDIR)/liblayerfs.so* \
		$(DESTDIR)$(LIBDIR)/liblayerfs.a $(DESTDIR)$(INCLUDEDIR)/layerfs.h $(DESTDIR)$(LIBDIR)/pkgconfig/layerfs.pc \
		$(DESTDIR)$(MANDIR)/man1/layerfs.1 $(DESTDIR)$(MANDIR)/man8/layerfs-daemon.8 \
		$(DESTDIR)$(MANDIR)/man3/liblayerfs.3 $(DESTDIR)$(BASHCOMPLETIONDIR)/layerfs \
		$(DESTDIR)$(SYSTEMDUNITDIR)/layerfs-reclaim.service $(DESTDIR)$(DATADIR)/layerfs/systemd/layerfs-delegate.conf
	-rmdir $(DESTDIR)$(LIBEXECDIR)/layerfs $(DESTDIR)$(DATADIR)/layerfs/systemd $(DESTDIR)$(DATADIR)/layerfs 2>/dev/null

# Debian packages, built as Debian builds them (dpkg-buildflags) in build/deb/obj, in
# build/deb/ (packaging/deb/README.md).
deb:
	sh packaging/deb/mkdeb.sh $(BUILD)/deb

print-version:
	@echo $(VERSION)

clean:
	rm -rf build build-san
