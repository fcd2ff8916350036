// SPDX-License-Identifier: MIT
/*
 * spyre-smi - what an operator sees of the Spyre cards of a machine: the
 * cards, their use and health, and the processes using them.
 *
 *   spyre-smi [OPTIONS]                  overview of every card, one screen
 *   spyre-smi [OPTIONS] list             one line per visible card
 *   spyre-smi [OPTIONS] info [CARD...]   properties and counters (default:
 *                                        every visible card)
 *   spyre-smi [OPTIONS] ps               processes using the cards
 *
 *   -j, --json           JSON instead of text: one object per report
 *                        (docs/spyre-smi.rst, docs/spyre-smi.schema.json),
 *                        on one line in loop mode
 *   -l, --loop SECS      report again every SECS seconds (1-86400), until
 *                        interrupted
 *   -i, --interval MS    the overview's utilisation: the counters' growth
 *                        over MS ms (10-60000, default 500) between two
 *                        samples; in loop mode, over the loop period
 *   -h, --help           this text
 *   -V, --version        the tool's and libspyre's version
 *   CARD                 a logical index (as in SPYRE_VISIBLE_DEVICES) or
 *                        a PCI address
 *
 * The overview, list and ps read sysfs and /proc only: they never open a
 * card and never wake a runtime-suspended one.  info opens each card (its
 * driver version and limits come from the driver).  ps reads
 * /proc/PID/fdinfo (Documentation/gpu/drm-usage-stats.rst), which needs
 * ptrace access to the process: a user sees their own processes, root
 * sees everyone's.
 *
 * Exit status: 0, 1 when a card or report could not be read, 2 for bad
 * usage.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <spyre/spyre.h>

/* The JSON reports' schema version: docs/spyre-smi.schema.json. */
#define SMI_SCHEMA_VERSION	1
#define SMI_MAX_CARDS		64
#define MiB			(1024.0 * 1024.0)

static struct {
	bool json;
	unsigned int loop_s;		/* 0: once */
	unsigned int interval_ms;
} opt = { .interval_ms = 500 };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-smi [OPTIONS] [list | info [CARD...] | ps]\n"
		"  (no command)         overview of every card\n"
		"  list                 one line per visible card\n"
		"  info [CARD...]       properties and counters (CARD: index or PCI address)\n"
		"  ps                   processes using the cards\n"
		"  -j, --json           JSON output (one object per line with --loop)\n"
		"  -l, --loop SECS      repeat every SECS seconds (1-86400)\n"
		"  -i, --interval MS    utilisation sampling interval (10-60000, default 500)\n"
		"  -h, --help           this text\n"
		"  -V, --version        version\n");
}

/* Parse all of @s as a decimal in [@min, @max]; false if it is not one. */
static bool parse_uint(const char *s, unsigned long min, unsigned long max,
		       unsigned int *out)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = (unsigned int)v;
	return true;
}

/* optarg as the value of option @name, or false after saying why not. */
static bool opt_uint(const char *name, unsigned long min, unsigned long max,
		     const char *unit, unsigned int *out)
{
	if (parse_uint(optarg, min, max, out))
		return true;
	fprintf(stderr, "spyre-smi: %s: '%s' is not a number of %s in %lu-%lu\n",
		name, optarg, unit, min, max);
	return false;
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- JSON helpers ------------------------------------------------------ */

static void j_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static void j_str(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void j_num(json_object *o, const char *k, double v)
{
	json_object_object_add(o, k, json_object_new_double(v));
}

/* A report: the fields every command's object starts with. */
static json_object *j_report(const char *command)
{
	json_object *o = json_object_new_object();

	j_str(o, "schema", "spyre-smi");
	j_u64(o, "schema_version", SMI_SCHEMA_VERSION);
	j_str(o, "libspyre_version", spyre_version());
	j_str(o, "command", command);
	j_u64(o, "time_unix_ns", now_ns(CLOCK_REALTIME));
	return o;
}

static void j_print(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_NOSLASHESCAPE |
		(opt.loop_s ? JSON_C_TO_STRING_PLAIN :
		 JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED)));
	json_object_put(o);
}

