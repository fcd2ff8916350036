#!/bin/bash
# SPDX-License-Identifier: MIT
# The test suite behind `make test`:
#   1. host tests (tests/): libspyre's pure parts, the VM runner's own
#      tests and those of scripts/qmp-hotplug.py's QMP client
#      (tests/runner/), and make install / uninstall into a DESTDIR
#      with examples/ built against it by pkg-config
#      (tests/test-install.sh), KTAP;
#   2. the card model's QEMU qtest, TAP;
#   3. examples/ in a guest with one card, as the image installs them and
#      as built against the installed tree (tests/guest-examples.sh);
#      the kselftest suites (selftests/) inside a fresh guest with two
#      cards, as an unprivileged user in the accel group, KTAP; then, on
#      the host, spyre-smi's JSON reports from that log against
#      docs/spyre-smi.schema.json (tests/smi_schema.py); the runtime
#      suite traced (vm.sh --trace: the driver's tracepoints and the
#      card's trace-events), whose timeline scripts/trace-timeline.py
#      --check builds and checks;
#   4. the memory suites once more with -device intel-iommu;
#   5. the suites that need root, in a guest of their own (spyre_reset:
#      sysfs function resets racing the card's users, who drop to the test
#      user; spyre_fault: injected faults, recoveries and resets with work
#      in flight, with a 2 s job timeout; spyre_quota: per-file caps;
#      spyre_trace: the driver's tracepoints; with SPYRE_KERNEL=debug also
#      spyre_failnth: every allocation failed in turn);
#      then spyre_unplug, with the host hot-unplugging and re-plugging the
#      second card through QMP (scripts/qmp-hotplug.py);
#   6. the PyTorch backend's tests (torch_spyre/tests) in the trixie image,
#      one guest with two cards, one Python process, KTAP.
# Prints the plain line "N passed, N failed, N skipped" last; exits non-zero
# on any failure.  Assumes scripts/build.sh ran (make test does it).
. "$(dirname "$0")/lib.sh"
kernel_env
B=$SPYRE_BUILD
# one log folder per run, so concurrent runs never share files
mkdir -p "$B/test-logs"
LOGDIR=$(mktemp -d "$B/test-logs/$(date +%Y%m%d-%H%M%S).XXXX")
ln -sfn "$LOGDIR" "$B/test-logs/latest"
ls -1dt "$B"/test-logs/2* 2>/dev/null | tail -n +11 | xargs -r rm -rf
PASS=0 FAIL=0 SKIP=0

