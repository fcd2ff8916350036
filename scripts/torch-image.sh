#!/bin/bash
# SPDX-License-Identifier: MIT
# The PyTorch guest image and the PyTorch SDK the backend compiles against,
# both from Debian trixie (bookworm's torch 1.13 predates the PrivateUse1
# renaming and backend autoload), cached under $SPYRE_CACHE/torch:
#
#   apt/            a private apt configuration for trixie (APT_CONFIG):
#                   the host's own apt sources are never touched
#   image-<key>/    tree/ (mmdebstrap --variant=essential, PKGS with
#                   their dependencies and no recommends, then LEAN_PKG
#                   from its .deb without the dependencies LEAN_OMIT),
#                   <key> = hash of the
#                   candidate versions of the packages and of this recipe,
#                   and image-<pack>.squashfs: uncompressed (1.1 GiB; the
#                   guest decompresses nothing under TCG, which made
#                   `import torch` 10-25 % faster than zstd or lz4)
#   sdk-<ver>/      libtorch-dev's headers (dpkg -x, nothing installed)
#
# Usage: torch-image.sh [image|sdk]...  (default: both).  Prints nothing on
# stdout but, last, the paths as shell assignments: TORCH_IMAGE (the
# squashfs), TORCH_TREE (its unpacked tree, whose libtorch_cpu.so/libc10.so
# the backend links against) and TORCH_SDK (the root holding usr/include).
. "$(dirname "$0")/lib.sh"

RECIPE=2
PACK=raw
PACK_ARGS=(-noI -noD -noF -noX)
# python3-setuptools: torch.testing._internal (the OpInfo tests) imports it;
# python3-pil: torchvision imports it (and it brings the libjpeg, libpng
# and libwebp torchvision's image.so links)
PKGS=(python3 python3-torch python3-setuptools python3-pil)
# torchvision (the models of test_models.py), the Debian package, installed
# with dpkg without the FFmpeg libraries only its video decoder
# (video_reader.so, which torchvision skips silently when it cannot load
# it) links: through apt they and what they pull in would be 93 of the 114
# packages python3-torchvision adds, 137 of its 155 MB, and about 80 s of
# a fresh image build (docs/torch-image.rst).  dpkg still refuses any
# other unmet dependency.
LEAN_PKG=python3-torchvision
LEAN_OMIT=libavcodec61,libavformat61,libavutil59,libswresample5,libswscale8
T=$SPYRE_CACHE/torch
A=$T/apt
mkdir -p "$T"

# Private apt: own sources, lists, cache and an empty dpkg status, so the
# host's apt state is neither read nor changed.
apt_setup() {
	mkdir -p "$A/parts" "$A/state/lists/partial" "$A/cache/archives/partial"
	: >"$A/prefs"
	[ -f "$A/status" ] || : >"$A/status"
	cat >"$A/apt.conf" <<EOF
Dir::Etc::SourceList "$A/sources.list";
Dir::Etc::SourceParts "$A/parts";
Dir::Etc::Preferences "$A/prefs";
Dir::Etc::PreferencesParts "$A/parts";
Dir::State "$A/state";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
APT::Architecture "amd64";
EOF
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
		>"$A/sources.list"
	# refresh the index once a day at most
	if [ -z "$(find "$A/state/lists" -name '*_Packages*' -mtime -1 2>/dev/null)" ]; then
		msg "torch: apt-get update (private trixie configuration)"
		APT_CONFIG=$A/apt.conf apt-get update -q >&2 ||
			die "apt-get update for trixie failed"
	fi
}

tapt() { APT_CONFIG=$A/apt.conf "$@"; }

candidate() {
	tapt apt-cache policy "$1" | awk '/Candidate:/ {print $2}'
}

step_image() {
	local key v p dir
	key=$( { for p in "${PKGS[@]}" "$LEAN_PKG"; do
			echo "$p $(candidate "$p")"; done
		 echo "recipe $RECIPE $LEAN_OMIT"; } | sha256sum | cut -c1-16)
	dir=$T/image-$key
	TORCH_IMAGE=$dir/image-$PACK.squashfs
	TORCH_TREE=$dir/tree
	[ -f "$dir/.done" ] || make_tree "$dir"
	[ -f "$TORCH_IMAGE" ] && return
	msg "torch: packing the image ($PACK squashfs)"
	as_root mksquashfs "$dir/tree" "$TORCH_IMAGE.tmp" "${PACK_ARGS[@]}" \
		-noappend -quiet >&2 || die "mksquashfs failed"
	as_root chown "$(id -u):$(id -g)" "$TORCH_IMAGE.tmp"
	mv "$TORCH_IMAGE.tmp" "$TORCH_IMAGE"
}

