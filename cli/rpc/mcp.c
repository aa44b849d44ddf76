/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `msb mcp`: a Model Context Protocol server over stdio on the JSON-RPC
 * dispatcher (docs/mcp.md). The MCP session is the conversation: every tool
 * call acquires the sandbox keyed (scope "mcp", thread = this session's id,
 * agent_dir "mcp") through the router, so the router's policy applies to
 * each one, and a refusal comes back as a tool error (isError) naming the
 * seed's exception - never as a protocol error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "invoke.h"
#include "mcp.h"

/* Newest first; the first is what an unknown version is answered with. */
static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
						"2024-11-05", NULL};

static mcp_state *state(rpc_server *srv)
{
	return rpc_server_userdata(srv);
}

static msb_key conversation_key(mcp_state *st)
{
	msb_key k = {"mcp", st->thread_id, "mcp", NULL};
	return k;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

typedef struct {
	const char *protocolVersion;
	json_t *result;
} f_initialize;

typedef struct {
	json_t *result;
} f_mcp;

typedef struct {
	const char *name;
	json_t *arguments;
	json_t *result;
} f_tools_call;

static int m_initialize(rpc_call *c, void *frame, msb_error **err)
{
	f_initialize *a = frame;
	mcp_state *st = state(c->srv);
	const char *answer = protocol_versions[0];
	for (size_t i = 0; protocol_versions[i]; i++)
		if (strcmp(a->protocolVersion, protocol_versions[i]) == 0)
			answer = protocol_versions[i];
	pthread_mutex_lock(&st->lock);
	snprintf(st->protocol, sizeof(st->protocol), "%s", answer);
	pthread_mutex_unlock(&st->lock);
	a->result = json_pack(
		"{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", answer, "capabilities",
		"tools", "listChanged", 0, "serverInfo", "name", "msb", "version", msb_version(),
		"instructions",
		"Run commands and move files in a sandbox that belongs to this session. "
		"Files persist between calls until `dispose`. A refused call names the policy "
		"that refused it.");
	return 0;
}

static int m_initialized(rpc_call *c, void *frame, msb_error **err)
{
	mcp_state *st = state(c->srv);
	pthread_mutex_lock(&st->lock);
	st->initialized = true;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

/* ---- tools ----------------------------------------------------------------------------------- */

/* A tool with its input schema and its behaviour hints (annotations). */
static json_t *tool(const char *name, const char *description, const char *schema,
		    const char *annotations)
{
	json_error_t e;
	json_t *s = json_loads(schema, 0, &e);
	json_t *a = json_loads(annotations, 0, &e);
	return json_pack("{s:s, s:s, s:o, s:o}", "name", name, "description", description,
			 "inputSchema", s ? s : json_object(), "annotations",
			 a ? a : json_object());
}

#define WRITES "{\"readOnlyHint\":false,\"destructiveHint\":true,\"openWorldHint\":false}"
#define READS "{\"readOnlyHint\":true,\"openWorldHint\":false}"

/* Before `initialize` has been answered only pings are served (the MCP
 * lifecycle): a client that skips the handshake gets -32600 naming it. */
static int require_initialize(rpc_server *srv, msb_error **err)
{
	mcp_state *st = state(srv);
	pthread_mutex_lock(&st->lock);
	bool done = st->protocol[0] != '\0';
	pthread_mutex_unlock(&st->lock);
	if (done)
		return 0;
	msb_error_set(err, MSB_E_VALUE, "the session is not initialized: send `initialize` first");
	return RPC_INVALID_REQUEST;
}

static int m_tools_list(rpc_call *c, void *frame, msb_error **err)
{
	f_mcp *a = frame;
	int r = require_initialize(c->srv, err);
	if (r < 0)
		return r;
	json_t *tools = json_array();
	json_array_append_new(
		tools,
		tool("execute",
		     "Run a shell command in this session's sandbox and return its output and "
		     "exit code.",
		     "{\"type\":\"object\",\"properties\":{"
		     "\"command\":{\"type\":\"string\",\"description\":\"a command line for "
		     "/bin/sh\"},"
		     "\"timeout\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":"
		     "\"seconds (default 60)\"},"
		     "\"working_directory\":{\"type\":\"string\",\"description\":\"absolute, or "
		     "relative to the sandbox's storage base\"},"
		     "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":"
		     "\"string\"},\"description\":\"environment variables for the command "
		     "(the proxy variables and PYTHONNOUSERSITE are reserved)\"},"
		     "\"tty\":{\"type\":\"boolean\",\"description\":\"run the command on a "
		     "terminal (for tools that want one); stderr is merged into the output\"},"
		     "\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":4096,"
		     "\"description\":\"the terminal's rows (default 24)\"},"
		     "\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":4096,"
		     "\"description\":\"the terminal's columns (default 80)\"}},"
		     "\"required\":[\"command\"],\"additionalProperties\":false}",
		     WRITES));
	json_array_append_new(
		tools, tool("write_file", "Write a file in the sandbox (created or replaced).",
			    "{\"type\":\"object\",\"properties\":{"
			    "\"path\":{\"type\":\"string\"},"
			    "\"content\":{\"type\":\"string\"},"
			    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],"
			    "\"description\":\"how content is encoded (default utf-8)\"}},"
			    "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
			    WRITES));
	json_array_append_new(
		tools,
		tool("read_file", "Read a file from the sandbox, as text (invalid UTF-8 replaced).",
		     "{\"type\":\"object\",\"properties\":{"
		     "\"path\":{\"type\":\"string\"}},"
		     "\"required\":[\"path\"],\"additionalProperties\":false}",
		     READS));
	json_array_append_new(
		tools, tool("list_files", "List a directory of the sandbox: kind, size and name.",
			    "{\"type\":\"object\",\"properties\":{"
			    "\"path\":{\"type\":\"string\",\"description\":\"default: the storage "
			    "base\"}},\"additionalProperties\":false}",
			    READS));
	json_array_append_new(
		tools,
		tool("collect_outputs",
		     "Deliver the files this sandbox's kind declares as outputs to the host; "
		     "returns what landed (name, size, sha256). `outputs` names more files, where "
		     "the kind allows it.",
		     "{\"type\":\"object\",\"properties\":{"
		     "\"outputs\":{\"type\":\"array\",\"description\":\"files named now, "
		     "relative to the storage base\",\"items\":{\"type\":\"object\","
		     "\"properties\":{\"path\":{\"type\":\"string\"},"
		     "\"name\":{\"type\":\"string\"},"
		     "\"media_type\":{\"type\":\"string\"},"
		     "\"required\":{\"type\":\"boolean\"}},"
		     "\"required\":[\"path\"],\"additionalProperties\":false}}},"
		     "\"additionalProperties\":false}",
		     WRITES));
	json_array_append_new(
		tools,
		tool("dispose",
		     "Dispose this session's sandbox: every file and process in it is "
		     "gone; the next call starts a fresh one.",
		     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
		     WRITES));
	a->result = json_pack("{s:o}", "tools", tools);
	return 0;
}

/* A tool result: one text item, isError, and structured content. */
static json_t *tool_result(const char *text, bool is_error, json_t *structured)
{
	json_t *r = json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text",
			      rpc_text(text), "isError", is_error);
	if (structured)
		json_object_set_new(r, "structuredContent", structured);
	return r;
}

