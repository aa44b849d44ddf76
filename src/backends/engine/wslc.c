/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `wslc` backend: the engine core over the CLI contract of 21.10.
 *
 *   container run -d --name N --network none -l k=v ... IMAGE sleep infinity
 *   container exec [-i] [-w WD] [--user 0] [-e K=V ...] REF argv...
 *   container cp - REF:/              (a one-entry tar on stdin)
 *   container cp REF:PATH -           (a tar on stdout; read to its first
 *                                      header for a stat, 21.28)
 *   container list [-a] --format json --filter name=N | --filter label=k=v
 *   container start REF
 *   container remove -f REF
 *
 * Lifecycle commands are bounded by command_timeout; exec by the call's
 * own timeout, at which the container is force removed (21.26). Error codes
 * (WSLC_E_*, ERROR_*) are read from stderr. docs/engine.md.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>

#include "util/json.h"
#include "wslc.h"

#define SMALL_OUT (64u << 10)
#define LIST_OUT (16u << 20)
#define ERR_OUT (16u << 10)

/* 21.4-21.8: EXEC and FILES_IN, egress closed, posix stated, default limits. */
static const msb_declarations wslc_declarations = {
	.version = MSB_DECLARATIONS_VERSION,
	.capabilities = MSB_CAP_EXEC | MSB_CAP_FILES_IN,
	.limits = MSB_DEFAULT_SANDBOX_LIMITS_INIT,
	.egress_modes = MSB_EGRESS_CLOSED,
	.os_families = MSB_OS_POSIX,
	.isolation_scopes = MSB_SCOPE_CONVERSATION,
};

typedef struct wslc_transport {
	char *path;
	double timeout;
	wslc_run_fn run;
	void *run_ud;
} wslc_transport;

/* ---- invocations ---------------------------------------------------------------- */

typedef struct argv_b {
	char **v;
	bool oom;
} argv_b;

static void add(argv_b *a, const char *s)
{
	if (!a->oom && msb__strv_push(&a->v, s) < 0)
		a->oom = true;
}

static argv_b start_argv(wslc_transport *w, const char *verb)
{
	argv_b a = {0};
	add(&a, w->path);
	add(&a, "container");
	add(&a, verb);
	return a;
}

/* Run a lifecycle command with no stdin and a small output budget. */
static int run_simple(wslc_transport *w, argv_b *a, uint64_t max_out, wslc_outcome *o,
		      msb_error **err)
{
	if (a->oom) {
		msb_strv_free(a->v);
		return msb__error_nomem(err);
	}
	wslc_io io = {.max_out = max_out, .max_err = ERR_OUT, .timeout = w->timeout};
	int r = w->run(w->run_ud, a->v, &io, o, err);
	if (r == 0 && o->timed_out)
		r = msb_error_set(err, MSB_E_TIMEOUT,
				  "`%s container %s` did not finish within %g s", w->path, a->v[2],
				  w->timeout);
	msb_strv_free(a->v);
	if (r < 0 && o->out.data)
		msb_wslc__outcome_clear(o);
	return r;
}

static char *code_of(const wslc_outcome *o)
{
	return msb_wslc__error_code((const char *)o->err.data, o->err.len);
}

static bool code_is_absent(const char *code)
{
	static const char *const absent[] = {
		"ERROR_NOT_FOUND",  "ERROR_FILE_NOT_FOUND",	  "ERROR_PATH_NOT_FOUND",
		"WSLC_E_NOT_FOUND", "WSLC_E_CONTAINER_NOT_FOUND", NULL};
	for (size_t i = 0; code && absent[i]; i++)
		if (strcmp(code, absent[i]) == 0)
			return true;
	return false;
}

/* "`wslc container V` failed (exit N, CODE): stderr" as the error. */
static int failed(wslc_transport *w, const char *verb, const wslc_outcome *o, int code_type,
		  msb_error **err)
{
	_cleanup_free_ char *text = msb_text_from_bytes(o->err.data, o->err.len);
	_cleanup_free_ char *code = code_of(o);
	if (text) {
		size_t n = strlen(text);
		while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
			text[--n] = '\0';
	}
	return msb_error_set(err, code_type, "`%s container %s` failed (exit %d%s%s): %s", w->path,
			     verb, o->exit_code, code ? ", " : "", code ? code : "",
			     text ? text : "");
}

