// SPDX-License-Identifier: MIT
/*
 * Host unit tests: error strings, SPYRE_VISIBLE_DEVICES and PCI address
 * parsing, and sysfs discovery and telemetry against a fake sysfs tree.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kselftest_harness.h"

#include "../libspyre/src/internal.h"

/* PCI IDs of the fake cards: discovery goes by the driver bound. */
#define VID	0x1014
#define DID	0x06a7
#define SVID	0x1af4
#define SDID	0x1100

TEST(strerror_coverage)
{
	/* Every error libspyre documents has its own description. */
	static const int errs[] = {
		EPERM, ENOENT, EINTR, EIO, E2BIG, EBADF, ECHILD, EAGAIN,
		ENOMEM, EACCES, EFAULT, EBUSY, EXDEV, ENODEV, EINVAL, EMFILE,
		ERANGE, ENOTTY, EPROTO, EOPNOTSUPP, ETIME, ETIMEDOUT,
		ECANCELED, ENODATA, EDOM, ENOEXEC,
	};
	const size_t n = sizeof(errs) / sizeof(errs[0]);

	for (size_t i = 0; i < n; i++) {
		const char *s = spyre_strerror(-errs[i]);

		ASSERT_NE(NULL, s);
		EXPECT_STRNE("unknown error", s) TH_LOG("errno %d", errs[i]);
		EXPECT_STREQ(s, spyre_strerror(errs[i]));
		for (size_t j = 0; j < i; j++)
			EXPECT_STRNE(spyre_strerror(-errs[j]), s);
	}
	EXPECT_STREQ("success", spyre_strerror(0));
	EXPECT_STREQ("unknown error", spyre_strerror(-100000));
	EXPECT_STREQ("unknown error", spyre_strerror(INT_MIN));
	EXPECT_NE(NULL, strstr(spyre_strerror(-ECANCELED), "reopen"));
	EXPECT_NE(NULL, strstr(spyre_strerror(-ECHILD), "fork"));
	EXPECT_NE(NULL, strstr(spyre_strerror(-EDOM), "index"));
	EXPECT_NE(NULL, strstr(spyre_strerror(-EFAULT), "MMU fault"));
}

TEST(version_string)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", SPYRE_VERSION_MAJOR,
		 SPYRE_VERSION_MINOR, SPYRE_VERSION_PATCH);
	ASSERT_STREQ(want, spyre_version());
}