/* A library refusal as a tool error: "Name: message", and the name and
 * message as structured content. */
static json_t *tool_refusal(const msb_error *e)
{
	char *text = NULL;
	if (asprintf(&text, "%s: %s", msb_error_name(e), msb_error_message(e)) < 0)
		text = NULL;
	json_t *r = tool_result(text ? text : msb_error_name(e), true,
				json_pack("{s:o}", "error", rpc_error_data(e)));
	free(text);
	return r;
}

MSB_PRINTF(1, 2) static json_t *bad_argument(const char *fmt, ...)
{
	char text[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return tool_result(text, true, NULL);
}

static int args_str(json_t *args, const char *key, bool required, const char **out, json_t **fail)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v)) {
		if (required)
			*fail = bad_argument("invalid arguments: `%s` is required", key);
		return required ? -1 : 0;
	}
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
		*fail = bad_argument("invalid arguments: `%s` must be a string", key);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

static bool args_only(json_t *args, const char *const *allowed, json_t **fail)
{
	const char *key;
	json_t *v;
	json_object_foreach (args, key, v) {
		bool known = false;
		for (size_t i = 0; allowed[i]; i++)
			known = known || strcmp(allowed[i], key) == 0;
		if (!known) {
			*fail = bad_argument("invalid arguments: unknown argument `%.80s`", key);
			return false;
		}
	}
	return true;
}

