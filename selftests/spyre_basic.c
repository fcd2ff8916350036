// SPDX-License-Identifier: MIT
/*
 * spyre_basic: device node, sysfs identity, DRM version, the QUERY ioctl
 * (good, bad and hostile input) and the DRM core ioctls an accel node
 * refuses.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "kselftest_harness.h"
#include "spyre_test.h"
#include "spyre_hw.h"	/* the card's PCI IDs */

#define ACCEL_MAJOR 261

static unsigned int read_hex(const char *path)
{
	char buf[32] = "";
	FILE *f = fopen(path, "r");

	if (!f)
		return 0xdeadbeef;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return (unsigned int)strtoul(buf, NULL, 16);
}

FIXTURE(card) {
	int fd;
	struct spyre_device_desc desc;
};

FIXTURE_SETUP(card)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	self->fd = -1;
	if (n <= 0)
		SKIP(return, "no Spyre card (/dev/accel)");
	self->desc = d[0];
	self->fd = open(d[0].devnode, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", d[0].devnode,
				      strerror(errno));
}

FIXTURE_TEARDOWN(card)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(card, node_and_sysfs_ids)
{
	char p[256];
	struct stat st;
	unsigned int minor = self->desc.accel_minor;

	ASSERT_EQ(0, stat(self->desc.devnode, &st));
	ASSERT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(ACCEL_MAJOR, major(st.st_rdev));
	EXPECT_EQ(minor, minor(st.st_rdev));
	snprintf(p, sizeof(p), "/sys/class/accel/accel%u/device/vendor", minor);
	EXPECT_EQ(SPYRE_PCI_VENDOR_ID, read_hex(p));
	snprintf(p, sizeof(p), "/sys/class/accel/accel%u/device/device", minor);
	EXPECT_EQ(SPYRE_PCI_DEVICE_ID, read_hex(p));
	snprintf(p, sizeof(p),
		 "/sys/class/accel/accel%u/device/subsystem_vendor", minor);
	EXPECT_EQ(SPYRE_PCI_SUBVENDOR_ID, read_hex(p));
	snprintf(p, sizeof(p),
		 "/sys/class/accel/accel%u/device/subsystem_device", minor);
	EXPECT_EQ(SPYRE_PCI_SUBDEVICE_ID, read_hex(p));
	snprintf(p, sizeof(p), "/sys/class/accel/accel%u/device/class", minor);
	EXPECT_EQ(0x120000, read_hex(p) & 0xffff00);
	/* The bound driver is ours. */
	snprintf(p, sizeof(p), "/sys/class/accel/accel%u/device/driver", minor);
	{
		char link[256];
		ssize_t len = readlink(p, link, sizeof(link) - 1);

		ASSERT_LT(0, len);
		link[len] = 0;
		EXPECT_STREQ("spyre", strrchr(link, '/') + 1);
	}
}

TEST_F(card, every_card_discovered)
{
	/* Count Spyre-bound accel nodes in sysfs; libspyre sees the same. */
	DIR *d = opendir("/sys/class/accel");
	struct dirent *de;
	int n = 0;

	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		char p[300], link[256];
		ssize_t len;

		if (strncmp(de->d_name, "accel", 5))
			continue;
		snprintf(p, sizeof(p), "/sys/class/accel/%s/device/driver",
			 de->d_name);
		len = readlink(p, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		if (!strcmp(strrchr(link, '/') + 1, "spyre"))
			n++;
	}
	closedir(d);
	ASSERT_LT(0, n);
	if (!getenv("SPYRE_VISIBLE_DEVICES")) {
		EXPECT_EQ(n, spyre_device_count());
	}
}

TEST_F(card, drm_version)
{
	drmVersionPtr v = drmGetVersion(self->fd);

	ASSERT_NE(NULL, v);
	EXPECT_STREQ("spyre", v->name);
	EXPECT_LT(0, v->desc_len);
	EXPECT_LE(0, v->version_major);
	drmFreeVersion(v);
}

