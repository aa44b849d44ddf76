/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The confined file plane (docs/internals/engine.md): msb-agent placed in
 * the container and run through the engine's exec as `msb-agent file OP
 * PATH`, which resolves the whole path with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS) from "/" - the walk and the transfer one operation,
 * so a link the guest swaps in is refused, never followed. Where it cannot
 * run (no agent to place, no openat2 in the engine's kernel, an exec that
 * cannot start it) the caller falls back to the tar-header walk:
 * ENGINE_AGENT_FALLBACK.
 */
#include <inttypes.h>
#include <stdio.h>

#include "engine.h"
#include "proto/agent_file.h"

#define AGENT_TIMEOUT 600.0
/* stderr of a refusal: one line. */
#define AGENT_SMALL 4096u

bool msb_engine__agent_place(engine_backend *b, const char *ref)
{
	if (!b->agent_guest || b->agent_off || !b->ops->install)
		return false;
	engine_stat st;
	msb_error *e = NULL;
	if (b->ops->stat(b->t, ref, b->agent_guest, &st, &e) == 0 && st.present &&
	    st.kind == MSB_ENTRY_FILE && st.size == b->agent_bin.len)
		return true;
	msb_error_free(e);
	e = NULL;
	if (b->ops->install(b->t, ref, b->agent_guest, b->agent_bin.data, b->agent_bin.len, &e) ==
	    0)
		return true;
	msb__log(&b->log, MSB_LOG_WARNING, b->transport_tag,
		 "cannot place msb-agent in `%.12s` (%s): its file plane is the tar-header walk",
		 ref, msb_error_message(e));
	msb_error_free(e);
	return false;
}

/* Run `msb-agent file ...` as the container's root. ENGINE_AGENT_FALLBACK
 * when the agent cannot do it here; else 0 with res filled. */
static int run(engine_backend *b, const char *ref, const char *const *args, const uint8_t *in,
	       size_t in_len, uint64_t max_out, double timeout, msb_exec_result *res,
	       msb_error **err)
{
	const char *argv[8] = {b->agent_guest, "file"};
	size_t k = 2;
	for (size_t i = 0; args[i] && k < 7; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	engine_exec x = {
		.argv = argv,
		.as_root = true,
		.stdin_data = in,
		.stdin_len = in_len,
		.timeout = timeout > 0 ? timeout : AGENT_TIMEOUT,
		.max_output = max_out,
	};
	*res = (msb_exec_result){0};
	int r = b->ops->exec(b->t, ref, &x, res, err);
	if (r < 0)
		return r;
	if (res->exit_code == MSB_AGENT_FILE_NO_OPENAT2) {
		/* The engine's kernel: every container of it is the same. */
		b->agent_off = true;
		msb__log(&b->log, MSB_LOG_WARNING, b->transport_tag,
			 "the engine's kernel has no openat2: the file plane is the tar-header "
			 "walk");
		msb_exec_result_clear(res);
		return ENGINE_AGENT_FALLBACK;
	}
	if (res->exit_code == 126 || res->exit_code == 127 || res->exit_code < 0) {
		/* It would not start (replaced by the guest, a noexec mount). */
		msb_exec_result_clear(res);
		return ENGINE_AGENT_FALLBACK;
	}
	return 0;
}

static char *stderr_line(const msb_exec_result *res)
{
	char *t = msb_text_from_bytes(res->stderr_bytes, res->stderr_len);
	if (t) {
		char *nl = strchr(t, '\n');
		if (nl)
			*nl = '\0';
	}
	return t;
}

/* The refusals every operation shares, as the walk words them. */
static int common(const msb_exec_result *res, const char *abs, msb_error **err)
{
	_cleanup_free_ char *line = stderr_line(res);
	const char *what = line && *line ? line : abs;
	switch (res->exit_code) {
	case MSB_AGENT_FILE_PARENT_LINK:
		return msb_error_set(err, MSB_E_VALUE,
				     "`%s` is a link: refusing to follow it to reach `%s`", what,
				     abs);
	case MSB_AGENT_FILE_NOT_DIR:
		return msb_error_set(err, MSB_E_NOT_DIRECTORY,
				     "`%s` is not a directory (on the way to `%s`)", what, abs);
	case MSB_AGENT_FILE_TOO_DEEP:
		return msb_error_set(err, MSB_E_OS,
				     "`%s` is more than %d directories deep: not removed", abs,
				     MSB_AGENT_FILE_DEPTH);
	default:
		return msb_error_set(err, MSB_E_OS, "the agent's %s of `%s` failed (status %d): %s",
				     "operation", abs, res->exit_code, line ? line : "");
	}
}

int msb_engine__agent_stat(engine_backend *b, const char *ref, const char *abs, engine_stat *out,
			   msb_error **err)
{
	const char *args[] = {"stat", abs, NULL};
	msb_exec_result res;
	int r = run(b, ref, args, NULL, 0, AGENT_SMALL, 0, &res, err);
	if (r != 0)
		return r;
	char kind[16] = "";
	unsigned long long size = 0;
	_cleanup_free_ char *text = msb_text_from_bytes(res.stdout_bytes, res.stdout_len);
	if (res.exit_code != 0)
		r = common(&res, abs, err);
	else if (!text || sscanf(text, "%15s %llu", kind, &size) != 2)
		r = msb_error_set(err, MSB_E_PROTOCOL,
				  "stat `%s`: the agent's answer is unreadable", abs);
	msb_exec_result_clear(&res);
	if (r < 0)
		return r;
	*out = (engine_stat){.present = strcmp(kind, "absent") != 0, .size = size};
	out->kind = strcmp(kind, "file") == 0	? MSB_ENTRY_FILE
		    : strcmp(kind, "dir") == 0	? MSB_ENTRY_DIRECTORY
		    : strcmp(kind, "link") == 0 ? MSB_ENTRY_SYMLINK
						: MSB_ENTRY_OTHER;
	return 0;
}

int msb_engine__agent_read(engine_backend *b, const char *ref, const char *abs, const char *path,
			   uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	char max[24];
	snprintf(max, sizeof(max), "%" PRIu64, max_bytes);
	const char *args[] = {"read", abs, max, NULL};
	msb_exec_result res;
	int r = run(b, ref, args, NULL, 0, max_bytes + AGENT_SMALL, 0, &res, err);
	if (r != 0)
		return r;
	_cleanup_free_ char *line = stderr_line(&res);
	switch (res.exit_code) {
	case MSB_AGENT_FILE_OK:
		*data = TAKE_PTR(res.stdout_bytes);
		*len = res.stdout_len;
		break;
	case MSB_AGENT_FILE_NOT_FOUND:
		r = msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s`", abs);
		break;
	case MSB_AGENT_FILE_IS_DIR:
		r = msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
		break;
	case MSB_AGENT_FILE_LEAF_LINK:
		r = msb_error_set(err, MSB_E_OS, "`%s` is a link: refusing to read through it",
				  abs);
		break;
	case MSB_AGENT_FILE_NOT_REGULAR:
		r = msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", abs);
		break;
	case MSB_AGENT_FILE_TOO_BIG: {
		unsigned long long size = line ? strtoull(line, NULL, 10) : 0;
		r = msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED,
				  "`%s` is %llu bytes, over the max_bytes_per_file cap of %" PRIu64
				  " bytes",
				  path, size, max_bytes);
		msb__error_set_cap(err, "max_bytes_per_file", path);
		break;
	}
	default:
		r = common(&res, abs, err);
	}
	msb_exec_result_clear(&res);
	return r;
}

