/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run_with_host_tools over the native transport on Windows: refused. The
 * native transport serves the guest over a unix socket beside an ns
 * sandbox (native_posix.c); Windows has no ns backend, and the over-exec
 * transport serves every backend (docs/windows.md).
 */
#include "methods.h"

int rpc_run_native(msb_sandbox *sb, msb_host_tool_run *run, const char *dir,
		   const char *program_name, const char *program, const char *interpreter,
		   double timeout, msb_exec_result *res, json_t **where, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "the native host-tool transport serves an ns sandbox over a unix "
			     "socket, which Windows has not; use transport `over_exec`");
}
