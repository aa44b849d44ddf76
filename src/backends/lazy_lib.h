/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A shared library loaded on its first use (dlopen), not at the program's
 * start: libmsb links neither libarchive (ns: OCI layers, which pulls
 * libxml2 and ICU) nor libcurl (docker: the Engine API, which pulls TLS,
 * Kerberos and LDAP), so that `msb version`, `msb exec` and every program
 * that uses neither start without loading them (issue 17, docs/performance.md).
 *
 * A user declares a table of function pointers named as the functions, each
 * of the library's own type (__typeof__ of the header's declaration: no
 * signature is written twice), and then macros that route calls through it
 * (archive_lazy.h, curl_lazy.h).
 */
#ifndef MSB_BACKENDS_LAZY_LIB_H
#define MSB_BACKENDS_LAZY_LIB_H

#include <pthread.h>
#include <stddef.h>

#include "util/util.h"

typedef struct msb_lazy_lib {
	const char *what;	    /* for messages: "libarchive" */
	const char *const *sonames; /* tried in order, NULL-ended */
	const char *const *names;   /* the symbols, NULL-ended, in the table's order */
	void **slots;		    /* the table, as an array of pointers */
	pthread_once_t once;
	int rc; /* 0, or the MSB_E_ code of the failure */
	char why[256];
} msb_lazy_lib;

/* Load the library and fill the table, once per process; MSB_E_RUNTIME
 * naming the library (and the symbol) when it cannot be. Thread-safe. */
int msb__lazy_load(msb_lazy_lib *lib, msb_error **err);

#endif