int msb_engine__agent_write(engine_backend *b, const char *ref, const char *abs, const char *path,
			    const uint8_t *data, size_t len, msb_error **err)
{
	const char *args[] = {"write", abs, "644", NULL};
	msb_exec_result res;
	int r = run(b, ref, args, data, len, AGENT_SMALL, 0, &res, err);
	if (r != 0)
		return r;
	switch (res.exit_code) {
	case MSB_AGENT_FILE_OK:
		break;
	case MSB_AGENT_FILE_LEAF_LINK:
		r = msb_error_set(err, MSB_E_VALUE,
				  "destination `%s` is a link: refusing to follow it", abs);
		break;
	case MSB_AGENT_FILE_IS_DIR:
		r = msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
		break;
	case MSB_AGENT_FILE_NOT_REGULAR:
		r = msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
		break;
	default:
		r = common(&res, abs, err);
	}
	msb_exec_result_clear(&res);
	return r;
}

int msb_engine__agent_remove(engine_backend *b, const char *ref, const char *abs, const char *path,
			     bool recursive, double timeout, const char *op, msb_error **err)
{
	const char *args[] = {"remove", abs, recursive ? "-r" : NULL, NULL};
	msb_exec_result res;
	int r = run(b, ref, args, NULL, 0, AGENT_SMALL, timeout, &res, err);
	if (r != 0)
		return r;
	switch (res.exit_code) {
	case MSB_AGENT_FILE_OK:
		break;
	case MSB_AGENT_FILE_IS_DIR:
		r = msb_error_set(err, MSB_E_OS,
				  "%s: `%s` is a directory: removing it needs recursive", op, path);
		break;
	default:
		common(&res, abs, err);
		r = msb_error_wrap(err, "%s", op);
	}
	msb_exec_result_clear(&res);
	return r;
}
