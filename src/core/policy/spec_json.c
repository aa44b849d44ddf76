/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxSpec as JSON (docs/spec.md). Loading is strict: unknown keys are
 * refused by name, enums are parsed by their exact spellings (rungs are
 * strings, never ranks), integers must be non-negative. Everything lands in a
 * builder, so every rule of section 3 runs exactly as for a spec built in C.
 */
#include <msb/spec.h>

#include "core/core.h"
#include "util/json.h"

#define WHERE "spec"

static const char *const spec_keys[] = {
	"kind",
	"image",
	"image_id",
	"egress_allow",
	"work_dir",
	"labels",
	"requires",
	"min_isolation",
	"declared_outputs",
	"files_in",
	"files_out",
	"outputs_named_at_call_time",
	"identities",
	"egress",
	"requires_os_family",
	"isolation_scope",
	"confined_to_guest_call_path",
	"exclusive_admission",
	"min_cleanup",
	"resources",
	"env",
	NULL,
};

static const char *const rule_keys[] = {"host", "methods", NULL};
static const char *const output_keys[] = {"path", "media_type",	 "required",
					  "name", "disposition", NULL};
static const char *const resource_keys[] = {"memory_bytes", "pids_max", "cpu_millis",
					    "writable_bytes", NULL};

static void builder_freep(msb_spec_builder **b)
{
	msb_spec_builder_free(*b);
}

/* A string-valued enum field: absent or null leaves *present false. The
 * parser's refusal is prefixed with where the value was found. */
#define GET_ENUM(obj, key, where, parse, out, present, err)                                        \
	({                                                                                         \
		const char *_s = NULL;                                                             \
		int _r = msb__json_get_string((obj), (key), (where), &_s, (present), (err));       \
		if (_r == 0 && *(present)) {                                                       \
			_r = parse(_s, (out), (err));                                              \
			if (_r < 0)                                                                \
				msb_error_wrap((err), "%s.%s", (where), (key));                    \
		}                                                                                  \
		_r;                                                                                \
	})

static int load_limits(json_t *obj, const char *key, msb_transfer_limits *out, msb_error **err)
{
	json_t *o = NULL;
	bool present = false;
	int r = msb__json_get_object(obj, key, WHERE, &o, &present, err);
	if (r < 0 || !present)
		return r;
	_cleanup_free_ char *where = msb__asprintf(WHERE ".%s", key);
	if (!where)
		return msb__error_nomem(err);
	return msb_vocab__transfer_limits_from_json(o, where, out, err);
}

/* The resource limits: a key left out (or null) is 0, the backend's default;
 * the ranges are checked by build. */
static int load_resources(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	json_t *o = NULL;
	bool present = false;
	int r = msb__json_get_object(obj, "resources", WHERE, &o, &present, err);
	if (r < 0 || !present)
		return r;
	const char *where = WHERE ".resources";
	if ((r = msb__json_check_keys(o, resource_keys, where, err)) < 0)
		return r;
	uint64_t v[4] = {0};
	for (size_t i = 0; i < 4; i++)
		if ((r = msb__json_get_u64(o, resource_keys[i], where, &v[i], NULL, err)) < 0)
			return r;
	msb_spec_builder_set_memory_bytes(b, v[0]);
	msb_spec_builder_set_pids_max(b, v[1]);
	msb_spec_builder_set_cpu_millis(b, v[2]);
	msb_spec_builder_set_writable_bytes(b, v[3]);
	return 0;
}

