/* SPDX-License-Identifier: Apache-2.0 */
/* Private to libmsb: an exec request's normal form (exec_opts.c). */
#ifndef MSB_CORE_POLICY_EXEC_OPTS_H
#define MSB_CORE_POLICY_EXEC_OPTS_H

#include <msb/sandbox.h>
#include <msb/spec.h>

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

/*
 * The environment of `spec` (msb_spec_builder_set_env) as the one every
 * exec of sb starts from; the request's entries win name by name. Set once,
 * by msb_backend_acquire, before the handle is given out.
 */
int msb__sandbox_set_spec_env(msb_sandbox *sb, const msb_spec *spec, msb_error **err);

#endif