/* ---- listing (21.19) -------------------------------------------------------------- */

static const char *field(json_t *o, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(o, a);
	if (!v)
		v = json_object_get(o, b);
	if (!v)
		v = json_object_get(o, c);
	if (json_is_array(v))
		v = json_array_get(v, 0);
	return json_string_value(v);
}

/* One listed container; labels as an object or a "k=v,k=v" string. */
static int add_listed(json_t *c, engine_container **v, size_t *n)
{
	const char *nm = field(c, "Names", "Name", "name");
	const char *id = field(c, "ID", "Id", "id");
	if (!nm)
		return 0;
	engine_container *nv = msb__reallocarray(*v, *n + 1, sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	engine_container *e = &nv[(*n)++];
	memset(e, 0, sizeof(*e));
	e->name = msb__strdup(nm + (nm[0] == '/'));
	e->id = msb__strdup(id ? id : nm);
	if (!e->name || !e->id)
		return -ENOMEM;
	/* For msb ls: the docker CLI's forms and lower-case ones. */
	json_t *cr = json_object_get(c, "Created");
	if (!cr)
		cr = json_object_get(c, "created");
	if (msb_engine__container_fields(
		    e, field(c, "Image", "image", "Image"), field(c, "State", "state", "status"),
		    json_integer_value(cr),
		    json_is_string(cr) ? json_string_value(cr)
				       : field(c, "CreatedAt", "createdAt", "created_at")) < 0)
		return -ENOMEM;
	json_t *labels = json_object_get(c, "Labels");
	if (!labels)
		labels = json_object_get(c, "labels");
	if (json_is_object(labels)) {
		const char *k;
		json_t *lv;
		json_object_foreach (labels, k, lv) {
			char *kv = json_is_string(lv)
					   ? msb__asprintf("%s=%s", k, json_string_value(lv))
					   : NULL;
			if (kv && msb__strv_push_take(&e->labels, kv) < 0) {
				free(kv);
				return -ENOMEM;
			}
		}
	} else if (json_is_string(labels)) {
		/* Values are label-safe (digested), so a comma only separates. */
		const char *p = json_string_value(labels);
		while (*p) {
			const char *end = p + strcspn(p, ",");
			if (end > p) {
				char *kv = msb__strndup(p, (size_t)(end - p));
				if (!kv || msb__strv_push_take(&e->labels, kv) < 0) {
					free(kv);
					return -ENOMEM;
				}
			}
			p = *end ? end + 1 : end;
		}
	}
	return 0;
}

/* The listing: a JSON array, or one JSON object per line. */
static int parse_list(const uint8_t *data, size_t len, engine_container **out, size_t *n,
		      msb_error **err)
{
	engine_container *v = NULL;
	size_t k = 0;
	int r = 0;
	json_error_t je;
	json_t *all = json_loadb((const char *)data, len, 0, &je);
	if (json_is_array(all)) {
		size_t i;
		json_t *c;
		json_array_foreach (all, i, c)
			if (r == 0)
				r = add_listed(c, &v, &k);
	} else {
		const char *p = (const char *)data, *end = p + len;
		while (p < end && r == 0) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
			bool blank = true;
			for (size_t i = 0; i < l; i++)
				blank &= p[i] == ' ' || p[i] == '\r' || p[i] == '\t';
			if (!blank) {
				json_t *c = json_loadb(p, l, 0, &je);
				if (!json_is_object(c)) {
					json_decref(c);
					json_decref(all);
					msb_engine__containers_free(v, k);
					return msb_error_set(err, MSB_E_PROTOCOL,
							     "wslc: `container list --format "
							     "json` printed something that is "
							     "not JSON");
				}
				r = add_listed(c, &v, &k);
				json_decref(c);
			}
			p += l + (nl != NULL);
		}
	}
	json_decref(all);
	if (r < 0) {
		msb_engine__containers_free(v, k);
		return msb__error_nomem(err);
	}
	*out = v;
	*n = k;
	return 0;
}