static void j_desc(json_object *o, const struct spyre_device_desc *d)
{
	j_u64(o, "index", d->index);
	j_u64(o, "phys_index", d->phys_index);
	j_str(o, "pci_addr", d->pci_addr);
	j_str(o, "node", d->devnode);
	j_u64(o, "vendor_id", d->vendor_id);
	j_u64(o, "device_id", d->device_id);
	j_u64(o, "subsystem_vendor_id", d->subsystem_vendor_id);
	j_u64(o, "subsystem_id", d->subsystem_id);
}

/* Health is "ok" while none of the events that lose or risk work ever
 * happened since the driver bound the card; resets alone are no fault. */
static const char *health_of(const struct spyre_telemetry *t)
{
	return t->fatal_errors || t->hangs || t->corrupt_completions ||
	       t->jobs_lost || t->aer_errors ? "warn" : "ok";
}

static void j_telemetry(json_object *o, const struct spyre_telemetry *t)
{
	json_object *mem = json_object_new_object(), *m;
	json_object *c = json_object_new_object();
	json_object *h = json_object_new_object();
	char ver[16];

	snprintf(ver, sizeof(ver), "%u.%u", t->hw_version >> 16,
		 t->hw_version & 0xffff);
	j_str(o, "hw_version", ver);
	j_u64(o, "num_cores", t->num_cores);
	j_u64(o, "num_queues", t->num_queues);
	j_u64(o, "num_contexts", t->num_contexts);
	j_str(o, "power", t->runtime_suspended ? "suspended" : "active");
	j_u64(o, "jobs_in_flight", t->jobs_in_flight);

	m = json_object_new_object();
	j_u64(m, "used_bytes", t->devmem_used);
	j_u64(m, "total_bytes", t->devmem_total);
	json_object_object_add(mem, "device", m);
	m = json_object_new_object();
	j_u64(m, "used_bytes", t->sysmem_used);
	json_object_object_add(mem, "system", m);
	m = json_object_new_object();
	j_u64(m, "used_bytes", t->userptr_used);
	json_object_object_add(mem, "userptr", m);
	json_object_object_add(o, "memory", mem);

	j_u64(c, "busy_ns", t->busy_ns);
	j_u64(c, "active_ns", t->active_ns);
	j_u64(c, "jobs_completed", t->jobs_completed);
	j_u64(c, "commands_completed", t->commands_completed);
	j_u64(c, "bytes_moved", t->bytes_moved);
	j_u64(c, "mmu_faults", t->mmu_faults);
	j_u64(c, "fault_records_lost", t->fault_records_lost);
	j_u64(c, "queue_errors", t->queue_errors);
	json_object_object_add(o, "counters", c);

	j_str(h, "status", health_of(t));
	j_u64(h, "resets", t->resets);
	j_u64(h, "recoveries", t->recoveries);
	j_u64(h, "fatal_errors", t->fatal_errors);
	j_u64(h, "hangs", t->hangs);
	j_u64(h, "lost_irqs", t->lost_irqs);
	j_u64(h, "spurious_irqs", t->spurious_irqs);
	j_u64(h, "corrupt_completions", t->corrupt_completions);
	j_u64(h, "jobs_replayed", t->jobs_replayed);
	j_u64(h, "jobs_lost", t->jobs_lost);
	j_u64(h, "aer_errors", t->aer_errors);
	json_object_object_add(o, "health", h);
}

/* ---- discovery --------------------------------------------------------- */

static int list_cards(struct spyre_device_desc *d)
{
	int n = spyre_device_list(d, SMI_MAX_CARDS);

	if (n < 0)
		fprintf(stderr, "spyre-smi: discovery failed: %s%s\n",
			spyre_strerror(n), n == -EINVAL &&
			getenv("SPYRE_VISIBLE_DEVICES") ?
			" (check SPYRE_VISIBLE_DEVICES: distinct indices, "
			"comma-separated)" : "");
	return n < SMI_MAX_CARDS ? n : SMI_MAX_CARDS;
}

/* ---- list -------------------------------------------------------------- */

static int cmd_list(void)
{
	struct spyre_device_desc d[SMI_MAX_CARDS];
	int n = list_cards(d);
	json_object *r, *a;

	if (n < 0)
		return 1;
	if (opt.json) {
		r = j_report("list");
		a = json_object_new_array();
		for (int i = 0; i < n; i++) {
			json_object *c = json_object_new_object();

			j_desc(c, &d[i]);
			json_object_array_add(a, c);
		}
		json_object_object_add(r, "cards", a);
		j_print(r);
		return 0;
	}
	printf("%-5s %-5s %-14s %-20s %s\n", "IDX", "PHYS", "PCI", "NODE",
	       "IDS");
	for (int i = 0; i < n; i++)
		printf("%-5u %-5u %-14s %-20s %04x:%04x %04x:%04x\n",
		       d[i].index, d[i].phys_index, d[i].pci_addr,
		       d[i].devnode, d[i].vendor_id, d[i].device_id,
		       d[i].subsystem_vendor_id, d[i].subsystem_id);
	if (n == 0)
		printf("no Spyre devices found\n");
	return 0;
}

