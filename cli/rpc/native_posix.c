/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run_with_host_tools over the native transport (docs/serve.md): the host
 * serves the guest over a unix socket in the storage base - the ns
 * backend's (msb/hosttools_native.h), Linux only. Windows has
 * native_win32.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msb/hosttools_native.h>
#include <msb/ns.h>

#include "host_tools_client_py.h"
#include "methods.h"

static char *join(const char *a, const char *b)
{
	char *p = NULL;
	return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

/* Native (ns): the socket in the storage base, the program and the guest
 * client beside each other in <dir>, run with one bounded exec. */
int rpc_run_native(msb_sandbox *sb, msb_host_tool_run *run, const char *dir,
		   const char *program_name, const char *program, const char *interpreter,
		   double timeout, msb_exec_result *res, json_t **where, msb_error **err)
{
	if (strchr(program_name, '/') || strcmp(program_name, ".") == 0 ||
	    strcmp(program_name, "..") == 0 || strcmp(program_name, "msb_host_tools.py") == 0)
		return rpc_bad_params(err, "`program_name` must be a plain file name other than "
					   "`msb_host_tools.py`");
	msb_native_server *ns = NULL;
	char *prog_path = join(dir, program_name), *client_path = join(dir, "msb_host_tools.py");
	char *env0 = NULL;
	int r;
	if (!prog_path || !client_path) {
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	if ((r = msb_ns_host_tools_attach(sb, run, rpc_log, NULL, &ns, err)) < 0 ||
	    (r = rpc_write_text(sb, prog_path, program, err)) < 0 ||
	    (r = rpc_write_text(sb, client_path, HOST_TOOLS_CLIENT_PY, err)) < 0)
		goto out;
	if (asprintf(&env0, "%s=%s", MSB_HOST_TOOLS_SOCKET_ENV, msb_native_server_guest_path(ns)) <
	    0) {
		env0 = NULL;
		r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		goto out;
	}
	const char *argv[] = {interpreter, program_name, NULL};
	const char *env[] = {env0, "PYTHONDONTWRITEBYTECODE=1", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.env = env;
	req.working_directory = dir;
	req.timeout = timeout;
	if ((r = msb_sandbox_exec(sb, &req, res, err)) == 0)
		*where = json_pack("{s:s, s:s}", "run_directory", dir, "work", dir);
out:
	msb_native_server_stop(ns);
	free(env0);
	free(prog_path);
	free(client_path);
	return r;
}
