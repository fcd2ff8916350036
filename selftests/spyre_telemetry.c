// SPDX-License-Identifier: MIT
/*
 * spyre_telemetry: what a client and an operator can read about the
 * card's use.  fdinfo_*: the DRM fdinfo keys of an open card
 * (/proc/self/fdinfo, Documentation/gpu/drm-usage-stats.rst) move with the
 * client's own work: busy time with its jobs, memory with its BOs, the
 * engine capacity with its queues.  telemetry_*: the card's sysfs
 * counters (docs/ABI/sysfs-driver-spyre) are readable by anyone and move
 * with the work, its faults and its queue; they keep counting across
 * resets and runtime suspend (spyre_power).  smi_*: spyre-smi's overview,
 * ps and JSON, seen from another process of the same user.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB	(1ull << 20)

/*
 * Value of fdinfo key @key of @fd, or -1: sizes ("KiB", "MiB") in bytes,
 * other values as printed (busy time in ns).
 */
static long long fdinfo(int fd, const char *key)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			char *end;

			v = strtoll(line + kl + 1, &end, 10);
			if (!strncmp(end, " KiB", 4))
				v <<= 10;
			else if (!strncmp(end, " MiB", 4))
				v <<= 20;
		}
	fclose(f);
	return v;
}

static bool fdinfo_has(int fd, const char *text)
{
	char path[64], line[256];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, text) != NULL;
	fclose(f);
	return found;
}

/*
 * Memory is counted for every file that holds a handle: a BO exported by
 * one file and imported by another is shared in both (system and device
 * memory alike), in their totals too, and active while a job uses it.
 */
TEST(fdinfo_shared_bo_counted_in_both_files)
{
	static const char *const region[2] = { "system", "device" };
	struct drm_spyre_memory_info mi;
	struct st_ctx x, y;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_open(&y, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_query_memory(x.fd, &mi));
	for (int d = 0; d < 2; d++) {
		char shared[32], total[32], active[32];
		long long xt, yt;
		uint32_t h, hy;
		uint64_t va;
		int fd;

		if (d && mi.devmem_total < 16 * MiB)
			break;
		snprintf(shared, sizeof(shared), "drm-shared-%s", region[d]);
		snprintf(total, sizeof(total), "drm-total-%s", region[d]);
		snprintf(active, sizeof(active), "drm-active-%s", region[d]);
		ASSERT_EQ(0, fdinfo(x.fd, shared));
		ASSERT_EQ(0, fdinfo(y.fd, shared));
		xt = fdinfo(x.fd, total);
		yt = fdinfo(y.fd, total);
		ASSERT_EQ(0, st_bo_new_flags(x.fd, 4 * MiB,
					     d ? DRM_SPYRE_BO_DEVICE : 0, &h,
					     &va));
		/* private to x until exported */
		EXPECT_EQ(0, fdinfo(x.fd, shared));
		EXPECT_EQ(xt + (long long)(4 * MiB), fdinfo(x.fd, total));
		ASSERT_EQ(0, drmPrimeHandleToFD(x.fd, h, DRM_CLOEXEC, &fd));
		ASSERT_EQ(0, drmPrimeFDToHandle(y.fd, fd, &hy));
		close(fd);
		EXPECT_EQ((long long)(4 * MiB), fdinfo(x.fd, shared))
			TH_LOG("%s", region[d]);
		EXPECT_EQ((long long)(4 * MiB), fdinfo(y.fd, shared))
			TH_LOG("%s", region[d]);
		EXPECT_EQ(yt + (long long)(4 * MiB), fdinfo(y.fd, total));
		EXPECT_EQ(0, fdinfo(y.fd, active));
		ASSERT_EQ(0, drmCloseBufferHandle(y.fd, hy));
		ASSERT_EQ(0, drmCloseBufferHandle(x.fd, h));
		EXPECT_EQ(0, fdinfo(x.fd, shared));
		EXPECT_EQ(yt, fdinfo(y.fd, total));
	}
	st_close(&y);
	st_close(&x);
}

