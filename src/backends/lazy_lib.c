/* SPDX-License-Identifier: Apache-2.0 */
/* Shared libraries loaded on first use (lazy_lib.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "lazy_lib.h"

/* pthread_once takes no argument: the library being loaded, under the
 * loader's own lock (one load at a time; each happens once). */
static pthread_mutex_t loading_lock = PTHREAD_MUTEX_INITIALIZER;
static msb_lazy_lib *loading;

static void load(void)
{
	msb_lazy_lib *lib = loading;
	void *h = NULL;
	for (size_t i = 0; !h && lib->sonames[i]; i++)
		h = dlopen(lib->sonames[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(lib->why, sizeof(lib->why), "%s is not installed: %s", lib->what,
			 e ? e : "dlopen failed");
		lib->rc = MSB_E_RUNTIME;
		return;
	}
	for (size_t i = 0; lib->names[i]; i++) {
		lib->slots[i] = dlsym(h, lib->names[i]);
		if (!lib->slots[i]) {
			snprintf(lib->why, sizeof(lib->why), "%s has no `%s` (too old?)", lib->what,
				 lib->names[i]);
			lib->rc = MSB_E_RUNTIME;
			return; /* h stays loaded: nothing else may hold its symbols */
		}
	}
	lib->rc = 0;
}

int msb__lazy_load(msb_lazy_lib *lib, msb_error **err)
{
	pthread_mutex_lock(&loading_lock);
	loading = lib;
	pthread_once(&lib->once, load);
	loading = NULL;
	pthread_mutex_unlock(&loading_lock);
	if (lib->rc != 0)
		return msb_error_set(err, lib->rc, "%s", lib->why);
	return 0;
}