make_tree() {
	local dir=$1 deb
	msg "torch: building the trixie guest image ($(candidate python3-torch))"
	rm -rf "$dir" && mkdir -p "$dir/deb"
	(cd "$dir/deb" && tapt apt-get download -q \
		"$LEAN_PKG=$(candidate "$LEAN_PKG")" 2>&1 |
		grep -v unsandboxed >&2) || die "apt-get download $LEAN_PKG failed"
	deb=$(echo "$dir"/deb/*.deb)
	[ -f "$deb" ] || die "apt-get download $LEAN_PKG gave no .deb"
	# root mode: this runs as root (make test's set-up installs with apt)
	as_root mmdebstrap --quiet --variant=essential --mode=root \
		--include="$(IFS=,; echo "${PKGS[*]}")" \
		--aptopt='APT::Install-Recommends "false"' \
		--customize-hook="copy-in $deb /tmp" \
		--customize-hook="chroot \"\$1\" dpkg --ignore-depends=$LEAN_OMIT -i /tmp/${deb##*/}" \
		--customize-hook="rm -f \"\$1/tmp/${deb##*/}\"" \
		trixie "$dir/tree" \
		"deb http://deb.debian.org/debian trixie main" >&2 ||
		die "mmdebstrap failed"
	rm -rf "$dir/deb"
	# what the image holds, for the record and for debugging
	as_root chroot "$dir/tree" dpkg-query -W >"$dir/packages.txt"
	for d in work mnt/spyre; do as_root mkdir -p "$dir/tree/$d"; done
	touch "$dir/.done"
}

step_sdk() {
	local v dir
	v=$(candidate libtorch-dev)
	[ -n "$v" ] || die "trixie has no libtorch-dev"
	dir=$T/sdk-$v
	TORCH_SDK=$dir
	[ -f "$dir/.done" ] && { sdk_fmt "$dir"; return; }
	msg "torch: unpacking libtorch-dev $v headers"
	rm -rf "$dir" && mkdir -p "$dir/deb"
	(cd "$dir/deb" && tapt apt-get download -q "libtorch-dev=$v" 2>&1 |
		grep -v unsandboxed >&2) || die "apt-get download libtorch-dev failed"
	dpkg -x "$dir"/deb/libtorch-dev_*.deb "$dir"
	rm -rf "$dir/deb"
	sdk_fmt "$dir"
	touch "$dir/.done"
}

# fmt's headers (libfmt-dev, the version libtorch was built with): kineto's
# headers include <fmt/format.h>, and the backend's profiler (a Kineto child
# profiler) includes kineto's.  Added to an SDK unpacked before it needed them.
sdk_fmt() {
	local dir=$1
	[ -f "$dir/usr/include/fmt/format.h" ] && return
	msg "torch: unpacking libfmt-dev headers"
	rm -rf "$dir/fmt-deb" && mkdir -p "$dir/fmt-deb"
	(cd "$dir/fmt-deb" && tapt apt-get download -q libfmt-dev 2>&1 |
		grep -v unsandboxed >&2) || die "apt-get download libfmt-dev failed"
	dpkg -x "$dir"/fmt-deb/libfmt-dev_*.deb "$dir"
	rm -rf "$dir/fmt-deb"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(image sdk)
apt_setup
for s in "${steps[@]}"; do
	case $s in
	image | sdk) "step_$s" ;;
	*) die "unknown step $s" ;;
	esac
done
[ -n "${TORCH_IMAGE:-}" ] && printf 'TORCH_IMAGE=%q\nTORCH_TREE=%q\n' "$TORCH_IMAGE" "$TORCH_TREE"
[ -n "${TORCH_SDK:-}" ] && printf 'TORCH_SDK=%q\n' "$TORCH_SDK"
exit 0