/* ---- overview ---------------------------------------------------------- */

struct sample {
	struct spyre_device_desc desc;
	struct spyre_telemetry t;
	int err;
};

static int sample_all(struct sample *s)
{
	struct spyre_device_desc d[SMI_MAX_CARDS];
	int n = list_cards(d);

	for (int i = 0; i < n; i++) {
		s[i].desc = d[i];
		s[i].err = spyre_device_telemetry(&d[i], &s[i].t);
	}
	return n;
}

/* The same card (by PCI address) in an earlier sample, or NULL. */
static const struct sample *find_prev(const struct sample *prev, int nprev,
				      const struct sample *cur)
{
	for (int i = 0; i < nprev; i++)
		if (!prev[i].err && !strcmp(prev[i].desc.pci_addr,
					    cur->desc.pci_addr))
			return &prev[i];
	return NULL;
}

/*
 * Utilisation between two samples: the fraction of the time the card had
 * a job in progress (@active, 0..1), and how many queues ran on average
 * while it had (@queues).  False if there is no earlier sample or a
 * counter went back (the driver was rebound).
 */
static bool utilisation(const struct sample *p, const struct sample *c,
			double *active, double *queues, double *secs)
{
	uint64_t dt, da, db;

	if (!p || c->t.sample_ns <= p->t.sample_ns ||
	    c->t.active_ns < p->t.active_ns || c->t.busy_ns < p->t.busy_ns)
		return false;
	dt = c->t.sample_ns - p->t.sample_ns;
	da = c->t.active_ns - p->t.active_ns;
	db = c->t.busy_ns - p->t.busy_ns;
	*active = (double)da / (double)dt;
	if (*active > 1.0)
		*active = 1.0;	/* card clock and host clock drift apart */
	*queues = da ? (double)db / (double)da : 0.0;
	*secs = (double)dt / 1e9;
	return true;
}

static int report_overview(const struct sample *prev, int nprev,
			   const struct sample *cur, int n)
{
	double act, qs, secs = 0;
	json_object *r, *a;
	int rc = 0;

	if (opt.json) {
		r = j_report("overview");
		a = json_object_new_array();
		for (int i = 0; i < n; i++) {
			json_object *c = json_object_new_object();

			j_desc(c, &cur[i].desc);
			if (cur[i].err) {
				j_str(c, "error", spyre_strerror(cur[i].err));
				rc = 1;
			} else {
				j_telemetry(c, &cur[i].t);
				if (utilisation(find_prev(prev, nprev, &cur[i]),
						&cur[i], &act, &qs, &secs)) {
					json_object *u =
						json_object_new_object();

					j_num(u, "active_pct", act * 100.0);
					j_num(u, "busy_queues_avg", qs);
					j_u64(u, "interval_ms",
					      (uint64_t)(secs * 1000.0 + 0.5));
					json_object_object_add(c, "utilization",
							       u);
				}
			}
			json_object_array_add(a, c);
		}
		json_object_object_add(r, "cards", a);
		j_print(r);
		return rc;
	}

	printf("spyre-smi: libspyre %s, %d card%s\n", spyre_version(), n,
	       n == 1 ? "" : "s");
	if (n == 0) {
		printf("no Spyre devices found\n");
		return 0;
	}
	printf("%-3s %-12s %-4s %-9s %5s %6s %5s %15s %10s %6s %s\n",
	       "IDX", "PCI", "HW", "POWER", "UTIL", "QUEUES", "JOBS",
	       "DEVMEM MiB", "SYSMEM MiB", "RESETS", "HEALTH");
	for (int i = 0; i < n; i++) {
		const struct spyre_telemetry *t = &cur[i].t;
		char util[16] = "-", qbuf[16] = "-", ver[16], mem[48];

		if (cur[i].err) {
			printf("%-3u %-12s (%s)\n", cur[i].desc.index,
			       cur[i].desc.pci_addr + 5,
			       spyre_strerror(cur[i].err));
			rc = 1;
			continue;
		}
		if (utilisation(find_prev(prev, nprev, &cur[i]), &cur[i], &act,
				&qs, &secs)) {
			snprintf(util, sizeof(util), "%.0f%%", act * 100.0);
			snprintf(qbuf, sizeof(qbuf), "%.1f", qs);
		}
		snprintf(ver, sizeof(ver), "%u.%u", t->hw_version >> 16,
			 t->hw_version & 0xffff);
		snprintf(mem, sizeof(mem), "%.1f/%.0f",
			 (double)t->devmem_used / MiB,
			 (double)t->devmem_total / MiB);
		printf("%-3u %-12s %-4s %-9s %5s %6s %5llu %15s %10.1f %6llu %s\n",
		       cur[i].desc.index, cur[i].desc.pci_addr + 5, ver,
		       t->runtime_suspended ? "suspended" : "active", util,
		       qbuf, (unsigned long long)t->jobs_in_flight, mem,
		       (double)(t->sysmem_used + t->userptr_used) / MiB,
		       (unsigned long long)t->resets, health_of(t));
	}
	if (secs > 0)
		printf("UTIL: time with a job in progress over the last %.2f s; "
		       "QUEUES: queues busy at once, on average, meanwhile\n",
		       secs);
	return rc;
}

