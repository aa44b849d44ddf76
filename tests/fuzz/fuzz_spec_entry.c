/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry: a sandbox spec from JSON (msb_spec_from_json), the shape a
 * caller, a config file or `msb serve` hands the library. Properties (abort
 * on failure): a refusal is a negative code with a message and no spec; an
 * accepted spec serialises (msb_spec_to_json), the text parses back to an
 * equal spec (msb_spec_equal) and serialises to the same text again.
 */
#include <stdlib.h>
#include <string.h>

#include <msb/msb.h>

#include "fuzz_target.h"

static void check_refusal(int rc, msb_error *err)
{
	if (rc >= 0 || !err || msb_error_code(err) != rc || !msb_error_message(err) ||
	    !*msb_error_message(err))
		abort();
	msb_error_free(err);
}

int msb_fuzz_target_one(const uint8_t *data, size_t size)
{
	msb_spec *s = NULL;
	msb_error *err = NULL;
	int rc = msb_spec_from_json((const char *)data, size, &s, &err);
	if (rc < 0) {
		if (s)
			abort();
		check_refusal(rc, err);
		return 0;
	}
	if (rc != 0 || !s || err)
		abort();

	char *j1 = NULL, *j2 = NULL;
	msb_spec *s2 = NULL;
	if (msb_spec_to_json(s, &j1, &err) < 0)
		abort(); /* an accepted spec always serialises */
	rc = msb_spec_from_json(j1, strlen(j1), &s2, &err);
	if (rc < 0)
		abort(); /* to_json wrote something from_json refuses */
	if (!msb_spec_equal(s, s2))
		abort();
	if (msb_spec_to_json(s2, &j2, &err) < 0 || strcmp(j1, j2) != 0)
		abort();
	free(j1);
	free(j2);
	msb_spec_unref(s2);
	msb_spec_unref(s);
	return 1;
}
