// SPDX-License-Identifier: MIT
/*
 * Host test of libspyre.so's ABI: SONAME file name, symbol versions (each
 * function in the version node of the release that added it), nothing
 * internal exported, and the headers' constants equal to the uapi.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "kselftest_harness.h"

#include <spyre/spyre.h>
#include "drm/spyre_accel.h"

#ifndef LIBSPYRE_SO
#error "build with -DLIBSPYRE_SO=\"<path>/libspyre.so.0\""
#endif

static const char *const v0_syms[] = {
	"spyre_version", "spyre_strerror", "spyre_device_list",
	"spyre_device_count", "spyre_device_open", "spyre_device_open_pci",
	"spyre_device_open_path", "spyre_device_close",
	"spyre_device_get_info", "spyre_device_fd", "spyre_device_error",
	"spyre_bo_alloc", "spyre_bo_free", "spyre_bo_map", "spyre_bo_va",
	"spyre_bo_size", "spyre_bo_handle", "spyre_cmdbuf_create",
	"spyre_cmdbuf_destroy", "spyre_cmdbuf_reset", "spyre_cmdbuf_size",
	"spyre_cmdbuf_count", "spyre_cmdbuf_data", "spyre_cmdbuf_nop",
	"spyre_cmdbuf_fill", "spyre_cmdbuf_copy", "spyre_cmdbuf_copy_2d",
	"spyre_cmdbuf_timestamp", "spyre_cmdbuf_sem_wait",
	"spyre_cmdbuf_sem_signal", "spyre_cmdbuf_raw", "spyre_cmdbuf_upload",
	"spyre_queue_create", "spyre_queue_destroy", "spyre_queue_id",
	"spyre_queue_syncobj", "spyre_submit", "spyre_submit_va",
	"spyre_fence_wait", "spyre_fence_query",
	"spyre_fence_export_sync_file", "spyre_stream_create",
	"spyre_stream_destroy", "spyre_stream_queue", "spyre_stream_fill",
	"spyre_stream_copy", "spyre_stream_copy_2d",
	"spyre_stream_last_fence", "spyre_stream_sync",
};

static const char *const v02_syms[] = {
	"spyre_bo_register_host", "spyre_bo_unmap", "spyre_bo_placement",
	"spyre_bo_wait", "spyre_bo_export_dmabuf", "spyre_bo_import_dmabuf",
	"spyre_device_memory_info", "spyre_device_context_info",
};

static const char *const v03_syms[] = {
	"spyre_dtype_epsilon", "spyre_dtype_is_float", "spyre_dtype_max",
	"spyre_dtype_min_subnormal", "spyre_dtype_name", "spyre_dtype_size",
	"spyre_ref_bf16_to_f64", "spyre_ref_close", "spyre_ref_compare",
	"spyre_ref_convert", "spyre_ref_decode", "spyre_ref_e4m3_to_f64",
	"spyre_ref_e5m2_to_f64", "spyre_ref_eltwise", "spyre_ref_encode",
	"spyre_ref_f64_to_bf16", "spyre_ref_f64_to_e4m3",
	"spyre_ref_f64_to_e5m2", "spyre_ref_f64_to_fp16",
	"spyre_ref_f64_to_fp32", "spyre_ref_f64_to_int32",
	"spyre_ref_f64_to_int8", "spyre_ref_fp16_to_f64", "spyre_ref_fp32_err",
	"spyre_ref_from_f64", "spyre_ref_gemm", "spyre_ref_reduce",
	"spyre_ref_rowop", "spyre_ref_to_f64", "spyre_ref_tol",
};

static const char *const v04_syms[] = {
	"spyre_cmdbuf_bos", "spyre_cmdbuf_convert", "spyre_cmdbuf_eltwise",
	"spyre_cmdbuf_gemm", "spyre_cmdbuf_reduce", "spyre_cmdbuf_rowop",
	"spyre_event_create", "spyre_event_destroy", "spyre_event_elapsed_ns",
	"spyre_event_export_sync_file", "spyre_event_import_sync_file",
	"spyre_event_query", "spyre_event_record", "spyre_event_timestamp",
	"spyre_event_wait", "spyre_graph_create", "spyre_graph_destroy",
	"spyre_graph_launch", "spyre_graph_size", "spyre_stream_convert",
	"spyre_stream_copy_d2h", "spyre_stream_copy_h2d",
	"spyre_stream_copy_peer", "spyre_stream_eltwise", "spyre_stream_error",
	"spyre_stream_gemm", "spyre_stream_layernorm", "spyre_stream_query",
	"spyre_stream_reduce", "spyre_stream_rmsnorm", "spyre_stream_softmax",
	"spyre_stream_submit", "spyre_stream_wait_event",
};

static const char *const v05_syms[] = {
	"spyre_cmdbuf_copy_mem", "spyre_cmdbuf_fill_mem",
};

/* Each name of @syms is defined at @ver and at no other node of @all. */
static void check_node(struct __test_metadata *_metadata, void *h,
		       const char *const *syms, size_t n, const char *ver)
{
	static const char *const all[] = {
		"LIBSPYRE_0", "LIBSPYRE_0.2", "LIBSPYRE_0.3", "LIBSPYRE_0.4",
		"LIBSPYRE_0.5", "LIBSPYRE_0.6", "LIBSPYRE_0.7", "LIBSPYRE_0.8",
	};

	for (size_t i = 0; i < n; i++) {
		EXPECT_NE(NULL, dlvsym(h, syms[i], ver))
			TH_LOG("%s@%s", syms[i], ver);
		for (size_t j = 0; j < sizeof(all) / sizeof(all[0]); j++) {
			if (strcmp(all[j], ver))
				EXPECT_EQ(NULL, dlvsym(h, syms[i], all[j]))
					TH_LOG("%s also at %s", syms[i],
					       all[j]);
		}
	}
}

