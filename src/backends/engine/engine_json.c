/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the engine backends' rows of the backend-type table share
 * (docker_json.c, wslc_json.c; msb/backend.h): a doctor asked about the
 * defaults, its answer as the table's verdict.
 */
#include "backends/types.h"
#include "engine.h"

int msb_engine__doctor_verdict(int (*doctor)(const char *, size_t, bool *, char **, msb_error **),
			       msb_backend_probe *out, msb_error **err)
{
	bool ok = false;
	_cleanup_free_ char *reason = NULL;
	int r = doctor(NULL, 0, &ok, &reason, err);
	if (r < 0)
		return r;
	return msb_backends__verdict(out, ok, reason ? reason : "", err);
}
