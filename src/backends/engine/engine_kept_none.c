/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kept agent stream where it is not built (the Windows build,
 * docs/windows.md: its only engine backend, wslc, keeps no stream - every
 * invocation is bounded and reaped, 21.12 - and the protocol client is not
 * part of that build): every exec is one engine exec (engine_sandbox.c).
 */
#include "engine.h"

void msb_engine__kept_init(engine_kept *k)
{
	*k = (engine_kept){0};
	k->state = -1;
}

void msb_engine__kept_clear(engine_kept *k, engine_backend *b)
{
}

int msb_engine__kept_exec(engine_backend *b, engine_kept *k, const char *ref, const char *name,
			  const char *base, const msb_exec_request *req, bool bounded,
			  msb_exec_result *out, msb_error **err)
{
	return ENGINE_KEPT_UNAVAILABLE;
}
