// SPDX-License-Identifier: MIT
/*
 * Host unit tests for libspyre's reference numerics (<spyre/spyre_ref.h>).
 * No device needed.
 *
 * Oracles, each independent of the code under test:
 *  - fp16: gcc's _Float16 (widening and the (_Float16) cast);
 *  - bf16: its definition, the upper half of binary32, with round to
 *    nearest even done on the bit pattern;
 *  - fp8: hand-written tables of all 128 positive values of OCP OFP8 E4M3
 *    and E5M2 (rev. 1.0) and the spec's named values; the nearest value at
 *    a midpoint is the neighbour with the even significand;
 *  - fp32: the host's (float) cast;
 *  - ops: hand-computed results, and naive fp32 implementations (what a
 *    card computes) that must fall within the documented tolerances.
 */
#include "kselftest_harness.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <spyre/spyre_ref.h>

/* Report at most this many mismatches of a sweep, then count silently. */
#define MAX_LOGGED 8

static uint16_t h_bits(_Float16 h)
{
	uint16_t b;

	memcpy(&b, &h, sizeof(b));
	return b;
}

static _Float16 h_from_bits(uint16_t b)
{
	_Float16 h;

	memcpy(&h, &b, sizeof(h));
	return h;
}

static uint32_t f_bits(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
}

static float f_from_bits(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

/* Same value, and same sign for zeros; any NaN matches any NaN. */
static bool same_value(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return a == b && signbit(a) == signbit(b);
}

/* Deterministic pseudo-random numbers (64-bit LCG, top bits). */
static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t rnd32(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 32);
}

/* Uniform in [lo, hi). */
static double rnd_uniform(double lo, double hi)
{
	return lo + (hi - lo) * (rnd32() / 4294967296.0);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ */
/* Dtype helpers                                                       */
/* ------------------------------------------------------------------ */

TEST(dtype_helpers)
{
	static const struct {
		uint32_t dtype;
		size_t size;
		const char *name;
		bool is_float;
		double max, eps, min_sub;
	} t[] = {
		{ SPYRE_DTYPE_U8, 1, "u8", false, 255, 0, 1 },
		{ SPYRE_DTYPE_FP32, 4, "fp32", true, FLT_MAX, 0x1p-24,
		  0x1p-149 },
		{ SPYRE_DTYPE_FP16, 2, "fp16", true, 65504, 0x1p-11, 0x1p-24 },
		{ SPYRE_DTYPE_BF16, 2, "bf16", true, 0x1.fep127, 0x1p-8,
		  0x1p-133 },
		{ SPYRE_DTYPE_FP8_E4M3, 1, "fp8_e4m3", true, 448, 0x1p-4,
		  0x1p-9 },
		{ SPYRE_DTYPE_FP8_E5M2, 1, "fp8_e5m2", true, 57344, 0x1p-3,
		  0x1p-16 },
		{ SPYRE_DTYPE_INT8, 1, "int8", false, 127, 0, 1 },
		{ SPYRE_DTYPE_INT32, 4, "int32", false, 2147483647.0, 0, 1 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		EXPECT_EQ(t[i].size, spyre_dtype_size(t[i].dtype));
		EXPECT_STREQ(t[i].name, spyre_dtype_name(t[i].dtype));
		EXPECT_EQ(t[i].is_float, spyre_dtype_is_float(t[i].dtype));
		EXPECT_TRUE(spyre_dtype_max(t[i].dtype) == t[i].max);
		EXPECT_TRUE(spyre_dtype_epsilon(t[i].dtype) == t[i].eps);
		EXPECT_TRUE(spyre_dtype_min_subnormal(t[i].dtype) ==
			    t[i].min_sub);
	}
	EXPECT_EQ(0, spyre_dtype_size(0));
	EXPECT_EQ(0, spyre_dtype_size(SPYRE_DTYPE_COUNT));
	EXPECT_STREQ("invalid", spyre_dtype_name(0));
	EXPECT_STREQ("invalid", spyre_dtype_name(1000));
	EXPECT_FALSE(spyre_dtype_is_float(0));
	EXPECT_TRUE(spyre_dtype_max(0) == 0);
	EXPECT_TRUE(spyre_dtype_epsilon(0) == -1);
	EXPECT_TRUE(isnan(spyre_ref_decode(0, 0)));
	EXPECT_EQ(0, spyre_ref_encode(0, 1.0, 0));
	EXPECT_EQ(0, spyre_ref_encode(SPYRE_DTYPE_FP16, 1.0, 0x2));
}

/* ------------------------------------------------------------------ */
/* FP16 against _Float16                                               */
/* ------------------------------------------------------------------ */

TEST(fp16_widen_all_patterns)
{
	int bad = 0;

	for (uint32_t h = 0; h < 0x10000; h++) {
		double want = (double)h_from_bits((uint16_t)h);
		double got = spyre_ref_fp16_to_f64((uint16_t)h);

		if (!same_value(got, want) ||
		    !same_value(got, spyre_ref_decode(SPYRE_DTYPE_FP16, h)) ||
		    (isnan(got) && !signbit(got) != !(h & 0x8000))) {
			if (bad++ < MAX_LOGGED)
				TH_LOG("fp16 0x%04x: got %a want %a", h, got,
				       want);
		}
	}
	ASSERT_EQ(0, bad);
	/* Named values of binary16. */
	ASSERT_TRUE(spyre_ref_fp16_to_f64(0x7bff) == 65504.0);
	ASSERT_TRUE(spyre_ref_fp16_to_f64(0x0400) == 0x1p-14);
	ASSERT_TRUE(spyre_ref_fp16_to_f64(0x0001) == 0x1p-24);
	ASSERT_TRUE(spyre_ref_fp16_to_f64(0x3c00) == 1.0);
	ASSERT_TRUE(spyre_ref_fp16_to_f64(0x7c00) == INFINITY);
	ASSERT_TRUE(spyre_ref_fp16_to_f64(0xfc00) == -INFINITY);
	ASSERT_TRUE(isnan(spyre_ref_fp16_to_f64(0x7e00)));
}

/*
 * Narrow q (an fp32 value) to fp16 with the library and with the cast;
 * returns false on a mismatch.  NaN results compare as NaN.
 */
static bool fp16_narrow_ok(float q, uint16_t *got, uint16_t *want)
{
	*want = h_bits((_Float16)q);
	*got = spyre_ref_f64_to_fp16(q);
	if (isnan(q))
		return (*got & 0x7c00) == 0x7c00 && (*got & 0x3ff);
	return *got == *want &&
	       spyre_ref_encode(SPYRE_DTYPE_FP16, q, 0) == *want &&
	       spyre_ref_encode(SPYRE_DTYPE_FP16, q, SPYRE_CMD_F_NOSAT) ==
		       *want;
}

TEST(fp16_narrow_values_midpoints_ulps)
{
	int bad = 0, n = 0;

	/* Every finite positive fp16 value h, and the midpoint to the next
	 * one (65520 after the max: ties to even, i.e. to infinity). */
	for (uint32_t h = 0; h <= 0x7bff; h++) {
		float v = (float)h_from_bits((uint16_t)h);
		float next = h < 0x7bff ?
			(float)h_from_bits((uint16_t)(h + 1)) : 65536.0f;
		float pts[2] = { v, (v + next) / 2 };	/* exact in fp32 */

		/* A value converts to itself. */
		if (spyre_ref_f64_to_fp16(v) != h) {
			if (bad++ < MAX_LOGGED)
				TH_LOG("fp16 0x%04x does not round-trip", h);
		}
		for (int p = 0; p < 2; p++) {
			for (int s = 0; s < 2; s++) {
				float c = s ? -pts[p] : pts[p];
				float q[3] = { nextafterf(c, -INFINITY), c,
					       nextafterf(c, INFINITY) };

				for (int i = 0; i < 3; i++) {
					uint16_t got, want;

					n++;
					if (fp16_narrow_ok(q[i], &got, &want))
						continue;
					if (bad++ < MAX_LOGGED)
						TH_LOG("%a: got 0x%04x want 0x%04x",
						       q[i], got, want);
				}
			}
		}
	}
	/* Specials and far overflow. */
	static const float sp[] = { INFINITY, -INFINITY, NAN, -NAN, FLT_MAX,
				    -FLT_MAX, 1e30f, 0x1p-30f, -0x1p-30f };
	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
		uint16_t got, want;

		n++;
		if (!fp16_narrow_ok(sp[i], &got, &want) && bad++ < MAX_LOGGED)
			TH_LOG("%a: got 0x%04x want 0x%04x", sp[i], got, want);
	}
	TH_LOG("%d fp32 -> fp16 conversions checked", n);
	ASSERT_EQ(0, bad);
	/* Spot checks by hand: ties to even. */
	ASSERT_EQ(0x3c00, spyre_ref_f64_to_fp16(1.0 + 0x1p-11));
	ASSERT_EQ(0x3c02, spyre_ref_f64_to_fp16(1.0 + 3 * 0x1p-11));
	ASSERT_EQ(0x7bff, spyre_ref_f64_to_fp16(65519.0));
	ASSERT_EQ(0x7c00, spyre_ref_f64_to_fp16(65520.0));
	ASSERT_EQ(0x0000, spyre_ref_f64_to_fp16(0x1p-25));
	ASSERT_EQ(0x0002, spyre_ref_f64_to_fp16(3 * 0x1p-25));
	ASSERT_EQ(0x8000, spyre_ref_f64_to_fp16(-0.0));
	/* NaN: canonical quiet pattern, sign kept. */
	ASSERT_EQ(0x7e00, spyre_ref_f64_to_fp16(NAN));
	ASSERT_EQ(0xfe00, spyre_ref_f64_to_fp16(-NAN));
	ASSERT_EQ(0xffc0, spyre_ref_f64_to_bf16(-NAN));
	ASSERT_EQ(0xff, spyre_ref_f64_to_e4m3(-NAN, 0));
	ASSERT_EQ(0xfe, spyre_ref_f64_to_e5m2(-NAN, SPYRE_CMD_F_NOSAT));
}

TEST(fp16_narrow_from_double)
{
	/* double -> fp16 must round once: the midpoints +-1 double ulp
	 * (closer than any fp32) must go to the right side. */
	int bad = 0;

	for (uint32_t h = 0; h < 0x7bff; h++) {
		double v = (double)h_from_bits((uint16_t)h);
		double next = (double)h_from_bits((uint16_t)(h + 1));
		double mid = (v + next) / 2;
		double q[3] = { nextafter(mid, 0), mid, nextafter(mid, 1e9) };

		for (int i = 0; i < 3; i++) {
			uint16_t want = h_bits((_Float16)q[i]);
			uint16_t got = spyre_ref_f64_to_fp16(q[i]);

			if (got != want && bad++ < MAX_LOGGED)
				TH_LOG("%a: got 0x%04x want 0x%04x", q[i], got,
				       want);
		}
		if (spyre_ref_f64_to_fp16(nextafter(mid, 0)) != h ||
		    spyre_ref_f64_to_fp16(nextafter(mid, 1e9)) != h + 1)
			bad++;
	}
	/* Random doubles over the whole fp16 range and beyond. */
	for (int i = 0; i < 200000; i++) {
		double x = ldexp(rnd_uniform(-2, 2), (int)(rnd32() % 48) - 30);
		uint16_t want = h_bits((_Float16)x);
		uint16_t got = spyre_ref_f64_to_fp16(x);

		if (got != want && bad++ < MAX_LOGGED)
			TH_LOG("%a: got 0x%04x want 0x%04x", x, got, want);
	}
	ASSERT_EQ(0, bad);
}

/* ------------------------------------------------------------------ */
/* BF16 against its definition                                         */
/* ------------------------------------------------------------------ */

/* bf16 by definition: the upper 16 bits of binary32, rounded to nearest
 * even on the dropped lower half (a carry into the exponent gives the
 * next binade, or infinity). */
static uint16_t bf16_by_definition(float f)
{
	uint32_t u = f_bits(f);
	uint32_t hi = u >> 16, lo = u & 0xffff;

	if (isnan(f))
		return (uint16_t)(hi | 0x40);
	if (lo > 0x8000 || (lo == 0x8000 && (hi & 1)))
		hi++;
	return (uint16_t)hi;
}

TEST(bf16_widen_all_patterns)
{
	int bad = 0;

	for (uint32_t h = 0; h < 0x10000; h++) {
		double want = (double)f_from_bits(h << 16);
		double got = spyre_ref_bf16_to_f64((uint16_t)h);

		if (!same_value(got, want) ||
		    !same_value(got, spyre_ref_decode(SPYRE_DTYPE_BF16, h))) {
			if (bad++ < MAX_LOGGED)
				TH_LOG("bf16 0x%04x: got %a want %a", h, got,
				       want);
		}
	}
	ASSERT_EQ(0, bad);
	ASSERT_TRUE(spyre_ref_bf16_to_f64(0x3f80) == 1.0);
	ASSERT_TRUE(spyre_ref_bf16_to_f64(0x7f7f) == 0x1.fep127);
	ASSERT_TRUE(spyre_ref_bf16_to_f64(0x0001) == 0x1p-133);
	ASSERT_TRUE(spyre_ref_bf16_to_f64(0x7f80) == INFINITY);
}

TEST(bf16_narrow_values_midpoints_ulps)
{
	int bad = 0, n = 0;

	for (uint32_t h = 0; h <= 0x7f7f; h++) {
		float v = f_from_bits(h << 16);
		/* Next value; after the max, 2^128 (not a float): the
		 * midpoint is max + 2^119. */
		float mid = h < 0x7f7f ?
			(v + f_from_bits((h + 1) << 16)) / 2 :
			f_from_bits(0x7f7f8000);
		float pts[2] = { v, mid };

		if (spyre_ref_f64_to_bf16(v) != h && bad++ < MAX_LOGGED)
			TH_LOG("bf16 0x%04x does not round-trip", h);
		for (int p = 0; p < 2; p++) {
			for (int s = 0; s < 2; s++) {
				float c = s ? -pts[p] : pts[p];
				float q[3] = { nextafterf(c, -INFINITY), c,
					       nextafterf(c, INFINITY) };

				for (int i = 0; i < 3; i++) {
					uint16_t want = bf16_by_definition(q[i]);
					uint16_t got = spyre_ref_f64_to_bf16(q[i]);

					n++;
					if (got == want &&
					    spyre_ref_encode(SPYRE_DTYPE_BF16,
							     q[i], 0) == want)
						continue;
					if (bad++ < MAX_LOGGED)
						TH_LOG("%a: got 0x%04x want 0x%04x",
						       q[i], got, want);
				}
			}
		}
	}
	static const float sp[] = { INFINITY, -INFINITY, NAN, FLT_MAX,
				    0x1p-140f };
	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
		n++;
		if (spyre_ref_f64_to_bf16(sp[i]) != bf16_by_definition(sp[i]))
			bad++;
	}
	TH_LOG("%d fp32 -> bf16 conversions checked", n);
	ASSERT_EQ(0, bad);
	ASSERT_EQ(0x7f80, spyre_ref_f64_to_bf16(0x1.ffp127));	/* tie: even */
	ASSERT_EQ(0x3f80, spyre_ref_f64_to_bf16(1.0 + 0x1p-8));
	ASSERT_EQ(0x3f82, spyre_ref_f64_to_bf16(1.0 + 3 * 0x1p-8));
}