FIXTURE(so) {
	void *h;
};

FIXTURE_SETUP(so)
{
	self->h = dlopen(LIBSPYRE_SO, RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, self->h) TH_LOG("%s", dlerror());
}

FIXTURE_TEARDOWN(so)
{
	if (self->h)
		dlclose(self->h);
}

TEST_F(so, symbol_versions)
{
	const size_t n0 = sizeof(v0_syms) / sizeof(v0_syms[0]);
	const size_t n2 = sizeof(v02_syms) / sizeof(v02_syms[0]);

	EXPECT_EQ(49, n0);	/* 0.1.0 shipped 49 functions: never fewer */
	for (size_t i = 0; i < n0; i++) {
		EXPECT_NE(NULL, dlvsym(self->h, v0_syms[i], "LIBSPYRE_0"))
			TH_LOG("%s@LIBSPYRE_0", v0_syms[i]);
		EXPECT_EQ(NULL, dlvsym(self->h, v0_syms[i], "LIBSPYRE_0.2"))
			TH_LOG("%s moved to LIBSPYRE_0.2", v0_syms[i]);
	}
	for (size_t i = 0; i < n2; i++) {
		EXPECT_NE(NULL, dlvsym(self->h, v02_syms[i], "LIBSPYRE_0.2"))
			TH_LOG("%s@LIBSPYRE_0.2", v02_syms[i]);
		EXPECT_EQ(NULL, dlvsym(self->h, v02_syms[i], "LIBSPYRE_0"))
			TH_LOG("%s in the released LIBSPYRE_0", v02_syms[i]);
	}
}

