// SPDX-License-Identifier: MIT
/*
 * stream - two streams on one card ordered by an event, timed by events,
 * with libspyre's public API only:
 *
 *   stream A: copy a[i] = i and b[i] = 2i (fp32) to device memory, then
 *             sum = a + b on the card, then record event "summed";
 *   stream B: wait for "summed" (on the card, the host does not block),
 *             record "start", half = 0.5 * sum, record "end", and copy
 *             half back to the host.
 *
 *   cc -o stream stream.c $(pkg-config --cflags --libs spyre)
 *   scripts/vm.sh run --copy ./stream -- ./stream     (from a clone)
 *
 * Every half[i] must be exactly 1.5 i (all values are exact in fp32).
 * Prints
 *   stream: 4096 values, half[1] = 1.5, half[4095] = 6142.5, 0 wrong
 *   stream: event order ok, scale took N ns of card time
 * and exits 0; exits 1 on any error or wrong value.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <spyre/spyre.h>

#define N 4096u

static int fail(const char *what, int err)
{
	fprintf(stderr, "stream: %s: %s\n", what, spyre_strerror(err));
	return 1;
}

int main(void)
{
	struct spyre_event *summed = NULL, *start = NULL, *end = NULL;
	struct spyre_stream *sa = NULL, *sb = NULL;
	struct spyre_bo *a = NULL, *b = NULL, *sum = NULL;
	struct spyre_device *dev;
	const uint64_t bytes = N * sizeof(float);
	float *ha, *hb, *half;
	unsigned int wrong = 0;
	int64_t ns = 0;
	int err, rc = 1;

	ha = malloc(bytes);
	hb = malloc(bytes);
	half = malloc(bytes);
	if (!ha || !hb || !half) {
		fprintf(stderr, "stream: out of memory\n");
		goto free_host;
	}
	for (unsigned int i = 0; i < N; i++) {
		ha[i] = (float)i;
		hb[i] = 2.0f * (float)i;
		half[i] = -1.0f;
	}

	err = spyre_device_open(0, &dev);
	if (err) {
		rc = fail("open card 0", err);
		goto free_host;
	}
	err = spyre_bo_alloc(dev, bytes, SPYRE_BO_DEVICE, &a);
	if (!err)
		err = spyre_bo_alloc(dev, bytes, SPYRE_BO_DEVICE, &b);
	if (!err)
		err = spyre_bo_alloc(dev, bytes, SPYRE_BO_DEVICE, &sum);
	if (!err)
		err = spyre_stream_create(dev, 0, &sa);
	if (!err)
		err = spyre_stream_create(dev, 0, &sb);
	if (!err)
		err = spyre_event_create(dev, 0, &summed);
	if (!err)
		err = spyre_event_create(dev, 0, &start);
	if (!err)
		err = spyre_event_create(dev, 0, &end);
	if (err) {
		rc = fail("set-up", err);
		goto out;
	}

	/* stream A: upload, add, mark */
	err = spyre_stream_copy_h2d(sa, a, 0, ha, bytes);
	if (!err)
		err = spyre_stream_copy_h2d(sa, b, 0, hb, bytes);
	if (!err)
		err = spyre_stream_eltwise(sa, SPYRE_ELT_ADD, SPYRE_DTYPE_FP32, N,
					   SPYRE_MEM(sum, 0), SPYRE_MEM(a, 0),
					   SPYRE_MEM(b, 0), 0.0f);
	if (!err)
		err = spyre_event_record(summed, sa);
	if (err) {
		rc = fail("stream A", err);
		goto out;
	}

	/* stream B: after A's add, scale in place between two time marks */
	err = spyre_stream_wait_event(sb, summed);
	if (!err)
		err = spyre_event_record(start, sb);
	if (!err)
		err = spyre_stream_eltwise(sb, SPYRE_ELT_SCALE, SPYRE_DTYPE_FP32,
					   N, SPYRE_MEM(sum, 0),
					   SPYRE_MEM(sum, 0), SPYRE_MEM_NONE,
					   0.5f);
	if (!err)
		err = spyre_event_record(end, sb);
	if (!err)
		err = spyre_stream_copy_d2h(sb, half, sum, 0, bytes);
	if (err) {
		rc = fail("stream B", err);
		goto out;
	}

	/* the host waits for the last event, then for B's copy to land */
	err = spyre_event_wait(end, SPYRE_TIMEOUT_INFINITE);
	if (!err)
		err = spyre_stream_sync(sb, SPYRE_TIMEOUT_INFINITE);
	if (!err)
		err = spyre_stream_sync(sa, SPYRE_TIMEOUT_INFINITE);
	if (err) {
		rc = fail("wait", err);
		goto out;
	}
	for (unsigned int i = 0; i < N; i++)
		wrong += half[i] != 1.5f * (float)i;
	printf("stream: %u values, half[1] = %g, half[%u] = %g, %u wrong\n",
	       N, (double)half[1], N - 1, (double)half[N - 1], wrong);

	/* card clock: summed <= start <= end */
	err = spyre_event_elapsed_ns(summed, start, &ns);
	if (!err && ns < 0) {
		fprintf(stderr, "stream: start ran %" PRId64 " ns before summed\n",
			-ns);
		goto out;
	}
	if (!err)
		err = spyre_event_elapsed_ns(start, end, &ns);
	if (err) {
		rc = fail("elapsed time", err);
		goto out;
	}
	if (ns <= 0) {
		fprintf(stderr, "stream: end not after start (%" PRId64 " ns)\n",
			ns);
		goto out;
	}
	printf("stream: event order ok, scale took %" PRId64 " ns of card time\n",
	       ns);
	rc = wrong ? 1 : 0;
out:
	spyre_event_destroy(end);
	spyre_event_destroy(start);
	spyre_event_destroy(summed);
	spyre_stream_destroy(sb);
	spyre_stream_destroy(sa);
	spyre_bo_free(sum);
	spyre_bo_free(b);
	spyre_bo_free(a);
	spyre_device_close(dev);
free_host:
	free(half);
	free(hb);
	free(ha);
	return rc;
}