TEST(fdinfo_keys_move_with_the_clients_work)
{
	long long busy0, busy1, sys0, dev0;
	struct drm_spyre_memory_info mi;
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;
	uint32_t h, q2;
	uint64_t va;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_TRUE(fdinfo_has(x.fd, "drm-driver:\tspyre"));
	ASSERT_LE(0, fdinfo(x.fd, "drm-client-id"));
	busy0 = fdinfo(x.fd, "drm-engine-compute");
	sys0 = fdinfo(x.fd, "drm-total-system");
	dev0 = fdinfo(x.fd, "drm-total-device");
	ASSERT_EQ(0, busy0);
	ASSERT_LE(0, sys0);
	ASSERT_EQ(0, dev0);
	/* the card is one engine: no capacity key (1 by default) */
	ASSERT_EQ(-1, fdinfo(x.fd, "drm-engine-capacity-compute"));

	/* memory: its own BOs, by placement */
	ASSERT_EQ(0, st_bo_new(x.fd, 4 * MiB, &h, &va));
	ASSERT_EQ(sys0 + (long long)(4 * MiB), fdinfo(x.fd, "drm-total-system"));
	ASSERT_EQ(0, st_query_memory(x.fd, &mi));
	if (mi.devmem_total >= 16 * MiB) {
		ASSERT_EQ(0, st_bo_new_flags(x.fd, 8 * MiB, DRM_SPYRE_BO_DEVICE,
					     &h, &va));
		ASSERT_EQ((long long)(8 * MiB),
			  fdinfo(x.fd, "drm-total-device"));
		ASSERT_EQ((long long)(8 * MiB),
			  fdinfo(x.fd, "drm-resident-device"));
	}

	/* busy time: grows with its jobs */
	ASSERT_EQ(0, st_buf_new(&x, 4 * MiB, &b));
	st_cs_reset(&cs);
	for (int i = 0; i < 8; i++)
		st_cs_fill(&cs, b.va, MiB, 4, i);
	ASSERT_EQ(0, st_run(&x, &cs));
	busy1 = fdinfo(x.fd, "drm-engine-compute");
	ASSERT_LT(busy0, busy1);

	/* a second queue: still one engine, the card (no capacity key) */
	ASSERT_EQ(0, st_queue_new(x.fd, DRM_SPYRE_PRIORITY_LOW, &q2));
	ASSERT_EQ(-1, fdinfo(x.fd, "drm-engine-capacity-compute"));
	/* a destroyed queue's time stays counted */
	ASSERT_EQ(0, st_queue_del(x.fd, x.qid));
	ASSERT_LE(busy1, fdinfo(x.fd, "drm-engine-compute"));
	TH_LOG("16 MiB of fills: %lld ns busy", busy1);
	st_close(&x);
}

/* Every counter of the card's sysfs telemetry and health, by name. */
static const char *const tel_names[] = {
	"busy_ns", "active_ns", "jobs_completed", "commands_completed",
	"bytes_moved", "mmu_faults", "fault_records_lost", "queue_errors",
	"jobs_in_flight", "mem_devmem_total", "mem_devmem_used",
	"mem_sysmem_used", "mem_userptr_used", "resets", "recoveries",
	"fatal_errors", "hangs", "lost_irqs", "spurious_irqs",
	"corrupt_completions", "jobs_replayed", "jobs_lost", "aer_errors",
};

static uint64_t tel(const char *name)
{
	uint64_t v = UINT64_MAX;

	if (st_sysfs_u64(0, name, &v))
		return UINT64_MAX;
	return v;
}

