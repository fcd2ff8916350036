/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: resets, recovery, the lost-interrupt poll and
 * devcoredump (spyre_reset.c).
 */
#ifndef SPYRE_RESET_H
#define SPYRE_RESET_H

#include <linux/pci.h>

#include "spyre_drv.h"

struct spyre_job;
struct spyre_queue;

/* Period of the lost-interrupt poll while jobs are pending. */
#define SPYRE_POLL_MS		20

extern const struct pci_error_handlers spyre_err_handlers;

void spyre_hw_block(struct spyre_device *sdev);
void spyre_hw_unblock(struct spyre_device *sdev);
void spyre_reset_begin(struct spyre_device *sdev, bool mmio);
int spyre_reset_end(struct spyre_device *sdev, enum spyre_recovery_reason why);
int spyre_reset_init(struct spyre_device *sdev);
void spyre_reset_fini(struct spyre_device *sdev);
void spyre_recover(struct spyre_device *sdev, enum spyre_recovery_reason why);
void spyre_poll_arm(struct spyre_device *sdev);
void spyre_coredump(struct spyre_device *sdev, const char *reason,
		    struct spyre_queue *q, struct spyre_job *job);

#endif /* SPYRE_RESET_H */
