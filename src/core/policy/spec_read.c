/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a built spec (checklist section 3): its getters and value
 * equality. Built by src/core/policy/spec.c.
 */
#include <msb/spec.h>

#include "core/policy/spec_int.h"
#include "util/util.h"

/* ---- getters ------------------------------------------------------------- */

const char *msb_spec_kind(const msb_spec *s)
{
	return s ? s->f.kind : NULL;
}

const char *msb_spec_image(const msb_spec *s)
{
	return s ? s->f.image : NULL;
}

const char *msb_spec_image_id(const msb_spec *s)
{
	return s ? s->f.image_id : NULL;
}

size_t msb_spec_egress_allow_count(const msb_spec *s)
{
	return s ? s->n_egress : 0;
}

void msb_spec_egress_entry(const msb_spec *s, size_t i, const char **host,
			   const char *const **methods, size_t *n_methods)
{
	const struct egress_entry *e = s && i < s->n_egress ? &s->egress[i] : NULL;
	if (host)
		*host = e ? e->host : NULL;
	if (methods)
		*methods = e && e->scoped ? (const char *const *)e->methods : NULL;
	if (n_methods)
		*n_methods = e && e->scoped ? e->n_methods : 0;
}

const char *msb_spec_work_dir(const msb_spec *s)
{
	return s ? s->f.work_dir : NULL;
}

size_t msb_spec_label_count(const msb_spec *s)
{
	return s ? s->f.n_labels : 0;
}

void msb_spec_label(const msb_spec *s, size_t i, const char **key, const char **value)
{
	const struct label *l = s && i < s->f.n_labels ? &s->f.labels[i] : NULL;
	if (key)
		*key = l ? l->key : NULL;
	if (value)
		*value = l ? l->value : NULL;
}

const char *msb_spec_label_get(const msb_spec *s, const char *key)
{
	if (!s || !key)
		return NULL;
	size_t lo = 0, hi = s->f.n_labels;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->f.labels[mid].key, key);
		if (c == 0)
			return s->f.labels[mid].value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

msb_capset msb_spec_requires(const msb_spec *s)
{
	return s ? s->f.requires : 0;
}

msb_capset msb_spec_required_capabilities(const msb_spec *s)
{
	return s ? s->required : 0;
}

bool msb_spec_min_isolation(const msb_spec *s, msb_isolation *out)
{
	if (!s || !s->f.has_min_isolation)
		return false;
	if (out)
		*out = s->f.min_isolation;
	return true;
}

size_t msb_spec_declared_output_count(const msb_spec *s)
{
	return s ? s->f.n_outputs : 0;
}

const msb_declared_output *msb_spec_declared_output(const msb_spec *s, size_t i)
{
	return s && i < s->f.n_outputs ? &s->f.outputs[i] : NULL;
}

msb_transfer_limits msb_spec_files_in(const msb_spec *s)
{
	return s ? s->f.files_in : MSB_DEFAULT_TRANSFER_LIMITS;
}

msb_transfer_limits msb_spec_files_out(const msb_spec *s)
{
	return s ? s->f.files_out : MSB_DEFAULT_TRANSFER_LIMITS;
}

bool msb_spec_outputs_named_at_call_time(const msb_spec *s)
{
	return s && s->f.outputs_named_at_call_time;
}

msb_identity_set msb_spec_identities(const msb_spec *s)
{
	return s ? s->f.identities : 0;
}

msb_egress msb_spec_egress(const msb_spec *s)
{
	return s ? s->f.egress : MSB_EGRESS_CLOSED;
}

bool msb_spec_requires_os_family(const msb_spec *s, msb_os_family *out)
{
	if (!s || !s->f.has_os_family)
		return false;
	if (out)
		*out = s->f.os_family;
	return true;
}

msb_isolation_scope msb_spec_isolation_scope(const msb_spec *s)
{
	return s ? s->f.scope : MSB_SCOPE_CONVERSATION;
}

bool msb_spec_confined_to_guest_call_path(const msb_spec *s)
{
	return s && s->f.confined;
}

bool msb_spec_exclusive_admission(const msb_spec *s)
{
	return s && s->f.exclusive;
}