TEST(telemetry_counters_move_under_load_and_are_world_readable)
{
	uint64_t busy0, act0, jobs0, cmds0, bytes0, busy1, act1;
	long long fd_busy0, fd_busy1;
	struct st_ctx x;
	struct st_buf a, b;
	struct st_cs cs;
	char path[256];
	struct stat sb;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	for (unsigned int i = 0; i < ARRAY_SIZE(tel_names); i++) {
		ASSERT_EQ(0, st_sysfs_path(0, tel_names[i], path,
					   sizeof(path)));
		ASSERT_EQ(0, stat(path, &sb)) TH_LOG("%s", path);
		ASSERT_EQ(0444, sb.st_mode & 0777) TH_LOG("%s", path);
		ASSERT_NE(UINT64_MAX, tel(tel_names[i])) TH_LOG("%s", path);
	}

	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 4 * MiB, &a));
	ASSERT_EQ(0, st_buf_new(&x, 4 * MiB, &b));
	busy0 = tel("busy_ns");
	act0 = tel("active_ns");
	jobs0 = tel("jobs_completed");
	cmds0 = tel("commands_completed");
	bytes0 = tel("bytes_moved");
	fd_busy0 = fdinfo(x.fd, "drm-engine-compute");

	/* 4 MiB written by the fill, 4 MiB read and 4 MiB written by the copy */
	st_cs_reset(&cs);
	st_cs_fill(&cs, a.va, MiB / 2, 8, 0x74656c656d657472ull);
	st_cs_bytes(&cs, b.va, a.va, 4 * MiB);
	ASSERT_EQ(0, st_run(&x, &cs));
	ASSERT_EQ(0, memcmp(a.p, b.p, 4 * MiB));

	ASSERT_LE(jobs0 + 1, tel("jobs_completed"));
	ASSERT_LE(cmds0 + 2, tel("commands_completed"));
	ASSERT_LE(bytes0 + 12 * MiB, tel("bytes_moved"));
	busy1 = tel("busy_ns");
	act1 = tel("active_ns");
	fd_busy1 = fdinfo(x.fd, "drm-engine-compute");
	ASSERT_LT(busy0, busy1);
	ASSERT_LT(act0, act1);
	/* the union of the jobs' spans never exceeds their sum */
	ASSERT_LE(act1 - act0, busy1 - busy0);
	/* the client's own busy time is part of the card's */
	ASSERT_LT(fd_busy0, fd_busy1);
	ASSERT_LE((uint64_t)(fd_busy1 - fd_busy0), busy1 - busy0);
	TH_LOG("card busy +%llu ns, active +%llu ns, the client's +%lld ns",
	       (unsigned long long)(busy1 - busy0),
	       (unsigned long long)(act1 - act0), fd_busy1 - fd_busy0);
	st_close(&x);
}

TEST(telemetry_jobs_in_flight_counts_queued_work)
{
	uint64_t base, held, left = 0;
	struct st_buf gate, m;
	struct st_ctx x;
	struct st_cs cs;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&x, 4096, &m));
	base = tel("jobs_in_flight");

	/* one job waits for the CPU to open a gate, 15 more queue behind it */
	st_cs_reset(&cs);
	st_cs_sem(&cs, false, 0, gate.va, 1);
	ASSERT_EQ(0, st_submit_cs(&x, x.qid, &cs, NULL, 0, 0, 0));
	for (int i = 0; i < 15; i++) {
		st_cs_reset(&cs);
		st_cs_fill(&cs, m.va + 8 * i, 1, 8, i);
		ASSERT_EQ(0, st_submit_cs(&x, x.qid, &cs, NULL, 0,
					  i == 14 ? x.sync : 0, 0));
	}
	held = tel("jobs_in_flight");
	ASSERT_LE(base + 16, held);
	__atomic_store_n((uint64_t *)gate.p, 1, __ATOMIC_SEQ_CST);
	ASSERT_EQ(0, st_wait_status(x.fd, x.sync, ST_TIMEOUT_NS));
	/* retired jobs are freed by the scheduler's work soon after */
	for (int i = 0; i < 500; i++) {
		left = tel("jobs_in_flight");
		if (left <= base)
			break;
		usleep(10000);
	}
	ASSERT_GE(base, left);
	TH_LOG("jobs in flight: %llu while held, %llu after",
	       (unsigned long long)held, (unsigned long long)left);
	st_close(&x);
}