/* ------------------------------------------------------------------ */
/* FP8 against the OCP tables                                          */
/* ------------------------------------------------------------------ */

/* OCP OFP8 E4M3: the 128 non-negative patterns 0x00..0x7f.  Rows are
 * exponent fields 0 (subnormals, m/8 * 2^-6) to 15; 0x7f is NaN. */
static const double e4m3_table[128] = {
	0.0, 0.001953125, 0.00390625, 0.005859375,
	0.0078125, 0.009765625, 0.01171875, 0.013671875,
	0.015625, 0.017578125, 0.01953125, 0.021484375,
	0.0234375, 0.025390625, 0.02734375, 0.029296875,
	0.03125, 0.03515625, 0.0390625, 0.04296875,
	0.046875, 0.05078125, 0.0546875, 0.05859375,
	0.0625, 0.0703125, 0.078125, 0.0859375,
	0.09375, 0.1015625, 0.109375, 0.1171875,
	0.125, 0.140625, 0.15625, 0.171875,
	0.1875, 0.203125, 0.21875, 0.234375,
	0.25, 0.28125, 0.3125, 0.34375,
	0.375, 0.40625, 0.4375, 0.46875,
	0.5, 0.5625, 0.625, 0.6875,
	0.75, 0.8125, 0.875, 0.9375,
	1.0, 1.125, 1.25, 1.375,
	1.5, 1.625, 1.75, 1.875,
	2.0, 2.25, 2.5, 2.75,
	3.0, 3.25, 3.5, 3.75,
	4.0, 4.5, 5.0, 5.5,
	6.0, 6.5, 7.0, 7.5,
	8.0, 9.0, 10.0, 11.0,
	12.0, 13.0, 14.0, 15.0,
	16.0, 18.0, 20.0, 22.0,
	24.0, 26.0, 28.0, 30.0,
	32.0, 36.0, 40.0, 44.0,
	48.0, 52.0, 56.0, 60.0,
	64.0, 72.0, 80.0, 88.0,
	96.0, 104.0, 112.0, 120.0,
	128.0, 144.0, 160.0, 176.0,
	192.0, 208.0, 224.0, 240.0,
	256.0, 288.0, 320.0, 352.0,
	384.0, 416.0, 448.0, NAN,
};

/* OCP OFP8 E5M2: the 128 non-negative patterns.  Rows of 4 are exponent
 * fields 0 (subnormals, m/4 * 2^-14) to 31; 0x7c is infinity, 0x7d..0x7f
 * NaN. */
static const double e5m2_table[128] = {
	0.0, 0.0000152587890625, 0.000030517578125, 0.0000457763671875,
	0.00006103515625, 0.0000762939453125, 0.000091552734375,
	0.0001068115234375,
	0.0001220703125, 0.000152587890625, 0.00018310546875, 0.000213623046875,
	0.000244140625, 0.00030517578125, 0.0003662109375, 0.00042724609375,
	0.00048828125, 0.0006103515625, 0.000732421875, 0.0008544921875,
	0.0009765625, 0.001220703125, 0.00146484375, 0.001708984375,
	0.001953125, 0.00244140625, 0.0029296875, 0.00341796875,
	0.00390625, 0.0048828125, 0.005859375, 0.0068359375,
	0.0078125, 0.009765625, 0.01171875, 0.013671875,
	0.015625, 0.01953125, 0.0234375, 0.02734375,
	0.03125, 0.0390625, 0.046875, 0.0546875,
	0.0625, 0.078125, 0.09375, 0.109375,
	0.125, 0.15625, 0.1875, 0.21875,
	0.25, 0.3125, 0.375, 0.4375,
	0.5, 0.625, 0.75, 0.875,
	1.0, 1.25, 1.5, 1.75,
	2.0, 2.5, 3.0, 3.5,
	4.0, 5.0, 6.0, 7.0,
	8.0, 10.0, 12.0, 14.0,
	16.0, 20.0, 24.0, 28.0,
	32.0, 40.0, 48.0, 56.0,
	64.0, 80.0, 96.0, 112.0,
	128.0, 160.0, 192.0, 224.0,
	256.0, 320.0, 384.0, 448.0,
	512.0, 640.0, 768.0, 896.0,
	1024.0, 1280.0, 1536.0, 1792.0,
	2048.0, 2560.0, 3072.0, 3584.0,
	4096.0, 5120.0, 6144.0, 7168.0,
	8192.0, 10240.0, 12288.0, 14336.0,
	16384.0, 20480.0, 24576.0, 28672.0,
	32768.0, 40960.0, 49152.0, 57344.0,
	INFINITY, NAN, NAN, NAN,
};

