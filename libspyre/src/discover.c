// SPDX-License-Identifier: MIT
/*
 * Device discovery through sysfs, and a card's telemetry from its sysfs
 * attributes (docs/ABI/sysfs-driver-spyre).  libdrm's drmGetDevices2()
 * does not see /dev/accel nodes, so this walks
 * /sys/class/accel/accelN/device/.
 */
#include "internal.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Parse SPYRE_VISIBLE_DEVICES: decimal indices separated by commas,
 * optional blanks around them.  "" is an empty list.  Returns the number of
 * entries, or -EINVAL for a malformed list (non-number, empty element,
 * duplicate, more than @max entries, index above INT_MAX).
 */
int spyre__parse_visible(const char *s, unsigned int *idx, unsigned int max)
{
	unsigned int n = 0;
	const char *p = s;

	if (!s)
		return -EINVAL;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0')
		return 0;
	for (;;) {
		unsigned long v = 0;
		const char *start;

		while (*p == ' ' || *p == '\t')
			p++;
		start = p;
		while (*p >= '0' && *p <= '9') {
			v = v * 10 + (unsigned long)(*p - '0');
			if (v > INT_MAX)
				return -EINVAL;
			p++;
		}
		if (p == start)
			return -EINVAL;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ',' && *p != '\0')
			return -EINVAL;
		if (n >= max)
			return -EINVAL;
		for (unsigned int i = 0; i < n; i++)
			if (idx[i] == v)
				return -EINVAL;
		idx[n++] = (unsigned int)v;
		if (*p == '\0')
			return (int)n;
		p++;	/* ',' */
	}
}

static int hexval(const char *s, size_t len, unsigned int max_val,
		  unsigned int *out)
{
	unsigned int v = 0;

	if (len == 0 || len > 8)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int c = tolower((unsigned char)s[i]);

		if (c >= '0' && c <= '9')
			v = v * 16 + (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (unsigned int)(c - 'a' + 10);
		else
			return -EINVAL;
	}
	if (v > max_val)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "dddd:bb:dd.f" or "bb:dd.f". */
int spyre__parse_pci_addr(const char *s, unsigned int *domain,
			  unsigned int *bus, unsigned int *dev,
			  unsigned int *fn)
{
	const char *c1, *c2, *dot;
	unsigned int d = 0;

	if (!s)
		return -EINVAL;
	c1 = strchr(s, ':');
	if (!c1)
		return -EINVAL;
	c2 = strchr(c1 + 1, ':');
	if (c2) {
		if (hexval(s, (size_t)(c1 - s), 0xffff, &d))
			return -EINVAL;
		s = c1 + 1;
		c1 = c2;
	}
	dot = strchr(c1 + 1, '.');
	if (!dot || strchr(c1 + 1, ':'))
		return -EINVAL;
	if (hexval(s, (size_t)(c1 - s), 0xff, bus) ||
	    hexval(c1 + 1, (size_t)(dot - c1 - 1), 0x1f, dev) ||
	    hexval(dot + 1, strlen(dot + 1), 0x7, fn))
		return -EINVAL;
	*domain = d;
	return 0;
}

static int read_hex_file(const char *path, unsigned int *out)
{
	char buf[32];
	FILE *f = fopen(path, "re");
	char *end;
	unsigned long v;

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	errno = 0;
	v = strtoul(buf, &end, 16);
	if (errno || end == buf || v > 0xffff)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

struct found {
	struct spyre_device_desc d;
	unsigned long long key;
};

static int cmp_found(const void *a, const void *b)
{
	const struct found *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->d.accel_minor < y->d.accel_minor ? -1 :
	       x->d.accel_minor > y->d.accel_minor;
}

/*
 * Read one accelN entry; 1 = it is a Spyre card, 0 = not, < 0 error.  A
 * Spyre card is one the spyre driver is bound to (the driver alone knows
 * which PCI IDs it serves); its IDs are read for the descriptor.
 */
static int probe_entry(const char *root, unsigned int minor, struct found *f)
{
	char path[PATH_MAX], link[PATH_MAX];
	unsigned int ids[4], dom, bus, dev, fn;
	static const char *const names[4] = {
		"vendor", "device", "subsystem_vendor", "subsystem_device",
	};
	const char *base;
	ssize_t len;

	snprintf(path, sizeof(path), "%s/class/accel/accel%u/device/driver",
		 root, minor);
	len = readlink(path, link, sizeof(link) - 1);
	if (len < 0)
		return 0;
	link[len] = '\0';
	base = strrchr(link, '/');
	if (strcmp(base ? base + 1 : link, "spyre"))
		return 0;
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/class/accel/accel%u/device/%s",
			 root, minor, names[i]);
		if (read_hex_file(path, &ids[i]))
			return 0;
	}
	snprintf(path, sizeof(path), "%s/class/accel/accel%u/device", root,
		 minor);
	len = readlink(path, link, sizeof(link) - 1);
	if (len < 0)
		return 0;
	link[len] = '\0';
	base = strrchr(link, '/');
	base = base ? base + 1 : link;
	if (spyre__parse_pci_addr(base, &dom, &bus, &dev, &fn))
		return 0;

	memset(f, 0, sizeof(*f));
	f->d.accel_minor = minor;
	snprintf(f->d.pci_addr, sizeof(f->d.pci_addr), "%04x:%02x:%02x.%x",
		 dom, bus, dev, fn);
	snprintf(f->d.devnode, sizeof(f->d.devnode), "/dev/accel/accel%u",
		 minor);
	f->d.vendor_id = (uint16_t)ids[0];
	f->d.device_id = (uint16_t)ids[1];
	f->d.subsystem_vendor_id = (uint16_t)ids[2];
	f->d.subsystem_id = (uint16_t)ids[3];
	f->key = ((unsigned long long)dom << 16) | (bus << 8) | (dev << 3) | fn;
	return 1;
}

