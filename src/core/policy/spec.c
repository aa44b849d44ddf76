/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SandboxSpec, EgressRule and DeclaredOutput (checklist section 3).
 *
 * The builder records what the caller said, raw; msb_spec_build() validates
 * and normalises it into an immutable, reference-counted spec. Setters never
 * fail: a bad value is kept as given and refused at build, an allocation
 * failure or a NULL where a string is required is latched. Because every rule
 * runs at build, msb_spec_builder_from() + setters + build is the
 * copy-with-changes constructor that re-derives everything (3.14, 3.28).
 * The built spec's getters and equality are in spec_read.c.
 */
#include <msb/spec.h>

#include "core/policy/spec_int.h"
#include "util/util.h"

/* ---- small helpers ------------------------------------------------------ */

/* ASCII case-insensitive equality: hosts compare this way (3.9), without
 * depending on the process locale. */
static bool host_eq(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
		if (ca >= 'A' && ca <= 'Z')
			ca = (unsigned char)(ca - 'A' + 'a');
		if (cb >= 'A' && cb <= 'Z')
			cb = (unsigned char)(cb - 'A' + 'a');
		if (ca != cb)
			return false;
		if (!ca)
			return true;
	}
}

static void entries_free(struct egress_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].host);
		for (size_t j = 0; j < e[i].n_methods; j++)
			free(e[i].methods[j]);
		free(e[i].methods);
	}
	free(e);
}

static void outputs_free(msb_declared_output *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((char *)o[i].path);
		free((char *)o[i].media_type);
		free((char *)o[i].name);
	}
	free(o);
}

static void labels_free(struct label *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(l[i].key);
		free(l[i].value);
	}
	free(l);
}

static void fields_free(struct spec_fields *f)
{
	free(f->kind);
	free(f->image);
	free(f->image_id);
	free(f->work_dir);
	labels_free(f->labels, f->n_labels);
	labels_free(f->env, f->n_env);
	outputs_free(f->outputs, f->n_outputs);
	memset(f, 0, sizeof(*f));
}

