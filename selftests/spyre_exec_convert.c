// SPDX-License-Identifier: MIT
/*
 * spyre_exec_convert: COPY with dtype conversion, bit-exact against the
 * independent reference (spyre_ref_convert), in both fp8 overflow modes
 * (saturating, NOSAT).  NaNs compare with isnan() plus their sign (the
 * NaN encoding is unspecified; "NaN stays NaN and keeps its sign").
 *
 *  - every bit pattern of fp16, bf16, e4m3, e5m2 and int8 converted to
 *    every other convertible type (widening and narrowing: for 16-bit
 *    sources this covers every value of the narrower targets, their
 *    midpoints and the source ulps around them);
 *  - fp32 sources narrowed to fp16, bf16, e4m3, e5m2 and int8 at every
 *    representable value of the target, every midpoint between two
 *    neighbours (and beyond the largest finite value), and +-1 fp32 ulp
 *    around each, plus specials;
 *  - equal dtypes are byte copies (NaN payloads kept);
 *  - 2-D pitched conversion leaves the bytes between rows alone;
 *  - refused pairs (U8 or INT32 with another type) fail the job (-EIO).
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

static const uint32_t conv_types[] = {
	SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
	SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2, SPYRE_DTYPE_INT8,
};
#define NTYPES (sizeof(conv_types) / sizeof(conv_types[0]))

/*
 * Compare @n converted elements (@got) with the reference (@want), both
 * @dt: bit-exact, except that a NaN matches any NaN of the same sign.
 * Logs the first few mismatches with their source element.
 */
static uint64_t conv_compare(struct __test_metadata *_metadata,
			     const void *src, uint32_t sdt, const void *got,
			     const void *want, uint32_t dt, uint64_t n,
			     uint32_t flags)
{
	uint64_t bad = 0;
	int eb, mb;

	st_fmt(dt, &eb, &mb);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t g = st_load(got, dt, i), w = st_load(want, dt, i);
		double gv, wv;

		if (g == w)
			continue;
		gv = spyre_ref_decode(dt, g);
		wv = spyre_ref_decode(dt, w);
		if (eb && isnan(gv) && isnan(wv) &&
		    ((g >> (eb + mb)) & 1) == ((w >> (eb + mb)) & 1))
			continue;
		if (bad++ < 4)
			TH_LOG("%s -> %s%s: src %#x (%.9g): got %#x (%.9g), want %#x (%.9g)",
			       spyre_dtype_name(sdt), spyre_dtype_name(dt),
			       flags ? " nosat" : "", st_load(src, sdt, i),
			       spyre_ref_decode(sdt, st_load(src, sdt, i)), g,
			       gv, w, wv);
	}
	if (bad)
		TH_LOG("%s -> %s%s: %llu of %llu elements differ",
		       spyre_dtype_name(sdt), spyre_dtype_name(dt),
		       flags ? " nosat" : "", (unsigned long long)bad,
		       (unsigned long long)n);
	return bad;
}

/*
 * Convert @n elements at @src (dtype @sdt) to every type in conv_types,
 * with flags 0 and NOSAT, in one job; compare each with the reference.
 */
static uint64_t convert_all(struct __test_metadata *_metadata,
			    struct st_ctx *x, const void *host, uint32_t sdt,
			    uint64_t n)
{
	struct st_buf src, dst[NTYPES][2];
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint8_t *want = malloc(n * 4);
	uint64_t bad = 0;
	int ret;

	if (!cs || !want || st_buf_new(x, n * spyre_dtype_size(sdt), &src))
		return 1;
	memcpy(src.p, host, src.bytes);
	for (size_t t = 0; t < NTYPES; t++) {
		for (int f = 0; f < 2; f++) {
			uint32_t ddt = conv_types[t];

			if (st_buf_new(x, n * spyre_dtype_size(ddt), &dst[t][f]))
				return 1;
			memset(dst[t][f].p, 0xa5, dst[t][f].bytes);
			st_cs_copy(cs, f ? SPYRE_CMD_F_NOSAT : 0, dst[t][f].va,
				   ddt, 0, src.va, sdt, 0, n, 1);
		}
	}
	ret = st_run(x, cs);
	if (ret) {
		TH_LOG("COPY from %s (%llu elements): job error %d",
		       spyre_dtype_name(sdt), (unsigned long long)n, ret);
		bad = 1;
		goto out;
	}
	for (size_t t = 0; t < NTYPES; t++) {
		for (int f = 0; f < 2; f++) {
			uint32_t ddt = conv_types[t];
			uint32_t fl = f ? SPYRE_CMD_F_NOSAT : 0;

			if (spyre_ref_convert(want, ddt, host, sdt, n, fl)) {
				TH_LOG("reference refused %s -> %s",
				       spyre_dtype_name(sdt),
				       spyre_dtype_name(ddt));
				bad++;
				continue;
			}
			bad += conv_compare(_metadata, host, sdt, dst[t][f].p,
					    want, ddt, n, fl);
		}
	}
	if (memcmp(src.p, host, src.bytes)) {
		TH_LOG("source changed");
		bad++;
	}
out:
	free(cs);
	free(want);
	st_free_bufs(x);
	return bad;
}

