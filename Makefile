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
	scripts/vm.sh run --no-build --cards 2 --timeout 900 -- spyre-selftests soak

check: setup
	scripts/check.sh

clean:
	rm -f driver/*.o driver/*.ko driver/*.mod* driver/.*.cmd driver/modules.order \
	      .*.cmd Module.symvers modules.order
	rm -f tests/runner/*.o tests/runner/*.ko tests/runner/*.mod* \
	      tests/runner/.*.cmd tests/runner/modules.order tests/runner/Module.symvers
	bash -c '. scripts/lib.sh && rm -rf "$$SPYRE_BUILD"'
