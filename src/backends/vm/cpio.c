/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cpio "newc" format, as the kernel's initramfs unpacker reads it: a
 * 110-byte ASCII header ("070701" and thirteen 8-digit hex fields), the
 * NUL-terminated name, padding to 4 bytes, the data, padding to 4 bytes; a
 * "TRAILER!!!" entry ends the archive.
 */
#include <stdio.h>
#include <sys/stat.h>

#include "vm_int.h"

static int pad4(msb_buf *b)
{
	static const uint8_t zero[4];
	size_t pad = (4 - b->len % 4) % 4;
	return pad ? msb__buf_append(b, zero, pad) : 0;
}

int msb_vm__cpio_add(msb_buf *b, const char *name, unsigned mode, const void *data, size_t len)
{
	/* Deterministic and distinct: the entry's offset. */
	unsigned ino = (unsigned)(b->len / 4 + 1);
	size_t namesize = strlen(name) + 1;
	if (namesize > 4096 || len > 0xffffffffu)
		return -EINVAL;
	char hdr[111];
	int n = snprintf(hdr, sizeof(hdr),
			 "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ino, mode,
			 0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u, len, 0u, 0u, 0u, 0u, namesize, 0u);
	if (n != 110)
		return -EINVAL;
	if (msb__buf_append(b, hdr, 110) < 0 || msb__buf_append(b, name, namesize) < 0 ||
	    pad4(b) < 0 || (len && msb__buf_append(b, data, len) < 0) || pad4(b) < 0)
		return -ENOMEM;
	return 0;
}

int msb_vm__cpio_finish(msb_buf *b)
{
	return msb_vm__cpio_add(b, "TRAILER!!!", 0, NULL, 0);
}