static int list_raw(wslc_transport *w, bool all, const char *name_filter, char *const *labels,
		    engine_container **out, size_t *n, msb_error **err)
{
	argv_b a = start_argv(w, "list");
	if (all)
		add(&a, "-a");
	add(&a, "--format");
	add(&a, "json");
	if (name_filter) {
		add(&a, "--filter");
		_cleanup_free_ char *f = msb__asprintf("name=%s", name_filter);
		f ? add(&a, f) : (void)(a.oom = true);
	}
	for (char *const *p = labels; p && *p; p++) {
		add(&a, "--filter");
		_cleanup_free_ char *f = msb__asprintf("label=%s", *p);
		f ? add(&a, f) : (void)(a.oom = true);
	}
	wslc_outcome o;
	int r = run_simple(w, &a, LIST_OUT, &o, err);
	if (r < 0)
		return r;
	if (o.exit_code != 0)
		r = failed(w, "list", &o, MSB_E_RUNTIME, err);
	else
		r = parse_list(o.out.data, o.out.len, out, n, err);
	msb_wslc__outcome_clear(&o);
	return r;
}

static int wslc_list(void *t, char *const *labels, engine_container **out, size_t *n,
		     msb_error **err)
{
	return list_raw(t, true, NULL, labels, out, n, err);
}

/* The exact name in a listing filtered by it (a substring match, 21.19). */
static int find(wslc_transport *w, bool all, const char *name, char **id, bool *found,
		msb_error **err)
{
	engine_container *v = NULL;
	size_t n = 0;
	int r = list_raw(w, all, name, NULL, &v, &n, err);
	if (r < 0)
		return r;
	*found = false;
	for (size_t i = 0; i < n && !*found; i++)
		if (strcmp(v[i].name, name) == 0) {
			*found = true;
			if (id && !(*id = msb__strdup(v[i].id)))
				r = msb__error_nomem(err);
		}
	msb_engine__containers_free(v, n);
	return r;
}

/* Present in `list -a`; running when also in `list` (the state field is
 * not read, 21.19). */
static int wslc_inspect(void *t, const char *name, engine_state *state, char **id, msb_error **err)
{
	bool found = false;
	int r = find(t, true, name, id, &found, err);
	if (r < 0 || !found) {
		*state = ENGINE_ABSENT;
		return r;
	}
	bool running = false;
	r = find(t, false, name, NULL, &running, err);
	if (r < 0) {
		free(TAKE_PTR(*id));
		return r;
	}
	*state = running ? ENGINE_RUNNING : ENGINE_STOPPED;
	return 0;
}

/* ---- lifecycle -------------------------------------------------------------------- */

static int wslc_start(void *t, const char *ref, msb_error **err)
{
	wslc_transport *w = t;
	argv_b a = start_argv(w, "start");
	add(&a, ref);
	wslc_outcome o;
	int r = run_simple(w, &a, SMALL_OUT, &o, err);
	if (r == 0 && o.exit_code != 0)
		r = failed(w, "start", &o, MSB_E_RUNTIME, err);
	msb_wslc__outcome_clear(&o);
	return r;
}

static int wslc_remove(void *t, const char *ref, msb_error **err)
{
	wslc_transport *w = t;
	argv_b a = start_argv(w, "remove");
	add(&a, "-f");
	add(&a, ref);
	wslc_outcome o;
	int r = run_simple(w, &a, SMALL_OUT, &o, err);
	if (r == 0 && o.exit_code != 0) {
		_cleanup_free_ char *code = code_of(&o);
		if (!code_is_absent(code))
			r = failed(w, "remove", &o, MSB_E_RUNTIME, err);
	}
	msb_wslc__outcome_clear(&o);
	return r;
}