static int load_egress_allow(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	json_t *arr = json_object_get(obj, "egress_allow");
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return msb_error_set(err, MSB_E_TYPE,
				     WHERE ".egress_allow: must be a list of hosts and rules");
	size_t i;
	json_t *e;
	json_array_foreach (arr, i, e) {
		_cleanup_free_ char *where = msb__asprintf(WHERE ".egress_allow[%zu]", i);
		if (!where)
			return msb__error_nomem(err);
		if (json_is_string(e)) {
			if (strlen(json_string_value(e)) != json_string_length(e))
				return msb_error_set(err, MSB_E_VALUE, "%s: must not contain NUL",
						     where);
			msb_spec_builder_add_egress_host(b, json_string_value(e));
			continue;
		}
		if (!json_is_object(e))
			return msb_error_set(
				err, MSB_E_TYPE,
				"%s: must be a host string or a {host, methods} object", where);
		int r = msb__json_check_keys(e, rule_keys, where, err);
		if (r < 0)
			return r;
		const char *host = NULL;
		bool has_host = false;
		r = msb__json_get_string(e, "host", where, &host, &has_host, err);
		if (r < 0)
			return r;
		if (!has_host)
			return msb_error_set(err, MSB_E_VALUE, "%s: a rule needs a `host`", where);
		_cleanup_free_ const char **methods = NULL;
		size_t n = 0;
		bool has_methods = false;
		r = msb__json_get_string_array(e, "methods", where, &methods, &n, &has_methods,
					       err);
		if (r < 0)
			return r;
		/* methods absent or null: every method, a bare host after build. */
		msb_spec_builder_add_egress_rule(b, host, has_methods ? methods : NULL, n);
	}
	return 0;
}

/* An object of strings (`labels`, `env`) into the builder's map. */
static int load_map(json_t *obj, const char *key, msb_spec_builder *b,
		    void (*set)(msb_spec_builder *, const char *, const char *), msb_error **err)
{
	json_t *o = NULL;
	bool present = false;
	int r = msb__json_get_object(obj, key, WHERE, &o, &present, err);
	if (r < 0 || !present)
		return r;
	const char *name;
	json_t *v;
	json_object_foreach (o, name, v) {
		if (!json_is_string(v))
			return msb_error_set(err, MSB_E_TYPE, WHERE ".%s.%s: must be a string", key,
					     name);
		if (strlen(json_string_value(v)) != json_string_length(v))
			return msb_error_set(err, MSB_E_VALUE, WHERE ".%s.%s: must not contain NUL",
					     key, name);
		set(b, name, json_string_value(v));
	}
	return 0;
}

static int load_declared_outputs(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	json_t *arr = json_object_get(obj, "declared_outputs");
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return msb_error_set(err, MSB_E_TYPE,
				     WHERE ".declared_outputs: must be a list of objects");
	size_t i;
	json_t *e;
	json_array_foreach (arr, i, e) {
		_cleanup_free_ char *where = msb__asprintf(WHERE ".declared_outputs[%zu]", i);
		if (!where)
			return msb__error_nomem(err);
		if (!json_is_object(e))
			return msb_error_set(err, MSB_E_TYPE, "%s: must be an object", where);
		int r = msb__json_check_keys(e, output_keys, where, err);
		if (r < 0)
			return r;
		msb_declared_output o = MSB_DECLARED_OUTPUT_INIT;
		bool present = false;
		if ((r = msb__json_get_string(e, "path", where, &o.path, &present, err)) < 0)
			return r;
		if (!present)
			return msb_error_set(err, MSB_E_VALUE,
					     "%s: a declared output needs a `path`", where);
		if ((r = msb__json_get_string(e, "media_type", where, &o.media_type, NULL, err)) <
			    0 ||
		    (r = msb__json_get_bool(e, "required", where, &o.required, NULL, err)) < 0 ||
		    (r = msb__json_get_string(e, "name", where, &o.name, NULL, err)) < 0 ||
		    (r = GET_ENUM(e, "disposition", where, msb_output_disposition_parse,
				  &o.disposition, &present, err)) < 0)
			return r;
		msb_spec_builder_add_declared_output(b, &o);
	}
	return 0;
}

static int load_requires(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	_cleanup_free_ const char **names = NULL;
	size_t n = 0;
	bool present = false;
	int r = msb__json_get_string_array(obj, "requires", WHERE, &names, &n, &present, err);
	if (r < 0 || !present)
		return r;
	msb_capset set;
	r = msb_vocab__capset_parse(names, n, WHERE ".requires", &set, err);
	if (r < 0)
		return r;
	msb_spec_builder_set_requires(b, set);
	return 0;
}