/* The conversation's sandbox, through the router's checks. */
static int acquire(mcp_state *st, msb_sandbox **sb, msb_error **err)
{
	msb_key key = conversation_key(st);
	int r = msb_router_acquire(st->router, &key, st->spec, NULL, sb, err);
	pthread_mutex_lock(&st->lock);
	st->acquired = st->acquired || r == 0;
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* `env`: an object of strings, as NAME=VALUE entries (*out: NULL-terminated,
 * its strings owned, free with env_free). The library checks the names. */
static void env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

static int args_env(json_t *args, char ***out, json_t **fail)
{
	json_t *v = json_object_get(args, "env");
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v) || json_object_size(v) > MSB_EXEC_ENV_MAX) {
		*fail = bad_argument("invalid arguments: `env` must be an object of at most %u "
				     "strings",
				     MSB_EXEC_ENV_MAX);
		return -1;
	}
	char **env = calloc(json_object_size(v) + 1, sizeof(*env));
	if (!env) {
		*fail = bad_argument("out of memory");
		return -1;
	}
	size_t n = 0;
	const char *name;
	json_t *val;
	json_object_foreach (v, name, val) {
		if (!json_is_string(val) ||
		    strlen(json_string_value(val)) != json_string_length(val) ||
		    strchr(name, '=')) {
			env_free(env);
			*fail = bad_argument("invalid arguments: `env.%.80s`: %s", name,
					     strchr(name, '=') ? "a name holds no `=`"
							       : "must be a string without NUL");
			return -1;
		}
		if (asprintf(&env[n], "%s=%s", name, json_string_value(val)) < 0) {
			env[n] = NULL;
			env_free(env);
			*fail = bad_argument("out of memory");
			return -1;
		}
		n++;
	}
	*out = env;
	return 0;
}

static int args_dim(json_t *args, const char *key, unsigned *out, json_t **fail)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > (json_int_t)MSB_TTY_MAX_DIM) {
		*fail = bad_argument("invalid arguments: `%s` must be an integer 1..%u", key,
				     MSB_TTY_MAX_DIM);
		return -1;
	}
	*out = (unsigned)json_integer_value(v);
	return 0;
}