TEST_F(card, query_device_info_values)
{
	struct drm_spyre_device_info di;
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_DEVICE_INFO,
		.size = sizeof(di),
		.data = (uintptr_t)&di,
	};
	unsigned int dom, bus, dev, fn;

	memset(&di, 0xff, sizeof(di));	/* every byte must be written */
	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	ASSERT_EQ(sizeof(di), q.size);
	EXPECT_EQ(SPYRE_PCI_VENDOR_ID, di.vendor_id);
	EXPECT_EQ(SPYRE_PCI_DEVICE_ID, di.device_id);
	EXPECT_EQ(SPYRE_PCI_SUBVENDOR_ID, di.subsystem_vendor_id);
	EXPECT_EQ(SPYRE_PCI_SUBDEVICE_ID, di.subsystem_id);
	EXPECT_EQ(1, di.hw_version >> 16);
	EXPECT_LE(1, di.num_cores);
	EXPECT_GE(1024, di.num_cores);
	EXPECT_LE(1, di.num_queues);
	EXPECT_GE(512, di.num_queues);
	EXPECT_LE(1, di.num_contexts);
	EXPECT_GE(512, di.num_contexts);
	EXPECT_LT(0, di.devmem_size);
	EXPECT_EQ(0, di.devmem_size % PAGE);
	EXPECT_NE(0, di.caps & SPYRE_DEV_CAP_MMU);
	EXPECT_EQ(0, di.caps >> 32);
	EXPECT_EQ(0, di.va_start % PAGE);
	EXPECT_EQ(0, di.va_end % PAGE);
	EXPECT_LT(di.va_start, di.va_end);
	EXPECT_GE(1ull << 48, di.va_end);
	EXPECT_LT(0, di.va_start) TH_LOG("VA 0 must never be handed out");
	EXPECT_LE(8, di.max_cmd_size);
	EXPECT_EQ(0, di.max_cmd_size % 8);
	/* the SUBMIT limits this kernel enforces (spyre_submit tests) */
	EXPECT_EQ(256, di.max_jobs);
	EXPECT_EQ(4096, di.max_bos_per_job);
	EXPECT_EQ(64, di.max_syncs_per_job);
	EXPECT_EQ(0, di.pad);
	for (size_t i = 0; i < sizeof(di.reserved) / sizeof(di.reserved[0]);
	     i++)
		EXPECT_EQ(0, di.reserved[i]);
	ASSERT_EQ(0, sscanf(self->desc.pci_addr, "%x:%x:%x.%x", &dom, &bus,
			    &dev, &fn) == 4 ? 0 : -1);
	EXPECT_EQ(dom, di.pci_domain);
	EXPECT_EQ(bus, di.pci_bus);
	EXPECT_EQ((dev << 3) | fn, di.pci_devfn);
}

TEST_F(card, query_size_zero_reports_size)
{
	struct drm_spyre_query q = { .query = DRM_SPYRE_QUERY_DEVICE_INFO };

	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	EXPECT_EQ(sizeof(struct drm_spyre_device_info), q.size);
	/* data may be NULL with size 0 */
	EXPECT_EQ(0, q.data);
}

TEST_F(card, query_short_and_long_buffers)
{
	uint8_t buf[sizeof(struct drm_spyre_device_info) + 64];
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_DEVICE_INFO,
		.size = 16,
		.data = (uintptr_t)buf,
	};
	struct drm_spyre_device_info *di = (void *)buf;

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	EXPECT_EQ(16, q.size);
	EXPECT_EQ(SPYRE_PCI_VENDOR_ID, di->vendor_id);
	EXPECT_EQ(SPYRE_PCI_SUBDEVICE_ID, di->subsystem_id);
	for (size_t i = 16; i < sizeof(buf); i++) {
		ASSERT_EQ(0xa5, buf[i]) TH_LOG("byte %zu written", i);
	}

	memset(buf, 0xa5, sizeof(buf));
	q.size = sizeof(buf);
	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	EXPECT_EQ(sizeof(*di), q.size);
	for (size_t i = sizeof(*di); i < sizeof(buf); i++) {
		ASSERT_EQ(0xa5, buf[i]) TH_LOG("byte %zu written", i);
	}
}

/* QUERY_HEALTH: the full block, reserved zero, resets as in sysfs. */
TEST_F(card, query_health)
{
	struct drm_spyre_health_info h;
	struct drm_spyre_query q = { .query = DRM_SPYRE_QUERY_HEALTH };
	uint64_t resets;

	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	ASSERT_EQ(sizeof(h), q.size);
	memset(&h, 0xff, sizeof(h));
	q.data = (uintptr_t)&h;
	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	for (unsigned int i = 0; i < sizeof(h.reserved) / 8; i++)
		EXPECT_EQ(0, h.reserved[i]);
	EXPECT_LE(h.recoveries, h.resets);
	ASSERT_EQ(0, st_sysfs_u64(0, "resets", &resets));
	EXPECT_EQ(h.resets, resets);
}