static int exec_in(wslc_transport *w, const char *ref, const engine_exec *x, bool lifecycle,
		   wslc_outcome *o, msb_error **err);

static int wslc_run(void *t, const engine_create *c, char **id, msb_error **err)
{
	wslc_transport *w = t;
	argv_b a = start_argv(w, "run");
	add(&a, "-d");
	add(&a, "--name");
	add(&a, c->name);
	add(&a, "--network");
	add(&a, "none");
	for (char *const *p = c->labels; p && *p; p++) {
		add(&a, "-l");
		add(&a, *p);
	}
	add(&a, c->image);
	add(&a, "sleep");
	add(&a, "infinity");
	wslc_outcome o;
	int r = run_simple(w, &a, SMALL_OUT, &o, err);
	if (r < 0)
		return r;
	if (o.exit_code != 0) {
		_cleanup_free_ char *code = code_of(&o);
		if (code && strcmp(code, "ERROR_ALREADY_EXISTS") == 0) {
			msb_wslc__outcome_clear(&o);
			return ENGINE_EXISTS;
		}
		r = failed(w, "run", &o, MSB_E_RUNTIME, err);
		msb_wslc__outcome_clear(&o);
		return r;
	}
	/* The id it prints, else the name. */
	_cleanup_free_ char *printed = msb__strndup((const char *)o.out.data, o.out.len);
	msb_wslc__outcome_clear(&o);
	if (!printed)
		return msb__error_nomem(err);
	char *p = printed;
	while (*p == ' ' || *p == '\n')
		p++;
	p[strcspn(p, " \r\n")] = '\0';
	_cleanup_free_ char *ref = msb__strdup(*p ? p : c->name);
	if (!ref)
		return msb__error_nomem(err);
	/* The storage base, made as root (the contract's run has no -w). */
	const char *mk[] = {"mkdir", "-p", "--", c->work_dir, NULL};
	engine_exec x = {.argv = mk,
			 .as_root = true,
			 .timeout = w->timeout,
			 .max_output = SMALL_OUT,
			 .bounded = true};
	r = exec_in(w, ref, &x, true, &o, err);
	if (r == 0 && o.exit_code != 0)
		r = failed(w, "exec", &o, MSB_E_RUNTIME, err);
	msb_wslc__outcome_clear(&o);
	if (r < 0) {
		wslc_remove(t, ref, NULL);
		return msb_error_wrap(err, "cannot make the storage base `%s`", c->work_dir);
	}
	*id = TAKE_PTR(ref);
	return 0;
}

/* ---- exec (21.26) -------------------------------------------------------------------- */

static int exec_in(wslc_transport *w, const char *ref, const engine_exec *x, bool lifecycle,
		   wslc_outcome *o, msb_error **err)
{
	argv_b a = start_argv(w, "exec");
	if (x->stdin_data)
		add(&a, "-i");
	if (x->work_dir) {
		add(&a, "-w");
		add(&a, x->work_dir);
	}
	if (x->as_root) {
		add(&a, "--user");
		add(&a, "0");
	}
	for (const char *const *e = x->env; e && *e; e++) {
		add(&a, "-e");
		add(&a, *e);
	}
	add(&a, ref);
	for (const char *const *p = x->argv; p && *p; p++)
		add(&a, *p);
	if (a.oom) {
		msb_strv_free(a.v);
		return msb__error_nomem(err);
	}
	wslc_io io = {
		.has_stdin = x->stdin_data != NULL,
		.in_data = x->stdin_data,
		.in_data_len = x->stdin_len,
		.max_out = x->max_output,
		.bounded = x->bounded,
		.max_err = x->max_output,
		.timeout = x->timeout,
		.cancel = x->cancel,
	};
	int r = w->run(w->run_ud, a.v, &io, o, err);
	msb_strv_free(a.v);
	if (r < 0)
		return r;
	if (o->timed_out) {
		if (!lifecycle) {
			/* The process cannot be reached from here: the container goes. */
			wslc_remove(w, ref, NULL);
			r = msb_error_set(err, MSB_E_TIMEOUT,
					  "exec timed out after %g s: the container was removed "
					  "to end it",
					  x->timeout);
			msb__error_set_timeout(err, 9, o->out.data, o->out.len);
		} else {
			r = msb_error_set(err, MSB_E_TIMEOUT,
					  "`%s container exec` did not finish within %g s", w->path,
					  x->timeout);
		}
	} else if (o->cancelled) {
		/* Only the host child is reaped (21.26). */
		r = msb_error_set(err, MSB_E_CANCELLED, "exec cancelled");
	}
	if (r < 0)
		msb_wslc__outcome_clear(o);
	return r;
}