static json_t *t_execute(mcp_state *st, json_t *args)
{
	static const char *const allowed[] = {
		"command", "timeout", "working_directory", "env", "tty", "rows", "cols", NULL};
	json_t *fail = NULL;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.timeout = 60.0;
	req.max_output_bytes = st->max_output;
	bool tty = false;
	unsigned rows = 24, cols = 80;
	json_t *t_arg = json_object_get(args, "tty");
	if (!args_only(args, allowed, &fail) ||
	    args_str(args, "command", true, &req.shell, &fail) ||
	    args_str(args, "working_directory", false, &req.working_directory, &fail) ||
	    args_dim(args, "rows", &rows, &fail) || args_dim(args, "cols", &cols, &fail))
		return fail;
	if (t_arg && !json_is_null(t_arg)) {
		if (!json_is_boolean(t_arg))
			return bad_argument("invalid arguments: `tty` must be true or false");
		tty = json_is_true(t_arg);
	}
	json_t *t = json_object_get(args, "timeout");
	if (t && !json_is_null(t)) {
		if (!json_is_number(t) || !(json_number_value(t) > 0))
			return bad_argument("invalid arguments: `%s` must be a positive number",
					    "timeout");
		req.timeout = json_number_value(t);
	}
	char **env = NULL;
	if (args_env(args, &env, &fail) < 0)
		return fail;
	req.env = (const char *const *)env;
	msb_exec_io io = MSB_EXEC_IO_INIT;
	msb_tty *term = NULL;
	if (tty && msb_tty_new(rows, cols, &term, NULL) == 0) {
		io.tty = term;
		req.io = &io;
	}
	msb_error *err = NULL;
	msb_sandbox *sb = NULL;
	msb_exec_result res = {0};
	/* a reserved name is refused before any sandbox is made */
	int r = msb_exec_env_check(req.env, &err);
	if (r == 0)
		r = acquire(st, &sb, &err);
	if (r == 0)
		r = tty && !term ? msb_error_set(&err, MSB_E_NOMEM, "out of memory")
				 : msb_sandbox_exec_bounded(sb, &req, &res, &err);
	msb_tty_free(term);
	env_free(env);
	if (r < 0) {
		json_t *out = tool_refusal(err);
		msb_error_free(err);
		msb_sandbox_free(sb);
		return out;
	}
	msb_sandbox_free(sb);
	size_t out_len = 0, err_len = 0;
	char *out_text = msb_text_from_bytes_len(res.stdout_bytes, res.stdout_len, &out_len);
	char *err_text = msb_text_from_bytes_len(res.stderr_bytes, res.stderr_len, &err_len);
	char *text = NULL;
	/* What the sandbox's limits did, in words the model can act on. */
	if (asprintf(&text, "%.*s%s%.*s%sexit code: %d%s%s%s%s", (int)out_len,
		     out_text ? out_text : "", err_len ? "\n[stderr]\n" : "", (int)err_len,
		     err_text ? err_text : "", (out_len || err_len) ? "\n" : "", res.exit_code,
		     res.truncated ? " (output truncated)" : "",
		     res.oom_killed ? " (the memory limit killed a process)" : "",
		     res.pids_exhausted ? " (the process limit refused a fork)" : "",
		     res.no_space ? " (the sandbox's disk is full)" : "") < 0)
		text = NULL;
	json_t *structured = json_pack(
		"{s:s%, s:s%, s:i, s:b, s:b, s:b, s:b}", "stdout", out_text ? out_text : "",
		out_len, "stderr", err_text ? err_text : "", err_len, "exit_code", res.exit_code,
		"truncated", res.truncated, "oom_killed", res.oom_killed, "pids_exhausted",
		res.pids_exhausted, "no_space", res.no_space);
	json_t *out = tool_result(text ? text : "", false, structured);
	free(text);
	free(out_text);
	free(err_text);
	msb_exec_result_clear(&res);
	return out;
}

static json_t *t_write_file(mcp_state *st, json_t *args)
{
	static const char *const allowed[] = {"path", "content", "encoding", NULL};
	json_t *fail = NULL;
	const char *path = NULL, *encoding = "utf-8";
	if (!args_only(args, allowed, &fail) || args_str(args, "path", true, &path, &fail) ||
	    args_str(args, "encoding", false, &encoding, &fail))
		return fail;
	json_t *c = json_object_get(args, "content");
	if (!json_is_string(c))
		return bad_argument("invalid arguments: `%s` must be a string", "content");
	const uint8_t *data = (const uint8_t *)json_string_value(c);
	size_t len = json_string_length(c);
	uint8_t *decoded = NULL;
	if (strcmp(encoding, "base64") == 0) {
		if (msb__base64_decode(json_string_value(c), len, false, &decoded, &len) < 0)
			return bad_argument("invalid arguments: `%s` is not valid base64",
					    "content");
		data = decoded;
	} else if (strcmp(encoding, "utf-8") != 0) {
		return bad_argument("invalid arguments: `%s` must be `utf-8` or `base64`",
				    "encoding");
	}
	msb_error *err = NULL;
	msb_sandbox *sb = NULL;
	json_t *out;
	if (acquire(st, &sb, &err) < 0 ||
	    msb_sandbox_write_file(sb, path, data, len, NULL, &err) < 0) {
		out = tool_refusal(err);
		msb_error_free(err);
	} else {
		char text[128];
		snprintf(text, sizeof(text), "wrote %zu bytes", len);
		out = tool_result(text, false, NULL);
	}
	msb_sandbox_free(sb);
	free(decoded);
	return out;
}

static json_t *t_read_file(mcp_state *st, json_t *args)
{
	static const char *const allowed[] = {"path", NULL};
	json_t *fail = NULL;
	const char *path = NULL;
	if (!args_only(args, allowed, &fail) || args_str(args, "path", true, &path, &fail))
		return fail;
	msb_error *err = NULL;
	msb_sandbox *sb = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	json_t *out;
	/* The spec's files_out cap is the policy: a larger file is refused. */
	uint64_t max = msb_spec_files_out(st->spec).max_bytes_per_file;
	if (acquire(st, &sb, &err) < 0 ||
	    msb_sandbox_read_file(sb, path, NULL, max, &data, &len, &err) < 0) {
		out = tool_refusal(err);
		msb_error_free(err);
	} else {
		size_t tlen = 0;
		char *text = msb_text_from_bytes_len(data, len, &tlen);
		json_t *r = json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text",
				      text ? text : "", text ? tlen : 0, "isError", 0);
		out = r;
		free(text);
	}
	free(data);
	msb_sandbox_free(sb);
	return out;
}

