// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: power management.
 *
 * System sleep is a reset across a power loss (see spyre_reset.c):
 * suspend() lets the running jobs end (up to SPYRE_SUSPEND_DRAIN_MS; one
 * still running, e.g. waiting on a semaphore, is interrupted), holds
 * reset_sem for writing across the sleep and notes how far the card got;
 * resume() resets the card, programs it again and replays the unfinished
 * jobs (spyre_queue_replay()).
 *
 * Runtime PM: the card is suspended when nothing needs it, about
 * SPYRE_AUTOSUSPEND_MS after the last user went away.  What needs it, and
 * holds a runtime-PM reference for as long:
 *  - every open file (spyre_open() to spyre_postclose()), and so every
 *    queue and job, which only an open file can create;
 *  - every device-memory BO (created to freed): its contents live on the
 *    card, and it may outlive its file through dma-buf and CPU mappings,
 *    which hold the BO.
 * Runtime suspend quiesces the card (interrupts, queues, RESET); runtime
 * resume brings it up as after a reset, with the page-table roots of the
 * contexts that outlived their files.  Reading sysfs never wakes the card
 * (its attributes are the driver's own counters); debugfs reads the
 * card's registers only while it is active.
 */

#include <linux/delay.h>
#include <linux/dma-fence.h>
#include <linux/pci.h>
#include <linux/pm_runtime.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "spyre_drv.h"
#include "spyre_mmu.h"
#include "spyre_pm.h"
#include "spyre_queue.h"
#include "spyre_reset.h"

/* How long suspend() lets running jobs end before it interrupts them. */
#define SPYRE_SUSPEND_DRAIN_MS	1000
/* Idle time before the card is runtime-suspended. */
#define SPYRE_AUTOSUSPEND_MS	1000

/* ---- System sleep ------------------------------------------------------ */

static int spyre_pm_suspend(struct device *dev)
{
	struct spyre_device *sdev = pci_get_drvdata(to_pci_dev(dev));
	unsigned long end = jiffies + msecs_to_jiffies(SPYRE_SUSPEND_DRAIN_MS);
	bool cookie = dma_fence_begin_signalling();
	unsigned int i;
	int idx;

	down_write(&sdev->reset_sem);
	spyre_hw_block(sdev);		/* until resume() */
	if (!drm_dev_enter(&sdev->drm, &idx)) {
		up_write(&sdev->reset_sem);
		dma_fence_end_signalling(cookie);
		return 0;
	}
	spyre_write32(sdev, SPYRE_REG_CONTROL, 0);
	/* hwq[] changes only under reset_sem: it is stable here. */
	for (i = 0; i < sdev->num_queues; i++)
		while (sdev->hwq[i] && time_before(jiffies, end) &&
		       spyre_read32(sdev, SPYRE_QUEUE_REG(i, SPYRE_Q_STATUS)) ==
		       SPYRE_QS_BUSY)
			usleep_range(200, 500);
	spyre_reset_begin(sdev, true);
	drm_dev_exit(idx);
	up_write(&sdev->reset_sem);
	dma_fence_end_signalling(cookie);
	return 0;
}

static int spyre_pm_resume(struct device *dev)
{
	struct spyre_device *sdev = pci_get_drvdata(to_pci_dev(dev));
	bool cookie = dma_fence_begin_signalling();
	int idx;

	lock_map_acquire(&sdev->hw_block_map);
	down_write(&sdev->reset_sem);
	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_reset_end(sdev, SPYRE_RESET_RESUME);
		drm_dev_exit(idx);
	}
	spyre_hw_unblock(sdev);
	up_write(&sdev->reset_sem);
	lock_map_release(&sdev->hw_block_map);
	dma_fence_end_signalling(cookie);
	return 0;
}

/* ---- Runtime PM -------------------------------------------------------- */

static int spyre_pm_runtime_suspend(struct device *dev)
{
	struct spyre_device *sdev = pci_get_drvdata(to_pci_dev(dev));
	int idx;

	if (drm_dev_enter(&sdev->drm, &idx)) {
		down_write(&sdev->reset_sem);
		/* sysfs shows this sample until the card resumes. */
		spyre_tel_sample(sdev);
		spyre_hw_disable(sdev);
		up_write(&sdev->reset_sem);
		drm_dev_exit(idx);
	}
	return 0;
}

static int spyre_pm_runtime_resume(struct device *dev)
{
	struct spyre_device *sdev = pci_get_drvdata(to_pci_dev(dev));
	int idx, ret = 0;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return 0;
	down_write(&sdev->reset_sem);
	ret = spyre_hw_reset(sdev);
	if (!ret) {
		spyre_hw_enable(sdev);
		spyre_ctxs_restore_hw(sdev);
		spyre_queues_restore_hw(sdev);
	}
	up_write(&sdev->reset_sem);
	drm_dev_exit(idx);
	return ret;
}

const struct dev_pm_ops spyre_pm_ops = {
	SYSTEM_SLEEP_PM_OPS(spyre_pm_suspend, spyre_pm_resume)
	RUNTIME_PM_OPS(spyre_pm_runtime_suspend, spyre_pm_runtime_resume,
		       NULL)
};

/**
 * spyre_pm_get() - hold the card powered (runtime PM), resuming it.
 * @sdev: device.
 *
 * Return: 0, or a negative errno if the card could not be resumed (no
 * reference is held then).
 */
int spyre_pm_get(struct spyre_device *sdev)
{
	return pm_runtime_resume_and_get(&sdev->pdev->dev);
}

/**
 * spyre_pm_put() - drop a spyre_pm_get() reference; the card suspends
 * SPYRE_AUTOSUSPEND_MS after the last one.
 * @sdev: device.
 */
void spyre_pm_put(struct spyre_device *sdev)
{
	struct device *dev = &sdev->pdev->dev;

	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
}

/**
 * spyre_pm_get_if_active() - hold the card powered only if it is now.
 * @sdev: device.
 *
 * For readers of the card's registers that must not wake it (debugfs).
 *
 * Return: true if a reference was taken (spyre_pm_put() it).
 */
bool spyre_pm_get_if_active(struct spyre_device *sdev)
{
	return pm_runtime_get_if_active(&sdev->pdev->dev) > 0;
}

/**
 * spyre_pm_init() - enable runtime PM at the end of probe.
 * @sdev: device, probed: the PCI core holds a reference across probe,
 *	which this hands over to autosuspend.
 */
void spyre_pm_init(struct spyre_device *sdev)
{
	struct device *dev = &sdev->pdev->dev;

	pm_runtime_set_autosuspend_delay(dev, SPYRE_AUTOSUSPEND_MS);
	pm_runtime_use_autosuspend(dev);
	pm_runtime_allow(dev);
	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
}

/**
 * spyre_pm_fini() - undo spyre_pm_init() at remove (the PCI core resumed
 * the card before calling remove()).
 * @sdev: device.
 */
void spyre_pm_fini(struct spyre_device *sdev)
{
	struct device *dev = &sdev->pdev->dev;

	pm_runtime_get_noresume(dev);
	pm_runtime_forbid(dev);
	pm_runtime_dont_use_autosuspend(dev);
}