TEST(visible_devices_parse)
{
	unsigned int idx[8];

	ASSERT_EQ(1, spyre__parse_visible("0", idx, 8));
	ASSERT_EQ(0, idx[0]);
	ASSERT_EQ(2, spyre__parse_visible("1,0", idx, 8));
	ASSERT_EQ(1, idx[0]);
	ASSERT_EQ(0, idx[1]);
	ASSERT_EQ(3, spyre__parse_visible(" 2 , 3,\t7 ", idx, 8));
	ASSERT_EQ(2, idx[0]);
	ASSERT_EQ(3, idx[1]);
	ASSERT_EQ(7, idx[2]);
	ASSERT_EQ(0, spyre__parse_visible("", idx, 8));
	ASSERT_EQ(0, spyre__parse_visible("  ", idx, 8));
	ASSERT_EQ(1, spyre__parse_visible("12345", idx, 8));
	ASSERT_EQ(12345, idx[0]);
	ASSERT_EQ(-EINVAL, spyre__parse_visible(NULL, idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("a", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("1,,2", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("1,", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible(",1", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("1,1", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("-1", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("1 2", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("0x1", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("99999999999", idx, 8));
	ASSERT_EQ(-EINVAL, spyre__parse_visible("0,1,2", idx, 2));
}

TEST(pci_addr_parse)
{
	unsigned int d, b, s, f;

	ASSERT_EQ(0, spyre__parse_pci_addr("0000:01:00.0", &d, &b, &s, &f));
	ASSERT_EQ(0, d);
	ASSERT_EQ(1, b);
	ASSERT_EQ(0, s);
	ASSERT_EQ(0, f);
	ASSERT_EQ(0, spyre__parse_pci_addr("abcd:Fe:1f.7", &d, &b, &s, &f));
	ASSERT_EQ(0xabcd, d);
	ASSERT_EQ(0xfe, b);
	ASSERT_EQ(0x1f, s);
	ASSERT_EQ(7, f);
	ASSERT_EQ(0, spyre__parse_pci_addr("03:02.1", &d, &b, &s, &f));
	ASSERT_EQ(0, d);
	ASSERT_EQ(3, b);
	ASSERT_EQ(2, s);
	ASSERT_EQ(1, f);
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("01:00", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("01:20.0", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("01:00.8", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("100:00.0", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("10000:00:00.0", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("0:0:0:0.0", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr("zz:00.0", &d, &b, &s, &f));
	ASSERT_EQ(-EINVAL, spyre__parse_pci_addr(NULL, &d, &b, &s, &f));
}

/* A fake sysfs: accelN -> ../../devices/<pci> with ID files. */
FIXTURE(fakesys) {
	char root[64];
};

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* Write "0x%04x\n" of @v to @path, as sysfs shows PCI IDs. */
static void put_hex(const char *path, unsigned int v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "0x%04x\n", v);
	put(path, buf);
}

/*
 * A PCI function with its IDs, bound to @driver (NULL: none), and its
 * accel node.
 */
static int add_card(const char *root, unsigned int minor, const char *pci,
		    const char *driver, unsigned int vendor, unsigned int device,
		    unsigned int svendor, unsigned int sdevice)
{
	char p[512], t[512];

	snprintf(p, sizeof(p), "%s/devices/%s", root, pci);
	if (mkdir(p, 0755))
		return -1;
	if (driver) {
		snprintf(p, sizeof(p), "%s/devices/%s/driver", root, pci);
		snprintf(t, sizeof(t), "../../bus/pci/drivers/%s", driver);
		if (symlink(t, p))
			return -1;
	}
	snprintf(p, sizeof(p), "%s/devices/%s/vendor", root, pci);
	put_hex(p, vendor);
	snprintf(p, sizeof(p), "%s/devices/%s/device", root, pci);
	put_hex(p, device);
	snprintf(p, sizeof(p), "%s/devices/%s/subsystem_vendor", root, pci);
	put_hex(p, svendor);
	snprintf(p, sizeof(p), "%s/devices/%s/subsystem_device", root, pci);
	put_hex(p, sdevice);
	snprintf(p, sizeof(p), "%s/class/accel/accel%u", root, minor);
	if (mkdir(p, 0755))
		return -1;
	snprintf(p, sizeof(p), "%s/class/accel/accel%u/device", root, minor);
	snprintf(t, sizeof(t), "../../../devices/%s", pci);
	return symlink(t, p);
}

FIXTURE_SETUP(fakesys)
{
	char p[128];

	strcpy(self->root, "/tmp/spyre-fakesys-XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->root));
	snprintf(p, sizeof(p), "%s/class", self->root);
	ASSERT_EQ(0, mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/class/accel", self->root);
	ASSERT_EQ(0, mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/devices", self->root);
	ASSERT_EQ(0, mkdir(p, 0755));
	/* Minors deliberately not in PCI order. */
	ASSERT_EQ(0, add_card(self->root, 0, "0000:05:00.0", "spyre", VID,
			      DID, SVID, SDID));
	ASSERT_EQ(0, add_card(self->root, 1, "0000:02:00.0", "spyre", VID,
			      DID, SVID, SDID));
	/* Real hardware (other subsystem): no driver bound, not listed. */
	ASSERT_EQ(0, add_card(self->root, 2, "0000:03:00.0", NULL, VID, DID,
			      0x1014, 0x0001));
	/* Another accel driver, even with our IDs: not listed. */
	ASSERT_EQ(0, add_card(self->root, 3, "0000:04:00.0", "ivpu", VID,
			      DID, SVID, SDID));
	ASSERT_EQ(0, add_card(self->root, 4, "0001:00:01.0", "spyre", VID,
			      DID, SVID, SDID));
}

FIXTURE_TEARDOWN(fakesys)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", self->root);
	if (system(cmd))
		TH_LOG("cleanup of %s failed", self->root);
}

TEST_F(fakesys, scan_orders_by_pci_address)
{
	struct spyre_device_desc d[8];

	memset(d, 0xaa, sizeof(d));
	ASSERT_EQ(3, spyre__scan(self->root, NULL, d, 8));
	EXPECT_STREQ("0000:02:00.0", d[0].pci_addr);
	EXPECT_EQ(1, d[0].accel_minor);
	EXPECT_STREQ("/dev/accel/accel1", d[0].devnode);
	EXPECT_STREQ("0000:05:00.0", d[1].pci_addr);
	EXPECT_EQ(0, d[1].accel_minor);
	EXPECT_STREQ("0001:00:01.0", d[2].pci_addr);
	EXPECT_EQ(4, d[2].accel_minor);
	for (unsigned int i = 0; i < 3; i++) {
		EXPECT_EQ(i, d[i].index);
		EXPECT_EQ(i, d[i].phys_index);
		EXPECT_EQ(VID, d[i].vendor_id);
		EXPECT_EQ(DID, d[i].device_id);
		EXPECT_EQ(SVID, d[i].subsystem_vendor_id);
		EXPECT_EQ(SDID, d[i].subsystem_id);
	}
	/* Count only, and a short array. */
	EXPECT_EQ(3, spyre__scan(self->root, NULL, NULL, 0));
	memset(d, 0, sizeof(d));
	EXPECT_EQ(3, spyre__scan(self->root, NULL, d, 1));
	EXPECT_STREQ("0000:02:00.0", d[0].pci_addr);
	EXPECT_EQ(0, d[1].pci_addr[0]);
}

TEST_F(fakesys, visible_devices_filter)
{
	struct spyre_device_desc d[8];

	ASSERT_EQ(2, spyre__scan(self->root, "2,0", d, 8));
	EXPECT_STREQ("0001:00:01.0", d[0].pci_addr);
	EXPECT_EQ(0, d[0].index);
	EXPECT_EQ(2, d[0].phys_index);
	EXPECT_STREQ("0000:02:00.0", d[1].pci_addr);
	EXPECT_EQ(1, d[1].index);
	EXPECT_EQ(0, d[1].phys_index);
	/* Absent indices are skipped. */
	ASSERT_EQ(1, spyre__scan(self->root, "9,1", d, 8));
	EXPECT_STREQ("0000:05:00.0", d[0].pci_addr);
	/* Empty list hides everything; malformed lists are errors. */
	EXPECT_EQ(0, spyre__scan(self->root, "", d, 8));
	EXPECT_EQ(-EINVAL, spyre__scan(self->root, "1,x", d, 8));
	EXPECT_EQ(-EINVAL, spyre__scan(self->root, "1,1", d, 8));
}

TEST_F(fakesys, telemetry_reads_the_cards_attributes)
{
	static const char *const attrs[][2] = {
		{ "hw_version", "1.2\n" }, { "busy_ns", "2000000000\n" },
		{ "active_ns", "1500000000\n" }, { "jobs_completed", "42\n" },
		{ "bytes_moved", "18446744073709551615\n" },
		{ "mem_devmem_total", "268435456\n" },
		{ "mem_devmem_used", "8388608\n" }, { "num_cores", "32\n" },
		{ "num_queues", "64\n" }, { "jobs_in_flight", "3\n" },
		{ "aer_errors", "1\n" },
	};
	const char *pci = "0000:05:00.0";
	struct spyre_telemetry t;
	char p[512];

	snprintf(p, sizeof(p), "%s/bus", self->root);
	ASSERT_EQ(0, mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/bus/pci", self->root);
	ASSERT_EQ(0, mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/bus/pci/devices", self->root);
	ASSERT_EQ(0, mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/bus/pci/devices/%s", self->root, pci);
	ASSERT_EQ(0, symlink("../../../devices/0000:05:00.0", p));

	/* no driver bound: no hw_version */
	ASSERT_EQ(-ENODEV, spyre__telemetry(self->root, pci, &t));
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		snprintf(p, sizeof(p), "%s/devices/%s/%s", self->root, pci,
			 attrs[i][0]);
		put(p, attrs[i][1]);
	}
	snprintf(p, sizeof(p), "%s/devices/%s/power", self->root, pci);
	ASSERT_EQ(0, mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/devices/%s/power/runtime_status",
		 self->root, pci);
	put(p, "suspended\n");

	memset(&t, 0xaa, sizeof(t));
	ASSERT_EQ(0, spyre__telemetry(self->root, pci, &t));
	EXPECT_EQ(1u << 16 | 2, t.hw_version);
	EXPECT_EQ(2000000000ull, t.busy_ns);
	EXPECT_EQ(1500000000ull, t.active_ns);
	EXPECT_EQ(42, t.jobs_completed);
	EXPECT_EQ(UINT64_MAX, t.bytes_moved);
	EXPECT_EQ(268435456ull, t.devmem_total);
	EXPECT_EQ(8388608ull, t.devmem_used);
	EXPECT_EQ(32, t.num_cores);
	EXPECT_EQ(64, t.num_queues);
	EXPECT_EQ(3, t.jobs_in_flight);
	EXPECT_EQ(1, t.aer_errors);
	EXPECT_EQ(1, t.runtime_suspended);
	/* absent attributes (an older driver) read 0, reserved stays 0 */
	EXPECT_EQ(0, t.mmu_faults);
	EXPECT_EQ(0, t.num_contexts);
	for (size_t i = 0; i < sizeof(t.reserved) / sizeof(t.reserved[0]); i++)
		EXPECT_EQ(0, t.reserved[i]);
	EXPECT_LT(0, t.sample_ns);

	/* a value that does not parse is an error, not a silent 0 */
	snprintf(p, sizeof(p), "%s/devices/%s/hangs", self->root, pci);
	put(p, "12abc\n");
	EXPECT_EQ(-EIO, spyre__telemetry(self->root, pci, &t));
	put(p, "-1\n");
	EXPECT_EQ(-EIO, spyre__telemetry(self->root, pci, &t));
	put(p, "7\n");
	snprintf(p, sizeof(p), "%s/devices/%s/num_cores", self->root, pci);
	put(p, "4294967296\n");
	EXPECT_EQ(-EIO, spyre__telemetry(self->root, pci, &t));
}

TEST(telemetry_argument_checks)
{
	struct spyre_device_desc d;
	struct spyre_telemetry t;

	memset(&d, 0, sizeof(d));
	EXPECT_EQ(-EINVAL, spyre_device_telemetry(NULL, &t));
	strcpy(d.pci_addr, "0000:00:04.0");
	EXPECT_EQ(-EINVAL, spyre_device_telemetry(&d, NULL));
	strcpy(d.pci_addr, "../../x");
	EXPECT_EQ(-EINVAL, spyre_device_telemetry(&d, &t));
	/* a well-formed address with no card there */
	strcpy(d.pci_addr, "00ff:1f:1f.7");
	EXPECT_EQ(-ENODEV, spyre_device_telemetry(&d, &t));
}

TEST(scan_without_accel_class)
{
	struct spyre_device_desc d[2];

	ASSERT_EQ(0, spyre__scan("/nonexistent-sysfs", NULL, d, 2));
}

TEST(public_discovery_on_host)
{
	struct spyre_device *dev = NULL;
	int n;

	/* The build host has no Spyre card; with a bad filter we get EINVAL. */
	ASSERT_EQ(0, setenv("SPYRE_VISIBLE_DEVICES", "0,zero", 1));
	ASSERT_EQ(-EINVAL, spyre_device_count());
	ASSERT_EQ(-EINVAL, spyre_device_open(0, &dev));
	ASSERT_EQ(0, setenv("SPYRE_VISIBLE_DEVICES", "", 1));
	ASSERT_EQ(0, spyre_device_count());
	ASSERT_EQ(-ENODEV, spyre_device_open(0, &dev));
	ASSERT_EQ(-ENODEV, spyre_device_open_pci("0000:00:00.0", &dev));
	ASSERT_EQ(0, unsetenv("SPYRE_VISIBLE_DEVICES"));
	n = spyre_device_count();
	ASSERT_LE(0, n);
	ASSERT_EQ(-ENODEV, spyre_device_open((unsigned int)n, &dev));
	ASSERT_EQ(-EINVAL, spyre_device_open_pci("bogus", &dev));
	ASSERT_EQ(-EINVAL, spyre_device_open(0, NULL));
	ASSERT_EQ(-EINVAL, spyre_device_list(NULL, 1));
	/* A node that is not ours is refused without side effects. */
	ASSERT_GT(0, spyre_device_open_path("/dev/null", &dev));
	ASSERT_EQ(NULL, dev);
}

TEST_HARNESS_MAIN