static json_t *t_list_files(mcp_state *st, json_t *args)
{
	static const char *const allowed[] = {"path", NULL};
	json_t *fail = NULL;
	const char *path = ".";
	if (!args_only(args, allowed, &fail) || args_str(args, "path", false, &path, &fail))
		return fail;
	msb_error *err = NULL;
	msb_sandbox *sb = NULL;
	msb_entry *entries = NULL;
	size_t n = 0;
	json_t *out;
	if (acquire(st, &sb, &err) < 0 ||
	    msb_sandbox_list_dir(sb, path, NULL, &entries, &n, &err) < 0) {
		out = tool_refusal(err);
		msb_error_free(err);
	} else {
		size_t cap = 1, used = 0;
		char *text = calloc(1, cap);
		json_t *list = json_array();
		for (size_t i = 0; text && i < n; i++) {
			char line[4200];
			int w = snprintf(line, sizeof(line), "%s\t%s\t%.4000s\n",
					 msb_entry_kind_name(entries[i].kind),
					 entries[i].size_known ? "" : "?", entries[i].path);
			if (entries[i].size_known)
				w = snprintf(line, sizeof(line), "%s\t%llu\t%.4000s\n",
					     msb_entry_kind_name(entries[i].kind),
					     (unsigned long long)entries[i].size_bytes,
					     entries[i].path);
			if (w < 0)
				continue;
			char *nt = realloc(text, cap + (size_t)w);
			if (!nt)
				break;
			text = nt;
			memcpy(text + used, line, (size_t)w);
			used += (size_t)w;
			cap += (size_t)w;
			text[used] = '\0';
			json_array_append_new(
				list, json_pack("{s:o, s:s}", "path", rpc_text(entries[i].path),
						"kind", msb_entry_kind_name(entries[i].kind)));
		}
		out = tool_result(text && used ? text : "(empty)", false,
				  json_pack("{s:o}", "entries", list));
		free(text);
		msb_entries_free(entries, n);
	}
	msb_sandbox_free(sb);
	return out;
}

static json_t *t_dispose(mcp_state *st, json_t *args)
{
	static const char *const allowed[] = {NULL};
	json_t *fail = NULL;
	if (!args_only(args, allowed, &fail))
		return fail;
	msb_key key = conversation_key(st);
	bool all = false;
	msb_error *err = NULL;
	if (msb_router_dispose(st->router, &key, &all, &err) < 0) {
		json_t *out = tool_refusal(err);
		msb_error_free(err);
		return out;
	}
	return tool_result(all ? "disposed: the next call starts a fresh sandbox"
			       : "not every backend confirmed the disposal; try again",
			   !all, NULL);
}

/* Land the declared (and call-time) outputs in the server's sink: the model
 * names files in the sandbox, never a host directory, and sees each
 * artifact's display, never its handle (the host path). */