static double fp8_table_value(const double *table, uint32_t v)
{
	double x = table[v & 0x7f];

	return (v & 0x80) ? -x : x;
}

TEST(fp8_named_values)
{
	/* OCP OFP8 rev. 1.0, table 1. */
	/* E4M3 */
	ASSERT_TRUE(spyre_ref_e4m3_to_f64(0x7e) == 448.0);	/* S.1111.110 */
	ASSERT_TRUE(spyre_ref_e4m3_to_f64(0xfe) == -448.0);
	ASSERT_TRUE(spyre_ref_e4m3_to_f64(0x08) == 0x1p-6);	/* min normal */
	ASSERT_TRUE(spyre_ref_e4m3_to_f64(0x07) == 0.875 * 0x1p-6);
	ASSERT_TRUE(spyre_ref_e4m3_to_f64(0x01) == 0x1p-9);	/* min sub */
	ASSERT_TRUE(isnan(spyre_ref_e4m3_to_f64(0x7f)));	/* S.1111.111 */
	ASSERT_TRUE(isnan(spyre_ref_e4m3_to_f64(0xff)));
	ASSERT_TRUE(spyre_ref_e4m3_to_f64(0x78) == 256.0);	/* not inf */
	ASSERT_TRUE(same_value(spyre_ref_e4m3_to_f64(0x80), -0.0));
	/* E5M2 */
	ASSERT_TRUE(spyre_ref_e5m2_to_f64(0x7b) == 57344.0);	/* S.11110.11 */
	ASSERT_TRUE(spyre_ref_e5m2_to_f64(0x04) == 0x1p-14);	/* min normal */
	ASSERT_TRUE(spyre_ref_e5m2_to_f64(0x03) == 0.75 * 0x1p-14);
	ASSERT_TRUE(spyre_ref_e5m2_to_f64(0x01) == 0x1p-16);	/* min sub */
	ASSERT_TRUE(spyre_ref_e5m2_to_f64(0x7c) == INFINITY);	/* S.11111.00 */
	ASSERT_TRUE(spyre_ref_e5m2_to_f64(0xfc) == -INFINITY);
	ASSERT_TRUE(isnan(spyre_ref_e5m2_to_f64(0x7d)));
	ASSERT_TRUE(isnan(spyre_ref_e5m2_to_f64(0x7e)));
	ASSERT_TRUE(isnan(spyre_ref_e5m2_to_f64(0xff)));
	ASSERT_TRUE(same_value(spyre_ref_e5m2_to_f64(0x80), -0.0));
	/* The tables agree with the named values. */
	ASSERT_TRUE(e4m3_table[0x7e] == 448.0 && e4m3_table[1] == 0x1p-9);
	ASSERT_TRUE(e5m2_table[0x7b] == 57344.0 && e5m2_table[1] == 0x1p-16);
}

static int fp8_widen_check(struct __test_metadata *_metadata, uint32_t dtype,
			   const double *table)
{
	int bad = 0;

	for (uint32_t v = 0; v < 256; v++) {
		double want = fp8_table_value(table, v);
		double got = spyre_ref_decode(dtype, v);
		double got2 = dtype == SPYRE_DTYPE_FP8_E4M3 ?
			spyre_ref_e4m3_to_f64((uint8_t)v) :
			spyre_ref_e5m2_to_f64((uint8_t)v);

		if ((!same_value(got, want) || !same_value(got2, want)) &&
		    bad++ < MAX_LOGGED)
			TH_LOG("%s 0x%02x: got %a want %a",
			       spyre_dtype_name(dtype), v, got, want);
	}
	return bad;
}

TEST(fp8_widen_all_patterns)
{
	ASSERT_EQ(0, fp8_widen_check(_metadata, SPYRE_DTYPE_FP8_E4M3,
				     e4m3_table));
	ASSERT_EQ(0, fp8_widen_check(_metadata, SPYRE_DTYPE_FP8_E5M2,
				     e5m2_table));
}

/*
 * Narrowing sweep of one fp8 format: every finite value, every midpoint
 * between neighbours (ties to the even pattern), +-1 fp32 ulp around each,
 * in both signs and both saturation modes; then the overflow boundary.
 * @last: pattern of max finite; @ovf_nosat: positive result of an
 * overflow without saturation (NaN 0x7f or inf 0x7c).
 */
static int fp8_narrow_check(struct __test_metadata *_metadata, uint32_t dtype,
			    const double *table, uint32_t last,
			    uint32_t ovf_nosat, int *count)
{
	int bad = 0, n = 0;

#define CHECK8(x, flags, want) do {					\
	uint32_t _g = spyre_ref_encode(dtype, (x), (flags));		\
	n++;								\
	if (_g != (want) && bad++ < MAX_LOGGED)			\
		TH_LOG("%s %a flags %u: got 0x%02x want 0x%02x",	\
		       spyre_dtype_name(dtype), (double)(x),		\
		       (unsigned)(flags), _g, (unsigned)(want));	\
} while (0)

	for (uint32_t p = 0; p <= last; p++) {
		for (uint32_t s = 0; s <= 0x80; s += 0x80) {
			for (uint32_t fl = 0; fl <= SPYRE_CMD_F_NOSAT; fl++) {
				float v = (float)table[p];
				float sv = s ? -v : v;
				/* The value and +-1 fp32 ulp round to it
				 * (a tiny value beside +-0 keeps its sign;
				 * nextafterf(-0, 0) would be +0). */
				CHECK8(sv, fl, p | s);
				CHECK8(p ? nextafterf(sv, 0) : sv, fl, p | s);
				CHECK8(nextafterf(sv, s ? -INFINITY : INFINITY),
				       fl, p | s);
				if (p == last)
					continue;
				/* Midpoint to the next pattern: exact in
				 * fp32; ties go to the even pattern. */
				float mid = (float)((table[p] + table[p + 1]) / 2);
				float sm = s ? -mid : mid;
				uint32_t even = (p & 1) ? p + 1 : p;

				CHECK8(sm, fl, even | s);
				CHECK8(nextafterf(sm, 0), fl, p | s);
				CHECK8(nextafterf(sm, s ? -INFINITY : INFINITY),
				       fl, (p + 1) | s);
			}
		}
	}

	/* Overflow boundary: max + half an ulp of max. */
	double max = table[last];
	double half = (table[last] - table[last - 1]) / 2;
	float edge = (float)(max + half);
	/* Whether the tie at the edge rounds down (max has an even
	 * significand) or up into the overflow. */
	bool tie_down = !(last & 1);

	for (uint32_t s = 0; s <= 0x80; s += 0x80) {
		float se = s ? -edge : edge;
		float below = nextafterf(se, 0);
		float above = nextafterf(se, s ? -INFINITY : INFINITY);
		float inf = s ? -INFINITY : INFINITY;

		/* Saturating (default): everything goes to max. */
		CHECK8(below, 0, last | s);
		CHECK8(se, 0, last | s);
		CHECK8(above, 0, last | s);
		CHECK8(inf, 0, last | s);
		CHECK8(s ? -1e30f : 1e30f, 0, last | s);
		/* NOSAT: overflow to inf (E5M2) or NaN (E4M3). */
		CHECK8(below, SPYRE_CMD_F_NOSAT, last | s);
		CHECK8(se, SPYRE_CMD_F_NOSAT, tie_down ? last | s :
						ovf_nosat | s);
		CHECK8(above, SPYRE_CMD_F_NOSAT, ovf_nosat | s);
		CHECK8(inf, SPYRE_CMD_F_NOSAT, ovf_nosat | s);
		CHECK8(s ? -1e30f : 1e30f, SPYRE_CMD_F_NOSAT, ovf_nosat | s);
	}
	/* Underflow: half the min subnormal ties to 0 (even). */
	CHECK8(table[1] / 2, 0, 0x00);
	CHECK8(-table[1] / 2, 0, 0x80);
	CHECK8(nextafterf((float)table[1] / 2, 1), 0, 0x01);
	CHECK8(1e-30, 0, 0x00);
#undef CHECK8
	/* NaN stays NaN in both modes. */
	for (uint32_t fl = 0; fl <= SPYRE_CMD_F_NOSAT; fl++) {
		n += 2;
		if (!isnan(spyre_ref_decode(dtype,
					    spyre_ref_encode(dtype, NAN, fl))) ||
		    !isnan(spyre_ref_decode(dtype,
					    spyre_ref_encode(dtype, -NAN, fl))))
			bad++;
	}
	*count += n;
	return bad;
}

