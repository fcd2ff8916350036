// SPDX-License-Identifier: MIT
/*
 * spyre-smi - list Spyre cards and show their properties.
 *
 *   spyre-smi [list]             one line per visible card
 *   spyre-smi info [DEV...]      details (DEV: index or PCI address;
 *                                default: all visible cards)
 *   spyre-smi --version | --help
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spyre/spyre.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-smi [list]\n"
		"       spyre-smi info [DEV...]   (DEV: index or PCI address)\n"
		"       spyre-smi --version\n");
}

static int cmd_list(void)
{
	struct spyre_device_desc d[64];
	int n = spyre_device_list(d, 64);

	if (n < 0) {
		fprintf(stderr, "spyre-smi: discovery failed: %s%s\n",
			spyre_strerror(n), n == -EINVAL &&
			getenv("SPYRE_VISIBLE_DEVICES") ?
			" (check SPYRE_VISIBLE_DEVICES: distinct indices, "
			"comma-separated)" : "");
		return 1;
	}
	printf("%-5s %-5s %-14s %-20s %s\n", "IDX", "PHYS", "PCI", "NODE",
	       "IDS");
	for (int i = 0; i < n && i < 64; i++)
		printf("%-5u %-5u %-14s %-20s %04x:%04x %04x:%04x\n",
		       d[i].index, d[i].phys_index, d[i].pci_addr,
		       d[i].devnode, d[i].vendor_id, d[i].device_id,
		       d[i].subsystem_vendor_id, d[i].subsystem_id);
	if (n == 0)
		printf("no Spyre devices found\n");
	return 0;
}

static void print_caps(uint64_t caps)
{
	static const struct { uint64_t bit; const char *name; } names[] = {
		{ SPYRE_DEV_CAP_FP16, "fp16" }, { SPYRE_DEV_CAP_BF16, "bf16" },
		{ SPYRE_DEV_CAP_FP8, "fp8" }, { SPYRE_DEV_CAP_INT8, "int8" },
		{ SPYRE_DEV_CAP_MMU, "mmu" }, { SPYRE_DEV_CAP_SEM, "sem" },
	};

	printf("  caps:          0x%llx (", (unsigned long long)caps);
	for (size_t i = 0, first = 1; i < sizeof(names) / sizeof(names[0]); i++)
		if (caps & names[i].bit) {
			printf("%s%s", first ? "" : " ", names[i].name);
			first = 0;
		}
	printf(")\n");
}

static int show(struct spyre_device *dev)
{
	struct spyre_device_info in;
	int ret = spyre_device_get_info(dev, &in);

	if (ret) {
		fprintf(stderr, "spyre-smi: info: %s\n", spyre_strerror(ret));
		return 1;
	}
	printf("device %u: %s (%s)\n", in.desc.index, in.desc.pci_addr,
	       in.desc.devnode);
	printf("  pci ids:       %04x:%04x subsystem %04x:%04x\n",
	       in.desc.vendor_id, in.desc.device_id,
	       in.desc.subsystem_vendor_id, in.desc.subsystem_id);
	printf("  driver:        %s %d.%d.%d\n", in.driver_name,
	       in.driver_major, in.driver_minor, in.driver_patch);
	printf("  hw version:    %u.%u\n", in.hw_version >> 16,
	       in.hw_version & 0xffff);
	printf("  cores:         %u\n", in.num_cores);
	printf("  hw queues:     %u\n", in.num_queues);
	printf("  contexts:      %u\n", in.num_contexts);
	printf("  device memory: %llu MiB\n",
	       (unsigned long long)(in.devmem_size >> 20));
	print_caps(in.caps);
	printf("  va range:      0x%llx-0x%llx\n",
	       (unsigned long long)in.va_start, (unsigned long long)in.va_end);
	printf("  max cmd size:  %u bytes\n", in.max_cmd_size);
	{
		struct spyre_memory_info mi;

		ret = spyre_device_memory_info(dev, &mi);
		if (ret) {
			printf("  memory:        (%s)\n", spyre_strerror(ret));
			return 0;
		}
		printf("  device memory used: %llu KiB of %llu KiB\n",
		       (unsigned long long)(mi.devmem_used >> 10),
		       (unsigned long long)(mi.devmem_total >> 10));
		printf("  system memory used: %llu KiB (BOs), %llu KiB "
		       "pinned host memory\n",
		       (unsigned long long)(mi.sysmem_used >> 10),
		       (unsigned long long)(mi.userptr_used >> 10));
		printf("  max BO size:   %llu MiB\n",
		       (unsigned long long)(mi.max_bo_size >> 20));
	}
	return 0;
}

static int open_arg(const char *arg, struct spyre_device **dev)
{
	char *end;
	unsigned long idx = strtoul(arg, &end, 10);

	if (*arg && !*end)
		return spyre_device_open((unsigned int)idx, dev);
	return spyre_device_open_pci(arg, dev);
}

static int cmd_info(int argc, char **argv)
{
	struct spyre_device *dev;
	int rc = 0, ret;

	if (argc == 0) {
		int n = spyre_device_count();

		if (n < 0) {
			fprintf(stderr, "spyre-smi: %s\n", spyre_strerror(n));
			return 1;
		}
		if (n == 0)
			printf("no Spyre devices found\n");
		for (int i = 0; i < n; i++) {
			ret = spyre_device_open((unsigned int)i, &dev);
			if (ret) {
				fprintf(stderr, "spyre-smi: open %d: %s\n", i,
					spyre_strerror(ret));
				rc = 1;
				continue;
			}
			rc |= show(dev);
			spyre_device_close(dev);
		}
		return rc;
	}
	for (int i = 0; i < argc; i++) {
		ret = open_arg(argv[i], &dev);
		if (ret) {
			fprintf(stderr, "spyre-smi: open %s: %s\n", argv[i],
				spyre_strerror(ret));
			rc = 1;
			continue;
		}
		rc |= show(dev);
		spyre_device_close(dev);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "list"))
		return cmd_list();
	if (!strcmp(argv[1], "info"))
		return cmd_info(argc - 2, argv + 2);
	if (!strcmp(argv[1], "--version")) {
		printf("spyre-smi (libspyre %s)\n", spyre_version());
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
