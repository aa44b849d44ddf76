/* SPDX-License-Identifier: Apache-2.0 */
/* `msb serve`: sandbox.* (docs/serve.md), one library call each. */
#include "methods.h"

static int exec(f_exec *a, bool bounded, msb_error **err)
{
	if (!a->argv == !a->shell)
		return rpc_bad_params(err, "exactly one of `argv` and `shell` is required");
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = a->argv;
	req.shell = a->shell;
	req.working_directory = a->working_directory;
	req.env = a->env;
	req.stdin_data = a->in.data;
	req.stdin_len = a->in.len;
	req.timeout = a->timeout;
	req.max_output_bytes = a->max_output_bytes;
	/* a terminal: its size is the request's; the output is stdout alone */
	msb_exec_io io = MSB_EXEC_IO_INIT;
	msb_tty *tty = NULL;
	if (a->tty) {
		if (a->rows < 1 || a->rows > MSB_TTY_MAX_DIM || a->cols < 1 ||
		    a->cols > MSB_TTY_MAX_DIM)
			return rpc_bad_params(err, "`rows` and `cols` must be 1..%u",
					      MSB_TTY_MAX_DIM);
		int r = msb_tty_new((unsigned)a->rows, (unsigned)a->cols, &tty, err);
		if (r < 0)
			return r;
		io.tty = tty;
		req.io = &io;
	}
	int r = bounded ? msb_sandbox_exec_bounded(a->sandbox->ptr, &req, &a->res, err)
			: msb_sandbox_exec(a->sandbox->ptr, &req, &a->res, err);
	msb_tty_free(tty);
	return r;
}

int serve_sandbox_exec(rpc_call *c, void *frame, msb_error **err)
{
	return exec(frame, false, err);
}

int serve_sandbox_exec_bounded(rpc_call *c, void *frame, msb_error **err)
{
	return exec(frame, true, err);
}

int serve_sandbox_run_code(rpc_call *c, void *frame, msb_error **err)
{
	f_run_code *a = frame;
	return msb_sandbox_run_code(a->sandbox->ptr, a->code, a->timeout, NULL, &a->res, err);
}

int serve_sandbox_write_file(rpc_call *c, void *frame, msb_error **err)
{
	f_file *a = frame;
	return msb_sandbox_write_file(a->sandbox->ptr, a->path, a->data.data, a->data.len,
				      a->working_directory, err);
}

int serve_sandbox_read_file(rpc_call *c, void *frame, msb_error **err)
{
	f_file *a = frame;
	return msb_sandbox_read_file(a->sandbox->ptr, a->path, a->working_directory, a->max_bytes,
				     &a->data.data, &a->data.len, err);
}

int serve_sandbox_stat(rpc_call *c, void *frame, msb_error **err)
{
	f_file *a = frame;
	return msb_sandbox_stat_file(a->sandbox->ptr, a->path, a->working_directory, &a->present,
				     &a->entry, err);
}

int serve_sandbox_list(rpc_call *c, void *frame, msb_error **err)
{
	f_file *a = frame;
	return msb_sandbox_list_dir(a->sandbox->ptr, a->path, a->working_directory, &a->entries.v,
				    &a->entries.n, err);
}

int serve_sandbox_remove(rpc_call *c, void *frame, msb_error **err)
{
	f_file *a = frame;
	return msb_sandbox_remove(a->sandbox->ptr, a->path, a->working_directory, a->recursive,
				  err);
}

int serve_sandbox_reclaim(rpc_call *c, void *frame, msb_error **err)
{
	f_reclaim *a = frame;
	return msb_sandbox_reclaim(a->sandbox->ptr, a->directory, a->working_directory, a->timeout,
				   err);
}

int serve_sandbox_reset(rpc_call *c, void *frame, msb_error **err)
{
	f_reclaim *a = frame;
	return msb_sandbox_reset(a->sandbox->ptr, a->timeout, err);
}

int serve_sandbox_fingerprint(rpc_call *c, void *frame, msb_error **err)
{
	f_fingerprint *a = frame;
	msb_fingerprint fp = {NULL, NULL};
	int r = msb_sandbox_fingerprint(a->sandbox->ptr, &a->supported, &fp, err);
	if (r < 0 || !a->supported)
		return r;
	a->changed_paths = rpc_strv_json(fp.changed_paths);
	a->running_programs = rpc_strv_json(fp.running_programs);
	msb_fingerprint_clear(&fp);
	return 0;
}

int serve_sandbox_collect_outputs(rpc_call *c, void *frame, msb_error **err)
{
	f_collect *a = frame;
	rpc_handle *h = a->sandbox;
	msb_collect_options co = MSB_COLLECT_OPTIONS_INIT;
	co.sink = a->sink;
	co.call_id = a->call_id;
	if (h->call_owned && h->parent && h->parent->parent) {
		/* A call's sandbox: the session's sink and the call's id by default. */
		if (!co.sink)
			co.sink = h->parent->parent->aux;
		if (!co.call_id)
			co.call_id = msb_tool_call_id(h->parent->ptr);
	}
	co.outputs = a->outputs.v;
	co.n_outputs = a->outputs.n;
	co.working_directory = a->working_directory;
	co.key = a->key.present ? &a->key.key : NULL;
	co.observer = rpc_server_observer(c->srv);
	co.log = rpc_log;
	return msb_collect_outputs(h->ptr, a->spec, &co, &a->artifacts.v, &a->artifacts.n, err);
}