TEST(fp8_e4m3_narrow)
{
	int n = 0;

	/* E4M3: max 448 = 0x7e (even significand 110): 464 ties down. */
	ASSERT_EQ(0, fp8_narrow_check(_metadata, SPYRE_DTYPE_FP8_E4M3,
				      e4m3_table, 0x7e, 0x7f, &n));
	TH_LOG("%d conversions checked", n);
	ASSERT_EQ(0x7e, spyre_ref_f64_to_e4m3(464.0, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0x7f, spyre_ref_f64_to_e4m3(465.0, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0xff, spyre_ref_f64_to_e4m3(-INFINITY, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0x7e, spyre_ref_f64_to_e4m3(INFINITY, 0));
	ASSERT_EQ(0x7f, spyre_ref_f64_to_e4m3(NAN, 0));
	ASSERT_EQ(0x38, spyre_ref_f64_to_e4m3(1.0, 0));
	/* 1.0625 * 2^-6 is halfway between 0x08 and 0x09: even wins. */
	ASSERT_EQ(0x08, spyre_ref_f64_to_e4m3(0x1.1p-6, 0));
	ASSERT_EQ(0x0a, spyre_ref_f64_to_e4m3(0x1.3p-6, 0));
}

TEST(fp8_e5m2_narrow)
{
	int n = 0;

	/* E5M2: max 57344 = 0x7b (odd significand 11): 61440 ties up, to
	 * the overflow. */
	ASSERT_EQ(0, fp8_narrow_check(_metadata, SPYRE_DTYPE_FP8_E5M2,
				      e5m2_table, 0x7b, 0x7c, &n));
	TH_LOG("%d conversions checked", n);
	ASSERT_EQ(0x7c, spyre_ref_f64_to_e5m2(61440.0, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0x7b, spyre_ref_f64_to_e5m2(61440.0, 0));
	ASSERT_EQ(0x7b, spyre_ref_f64_to_e5m2(61439.0, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0xfc, spyre_ref_f64_to_e5m2(-INFINITY, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0xfb, spyre_ref_f64_to_e5m2(-INFINITY, 0));
	ASSERT_EQ(0x3c, spyre_ref_f64_to_e5m2(1.0, 0));
	ASSERT_TRUE(isnan(spyre_ref_e5m2_to_f64(spyre_ref_f64_to_e5m2(NAN,
								     0))));
}

/* ------------------------------------------------------------------ */
/* Integers, fp32, buffers                                             */
/* ------------------------------------------------------------------ */

TEST(int8_round_saturate)
{
	static const struct {
		double x;
		int8_t want;
	} t[] = {
		{ 0.0, 0 }, { -0.0, 0 }, { 0.5, 0 }, { 1.5, 2 }, { 2.5, 2 },
		{ 3.5, 4 }, { -0.5, 0 }, { -1.5, -2 }, { -2.5, -2 },
		{ -3.5, -4 }, { 2.4999999, 2 }, { 2.5000001, 3 },
		{ 126.5, 126 }, { 127.4, 127 }, { 127.5, 127 }, { 128, 127 },
		{ 1e10, 127 }, { INFINITY, 127 }, { -127.5, -128 },
		{ -128.5, -128 }, { -129, -128 }, { -1e10, -128 },
		{ -INFINITY, -128 }, { NAN, 0 }, { -NAN, 0 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		EXPECT_EQ(t[i].want, spyre_ref_f64_to_int8(t[i].x)) {
			TH_LOG("int8(%a)", t[i].x);
		}
		EXPECT_EQ((uint8_t)t[i].want,
			  spyre_ref_encode(SPYRE_DTYPE_INT8, t[i].x, 0));
	}
	/* Widening: two's complement. */
	for (uint32_t v = 0; v < 256; v++)
		ASSERT_TRUE(spyre_ref_decode(SPYRE_DTYPE_INT8, v) ==
			    (v < 128 ? (double)v : (double)v - 256));
	ASSERT_TRUE(spyre_ref_decode(SPYRE_DTYPE_U8, 0xff) == 255.0);
	/* int32 */
	ASSERT_EQ(INT32_MAX, spyre_ref_f64_to_int32(3e9));
	ASSERT_EQ(INT32_MIN, spyre_ref_f64_to_int32(-INFINITY));
	ASSERT_EQ(-2, spyre_ref_f64_to_int32(-2.5));
	ASSERT_EQ(0, spyre_ref_f64_to_int32(NAN));
	ASSERT_TRUE(spyre_ref_decode(SPYRE_DTYPE_INT32, 0x80000000u) ==
		    -2147483648.0);
	ASSERT_TRUE(spyre_ref_decode(SPYRE_DTYPE_INT32, 0xffffffffu) == -1.0);
}

TEST(fp32_generic_codec_vs_host)
{
	int bad = 0;

	/* Decoding random patterns, and all exponents. */
	for (int i = 0; i < 300000; i++) {
		uint32_t b = i < 512 ? (uint32_t)i << 23 | (uint32_t)i : rnd32();

		if (!same_value(spyre_ref_decode(SPYRE_DTYPE_FP32, b),
				(double)f_from_bits(b)) && bad++ < MAX_LOGGED)
			TH_LOG("fp32 0x%08x decodes wrong", b);
	}
	/* Encoding random doubles (normal, subnormal, overflow range). */
	for (int i = 0; i < 300000; i++) {
		double x = ldexp(rnd_uniform(-2, 2), (int)(rnd32() % 320) - 170);
		uint32_t want = f_bits((float)x);

		if (spyre_ref_f64_to_fp32(x) != want && bad++ < MAX_LOGGED)
			TH_LOG("%a: got 0x%08x want 0x%08x", x,
			       spyre_ref_f64_to_fp32(x), want);
	}
	ASSERT_EQ(0, bad);
	/* Overflow threshold 2^128 - 2^103 ties to even (to infinity). */
	ASSERT_EQ(0x7f800000, spyre_ref_f64_to_fp32(0x1p128 - 0x1p103));
	ASSERT_EQ(0x7f7fffff, spyre_ref_f64_to_fp32(nextafter(0x1p128 - 0x1p103,
							      0)));
	ASSERT_EQ(0x00000000, spyre_ref_f64_to_fp32(0x1p-150));
	ASSERT_EQ(0x00000001, spyre_ref_f64_to_fp32(nextafter(0x1p-150, 1)));
	ASSERT_EQ(0x7fc00000, spyre_ref_f64_to_fp32(NAN));
}

TEST(convert_buffers)
{
	/* Dtype pairs COPY accepts. */
	for (uint32_t d = 0; d <= SPYRE_DTYPE_COUNT; d++) {
		for (uint32_t s = 0; s <= SPYRE_DTYPE_COUNT; s++) {
			uint8_t src[8] = { 0 }, dst[8];
			bool conv_d = d >= SPYRE_DTYPE_FP32 &&
				      d <= SPYRE_DTYPE_INT8;
			bool conv_s = s >= SPYRE_DTYPE_FP32 &&
				      s <= SPYRE_DTYPE_INT8;
			bool ok = (d == s && (d == SPYRE_DTYPE_U8 ||
					      d == SPYRE_DTYPE_INT32)) ||
				  (conv_d && conv_s);

			EXPECT_EQ(ok ? 0 : -EINVAL,
				  spyre_ref_convert(dst, d, src, s, 1, 0)) {
				TH_LOG("%u <- %u", d, s);
			}
		}
	}
	uint8_t tmp[4];

	EXPECT_EQ(-EINVAL, spyre_ref_convert(tmp, SPYRE_DTYPE_FP16, tmp,
					     SPYRE_DTYPE_FP32, 1, 0x2));
	EXPECT_EQ(-EINVAL, spyre_ref_convert(NULL, SPYRE_DTYPE_FP16, tmp,
					     SPYRE_DTYPE_FP32, 1, 0));
	EXPECT_EQ(0, spyre_ref_convert(NULL, SPYRE_DTYPE_FP16, NULL,
				       SPYRE_DTYPE_FP32, 0, 0));

	/* fp32 -> fp16 / e4m3 / int8 element by element, little-endian. */
	const float src[6] = { 1.0f, -2.5f, 1000.0f, NAN, 65520.0f, 0.1f };
	uint8_t h[12], e[6], e_nosat[6], i8[6];

	ASSERT_EQ(0, spyre_ref_convert(h, SPYRE_DTYPE_FP16, src,
				       SPYRE_DTYPE_FP32, 6, 0));
	ASSERT_EQ(0x00, h[0]);
	ASSERT_EQ(0x3c, h[1]);			/* 1.0 = 0x3c00 */
	for (int i = 0; i < 6; i++) {
		uint16_t v = (uint16_t)(h[2 * i] | h[2 * i + 1] << 8);

		if (isnan(src[i])) {
			ASSERT_TRUE(isnan(spyre_ref_fp16_to_f64(v)));
		} else {
			ASSERT_EQ(h_bits((_Float16)src[i]), v);
		}
	}
	ASSERT_EQ(0, spyre_ref_convert(e, SPYRE_DTYPE_FP8_E4M3, src,
				       SPYRE_DTYPE_FP32, 6, 0));
	ASSERT_EQ(0, spyre_ref_convert(e_nosat, SPYRE_DTYPE_FP8_E4M3, src,
				       SPYRE_DTYPE_FP32, 6, SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(0x38, e[0]);
	ASSERT_EQ(0xc2, e[1]);			/* -2.5 = 1 1000 010 */
	ASSERT_EQ(0x7e, e[2]);			/* 1000 saturates to 448 */
	ASSERT_EQ(0x7f, e_nosat[2]);		/* ... or is NaN */
	ASSERT_EQ(0x7f, e[3]);
	ASSERT_EQ(0x7e, e[4]);
	ASSERT_EQ(0x7f, e_nosat[4]);
	ASSERT_EQ(0x1d, e[5]);			/* 0.1 -> 0.1015625 */
	ASSERT_EQ(0, spyre_ref_convert(i8, SPYRE_DTYPE_INT8, src,
				       SPYRE_DTYPE_FP32, 6, 0));
	ASSERT_EQ(1, (int8_t)i8[0]);
	ASSERT_EQ(-2, (int8_t)i8[1]);
	ASSERT_EQ(127, (int8_t)i8[2]);
	ASSERT_EQ(0, (int8_t)i8[3]);
	ASSERT_EQ(127, (int8_t)i8[4]);
	ASSERT_EQ(0, (int8_t)i8[5]);

	/* int8 -> fp8 / fp16: 127 is not an E4M3 value (120, 128). */
	const int8_t iv[4] = { 127, -128, 3, -7 };
	uint8_t e8[4], h8[8];

	ASSERT_EQ(0, spyre_ref_convert(e8, SPYRE_DTYPE_FP8_E4M3, iv,
				       SPYRE_DTYPE_INT8, 4, 0));
	ASSERT_EQ(0x70, e8[0]);			/* 128 = 0 1110 000 */
	ASSERT_EQ(0xf0, e8[1]);
	ASSERT_EQ(0x44, e8[2]);			/* 3 = 0 1000 100 */
	ASSERT_EQ(0xce, e8[3]);			/* -7 = 1 1001 110 */
	ASSERT_EQ(0, spyre_ref_convert(h8, SPYRE_DTYPE_FP16, iv,
				       SPYRE_DTYPE_INT8, 4, 0));
	ASSERT_EQ(0x57f0, h8[0] | h8[1] << 8);	/* 127.0 */

	/* Same dtype: bytes unchanged, NaN payload included. */
	const uint8_t snan[2] = { 0x01, 0x7c };
	uint8_t out[2];

	ASSERT_EQ(0, spyre_ref_convert(out, SPYRE_DTYPE_FP16, snan,
				       SPYRE_DTYPE_FP16, 1, 0));
	ASSERT_EQ(0, memcmp(out, snan, 2));

	/* to_f64 / from_f64 round trip through bf16. */
	const double dv[3] = { 1.0, -0x1.fep127, 3.0 };
	uint8_t b[6];
	double back[3];

	ASSERT_EQ(0, spyre_ref_from_f64(b, SPYRE_DTYPE_BF16, dv, 3, 0));
	ASSERT_EQ(0, spyre_ref_to_f64(back, b, SPYRE_DTYPE_BF16, 3));
	for (int i = 0; i < 3; i++)
		ASSERT_TRUE(back[i] == dv[i]);
	ASSERT_EQ(-EINVAL, spyre_ref_to_f64(back, b, 0, 3));
	ASSERT_EQ(-EINVAL, spyre_ref_from_f64(b, SPYRE_DTYPE_BF16, dv, 3, 4));
}

/* Conversions of a 512x512 matrix; the time is printed, not checked. */
TEST(convert_speed_512x512)
{
	const uint64_t n = 512 * 512;
	static const uint32_t pairs[][2] = {
		{ SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32 },
		{ SPYRE_DTYPE_BF16, SPYRE_DTYPE_FP32 },
		{ SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP32 },
		{ SPYRE_DTYPE_FP8_E5M2, SPYRE_DTYPE_FP16 },
		{ SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16 },
		{ SPYRE_DTYPE_INT8, SPYRE_DTYPE_BF16 },
	};
	float *src = malloc(n * sizeof(float));
	uint8_t *tmp = malloc(n * sizeof(float));
	uint8_t *dst = malloc(n * sizeof(float));

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, tmp);
	ASSERT_NE(NULL, dst);
	for (uint64_t i = 0; i < n; i++)
		src[i] = (float)ldexp(rnd_uniform(-1, 1),
				      (int)(rnd32() % 24) - 12);
	for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
		double best = 1e9;

		/* Make the source in the pair's source dtype first. */
		ASSERT_EQ(0, spyre_ref_convert(tmp, pairs[p][1], src,
					       SPYRE_DTYPE_FP32, n, 0));
		for (int rep = 0; rep < 3; rep++) {
			double t0 = now_ms();

			ASSERT_EQ(0, spyre_ref_convert(dst, pairs[p][0], tmp,
						       pairs[p][1], n, 0));
			best = fmin(best, now_ms() - t0);
		}
		/* A diagnostic only: timings are never judged by a test. */
		TH_LOG("%s -> %s: %.2f ms for 512x512 (best of 3)",
		       spyre_dtype_name(pairs[p][1]),
		       spyre_dtype_name(pairs[p][0]), best);
	}
	free(src);
	free(tmp);
	free(dst);
}

/* ------------------------------------------------------------------ */
/* Tolerances                                                          */
/* ------------------------------------------------------------------ */

TEST(tolerance_rules)
{
	struct spyre_ref_tol t;

	ASSERT_TRUE(spyre_ref_fp32_err(8, 1.0) ==
		    1.01 * 8 * (0x1p-24 + 0x1p-149));
	ASSERT_TRUE(isinf(spyre_ref_fp32_err(1e6, 1.0)));	/* no bound */
	ASSERT_TRUE(isinf(spyre_ref_fp32_err(8, NAN)));

	ASSERT_EQ(0, spyre_ref_tol(&t, SPYRE_DTYPE_FP16, 0.0));
	ASSERT_TRUE(t.rtol == 0x1p-11);
	ASSERT_TRUE(t.atol == 0x1p-25);
	ASSERT_TRUE(t.overflow == 65520.0);
	ASSERT_TRUE(spyre_ref_close(&t, 1.0, 1.0 + 0x1p-12));
	ASSERT_FALSE(spyre_ref_close(&t, 1.0, 1.0 + 0x1p-10));
	ASSERT_TRUE(spyre_ref_close(&t, NAN, NAN));
	ASSERT_FALSE(spyre_ref_close(&t, 1.0, NAN));
	ASSERT_FALSE(spyre_ref_close(&t, NAN, 1.0));
	ASSERT_TRUE(spyre_ref_close(&t, INFINITY, INFINITY));
	ASSERT_FALSE(spyre_ref_close(&t, -INFINITY, INFINITY));
	ASSERT_FALSE(spyre_ref_close(&t, 65504.0, INFINITY));
	/* Overflow: allowed only when the bound reaches 65520. */
	ASSERT_TRUE(spyre_ref_close(&t, INFINITY, 65519.0));
	ASSERT_TRUE(spyre_ref_close(&t, INFINITY, 70000.0));
	ASSERT_FALSE(spyre_ref_close(&t, INFINITY, 60000.0));
	ASSERT_FALSE(spyre_ref_close(&t, -INFINITY, 70000.0));
	ASSERT_FALSE(spyre_ref_close(&t, 65504.0, 70000.0));

	ASSERT_EQ(0, spyre_ref_tol(&t, SPYRE_DTYPE_BF16, 0.5));
	ASSERT_TRUE(t.atol == 0.5 * (1 + 0x1p-8) + 0x1p-134);
	ASSERT_TRUE(t.overflow == 0x1p128 - 0x1p119);
	ASSERT_EQ(0, spyre_ref_tol(&t, SPYRE_DTYPE_FP32, 0.0));
	ASSERT_TRUE(t.overflow == 0x1p128 - 0x1p103);
	ASSERT_EQ(0, spyre_ref_tol(&t, SPYRE_DTYPE_INT32, 0.0));
	ASSERT_TRUE(spyre_ref_close(&t, 5.0, 5.0));
	ASSERT_FALSE(spyre_ref_close(&t, 5.0, 6.0));
	ASSERT_EQ(-EINVAL, spyre_ref_tol(&t, 0, 0.0));
	ASSERT_EQ(-EINVAL, spyre_ref_tol(&t, SPYRE_DTYPE_FP32, -1.0));
	ASSERT_EQ(-EINVAL, spyre_ref_tol(&t, SPYRE_DTYPE_FP32, NAN));

	/* compare(): counts mismatches, reports the first. */
	const uint16_t got[4] = { 0x3c00, 0x4000, 0x4200, 0x7e00 };
	const double ref[4] = { 1.0, 2.01, 3.0, NAN };
	uint64_t first = 99;

	ASSERT_EQ(1, spyre_ref_compare(got, SPYRE_DTYPE_FP16, ref, NULL, 4,
				       &first));
	ASSERT_EQ(1, first);
	const double err[4] = { 0, 0.01, 0, 0 };

	ASSERT_EQ(0, spyre_ref_compare(got, SPYRE_DTYPE_FP16, ref, err, 4,
				       &first));
	ASSERT_EQ(4, first);
}

/* ------------------------------------------------------------------ */
/* GEMM                                                                */
/* ------------------------------------------------------------------ */

/* Defaults: row-major dense, alpha 1, beta 0, no scales. */
static struct spyre_ref_gemm_args gemm_args(uint32_t dt, uint32_t cdt,
					    uint32_t m, uint32_t n, uint32_t k)
{
	struct spyre_ref_gemm_args g = {
		.a_dtype = dt, .b_dtype = dt, .c_dtype = cdt,
		.m = m, .n = n, .k = k, .batch = 1,
		.lda = k, .ldb = n, .ldc = n,
		.alpha = 1.0f, .beta = 0.0f, .scale_a = 1.0f, .scale_b = 1.0f,
	};
	return g;
}

static void to_fp16(uint16_t *dst, const double *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = h_bits((_Float16)src[i]);
}

TEST(gemm_identity_fp32)
{
	float a[16] = { 0 }, b[12];
	double out[12], err[12], amax, amax_err;
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_FP32,
						 SPYRE_DTYPE_FP32, 4, 3, 4);

	for (int i = 0; i < 4; i++)
		a[i * 4 + i] = 1.0f;
	for (int i = 0; i < 12; i++)
		b[i] = (float)(i * 7 % 11) - 5.25f;
	g.a = a;
	g.b = b;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, err, &amax, &amax_err));
	for (int i = 0; i < 12; i++) {
		ASSERT_TRUE(out[i] == b[i]);
		ASSERT_TRUE(err[i] ==
			    spyre_ref_fp32_err(4 + 8, fabs((double)b[i])));
	}
	ASSERT_TRUE(amax == 5.25);		/* b[0] = b[11] = -5.25 */
	ASSERT_TRUE(amax_err == spyre_ref_fp32_err(12, 5.25));
}

/* A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]: A B = [58 64; 139 154]. */
static const double A23[6] = { 1, 2, 3, 4, 5, 6 };
static const double B32[6] = { 7, 8, 9, 10, 11, 12 };

TEST(gemm_small_fp16_alpha_beta)
{
	uint16_t a[6], b[6], c[4];
	const double c_in[4] = { 1, 2, 3, 4 };
	double out[4];
	uint16_t cout[4];
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_FP16,
						 SPYRE_DTYPE_FP16, 2, 2, 3);

	to_fp16(a, A23, 6);
	to_fp16(b, B32, 6);
	to_fp16(c, c_in, 4);
	g.a = a;
	g.b = b;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_TRUE(out[0] == 58 && out[1] == 64 && out[2] == 139 &&
		    out[3] == 154);
	/* alpha 2, beta 0.5 with C = [1 2; 3 4]. */
	g.alpha = 2.0f;
	g.beta = 0.5f;
	g.c = c;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_TRUE(out[0] == 116.5 && out[1] == 129 && out[2] == 279.5 &&
		    out[3] == 310);
	ASSERT_EQ(0, spyre_ref_from_f64(cout, SPYRE_DTYPE_FP16, out, 4, 0));
	ASSERT_EQ(0x5748, cout[0]);		/* 116.5 = 0 10101 1101001000 */
	ASSERT_EQ(0x5cd8, cout[3]);		/* 310 = 0 10111 0011011000 */
	/* beta == 0: C is not read (NULL is fine). */
	g.beta = 0.0f;
	g.c = NULL;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_TRUE(out[3] == 308);
}

TEST(gemm_transposes_and_leading_dims)
{
	/* A^T stored 3 x 2 with lda 4 (2 padding NaNs per row), B^T stored
	 * 2 x 3 with ldb 5; C has ldc 3 (its padding is never written:
	 * @out is dense). */
	float at[12], bt[10];
	double out[4];
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_FP32,
						 SPYRE_DTYPE_FP32, 2, 2, 3);

	for (int i = 0; i < 12; i++)
		at[i] = NAN;
	for (int i = 0; i < 10; i++)
		bt[i] = NAN;
	for (int r = 0; r < 3; r++)
		for (int c = 0; c < 2; c++)
			at[r * 4 + c] = (float)A23[c * 3 + r];
	for (int r = 0; r < 2; r++)
		for (int c = 0; c < 3; c++)
			bt[r * 5 + c] = (float)B32[c * 2 + r];
	g.flags = SPYRE_GEMM_F_TRANS_A | SPYRE_GEMM_F_TRANS_B;
	g.a = at;
	g.b = bt;
	g.lda = 4;
	g.ldb = 5;
	g.ldc = 3;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_TRUE(out[0] == 58 && out[1] == 64 && out[2] == 139 &&
		    out[3] == 154);

	/* Only A transposed: B dense 3 x 2. */
	float b[6];

	for (int i = 0; i < 6; i++)
		b[i] = (float)B32[i];
	g.flags = SPYRE_GEMM_F_TRANS_A;
	g.b = b;
	g.ldb = 2;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_TRUE(out[0] == 58 && out[3] == 154);
	/* Leading dimensions below the stored row length are rejected. */
	g.lda = 1;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g.lda = 2;
	g.ldc = 1;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g.ldc = 2;
	g.flags = SPYRE_GEMM_F_TRANS_B;	/* B stored N x K: ldb >= K = 3 */
	g.lda = 3;
	g.ldb = 2;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
}

TEST(gemm_batch_strides)
{
	/* 3 batches of 2x2 @ 2x1: A[b] = (b + 1) * I, stored 6 elements
	 * apart (2 NaN gaps); B shared (stride 0) = [1; 2]; C[b] = [10 b;
	 * 20 b] stored with ldc 2 (one NaN column), stride 5, beta 1. */
	float a[18], b[2] = { 1, 2 }, c[15];
	double out[6], amax;
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_FP32,
						 SPYRE_DTYPE_FP32, 2, 1, 2);

	for (int i = 0; i < 18; i++)
		a[i] = NAN;
	for (int i = 0; i < 15; i++)
		c[i] = NAN;
	for (int bi = 0; bi < 3; bi++) {
		a[bi * 6 + 0] = (float)(bi + 1);
		a[bi * 6 + 1] = 0;
		a[bi * 6 + 2] = 0;
		a[bi * 6 + 3] = (float)(bi + 1);
		c[bi * 5 + 0] = 10.0f * (float)bi;
		c[bi * 5 + 2] = 20.0f * (float)bi;
	}
	g.batch = 3;
	g.a = a;
	g.b = b;
	g.c = c;
	g.stride_a = 6;
	g.stride_b = 0;
	g.stride_c = 5;
	g.ldc = 2;
	g.beta = 1.0f;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, &amax, NULL));
	for (int bi = 0; bi < 3; bi++) {
		ASSERT_TRUE(out[bi * 2 + 0] == (bi + 1) * 1.0 + 10.0 * bi);
		ASSERT_TRUE(out[bi * 2 + 1] == (bi + 1) * 2.0 + 20.0 * bi);
	}
	ASSERT_TRUE(amax == 46.0);
}

