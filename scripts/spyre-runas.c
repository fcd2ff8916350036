// SPDX-License-Identifier: MIT
/*
 * spyre-runas CMD [ARG...]: run CMD as the test guest's user "spyre" (uid
 * and gid 1000, group accel: scripts/build.sh writes them) with
 * CAP_SYS_NICE as an ambient capability, which high-priority queues need
 * (QUEUE_CREATE; busybox su would drop every capability).  Static, so
 * that it also runs in the PyTorch image's chroot.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#define SPYRE_UID	1000
#define SPYRE_GID	1000

int main(int argc, char **argv)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { { 0 } };
	gid_t groups[] = { SPYRE_GID };

	if (argc < 2) {
		fprintf(stderr, "usage: spyre-runas CMD [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || setgroups(1, groups) ||
	    setgid(SPYRE_GID) || setuid(SPYRE_UID)) {
		perror("spyre-runas: switching to the test user");
		return 126;
	}
	d[0].effective = d[0].permitted = d[0].inheritable =
		1u << CAP_SYS_NICE;
	if (syscall(SYS_capset, &h, d) ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_NICE, 0, 0)) {
		perror("spyre-runas: CAP_SYS_NICE");
		return 126;
	}
	setenv("HOME", "/work", 1);
	setenv("USER", "spyre", 1);
	setenv("LOGNAME", "spyre", 1);
	execvp(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