bool msb_spec_min_cleanup(const msb_spec *s, msb_cleanup *out)
{
	if (!s || !s->f.has_min_cleanup)
		return false;
	if (out)
		*out = s->f.min_cleanup;
	return true;
}

uint64_t msb_spec_memory_bytes(const msb_spec *s)
{
	return s ? s->f.memory_bytes : 0;
}

uint64_t msb_spec_pids_max(const msb_spec *s)
{
	return s ? s->f.pids_max : 0;
}

uint64_t msb_spec_cpu_millis(const msb_spec *s)
{
	return s ? s->f.cpu_millis : 0;
}

uint64_t msb_spec_writable_bytes(const msb_spec *s)
{
	return s ? s->f.writable_bytes : 0;
}

/* ---- equality ------------------------------------------------------------ */

static bool limits_eq(const msb_transfer_limits *a, const msb_transfer_limits *b)
{
	return a->max_bytes_per_file == b->max_bytes_per_file &&
	       a->max_total_bytes == b->max_total_bytes && a->max_files == b->max_files;
}

static bool entry_eq(const struct egress_entry *a, const struct egress_entry *b)
{
	if (strcmp(a->host, b->host) != 0 || a->scoped != b->scoped || a->n_methods != b->n_methods)
		return false;
	for (size_t i = 0; i < a->n_methods; i++)
		if (strcmp(a->methods[i], b->methods[i]) != 0)
			return false;
	return true;
}

static bool output_eq(const msb_declared_output *a, const msb_declared_output *b)
{
	return msb__streq_null(a->path, b->path) && msb__streq_null(a->media_type, b->media_type) &&
	       a->required == b->required && msb__streq_null(a->name, b->name) &&
	       a->disposition == b->disposition;
}

/* Value equality, field by field: the allowlist and the declared outputs are
 * ordered tuples, labels a map (stored sorted). */
bool msb_spec_equal(const msb_spec *a, const msb_spec *b)
{
	if (a == b)
		return true;
	if (!a || !b)
		return false;
	const struct spec_fields *x = &a->f, *y = &b->f;
	if (!msb__streq_null(x->kind, y->kind) || !msb__streq_null(x->image, y->image) ||
	    !msb__streq_null(x->image_id, y->image_id) ||
	    !msb__streq_null(x->work_dir, y->work_dir))
		return false;
	if (a->n_egress != b->n_egress)
		return false;
	for (size_t i = 0; i < a->n_egress; i++)
		if (!entry_eq(&a->egress[i], &b->egress[i]))
			return false;
	if (x->n_labels != y->n_labels)
		return false;
	for (size_t i = 0; i < x->n_labels; i++)
		if (strcmp(x->labels[i].key, y->labels[i].key) != 0 ||
		    strcmp(x->labels[i].value, y->labels[i].value) != 0)
			return false;
	if (x->requires != y->requires || a->required != b->required)
		return false;
	if (x->has_min_isolation != y->has_min_isolation ||
	    (x->has_min_isolation && x->min_isolation != y->min_isolation))
		return false;
	if (x->n_outputs != y->n_outputs)
		return false;
	for (size_t i = 0; i < x->n_outputs; i++)
		if (!output_eq(&x->outputs[i], &y->outputs[i]))
			return false;
	if (!limits_eq(&x->files_in, &y->files_in) || !limits_eq(&x->files_out, &y->files_out))
		return false;
	if (x->outputs_named_at_call_time != y->outputs_named_at_call_time ||
	    x->identities != y->identities || x->egress != y->egress)
		return false;
	if (x->has_os_family != y->has_os_family ||
	    (x->has_os_family && x->os_family != y->os_family))
		return false;
	if (x->scope != y->scope || x->confined != y->confined || x->exclusive != y->exclusive)
		return false;
	if (x->has_min_cleanup != y->has_min_cleanup ||
	    (x->has_min_cleanup && x->min_cleanup != y->min_cleanup))
		return false;
	if (x->memory_bytes != y->memory_bytes || x->pids_max != y->pids_max ||
	    x->cpu_millis != y->cpu_millis || x->writable_bytes != y->writable_bytes)
		return false;
	return true;
}