TEST(telemetry_faults_and_queue_errors_are_counted)
{
	uint64_t faults0, errors0;
	struct st_ctx x;
	struct st_buf a;
	struct st_cs cs;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 64 * 1024, &a));
	faults0 = tel("mmu_faults");
	errors0 = tel("queue_errors");
	/* a fill that runs past its 64 KiB BO into unmapped VA */
	st_cs_reset(&cs);
	st_cs_fill(&cs, a.va, 1ull << 20, 8, 1);
	ASSERT_EQ(-EFAULT, st_run(&x, &cs));
	/*
	 * The error vector counts them; the fence may signal from the
	 * completion vector before that interrupt is served (up to 1 s).
	 */
	for (int i = 0; i < 100 && (tel("mmu_faults") < faults0 + 1 ||
				    tel("queue_errors") < errors0 + 1); i++)
		usleep(10000);
	ASSERT_LE(faults0 + 1, tel("mmu_faults"));
	ASSERT_LE(errors0 + 1, tel("queue_errors"));
	st_close(&x);
}

/* ---- spyre-smi ---------------------------------------------------------- */

#define SMI_OUT_MAX	(256 * 1024)

/*
 * Run @argv (PATH lookup) with stdout into @out (NUL-terminated, up to
 * @len - 1 bytes) and stderr to /dev/null; its exit status, or -1.
 */