static int cmd_overview(void)
{
	static struct sample a[SMI_MAX_CARDS], b[SMI_MAX_CARDS];
	struct sample *prev = a, *cur = b, *tmp;
	int nprev, n, rc;

	nprev = sample_all(prev);
	if (nprev < 0)
		return 1;
	sleep_ms(opt.interval_ms);
	for (;;) {
		n = sample_all(cur);
		if (n < 0)
			return 1;
		rc = report_overview(prev, nprev, cur, n);
		if (!opt.loop_s)
			return rc;
		fflush(stdout);
		if (!opt.json)
			putchar('\n');
		sleep_ms(opt.loop_s * 1000);
		tmp = prev;
		prev = cur;
		cur = tmp;
		nprev = n;
	}
}

/* ---- info -------------------------------------------------------------- */

static const struct {
	uint64_t bit;
	const char *name;
} cap_names[] = {
	{ SPYRE_DEV_CAP_FP16, "fp16" }, { SPYRE_DEV_CAP_BF16, "bf16" },
	{ SPYRE_DEV_CAP_FP8, "fp8" }, { SPYRE_DEV_CAP_INT8, "int8" },
	{ SPYRE_DEV_CAP_MMU, "mmu" }, { SPYRE_DEV_CAP_SEM, "sem" },
	{ SPYRE_DEV_CAP_KERNEL, "kernel" },
};

static int open_arg(const char *arg, struct spyre_device **dev)
{
	unsigned int idx;

	if (parse_uint(arg, 0, UINT_MAX, &idx))
		return spyre_device_open(idx, dev);
	return spyre_device_open_pci(arg, dev);
}

