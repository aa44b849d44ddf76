/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-engine-tool: one operation on a `docker` or `wslc` backend per run,
 * for the end-to-end tests (tests/e2e/test_engine.py) and the bench. Each run
 * constructs a fresh backend from its JSON, so every call also exercises
 * get-or-create across processes (the name from the key, 21.13) and disposal
 * from the engine's labels rather than memory (4.18, 21.30).
 *
 *   msb-engine-tool BACKEND_JSON REQUEST_JSON
 *
 * BACKEND_JSON: {"type": "docker"|"wslc", ...} (msb/engine.h). REQUEST_JSON:
 * {"op": OP, "key": {"scope", "thread", "agent"}, "kind": K, "work_dir": W,
 *  "image": I, "allow": [HOST, ...], ...} with OP one of: doctor, declarations, acquire, exec,
 * write, read, stat, remove, reclaim, fingerprint, dispose, dispose_scope, conformance, bench,
 * steps (several execs on one handle, with waits between them).
 * Prints one JSON object; on a failure {"error": {"code", "name", "message"}} and exit status 1.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <msb/conformance.h>
#include <msb/engine.h>
#include <msb/msb.h>

static json_t *req_doc;

static const char *sget(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int fail(msb_error *e)
{
	json_t *o = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", msb_error_code(e), "name",
			      msb_error_name(e) ? msb_error_name(e) : "", "message",
			      msb_error_message(e) ? msb_error_message(e) : "");
	char *s = json_dumps(o, JSON_COMPACT);
	puts(s);
	free(s);
	json_decref(o);
	msb_error_free(e);
	return 1;
}

static int print(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	puts(s);
	free(s);
	json_decref(o);
	return 0;
}

static int backend_from(const char *json, msb_backend **out, msb_error **err)
{
	json_error_t je;
	json_t *o = json_loads(json, 0, &je);
	const char *type = o ? sget(o, "type") : NULL;
	int r;
	if (type && strcmp(type, "wslc") == 0)
		r = msb_wslc_backend_from_json(json, strlen(json), out, err);
	else
		r = msb_docker_backend_from_json(json, strlen(json), out, err);
	json_decref(o);
	return r;
}

static json_t *b64(const uint8_t *p, size_t n)
{
	/* Bytes as a JSON array of numbers would be slow; hex is enough here. */
	static const char hex[] = "0123456789abcdef";
	char *s = malloc(2 * n + 1);
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = hex[p[i] >> 4];
		s[2 * i + 1] = hex[p[i] & 15];
	}
	s[2 * n] = '\0';
	json_t *j = json_string(s);
	free(s);
	return j;
}

static uint8_t *unhex(const char *s, size_t *n)
{
	size_t l = s ? strlen(s) / 2 : 0;
	uint8_t *p = malloc(l + 1);
	for (size_t i = 0; i < l; i++) {
		unsigned v;
		sscanf(s + 2 * i, "%2x", &v);
		p[i] = (uint8_t)v;
	}
	*n = l;
	return p;
}

static uint8_t *read_path(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc((size_t)len + 1);
	*n = fread(p, 1, (size_t)len, f);
	fclose(f);
	return p;
}

