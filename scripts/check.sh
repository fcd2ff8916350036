#!/bin/bash
# SPDX-License-Identifier: MIT
# Style and static checks: checkpatch --strict and sparse (C=2) on the
# driver and the shared headers, QEMU's checkpatch on the card model.
. "$(dirname "$0")/lib.sh"
kernel_env
rc=0
msg "checkpatch --strict: driver/, hw/, uapi/"
"$KSRC/scripts/checkpatch.pl" --strict --no-tree --quiet --show-types \
	--ignore SPDX_LICENSE_TAG,FILE_PATH_CHANGES \
	-f "$SPYRE_ROOT"/driver/spyre_*.[ch] "$SPYRE_ROOT"/hw/*.h \
	"$SPYRE_ROOT"/uapi/drm/*.h || rc=1
msg "sparse (C=2) and W=1: driver/"
out=$(make -s -C "$KDIR" M="$SPYRE_ROOT" C=2 W=1 modules 2>&1 |
	grep -v '^  ' || true)
if [ -n "$out" ]; then echo "$out"; rc=1; fi
QSRC=$SPYRE_CACHE/qemu-src/src
msg "QEMU checkpatch: qemu-device/"
for f in "$SPYRE_ROOT"/qemu-device/*.[ch] "$SPYRE_ROOT"/qemu-device/tests/*.c; do
	"$QSRC/scripts/checkpatch.pl" --no-tree -q -f "$f" || rc=1
done
[ $rc = 0 ] && msg "checks clean"
exit $rc
