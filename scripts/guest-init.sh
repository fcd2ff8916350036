#!/bin/sh
# SPDX-License-Identifier: MIT
# /init of the Spyre test guest (busybox).  Loads spyre.ko, runs the
# command that scripts/vm.sh put in /etc/spyre-cmd.sh (as the unprivileged
# user "spyre" in the accel group, with CAP_SYS_NICE for high-priority
# queues (scripts/spyre-runas.c), unless SPYRE_RUN_ROOT=1), then prints the
# exit status and the kernel log between markers that vm.sh parses.
export PATH=/usr/bin:/bin:/sbin:/work
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
# mode 0755: the test user reads the driver's live-object counts (0444)
mount -t debugfs -o mode=0755 debugfs /sys/kernel/debug 2>/dev/null
chmod 1777 /tmp /dev/shm
hostname spyre-guest

. /etc/spyre-run.conf

# kmemleak (the debug kernel): what boot left is cleared; at the end two
# scans a few seconds apart, and every report whose allocation stack goes
# through the driver, drm_sched or dma-buf joins the kernel log that vm.sh
# checks ("unreferenced object").
KMEMLEAK=/sys/kernel/debug/kmemleak
[ -w $KMEMLEAK ] && echo clear >$KMEMLEAK
kmemleak_reports() {
	[ -w $KMEMLEAK ] || return 0
	echo scan >$KMEMLEAK
	sleep 5
	echo scan >$KMEMLEAK
	awk '/^unreferenced object/ { if (hit) print r; r = $0; hit = bt = 0; next }
	     { r = r "\n" $0 }
	     /^  backtrace/ { bt = 1; next }
	     bt && /spyre|drm_sched|dma_buf|dma_fence|dma_resv|sync_file/ { hit = 1 }
	     END { if (hit) print r }' $KMEMLEAK
}

# vm.sh --trace: the driver's tracepoints into a 16 MiB-per-CPU buffer
# (flight-recorder mode: the oldest events go first; the dump says how
# many), dumped after the command between markers that vm.sh cuts out.
T=/sys/kernel/tracing
trace_start() {
	mount -t tracefs nodev $T 2>/dev/null
	echo 16384 >$T/buffer_size_kb && echo 1 >$T/events/spyre/enable ||
		{ echo "SPYRE-TRACE-FAIL: no tracefs or no spyre events"; finish 1; }
	echo 1 >$T/tracing_on
}
trace_dump() {
	echo 0 >$T/tracing_on
	echo "SPYRE-TRACE-BEGIN"
	grep -h '^overrun' $T/per_cpu/cpu*/stats | sed 's/^/# /'
	grep -v '^#' $T/trace
	echo "SPYRE-TRACE-END"
}

finish() {
	echo "SPYRE-EXIT $1"
	[ "${SPYRE_TRACE:-0}" = 1 ] && [ -e $T/trace ] && trace_dump
	leaks=$(kmemleak_reports)
	echo "SPYRE-DMESG-BEGIN"
	dmesg
	[ -z "$leaks" ] || printf 'kmemleak: %s\n' "$leaks"
	echo "SPYRE-DMESG-END"
	sync
	poweroff -f
}

# the hotplug helper: applies /etc/mdev.conf to every node added
mdev -d
if [ "${SPYRE_NO_MODULE:-0}" != 1 ]; then
	if ! modprobe spyre ${SPYRE_MODULE_ARGS:-}; then
		echo "SPYRE-MODULE-FAIL"
		finish 1
	fi
	i=0
	while [ "$(ls /dev/accel 2>/dev/null | wc -l)" -lt "$SPYRE_CARDS" ]; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			echo "SPYRE-MODULE-FAIL: $SPYRE_CARDS card(s) expected"
			ls -l /dev/accel
			finish 1
		fi
		sleep 0.1
	done
	# node permissions from udev/70-spyre.rules (as /etc/mdev.conf), now
	# and for cards hot-plugged later
	mdev -s
fi
[ -e /dev/udmabuf ] && chgrp accel /dev/udmabuf && chmod 0660 /dev/udmabuf
[ -d /dev/dma_heap ] && chgrp accel /dev/dma_heap/* && chmod 0660 /dev/dma_heap/*
chown -R spyre:accel /work

# vm.sh --torch: the trixie image (python3, torch) on the read-only
# virtio disk, under a tmpfs overlay holding our libspyre and torch_spyre
# (/torch-overlay), entered with chroot; /dev, /proc, /sys, /tmp, /work
# are the initramfs' own.
RUN_IN=
if [ "${SPYRE_TORCH:-0}" = 1 ]; then
	for m in virtio_blk squashfs overlay; do modprobe $m || finish 1; done
	i=0
	while [ ! -b /dev/vda ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "SPYRE-IMAGE-FAIL: no /dev/vda"; finish 1; }
		sleep 0.1
	done
	R=/mnt/root
	mkdir -p /mnt/lower /mnt/rw $R
	mount -t squashfs -o ro /dev/vda /mnt/lower &&
	mount -t tmpfs -o mode=0755 tmpfs /mnt/rw &&
	mkdir -p /mnt/rw/upper /mnt/rw/work &&
	mount -t overlay overlay \
		-o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work $R ||
		{ echo "SPYRE-IMAGE-FAIL: cannot mount the image"; finish 1; }
	cp -a /torch-overlay/. $R/
	grep -q '^spyre:' $R/etc/passwd ||
		echo 'spyre:x:1000:1000:spyre:/work:/bin/sh' >>$R/etc/passwd
	grep -q '^accel:' $R/etc/group || echo 'accel:x:1000:spyre' >>$R/etc/group
	cp /etc/spyre-cmd.sh $R/etc/spyre-cmd.sh
	mkdir -p $R/run/spyre && cp /bin/busybox /bin/spyre-runas $R/run/spyre/
	for d in dev proc sys tmp work; do
		mkdir -p $R/$d
		mount --bind /$d $R/$d
	done
	mount --bind /dev/pts $R/dev/pts
	mount --bind /dev/shm $R/dev/shm
	# torch.distributed's gloo talks over loopback
	ip link set lo up || finish 1
	RUN_IN="chroot $R /run/spyre/busybox"
	RUN_AS="chroot $R /run/spyre/spyre-runas /run/spyre/busybox"
	export PYTHONDONTWRITEBYTECODE=1 HOME=/work
fi

# userptr pins count against RLIMIT_MEMLOCK (as RDMA/VFIO pins do); a
# compute node raises it for its users, so does the test guest
ulimit -l unlimited
[ "${SPYRE_TRACE:-0}" = 1 ] && trace_start
cd /work
echo "SPYRE-START $(cut -d' ' -f1 /proc/uptime)"
if [ "${SPYRE_RUN_ROOT:-0}" = 1 ]; then
	$RUN_IN sh /etc/spyre-cmd.sh
else
	# the test user, with CAP_SYS_NICE for high-priority queues
	${RUN_AS:-spyre-runas} sh /etc/spyre-cmd.sh
fi
finish $?
