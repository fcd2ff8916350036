#!/bin/sh
# SPDX-License-Identifier: MIT
# Run the Spyre kselftest suites (KTAP, one "# Totals:" line per suite).
#
#   spyre-selftests [SUITE...] [-- HARNESS-OPTION...]
#   spyre-selftests -l                list the suites
#
# SUITE selects suites by name: the full name (spyre_mem), the name without
# "spyre_" (mem), and a short name also selects the suites it prefixes:
# "mem" is spyre_mem, spyre_mem_dmabuf and spyre_mem_lib (the memory
# suites), "exec" the execution suites.  Default: all, in the installed
# order, except the long suites that run only when named ("soak": the
# concurrency runs for 300 s instead of spyre_exec_stress's 30 s;
# SPYRE_STRESS_SECONDS sets the duration of both).  Options after "--" go to
# every suite (kselftest_harness: -f FIXTURE, -v VARIANT, -t TEST, -l ...).
# Where the driver's count of live objects is readable (debugfs "live":
# BOs, contexts, queues, jobs, fences, pinned pages), each suite is one
# more check: after it exits the counts must come back to what they were
# before it started (within 5 s: frees are asynchronous), else the suite
# left objects behind and fails.
# Exit status: 0 if every suite passed (skips are fine), 1 if one failed,
# 2 for a SUITE that matches nothing.
dir=${SPYRE_SELFTEST_DIR:-@SUITEDIR@}
[ -d "$dir" ] || dir=$(dirname "$0")/../libexec/spyre/selftests
[ -d "$dir" ] || dir=$(dirname "$0")
all="@SUITES@"
extra="@EXTRA_SUITES@"

if [ "${1:-}" = -l ]; then
	for s in $all; do echo "$s"; done
	for s in $extra; do echo "$s (only when named)"; done
	exit 0
fi

suites=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	found=
	for s in $all $extra; do
		case $s in
		"$1" | "spyre_$1" | "spyre_$1"_*)
			case " $suites " in
			*" $s "*) ;;
			*) suites="$suites $s" ;;
			esac
			found=1 ;;
		esac
	done
	if [ -z "$found" ]; then
		echo "spyre-selftests: no suite matches '$1' (suites: $all $extra)" >&2
		exit 2
	fi
	shift
done
[ "${1:-}" = -- ] && shift
[ -n "$suites" ] || suites=$all

live=
for f in /sys/kernel/debug/accel/*/live; do
	[ -r "$f" ] && live=$f && break
done
snapshot() { [ -n "$live" ] && tr '\n' ' ' <"$live"; }

rc=0
for s in $suites; do
	if [ ! -x "$dir/$s" ]; then
		echo "# spyre-selftests: $dir/$s missing"
		rc=1
		continue
	fi
	echo "# ==== $s ===="
	before=$(snapshot)
	"$dir/$s" "$@"
	r=$?
	echo "# ==== $s exit $r ===="
	# kselftest: 4 = skip (all tests skipped) is not a failure
	[ $r = 0 ] || [ $r = 4 ] || rc=1
	[ -n "$before" ] || continue
	after=$(snapshot)
	n=0
	while [ "$after" != "$before" ] && [ $n -lt 50 ]; do
		sleep 0.1
		after=$(snapshot)
		n=$((n + 1))
	done
	if [ "$after" = "$before" ]; then
		echo "# $s: live objects back at the snapshot ($before)"
		echo "# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0"
	else
		echo "# $s left objects behind: before: $before; after: $after"
		echo "# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0"
		rc=1
	fi
done
exit $rc