static void print_info_text(const struct spyre_device_info *in,
			    const struct spyre_telemetry *t, int terr)
{
	printf("card %u: %s (%s)\n", in->desc.index, in->desc.pci_addr,
	       in->desc.devnode);
	printf("  pci ids:            %04x:%04x subsystem %04x:%04x\n",
	       in->desc.vendor_id, in->desc.device_id,
	       in->desc.subsystem_vendor_id, in->desc.subsystem_id);
	printf("  driver:             %s %d.%d.%d\n", in->driver_name,
	       in->driver_major, in->driver_minor, in->driver_patch);
	printf("  hw version:         %u.%u\n", in->hw_version >> 16,
	       in->hw_version & 0xffff);
	printf("  cores, queues, contexts: %u, %u, %u\n", in->num_cores,
	       in->num_queues, in->num_contexts);
	printf("  caps:              ");
	for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
		if (in->caps & cap_names[i].bit)
			printf(" %s", cap_names[i].name);
	printf("\n  va range:           0x%llx-0x%llx\n",
	       (unsigned long long)in->va_start,
	       (unsigned long long)in->va_end);
	printf("  max command stream: %u bytes\n", in->max_cmd_size);
	if (terr) {
		printf("  telemetry:          (%s)\n", spyre_strerror(terr));
		return;
	}
	printf("  device memory:      %.1f of %.1f MiB used\n",
	       (double)t->devmem_used / MiB, (double)t->devmem_total / MiB);
	printf("  system memory:      %.1f MiB in BOs, %.1f MiB registered\n",
	       (double)t->sysmem_used / MiB, (double)t->userptr_used / MiB);
	printf("  jobs:               %llu completed, %llu in flight, %llu commands\n",
	       (unsigned long long)t->jobs_completed,
	       (unsigned long long)t->jobs_in_flight,
	       (unsigned long long)t->commands_completed);
	printf("  card time:          %.3f s busy (all queues), %.3f s active\n",
	       (double)t->busy_ns / 1e9, (double)t->active_ns / 1e9);
	printf("  bytes moved:        %.1f MiB\n", (double)t->bytes_moved / MiB);
	printf("  errors:             %llu MMU faults (%llu records lost), %llu queue errors\n",
	       (unsigned long long)t->mmu_faults,
	       (unsigned long long)t->fault_records_lost,
	       (unsigned long long)t->queue_errors);
	printf("  health:             %s: %llu resets (%llu recoveries), %llu fatal errors, %llu hangs,\n"
	       "                      %llu lost and %llu spurious interrupts, %llu corrupt completions,\n"
	       "                      %llu jobs replayed, %llu lost, %llu PCIe errors\n",
	       health_of(t), (unsigned long long)t->resets,
	       (unsigned long long)t->recoveries,
	       (unsigned long long)t->fatal_errors,
	       (unsigned long long)t->hangs,
	       (unsigned long long)t->lost_irqs,
	       (unsigned long long)t->spurious_irqs,
	       (unsigned long long)t->corrupt_completions,
	       (unsigned long long)t->jobs_replayed,
	       (unsigned long long)t->jobs_lost,
	       (unsigned long long)t->aer_errors);
}

static json_object *info_json(const struct spyre_device_info *in,
			      const struct spyre_telemetry *t, int terr)
{
	json_object *c = json_object_new_object(), *d, *caps;
	char ver[48];

	j_desc(c, &in->desc);
	d = json_object_new_object();
	j_str(d, "name", in->driver_name);
	snprintf(ver, sizeof(ver), "%d.%d.%d", in->driver_major,
		 in->driver_minor, in->driver_patch);
	j_str(d, "version", ver);
	json_object_object_add(c, "driver", d);
	caps = json_object_new_array();
	for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
		if (in->caps & cap_names[i].bit)
			json_object_array_add(caps, json_object_new_string(
						      cap_names[i].name));
	json_object_object_add(c, "caps", caps);
	j_u64(c, "va_start", in->va_start);
	j_u64(c, "va_end", in->va_end);
	j_u64(c, "max_cmd_size", in->max_cmd_size);
	if (terr)
		j_str(c, "error", spyre_strerror(terr));
	else
		j_telemetry(c, t);
	return c;
}

static int info_one(struct spyre_device *dev, json_object *cards)
{
	struct spyre_device_info in;
	struct spyre_telemetry t;
	int ret = spyre_device_get_info(dev, &in), terr;

	if (ret) {
		fprintf(stderr, "spyre-smi: info: %s\n", spyre_strerror(ret));
		return 1;
	}
	terr = spyre_device_telemetry(&in.desc, &t);
	if (cards)
		json_object_array_add(cards, info_json(&in, &t, terr));
	else
		print_info_text(&in, &t, terr);
	return terr ? 1 : 0;
}

static int cmd_info(int argc, char **argv)
{
	struct spyre_device_desc d[SMI_MAX_CARDS];
	json_object *r = NULL, *cards = NULL;
	struct spyre_device *dev;
	int rc = 0, ret, n = 0;

	if (argc == 0) {
		n = list_cards(d);
		if (n < 0)
			return 1;
	}
	for (;;) {
		if (opt.json) {
			r = j_report("info");
			cards = json_object_new_array();
		}
		if (argc == 0 && n == 0 && !opt.json)
			printf("no Spyre devices found\n");
		for (int i = 0; i < (argc ? argc : n); i++) {
			ret = argc ? open_arg(argv[i], &dev) :
				     spyre_device_open_path(d[i].devnode, &dev);
			if (ret) {
				fprintf(stderr, "spyre-smi: open %s: %s\n",
					argc ? argv[i] : d[i].devnode,
					spyre_strerror(ret));
				rc = 1;
				continue;
			}
			rc |= info_one(dev, cards);
			spyre_device_close(dev);
		}
		if (opt.json) {
			json_object_object_add(r, "cards", cards);
			j_print(r);
		}
		if (!opt.loop_s)
			return rc;
		fflush(stdout);
		sleep_ms(opt.loop_s * 1000);
	}
}

