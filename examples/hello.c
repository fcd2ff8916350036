// SPDX-License-Identifier: MIT
/*
 * hello - the README's first program on a Spyre card: list the cards, open
 * the first one, let the card fill a buffer in its own memory and read the
 * buffer back.  Uses libspyre's public API only:
 *
 *   cc -o hello hello.c $(pkg-config --cflags --libs spyre)
 *   scripts/vm.sh run --copy ./hello -- ./hello      (from a clone)
 *
 * Prints one line per card, then
 *   hello: card 0 filled 1024 words with 42 in device memory, read back 1024
 * and exits 0; any error is printed with spyre_strerror() and exits 1.
 */
#include <stdint.h>
#include <stdio.h>

#include <spyre/spyre.h>

#define WORDS 1024u
#define VALUE 42u

static int fail(const char *what, int err)
{
	fprintf(stderr, "hello: %s: %s\n", what, spyre_strerror(err));
	return 1;
}

int main(void)
{
	struct spyre_device_desc cards[8];
	struct spyre_device_info info;
	struct spyre_device *dev;
	struct spyre_stream *s;
	struct spyre_bo *bo;
	uint32_t out[WORDS];
	unsigned int same = 0;
	int n, err, rc = 1;

	n = spyre_device_list(cards, 8);
	if (n < 0)
		return fail("discovery", n);
	if (n == 0) {
		fprintf(stderr, "hello: no Spyre card visible\n");
		return 1;
	}
	printf("hello: libspyre %s, %d card(s)\n", spyre_version(), n);
	for (int i = 0; i < n && i < 8; i++)
		printf("hello: card %u at %s (%s)\n", cards[i].index,
		       cards[i].pci_addr, cards[i].devnode);

	err = spyre_device_open(0, &dev);
	if (err)
		return fail("open card 0", err);
	err = spyre_device_get_info(dev, &info);
	if (err) {
		rc = fail("device info", err);
		goto close;
	}
	printf("hello: card 0: %u cores, %u queues, %llu MiB device memory, driver %s %d.%d\n",
	       info.num_cores, info.num_queues,
	       (unsigned long long)(info.devmem_size >> 20), info.driver_name,
	       info.driver_major, info.driver_minor);

	err = spyre_bo_alloc(dev, sizeof(out), SPYRE_BO_DEVICE, &bo);
	if (err) {
		rc = fail("device BO", err);
		goto close;
	}
	err = spyre_stream_create(dev, 0, &s);
	if (err) {
		rc = fail("stream", err);
		goto free_bo;
	}
	/* both run on the card, in order; the sync delivers the copy */
	err = spyre_stream_fill(s, bo, 0, WORDS, sizeof(uint32_t), VALUE);
	if (!err)
		err = spyre_stream_copy_d2h(s, out, bo, 0, sizeof(out));
	if (!err)
		err = spyre_stream_sync(s, SPYRE_TIMEOUT_INFINITE);
	if (err) {
		rc = fail("fill and read back", err);
		goto destroy;
	}
	for (unsigned int i = 0; i < WORDS; i++)
		same += out[i] == VALUE;
	printf("hello: card 0 filled %u words with %u in device memory, read back %u\n",
	       WORDS, VALUE, same);
	rc = same == WORDS ? 0 : 1;
destroy:
	spyre_stream_destroy(s);
free_bo:
	spyre_bo_free(bo);
close:
	spyre_device_close(dev);
	return rc;
}
