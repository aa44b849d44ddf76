/* SPDX-License-Identifier: Apache-2.0 */
/* Private to libmsb: an exec request's normal form (exec_opts.c). */
#ifndef MSB_CORE_POLICY_EXEC_OPTS_H
#define MSB_CORE_POLICY_EXEC_OPTS_H

#include <msb/sandbox.h>

/*
 * *out = req as a version-2 request (a version-1 one gets io NULL), after
 * the environment check (msb_exec_env_check) and the io checks: a version
 * this library knows, not both stdin_data and io.stdin_fd, and nothing the
 * backend does not serve (`served`: MSB_EXEC_CAN_*), which is refused with
 * MSB_E_NOT_IMPLEMENTED naming `backend` and what it cannot do. `op` opens
 * every message ("exec", "exec_bounded").
 */
int msb__exec_prepare(unsigned served, const char *backend, const msb_exec_request *req,
		      msb_exec_request *out, const char *op, msb_error **err);

#endif