/* strdup that tells a NULL input (fine) from an allocation failure. */
static int dup_str(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static int output_copy(msb_declared_output *dst, const msb_declared_output *src)
{
	char *path = NULL, *media = NULL, *name = NULL;
	if (dup_str(src->path, &path) < 0 || dup_str(src->media_type, &media) < 0 ||
	    dup_str(src->name, &name) < 0) {
		free(path);
		free(media);
		free(name);
		return -ENOMEM;
	}
	*dst = *src;
	dst->path = path;
	dst->media_type = media;
	dst->name = name;
	return 0;
}

static int entry_copy(struct egress_entry *dst, const struct egress_entry *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->scoped = src->scoped;
	if (dup_str(src->host, &dst->host) < 0)
		return -ENOMEM;
	if (src->n_methods > 0) {
		dst->methods = calloc(src->n_methods, sizeof(char *));
		if (!dst->methods)
			goto fail;
		/* n_methods counts copies made, so a partial copy frees cleanly. */
		for (size_t i = 0; i < src->n_methods; i++) {
			if (dup_str(src->methods[i], &dst->methods[i]) < 0)
				goto fail;
			dst->n_methods = i + 1;
		}
	}
	return 0;
fail:
	free(dst->host);
	for (size_t i = 0; i < dst->n_methods; i++)
		free(dst->methods[i]);
	free(dst->methods);
	memset(dst, 0, sizeof(*dst));
	return -ENOMEM;
}

static int entries_copy(const struct egress_entry *src, size_t n, struct egress_entry **out)
{
	*out = NULL;
	if (n == 0)
		return 0;
	struct egress_entry *e = calloc(n, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (entry_copy(&e[i], &src[i]) < 0) {
			entries_free(e, i);
			return -ENOMEM;
		}
	}
	*out = e;
	return 0;
}

/* A copy of a name -> value map; on failure *dst holds what was copied. */
static int map_copy(struct label **dst, size_t *n_dst, const struct label *src, size_t n)
{
	if (n == 0)
		return 0;
	if (!(*dst = calloc(n, sizeof(struct label))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		*n_dst = i + 1;
		if (dup_str(src[i].key, &(*dst)[i].key) < 0 ||
		    dup_str(src[i].value, &(*dst)[i].value) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Deep copy of every field. On failure dst holds what was copied so far and
 * the caller frees it with fields_free(). */
static int fields_copy(struct spec_fields *dst, const struct spec_fields *src)
{
	*dst = *src;
	dst->kind = dst->image = dst->image_id = dst->work_dir = NULL;
	dst->labels = dst->env = NULL;
	dst->n_labels = dst->n_env = 0;
	dst->outputs = NULL;
	dst->n_outputs = 0;
	if (dup_str(src->kind, &dst->kind) < 0 || dup_str(src->image, &dst->image) < 0 ||
	    dup_str(src->image_id, &dst->image_id) < 0 ||
	    dup_str(src->work_dir, &dst->work_dir) < 0)
		return -ENOMEM;
	if (map_copy(&dst->labels, &dst->n_labels, src->labels, src->n_labels) < 0 ||
	    map_copy(&dst->env, &dst->n_env, src->env, src->n_env) < 0)
		return -ENOMEM;
	if (src->n_outputs > 0) {
		dst->outputs = calloc(src->n_outputs, sizeof(msb_declared_output));
		if (!dst->outputs)
			return -ENOMEM;
		for (size_t i = 0; i < src->n_outputs; i++) {
			if (output_copy(&dst->outputs[i], &src->outputs[i]) < 0)
				return -ENOMEM;
			dst->n_outputs = i + 1;
		}
	}
	return 0;
}

/* ---- builder ------------------------------------------------------------- */

static void latch_misuse(msb_spec_builder *b, const char *fmt, ...) MSB_PRINTF(2, 3);

static void latch_misuse(msb_spec_builder *b, const char *fmt, ...)
{
	if (b->misuse)
		return;
	va_list ap;
	va_start(ap, fmt);
	b->misuse = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!b->misuse)
		b->oom = true;
}

static void set_str(msb_spec_builder *b, char **field, const char *value)
{
	char *copy;
	if (dup_str(value, &copy) < 0) {
		b->oom = true;
		return;
	}
	free(*field);
	*field = copy;
}

msb_spec_builder *msb_spec_builder_new(const char *kind)
{
	msb_spec_builder *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	const msb_transfer_limits def = MSB_DEFAULT_TRANSFER_LIMITS_INIT;
	b->f.requires = MSB_DEFAULT_CAPABILITIES;
	b->f.files_in = def;
	b->f.files_out = def;
	b->f.egress = MSB_EGRESS_CLOSED;
	b->f.scope = MSB_SCOPE_CONVERSATION;
	if (dup_str(kind, &b->f.kind) < 0 || dup_str(MSB_DEFAULT_WORK_DIR, &b->f.work_dir) < 0) {
		msb_spec_builder_free(b);
		return NULL;
	}
	return b;
}

msb_spec_builder *msb_spec_builder_from(const msb_spec *spec)
{
	if (!spec)
		return NULL;
	msb_spec_builder *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	if (fields_copy(&b->f, &spec->f) < 0 ||
	    entries_copy(spec->egress, spec->n_egress, &b->egress) < 0) {
		msb_spec_builder_free(b);
		return NULL;
	}
	b->n_egress = spec->n_egress;
	return b;
}

void msb_spec_builder_free(msb_spec_builder *b)
{
	if (!b)
		return;
	fields_free(&b->f);
	entries_free(b->egress, b->n_egress);
	free(b->misuse);
	free(b);
}

void msb_spec_builder_set_kind(msb_spec_builder *b, const char *kind)
{
	if (b)
		set_str(b, &b->f.kind, kind);
}

void msb_spec_builder_set_image(msb_spec_builder *b, const char *image)
{
	if (b)
		set_str(b, &b->f.image, image);
}

void msb_spec_builder_set_image_id(msb_spec_builder *b, const char *image_id)
{
	if (b)
		set_str(b, &b->f.image_id, image_id);
}

void msb_spec_builder_clear_egress_allow(msb_spec_builder *b)
{
	if (!b)
		return;
	entries_free(b->egress, b->n_egress);
	b->egress = NULL;
	b->n_egress = 0;
}

static void add_entry(msb_spec_builder *b, const char *host, const char *const *methods,
		      size_t n_methods)
{
	if (!b)
		return;
	struct egress_entry src = {
		.host = (char *)host,
		.scoped = methods != NULL,
		.methods = (char **)methods,
		.n_methods = methods ? n_methods : 0,
	};
	struct egress_entry *grown =
		msb__reallocarray(b->egress, b->n_egress + 1, sizeof(struct egress_entry));
	if (!grown) {
		b->oom = true;
		return;
	}
	b->egress = grown;
	if (entry_copy(&b->egress[b->n_egress], &src) < 0) {
		b->oom = true;
		return;
	}
	b->n_egress++;
}

void msb_spec_builder_add_egress_host(msb_spec_builder *b, const char *host)
{
	add_entry(b, host, NULL, 0);
}

void msb_spec_builder_add_egress_rule(msb_spec_builder *b, const char *host,
				      const char *const *methods, size_t n_methods)
{
	add_entry(b, host, methods, n_methods);
}

void msb_spec_builder_set_work_dir(msb_spec_builder *b, const char *work_dir)
{
	if (b)
		set_str(b, &b->f.work_dir, work_dir);
}

/* Set key to value in a map kept sorted by key: lookups, equality and JSON
 * agree. `what` names the map, `entry` one of its entries, in a misuse. */
static void map_set(msb_spec_builder *b, struct label **map, size_t *n, const char *key,
		    const char *value, const char *what, const char *entry)
{
	if (!key) {
		latch_misuse(b, "%s: a %s needs a key", what, entry);
		return;
	}
	if (!value) {
		latch_misuse(b, "%s: %s `%s` has no value", what, entry, key);
		return;
	}
	size_t pos = 0;
	while (pos < *n && strcmp((*map)[pos].key, key) < 0)
		pos++;
	char *v;
	if (dup_str(value, &v) < 0) {
		b->oom = true;
		return;
	}
	if (pos < *n && strcmp((*map)[pos].key, key) == 0) {
		free((*map)[pos].value);
		(*map)[pos].value = v;
		return;
	}
	char *k;
	if (dup_str(key, &k) < 0) {
		free(v);
		b->oom = true;
		return;
	}
	struct label *grown = msb__reallocarray(*map, *n + 1, sizeof(struct label));
	if (!grown) {
		free(k);
		free(v);
		b->oom = true;
		return;
	}
	*map = grown;
	memmove(&grown[pos + 1], &grown[pos], (*n - pos) * sizeof(struct label));
	grown[pos].key = k;
	grown[pos].value = v;
	(*n)++;
}

void msb_spec_builder_set_label(msb_spec_builder *b, const char *key, const char *value)
{
	if (b)
		map_set(b, &b->f.labels, &b->f.n_labels, key, value, "labels", "label");
}

void msb_spec_builder_set_env(msb_spec_builder *b, const char *name, const char *value)
{
	if (b)
		map_set(b, &b->f.env, &b->f.n_env, name, value, "env", "variable");
}

void msb_spec_builder_clear_env(msb_spec_builder *b)
{
	if (!b)
		return;
	labels_free(b->f.env, b->f.n_env);
	b->f.env = NULL;
	b->f.n_env = 0;
}

void msb_spec_builder_clear_labels(msb_spec_builder *b)
{
	if (!b)
		return;
	labels_free(b->f.labels, b->f.n_labels);
	b->f.labels = NULL;
	b->f.n_labels = 0;
}

void msb_spec_builder_set_requires(msb_spec_builder *b, msb_capset requires)
{
	if (b)
	b->f.requires = requires;
}

void msb_spec_builder_set_min_isolation(msb_spec_builder *b, msb_isolation floor)
{
	if (!b)
		return;
	b->f.has_min_isolation = true;
	b->f.min_isolation = floor;
}

void msb_spec_builder_clear_min_isolation(msb_spec_builder *b)
{
	if (b)
		b->f.has_min_isolation = false;
}

void msb_spec_builder_add_declared_output(msb_spec_builder *b, const msb_declared_output *out)
{
	if (!b)
		return;
	if (!out) {
		latch_misuse(b, "declared_outputs: a declared output was missing");
		return;
	}
	msb_declared_output *grown =
		msb__reallocarray(b->f.outputs, b->f.n_outputs + 1, sizeof(msb_declared_output));
	if (!grown) {
		b->oom = true;
		return;
	}
	b->f.outputs = grown;
	if (output_copy(&grown[b->f.n_outputs], out) < 0) {
		b->oom = true;
		return;
	}
	b->f.n_outputs++;
}

void msb_spec_builder_clear_declared_outputs(msb_spec_builder *b)
{
	if (!b)
		return;
	outputs_free(b->f.outputs, b->f.n_outputs);
	b->f.outputs = NULL;
	b->f.n_outputs = 0;
}

void msb_spec_builder_set_files_in(msb_spec_builder *b, msb_transfer_limits limits)
{
	if (b)
		b->f.files_in = limits;
}

void msb_spec_builder_set_files_out(msb_spec_builder *b, msb_transfer_limits limits)
{
	if (b)
		b->f.files_out = limits;
}

void msb_spec_builder_set_outputs_named_at_call_time(msb_spec_builder *b, bool on)
{
	if (b)
		b->f.outputs_named_at_call_time = on;
}

void msb_spec_builder_set_identities(msb_spec_builder *b, msb_identity_set ids)
{
	if (b)
		b->f.identities = ids;
}

void msb_spec_builder_set_egress(msb_spec_builder *b, msb_egress mode)
{
	if (b)
		b->f.egress = mode;
}

void msb_spec_builder_set_requires_os_family(msb_spec_builder *b, msb_os_family family)
{
	if (!b)
		return;
	b->f.has_os_family = true;
	b->f.os_family = family;
}

void msb_spec_builder_clear_requires_os_family(msb_spec_builder *b)
{
	if (b)
		b->f.has_os_family = false;
}

void msb_spec_builder_set_isolation_scope(msb_spec_builder *b, msb_isolation_scope scope)
{
	if (b)
		b->f.scope = scope;
}

void msb_spec_builder_set_confined_to_guest_call_path(msb_spec_builder *b, bool on)
{
	if (b)
		b->f.confined = on;
}

void msb_spec_builder_set_exclusive_admission(msb_spec_builder *b, bool on)
{
	if (b)
		b->f.exclusive = on;
}

void msb_spec_builder_set_min_cleanup(msb_spec_builder *b, msb_cleanup rung)
{
	if (!b)
		return;
	b->f.has_min_cleanup = true;
	b->f.min_cleanup = rung;
}

void msb_spec_builder_clear_min_cleanup(msb_spec_builder *b)
{
	if (b)
		b->f.has_min_cleanup = false;
}

void msb_spec_builder_set_memory_bytes(msb_spec_builder *b, uint64_t bytes)
{
	if (b)
		b->f.memory_bytes = bytes;
}

void msb_spec_builder_set_pids_max(msb_spec_builder *b, uint64_t n)
{
	if (b)
		b->f.pids_max = n;
}

void msb_spec_builder_set_cpu_millis(msb_spec_builder *b, uint64_t millis)
{
	if (b)
		b->f.cpu_millis = millis;
}

void msb_spec_builder_set_writable_bytes(msb_spec_builder *b, uint64_t bytes)
{
	if (b)
		b->f.writable_bytes = bytes;
}

/* ---- build: validation and normalisation --------------------------------- */

/* One resource limit: 0 (the backend's default) or within [min, max]. */
static int check_resource(const char *name, uint64_t v, uint64_t min, uint64_t max,
			  const char *why_min, msb_error **err)
{
	if (v == 0 || (v >= min && v <= max))
		return 0;
	if (v < min)
		return msb_error_set(err, MSB_E_VALUE,
				     "resources.%s: %llu is below the minimum of %llu (%s); 0 "
				     "means the backend's default",
				     name, (unsigned long long)v, (unsigned long long)min, why_min);
	return msb_error_set(err, MSB_E_VALUE, "resources.%s: %llu is above the maximum of %llu",
			     name, (unsigned long long)v, (unsigned long long)max);
}

static int validate_resources(const struct spec_fields *f, msb_error **err)
{
	const struct {
		const char *name;
		uint64_t value, min, max;
		const char *why_min;
	} limits[] = {
		{"memory_bytes", f->memory_bytes, MSB_SPEC_MEMORY_BYTES_MIN,
		 MSB_SPEC_MEMORY_BYTES_MAX, "4 MiB: nothing runs in less"},
		{"pids_max", f->pids_max, MSB_SPEC_PIDS_MAX_MIN, MSB_SPEC_PIDS_MAX_MAX,
		 "the agent is one of them"},
		{"cpu_millis", f->cpu_millis, MSB_SPEC_CPU_MILLIS_MIN, MSB_SPEC_CPU_MILLIS_MAX,
		 "the kernel's smallest quota is 1 ms per 100 ms period"},
		{"writable_bytes", f->writable_bytes, MSB_SPEC_WRITABLE_BYTES_MIN,
		 MSB_SPEC_WRITABLE_BYTES_MAX, "1 MiB: the root needs room"},
	};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		int r = check_resource(limits[i].name, limits[i].value, limits[i].min,
				       limits[i].max, limits[i].why_min, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Scalar fields and declared outputs: every value a setter kept as given. */
static int validate_fields(const struct spec_fields *f, msb_error **err)
{
	if (!f->kind)
		return msb_error_set(err, MSB_E_VALUE,
				     "a spec needs a kind: it names the workload and is part of "
				     "the sandbox's identity");
	if (!*f->kind)
		return msb_error_set(err, MSB_E_VALUE, "a spec's kind must not be empty");
	if (!msb_egress_name(f->egress))
		return msb_error_set(err, MSB_E_VALUE,
				     "egress: %d is not an egress mode: expected one of "
				     "unrestricted, allowlist, closed",
				     (int)f->egress);
	if (f->has_min_isolation && msb_isolation_rank(f->min_isolation) < 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "min_isolation: %d is not a rung, not a valid Isolation: the "
				     "ladder is %s",
				     (int)f->min_isolation, msb_isolation_ladder());
	if (f->requires & ~(msb_capset)MSB_CAP_ALL)
		return msb_error_set(err, MSB_E_VALUE, "requires: bits 0x%x name no capability",
				     (unsigned)(f->requires & ~(msb_capset)MSB_CAP_ALL));
	if (f->identities & ~(msb_identity_set)(MSB_IDENTITY_APP | MSB_IDENTITY_USER))
		return msb_error_set(
			err, MSB_E_VALUE, "identities: bits 0x%x name no identity",
			(unsigned)(f->identities &
				   ~(msb_identity_set)(MSB_IDENTITY_APP | MSB_IDENTITY_USER)));
	if (f->has_os_family && !msb_os_family_name(f->os_family))
		return msb_error_set(err, MSB_E_VALUE,
				     "requires_os_family: %d is not an os family: expected one "
				     "of posix, windows",
				     (int)f->os_family);
	if (!msb_isolation_scope_name(f->scope))
		return msb_error_set(err, MSB_E_VALUE,
				     "isolation_scope: %d is not an isolation scope: expected one "
				     "of conversation, call",
				     (int)f->scope);
	if (f->has_min_cleanup && !msb_cleanup_name(f->min_cleanup))
		return msb_error_set(err, MSB_E_VALUE,
				     "min_cleanup: %d is not a cleanup rung: expected one of "
				     "reclaim, reset, dispose",
				     (int)f->min_cleanup);
	for (size_t i = 0; i < f->n_outputs; i++) {
		const msb_declared_output *o = &f->outputs[i];
		if (o->version != MSB_DECLARED_OUTPUT_VERSION)
			return msb_error_set(err, MSB_E_VALUE,
					     "declared_outputs[%zu]: version %u is not supported "
					     "(use MSB_DECLARED_OUTPUT_INIT)",
					     i, o->version);
		if (!o->path)
			return msb_error_set(
				err, MSB_E_VALUE,
				"declared_outputs[%zu]: a declared output needs a path", i);
		if (!msb_output_disposition_name(o->disposition))
			return msb_error_set(err, MSB_E_VALUE,
					     "declared_outputs[%zu]: %d is not an output "
					     "disposition: expected one of land, consume",
					     i, (int)o->disposition);
	}
	return validate_resources(f, err);
}

/* A lowercase letter is the one way a tchar string fails the method check
 * while still being a token: say which rule it broke. */
static bool token_but_lowercase(const char *m)
{
	bool lower = false;
	for (const unsigned char *p = (const unsigned char *)m; *p; p++) {
		if (*p >= 'a' && *p <= 'z') {
			lower = true;
			continue;
		}
		char up[2] = {(char)*p, '\0'};
		if (!msb_http_method_valid(up))
			return false;
	}
	return lower;
}

/* One rule's shape: host present, methods non-empty, uppercase tokens, no
 * repeats (3.6-3.8). */
static int validate_entry(const struct egress_entry *e, size_t i, msb_error **err)
{
	if (!e->host)
		return msb_error_set(err, MSB_E_VALUE, "egress_allow[%zu]: an entry needs a host",
				     i);
	if (!e->scoped)
		return 0;
	if (e->n_methods == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "egress_allow[%zu]: the rule for `%s` names no methods: omit "
				     "methods to allow every method",
				     i, e->host);
	for (size_t j = 0; j < e->n_methods; j++) {
		const char *m = e->methods[j];
		if (!m)
			return msb_error_set(err, MSB_E_VALUE,
					     "egress_allow[%zu]: the rule for `%s` has a missing "
					     "method",
					     i, e->host);
		if (!msb_http_method_valid(m)) {
			if (token_but_lowercase(m))
				return msb_error_set(err, MSB_E_VALUE,
						     "egress_allow[%zu]: method `%s` in the rule "
						     "for `%s` is not uppercase: a rule names a "
						     "verb, not a spelling",
						     i, m, e->host);
			return msb_error_set(err, MSB_E_VALUE,
					     "egress_allow[%zu]: method `%s` in the rule for `%s` "
					     "is not an HTTP token",
					     i, m, e->host);
		}
		for (size_t k = 0; k < j; k++)
			if (strcmp(e->methods[k], m) == 0)
				return msb_error_set(err, MSB_E_VALUE,
						     "egress_allow[%zu]: the rule for `%s` repeats "
						     "the method `%s`",
						     i, e->host, m);
	}
	return 0;
}

/* Order-insensitive; each side has no repeats once validated. */
static bool same_methods(const struct egress_entry *a, const struct egress_entry *b)
{
	if (a->n_methods != b->n_methods)
		return false;
	for (size_t i = 0; i < a->n_methods; i++) {
		bool found = false;
		for (size_t j = 0; j < b->n_methods && !found; j++)
			found = strcmp(a->methods[i], b->methods[j]) == 0;
		if (!found)
			return false;
	}
	return true;
}

/* "`h`" for a bare host, "`h (GET, POST)`" for a method-scoped rule. */
static void render_entry(msb_buf *buf, const struct egress_entry *e)
{
	msb__buf_printf(buf, "`%s", e->host);
	if (e->scoped) {
		msb__buf_puts(buf, " (");
		for (size_t i = 0; i < e->n_methods; i++) {
			if (i > 0)
				msb__buf_puts(buf, ", ");
			msb__buf_puts(buf, e->methods[i]);
		}
		msb__buf_puts(buf, ")");
	}
	msb__buf_puts(buf, "`");
}

static int conflict_error(const struct egress_entry *first, const struct egress_entry *second,
			  msb_error **err)
{
	msb_buf buf = MSB_BUF_INIT;
	render_entry(&buf, first);
	msb__buf_puts(&buf, " and ");
	render_entry(&buf, second);
	_cleanup_free_ char *both = msb__buf_steal_str(&buf);
	if (!both)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_VALUE,
			     "egress_allow names conflicting policies for one host: %s", both);
}

/*
 * Validate each entry, rewrite all-methods rules to bare hosts (3.10),
 * collapse equivalent entries onto the first spelling (3.11) and refuse
 * conflicting ones (3.12). The result is owned by the caller.
 */
static int normalise_egress(const struct egress_entry *in, size_t n, struct egress_entry **out,
			    size_t *n_out, msb_error **err)
{
	*out = NULL;
	*n_out = 0;
	for (size_t i = 0; i < n; i++) {
		int r = validate_entry(&in[i], i, err);
		if (r < 0)
			return r;
	}
	if (n == 0)
		return 0;
	struct egress_entry *kept = calloc(n, sizeof(*kept));
	if (!kept)
		return msb__error_nomem(err);
	size_t n_kept = 0;
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		const struct egress_entry *e = &in[i];
		const struct egress_entry *same_host = NULL;
		for (size_t j = 0; j < n_kept && !same_host; j++)
			if (host_eq(kept[j].host, e->host))
				same_host = &kept[j];
		if (same_host) {
			/* At most one kept entry per host: any other either
			 * collapsed into it or was refused. */
			if (!same_host->scoped && !e->scoped)
				continue;
			if (same_host->scoped && e->scoped && same_methods(same_host, e))
				continue;
			r = conflict_error(same_host, e, err);
			goto fail;
		}
		if (entry_copy(&kept[n_kept], e) < 0) {
			r = msb__error_nomem(err);
			goto fail;
		}
		n_kept++;
	}
	*out = kept;
	*n_out = n_kept;
	return 0;
fail:
	entries_free(kept, n_kept);
	return r;
}

/* egress_allow is the payload of an allowlist run (3.5). */
static int egress_mode_error(msb_egress mode, const struct egress_entry *e, size_t n,
			     msb_error **err)
{
	msb_buf buf = MSB_BUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			msb__buf_puts(&buf, ", ");
		render_entry(&buf, &e[i]);
	}
	_cleanup_free_ char *hosts = msb__buf_steal_str(&buf);
	if (!hosts)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_VALUE,
			     "egress_allow without egress `allowlist` is refused: egress is `%s` "
			     "but the spec names %s",
			     msb_egress_name(mode), hosts);
}

int msb_spec_build(const msb_spec_builder *b, msb_spec **out, msb_error **err)
{
	if (!b)
		return msb_error_set(err, MSB_E_VALUE, "no spec builder given");
	if (b->oom)
		return msb__error_nomem(err);
	if (b->misuse)
		return msb_error_set(err, MSB_E_VALUE, "%s", b->misuse);
	int r = validate_fields(&b->f, err);
	if (r < 0 || (r = msb__spec_env_validate(&b->f, err)) < 0)
		return r;

	struct egress_entry *egress = NULL;
	size_t n_egress = 0;
	r = normalise_egress(b->egress, b->n_egress, &egress, &n_egress, err);
	if (r < 0)
		return r;
	if (n_egress > 0 && b->f.egress != MSB_EGRESS_ALLOWLIST) {
		r = egress_mode_error(b->f.egress, egress, n_egress, err);
		entries_free(egress, n_egress);
		return r;
	}

	msb_spec *s = calloc(1, sizeof(*s));
	if (!s) {
		entries_free(egress, n_egress);
		return msb__error_nomem(err);
	}
	s->refs = 1;
	s->egress = egress;
	s->n_egress = n_egress;
	if (fields_copy(&s->f, &b->f) < 0) {
		msb_spec_unref(s);
		return msb__error_nomem(err);
	}
	/* Derived, never stored by the caller: recomputed on every build (3.13, 3.14). */
	s->required = s->f.requires;
	for (size_t i = 0; i < n_egress; i++)
		if (egress[i].scoped)
			s->required |= MSB_CAP_EGRESS_METHODS;
	*out = s;
	return 0;
}

/* ---- refcount ------------------------------------------------------------ */

msb_spec *msb_spec_ref(msb_spec *spec)
{
	if (spec)
		__atomic_add_fetch(&spec->refs, 1, __ATOMIC_RELAXED);
	return spec;
}

void msb_spec_unref(msb_spec *spec)
{
	if (!spec)
		return;
	if (__atomic_sub_fetch(&spec->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	fields_free(&spec->f);
	entries_free(spec->egress, spec->n_egress);
	free(spec);
}