TEST_F(so, symbol_versions_0_3_and_0_4)
{
	check_node(_metadata, self->h, v03_syms,
		   sizeof(v03_syms) / sizeof(v03_syms[0]), "LIBSPYRE_0.3");
	check_node(_metadata, self->h, v04_syms,
		   sizeof(v04_syms) / sizeof(v04_syms[0]), "LIBSPYRE_0.4");
	EXPECT_EQ(30, sizeof(v03_syms) / sizeof(v03_syms[0]));
	EXPECT_EQ(33, sizeof(v04_syms) / sizeof(v04_syms[0]));
}

TEST_F(so, symbol_versions_0_5_and_0_6)
{
	static const char *const v06_syms[] = { "spyre_device_telemetry" };

	check_node(_metadata, self->h, v05_syms,
		   sizeof(v05_syms) / sizeof(v05_syms[0]), "LIBSPYRE_0.5");
	check_node(_metadata, self->h, v06_syms,
		   sizeof(v06_syms) / sizeof(v06_syms[0]), "LIBSPYRE_0.6");
}

TEST_F(so, symbol_versions_0_7)
{
	static const char *const v07_syms[] = { "spyre_graph_launch_staged" };

	check_node(_metadata, self->h, v07_syms,
		   sizeof(v07_syms) / sizeof(v07_syms[0]), "LIBSPYRE_0.7");
}

TEST_F(so, symbol_versions_0_8)
{
	static const char *const v08_syms[] = {
		"spyre_cmdbuf_kernel", "spyre_kernel_affine",
		"spyre_kernel_bitcast", "spyre_kernel_check",
		"spyre_kernel_const", "spyre_kernel_const_f32",
		"spyre_kernel_create", "spyre_kernel_cvt",
		"spyre_kernel_destroy", "spyre_kernel_disasm",
		"spyre_kernel_endpass", "spyre_kernel_error",
		"spyre_kernel_finalize", "spyre_kernel_idx", "spyre_kernel_load",
		"spyre_kernel_op", "spyre_kernel_param", "spyre_kernel_pass",
		"spyre_kernel_reduce", "spyre_kernel_size", "spyre_kernel_store",
		"spyre_kernel_type", "spyre_kernel_upload", "spyre_ref_kernel",
		"spyre_stream_kernel",
	};

	check_node(_metadata, self->h, v08_syms,
		   sizeof(v08_syms) / sizeof(v08_syms[0]), "LIBSPYRE_0.8");
}

TEST_F(so, symbol_versions_0_9)
{
	static const char *const v09_syms[] = {
		"spyre_kernel_dtype_type", "spyre_kernel_rand", "spyre_kernel_scan",
		"spyre_kernel_scatter", "spyre_ref_philox4x32_10",
		"spyre_stream_enqueued", "spyre_stream_flush",
		"spyre_stream_set_batch", "spyre_stream_timestamp",
	};

	check_node(_metadata, self->h, v09_syms,
		   sizeof(v09_syms) / sizeof(v09_syms[0]), "LIBSPYRE_0.9");
}

TEST_F(so, internals_hidden)
{
	static const char *const hidden[] = {
		"spyre__scan", "spyre__parse_visible", "spyre__parse_pci_addr",
		"spyre__telemetry",
		"spyre__device_get", "spyre__device_put", "spyre__set_error",
		"spyre__deadline", "spyre__wait_point", "spyre__submit",
		"spyre__stream_begin", "spyre__stream_submit_locked",
		"spyre__queue_retire", "spyre__sync_file_status",
		"spyre__cmdbuf_fini", "spyre__refresh_error",
		"spyre__kverify_program", "spyre__kverify_inst", "spyre__kop",
		"spyre__cmdbuf_kernel", "spyre__kernel_dump",
		"spyre__cmdbuf_append", "spyre__stream_flush_bo",
		"spyre__getpid",
	};

	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
		EXPECT_EQ(NULL, dlsym(self->h, hidden[i]))
			TH_LOG("%s exported", hidden[i]);
	}
}