static int wslc_exec(void *t, const char *ref, const engine_exec *x, msb_exec_result *out,
		     msb_error **err)
{
	wslc_outcome o;
	int r = exec_in(t, ref, x, false, &o, err);
	if (r < 0)
		return r;
	if (msb__buf_append(&o.out, "", 1) < 0 || msb__buf_append(&o.err, "", 1) < 0) {
		msb_wslc__outcome_clear(&o);
		return msb__error_nomem(err);
	}
	*out = (msb_exec_result){
		.stdout_bytes = o.out.data,
		.stdout_len = o.out.len - 1,
		.stderr_bytes = o.err.data,
		.stderr_len = o.err.len - 1,
		.exit_code = o.exit_code,
		.truncated = o.truncated,
	};
	return 0;
}

/* ---- the file plane (21.27, 21.28) --------------------------------------------------- */

typedef struct cp_ctx {
	engine_tar_reader tar;
	const char *abs;
	uint64_t max_bytes;
	bool header_only; /* a stat: stop at the header */
	bool got_header;
	engine_tar_header hdr;
} cp_ctx;

static int cp_on_header(void *ud, const engine_tar_header *h, msb_error **err)
{
	cp_ctx *c = ud;
	c->got_header = true;
	c->hdr = *h;
	if (c->header_only)
		return 1; /* stop here: checked below, not an error */
	return msb_engine__tar_check(h, c->abs, c->max_bytes, err);
}

static int cp_sink(void *ud, const uint8_t *p, size_t n, msb_error **err)
{
	cp_ctx *c = ud;
	int r = msb_engine__tar_feed(&c->tar, p, n, err);
	if (r < 0)
		return r;
	return c->tar.done ? WSLC_SINK_DONE : 0;
}

/* `container cp REF:PATH -` into c; *absent when the engine says the path
 * is not there. */
static int cp_out(wslc_transport *w, const char *ref, cp_ctx *c, bool *absent, bool *empty,
		  msb_error **err)
{
	*absent = *empty = false;
	argv_b a = start_argv(w, "cp");
	_cleanup_free_ char *src = msb__asprintf("%s:%s", ref, c->abs);
	src ? add(&a, src) : (void)(a.oom = true);
	add(&a, "-");
	if (a.oom) {
		msb_strv_free(a.v);
		return msb__error_nomem(err);
	}
	wslc_io io = {.sink = cp_sink, .sink_ud = c, .max_err = ERR_OUT, .timeout = w->timeout};
	wslc_outcome o;
	int r = w->run(w->run_ud, a.v, &io, &o, err);
	msb_strv_free(a.v);
	if (r < 0)
		return r;
	if (o.timed_out)
		r = msb_error_set(err, MSB_E_TIMEOUT,
				  "`%s container cp` did not finish within %g s", w->path,
				  w->timeout);
	else if (!o.stopped && o.exit_code != 0) {
		_cleanup_free_ char *code = code_of(&o);
		if (code_is_absent(code))
			*absent = true;
		else
			r = failed(w, "cp", &o, MSB_E_OS, err);
	} else if (!o.stopped && !c->got_header) {
		*empty = true;
	}
	msb_wslc__outcome_clear(&o);
	return r;
}

