// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test module for the VM runner's own tests: logs one WARN on load, so
 * tests/runner/test-vm.sh can check that scripts/vm.sh fails such a run.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init warn_on_load_init(void)
{
	WARN(1, "spyre runner test: deliberate warning\n");
	return 0;
}
module_init(warn_on_load_init);

MODULE_DESCRIPTION("Deliberate WARN for the Spyre VM runner tests");
MODULE_LICENSE("GPL");