FIXTURE(conv) {
	struct st_ctx x;
};

FIXTURE_SETUP(conv)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, DRM_SPYRE_CAP_FP16 | DRM_SPYRE_CAP_BF16 |
			      DRM_SPYRE_CAP_FP8 | DRM_SPYRE_CAP_INT8);
}

FIXTURE_TEARDOWN(conv)
{
	st_close(&self->x);
}

/* Every bit pattern of an 8- or 16-bit type, to every type. */
static void all_patterns(struct __test_metadata *_metadata, struct st_ctx *x,
			 uint32_t sdt)
{
	uint64_t n = spyre_dtype_size(sdt) == 1 ? 256 : 65536;
	uint8_t *host = malloc(n * 2);

	ASSERT_NE(NULL, host);
	for (uint64_t i = 0; i < n; i++)
		st_store(host, sdt, i, (uint32_t)i);
	EXPECT_EQ(0, convert_all(_metadata, x, host, sdt, n));
	free(host);
}

TEST_F_TIMEOUT(conv, every_fp16, 120)
{
	all_patterns(_metadata, &self->x, SPYRE_DTYPE_FP16);
}

TEST_F_TIMEOUT(conv, every_bf16, 120)
{
	all_patterns(_metadata, &self->x, SPYRE_DTYPE_BF16);
}

TEST_F(conv, every_e4m3)
{
	all_patterns(_metadata, &self->x, SPYRE_DTYPE_FP8_E4M3);
}

TEST_F(conv, every_e5m2)
{
	all_patterns(_metadata, &self->x, SPYRE_DTYPE_FP8_E5M2);
}

TEST_F(conv, every_int8)
{
	all_patterns(_metadata, &self->x, SPYRE_DTYPE_INT8);
}

/* fp32 test points for narrowing to @dt. */
static float *narrow_points(uint32_t dt, uint64_t *np)
{
	uint64_t cap = 1u << 20, n = 0;
	float *v = malloc(cap * sizeof(float));
	double prev = NAN;
	const double sp[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN,
			      0x1p-149, -0x1p-149, 0x1p-126, 3.4028234663852886e38,
			      -3.4028234663852886e38, 1e30, -1e30, 0.5, -0.5,
			      1.5, 2.5, -2.5 };
	int eb, mb;

	if (!v)
		return NULL;
#define ADD(x) do { if (n < cap) v[n++] = (float)(x); } while (0)
#define ADD3(x) do { float f_ = (float)(x);				\
		ADD(f_); ADD(nextafterf(f_, INFINITY));		\
		ADD(nextafterf(f_, -INFINITY)); } while (0)
	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++)
		ADD(sp[i]);
	if (dt == SPYRE_DTYPE_INT8) {
		for (int k = -130; k <= 130; k++) {
			ADD3(k);
			ADD3(k + 0.5);
			ADD3(-(k + 0.5));
		}
		ADD3(1e9);
		ADD3(-1e9);
		*np = n;
		return v;
	}
	st_fmt(dt, &eb, &mb);
	/* ascending non-negative finite values of @dt, both signs */
	for (uint32_t bits = 0; bits < (1u << (eb + mb)); bits++) {
		double cur = spyre_ref_decode(dt, bits);

		if (!isfinite(cur))
			break;	/* inf/NaN patterns come last */
		ADD3(cur);
		ADD3(-cur);
		if (!isnan(prev)) {
			double mid = (prev + cur) / 2;	/* exact in fp64 */

			ADD3(mid);
			ADD3(-mid);
		}
		prev = cur;
	}
	/* beyond the largest finite value: the next midpoint, and where the
	 * next binade step would be */
	{
		double ulp = prev - spyre_ref_decode(dt,
			spyre_ref_encode(dt, prev, 0) - 1);

		ADD3(prev + ulp / 2);
		ADD3(-(prev + ulp / 2));
		ADD3(prev + ulp);
		ADD3(-(prev + ulp));
		ADD3(prev * 4);
		ADD3(-prev * 4);
	}