# count LOG RC: add the KTAP "# Totals:" lines of LOG (or, for plain TAP,
# its ok / not ok lines) to the counters; a non-zero RC with nothing
# failed counts as one failure.
count() {
	local log=$1 rc=$2 p f s
	read -r p f s < <(awk '
		/^# Totals:/ {
			totals = 1
			for (i = 3; i <= NF; i++) {
				split($i, kv, ":")
				if (kv[1] == "pass") tp += kv[2]
				else if (kv[1] == "fail" || kv[1] == "error") tf += kv[2]
				else if (kv[1] == "skip") ts += kv[2]
			}
		}
		/^ok [0-9]+/ { if (/# SKIP/) s++; else p++ }
		/^not ok [0-9]+/ { f++ }
		END {
			if (totals) print tp + 0, tf + 0, ts + 0
			else print p + 0, f + 0, s + 0
		}' "$log")
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		echo "# suite exited with status $rc" >>"$log"
		f=1
	fi
	PASS=$((PASS + p)) FAIL=$((FAIL + f)) SKIP=$((SKIP + s))
	printf '%-28s %3d passed, %d failed, %d skipped\n' \
		"$(basename "$log" .log)" "$p" "$f" "$s"
}

run() {
	local name=$1 rc=0
	shift
	msg "$name"
	"$@" 2>&1 | tee "$LOGDIR/$name.log" || rc=$?
	[ "$rc" = 0 ] && rc=${PIPESTATUS[0]}
	echo "$rc" >"$LOGDIR/$name.rc"
}

# 1. host tests
make -s -C "$SPYRE_ROOT/tests" O="$B/host-tests" KSRC="$KSRC" \
	LIBSPYRE_O="$B/user/libspyre" >&2
for t in "$B"/host-tests/test_*; do
	[ -x "$t" ] || continue
	run "host-$(basename "$t")" "$t"
done
# the card model's numeric core, natively
run host-card-math make -s -C "$SPYRE_ROOT/qemu-device/tests" -f Makefile.math \
	run KSRC="$KSRC"
# the VM runner's own tests (exit status, crash, hang, WARN)
run host-vm-runner "$SPYRE_ROOT/tests/runner/test-vm.sh"
# the QMP client of the hot-plug soak (events that share a read with a reply)
run host-qmp-client "$SPYRE_ROOT/tests/runner/test-qmp.py"
# make install / uninstall into a DESTDIR, examples/ built against it
run host-install "$SPYRE_ROOT/tests/test-install.sh" "$B/install-test"
# 2. qtest
run qtest "$SPYRE_ROOT/scripts/build-qemu.sh" --qtest
# 3. the examples, staged ones and those built against the installed tree
run guest-examples "$SPYRE_ROOT/scripts/vm.sh" run --no-build --cards 1 \
	--timeout 120 --copy "$B/install-test/examples" \
	--copy "$SPYRE_ROOT/tests/guest-examples.sh" -- sh guest-examples.sh
# guest kselftests
run guest-selftests "$SPYRE_ROOT/scripts/vm.sh" run --no-build --cards 2 \
	--timeout 600 -- spyre-selftests
# spyre-smi's JSON reports from the guest's smi_* tests, against its schema
run host-smi-schema python3 "$SPYRE_ROOT/tests/smi_schema.py" \
	"$LOGDIR/guest-selftests.log"
# libspyre's runtime tests on a real card (built with the host tests)
run guest-runtime "$SPYRE_ROOT/scripts/vm.sh" run --no-build --cards 2 \
	--timeout 600 --trace "$LOGDIR/trace" -- spyre-selftests lib_runtime

# that run, traced, as a timeline (Perfetto JSON, PNG): consistent spans,
# and a successful card descriptor behind every job the driver saw succeed
run host-trace-timeline bash -c 'python3 "$1" --check "$2" &&
	echo "ok 1 trace-timeline" || { echo "not ok 1 trace-timeline"; exit 1; }' \
	_ "$SPYRE_ROOT/scripts/trace-timeline.py" "$LOGDIR/trace"
# 4. the memory suites again behind an emulated intel-iommu (intel_iommu=on)
run guest-selftests-iommu "$SPYRE_ROOT/scripts/vm.sh" run --no-build \
	--iommu --cards 2 --timeout 600 -- spyre-selftests mem
# the timeout handler against jobs that end as their timeout fires, with a
# 200 ms job timeout
run guest-selftests-timeout "$SPYRE_ROOT/scripts/vm.sh" run --no-build \
	--cards 1 --module-args job_timeout_ms=200 --timeout 300 \
	-- spyre-selftests exec_order -- -t timeout_racing_completion
# 5. root: function resets, injected faults (2 s job timeout), quotas,
# the driver's tracepoints; on the debug kernel also every allocation
# failed in turn (fail-nth)
ROOT_SUITES="reset fault quota trace" ROOT_TIMEOUT=400
if [ "$SPYRE_KERNEL" = debug ]; then
	ROOT_SUITES="$ROOT_SUITES failnth" ROOT_TIMEOUT=1800
fi
run guest-selftests-root "$SPYRE_ROOT/scripts/vm.sh" run --no-build --root \
	--cards 1 --module-args job_timeout_ms=2000 --timeout $ROOT_TIMEOUT \
	-- spyre-selftests $ROOT_SUITES
# hot-unplug and re-plug of the second card under load: the host drives
# QMP once spyre_unplug in the guest says it is ready
run guest-selftests-unplug "$SPYRE_ROOT/scripts/qmp-hotplug.py" --cycles 3 \
	--gap 1 -- --no-build --cards 2 --timeout 400 \
	-- env UNPLUG_CYCLES=3 spyre-selftests unplug
# 6. PyTorch on the card (after the card's own suites, in a log of its own)
run guest-torch "$SPYRE_ROOT/scripts/vm.sh" run --no-build --torch --cards 2 \
	--timeout 900 --copy "$SPYRE_ROOT/torch_spyre/tests/test_torch.py" \
	--copy "$SPYRE_ROOT/torch_spyre/tests/test_compile.py" \
	--copy "$SPYRE_ROOT/torch_spyre/tests/test_dist.py" \
	--copy "$SPYRE_ROOT/torch_spyre/tests/test_opinfo.py" \
	--copy "$SPYRE_ROOT/torch_spyre/tests/test_conv.py" \
	--copy "$SPYRE_ROOT/torch_spyre/tests/ktap.py" \
	--copy "$SPYRE_ROOT/torch_spyre/tests/test_models.py" \
	--copy "$SPYRE_ROOT/torch_spyre/examples/tiny_decoder.py" -- \
	python3 test_torch.py

echo
for l in "$LOGDIR"/*.log; do
	count "$l" "$(cat "${l%.log}.rc")"
done
echo "logs: $LOGDIR"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ $FAIL = 0 ]