/*
 * Scan @sysfs_root/class/accel, keep Spyre cards, order them by PCI
 * address, apply @visible (NULL = all) and write up to @max descriptors.
 * Returns the number of visible cards or a negative errno.
 */
int spyre__scan(const char *sysfs_root, const char *visible,
		struct spyre_device_desc *descs, unsigned int max)
{
	char path[PATH_MAX];
	unsigned int vis[SPYRE__MAX_VISIBLE];
	int nvis = -1;
	struct found *found = NULL;
	unsigned int nfound = 0, cap = 0, nout = 0;
	struct dirent *de;
	DIR *dir;

	if (visible) {
		nvis = spyre__parse_visible(visible, vis, SPYRE__MAX_VISIBLE);
		if (nvis < 0)
			return nvis;
	}

	snprintf(path, sizeof(path), "%s/class/accel", sysfs_root);
	dir = opendir(path);
	if (!dir)
		return 0;	/* no accel class: no cards */
	while ((de = readdir(dir))) {
		unsigned int minor;
		char tail;
		struct found f;

		if (sscanf(de->d_name, "accel%u%c", &minor, &tail) != 1)
			continue;
		if (probe_entry(sysfs_root, minor, &f) != 1)
			continue;
		if (nfound == cap) {
			unsigned int ncap = cap ? cap * 2 : 8;
			struct found *nf = realloc(found, ncap * sizeof(*nf));

			if (!nf) {
				closedir(dir);
				free(found);
				return -ENOMEM;
			}
			found = nf;
			cap = ncap;
		}
		found[nfound++] = f;
	}
	closedir(dir);
	if (nfound)
		qsort(found, nfound, sizeof(*found), cmp_found);
	for (unsigned int i = 0; i < nfound; i++)
		found[i].d.phys_index = i;

	if (nvis < 0) {
		for (unsigned int i = 0; i < nfound; i++) {
			if (nout < max) {
				descs[nout] = found[i].d;
				descs[nout].index = nout;
			}
			nout++;
		}
	} else {
		for (int j = 0; j < nvis; j++) {
			if (vis[j] >= nfound)
				continue;	/* absent card: skipped */
			if (nout < max) {
				descs[nout] = found[vis[j]].d;
				descs[nout].index = nout;
			}
			nout++;
		}
	}
	free(found);
	return (int)nout;
}

SPYRE_API int spyre_device_list(struct spyre_device_desc *descs,
				unsigned int max)
{
	if (max && !descs)
		return -EINVAL;
	return spyre__scan("/sys", getenv("SPYRE_VISIBLE_DEVICES"), descs, max);
}

SPYRE_API int spyre_device_count(void)
{
	return spyre_device_list(NULL, 0);
}

/*
 * Read the unsigned decimal attribute @name under @dir into @out: 0,
 * -ENOENT (no such attribute: an older driver), -EIO (unparsable).
 */
