#!/bin/bash
# SPDX-License-Identifier: MIT
# Generates libspyre's section-3 man pages from the kernel-doc comments of
# its public headers, with the kernel's own tools (scripts/kernel-doc -man,
# scripts/split-man.pl of the guest kernel's source tree, unpacked by
# setup):
#   man3/<function>.3       every documented function
#   man3type/<type>.3type   every documented struct
# into docs/man (the committed pages), or into folder $1.  `make check`
# regenerates them into a temporary folder and fails if the committed ones
# differ.  The kernel's page header (section 9, "Kernel Hacker's Manual",
# a date) is replaced by libspyre's (section 3, its version, no date, so
# the output depends on the headers only), SPYRE_API is dropped from the
# synopsis, the NAME line loses kernel-doc's @ before parameter names, and
# each page says which header to include and what to link.
. "$(dirname "$0")/lib.sh"
kernel_env
out=${1:-$SPYRE_ROOT/docs/man}
inc=$SPYRE_ROOT/libspyre/include/spyre
ver=$(sed -n 's/^#define SPYRE_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	"$inc/spyre.h" | paste -sd.)
[ -n "$ver" ] || die "no SPYRE_VERSION_* in spyre.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out/man3" "$out/man3type"
mkdir -p "$out/man3" "$out/man3type"
for h in spyre.h spyre_ref.h; do
	"$KSRC/scripts/kernel-doc" -man "$inc/$h" 2>/dev/null |
		perl "$KSRC/scripts/split-man.pl" "$tmp/$h" 2>/dev/null
	for f in "$tmp/$h"/*.9; do
		name=$(basename "$f" .9)
		case $name in
		"struct "*) name=${name#struct }; sec=3type ;;
		*) sec=3 ;;
		esac
		sed -e "1s|^\.TH .*|.TH \"$name\" $sec \"\" \"libspyre $ver\" \"libspyre Manual\"|" \
		    -e 's/^\.B "SPYRE_API /.B "/' \
		    -e "/^\.SH SYNOPSIS\$/a .B #include <spyre/$h>\\n.sp" \
		    -e "/^\.SH NAME\$/{n;s/@\([A-Za-z_]\)/\1/g;a .SH LIBRARY\\nlibspyre (\\\\fIpkg-config --cflags --libs spyre\\\\fP, \\\\fI-lspyre\\\\fP)
}" "$f" >"$out/man$sec/$name.$sec"
	done
done