static int load_identities(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	_cleanup_free_ const char **names = NULL;
	size_t n = 0;
	bool present = false;
	int r = msb__json_get_string_array(obj, "identities", WHERE, &names, &n, &present, err);
	if (r < 0 || !present)
		return r;
	msb_identity_set set = 0;
	for (size_t i = 0; i < n; i++) {
		msb_identity id;
		r = msb_identity_parse(names[i], &id, err);
		if (r < 0) {
			msb_error_wrap(err, WHERE ".identities");
			return r;
		}
		set |= (msb_identity_set)id;
	}
	msb_spec_builder_set_identities(b, set);
	return 0;
}

/* Absent keeps the default; null is the opt-in to backend allocation
 * (3.17); a string is the guest-native path, taken as is (3.18). */
static int load_work_dir(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	json_t *v = json_object_get(obj, "work_dir");
	if (!v)
		return 0;
	if (json_is_null(v)) {
		msb_spec_builder_set_work_dir(b, NULL);
		return 0;
	}
	const char *s = NULL;
	int r = msb__json_get_string(obj, "work_dir", WHERE, &s, NULL, err);
	if (r < 0)
		return r;
	msb_spec_builder_set_work_dir(b, s);
	return 0;
}

static int load_scalars(json_t *obj, msb_spec_builder *b, msb_error **err)
{
	const char *s = NULL;
	bool present = false;
	bool flag = false;
	int r;

	if ((r = msb__json_get_string(obj, "kind", WHERE, &s, &present, err)) < 0)
		return r;
	msb_spec_builder_set_kind(b, present ? s : NULL);
	if ((r = msb__json_get_string(obj, "image", WHERE, &s, &present, err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_image(b, s);
	if ((r = msb__json_get_string(obj, "image_id", WHERE, &s, &present, err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_image_id(b, s);

	msb_egress egress;
	if ((r = GET_ENUM(obj, "egress", WHERE, msb_egress_parse, &egress, &present, err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_egress(b, egress);
	msb_isolation floor;
	if ((r = GET_ENUM(obj, "min_isolation", WHERE, msb_isolation_parse, &floor, &present,
			  err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_min_isolation(b, floor);
	msb_os_family family;
	if ((r = GET_ENUM(obj, "requires_os_family", WHERE, msb_os_family_parse, &family, &present,
			  err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_requires_os_family(b, family);
	msb_isolation_scope scope;
	if ((r = GET_ENUM(obj, "isolation_scope", WHERE, msb_isolation_scope_parse, &scope,
			  &present, err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_isolation_scope(b, scope);
	msb_cleanup rung;
	if ((r = GET_ENUM(obj, "min_cleanup", WHERE, msb_cleanup_parse, &rung, &present, err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_min_cleanup(b, rung);

	if ((r = msb__json_get_bool(obj, "outputs_named_at_call_time", WHERE, &flag, &present,
				    err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_outputs_named_at_call_time(b, flag);
	if ((r = msb__json_get_bool(obj, "confined_to_guest_call_path", WHERE, &flag, &present,
				    err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_confined_to_guest_call_path(b, flag);
	if ((r = msb__json_get_bool(obj, "exclusive_admission", WHERE, &flag, &present, err)) < 0)
		return r;
	if (present)
		msb_spec_builder_set_exclusive_admission(b, flag);
	return 0;
}

int msb_spec_from_json(const char *json, size_t len, msb_spec **out, msb_error **err)
{
	json_auto_t *obj = NULL;
	int r = msb__json_load_object(json, len, WHERE, &obj, err);
	if (r < 0)
		return r;
	if ((r = msb__json_check_keys(obj, spec_keys, WHERE, err)) < 0)
		return r;

	_cleanup_(builder_freep) msb_spec_builder *b = msb_spec_builder_new(NULL);
	if (!b)
		return msb__error_nomem(err);

	msb_transfer_limits files_in = MSB_DEFAULT_TRANSFER_LIMITS;
	msb_transfer_limits files_out = MSB_DEFAULT_TRANSFER_LIMITS;
	if ((r = load_scalars(obj, b, err)) < 0 || (r = load_work_dir(obj, b, err)) < 0 ||
	    (r = load_egress_allow(obj, b, err)) < 0 ||
	    (r = load_map(obj, "labels", b, msb_spec_builder_set_label, err)) < 0 ||
	    (r = load_map(obj, "env", b, msb_spec_builder_set_env, err)) < 0 ||
	    (r = load_requires(obj, b, err)) < 0 || (r = load_identities(obj, b, err)) < 0 ||
	    (r = load_declared_outputs(obj, b, err)) < 0 || (r = load_resources(obj, b, err)) < 0 ||
	    (r = load_limits(obj, "files_in", &files_in, err)) < 0 ||
	    (r = load_limits(obj, "files_out", &files_out, err)) < 0)
		return r;
	msb_spec_builder_set_files_in(b, files_in);
	msb_spec_builder_set_files_out(b, files_out);

	msb_spec *s = NULL;
	r = msb_spec_build(b, &s, err);
	if (r < 0) {
		msb_error_wrap(err, WHERE);
		return r;
	}
	*out = s;
	return 0;
}

/* ---- to JSON ---------------------------------------------------------------- */

/* A string (NULL → null). Returns NULL only when `s` is not valid UTF-8 or
 * allocation failed: put() refuses naming the field. */
static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* Set obj[key] = v, refusing when v could not be made. */
static int put(json_t *obj, const char *key, json_t *v, msb_error **err)
{
	if (!v)
		return msb_error_set(err, MSB_E_VALUE,
				     WHERE ".%s: cannot be written as JSON (a string that is not "
					   "UTF-8, or an integer above 2^63-1)",
				     key);
	if (json_object_set_new(obj, key, v) < 0)
		return msb__error_nomem(err);
	return 0;
}

static json_t *jlimits_of(msb_transfer_limits l)
{
	return msb_vocab__transfer_limits_to_json(&l);
}

static json_t *jresources(const msb_spec *s)
{
	/* Build refused anything above 2^50, so every value is a JSON integer. */
	return json_pack("{sIsIsIsI}", "memory_bytes", (json_int_t)msb_spec_memory_bytes(s),
			 "pids_max", (json_int_t)msb_spec_pids_max(s), "cpu_millis",
			 (json_int_t)msb_spec_cpu_millis(s), "writable_bytes",
			 (json_int_t)msb_spec_writable_bytes(s));
}

/* Set members in declaration order, by their names. */
static json_t *jcapset(msb_capset set)
{
	json_t *a = json_array();
	for (unsigned bit = 0; a && bit < 32; bit++) {
		const char *name = msb_capability_name((msb_capability)(1u << bit));
		if (name && (set & (1u << bit)) &&
		    json_array_append_new(a, json_string(name)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *jidentities(msb_identity_set set)
{
	json_t *a = json_array();
	for (unsigned bit = 0; a && bit < 32; bit++) {
		const char *name = msb_identity_name((msb_identity)(1u << bit));
		if (name && (set & (1u << bit)) &&
		    json_array_append_new(a, json_string(name)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *jegress_allow(const msb_spec *s)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < msb_spec_egress_allow_count(s); i++) {
		const char *host;
		const char *const *methods;
		size_t n;
		msb_spec_egress_entry(s, i, &host, &methods, &n);
		json_t *e = NULL;
		if (!methods) {
			e = json_string(host);
		} else {
			json_t *m = json_array();
			for (size_t j = 0; m && j < n; j++) {
				if (json_array_append_new(m, json_string(methods[j])) < 0) {
					json_decref(m);
					m = NULL;
				}
			}
			json_t *h = json_string(host);
			if (m && h)
				e = json_pack("{soso}", "host", h, "methods", m);
			else {
				json_decref(m);
				json_decref(h);
			}
		}
		if (!e || json_array_append_new(a, e) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* labels or env, as an object of strings. */
static json_t *jmap(const msb_spec *s, size_t n,
		    void (*at)(const msb_spec *, size_t, const char **, const char **))
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < n; i++) {
		const char *k, *v;
		at(s, i, &k, &v);
		json_t *jv = json_string(v);
		if (!jv || json_object_set_new(o, k, jv) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *joutputs(const msb_spec *s)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < msb_spec_declared_output_count(s); i++) {
		const msb_declared_output *d = msb_spec_declared_output(s, i);
		json_t *path = jstr(d->path), *media = jstr(d->media_type), *name = jstr(d->name);
		json_t *e = NULL;
		if (path && media && name)
			e = json_pack("{sOsOsbsOss}", "path", path, "media_type", media, "required",
				      d->required, "name", name, "disposition",
				      msb_output_disposition_name(d->disposition));
		json_decref(path);
		json_decref(media);
		json_decref(name);
		if (!e || json_array_append_new(a, e) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int msb_spec_to_json(const msb_spec *s, char **out, msb_error **err)
{
	if (!s)
		return msb_error_set(err, MSB_E_VALUE, "no spec given");
	json_auto_t *o = json_object();
	if (!o)
		return msb__error_nomem(err);

	msb_isolation floor;
	msb_os_family family;
	msb_cleanup rung;
	bool has_floor = msb_spec_min_isolation(s, &floor);
	bool has_family = msb_spec_requires_os_family(s, &family);
	bool has_rung = msb_spec_min_cleanup(s, &rung);
	int r;
	if ((r = put(o, "kind", jstr(msb_spec_kind(s)), err)) < 0 ||
	    (r = put(o, "image", jstr(msb_spec_image(s)), err)) < 0 ||
	    (r = put(o, "image_id", jstr(msb_spec_image_id(s)), err)) < 0 ||
	    (r = put(o, "egress_allow", jegress_allow(s), err)) < 0 ||
	    (r = put(o, "work_dir", jstr(msb_spec_work_dir(s)), err)) < 0 ||
	    (r = put(o, "labels", jmap(s, msb_spec_label_count(s), msb_spec_label), err)) < 0 ||
	    (r = put(o, "requires", jcapset(msb_spec_requires(s)), err)) < 0 ||
	    (r = put(o, "min_isolation", jstr(has_floor ? msb_isolation_name(floor) : NULL), err)) <
		    0 ||
	    (r = put(o, "declared_outputs", joutputs(s), err)) < 0 ||
	    (r = put(o, "files_in", jlimits_of(msb_spec_files_in(s)), err)) < 0 ||
	    (r = put(o, "files_out", jlimits_of(msb_spec_files_out(s)), err)) < 0 ||
	    (r = put(o, "outputs_named_at_call_time",
		     json_boolean(msb_spec_outputs_named_at_call_time(s)), err)) < 0 ||
	    (r = put(o, "identities", jidentities(msb_spec_identities(s)), err)) < 0 ||
	    (r = put(o, "egress", jstr(msb_egress_name(msb_spec_egress(s))), err)) < 0 ||
	    (r = put(o, "requires_os_family", jstr(has_family ? msb_os_family_name(family) : NULL),
		     err)) < 0 ||
	    (r = put(o, "isolation_scope",
		     jstr(msb_isolation_scope_name(msb_spec_isolation_scope(s))), err)) < 0 ||
	    (r = put(o, "confined_to_guest_call_path",
		     json_boolean(msb_spec_confined_to_guest_call_path(s)), err)) < 0 ||
	    (r = put(o, "exclusive_admission", json_boolean(msb_spec_exclusive_admission(s)),
		     err)) < 0 ||
	    (r = put(o, "min_cleanup", jstr(has_rung ? msb_cleanup_name(rung) : NULL), err)) < 0 ||
	    (r = put(o, "resources", jresources(s), err)) < 0)
		return r;
	/* env only when set: documents without it read as they always did */
	if (msb_spec_env_count(s) > 0 &&
	    (r = put(o, "env", jmap(s, msb_spec_env_count(s), msb_spec_env), err)) < 0)
		return r;

	char *text = msb__json_dump(o);
	if (!text)
		return msb__error_nomem(err);
	*out = text;
	return 0;
}