TEST_F(card, query_bad_input)
{
	struct drm_spyre_device_info di;
	static const uint32_t bad_ids[] = {
		0, DRM_SPYRE_QUERY_HEALTH + 1, 0x100, 0xffffffff };
	struct drm_spyre_query q;

	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		q = (struct drm_spyre_query){ .query = bad_ids[i],
			.size = sizeof(di), .data = (uintptr_t)&di };
		EXPECT_EQ(-EINVAL, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY,
					    &q)) TH_LOG("query %u", bad_ids[i]);
	}
	q = (struct drm_spyre_query){ .query = DRM_SPYRE_QUERY_DEVICE_INFO,
		.size = sizeof(di), .data = (uintptr_t)&di, .flags = 1 };
	EXPECT_EQ(-EINVAL, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	q.flags = 0x80000000u;
	EXPECT_EQ(-EINVAL, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	q.flags = 0;
	q.pad = 1;
	EXPECT_EQ(-EINVAL, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	q.pad = 0;
	/* hostile pointers */
	q.data = 16;
	EXPECT_EQ(-EFAULT, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	q.data = 0xffff800000000000ull;	/* kernel address */
	EXPECT_EQ(-EFAULT, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	q.data = (uintptr_t)&di;
	EXPECT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
}

TEST_F(card, query_into_readonly_memory)
{
	void *ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	struct drm_spyre_query q = { .query = DRM_SPYRE_QUERY_DEVICE_INFO,
		.size = sizeof(struct drm_spyre_device_info) };

	ASSERT_NE(MAP_FAILED, ro);
	q.data = (uintptr_t)ro;
	EXPECT_EQ(-EFAULT, st_ioctl(self->fd, DRM_IOCTL_SPYRE_QUERY, &q));
	munmap(ro, PAGE);
}

TEST_F(card, unknown_driver_ioctl)
{
	uint64_t arg[4] = { 0 };

	/* First unused driver ioctl number and a far one. */
	EXPECT_EQ(-EINVAL, st_ioctl(self->fd,
		DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_SUBMIT + 1, uint64_t[4]),
		arg));
	EXPECT_EQ(-EINVAL, st_ioctl(self->fd,
		DRM_IOWR(DRM_COMMAND_BASE + 0x5f, uint64_t[4]), arg));
}

TEST_F(card, several_fds_work)
{
	struct drm_spyre_device_info a, b;
	int fd2 = open(self->desc.devnode, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, st_query_info(self->fd, &a));
	ASSERT_EQ(0, st_query_info(fd2, &b));
	EXPECT_EQ(0, memcmp(&a, &b, sizeof(a)));
	close(fd2);
	ASSERT_EQ(0, st_query_info(self->fd, &a));
}

TEST(all_cards_answer)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	if (n <= 0)
		SKIP(return, "no Spyre card");
	for (int i = 0; i < n && i < 16; i++) {
		struct drm_spyre_device_info di;
		int fd = open(d[i].devnode, O_RDWR | O_CLOEXEC);
		char addr[48];

		ASSERT_LE(0, fd) TH_LOG("%s", d[i].devnode);
		ASSERT_EQ(0, st_query_info(fd, &di));
		snprintf(addr, sizeof(addr), "%04x:%02x:%02x.%x",
			 di.pci_domain, di.pci_bus, di.pci_devfn >> 3,
			 di.pci_devfn & 7);
		EXPECT_STREQ(d[i].pci_addr, addr);
		close(fd);
	}
}

TEST(readonly_open)
{
	char node[64];
	struct drm_spyre_device_info di;
	int fd;

	if (!st_node(0, node, sizeof(node)))
		SKIP(return, "no Spyre card");
	/* An O_RDONLY open of an accel node works for queries (DRM core). */
	fd = open(node, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, st_query_info(fd, &di));
	close(fd);
}

/*
 * DRM core ioctls an accel node must refuse: DRM_IOCTL_GET_MAGIC and
 * DRM_IOCTL_GET_UNIQUE dereference the (absent) master of an accel file in
 * the 6.12 core, so the driver refuses them; a failure oopses the guest,
 * which is why these come last in the suite.
 */
TEST_F(card, get_magic_refused)
{
	struct drm_auth auth = { 0 };
	int ret = st_ioctl(self->fd, DRM_IOCTL_GET_MAGIC, &auth);

	EXPECT_GT(0, ret);
	EXPECT_EQ(0, auth.magic);
	/* still alive and usable */
	{
		struct drm_spyre_device_info di;

		EXPECT_EQ(0, st_query_info(self->fd, &di));
	}
}

TEST_F(card, get_unique_refused)
{
	char buf[64];
	struct drm_unique u = { .unique_len = sizeof(buf), .unique = buf };
	int ret = st_ioctl(self->fd, DRM_IOCTL_GET_UNIQUE, &u);

	EXPECT_GT(0, ret);
	{
		struct drm_spyre_device_info di;

		EXPECT_EQ(0, st_query_info(self->fd, &di));
	}
}

TEST_F(card, auth_and_master_ioctls_refused)
{
	struct drm_auth auth = { .magic = 1 };

	EXPECT_GT(0, st_ioctl(self->fd, DRM_IOCTL_AUTH_MAGIC, &auth));
	EXPECT_GT(0, st_ioctl(self->fd, DRM_IOCTL_SET_MASTER, NULL));
	EXPECT_GT(0, st_ioctl(self->fd, DRM_IOCTL_DROP_MASTER, NULL));
}

TEST_HARNESS_MAIN
