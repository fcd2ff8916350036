// SPDX-License-Identifier: MIT
/*
 * spyre-demo - end-to-end check of the stack on one card.
 *
 *   spyre-demo [DEV]     DEV: index (default 0) or PCI address
 *
 * Opens the card, prints its info, fills a BO on the card (FILL), copies it
 * to another (COPY), does a 2-D pitched copy, runs a multi-command job with
 * a TIMESTAMP, reads everything back through mmap and verifies it byte by
 * byte.  Prints "demo: OK" and exits 0, or exits 1 on any mismatch/error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spyre/spyre.h>

#define MiB (1024u * 1024u)
#define TIMEOUT_NS (30ull * 1000000000ull)

#define CHECK(expr) do {						\
		int ret_ = (expr);					\
		if (ret_) {						\
			fprintf(stderr, "demo: %s failed: %s (%d)\n",	\
				#expr, spyre_strerror(ret_), ret_);	\
			exit(1);					\
		}							\
	} while (0)

static int mismatch(const char *what, size_t off, unsigned int got,
		    unsigned int want)
{
	fprintf(stderr, "demo: %s mismatch at byte %zu: got 0x%02x want 0x%02x\n",
		what, off, got, want);
	return 1;
}

int main(int argc, char **argv)
{
	struct spyre_device *dev;
	struct spyre_device_info in;
	struct spyre_stream *s;
	struct spyre_queue *q;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *a, *b, *c, *d;
	struct spyre_fence f;
	uint8_t *pa, *pb, *pc, *pd;
	const uint32_t pattern = 0xa5c3f00du;
	const uint64_t rows = 100, width = 200, spitch = 256, dpitch = 384;
	int ret;

	if (argc > 1) {
		char *end;
		unsigned long idx = strtoul(argv[1], &end, 10);

		ret = *end ? spyre_device_open_pci(argv[1], &dev) :
			     spyre_device_open((unsigned int)idx, &dev);
	} else {
		ret = spyre_device_open(0, &dev);
	}
	if (ret) {
		fprintf(stderr, "demo: cannot open device: %s (%d)\n",
			spyre_strerror(ret), ret);
		return 1;
	}
	CHECK(spyre_device_get_info(dev, &in));
	printf("demo: libspyre %s, device %s (%s), driver %s %d.%d.%d\n",
	       spyre_version(), in.desc.pci_addr, in.desc.devnode,
	       in.driver_name, in.driver_major, in.driver_minor,
	       in.driver_patch);
	printf("demo: hw %u.%u, %u cores, %u queues, %llu MiB device memory, caps 0x%llx, max cmd %u\n",
	       in.hw_version >> 16, in.hw_version & 0xffff, in.num_cores,
	       in.num_queues, (unsigned long long)(in.devmem_size / MiB),
	       (unsigned long long)in.caps, in.max_cmd_size);

	CHECK(spyre_bo_alloc(dev, MiB, 0, &a));
	CHECK(spyre_bo_alloc(dev, MiB, 0, &b));
	CHECK(spyre_bo_alloc(dev, 64 * 1024, 0, &c));
	CHECK(spyre_bo_alloc(dev, 4096, 0, &d));
	CHECK(spyre_bo_map(a, (void **)&pa));
	CHECK(spyre_bo_map(b, (void **)&pb));
	CHECK(spyre_bo_map(c, (void **)&pc));
	CHECK(spyre_bo_map(d, (void **)&pd));
	printf("demo: BOs a=0x%" PRIx64 "+%" PRIu64 " b=0x%" PRIx64 "+%" PRIu64
	       " c=0x%" PRIx64 "+%" PRIu64 " d=0x%" PRIx64 "+%" PRIu64 "\n",
	       spyre_bo_va(a), spyre_bo_size(a), spyre_bo_va(b),
	       spyre_bo_size(b), spyre_bo_va(c), spyre_bo_size(c),
	       spyre_bo_va(d), spyre_bo_size(d));

	CHECK(spyre_stream_create(dev, SPYRE_PRIORITY_NORMAL, &s));

	/* 1. FILL a with a 32-bit pattern on the card. */
	memset(pa, 0, MiB);
	CHECK(spyre_stream_fill(s, a, 0, MiB / 4, 4, pattern));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	for (size_t i = 0; i < MiB; i++) {
		unsigned int want = (pattern >> (8 * (i % 4))) & 0xff;

		if (pa[i] != want)
			return mismatch("fill", i, pa[i], want);
	}
	printf("demo: FILL %u bytes with 0x%08x: verified\n", MiB, pattern);

	/* 2. COPY a -> b. */
	memset(pb, 0x11, MiB);
	CHECK(spyre_stream_copy(s, b, 0, a, 0, MiB));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	if (memcmp(pa, pb, MiB)) {
		for (size_t i = 0; i < MiB; i++)
			if (pa[i] != pb[i])
				return mismatch("copy", i, pb[i], pa[i]);
	}
	printf("demo: COPY %u bytes a -> b: verified\n", MiB);

	/* 3. 2-D pitched copy of a CPU-written pattern into a card-filled BO. */
	for (size_t i = 0; i < rows * spitch; i++)
		pa[i] = (uint8_t)(i * 131 + 7 + (i >> 8));
	CHECK(spyre_stream_fill(s, c, 0, spyre_bo_size(c), 1, 0xee));
	CHECK(spyre_stream_copy_2d(s, c, 0, dpitch, a, 0, spitch, width, rows));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	for (size_t i = 0; i < spyre_bo_size(c); i++) {
		size_t r = i / dpitch, col = i % dpitch;
		unsigned int want = 0xee;

		if (r < rows && col < width)
			want = pa[r * spitch + col];
		if (pc[i] != want)
			return mismatch("copy2d", i, pc[i], want);
	}
	printf("demo: 2-D COPY %" PRIu64 "x%" PRIu64 " bytes, pitch %" PRIu64
	       " -> %" PRIu64 ": verified (%" PRIu64 " bytes incl. gaps)\n",
	       rows, width, spitch, dpitch, spyre_bo_size(c));

	/* 4. One job with several commands, submitted through a cmdbuf. */
	CHECK(spyre_queue_create(dev, SPYRE_PRIORITY_HIGH, &q));
	CHECK(spyre_cmdbuf_create(&cb));
	memset(pd, 0, 4096);
	CHECK(spyre_cmdbuf_nop(cb));
	CHECK(spyre_cmdbuf_timestamp(cb, spyre_bo_va(d)));
	CHECK(spyre_cmdbuf_fill(cb, spyre_bo_va(d) + 64, 512, 2, 0xbeef));
	CHECK(spyre_cmdbuf_copy(cb, spyre_bo_va(d) + 2048, spyre_bo_va(d) + 64,
				1024));
	CHECK(spyre_cmdbuf_timestamp(cb, spyre_bo_va(d) + 8));
	{
		struct spyre_bo *bos[] = { d };

		CHECK(spyre_submit(q, cb, bos, 1, NULL, 0, &f));
	}
	CHECK(spyre_fence_wait(&f, TIMEOUT_NS));
	for (size_t i = 64; i < 64 + 1024; i++) {
		unsigned int want = (i % 2) ? 0xbe : 0xef;

		if (pd[i] != want)
			return mismatch("job fill", i, pd[i], want);
		if (pd[i + 2048 - 64] != want)
			return mismatch("job copy", i + 2048 - 64,
					pd[i + 2048 - 64], want);
	}
	{
		uint64_t t0, t1;

		memcpy(&t0, pd, 8);
		memcpy(&t1, pd + 8, 8);
		if (t1 < t0) {
			fprintf(stderr, "demo: timestamps go backwards: %" PRIu64
				" > %" PRIu64 "\n", t0, t1);
			return 1;
		}
		printf("demo: job of %zu commands (%zu bytes) at point %" PRIu64
		       ": verified, device clock %" PRIu64 " -> %" PRIu64 " ns\n",
		       spyre_cmdbuf_count(cb), spyre_cmdbuf_size(cb), f.point,
		       t0, t1);
	}

	spyre_cmdbuf_destroy(cb);
	spyre_queue_destroy(q);
	spyre_stream_destroy(s);
	spyre_bo_free(a);
	spyre_bo_free(b);
	spyre_bo_free(c);
	spyre_bo_free(d);
	ret = spyre_device_error(dev);
	spyre_device_close(dev);
	if (ret) {
		fprintf(stderr, "demo: device error %s\n", spyre_strerror(ret));
		return 1;
	}
	printf("demo: OK\n");
	return 0;
}