TEST(gemm_fp8_scaled_bias_amax)
{
	/* A (E4M3) = [1.5 -2; 448 0.0625], B (E5M2) = [2 -0.25; 3 1024].
	 * A B = [-3 -2048.375; 896.1875 -48]; sa = 0.5, sb = 4: times 2;
	 * bias (fp16) [1 -0.5]: C = [-5 -4097.25; 1793.375 -96.5]. */
	const uint8_t a[4] = { 0x3c, 0xc0, 0x7e, 0x18 };
	const uint8_t b[4] = { 0x40, 0xb4, 0x42, 0x64 };
	const uint16_t bias[2] = { 0x3c00, 0xb800 };
	const double want[4] = { -5, -4097.25, 1793.375, -96.5 };
	double out[4], err[4], amax, amax_err;
	uint16_t cb[4];
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_FP8_E4M3,
						 SPYRE_DTYPE_BF16, 2, 2, 2);

	g.b_dtype = SPYRE_DTYPE_FP8_E5M2;
	g.a = a;
	g.b = b;
	g.scale_a = 0.5f;
	g.scale_b = 4.0f;
	g.bias_dtype = SPYRE_DTYPE_FP16;
	g.bias = bias;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, err, &amax, &amax_err));
	for (int i = 0; i < 4; i++)
		ASSERT_TRUE(out[i] == want[i]);
	ASSERT_TRUE(amax == 4097.25);
	/* err[1]: |sa sb| (0.375 + 2048) + 0.5, 2 + 8 roundings. */
	ASSERT_TRUE(err[1] == spyre_ref_fp32_err(10, 2 * 2048.375 + 0.5));
	ASSERT_TRUE(amax_err == err[1]);
	/* Stored as bf16: -4097.25 -> -4096, 1793.375 -> 1792. */
	ASSERT_EQ(0, spyre_ref_from_f64(cb, SPYRE_DTYPE_BF16, out, 4, 0));
	ASSERT_EQ(0xc580, cb[1]);
	ASSERT_EQ(0x44e0, cb[2]);
	ASSERT_EQ(0, spyre_ref_compare(cb, SPYRE_DTYPE_BF16, out, err, 4,
				       NULL));
	/* The mixed pair in the other order: (B^T as E5M2) x (A^T as
	 * E4M3) = (A B)^T. */
	const uint8_t bt[4] = { 0x40, 0x42, 0xb4, 0x64 };
	const uint8_t at[4] = { 0x3c, 0x7e, 0xc0, 0x18 };

	g.a_dtype = SPYRE_DTYPE_FP8_E5M2;
	g.b_dtype = SPYRE_DTYPE_FP8_E4M3;
	g.a = bt;
	g.b = at;
	g.bias_dtype = 0;
	g.bias = NULL;
	g.alpha = -1.0f;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, &amax, NULL));
	ASSERT_TRUE(out[0] == 6 && out[1] == -1792.375 &&
		    out[2] == 4096.75 && out[3] == 96);
	ASSERT_TRUE(amax == 4096.75);
}

