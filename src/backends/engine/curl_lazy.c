/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl on first use (curl_lazy.h, lazy_lib.h). */
#define MSB_CURL_LAZY_IMPL
#include "backends/engine/curl_lazy.h"

#include "backends/lazy_lib.h"

msb_curl_api msb_docker__curl;

#define MSB_LAZY_NAME(f) #f,
static const char *const names[] = {MSB_CURL_FUNCTIONS(MSB_LAZY_NAME) NULL};
#undef MSB_LAZY_NAME

static const char *const sonames[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so", NULL};

static msb_lazy_lib lib = {
	.what = "libcurl",
	.sonames = sonames,
	.names = names,
	.slots = (void **)&msb_docker__curl,
	.once = PTHREAD_ONCE_INIT,
};

int msb_docker__curl_load(msb_error **err)
{
	_Static_assert(sizeof(msb_docker__curl) ==
			       (sizeof(names) / sizeof(names[0]) - 1) * sizeof(void *),
		       "one slot per name");
	return msb__lazy_load(&lib, err);
}