TEST_F(so, version_string)
{
	const char *(*ver)(void) = (const char *(*)(void))dlsym(self->h,
							"spyre_version");

	ASSERT_NE(NULL, ver);
	EXPECT_STREQ("0.9.0", ver());
	EXPECT_EQ(0, SPYRE_VERSION_MAJOR);
	EXPECT_EQ(9, SPYRE_VERSION_MINOR);
}

TEST(constants_match_uapi)
{
	EXPECT_EQ(DRM_SPYRE_BO_DEVICE, SPYRE_BO_DEVICE);
	EXPECT_EQ(DRM_SPYRE_USERPTR_READONLY, SPYRE_HOST_READONLY);
	EXPECT_EQ(DRM_SPYRE_PLACEMENT_SYSTEM, SPYRE_PLACEMENT_SYSTEM);
	EXPECT_EQ(DRM_SPYRE_PLACEMENT_DEVICE, SPYRE_PLACEMENT_DEVICE);
	EXPECT_EQ(DRM_SPYRE_PLACEMENT_USERPTR, SPYRE_PLACEMENT_HOST);
	EXPECT_EQ(DRM_SPYRE_PLACEMENT_IMPORTED, SPYRE_PLACEMENT_IMPORTED);
	EXPECT_EQ(DRM_SPYRE_CAP_FP16, SPYRE_DEV_CAP_FP16);
	EXPECT_EQ(DRM_SPYRE_CAP_SEM, SPYRE_DEV_CAP_SEM);
	EXPECT_EQ(DRM_SPYRE_CAP_KERNEL, SPYRE_DEV_CAP_KERNEL);
	/* public structs keep room to grow */
	EXPECT_LE(sizeof(struct drm_spyre_memory_info),
		  sizeof(struct spyre_memory_info));
	EXPECT_EQ(sizeof(struct drm_spyre_context_info),
		  sizeof(struct spyre_context_info));
}

/*
 * The ioctl structs (botching-up-ioctls.rst): sizes that are multiples of
 * 8 (no tail padding differs between 32- and 64-bit userspace), every
 * __u64 naturally aligned, and the sizes this ABI froze.
 */
#define LAYOUT(type, size)						\
	do {								\
		EXPECT_EQ(size, sizeof(struct type)) TH_LOG(#type);	\
		EXPECT_EQ(0, sizeof(struct type) % 8) TH_LOG(#type);	\
	} while (0)
#define ALIGNED64(type, field)						\
	EXPECT_EQ(0, offsetof(struct type, field) % 8) TH_LOG(#type "." #field)

TEST(uapi_layout)
{
	LAYOUT(drm_spyre_query, 24);
	LAYOUT(drm_spyre_device_info, 112);
	LAYOUT(drm_spyre_memory_info, 96);
	LAYOUT(drm_spyre_context_info, 64);
	LAYOUT(drm_spyre_bo_create, 24);
	LAYOUT(drm_spyre_queue_create, 16);
	LAYOUT(drm_spyre_queue_destroy, 8);
	LAYOUT(drm_spyre_sync, 16);
	LAYOUT(drm_spyre_bo_ref, 8);
	LAYOUT(drm_spyre_job, 64);
	LAYOUT(drm_spyre_submit, 24);
	ALIGNED64(drm_spyre_device_info, devmem_size);
	ALIGNED64(drm_spyre_device_info, reserved);
	ALIGNED64(drm_spyre_job, cmd_va);
	ALIGNED64(drm_spyre_job, bos);
	ALIGNED64(drm_spyre_job, in_syncs);
	ALIGNED64(drm_spyre_job, out_syncs);
	ALIGNED64(drm_spyre_job, seqno);
	ALIGNED64(drm_spyre_sync, point);
	ALIGNED64(drm_spyre_submit, jobs);
	/* SUBMIT's minimum job stride: through cmd_size, rounded up to 8 */
	EXPECT_EQ(24, (offsetof(struct drm_spyre_job, cmd_size) + 4 + 7) & ~7ul);
}

TEST_HARNESS_MAIN