TEST(gemm_int8)
{
	/* A = [127 -128; 1 2], B = [127 1; -128 1]:
	 * A B = [32513 -1; -129 3]; beta 1 with C = [INT32_MAX 5; 0 -5]
	 * wraps the first element. */
	const int8_t a[4] = { 127, -128, 1, 2 };
	const int8_t b[4] = { 127, 1, -128, 1 };
	const int32_t c[4] = { INT32_MAX, 5, 0, -5 };
	double out[4], err[4], amax;
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_INT8,
						 SPYRE_DTYPE_INT32, 2, 2, 2);

	g.a = a;
	g.b = b;
	g.alpha = 3.0f;		/* ignored */
	g.scale_a = 7.0f;	/* ignored */
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, err, &amax, NULL));
	ASSERT_TRUE(out[0] == 32513 && out[1] == -1 && out[2] == -129 &&
		    out[3] == 3);
	ASSERT_TRUE(err[0] == 0 && amax == 32513);
	g.beta = 1.0f;
	g.c = c;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_TRUE(out[0] == (double)INT32_MIN + 32512);
	ASSERT_TRUE(out[1] == 4 && out[2] == -129 && out[3] == -2);
	int32_t cout[4];

	ASSERT_EQ(0, spyre_ref_from_f64(cout, SPYRE_DTYPE_INT32, out, 4, 0));
	ASSERT_EQ(INT32_MIN + 32512, cout[0]);
	/* beta must be 0 or 1; output must be INT32. */
	g.beta = 0.5f;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g.beta = 0.0f;
	g.c_dtype = SPYRE_DTYPE_FP32;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
}