static int read_u64_attr(const char *dir, const char *name, uint64_t *out)
{
	char path[PATH_MAX], buf[64];
	unsigned long long v;
	FILE *f;
	char *end;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ENOENT : -EIO;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	errno = 0;
	v = strtoull(buf, &end, 0);
	if (errno || end == buf || (*end && *end != '\n') || buf[0] == '-')
		return -EIO;
	*out = v;
	return 0;
}

/* Read the card's telemetry under @sysfs_root/bus/pci/devices/@pci_addr. */
int spyre__telemetry(const char *sysfs_root, const char *pci_addr,
		     struct spyre_telemetry *out)
{
	static const struct {
		const char *name;
		size_t off;
	} u64s[] = {
#define T(f) { #f, offsetof(struct spyre_telemetry, f) }
		T(busy_ns), T(active_ns), T(jobs_completed),
		T(commands_completed), T(bytes_moved), T(mmu_faults),
		T(fault_records_lost), T(queue_errors), T(jobs_in_flight),
		{ "mem_devmem_total", offsetof(struct spyre_telemetry,
					       devmem_total) },
		{ "mem_devmem_used", offsetof(struct spyre_telemetry,
					      devmem_used) },
		{ "mem_sysmem_used", offsetof(struct spyre_telemetry,
					      sysmem_used) },
		{ "mem_userptr_used", offsetof(struct spyre_telemetry,
					       userptr_used) },
		T(resets), T(recoveries), T(fatal_errors), T(hangs),
		T(lost_irqs), T(spurious_irqs), T(corrupt_completions),
		T(jobs_replayed), T(jobs_lost), T(aer_errors),
#undef T
	};
	static const struct {
		const char *name;
		size_t off;
	} u32s[] = {
		{ "num_cores", offsetof(struct spyre_telemetry, num_cores) },
		{ "num_queues", offsetof(struct spyre_telemetry, num_queues) },
		{ "num_contexts", offsetof(struct spyre_telemetry,
					   num_contexts) },
	};
	char dir[PATH_MAX - 64], path[PATH_MAX], buf[64];
	unsigned int major, minor;
	struct timespec ts;
	uint64_t v;
	FILE *f;
	int ret;

	memset(out, 0, sizeof(*out));
	snprintf(dir, sizeof(dir), "%s/bus/pci/devices/%s", sysfs_root,
		 pci_addr);
	/* hw_version exists exactly while the driver is bound */
	snprintf(path, sizeof(path), "%s/hw_version", dir);
	f = fopen(path, "re");
	if (!f)
		return -ENODEV;
	if (!fgets(buf, sizeof(buf), f) ||
	    sscanf(buf, "%u.%u", &major, &minor) != 2 || major > 0xffff ||
	    minor > 0xffff) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	out->hw_version = major << 16 | minor;

	for (size_t i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++) {
		ret = read_u64_attr(dir, u64s[i].name, &v);
		if (ret == -ENOENT)
			continue;
		if (ret)
			return ret;
		memcpy((char *)out + u64s[i].off, &v, sizeof(v));
	}
	for (size_t i = 0; i < sizeof(u32s) / sizeof(u32s[0]); i++) {
		uint32_t w;

		ret = read_u64_attr(dir, u32s[i].name, &v);
		if (ret == -ENOENT)
			continue;
		if (ret || v > UINT32_MAX)
			return -EIO;
		w = (uint32_t)v;
		memcpy((char *)out + u32s[i].off, &w, sizeof(w));
	}
	snprintf(path, sizeof(path), "%s/power/runtime_status", dir);
	f = fopen(path, "re");
	if (f) {
		if (fgets(buf, sizeof(buf), f))
			out->runtime_suspended = !strncmp(buf, "suspended", 9);
		fclose(f);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	out->sample_ns = (uint64_t)ts.tv_sec * 1000000000ull +
			 (uint64_t)ts.tv_nsec;
	return 0;
}

SPYRE_API int spyre_device_telemetry(const struct spyre_device_desc *desc,
				     struct spyre_telemetry *out)
{
	unsigned int dom, bus, dev, fn;

	if (!desc || !out ||
	    spyre__parse_pci_addr(desc->pci_addr, &dom, &bus, &dev, &fn))
		return -EINVAL;
	return spyre__telemetry("/sys", desc->pci_addr, out);
}
