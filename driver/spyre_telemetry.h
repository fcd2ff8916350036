/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: what operators see (spyre_telemetry.c): the
 * sysfs attributes of the PCI device, DRM fdinfo, and the card's
 * telemetry counters kept across the resets that clear them.
 */
#ifndef SPYRE_TELEMETRY_H
#define SPYRE_TELEMETRY_H

#include <linux/device.h>
#include <linux/spinlock.h>
#include <linux/types.h>

struct drm_file;
struct drm_printer;
struct spyre_device;

/* The card's TEL_* registers, in register order (8 bytes apart). */
enum spyre_tel_counter {
	SPYRE_TEL_JOBS,		/* TEL_JOBS */
	SPYRE_TEL_CMDS,		/* TEL_CMDS */
	SPYRE_TEL_BUSY_NS,	/* TEL_BUSY_NS */
	SPYRE_TEL_BYTES,	/* TEL_BYTES */
	SPYRE_TEL_FAULTS,	/* TEL_FAULTS */
	SPYRE_TEL_ACTIVE_NS,	/* TEL_ACTIVE_NS */
	SPYRE_TEL_NUM
};

/**
 * struct spyre_tel - the card's telemetry since probe.
 * @lock: protects @total and @seen.
 * @total: each counter since probe: what earlier samples added up.
 * @seen: each register's value at the last sample (0 after a reset).
 * @jobs_in_flight: jobs submitted and not yet retired (freed).
 */
struct spyre_tel {
	spinlock_t lock;	/* protects total[], seen[] */
	u64 total[SPYRE_TEL_NUM];
	u64 seen[SPYRE_TEL_NUM];
	atomic_t jobs_in_flight;
};

extern const struct attribute_group *spyre_groups[];

void spyre_tel_init(struct spyre_device *sdev);
void spyre_tel_sample(struct spyre_device *sdev);
void spyre_tel_restart(struct spyre_device *sdev);
void spyre_show_fdinfo(struct drm_printer *p, struct drm_file *file);

#endif /* SPYRE_TELEMETRY_H */