#undef ADD
#undef ADD3
	*np = n;
	return v;
}

FIXTURE(narrow) {
	struct st_ctx x;
};

FIXTURE_VARIANT(narrow) {
	uint32_t dt;
};
FIXTURE_VARIANT_ADD(narrow, to_fp16) { SPYRE_DTYPE_FP16 };
FIXTURE_VARIANT_ADD(narrow, to_bf16) { SPYRE_DTYPE_BF16 };
FIXTURE_VARIANT_ADD(narrow, to_e4m3) { SPYRE_DTYPE_FP8_E4M3 };
FIXTURE_VARIANT_ADD(narrow, to_e5m2) { SPYRE_DTYPE_FP8_E5M2 };
FIXTURE_VARIANT_ADD(narrow, to_int8) { SPYRE_DTYPE_INT8 };

FIXTURE_SETUP(narrow)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, DRM_SPYRE_CAP_FP16 | DRM_SPYRE_CAP_BF16 |
			      DRM_SPYRE_CAP_FP8 | DRM_SPYRE_CAP_INT8);
}

FIXTURE_TEARDOWN(narrow)
{
	st_close(&self->x);
}

/*
 * fp32 at every value / midpoint / +-1 ulp of the variant's target type,
 * converted to every type (the target is the interesting one).
 */
TEST_F_TIMEOUT(narrow, fp32_points, 120)
{
	uint64_t n = 0;
	float *v = narrow_points(variant->dt, &n);

	ASSERT_NE(NULL, v);
	ASSERT_LT(100, n);
	EXPECT_EQ(0, convert_all(_metadata, &self->x, v, SPYRE_DTYPE_FP32, n));
	free(v);
}

/* Equal dtypes copy bytes, NaN payloads included. */
TEST_F(conv, same_dtype_is_byte_copy)
{
	static const uint32_t types[] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16,
					  SPYRE_DTYPE_BF16, SPYRE_DTYPE_FP8_E4M3,
					  SPYRE_DTYPE_FP8_E5M2, SPYRE_DTYPE_INT8,
					  SPYRE_DTYPE_INT32, SPYRE_DTYPE_U8 };
	const uint64_t bytes = 65536;
	struct st_buf src, dst[8];
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint64_t seed = 5;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, st_buf_new(&self->x, bytes, &src));
	for (uint64_t i = 0; i < bytes; i += 8) {
		uint64_t r = st_rand(&seed);

		memcpy(src.p + i, &r, 8);
	}
	/* plenty of NaN payloads in every format */
	for (uint64_t i = 0; i < bytes; i += 64)
		memcpy(src.p + i, &(uint32_t){ 0x7fa12345 }, 4);
	for (size_t t = 0; t < 8; t++) {
		uint64_t n = bytes / spyre_dtype_size(types[t]);

		ASSERT_EQ(0, st_buf_new(&self->x, bytes, &dst[t]));
		st_cs_copy(cs, t & 1 ? SPYRE_CMD_F_NOSAT : 0, dst[t].va,
			   types[t], 0, src.va, types[t], 0, n, 1);
	}
	ASSERT_EQ(0, st_run(&self->x, cs));
	for (size_t t = 0; t < 8; t++) {
		EXPECT_EQ(bytes, st_first_diff(src.p, dst[t].p, bytes))
			TH_LOG("%s", spyre_dtype_name(types[t]));
	}
	free(cs);
}

