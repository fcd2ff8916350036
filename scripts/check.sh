#!/bin/bash
# SPDX-License-Identifier: MIT
# Style and static checks: checkpatch --strict and sparse (C=2) on the
# driver and the shared headers, its sysfs ABI documented (docs/ABI/),
# QEMU's checkpatch on the card model.
. "$(dirname "$0")/lib.sh"
kernel_env
rc=0
CP=("$KSRC/scripts/checkpatch.pl" --strict --no-tree --quiet --show-types)
msg "checkpatch --strict: driver/"
"${CP[@]}" -f "$SPYRE_ROOT"/driver/spyre_*.[ch] || rc=1
# The shared headers are also compiled by QEMU and userspace, which have
# no BIT()/BIT_ULL(): that one check does not apply to them.
msg "checkpatch --strict: hw/, uapi/ (BIT_MACRO not applicable)"
"${CP[@]}" --ignore BIT_MACRO -f "$SPYRE_ROOT"/hw/*.h \
	"$SPYRE_ROOT"/uapi/drm/*.h || rc=1
msg "kernel-doc: driver/, hw/, uapi/"
if "$KSRC/scripts/kernel-doc" -none "$SPYRE_ROOT"/driver/spyre_*.[ch] \
	"$SPYRE_ROOT"/hw/*.h "$SPYRE_ROOT"/uapi/drm/*.h 2>&1 | grep .; then
	rc=1
fi
msg "sysfs ABI: docs/ABI/ (get_abi.pl) documents every attribute of driver/"
if perl "$KSRC/scripts/get_abi.pl" validate --dir "$SPYRE_ROOT/docs/ABI" 2>&1 |
	grep .; then
	rc=1
fi
for a in $(sed -n 's/^static DEVICE_ATTR_RO(\([a-z_0-9]*\));$/\1/p; s/^SPYRE_ATTR_U64(\([a-z_0-9]*\),.*/\1/p' \
	"$SPYRE_ROOT"/driver/spyre_*.c); do
	grep -q "^What:.*/$a\$" "$SPYRE_ROOT"/docs/ABI/* ||
		{ echo "sysfs attribute $a is not in docs/ABI/"; rc=1; }
done
msg "sparse (C=2) and W=1: driver/"
# in a copy of its own (its objects carry W=1 flags); paths shown as the
# clone's
sync_module_src "$SPYRE_BUILD/module-check"
out=$(make -s -C "$KDIR" M="$SPYRE_BUILD/module-check" C=2 W=1 modules 2>&1 |
	grep -v '^  ' | sed "s|$SPYRE_BUILD/module-check/|$SPYRE_ROOT/|g" ||
	true)
if [ -n "$out" ]; then echo "$out"; rc=1; fi
msg "QEMU checkpatch: qemu-device/ (as synced into the QEMU tree) and its patches to QEMU"
"$SPYRE_ROOT/scripts/build-qemu.sh" >/dev/null 2>&1 || rc=1
QTREE=$SPYRE_BUILD/qemu/src
# Warnings count too: checkpatch.pl itself fails only on errors.
(cd "$QTREE" && for f in hw/misc/spyre/*.[ch] tests/qtest/spyre-test.c; do
	out=$(scripts/checkpatch.pl --no-tree -q -f "$f") || { echo "$out"; exit 1; }
	if echo "$out" | grep -q '^WARNING'; then echo "$out"; exit 1; fi
done
for p in "$SPYRE_ROOT"/qemu-device/patches/*.patch; do
	[ -f "$p" ] || continue
	out=$(scripts/checkpatch.pl -q "$p") || { echo "$out"; exit 1; }
	if echo "$out" | grep -q '^WARNING'; then echo "$out"; exit 1; fi
done) || rc=1
[ $rc = 0 ] && msg "checks clean"
exit $rc