static json_t *t_collect_outputs(mcp_state *st, json_t *args)
{
	static const char *const allowed[] = {"outputs", NULL};
	json_t *fail = NULL;
	if (!args_only(args, allowed, &fail))
		return fail;
	msb_error *err = NULL;
	msb_spec *holder = NULL;
	const msb_declared_output *outs = NULL;
	msb_collect_options co = MSB_COLLECT_OPTIONS_INIT;
	if (rpc_call_time_outputs_of(json_object_get(args, "outputs"), "outputs", &holder, &outs,
				     &co.n_outputs, &err) < 0) {
		json_t *out = bad_argument("invalid arguments: %s", msb_error_message(err));
		msb_error_free(err);
		return out;
	}
	static unsigned long counter;
	char call_id[64];
	snprintf(call_id, sizeof(call_id), "mcp-%lu",
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	msb_key key = conversation_key(st);
	co.sink = st->sink;
	co.outputs = outs;
	co.call_id = call_id;
	co.key = &key;
	co.log = rpc_log;
	msb_sandbox *sb = NULL;
	msb_landed_artifact *landed = NULL;
	size_t n = 0;
	json_t *out;
	if (acquire(st, &sb, &err) < 0 ||
	    msb_collect_outputs(sb, st->spec, &co, &landed, &n, &err) < 0) {
		out = tool_refusal(err);
		msb_error_free(err);
	} else {
		json_t *list = rpc_landed_json(landed, n);
		size_t i;
		json_t *a;
		char *text = NULL;
		size_t tlen = 0;
		json_array_foreach (list, i, a) {
			json_object_del(a, "handle"); /* for the host, never the model */
			size_t dl = strlen(landed[i].display);
			char *nt = realloc(text, tlen + dl + 2);
			if (!nt)
				continue;
			text = nt;
			memcpy(text + tlen, landed[i].display, dl);
			tlen += dl;
			text[tlen++] = '\n';
			text[tlen] = '\0';
		}
		out = tool_result(n ? (text ? text : "") : "nothing to collect", false,
				  json_pack("{s:o}", "artifacts", list));
		free(text);
	}
	msb_landed_artifacts_free(landed, n);
	msb_sandbox_free(sb);
	free((void *)outs);
	msb_spec_unref(holder);
	return out;
}

static const struct {
	const char *name;
	json_t *(*fn)(mcp_state *st, json_t *args);
} tools[] = {
	{"collect_outputs", t_collect_outputs}, {"execute", t_execute},
	{"write_file", t_write_file},		{"read_file", t_read_file},
	{"list_files", t_list_files},		{"dispose", t_dispose},
};

static int m_tools_call(rpc_call *c, void *frame, msb_error **err)
{
	f_tools_call *a = frame;
	mcp_state *st = state(c->srv);
	int r = require_initialize(c->srv, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		if (strcmp(tools[i].name, a->name) != 0)
			continue;
		json_t *empty = a->arguments ? NULL : json_object();
		a->result = tools[i].fn(st, a->arguments ? a->arguments : empty);
		json_decref(empty);
		/* structuredContent arrived with protocol 2025-06-18. */
		pthread_mutex_lock(&st->lock);
		bool old = st->protocol[0] && strcmp(st->protocol, "2025-06-18") < 0;
		pthread_mutex_unlock(&st->lock);
		if (old && a->result)
			json_object_del(a->result, "structuredContent");
		return 0;
	}
	return rpc_bad_params(err, "unknown tool `%.80s`", a->name);
}

/* MCP requests carry members beyond the ones read (_meta, capabilities, ...):
 * every method accepts parameters it does not declare. */
const rpc_method mcp_methods[] = {
	{"initialize", RPC_FRAME(f_initialize), m_initialize,
	 RPC_PARAMS(P_STR(f_initialize, protocolVersion, RPC_REQ)),
	 RPC_RESULTS(R_JSON(NULL, f_initialize, result)), RPC_FLAGS(RPC_M_OPEN)},
	{"notifications/initialized", RPC_FRAME(f_mcp), m_initialized, RPC_NO_PARAMS,
	 RPC_FLAGS(RPC_M_OPEN | RPC_M_NULL_RESULT)},
	{"ping", RPC_FRAME(f_mcp), NULL, RPC_NO_PARAMS, RPC_FLAGS(RPC_M_OPEN)},
	{"tools/list", RPC_FRAME(f_mcp), m_tools_list, RPC_NO_PARAMS,
	 RPC_RESULTS(R_JSON(NULL, f_mcp, result)), RPC_FLAGS(RPC_M_OPEN)},
	{"tools/call", RPC_FRAME(f_tools_call), m_tools_call,
	 RPC_PARAMS(P_STR(f_tools_call, name, RPC_REQ), P_OBJECT(f_tools_call, arguments)),
	 RPC_RESULTS(R_JSON(NULL, f_tools_call, result)), RPC_FLAGS(RPC_M_OPEN)},
	{.name = NULL},
};

void mcp_at_eof(rpc_server *srv)
{
	mcp_state *st = state(srv);
	if (st->acquired) {
		/* The conversation ended with the session: its sandboxes go too. */
		msb_key key = conversation_key(st);
		msb_router_dispose(st->router, &key, NULL, NULL);
	}
}