/* The shared root probe for what cp streams nothing for (21.28). */
static int root_probe(wslc_transport *w, const char *ref, const char *abs, engine_stat *out,
		      msb_error **err)
{
	static const char script[] =
		"if [ -L \"$1\" ]; then echo link; elif [ -d \"$1\" ]; then echo directory; "
		"elif [ -f \"$1\" ]; then echo \"file $(wc -c < \"$1\")\"; "
		"elif [ -e \"$1\" ]; then echo other; else echo absent; fi";
	const char *argv[] = {"sh", "-c", script, "sh", abs, NULL};
	engine_exec x = {.argv = argv,
			 .as_root = true,
			 .timeout = w->timeout,
			 .max_output = 256,
			 .bounded = true};
	wslc_outcome o;
	int r = exec_in(w, ref, &x, true, &o, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *text = msb__strndup((const char *)o.out.data, o.out.len);
	int code = o.exit_code;
	msb_wslc__outcome_clear(&o);
	if (!text)
		return msb__error_nomem(err);
	*out = (engine_stat){.present = true};
	uint64_t size = 0;
	if (code == 0 && strncmp(text, "link", 4) == 0)
		out->kind = MSB_ENTRY_SYMLINK;
	else if (code == 0 && strncmp(text, "directory", 9) == 0)
		out->kind = MSB_ENTRY_DIRECTORY;
	else if (code == 0 && sscanf(text, "file %" SCNu64, &size) == 1)
		out->kind = MSB_ENTRY_FILE, out->size = size;
	else if (code == 0 && strncmp(text, "other", 5) == 0)
		out->kind = MSB_ENTRY_OTHER;
	else if (code == 0 && strncmp(text, "absent", 6) == 0)
		out->present = false;
	else
		return msb_error_set(err, MSB_E_OS, "stat `%s`: the guest's probe answered `%s`",
				     abs, text);
	return 0;
}

static int wslc_stat(void *t, const char *ref, const char *abs, engine_stat *out, msb_error **err)
{
	wslc_transport *w = t;
	cp_ctx c = {.abs = abs, .header_only = true};
	msb_engine__tar_reader_init(&c.tar, cp_on_header, &c);
	bool absent, empty;
	int r = cp_out(w, ref, &c, &absent, &empty, err);
	msb_engine__tar_reader_clear(&c.tar);
	if (r < 0)
		return r;
	if (absent) {
		*out = (engine_stat){0};
		return 0;
	}
	if (empty || !c.got_header)
		return root_probe(w, ref, abs, out, err);
	*out = (engine_stat){
		.present = true, .kind = msb_engine__tar_kind(c.hdr.type), .size = c.hdr.size};
	return 0;
}

static int wslc_read(void *t, const char *ref, const char *abs, uint64_t max_bytes, uint8_t **data,
		     size_t *len, msb_error **err)
{
	wslc_transport *w = t;
	cp_ctx c = {.abs = abs, .max_bytes = max_bytes};
	msb_engine__tar_reader_init(&c.tar, cp_on_header, &c);
	bool absent, empty;
	int r = cp_out(w, ref, &c, &absent, &empty, err);
	if (r == 0 && absent)
		r = msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s`", abs);
	else if (r == 0 && !c.tar.done)
		r = msb_error_set(err, MSB_E_OS, "read `%s`: `container cp` sent no regular file",
				  abs);
	if (r == 0) {
		*data = TAKE_PTR(c.tar.body);
		*len = (size_t)c.tar.hdr.size;
	}
	msb_engine__tar_reader_clear(&c.tar);
	return r;
}

static int wslc_write(void *t, const char *ref, const char *abs, const uint8_t *data, size_t len,
		      msb_error **err)
{
	wslc_transport *w = t;
	msb_buf head = MSB_BUF_INIT;
	int r = msb_engine__tar_head(abs + 1, len, &head, err);
	if (r < 0)
		return r;
	argv_b a = start_argv(w, "cp");
	add(&a, "-");
	_cleanup_free_ char *dst = msb__asprintf("%s:/", ref);
	dst ? add(&a, dst) : (void)(a.oom = true);
	if (a.oom) {
		msb_strv_free(a.v);
		msb__buf_free(&head);
		return msb__error_nomem(err);
	}
	wslc_io io = {.has_stdin = true,
		      .in_head = head.data,
		      .in_head_len = head.len,
		      .in_data = data,
		      .in_data_len = len,
		      .in_tail_len = msb_engine__tar_tail_len(len),
		      .max_out = SMALL_OUT,
		      .bounded = true,
		      .max_err = ERR_OUT,
		      .timeout = w->timeout};
	wslc_outcome o;
	r = w->run(w->run_ud, a.v, &io, &o, err);
	msb_strv_free(a.v);
	msb__buf_free(&head);
	if (r < 0)
		return r;
	if (o.timed_out)
		r = msb_error_set(err, MSB_E_TIMEOUT,
				  "`%s container cp` did not finish within %g s", w->path,
				  w->timeout);
	else if (o.exit_code != 0)
		r = failed(w, "cp", &o, MSB_E_RUNTIME, err);
	msb_wslc__outcome_clear(&o);
	return r;
}

static int wslc_fingerprint(void *t, const char *ref, bool *supported, msb_fingerprint *out,
			    msb_error **err)
{
	*supported = false;
	return 0;
}

static void wslc_free(void *t)
{
	wslc_transport *w = t;
	if (!w)
		return;
	free(w->path);
	free(w);
}

static const engine_transport_ops wslc_ops = {
	.inspect = wslc_inspect,
	.run = wslc_run,
	.start = wslc_start,
	.remove = wslc_remove,
	.list = wslc_list,
	.exec = wslc_exec,
	.stat = wslc_stat,
	.read = wslc_read,
	.write = wslc_write,
	.fingerprint = wslc_fingerprint,
	.free = wslc_free,
};

/* ---- construction ---------------------------------------------------------------------- */

static int check_options(const msb_wslc_options *o, msb_error **err)
{
	if (o->version != MSB_WSLC_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "wslc options: unsupported version %u",
				     o->version);
	if (o->command_timeout < 0 || o->command_timeout != o->command_timeout)
		return msb_error_set(err, MSB_E_VALUE, "wslc: command_timeout must be >= 0");
	if (o->egress_proxy_image)
		return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
				     "wslc: egress_proxy_image: the allowlist topology (21.21) is "
				     "not implemented yet; this backend serves egress `closed` "
				     "only");
	return 0;
}

int msb_wslc__backend_new(const msb_wslc_options *opts, wslc_run_fn run, void *run_ud,
			  msb_backend **out, msb_error **err)
{
	msb_wslc_options defaults = MSB_WSLC_OPTIONS_INIT;
	const msb_wslc_options *o = opts ? opts : &defaults;
	int r = check_options(o, err);
	if (r < 0)
		return r;
	wslc_transport *w = calloc(1, sizeof(*w));
	if (!w)
		return msb__error_nomem(err);
	w->path = msb__strdup(o->wslc_path && *o->wslc_path ? o->wslc_path : "wslc");
	w->timeout = o->command_timeout > 0 ? o->command_timeout : 60.0;
	w->run = run ? run : msb_wslc__spawn;
	w->run_ud = run_ud;
	if (!w->path) {
		wslc_free(w);
		return msb__error_nomem(err);
	}
	engine_backend_config cfg = {
		.name = o->name ? o->name : "wslc",
		.prefix = MSB_WSLC_NAME_PREFIX,
		.image = o->image,
		.transport_tag = "wslc",
		.ops = &wslc_ops,
		.t = w,
		.decl = &wslc_declarations,
		.isolation = "container",
		.log = o->log,
		.log_userdata = o->log_userdata,
		.allowlist_refused = "wslc serves egress `closed` only: the allowlist topology "
				     "(21.21) is not implemented for it",
	};
	return msb_engine__backend_new(&cfg, out, err);
}

int msb_wslc_backend_new(const msb_wslc_options *opts, msb_backend **out, msb_error **err)
{
	return msb_wslc__backend_new(opts, NULL, NULL, out, err);
}

static const char *const wslc_keys[] = {
	"type", "name", "wslc_path", "command_timeout", "image", "egress_proxy_image", NULL};

static int options_from_json(json_t *obj, msb_wslc_options *o, msb_error **err)
{
	const char *where = "wslc backend";
	const char *type = NULL;
	int r;
	if ((r = msb__json_check_keys(obj, wslc_keys, where, err)) < 0 ||
	    (r = msb__json_get_string(obj, "type", where, &type, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "name", where, &o->name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "wslc_path", where, &o->wslc_path, NULL, err)) < 0 ||
	    (r = msb__json_get_double(obj, "command_timeout", where, &o->command_timeout, NULL,
				      err)) < 0 ||
	    (r = msb__json_get_string(obj, "image", where, &o->image, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "egress_proxy_image", where, &o->egress_proxy_image,
				      NULL, err)) < 0)
		return r;
	if (type && strcmp(type, "wslc") != 0)
		return msb_error_set(err, MSB_E_VALUE, "%s: `type` is `%s`, not `wslc`", where,
				     type);
	return 0;
}

int msb_wslc_backend_from_json(const char *json, size_t len, msb_backend **out, msb_error **err)
{
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "wslc backend", &obj, err);
	if (r < 0)
		return r;
	msb_wslc_options o = MSB_WSLC_OPTIONS_INIT;
	r = options_from_json(obj, &o, err);
	if (r == 0)
		r = msb_wslc_backend_new(&o, out, err);
	json_decref(obj);
	return r;
}

int msb_wslc_doctor(const char *json, size_t len, bool *ok, char **reason, msb_error **err)
{
	json_t *obj = NULL;
	msb_wslc_options o = MSB_WSLC_OPTIONS_INIT;
	if (json) {
		int r = msb__json_load_object(json, len, "wslc backend", &obj, err);
		if (r == 0)
			r = options_from_json(obj, &o, err);
		if (r < 0) {
			json_decref(obj);
			return r;
		}
	}
	const char *path = o.wslc_path && *o.wslc_path ? o.wslc_path : "wslc";
	const char *argv[] = {path, "--version", NULL};
	wslc_io io = {.max_out = 4096, .bounded = true, .max_err = 4096, .timeout = 10};
	wslc_outcome out;
	msb_error *e = NULL;
	int r = msb_wslc__spawn(NULL, (char *const *)argv, &io, &out, &e);
	if (r < 0 || out.exit_code != 0 || out.timed_out) {
		*ok = false;
		*reason = msb__asprintf("not usable: `%s --version` %s", path,
					r < 0 ? msb_error_message(e) : "failed");
	} else {
		_cleanup_free_ char *v = msb__strndup((const char *)out.out.data, out.out.len);
		if (v)
			v[strcspn(v, "\r\n")] = '\0';
		*ok = true;
		*reason = msb__asprintf(
			"`%s` answers (%s); egress closed only (an allowlist is refused: the "
			"topology is not implemented for wslc); file plane: the tar-header walk "
			"(cp's first header, and a root probe for what cp streams nothing for - "
			"a link swapped in between the check and the copy is followed inside the "
			"container)",
			path, v ? v : "");
	}
	if (r == 0)
		msb_wslc__outcome_clear(&out);
	msb_error_free(e);
	json_decref(obj);
	return *reason ? 0 : msb__error_nomem(err);
}

char *msb_wslc__error_code(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		size_t start = i;
		if (i > 0 && ((text[i - 1] >= 'A' && text[i - 1] <= 'Z') || text[i - 1] == '_'))
			continue;
		if (len - i >= 7 && memcmp(text + i, "WSLC_E_", 7) == 0)
			i += 7;
		else if (len - i >= 6 && memcmp(text + i, "ERROR_", 6) == 0)
			i += 6;
		else
			continue;
		size_t end = i;
		while (end < len && ((text[end] >= 'A' && text[end] <= 'Z') ||
				     (text[end] >= '0' && text[end] <= '9') || text[end] == '_'))
			end++;
		if (end > i)
			return msb__strndup(text + start, end - start);
		i = start;
	}
	return NULL;
}
