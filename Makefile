# SPDX-License-Identifier: MIT
# Spyre open driver stack.  `make demo` and `make test` are all a newcomer
# needs: both set up the machine (apt, caches) and build what is missing.
# The kernel module itself is built by Kbuild (see the top-level Kbuild).

SHELL := /bin/bash
.PHONY: all setup build demo test bench soak check clean

all: build

setup:
	scripts/setup.sh

build: setup
	scripts/build.sh

demo: build
	scripts/vm.sh run --no-build -- spyre-demo

test: build
	scripts/run-tests.sh

bench: build
	scripts/run-bench.sh

soak: build
	scripts/vm.sh run --no-build --cards 2 --timeout 1200 -- spyre-selftests soak

check: setup
	scripts/check.sh

clean:
	bash -c '. scripts/lib.sh && rm -rf "$$SPYRE_BUILD"'