static int spec_for(json_t *req, const char *kind, msb_spec **out, msb_error **err)
{
	msb_spec_builder *b = msb_spec_builder_new(kind);
	if (sget(req, "work_dir"))
		msb_spec_builder_set_work_dir(b, sget(req, "work_dir"));
	if (sget(req, "image"))
		msb_spec_builder_set_image(b, sget(req, "image"));
	const char *k;
	json_t *v;
	json_object_foreach (json_object_get(req, "labels"), k, v)
		msb_spec_builder_set_label(b, k, json_string_value(v));
	/* "allow": [HOST, ...] makes the spec's egress an allowlist (maybe of
	 * nobody). */
	json_t *allow = json_object_get(req, "allow");
	if (json_is_array(allow))
		msb_spec_builder_set_egress(b, MSB_EGRESS_ALLOWLIST);
	size_t i;
	json_array_foreach (allow, i, v)
		msb_spec_builder_add_egress_host(b, json_string_value(v));
	int r = msb_spec_build(b, out, err);
	msb_spec_builder_free(b);
	return r;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static json_t *result_json(const msb_exec_result *res)
{
	return json_pack("{s:i, s:o, s:o, s:b}", "exit_code", res->exit_code, "stdout",
			 b64(res->stdout_bytes, res->stdout_len), "stderr",
			 b64(res->stderr_bytes, res->stderr_len), "truncated", res->truncated);
}

static const char *suite_kind(msb_conformance_suite s, char *buf, size_t n)
{
	snprintf(buf, n, "conformance-%s", msb_conformance_suite_name(s));
	for (char *p = buf; *p; p++)
		*p = *p == '_' ? '-' : (char)(*p | 0x20);
	return buf;
}

struct nlb_call {
	msb_sandbox *sb;
};

static int nlb_call(void *ud, msb_error **err)
{
	struct nlb_call *c = ud;
	const char *mk[] = {"mkdir", "-p", "call-dir", NULL};
	const char *tee[] = {"tee", "call-dir/out.txt", NULL};
	const char *const *steps[] = {mk, tee};
	for (size_t i = 0; i < 2; i++) {
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		req.argv = steps[i];
		req.stdin_data = (const uint8_t *)"call output\n";
		req.stdin_len = 12;
		msb_exec_result res = {0};
		int r = msb_sandbox_exec(c->sb, &req, &res, err);
		int code = res.exit_code;
		msb_exec_result_clear(&res);
		if (r < 0)
			return r;
		if (code != 0)
			return msb_error_set(err, MSB_E_RUNTIME, "`%s` exited %d", steps[i][0],
					     code);
	}
	return msb_sandbox_reclaim(c->sb, "call-dir", NULL, 30, err);
}

/* Every declared suite against a fresh sandbox each (as msb conformance). */
static int conformance(msb_backend *b, json_t *req)
{
	const msb_declarations *d = msb_backend_declarations(b);
	json_t *out = json_array();
	const char *thread = sget(req, "thread") ? sget(req, "thread") : "conformance";
	json_t *only = json_object_get(req, "suites");
	static const msb_conformance_suite order[] = {
		MSB_SUITE_FILES_IN, MSB_SUITE_FILES_OUT,	   MSB_SUITE_FILES_DELETE,
		MSB_SUITE_RECLAIM,  MSB_SUITE_NOTHING_LEFT_BEHIND, MSB_SUITE_EXEC,
	};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		msb_conformance_suite s = order[i];
		const char *sname = msb_conformance_suite_name(s);
		if (only) {
			bool want = false;
			size_t j;
			json_t *v;
			json_array_foreach (only, j, v)
				want |= strcmp(json_string_value(v), sname) == 0;
			if (!want)
				continue;
		}
		char kind[64];
		suite_kind(s, kind, sizeof(kind));
		msb_key key = {"conformance", thread, "conformance", NULL};
		msb_error *err = NULL;
		msb_spec *spec = NULL;
		msb_sandbox *box = NULL;
		int r = spec_for(req, kind, &spec, &err);
		if (r == 0)
			r = msb_backend_acquire(b, &key, spec, &box, &err);
		if (r < 0)
			return fail(err);
		msb_conformance_subject subj;
		msb_posix_guest_subject(box,
					msb_spec_work_dir(spec) ? msb_spec_work_dir(spec)
								: MSB_DEFAULT_WORK_DIR,
					d->capabilities, &subj);
		msb_conformance_report *rep = NULL;
		switch (s) {
		case MSB_SUITE_FILES_IN:
			r = msb_run_files_in_probes(&subj, &rep, &err);
			break;
		case MSB_SUITE_FILES_OUT:
			r = msb_run_files_out_probes(&subj, &rep, &err);
			break;
		case MSB_SUITE_FILES_DELETE:
			r = msb_run_files_delete_probes(&subj, &rep, &err);
			break;
		case MSB_SUITE_RECLAIM:
			r = msb_run_reclaim_probes(&subj, &rep, &err);
			break;
		case MSB_SUITE_EXEC:
			r = msb_run_exec_probes(&subj, &rep, &err);
			break;
		case MSB_SUITE_NOTHING_LEFT_BEHIND: {
			struct nlb_call c = {box};
			msb_fingerprint_subject fp;
			msb_sandbox_fingerprint_subject(box, &fp);
			r = msb_assert_nothing_left_behind(&fp, nlb_call, &c, &rep, &err);
			if (r == MSB_E_CONFORMANCE_FAILURE) {
				msb_error_free(err);
				err = NULL;
				r = 0;
			}
			break;
		}
		case MSB_SUITE_EGRESS:
		case MSB_SUITE_CALL_SCOPE:
		default:
			break;
		}
		msb_sandbox_free(box);
		msb_disposal_failure *f = NULL;
		msb_error *derr = NULL;
		msb_backend_dispose(b, &key, kind, NULL, &f, &derr);
		msb_disposal_failure_free(f);
		msb_error_free(derr);
		msb_spec_unref(spec);
		if (r < 0) {
			msb_error_wrap(&err, "%s", sname);
			return fail(err);
		}
		char *text = msb_conformance_report_json(rep);
		json_error_t je;
		json_array_append_new(out, json_loads(text, 0, &je));
		free(text);
		msb_conformance_report_free(rep);
	}
	return print(json_pack("{s:o}", "suites", out));
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: msb-engine-tool BACKEND_JSON REQUEST_JSON\n");
		return 2;
	}
	json_error_t je;
	req_doc = json_loads(argv[2], 0, &je);
	if (!req_doc) {
		fprintf(stderr, "bad request JSON: %s\n", je.text);
		return 2;
	}
	json_t *req = req_doc;
	const char *op = sget(req, "op");
	msb_error *err = NULL;
	if (strcmp(op, "doctor") == 0) {
		bool ok = false;
		char *reason = NULL;
		json_t *bj = json_loads(argv[1], 0, &je);
		const char *type = sget(bj, "type");
		int r = type && strcmp(type, "wslc") == 0
				? msb_wslc_doctor(argv[1], strlen(argv[1]), &ok, &reason, &err)
				: msb_docker_doctor(argv[1], strlen(argv[1]), &ok, &reason, &err);
		json_decref(bj);
		if (r < 0)
			return fail(err);
		json_t *o = json_pack("{s:b, s:s}", "ok", ok, "reason", reason);
		free(reason);
		return print(o);
	}
	double t0 = now_s();
	msb_backend *b = NULL;
	if (backend_from(argv[1], &b, &err) < 0)
		return fail(err);
	double t_construct = now_s() - t0;
	if (strcmp(op, "declarations") == 0) {
		char *text = NULL;
		if (msb_declarations_to_json(msb_backend_declarations(b), &text, &err) < 0)
			return fail(err);
		json_t *o = json_pack("{s:s, s:s, s:o}", "name", msb_backend_name(b), "isolation",
				      msb_backend_isolation(b), "declarations",
				      json_loads(text, 0, &je));
		free(text);
		msb_backend_unref(b);
		return print(o);
	}
	if (strcmp(op, "conformance") == 0) {
		int rc = conformance(b, req);
		msb_backend_unref(b);
		return rc;
	}
	if (strcmp(op, "dispose_scope") == 0) {
		msb_scope_purge p = {0};
		if (msb_backend_dispose_scope(b, sget(req, "scope"), sget(req, "thread"), &p,
					      &err) < 0)
			return fail(err);
		msb_backend_unref(b);
		return print(json_pack("{s:I, s:I}", "disposed", (json_int_t)p.disposed,
				       "undisposed", (json_int_t)p.undisposed));
	}
	json_t *k = json_object_get(req, "key");
	msb_key key = {sget(k, "scope"), sget(k, "thread"), sget(k, "agent"), NULL};
	const char *kind = sget(req, "kind") ? sget(req, "kind") : "default";
	if (strcmp(op, "dispose") == 0) {
		msb_disposal_failure *f = NULL;
		if (msb_backend_dispose(
			    b, &key, json_is_true(json_object_get(req, "any_kind")) ? NULL : kind,
			    sget(req, "instance_id"), &f, &err) < 0)
			return fail(err);
		json_t *o = json_pack("{s:b, s:s?}", "failed", f != NULL, "detail",
				      f ? f->detail : NULL);
		msb_disposal_failure_free(f);
		msb_backend_unref(b);
		return print(o);
	}
	msb_spec *spec = NULL;
	msb_sandbox *sb = NULL;
	if (spec_for(req, kind, &spec, &err) < 0)
		return fail(err);
	t0 = now_s();
	if (msb_backend_acquire(b, &key, spec, &sb, &err) < 0)
		return fail(err);
	double t_acquire = now_s() - t0;
	const char *path = sget(req, "path");
	const char *wd = sget(req, "wd");
	json_t *o = NULL;
	int r = 0;
	if (strcmp(op, "acquire") == 0) {
		o = json_pack("{s:s, s:f, s:f}", "instance_id", msb_sandbox_instance_id(sb),
			      "construct_s", t_construct, "acquire_s", t_acquire);
	} else if (strcmp(op, "exec") == 0 || strcmp(op, "exec_bounded") == 0) {
		json_t *av = json_object_get(req, "argv");
		size_t n = json_array_size(av);
		const char **vec = calloc(n + 1, sizeof(*vec));
		for (size_t i = 0; i < n; i++)
			vec[i] = json_string_value(json_array_get(av, i));
		msb_exec_request x = MSB_EXEC_REQUEST_INIT;
		x.argv = av ? vec : NULL;
		x.shell = sget(req, "shell");
		x.working_directory = wd;
		size_t in_len = 0;
		uint8_t *in =
			sget(req, "stdin_hex") ? unhex(sget(req, "stdin_hex"), &in_len) : NULL;
		x.stdin_data = in;
		x.stdin_len = in_len;
		if (json_is_number(json_object_get(req, "timeout")))
			x.timeout = json_number_value(json_object_get(req, "timeout"));
		x.max_output_bytes =
			(uint64_t)json_integer_value(json_object_get(req, "max_output"));
		msb_exec_result res = {0};
		int reps = json_is_integer(json_object_get(req, "repeat"))
				   ? (int)json_integer_value(json_object_get(req, "repeat"))
				   : 1;
		json_t *times = json_array();
		for (int i = 0; i < reps && r == 0; i++) {
			msb_exec_result_clear(&res);
			double ts = now_s();
			r = strcmp(op, "exec") == 0 ? msb_sandbox_exec(sb, &x, &res, &err)
						    : msb_sandbox_exec_bounded(sb, &x, &res, &err);
			json_array_append_new(times, json_real(now_s() - ts));
		}
		if (r == 0) {
			o = result_json(&res);
			json_object_set_new(o, "times", times);
		} else {
			json_decref(times);
		}
		msb_exec_result_clear(&res);
		free(vec);
		free(in);
	} else if (strcmp(op, "steps") == 0) {
		/* Several execs on one handle (the kept stream's tests):
		 * {"exec": ARGV, "timeout": T} or {"wait_file": PATH} (polled
		 * until it exists: the test acts from outside meanwhile).
		 * {"results": [RESULT or {"error": ...}, ...]} */
		json_t *results = json_array();
		size_t i;
		json_t *st;
		json_array_foreach (json_object_get(req, "steps"), i, st) {
			if (sget(st, "wait_file")) {
				while (access(sget(st, "wait_file"), F_OK) != 0)
					usleep(20000);
				json_array_append_new(results, json_object());
				continue;
			}
			json_t *av = json_object_get(st, "exec");
			size_t n = json_array_size(av);
			const char **vec = calloc(n + 1, sizeof(*vec));
			for (size_t j = 0; j < n; j++)
				vec[j] = json_string_value(json_array_get(av, j));
			msb_exec_request x = MSB_EXEC_REQUEST_INIT;
			x.argv = vec;
			if (json_is_number(json_object_get(st, "timeout")))
				x.timeout = json_number_value(json_object_get(st, "timeout"));
			msb_exec_result res = {0};
			msb_error *e = NULL;
			if (msb_sandbox_exec(sb, &x, &res, &e) == 0)
				json_array_append_new(results, result_json(&res));
			else
				json_array_append_new(
					results,
					json_pack("{s:{s:i, s:s, s:s}}", "error", "code",
						  msb_error_code(e), "name",
						  msb_error_name(e) ? msb_error_name(e) : "",
						  "message",
						  msb_error_message(e) ? msb_error_message(e)
								       : ""));
			msb_error_free(e);
			msb_exec_result_clear(&res);
			free(vec);
		}
		o = json_pack("{s:o}", "results", results);
	} else if (strcmp(op, "write") == 0) {
		size_t n = 0;
		uint8_t *data = sget(req, "file") ? read_path(sget(req, "file"), &n)
						  : unhex(sget(req, "data_hex"), &n);
		double ts = now_s();
		r = msb_sandbox_write_file(sb, path, data, n, wd, &err);
		if (r == 0)
			o = json_pack("{s:I, s:f}", "written", (json_int_t)n, "time_s",
				      now_s() - ts);
		free(data);
	} else if (strcmp(op, "read") == 0) {
		uint8_t *data = NULL;
		size_t n = 0;
		json_int_t max = json_integer_value(json_object_get(req, "max_bytes"));
		double ts = now_s();
		r = msb_sandbox_read_file(sb, path, wd, max > 0 ? (uint64_t)max : (64u << 20),
					  &data, &n, &err);
		double dt = now_s() - ts;
		if (r == 0 && sget(req, "out")) {
			FILE *f = fopen(sget(req, "out"), "wb");
			fwrite(data, 1, n, f);
			fclose(f);
			o = json_pack("{s:I, s:f}", "len", (json_int_t)n, "time_s", dt);
		} else if (r == 0) {
			o = json_pack("{s:o, s:f}", "data", b64(data, n), "time_s", dt);
		}
		free(data);
	} else if (strcmp(op, "read_race") == 0) {
		/* Read `path` `repeat` times: the distinct contents seen, and the
		 * refusals by name (the link-swap test). */
		json_t *seen = json_object(), *errors = json_object();
		json_int_t n_reps = json_integer_value(json_object_get(req, "repeat"));
		for (json_int_t i = 0; i < n_reps; i++) {
			uint8_t *data = NULL;
			size_t n = 0;
			msb_error *e = NULL;
			if (msb_sandbox_read_file(sb, path, wd, 4096, &data, &n, &e) == 0) {
				char *text = strndup((const char *)data, n);
				json_object_set_new(seen, text, json_true());
				free(text);
			} else {
				const char *nm = msb_error_name(e) ? msb_error_name(e) : "?";
				json_int_t c = json_integer_value(json_object_get(errors, nm));
				json_object_set_new(errors, nm, json_integer(c + 1));
			}
			free(data);
			msb_error_free(e);
		}
		o = json_pack("{s:o, s:o}", "contents", seen, "errors", errors);
	} else if (strcmp(op, "stat") == 0) {
		bool present = false;
		msb_entry e = {0};
		r = msb_sandbox_stat_file(sb, path, wd, &present, &e, &err);
		if (r == 0 && present)
			o = json_pack("{s:b, s:s, s:s, s:b, s:I}", "present", 1, "path", e.path,
				      "kind", msb_entry_kind_name(e.kind), "size_known",
				      e.size_known, "size", (json_int_t)e.size_bytes);
		else if (r == 0)
			o = json_pack("{s:b}", "present", 0);
		msb_entry_clear(&e);
	} else if (strcmp(op, "remove") == 0) {
		r = msb_sandbox_remove(sb, path, wd,
				       json_is_true(json_object_get(req, "recursive")), &err);
		if (r == 0)
			o = json_object();
	} else if (strcmp(op, "reclaim") == 0) {
		r = msb_sandbox_reclaim(sb, path, wd, 30, &err);
		if (r == 0)
			o = json_object();
	} else if (strcmp(op, "fingerprint") == 0) {
		bool supported = false;
		msb_fingerprint fp = {0};
		r = msb_sandbox_fingerprint(sb, &supported, &fp, &err);
		if (r == 0) {
			json_t *c = json_array(), *p = json_array();
			for (char **s = fp.changed_paths; s && *s; s++)
				json_array_append_new(c, json_string(*s));
			for (char **s = fp.running_programs; s && *s; s++)
				json_array_append_new(p, json_string(*s));
			o = json_pack("{s:b, s:o, s:o}", "supported", supported, "changed", c,
				      "running", p);
		}
		msb_fingerprint_clear(&fp);
	} else {
		r = msb_error_set(&err, MSB_E_VALUE, "unknown op `%s`", op);
	}
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	if (r < 0)
		return fail(err);
	return print(o);
}