TEST(gemm_invalid_args)
{
	float x[16] = { 0 };
	double out[16];
	struct spyre_ref_gemm_args g0 = gemm_args(SPYRE_DTYPE_FP32,
						  SPYRE_DTYPE_FP32, 2, 2, 2);
	struct spyre_ref_gemm_args g;

	g0.a = x;
	g0.b = x;
	g = g0;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, NULL, NULL, NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(NULL, out, NULL, NULL, NULL));
	g.flags = 1u << 3;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.flags = SPYRE_CMD_F_NOSAT;		/* accepted, no effect */
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.b_dtype = SPYRE_DTYPE_FP16;		/* unequal, not fp8 pair */
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.a_dtype = g.b_dtype = SPYRE_DTYPE_U8;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.c_dtype = SPYRE_DTYPE_FP8_E4M3;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g.c_dtype = SPYRE_DTYPE_INT32;		/* only for int8 inputs */
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.bias_dtype = SPYRE_DTYPE_FP8_E4M3;
	g.bias = x;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g.bias_dtype = SPYRE_DTYPE_FP32;
	g.bias = NULL;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.beta = 1.0f;				/* C needed */
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.k = 0;
	ASSERT_EQ(-EINVAL, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
	g = g0;
	g.batch = 2;
	g.stride_a = UINT64_MAX / 2;
	ASSERT_EQ(-EOVERFLOW, spyre_ref_gemm(&g, out, NULL, NULL, NULL));
}

/* Store an fp32 value as @dt (FP32, FP16 or BF16) at element @o. */
static void store_as(uint8_t *buf, uint32_t dt, size_t o, float v)
{
	uint16_t h;

	if (dt == SPYRE_DTYPE_FP32) {
		memcpy(buf + o * 4, &v, 4);
		return;
	}
	h = dt == SPYRE_DTYPE_FP16 ? h_bits((_Float16)v) :
				     bf16_by_definition(v);
	memcpy(buf + o * 2, &h, 2);
}

/*
 * A naive fp32 GEMM like a card's (fp32 accumulation in k order, then
 * alpha * sa * sb, beta * C, bias), stored to fp32, fp16 or bf16, must be
 * within the reference's tolerance -- and a perturbed element must not be.
 */
TEST(gemm_fp32_accumulation_within_tolerance)
{
	enum { B = 2, M = 33, N = 47, K = 300 };
	uint16_t *a = malloc(B * M * K * 2), *b = malloc(B * K * N * 2);
	uint16_t *c = malloc(B * M * N * 2), bias[N];
	float *v32 = malloc(B * M * N * sizeof(float));
	double *out = malloc(B * M * N * sizeof(double));
	double *err = malloc(B * M * N * sizeof(double));
	struct spyre_ref_gemm_args g = gemm_args(SPYRE_DTYPE_FP16,
						 SPYRE_DTYPE_FP16, M, N, K);
	uint64_t first;

	ASSERT_TRUE(a && b && c && v32 && out && err);
	for (int i = 0; i < B * M * K; i++)
		a[i] = h_bits((_Float16)rnd_uniform(-2, 2));
	for (int i = 0; i < B * K * N; i++)
		b[i] = h_bits((_Float16)rnd_uniform(-2, 2));
	for (int i = 0; i < B * M * N; i++)
		c[i] = h_bits((_Float16)rnd_uniform(-8, 8));
	for (int i = 0; i < N; i++)
		bias[i] = h_bits((_Float16)rnd_uniform(-1, 1));
	g.batch = B;
	g.a = a;
	g.b = b;
	g.c = c;
	g.bias = bias;
	g.bias_dtype = SPYRE_DTYPE_FP16;
	g.stride_a = M * K;
	g.stride_b = K * N;
	g.stride_c = M * N;
	g.alpha = 0.75f;
	g.beta = -0.5f;
	g.scale_a = 1.5f;
	g.scale_b = 0.25f;
	ASSERT_EQ(0, spyre_ref_gemm(&g, out, err, NULL, NULL));

	/* The card-like fp32 result. */
	for (int bi = 0; bi < B; bi++) {
		for (int i = 0; i < M; i++) {
			const uint16_t *ar = a + (bi * M + i) * K;
			const uint16_t *bc = b + bi * K * N;

			for (int j = 0; j < N; j++) {
				size_t o = (size_t)(bi * M + i) * N + j;
				float acc = 0.0f;

				for (int kk = 0; kk < K; kk++)
					acc += (float)h_from_bits(ar[kk]) *
					       (float)h_from_bits(bc[kk * N + j]);
				v32[o] = g.alpha * g.scale_a * g.scale_b * acc +
					 g.beta * (float)h_from_bits(c[o]) +
					 (float)h_from_bits(bias[j]);
			}
		}
	}

	for (uint32_t dt = SPYRE_DTYPE_FP32; dt <= SPYRE_DTYPE_BF16; dt++) {
		uint8_t *gb = malloc(B * M * N * spyre_dtype_size(dt));

		ASSERT_NE(NULL, gb);
		for (size_t o = 0; o < B * M * N; o++)
			store_as(gb, dt, o, v32[o]);
		EXPECT_EQ(0, spyre_ref_compare(gb, dt, out, err, B * M * N,
					       &first)) {
			TH_LOG("%s: first mismatch at %llu",
			       spyre_dtype_name(dt), (unsigned long long)first);
		}
		/* 2% off in one element is caught. */
		store_as(gb, dt, 100, v32[100] * 1.02f + 0.01f);
		EXPECT_EQ(1, spyre_ref_compare(gb, dt, out, err, B * M * N,
					       &first));
		EXPECT_EQ(100, first);
		free(gb);
	}
	free(a);
	free(b);
	free(c);
	free(v32);
	free(out);
	free(err);
}

/* ------------------------------------------------------------------ */
/* ELTWISE, REDUCE, ROWOP                                              */
/* ------------------------------------------------------------------ */

