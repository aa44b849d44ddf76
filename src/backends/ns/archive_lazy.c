/* SPDX-License-Identifier: Apache-2.0 */
/* libarchive on first use (archive_lazy.h, lazy_lib.h). */
#define MSB_ARCHIVE_LAZY_IMPL
#include "backends/ns/archive_lazy.h"

#include "backends/lazy_lib.h"

msb_archive_api msb_ns__archive;

#define MSB_LAZY_NAME(f) #f,
static const char *const names[] = {MSB_ARCHIVE_FUNCTIONS(MSB_LAZY_NAME) NULL};
#undef MSB_LAZY_NAME

static const char *const sonames[] = {"libarchive.so.13", "libarchive.so", NULL};

static msb_lazy_lib lib = {
	.what = "libarchive",
	.sonames = sonames,
	.names = names,
	.slots = (void **)&msb_ns__archive,
	.once = PTHREAD_ONCE_INIT,
};

int msb_ns__archive_load(msb_error **err)
{
	_Static_assert(sizeof(msb_ns__archive) ==
			       (sizeof(names) / sizeof(names[0]) - 1) * sizeof(void *),
		       "one slot per name");
	return msb__lazy_load(&lib, err);
}
