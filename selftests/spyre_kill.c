// SPDX-License-Identifier: MIT
/*
 * spyre_kill: processes killed (SIGKILL) with work in flight.  A child
 * opens the card, creates two queues and submits 100 jobs: on one queue
 * fills that run, on the other jobs stuck behind a SEM_WAIT that nobody
 * releases; it tells the parent, which kills it at once.  KILL_CYCLES
 * times (default 20; 1000 in the spyre_kill_soak build, "make
 * soak-kill").  The kernel must tear every killed context down: the card
 * then serves a new context correctly, and spyre-selftests' live-object
 * check finds nothing left behind.
 */
#include <signal.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"


#ifndef KILL_DEFAULT_CYCLES
#define KILL_DEFAULT_CYCLES 20
#define KILL_TIMEOUT_S 120
#else
#define KILL_TIMEOUT_S 3600
#endif
#define KILL_JOBS	100

/* The child: 100 jobs in flight, then a byte on @wfd, then wait to die. */
static void child(int wfd)
{
	struct st_ctx x;
	struct st_buf data, sem;
	struct st_cs cs;
	uint32_t q2;
	char ok = 1;

	if (st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL) ||
	    st_buf_new(&x, 64 * 1024, &data) || st_buf_new(&x, 4096, &sem) ||
	    st_queue_new(x.fd, DRM_SPYRE_PRIORITY_LOW, &q2))
		_exit(2);
	for (unsigned int i = 0; i < KILL_JOBS; i++) {
		st_cs_reset(&cs);
		if (i & 1)
			st_cs_sem(&cs, false, 0, sem.va, 1);
		st_cs_fill(&cs, data.va + (i % 16) * 4096, 1024, 4, i);
		if (st_submit_cs(&x, i & 1 ? q2 : x.qid, &cs, NULL, 0, 0, 0))
			_exit(3);
	}
	if (write(wfd, &ok, 1) != 1)
		_exit(4);
	for (;;)
		pause();
}

FIXTURE(proc) {
	int unused;
};

FIXTURE_SETUP(proc)
{
	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card (/dev/accel/accel0)");
}

FIXTURE_TEARDOWN(proc)
{
}

TEST_F_TIMEOUT(proc, kill_with_jobs_in_flight, KILL_TIMEOUT_S)
{
	const char *e = getenv("KILL_CYCLES");
	unsigned long cycles = e && *e ? strtoul(e, NULL, 0) :
				KILL_DEFAULT_CYCLES;
	struct st_ctx x;
	struct st_buf data;
	struct st_cs cs;

	for (unsigned long c = 0; c < cycles; c++) {
		int p[2], status;
		char b;
		pid_t pid;

		ASSERT_EQ(0, pipe(p));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			close(p[0]);
			child(p[1]);
		}
		close(p[1]);
		ASSERT_EQ(1, read(p[0], &b, 1)) TH_LOG("cycle %lu: child failed",
						       c);
		close(p[0]);
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFSIGNALED(status));
	}

	/* The card still works for a new context. */
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 4096, &data));
	st_cs_reset(&cs);
	st_cs_fill(&cs, data.va, 1024, 4, 0x6b696c6c);
	ASSERT_EQ(0, st_run(&x, &cs));
	for (unsigned int i = 0; i < 1024; i++)
		ASSERT_EQ(0x6b696c6cu, ((uint32_t *)data.p)[i]);
	st_close(&x);
	TH_LOG("%lu processes killed with %u jobs in flight each", cycles,
	       KILL_JOBS);
}

TEST_HARNESS_MAIN
