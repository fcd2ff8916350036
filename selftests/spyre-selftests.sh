#!/bin/sh
# SPDX-License-Identifier: MIT
# Run the Spyre kselftest suites (KTAP, one "# Totals:" line per suite).
#   spyre-selftests [SUITE...]     default: all, in the installed order
# Exit status: 0 if every suite passed (skips are fine), else 1.
dir=${SPYRE_SELFTEST_DIR:-@SUITEDIR@}
[ -d "$dir" ] || dir=$(dirname "$0")/../libexec/spyre/selftests
[ -d "$dir" ] || dir=$(dirname "$0")
suites=${*:-@SUITES@}
rc=0
for s in $suites; do
	if [ ! -x "$dir/$s" ]; then
		echo "# spyre-selftests: $dir/$s missing"
		rc=1
		continue
	fi
	echo "# ==== $s ===="
	"$dir/$s"
	r=$?
	echo "# ==== $s exit $r ===="
	# kselftest: 4 = skip (all tests skipped) is not a failure
	[ $r = 0 ] || [ $r = 4 ] || rc=1
done
exit $rc
