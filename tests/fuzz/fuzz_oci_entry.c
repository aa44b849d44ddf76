/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI image parsers under untrusted input: one entry point shared by the
 * libFuzzer target (fuzz_oci.c) and the corpus replay (replay_oci.c).
 *
 * The first byte picks what the rest is: a layer blob (0 plain tar, 1 gzip,
 * 2 zstd) unpacked into a fresh directory, or (3) an index.json in an
 * otherwise empty layout resolved through msb_ns__oci_prepare. Everything
 * happens under a private temporary directory; a sibling canary must never
 * change, whatever the input says.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msb/error.h>

#include "backends/ns/oci.h"
#include "util/fs.h"
#include "util/sha256.h"

#include "fuzz_oci_entry.h"

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	int r = write_all(fd, p, n);
	close(fd);
	return r;
}

static int unpack_layer(const char *top, const uint8_t *p, size_t n, msb_oci_compression comp)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/layer", top);
	if (mkdir(dir, 0700) < 0)
		return -1;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int blob = memfd_create("blob", MFD_CLOEXEC);
	if (dirfd < 0 || blob < 0 || write_all(blob, p, n) < 0 || lseek(blob, 0, SEEK_SET) < 0) {
		if (dirfd >= 0)
			close(dirfd);
		if (blob >= 0)
			close(blob);
		return -1;
	}
	char hex[65];
	msb__sha256_hex(p, n, hex);
	msb_oci_owner owner = {.shift = false};
	msb_error *err = NULL;
	msb_ns__oci_unpack(blob, n, hex, comp, &owner, dirfd, "fuzz layer", NULL, &err);
	msb_error_free(err);
	close(blob);
	close(dirfd);
	return 0;
}

static int resolve_index(const char *top, const uint8_t *p, size_t n)
{
	char layout[512], cache[512], image[600];
	snprintf(layout, sizeof(layout), "%s/layout", top);
	snprintf(cache, sizeof(cache), "%s/cache", top);
	if (mkdir(layout, 0700) < 0 || mkdir(cache, 0700) < 0)
		return -1;
	static const char marker[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	if (write_file(layout, "oci-layout", (const uint8_t *)marker, sizeof(marker) - 1) < 0 ||
	    write_file(layout, "index.json", p, n) < 0)
		return -1;
	char blobs[560];
	snprintf(blobs, sizeof(blobs), "%s/blobs", layout);
	mkdir(blobs, 0700);
	snprintf(image, sizeof(image), "oci:%s", layout);
	msb_oci_owner owner = {.shift = false};
	char **layers = NULL;
	size_t count = 0;
	msb_error *err = NULL;
	if (msb_ns__oci_prepare(image, cache, &owner, NULL, &layers, &count, &err) == 0) {
		for (size_t i = 0; i < count; i++)
			free(layers[i]);
		free(layers);
	}
	msb_error_free(err);
	return 0;
}

int msb_fuzz_oci(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char top[] = "/tmp/msb-fuzz-oci-XXXXXX";
	if (!mkdtemp(top))
		return 0;
	/* A canary beside the work area: nothing may reach it. */
	char canary[64];
	snprintf(canary, sizeof(canary), "%s-canary", top);
	mkdir(canary, 0700);
	struct stat before, after;
	stat(canary, &before);

	const uint8_t *p = data + 1;
	size_t n = size - 1;
	switch (data[0] & 3) {
	case 0:
		unpack_layer(top, p, n, MSB_OCI_TAR);
		break;
	case 1:
		unpack_layer(top, p, n, MSB_OCI_TAR_GZIP);
		break;
	case 2:
		unpack_layer(top, p, n, MSB_OCI_TAR_ZSTD);
		break;
	default:
		resolve_index(top, p, n);
		break;
	}

	int bad = stat(canary, &after) < 0 || after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
		  after.st_mtim.tv_nsec != before.st_mtim.tv_nsec || after.st_nlink != 2;
	msb__rm_rf(top);
	rmdir(canary);
	if (bad) {
		fprintf(stderr, "fuzz-oci: the input reached outside its directory\n");
		abort();
	}
	return 0;
}
