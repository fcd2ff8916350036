/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: SUBMIT (spyre_submit.c).
 */
#ifndef SPYRE_SUBMIT_H
#define SPYRE_SUBMIT_H

#include <linux/types.h>

struct drm_device;
struct drm_file;

/* SUBMIT limits, reported in drm_spyre_device_info. */
#define SPYRE_MAX_JOBS			256
#define SPYRE_MAX_BOS_PER_JOB		4096
#define SPYRE_MAX_SYNCS_PER_JOB		64

int spyre_ioctl_submit(struct drm_device *drm, void *data,
		       struct drm_file *file);

#endif /* SPYRE_SUBMIT_H */
