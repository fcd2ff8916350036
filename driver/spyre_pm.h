/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: power management, system sleep and runtime PM
 * (spyre_pm.c).
 */
#ifndef SPYRE_PM_H
#define SPYRE_PM_H

#include <linux/pm.h>

#include "spyre_drv.h"

extern const struct dev_pm_ops spyre_pm_ops;

int spyre_pm_get(struct spyre_device *sdev);
void spyre_pm_put(struct spyre_device *sdev);
bool spyre_pm_get_if_active(struct spyre_device *sdev);
void spyre_pm_init(struct spyre_device *sdev);
void spyre_pm_fini(struct spyre_device *sdev);

#endif /* SPYRE_PM_H */