/* ---- ps ---------------------------------------------------------------- */

/* One DRM client (an open file description) of a Spyre card. */
struct client {
	int pid;
	char name[32];
	char pdev[16];
	uint64_t client_id;
	uint64_t busy_ns;
	uint64_t capacity;
	uint64_t sys_bytes;
	uint64_t dev_bytes;
};

/* "N", "N KiB" or "N MiB" (drm_print_memory_stats()) in bytes. */
static uint64_t fdinfo_size(const char *v)
{
	char *end;
	uint64_t n = strtoull(v, &end, 10);

	while (*end == ' ')
		end++;
	if (!strncmp(end, "KiB", 3))
		n <<= 10;
	else if (!strncmp(end, "MiB", 3))
		n <<= 20;
	return n;
}

/* Parse /proc/@pid/fdinfo/@fd into @c; false if it is no Spyre client. */
static bool read_client(int pid, const char *fd, struct client *c)
{
	char path[320], line[256];
	bool spyre = false, id = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", pid, fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	memset(c, 0, sizeof(*c));
	c->capacity = 1;
	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ':');

		if (!v)
			continue;
		*v++ = '\0';
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\n")] = '\0';
		if (!strcmp(line, "drm-driver"))
			spyre = !strcmp(v, "spyre");
		else if (!strcmp(line, "drm-pdev"))
			snprintf(c->pdev, sizeof(c->pdev), "%s", v);
		else if (!strcmp(line, "drm-client-id"))
			id = (c->client_id = strtoull(v, NULL, 10), true);
		else if (!strcmp(line, "drm-engine-compute"))
			c->busy_ns = strtoull(v, NULL, 10);
		else if (!strcmp(line, "drm-engine-capacity-compute"))
			c->capacity = strtoull(v, NULL, 10);
		else if (!strcmp(line, "drm-total-system"))
			c->sys_bytes = fdinfo_size(v);
		else if (!strcmp(line, "drm-total-device"))
			c->dev_bytes = fdinfo_size(v);
	}
	fclose(f);
	c->pid = pid;
	return spyre && id;
}

static void read_comm(int pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	snprintf(buf, len, "?");
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* Every client of a Spyre card this process may see, once per client id. */
static int scan_clients(struct client **out)
{
	struct client *v = NULL, c;
	size_t n = 0, cap = 0;
	struct dirent *pe, *fe;
	DIR *proc, *fds;

	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while ((pe = readdir(proc))) {
		char path[64], link[64];
		int pid;

		if (!isdigit((unsigned char)pe->d_name[0]))
			continue;
		pid = atoi(pe->d_name);
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		fds = opendir(path);
		if (!fds)
			continue;	/* another user's (no ptrace access) */
		while ((fe = readdir(fds))) {
			char fdpath[PATH_MAX];
			ssize_t l;
			bool dup = false;

			if (!isdigit((unsigned char)fe->d_name[0]))
				continue;
			snprintf(fdpath, sizeof(fdpath), "%s/%s", path,
				 fe->d_name);
			l = readlink(fdpath, link, sizeof(link) - 1);
			if (l <= 0)
				continue;
			link[l] = '\0';
			if (strncmp(link, "/dev/accel/accel", 16) ||
			    !read_client(pid, fe->d_name, &c))
				continue;
			for (size_t i = 0; i < n && !dup; i++)
				dup = v[i].client_id == c.client_id &&
				      !strcmp(v[i].pdev, c.pdev);
			if (dup)
				continue;
			if (n == cap) {
				size_t ncap = cap ? 2 * cap : 16;
				struct client *nv = realloc(v, ncap * sizeof(*v));

				if (!nv) {
					closedir(fds);
					closedir(proc);
					free(v);
					return -ENOMEM;
				}
				v = nv;
				cap = ncap;
			}
			read_comm(pid, c.name, sizeof(c.name));
			v[n++] = c;
		}
		closedir(fds);
	}
	closedir(proc);
	*out = v;
	return (int)n;
}

/* The logical index of the card at PCI address @pdev, or -1. */
static int card_index(const struct spyre_device_desc *d, int n,
		      const char *pdev)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(d[i].pci_addr, pdev))
			return (int)d[i].index;
	return -1;
}

