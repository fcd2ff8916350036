# SPDX-License-Identifier: MIT
# Spyre open driver stack.  `make demo` and `make test` are all a newcomer
# needs: both set up the machine (apt, caches) and build what is missing.
# The kernel module itself is built by Kbuild (see the top-level Kbuild).

SHELL := /bin/bash
.PHONY: all setup build demo test bench soak soak-stress soak-reset soak-fault \
	soak-kill soak-unplug soak-fuzz soak-fuzz-card check clean debug-kernel \
	install uninstall install-dkms uninstall-dkms

# KERNEL=debug: every target runs on the debug build of the guest kernel
# (KASAN, lockdep, kmemleak, fault injection; `make debug-kernel` builds
# it, about 30 minutes on 2 cores, cached), e.g. `make test KERNEL=debug`.
ifeq ($(KERNEL),debug)
export SPYRE_KERNEL := debug
build: debug-kernel
else ifneq ($(KERNEL),)
$(error KERNEL=$(KERNEL): leave it unset (Debian's kernel) or say debug)
endif

all: build

setup:
	scripts/setup.sh

build: setup
	scripts/build.sh

# (without the PyTorch backend: spyre-demo is C)
demo: setup
	scripts/build.sh qemu module user initramfs >/dev/null
	scripts/vm.sh run --no-build -- spyre-demo

# greedy decoding with a small transformer on the card, eager and
# torch.compile(backend="spyre"), checked against the CPU
.PHONY: demo-torch
demo-torch: build
	scripts/demo-torch.sh

test: build
	scripts/run-tests.sh

# PyTorch's whole OpInfo database on the card against the CPU (not part of
# `make test`: about half an hour under TCG): a table per op family and
# dtype of samples passed on the card / through the CPU fallback / refused
# by design / failed (torch_spyre/tests/test_opinfo.py --full).  The hang
# detector's job timeout (wall time: a batch of up to 256 commands that a
# loaded 2-CPU host emulates slowly) is raised to its 60 s maximum; each
# command keeps the card's own 5 s budget of host CPU time.
.PHONY: test-opinfo
test-opinfo: build
	scripts/vm.sh run --no-build --torch --cards 1 --timeout 5400 \
		--module-args job_timeout_ms=60000 \
		--copy torch_spyre/tests/test_opinfo.py \
		--copy torch_spyre/tests/ktap.py -- \
		python3 test_opinfo.py --full $(OPINFO_ARGS)

bench: build
	scripts/run-bench.sh

# `make bench` BENCH_RUNS times (default 3), then each ratio's median over
# those runs (scripts/bench-report.py --median): the figures to report,
# since one run's ratios move with what else the host does.
BENCH_RUNS ?= 3
.PHONY: bench-median
bench-median: build
	d=$$(bash -c '. scripts/lib.sh && echo "$$SPYRE_BUILD"')/bench; \
	runs=(); for i in $$(seq $(BENCH_RUNS)); do \
		scripts/run-bench.sh || exit; \
		runs+=("$$(readlink -f "$$d/latest")/bench.json"); \
	done; python3 scripts/bench-report.py --median "$${runs[@]}"

# A traced run on 2 cards (CMD, default spyre-demo) as a Perfetto timeline:
# $(SPYRE_BUILD)/timeline/timeline.json and .png (docs/spyre-tracing.rst).
.PHONY: timeline
timeline: build
	d=$$(bash -c '. scripts/lib.sh && echo "$$SPYRE_BUILD"')/timeline; \
	rm -rf "$$d" && scripts/vm.sh run --no-build --cards 2 --trace "$$d" \
		-- $${CMD:-spyre-demo} && scripts/trace-timeline.py "$$d"

soak: soak-stress soak-reset soak-fault soak-kill soak-unplug soak-fuzz \
	soak-fuzz-card

soak-stress: build
	scripts/vm.sh run --no-build --cards 2 --timeout 1200 -- spyre-selftests soak

# 600 PCIe function resets of a card under GEMM load on 2 vCPUs, and a 60 s
# race of resets with device-memory allocations (root: sysfs reset).
# SPYRE_SOAK_RUNS=N repeats it in N fresh guests.
soak-reset: build
	for i in $$(seq $${SPYRE_SOAK_RUNS:-1}); do \
		scripts/vm.sh run --no-build --root --smp 2 --timeout 1800 \
			-- spyre-selftests flr_soak || exit 1; \
	done

# The fault-injection suite SPYRE_FAULT_ROUNDS times (default 20, about
# 6 minutes) in one guest, so that each recovery follows many others.
soak-fault: build
	scripts/vm.sh run --no-build --root --cards 1 \
		--module-args job_timeout_ms=2000 --timeout 1800 -- sh -c \
		'n=$$1; while [ $$n -gt 0 ]; do \
			spyre-selftests fault || exit 1; n=$$((n - 1)); done' \
		_ $${SPYRE_FAULT_ROUNDS:-20}

# 1000 processes killed with 100 jobs in flight each (about 3 minutes).
soak-kill: build
	scripts/vm.sh run --no-build --cards 1 --timeout 3600 -- \
		spyre-selftests kill_soak

# 20 hot-unplug/re-plug cycles of the second card under load (the host
# drives QMP; about 3 minutes).
soak-unplug: build
	scripts/qmp-hotplug.py --cycles 20 --gap 1 -- --no-build --cards 2 \
		--timeout 1800 -- env UNPLUG_CYCLES=20 spyre-selftests unplug

# The ioctl fuzzer from 4 processes, at least 100 000 calls: 120 s (about
# 2.5 minutes); on the debug kernel, which makes about half the calls,
# 300 s, and a call may take 60 s instead of 10 before its process is
# killed (a device-memory BO of hundreds of MiB is cleared through BAR2);
# make test runs it for 10 s.
ifeq ($(KERNEL),debug)
FUZZ_SOAK_ENV := FUZZ_SECONDS=300 FUZZ_CALL_ALARM=60
else
FUZZ_SOAK_ENV := FUZZ_SECONDS=120
endif
soak-fuzz: build
	scripts/vm.sh run --no-build --cards 2 --timeout 900 -- \
		env $(FUZZ_SOAK_ENV) spyre-selftests spyre_fuzz_soak

# QEMU's generic-fuzz and the spyre-cmds target over the card model, 300 s
# in all (a clang/libFuzzer/ASan/UBSan build of its own, cached: the first
# run builds it, about 7 minutes).
soak-fuzz-card: setup
	scripts/fuzz-card.sh $${SPYRE_FUZZ_SECONDS:-300}

# The card model's qtest on a ThreadSanitizer build of QEMU (clang-14, a
# cached build of its own: the first run builds it, about 15 minutes):
# data races and lock-order inversions fail it.
.PHONY: qtest-tsan
qtest-tsan: setup
	scripts/build-qemu.sh --tsan

check: setup
	scripts/check.sh

debug-kernel: setup
	SPYRE_KERNEL=debian scripts/build-debug-kernel.sh

# make install [DESTDIR=<root>] [PREFIX=/usr/local]: libspyre (shared
# library, .a, headers, spyre.pc), the tools (relinked without RUNPATH),
# the man pages, the udev rule and the pam_limits snippet; make uninstall
# with the same variables removes exactly those files (and the folders
# install made, when they are left empty).  The udev rule and
# the limits snippet go where udev and pam_limits read them, whatever
# PREFIX (UDEVRULESDIR, SYSCONFDIR).  libspyre builds in this clone's build
# folder (scripts/lib.sh); its ABI check needs abidiff (make setup).
PREFIX ?= /usr/local
MANDIR ?= $(PREFIX)/share/man
UDEVRULESDIR ?= /usr/lib/udev/rules.d
SYSCONFDIR ?= /etc
LIMITSDIR := $(SYSCONFDIR)/security/limits.d
DESTDIR ?=
SPYRE_BUILD := $(shell bash -c '. scripts/lib.sh && echo "$$SPYRE_BUILD"')
LIBSPYRE := $(MAKE) -C libspyre O=$(SPYRE_BUILD)/user/libspyre \
	PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)
MAN_PAGES := $(wildcard docs/man/man1/*.1 docs/man/man3/*.3 \
	docs/man/man3type/*.3type)
INSTALLED := $(UDEVRULESDIR)/70-spyre.rules $(LIMITSDIR)/90-spyre.conf \
	$(patsubst docs/man/%,$(MANDIR)/%,$(MAN_PAGES))

install:
	$(LIBSPYRE) install
	install -D -m 0644 udev/70-spyre.rules \
		$(DESTDIR)$(UDEVRULESDIR)/70-spyre.rules
	install -D -m 0644 udev/90-spyre-memlock.conf \
		$(DESTDIR)$(LIMITSDIR)/90-spyre.conf
	install -d $(addprefix $(DESTDIR)$(MANDIR)/,man1 man3 man3type)
	install -m 0644 docs/man/man1/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 docs/man/man3/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 docs/man/man3type/*.3type $(DESTDIR)$(MANDIR)/man3type/
	@if [ -z "$(DESTDIR)" ]; then \
		ldconfig; \
		! command -v mandb >/dev/null || mandb -q; \
		echo "installed; as root: udevadm control --reload &&" \
		     "udevadm trigger -s accel, and add users to group accel"; \
	fi

uninstall:
	$(LIBSPYRE) uninstall
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	for d in $(addprefix $(DESTDIR)$(MANDIR)/,man1 man3 man3type); do \
		[ ! -d $$d ] || rmdir --ignore-fail-on-non-empty $$d; done
	@[ -n "$(DESTDIR)" ] || { ldconfig; \
		! command -v mandb >/dev/null || mandb -q; }

# make install-dkms [DESTDIR=<root>]: spyre.ko's DKMS source tree
# (dkms.conf, Kbuild, driver/, hw/, uapi/) in /usr/src/spyre-<version>;
# then, as root: dkms install spyre/<version>.
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"$$/\1/p' dkms.conf)
DKMS_SRC := /usr/src/spyre-$(DKMS_VERSION)
DKMS_FILES := dkms.conf Kbuild driver/Kbuild $(wildcard driver/*.[ch] \
	hw/*.h uapi/drm/*.h)

install-dkms:
	for f in $(DKMS_FILES); do \
		install -D -m 0644 $$f $(DESTDIR)$(DKMS_SRC)/$$f || exit 1; \
	done

uninstall-dkms:
	rm -f $(addprefix $(DESTDIR)$(DKMS_SRC)/,$(DKMS_FILES))
	for d in driver hw uapi/drm uapi ""; do \
		[ ! -d $(DESTDIR)$(DKMS_SRC)/$$d ] || \
			rmdir $(DESTDIR)$(DKMS_SRC)/$$d; \
	done

clean:
	bash -c '. scripts/lib.sh && rm -rf "$$SPYRE_BUILD"'