TEST(eltwise_hand_values)
{
	const float a[4] = { 1.0f, -2.0f, 0.5f, -0.0f };
	const float b[4] = { 3.0f, 0.25f, -0.5f, 0.0f };
	double out[4];

	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_ADD, SPYRE_DTYPE_FP32, 4, a, b,
				       0, out, NULL));
	ASSERT_TRUE(out[0] == 4 && out[1] == -1.75 && out[2] == 0);
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_MUL, SPYRE_DTYPE_FP32, 4, a, b,
				       0, out, NULL));
	ASSERT_TRUE(out[0] == 3 && out[1] == -0.5 && out[2] == -0.25);
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_SCALE, SPYRE_DTYPE_FP32, 4, a,
				       NULL, -3.0f, out, NULL));
	ASSERT_TRUE(out[0] == -3 && out[1] == 6 && out[2] == -1.5);
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_RELU, SPYRE_DTYPE_FP32, 4, a,
				       NULL, 0, out, NULL));
	ASSERT_TRUE(out[0] == 1 && out[1] == 0 && out[2] == 0.5 &&
		    out[3] == 0);
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_GELU, SPYRE_DTYPE_FP32, 4, a,
				       NULL, 0, out, NULL));
	ASSERT_TRUE(fabs(out[0] - 0.8413447460685429) < 1e-15);
	ASSERT_TRUE(fabs(out[1] - -0.04550026389635842) < 1e-15);
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_SILU, SPYRE_DTYPE_FP32, 4, a,
				       NULL, 0, out, NULL));
	ASSERT_TRUE(fabs(out[0] - 0.7310585786300049) < 1e-15);
	ASSERT_TRUE(fabs(out[1] - -0.2384058440442351) < 1e-15);
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_EXP, SPYRE_DTYPE_FP32, 4, a,
				       NULL, 0, out, NULL));
	ASSERT_TRUE(out[0] == exp(1.0) && out[3] == 1.0);
	/* Bad op / dtype / missing b. */
	ASSERT_EQ(-EINVAL, spyre_ref_eltwise(0, SPYRE_DTYPE_FP32, 4, a, b, 0,
					     out, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_eltwise(8, SPYRE_DTYPE_FP32, 4, a, b, 0,
					     out, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_eltwise(SPYRE_ELT_ADD,
					     SPYRE_DTYPE_FP8_E4M3, 4, a, b, 0,
					     out, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_eltwise(SPYRE_ELT_MUL, SPYRE_DTYPE_FP32, 4,
					     a, NULL, 0, out, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_eltwise(SPYRE_ELT_EXP, SPYRE_DTYPE_FP32, 0,
					     a, NULL, 0, out, NULL));
}

/* fp32 evaluation of an ELTWISE op, as the card's formulas read. */
static float elt_fp32(uint32_t op, float a, float b, float alpha)
{
	switch (op) {
	case SPYRE_ELT_ADD:
		return a + b;
	case SPYRE_ELT_MUL:
		return a * b;
	case SPYRE_ELT_SCALE:
		return alpha * a;
	case SPYRE_ELT_RELU:
		return a > 0 ? a : 0.0f;
	case SPYRE_ELT_GELU:
		return a * 0.5f * (1.0f + erff(a / sqrtf(2.0f)));
	case SPYRE_ELT_SILU:
		return a / (1.0f + expf(-a));
	default:
		return expf(a);
	}
}

TEST(eltwise_fp32_within_tolerance)
{
	enum { N = 4096 };
	float fa[N], fb[N];
	uint16_t ha[N], hb[N], hg[N];
	float fg[N];
	double out[N], err[N];
	static const float edge[] = { -100.0f, -89.5f, -88.5f, -20.0f, -5.0f,
				      -1e-3f, 0.0f, 1e-3f, 5.0f, 11.0f, 88.0f,
				      89.0f, 100.0f, 65504.0f };
	uint64_t first;

	for (int i = 0; i < N; i++) {
		fa[i] = i < (int)(sizeof(edge) / sizeof(edge[0])) ? edge[i] :
			(float)rnd_uniform(-12, 12);
		fb[i] = (float)rnd_uniform(-100, 100);
		ha[i] = h_bits((_Float16)fa[i]);
		hb[i] = h_bits((_Float16)fb[i]);
	}
	for (uint32_t op = SPYRE_ELT_ADD; op <= SPYRE_ELT_EXP; op++) {
		/* fp32 data. */
		ASSERT_EQ(0, spyre_ref_eltwise(op, SPYRE_DTYPE_FP32, N, fa, fb,
					       1.7f, out, err));
		for (int i = 0; i < N; i++)
			fg[i] = elt_fp32(op, fa[i], fb[i], 1.7f);
		EXPECT_EQ(0, spyre_ref_compare(fg, SPYRE_DTYPE_FP32, out, err,
					       N, &first)) {
			TH_LOG("op %u fp32: a %a got %a ref %a", op, fa[first],
			       fg[first], out[first]);
		}
		/* fp16 data, computed in fp32. */
		ASSERT_EQ(0, spyre_ref_eltwise(op, SPYRE_DTYPE_FP16, N, ha, hb,
					       1.7f, out, err));
		for (int i = 0; i < N; i++)
			hg[i] = h_bits((_Float16)elt_fp32(op,
				(float)h_from_bits(ha[i]),
				(float)h_from_bits(hb[i]), 1.7f));
		EXPECT_EQ(0, spyre_ref_compare(hg, SPYRE_DTYPE_FP16, out, err,
					       N, &first)) {
			TH_LOG("op %u fp16: index %llu ref %a", op,
			       (unsigned long long)first, out[first]);
		}
	}
}

TEST(reduce_hand_and_fp32)
{
	/* 2 x 3 with ld 4 (padding NaN). */
	const float src[8] = { 1, -2, 4, NAN, -1, -3, -0.5f, NAN };
	double out[2], err[2];

	ASSERT_EQ(0, spyre_ref_reduce(SPYRE_REDUCE_SUM, SPYRE_DTYPE_FP32, 2, 3,
				      4, src, out, err));
	ASSERT_TRUE(out[0] == 3 && out[1] == -4.5);
	ASSERT_TRUE(err[0] == spyre_ref_fp32_err(4, 7));
	ASSERT_EQ(0, spyre_ref_reduce(SPYRE_REDUCE_MAX, SPYRE_DTYPE_FP32, 2, 3,
				      4, src, out, err));
	ASSERT_TRUE(out[0] == 4 && out[1] == -0.5 && err[0] == 0);
	ASSERT_EQ(-EINVAL, spyre_ref_reduce(SPYRE_REDUCE_SUM, SPYRE_DTYPE_FP32,
					    2, 3, 2, src, out, err));
	ASSERT_EQ(-EINVAL, spyre_ref_reduce(3, SPYRE_DTYPE_FP32, 2, 3, 4, src,
					    out, err));

	/* bf16 rows of 1000, summed in fp32 in order. */
	enum { R = 8, C = 1000 };
	uint16_t x[R * C], g[R];
	double o[R], e[R];

	for (int i = 0; i < R * C; i++)
		x[i] = bf16_by_definition((float)rnd_uniform(-3, 5));
	ASSERT_EQ(0, spyre_ref_reduce(SPYRE_REDUCE_SUM, SPYRE_DTYPE_BF16, R, C,
				      C, x, o, e));
	for (int r = 0; r < R; r++) {
		float acc = 0.0f;

		for (int c = 0; c < C; c++)
			acc += f_from_bits((uint32_t)x[r * C + c] << 16);
		g[r] = bf16_by_definition(acc);
	}
	ASSERT_EQ(0, spyre_ref_compare(g, SPYRE_DTYPE_BF16, o, e, R, NULL));
}

TEST(rowop_hand_values)
{
	const float sm[3] = { 1, 2, 3 };
	const float ln[4] = { 1, 2, 3, 4 };
	const float gamma[4] = { 1, 2, 1, 1 }, beta[4] = { 0, 0, 1, 0 };
	const float rms[2] = { 3, 4 };
	double out[4];

	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_SOFTMAX, SPYRE_DTYPE_FP32, 1, 3,
				     3, sm, NULL, NULL, 0, out, NULL));
	ASSERT_TRUE(fabs(out[0] - 0.09003057317038046) < 1e-15);
	ASSERT_TRUE(fabs(out[1] - 0.24472847105479767) < 1e-15);
	ASSERT_TRUE(fabs(out[2] - 0.6652409557748219) < 1e-15);
	/* mean 2.5, var 1.25: (x - 2.5) / sqrt(1.25) * gamma + beta. */
	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_LAYERNORM, SPYRE_DTYPE_FP32, 1,
				     4, 4, ln, gamma, beta, 0, out, NULL));
	ASSERT_TRUE(fabs(out[0] - -1.3416407864998738) < 1e-15);
	ASSERT_TRUE(fabs(out[1] - -0.8944271909999159) < 1e-15);
	ASSERT_TRUE(fabs(out[2] - 1.4472135954999579) < 1e-15);
	ASSERT_TRUE(fabs(out[3] - 1.3416407864998738) < 1e-15);
	/* eps 0.75: var + eps = 2. */
	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_LAYERNORM, SPYRE_DTYPE_FP32, 1,
				     4, 4, ln, NULL, NULL, 0.75f, out, NULL));
	ASSERT_TRUE(fabs(out[0] - -1.5 / sqrt(2.0)) < 1e-15);
	/* RMS of [3 4] = sqrt(12.5); beta ignored. */
	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP32, 1, 2,
				     2, rms, gamma, beta, 0, out, NULL));
	ASSERT_TRUE(fabs(out[0] - 0.848528137423857) < 1e-15);
	ASSERT_TRUE(fabs(out[1] - 2 * 1.131370849898476) < 1e-15);
	ASSERT_EQ(-EINVAL, spyre_ref_rowop(4, SPYRE_DTYPE_FP32, 1, 2, 2, rms,
					   NULL, NULL, 0, out, NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_rowop(SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP32,
					   1, 2, 1, rms, NULL, NULL, 0, out,
					   NULL));
	ASSERT_EQ(-EINVAL, spyre_ref_rowop(SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP32,
					   1, 2, 2, rms, NULL, NULL, -1.0f,
					   out, NULL));
}

/* Naive fp32 row ops (two-pass layernorm), stored to fp32. */
static void rowop_fp32(uint32_t op, const float *x, int n, const float *g,
		       const float *b, float eps, float *y)
{
	float mx = -INFINITY, s = 0, mean, var = 0, rs;

	switch (op) {
	case SPYRE_ROW_SOFTMAX:
		for (int i = 0; i < n; i++)
			mx = fmaxf(mx, x[i]);
		for (int i = 0; i < n; i++)
			s += y[i] = expf(x[i] - mx);
		for (int i = 0; i < n; i++)
			y[i] /= s;
		break;
	case SPYRE_ROW_LAYERNORM:
		for (int i = 0; i < n; i++)
			s += x[i];
		mean = s / (float)n;
		for (int i = 0; i < n; i++)
			var += (x[i] - mean) * (x[i] - mean);
		var /= (float)n;
		rs = 1.0f / sqrtf(var + eps);
		for (int i = 0; i < n; i++)
			y[i] = (x[i] - mean) * rs * g[i] + b[i];
		break;
	default:
		for (int i = 0; i < n; i++)
			s += x[i] * x[i];
		rs = 1.0f / sqrtf(s / (float)n + eps);
		for (int i = 0; i < n; i++)
			y[i] = x[i] * rs * g[i];
		break;
	}
}

TEST(rowop_fp32_within_tolerance)
{
	enum { R = 6, C = 768 };
	static float x[R * C], y[R * C], g[C], b[C];
	static double out[R * C], err[R * C];
	uint64_t first;

	for (int r = 0; r < R; r++) {
		/* Rows with growing offsets (layernorm's cancellation)
		 * and spreads (softmax's range). */
		double off = r < 3 ? 0.0 : pow(10.0, r - 1);
		double spread = r == 1 ? 40.0 : 3.0;

		for (int c = 0; c < C; c++)
			x[r * C + c] = (float)(off + rnd_uniform(-spread,
								 spread));
	}
	for (int c = 0; c < C; c++) {
		g[c] = (float)rnd_uniform(0.5, 1.5);
		b[c] = (float)rnd_uniform(-0.5, 0.5);
	}
	for (uint32_t op = SPYRE_ROW_SOFTMAX; op <= SPYRE_ROW_RMSNORM; op++) {
		ASSERT_EQ(0, spyre_ref_rowop(op, SPYRE_DTYPE_FP32, R, C, C, x, g,
					     b, 1e-5f, out, err));
		for (int r = 0; r < R; r++)
			rowop_fp32(op, x + r * C, C, g, b, 1e-5f, y + r * C);
		EXPECT_EQ(0, spyre_ref_compare(y, SPYRE_DTYPE_FP32, out, err,
					       R * C, &first)) {
			TH_LOG("op %u: index %llu got %a ref %a err %a", op,
			       (unsigned long long)first, y[first],
			       out[first], err[first]);
		}
		/* And the bound is not vacuous, in the rows without an
		 * offset (with one, the worst-case fp32 error of the mean,
		 * n u mean|x|, rightly dominates layernorm's bound): an
		 * error of 0.1% of a softmax value, or of 0.001 in the
		 * normalised outputs (unit scale), is caught. */
		int caught = 0, tried = 0;

		for (int i = 0; i < 3 * C; i += 37) {
			struct spyre_ref_tol t;
			double d = op == SPYRE_ROW_SOFTMAX ?
				   1e-3 * fabs(out[i]) : 1e-3;

			if (op == SPYRE_ROW_SOFTMAX && fabs(out[i]) < 1e-6)
				continue;
			tried++;
			ASSERT_EQ(0, spyre_ref_tol(&t, SPYRE_DTYPE_FP32,
						   err[i]));
			caught += !spyre_ref_close(&t, out[i] + d, out[i]);
		}
		EXPECT_LT(20, tried);
		EXPECT_EQ(tried, caught);
	}
}

TEST_HARNESS_MAIN