static int report_ps(void)
{
	struct spyre_device_desc d[SMI_MAX_CARDS];
	int nd = list_cards(d), n;
	struct client *v = NULL;
	json_object *r, *a;
	bool root = geteuid() == 0;

	if (nd < 0)
		return 1;
	n = scan_clients(&v);
	if (n < 0) {
		fprintf(stderr, "spyre-smi: ps: %s\n", spyre_strerror(n));
		return 1;
	}
	if (opt.json) {
		r = j_report("ps");
		json_object_object_add(r, "all_users",
				       json_object_new_boolean(root));
		a = json_object_new_array();
		for (int i = 0; i < n; i++) {
			json_object *p = json_object_new_object(), *m;
			int idx = card_index(d, nd, v[i].pdev);

			json_object_object_add(p, "pid",
					       json_object_new_int(v[i].pid));
			j_str(p, "name", v[i].name);
			j_str(p, "pci_addr", v[i].pdev);
			json_object_object_add(p, "card_index",
					       json_object_new_int(idx));
			j_u64(p, "client_id", v[i].client_id);
			j_u64(p, "busy_ns", v[i].busy_ns);
			j_u64(p, "queues", v[i].capacity);
			m = json_object_new_object();
			j_u64(m, "system_bytes", v[i].sys_bytes);
			j_u64(m, "device_bytes", v[i].dev_bytes);
			json_object_object_add(p, "memory", m);
			json_object_array_add(a, p);
		}
		json_object_object_add(r, "processes", a);
		j_print(r);
		free(v);
		return 0;
	}
	printf("%-7s %-16s %-4s %-12s %7s %11s %11s %11s %6s\n", "PID", "NAME",
	       "CARD", "PCI", "CLIENT", "SYSMEM MiB", "DEVMEM MiB", "BUSY ms",
	       "QUEUES");
	for (int i = 0; i < n; i++) {
		int idx = card_index(d, nd, v[i].pdev);
		char card[16] = "-";

		if (idx >= 0)
			snprintf(card, sizeof(card), "%d", idx);
		printf("%-7d %-16s %-4s %-12s %7llu %11.1f %11.1f %11.1f %6llu\n",
		       v[i].pid, v[i].name, card,
		       v[i].pdev[0] ? v[i].pdev + 5 : "?",
		       (unsigned long long)v[i].client_id,
		       (double)v[i].sys_bytes / MiB,
		       (double)v[i].dev_bytes / MiB,
		       (double)v[i].busy_ns / 1e6,
		       (unsigned long long)v[i].capacity);
	}
	if (n == 0)
		printf("no process is using a Spyre card%s\n",
		       root ? "" : " (of yours)");
	if (!root)
		printf("(other users' processes are not shown: their fdinfo "
		       "needs ptrace access; run as root to see all)\n");
	free(v);
	return 0;
}

static int cmd_ps(void)
{
	int rc;

	for (;;) {
		rc = report_ps();
		if (!opt.loop_s)
			return rc;
		fflush(stdout);
		if (!opt.json)
			putchar('\n');
		sleep_ms(opt.loop_s * 1000);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "loop", required_argument, NULL, 'l' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	int c;

	while ((c = getopt_long(argc, argv, "jl:i:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt.json = true;
			break;
		case 'l':
			if (!opt_uint("--loop", 1, 86400, "seconds",
				      &opt.loop_s))
				return 2;
			break;
		case 'i':
			if (!opt_uint("--interval", 10, 60000, "ms",
				      &opt.interval_ms))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("spyre-smi (libspyre %s)\n", spyre_version());
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	cmd = optind < argc ? argv[optind++] : NULL;
	if (!cmd)
		return cmd_overview();
	if (!strcmp(cmd, "info"))
		return cmd_info(argc - optind, argv + optind);
	if (optind < argc) {
		fprintf(stderr, "spyre-smi: %s: unexpected argument '%s'\n",
			cmd, argv[optind]);
		return 2;
	}
	if (!strcmp(cmd, "list"))
		return cmd_list();
	if (!strcmp(cmd, "ps"))
		return cmd_ps();
	fprintf(stderr, "spyre-smi: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