/* 2-D pitched conversions: fp32 -> bf16 and back, odd sizes. */
TEST_F(conv, pitched_2d)
{
	const uint64_t w = 37, h = 19, sp = 41 * 4 + 4, dp = 40 * 2 + 6;
	uint64_t seed = 9, ne = (h - 1) * sp / 4 + w;
	struct st_buf src, mid, back;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint16_t *want = malloc(w * 2);
	uint8_t *mid0;

	ASSERT_NE(NULL, cs);
	ASSERT_NE(NULL, want);
	ASSERT_EQ(0, st_buf_new(&self->x, ne * 4, &src));
	ASSERT_EQ(0, st_buf_new(&self->x, (h - 1) * dp + w * 2, &mid));
	ASSERT_EQ(0, st_buf_new(&self->x, (h - 1) * sp + w * 4, &back));
	for (uint64_t i = 0; i < ne; i++)
		st_store(src.p, SPYRE_DTYPE_FP32, i,
			 st_rand_elem(&seed, SPYRE_DTYPE_FP32, -130, 127));
	memset(mid.p, 0x3c, mid.bytes);
	mid0 = malloc(mid.bytes);
	ASSERT_NE(NULL, mid0);
	memcpy(mid0, mid.p, mid.bytes);
	st_cs_copy(cs, 0, mid.va, SPYRE_DTYPE_BF16, dp, src.va,
		   SPYRE_DTYPE_FP32, sp, w, h);
	st_cs_copy(cs, 0, back.va, SPYRE_DTYPE_FP32, sp, mid.va,
		   SPYRE_DTYPE_BF16, dp, w, h);
	ASSERT_EQ(0, st_run(&self->x, cs));
	for (uint64_t r = 0; r < h; r++) {
		ASSERT_EQ(0, spyre_ref_convert(want, SPYRE_DTYPE_BF16,
					       src.p + r * sp, SPYRE_DTYPE_FP32,
					       w, 0));
		EXPECT_EQ(0, conv_compare(_metadata, src.p + r * sp,
					  SPYRE_DTYPE_FP32, mid.p + r * dp,
					  want, SPYRE_DTYPE_BF16, w, 0))
			TH_LOG("row %llu", (unsigned long long)r);
		/* widening back is exact */
		for (uint64_t c = 0; c < w; c++) {
			uint32_t got = st_load(back.p + r * sp, SPYRE_DTYPE_FP32,
					       c);
			double gv = st_u2f(got);
			double wv = spyre_ref_decode(SPYRE_DTYPE_BF16,
						     want[c]);

			if (!(isnan(gv) && isnan(wv))) {
				ASSERT_EQ(wv, gv) TH_LOG("row %llu col %llu",
					(unsigned long long)r,
					(unsigned long long)c);
			}
		}
		/* bytes between rows untouched */
		if (r + 1 < h) {
			ASSERT_EQ(0, memcmp(mid.p + r * dp + w * 2,
					    mid0 + r * dp + w * 2,
					    dp - w * 2));
		}
	}
	free(mid0);
	free(want);
	free(cs);
}

/* Pairs the card refuses: U8 and INT32 only pair with themselves. */
TEST_F(conv, refused_pairs)
{
	static const uint32_t pairs[][2] = {
		{ SPYRE_DTYPE_U8, SPYRE_DTYPE_FP32 },
		{ SPYRE_DTYPE_FP16, SPYRE_DTYPE_U8 },
		{ SPYRE_DTYPE_INT32, SPYRE_DTYPE_FP32 },
		{ SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32 },
		{ 0, SPYRE_DTYPE_FP32 },
		{ SPYRE_DTYPE_FP32, SPYRE_DTYPE_COUNT },
	};

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		struct st_ctx x;
		struct st_buf a, b;
		struct st_cs *cs = calloc(1, sizeof(*cs));

		ASSERT_NE(NULL, cs);
		ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
		ASSERT_EQ(0, st_buf_new(&x, 4096, &a));
		ASSERT_EQ(0, st_buf_new(&x, 4096, &b));
		st_cs_copy(cs, 0, b.va, pairs[i][1], 0, a.va, pairs[i][0], 0,
			   16, 1);
		EXPECT_EQ(-EIO, st_run(&x, cs)) TH_LOG("%u -> %u", pairs[i][0],
						       pairs[i][1]);
		EXPECT_EQ(-EIO, st_ctx_error(x.fd));
		st_close(&x);
		free(cs);
	}
}

TEST_HARNESS_MAIN