static int run_cmd(char *const argv[], char *out, size_t len)
{
	size_t n = 0;
	int p[2], st;
	ssize_t r;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(p[1], 1);
		dup2(null, 2);
		close(p[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while (n + 1 < len && (r = read(p[0], out + n, len - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(p[0]);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * Parse spyre-smi's JSON report in @text, check the fields every report
 * has, and print it on one line for the host's schema check
 * (tests/smi_schema.py reads the "# smi-json: " lines of the guest log).
 */
static json_object *smi_report(const char *text, const char *command)
{
	json_object *o = json_tokener_parse(text), *v;

	if (!o)
		return NULL;
	if (!json_object_object_get_ex(o, "command", &v) ||
	    strcmp(json_object_get_string(v), command) ||
	    !json_object_object_get_ex(o, "schema_version", &v) ||
	    json_object_get_int(v) != 1) {
		json_object_put(o);
		return NULL;
	}
	printf("# smi-json: %s\n",
	       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	fflush(stdout);
	return o;
}

/* The member at dotted @path ("memory.device.total_bytes") of @o, or NULL. */
static json_object *jat(json_object *o, const char *path)
{
	char key[64];

	while (o && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		if (!json_object_object_get_ex(o, key, &o))
			return NULL;
		path += n + (path[n] == '.');
	}
	return o;
}

/* jat() as an integer; a missing member reads -1. */
static long long jget(json_object *o, const char *path)
{
	json_object *v = jat(o, path);

	return v ? json_object_get_int64(v) : -1;
}

static const char *jstr(json_object *o, const char *k)
{
	json_object *v;

	return json_object_object_get_ex(o, k, &v) ?
	       json_object_get_string(v) : "";
}

/*
 * A child process that holds card 0 under the name "smi-holder": a 4 MiB
 * BO and one 4 MiB fill behind it; when @busy it keeps submitting fills
 * until holder_stop() (however slow the guest, the card is in use for the
 * whole of the caller's measurement), else it just waits for that.
 */
struct holder {
	pid_t pid;
	int ready[2];	/* the child writes one byte after its first job */
	int go[2];	/* closing go[1] lets it exit */
};

static int holder_start(struct holder *h, bool busy)
{
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;
	char c = 1;

	if (pipe(h->ready) || pipe(h->go))
		return -1;
	h->pid = fork();
	if (h->pid < 0)
		return -1;
	if (h->pid) {
		close(h->ready[1]);
		close(h->go[0]);
		return read(h->ready[0], &c, 1) == 1 ? 0 : -1;
	}
	close(h->go[1]);
	prctl(PR_SET_NAME, "smi-holder");
	if (st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL) ||
	    st_buf_new(&x, 4 * MiB, &b))
		_exit(1);
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, MiB / 2, 8, 0x686f6c64ull);
	if (st_run(&x, &cs))
		_exit(1);
	if (write(h->ready[1], &c, 1) != 1)
		_exit(1);
	if (busy && fcntl(h->go[0], F_SETFL, O_NONBLOCK))
		_exit(1);
	while (busy && read(h->go[0], &c, 1) < 0 && errno == EAGAIN)
		if (st_run(&x, &cs))
			_exit(1);
	while (read(h->go[0], &c, 1) > 0)
		;
	st_close(&x);
	_exit(0);
}

/* Let the holder exit; true if it did its work without an error. */
static bool holder_stop(struct holder *h)
{
	int st;

	close(h->go[1]);
	close(h->ready[0]);
	return waitpid(h->pid, &st, 0) == h->pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

TEST(smi_ps_json_lists_another_process_of_the_user)
{
	char *out = malloc(SMI_OUT_MAX);
	char *argv[] = { "spyre-smi", "ps", "--json", NULL };
	struct spyre_device_desc d[4];
	json_object *r, *procs;
	struct holder h;
	int found = 0;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_NE(NULL, out);
	ASSERT_LE(1, spyre_device_list(d, 4));
	ASSERT_EQ(0, holder_start(&h, false));

	ASSERT_EQ(0, run_cmd(argv, out, SMI_OUT_MAX));
	r = smi_report(out, "ps");
	ASSERT_NE(NULL, r) TH_LOG("%s", out);
	procs = jat(r, "processes");
	ASSERT_NE(NULL, procs);
	for (size_t i = 0; i < json_object_array_length(procs); i++) {
		json_object *p = json_object_array_get_idx(procs, i);

		if (jget(p, "pid") != h.pid)
			continue;
		found++;
		EXPECT_STREQ("smi-holder", jstr(p, "name"));
		EXPECT_STREQ(d[0].pci_addr, jstr(p, "pci_addr"));
		EXPECT_EQ(0, jget(p, "card_index"));
		EXPECT_LE(4 * MiB, jget(p, "memory.system_bytes"));
		EXPECT_LT(0, jget(p, "busy_ns"));
		EXPECT_EQ(1, jget(p, "queues"));
	}
	EXPECT_EQ(1, found) TH_LOG("%s", out);
	json_object_put(r);
	EXPECT_TRUE(holder_stop(&h));
	free(out);
}

TEST(smi_overview_json_shows_use_while_a_client_works)
{
	char *out = malloc(SMI_OUT_MAX);
	char *argv[] = { "spyre-smi", "--json", "--interval", "400", NULL };
	struct spyre_device_desc d[4];
	json_object *r, *cards, *c0;
	struct holder h;
	uint64_t total;
	int n;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_NE(NULL, out);
	n = spyre_device_list(d, 4);
	ASSERT_LE(1, n);
	ASSERT_EQ(0, st_sysfs_u64(0, "mem_devmem_total", &total));
	ASSERT_EQ(0, holder_start(&h, true));

	ASSERT_EQ(0, run_cmd(argv, out, SMI_OUT_MAX));
	r = smi_report(out, "overview");
	ASSERT_NE(NULL, r) TH_LOG("%s", out);
	cards = jat(r, "cards");
	ASSERT_NE(NULL, cards);
	ASSERT_EQ(n, json_object_array_length(cards));
	c0 = json_object_array_get_idx(cards, 0);
	EXPECT_STREQ(d[0].pci_addr, jstr(c0, "pci_addr"));
	EXPECT_STREQ("active", jstr(c0, "power"));
	/* health sums up the card's history (earlier suites' hangs count) */
	EXPECT_STREQ(tel("fatal_errors") || tel("hangs") ||
		     tel("corrupt_completions") || tel("jobs_lost") ||
		     tel("aer_errors") ? "warn" : "ok",
		     jstr(jat(c0, "health"), "status"));
	EXPECT_EQ((long long)tel("hangs"), jget(c0, "health.hangs"));
	EXPECT_EQ((long long)total, jget(c0, "memory.device.total_bytes"));
	EXPECT_LE(4 * MiB, jget(c0, "memory.system.used_bytes"));
	EXPECT_LE(1, jget(c0, "counters.jobs_completed"));
	/* the holder submits fills throughout the interval: some use shows */
	ASSERT_NE(NULL, jat(c0, "utilization.active_pct"));
	EXPECT_LT(0, json_object_get_double(jat(c0, "utilization.active_pct")));
	json_object_put(r);
	EXPECT_TRUE(holder_stop(&h));
	free(out);
}

TEST(smi_info_and_list_json_describe_the_cards)
{
	char *out = malloc(SMI_OUT_MAX);
	char *info[] = { "spyre-smi", "--json", "info", "0", NULL };
	char *list[] = { "spyre-smi", "list", "-j", NULL };
	struct spyre_device_desc d[4];
	json_object *r, *cards, *c0;
	int n;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_NE(NULL, out);
	n = spyre_device_list(d, 4);
	ASSERT_LE(1, n);

	ASSERT_EQ(0, run_cmd(info, out, SMI_OUT_MAX));
	r = smi_report(out, "info");
	ASSERT_NE(NULL, r) TH_LOG("%s", out);
	ASSERT_TRUE(json_object_object_get_ex(r, "cards", &cards));
	ASSERT_EQ(1, json_object_array_length(cards));
	c0 = json_object_array_get_idx(cards, 0);
	EXPECT_STREQ(d[0].pci_addr, jstr(c0, "pci_addr"));
	EXPECT_STREQ("spyre", jstr(jat(c0, "driver"), "name"));
	EXPECT_LT(0, jget(c0, "num_queues"));
	EXPECT_LT(0, jget(c0, "max_cmd_size"));
	json_object_put(r);

	ASSERT_EQ(0, run_cmd(list, out, SMI_OUT_MAX));
	r = smi_report(out, "list");
	ASSERT_NE(NULL, r) TH_LOG("%s", out);
	ASSERT_TRUE(json_object_object_get_ex(r, "cards", &cards));
	ASSERT_EQ(n, json_object_array_length(cards));
	for (int i = 0; i < n; i++) {
		c0 = json_object_array_get_idx(cards, i);
		EXPECT_STREQ(d[i].pci_addr, jstr(c0, "pci_addr"));
		EXPECT_STREQ(d[i].devnode, jstr(c0, "node"));
		EXPECT_EQ(0x1014, jget(c0, "vendor_id"));
	}
	json_object_put(r);
	free(out);
}

/* --loop: one JSON object per line, one line per period. */
TEST(smi_loop_json_is_one_object_per_line)
{
	char line[SMI_OUT_MAX / 4];
	json_object *o;
	int p[2], st;
	pid_t pid;
	FILE *f;

	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execlp("spyre-smi", "spyre-smi", "--loop", "1", "--json", "ps",
		       (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	ASSERT_NE(NULL, f);
	for (int i = 0; i < 2; i++) {
		ASSERT_NE(NULL, fgets(line, sizeof(line), f));
		ASSERT_EQ('\n', line[strlen(line) - 1]);
		o = smi_report(line, "ps");
		ASSERT_NE(NULL, o) TH_LOG("line %d: %s", i, line);
		json_object_put(o);
	}
	kill(pid, SIGTERM);
	fclose(f);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st));
}

TEST(smi_rejects_bad_arguments)
{
	static const char *const bad[][5] = {
		{ "spyre-smi", "--loop", "0" }, { "spyre-smi", "-l", "1x" },
		{ "spyre-smi", "-l", "-1" }, { "spyre-smi", "--interval", "5" },
		{ "spyre-smi", "--interval=abc" }, { "spyre-smi", "frobnicate" },
		{ "spyre-smi", "list", "extra" }, { "spyre-smi", "--bogus" },
		{ "spyre-smi", "ps", "1" },
	};
	char out[4096];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(2, run_cmd((char *const *)bad[i], out, sizeof(out)))
			TH_LOG("%s %s %s", bad[i][1], bad[i][2] ?: "",
			       bad[i][3] ?: "");
		EXPECT_STREQ("", out);
	}
}

TEST_HARNESS_MAIN
