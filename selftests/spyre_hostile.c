// SPDX-License-Identifier: MIT
/*
 * spyre_hostile: ioctls that crash an unprotected 6.12 accel node.
 *
 * DRM_IOCTL_GET_MAGIC and DRM_IOCTL_GET_UNIQUE dereference the (absent)
 * master of an accel file in the 6.12 core; the driver must refuse them.
 * A failure here oopses the guest, so this suite runs last.
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

FIXTURE(card) {
	int fd;
};

FIXTURE_SETUP(card)
{
	self->fd = st_open_card(0);
	SKIP_IF_NO_CARD(self->fd);
}

FIXTURE_TEARDOWN(card)
{
	if (self->fd >= 0)
		close(self->fd);
}

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
