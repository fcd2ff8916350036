// SPDX-License-Identifier: MIT
/*
 * spyre_trace: the driver's tracepoints (tracefs events/spyre/, see
 * driver/spyre_trace.h) fire with the right fields: a job's submit, run
 * (with the card's clock), done (with the card's start and end times
 * from its own completion record), an MMU fault with its VA, and BO
 * create/destroy with size and placement.  Needs root (tracefs); runs
 * only when named (make test's root guest runs it).
 */
#include <sys/mount.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define TRACEFS		"/sys/kernel/tracing"
#define TRACE_BUF	(1 << 20)

static int tr_write(const char *file, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), TRACEFS "/%s", file);
	return st_write_line(path, val);
}

/* The trace buffer's text into @buf (NUL-terminated). */
static int tr_read(char *buf, size_t len)
{
	int fd = open(TRACEFS "/trace", O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -errno;
	while (n + 1 < len && (r = read(fd, buf + n, len - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(fd);
	return 0;
}

/* The first line of @text holding every one of @want (NULL-ended). */
static const char *tr_find(const char *text, const char *const *want)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ?
	     strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		bool all = true;

		for (unsigned int i = 0; want[i] && all; i++) {
			const char *p = memmem(l, len, want[i], strlen(want[i]));

			all = p != NULL;
		}
		if (all)
			return l;
	}
	return NULL;
}

/* Value of "@key=" in the line at @line, as an unsigned number. */
static unsigned long long tr_field(const char *line, const char *key)
{
	char k[32];
	const char *p;

	snprintf(k, sizeof(k), " %s=", key);
	p = strstr(line, k);
	if (!p || (strchr(line, '\n') && p > strchr(line, '\n')))
		return ~0ull;
	return strtoull(p + strlen(k), NULL, 0);
}

FIXTURE(trace) {
	char *buf;
	bool on;
};

FIXTURE_SETUP(trace)
{
	if (geteuid())
		SKIP(return, "needs root (tracefs)");
	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	if (access(TRACEFS "/events", F_OK))
		mount("nodev", TRACEFS, "tracefs", 0, NULL);
	if (access(TRACEFS "/events/spyre/enable", W_OK))
		SKIP(return, "no tracefs or no spyre events");
	self->buf = malloc(TRACE_BUF);
	ASSERT_NE(NULL, self->buf);
	ASSERT_EQ(0, tr_write("trace", ""));
	ASSERT_EQ(0, tr_write("events/spyre/enable", "1"));
	self->on = true;
}

FIXTURE_TEARDOWN(trace)
{
	if (self->on)
		tr_write("events/spyre/enable", "0");
	free(self->buf);
}

TEST_F(trace, a_job_and_a_fault_leave_their_events)
{
	const char *l;
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;
	char seq[32];
	uint64_t seqno;

	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 64 * 1024, &b));
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, 8192, 8, 0x7472616365ull);
	ASSERT_EQ(0, st_submit_cs(&x, x.qid, &cs, NULL, 0, x.sync, 0));
	ASSERT_EQ(0, st_wait_status(x.fd, x.sync, ST_TIMEOUT_NS));
	/* ...and one that runs past its BO */
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, 1u << 20, 8, 1);
	ASSERT_EQ(-EFAULT, st_run(&x, &cs));
	st_close(&x);
	ASSERT_EQ(0, tr_write("events/spyre/enable", "0"));
	ASSERT_EQ(0, tr_read(self->buf, TRACE_BUF));

	/* the first job: submit, run, done (its own record: card times) */
	l = tr_find(self->buf, (const char *const[]){ "spyre_submit:",
						      "ndesc=1", NULL });
	ASSERT_NE(NULL, l) TH_LOG("%.2000s", self->buf);
	seqno = tr_field(l, "seqno");
	ASSERT_NE(~0ull, seqno);
	snprintf(seq, sizeof(seq), " seqno=%llu ", (unsigned long long)seqno);
	l = tr_find(self->buf, (const char *const[]){ "spyre_job_run:", seq,
						      NULL });
	ASSERT_NE(NULL, l);
	EXPECT_LT(0, tr_field(l, "card_ns"));
	l = tr_find(self->buf, (const char *const[]){ "spyre_job_done:", seq,
						      "err=0 ", NULL });
	ASSERT_NE(NULL, l);
	EXPECT_LT(0, tr_field(l, "card_start_ns"));
	EXPECT_LE(tr_field(l, "card_start_ns"), tr_field(l, "card_end_ns"));

	/* the fault: the job ends -EFAULT, the fault names a written VA */
	EXPECT_NE(NULL, tr_find(self->buf, (const char *const[]){
			"spyre_job_done:", "err=-14", NULL }));
	l = tr_find(self->buf, (const char *const[]){ "spyre_fault:", "write",
						      NULL });
	ASSERT_NE(NULL, l);
	EXPECT_LE(b.bo_va + b.bo_size, tr_field(l, "va"));

	/* the 64 KiB BO's life, in system memory (placement 1) */
	EXPECT_NE(NULL, tr_find(self->buf, (const char *const[]){
			"spyre_bo_create:", "size=65536 ", "placement=1", NULL }));
	EXPECT_NE(NULL, tr_find(self->buf, (const char *const[]){
			"spyre_bo_destroy:", "size=65536 ", "placement=1",
			NULL }));
}

TEST_HARNESS_MAIN
