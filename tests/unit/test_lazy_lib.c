/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Libraries loaded on first use (src/backends/lazy_lib.h; issue 17): a table
 * is filled once, from the first soname that loads; a library or a symbol
 * that is missing is a typed error naming it, every time it is asked for,
 * and never a crash at the first call.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backends/engine/curl_lazy.h"
#include "backends/lazy_lib.h"
#include "backends/ns/archive_lazy.h"

Test(lazy_lib, fills_the_table_once_from_the_first_soname_that_loads)
{
	void *slots[2] = {NULL, NULL};
	static const char *const sonames[] = {"libmsb-no-such-library.so.0", "libz.so.1", NULL};
	static const char *const names[] = {"zlibVersion", "crc32", NULL};
	msb_lazy_lib lib = {.what = "zlib",
			    .sonames = sonames,
			    .names = names,
			    .slots = slots,
			    .once = PTHREAD_ONCE_INIT};
	msb_error *err = NULL;
	cr_assert_eq(msb__lazy_load(&lib, &err), 0, "%s", msb_error_message(err));
	cr_assert_not_null(slots[0]);
	cr_assert_not_null(slots[1]);
	const char *(*version)(void) = (const char *(*)(void))slots[0];
	cr_assert_eq(version()[0], '1');
	void *first = slots[0];
	cr_assert_eq(msb__lazy_load(&lib, &err), 0);
	cr_assert_eq(slots[0], first);
}

Test(lazy_lib, a_missing_library_or_symbol_is_a_typed_error_naming_it)
{
	void *slots[1] = {NULL};
	static const char *const none[] = {"libmsb-no-such-library.so.0", NULL};
	static const char *const names[] = {"zlibVersion", NULL};
	msb_lazy_lib lib = {.what = "libnothing",
			    .sonames = none,
			    .names = names,
			    .slots = slots,
			    .once = PTHREAD_ONCE_INIT};
	msb_error *err = NULL;
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(msb__lazy_load(&lib, &err), MSB_E_RUNTIME);
		cr_assert(strstr(msb_error_message(err), "libnothing is not installed"), "%s",
			  msb_error_message(err));
		msb_error_free(err);
		err = NULL;
	}
	static const char *const zlib[] = {"libz.so.1", NULL};
	static const char *const missing[] = {"zlibVersion", "msb_no_such_symbol", NULL};
	void *two[2] = {NULL, NULL};
	msb_lazy_lib old = {.what = "zlib",
			    .sonames = zlib,
			    .names = missing,
			    .slots = two,
			    .once = PTHREAD_ONCE_INIT};
	cr_assert_eq(msb__lazy_load(&old, &err), MSB_E_RUNTIME);
	cr_assert(strstr(msb_error_message(err), "zlib has no `msb_no_such_symbol`"), "%s",
		  msb_error_message(err));
	msb_error_free(err);
}

/* The real tables: every function the unpacker and the docker transport
 * call is found in the installed libraries (the names are the tables'
 * members, through the headers' macros). */
Test(lazy_lib, libarchive_and_libcurl_tables_load)
{
	msb_error *err = NULL;
	cr_assert_eq(msb_ns__archive_load(&err), 0, "%s", msb_error_message(err));
	cr_assert_not_null(archive_read_new);
	cr_assert_not_null(archive_set_error);
	cr_assert_eq(msb_docker__curl_load(&err), 0, "%s", msb_error_message(err));
	cr_assert_not_null(curl_easy_setopt);
	cr_assert_not_null(curl_slist_free_all);
}
