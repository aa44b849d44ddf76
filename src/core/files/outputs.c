/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collect_outputs (checklist 12.1-12.21, 12.30): the four phases, the caps,
 * the translation of the backend's vocabulary, and OutputsCollected.
 */
#include <inttypes.h>
#include <stdio.h>

#include <msb/outputs.h>

#include "core/core.h"
#include "util/fault.h"
#include "util/sha256.h"
#include "util/util.h"

/* One output of this collection, declared or named at call time. */
struct item {
	const msb_declared_output *decl;
	bool land;
	char *name;	   /* delivered spelling (LAND only) */
	const char *given; /* the name as declared (LAND only) */
	bool present;
	uint64_t size;
	uint8_t *data;
	size_t len;
};

static void items_free(struct item *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].data);
	}
	free(v);
}

void msb_landed_artifact_clear(msb_landed_artifact *a)
{
	if (!a)
		return;
	free(a->name);
	free(a->display);
	free(a->handle);
	free(a->media_type);
	memset(a, 0, sizeof(*a));
}

void msb_landed_artifacts_free(msb_landed_artifact *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		msb_landed_artifact_clear(&v[i]);
	free(v);
}

void msb_output_sink_free(msb_output_sink *sink)
{
	if (!sink)
		return;
	if (sink->free)
		sink->free(sink->userdata);
	free(sink);
}

/* ---- helper predicates (12.30) ------------------------------------------------------------ */

size_t msb_spec_landing_output_count(const msb_spec *spec)
{
	size_t n = 0;
	for (size_t i = 0; spec && i < msb_spec_declared_output_count(spec); i++)
		if (msb_spec_declared_output(spec, i)->disposition == MSB_DISPOSITION_LAND)
			n++;
	return n;
}

bool msb_spec_lands_artifacts(const msb_spec *spec)
{
	return spec && (msb_spec_landing_output_count(spec) > 0 ||
			msb_spec_outputs_named_at_call_time(spec));
}

int msb_missing_sink_refusal(const msb_spec *spec, const char *asked_by, msb_error **err)
{
	const char *first = NULL;
	for (size_t i = 0; spec && i < msb_spec_declared_output_count(spec); i++) {
		const msb_declared_output *o = msb_spec_declared_output(spec, i);
		if (o->disposition == MSB_DISPOSITION_LAND) {
			first = o->path;
			break;
		}
	}
	const char *who = asked_by ? asked_by : "collect_outputs";
	if (first)
		msb_error_set(err, MSB_E_OUTPUT_SINK_REQUIRED,
			      "%s: kind `%s` lands artifacts (`%s`) but no output sink was given",
			      who, spec ? msb_spec_kind(spec) : "?", first);
	else
		msb_error_set(err, MSB_E_OUTPUT_SINK_REQUIRED,
			      "%s: kind `%s` lands artifacts named at call time but no output sink "
			      "was given",
			      who, spec ? msb_spec_kind(spec) : "?");
	if (first)
		msb__error_set_path(err, first);
	return MSB_E_OUTPUT_SINK_REQUIRED;
}

/* ---- refusals ------------------------------------------------------------------------------ */

static int cap_exceeded(msb_error **err, const char *cap, const char *path, const char *why)
{
	msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED, "output `%s` exceeds %s: %s", path, cap,
		      why);
	msb__error_set_cap(err, cap, path);
	msb__error_set_path(err, path);
	return MSB_E_TRANSFER_CAP_EXCEEDED;
}

static int output_refusal(msb_error **err, int code, const char *path, const char *fmt, ...)
	MSB_PRINTF(4, 5);
static int output_refusal(msb_error **err, int code, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = msb__vasprintf(fmt, ap);
	va_end(ap);
	msb_error_set(err, code, "output `%s`: %s", path, m ? m : "refused");
	msb__error_set_path(err, path);
	return code;
}

/* The backend's vocabulary as output refusals (12.18): ValueError (confinement)
 * -> NotConfined; the OSError family -> Unreachable; the rest unchanged. */
static int translate(msb_error **err, msb_error *inner, const char *path, const char *doing)
{
	int code = msb_error_code(inner);
	if (code == MSB_E_VALUE) {
		output_refusal(err, MSB_E_OUTPUT_NOT_CONFINED, path, "%s: %s", doing,
			       msb_error_message(inner));
		msb_error_free(inner);
		return MSB_E_OUTPUT_NOT_CONFINED;
	}
	if (msb_code_is(code, MSB_CAT_OS) && !msb_code_is(code, MSB_CAT_TIMEOUT)) {
		output_refusal(err, MSB_E_OUTPUT_UNREACHABLE, path, "%s: %s", doing,
			       msb_error_message(inner));
		msb_error_free(inner);
		return MSB_E_OUTPUT_UNREACHABLE;
	}
	return msb__error_propagate(err, inner);
}

/* ---- the phases ---------------------------------------------------------------------------- */

struct collection {
	msb_sandbox *sb;
	const msb_spec *spec;
	const msb_collect_options *o;
	msb_transfer_limits caps;
	struct item *items;
	size_t n;
};

struct keyed {
	char *key;
	size_t index;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	return r ? r : (x->index > y->index) - (x->index < y->index);
}

/* Landing names whose collision keys are equal (12.9); CONSUME outputs never
 * collide. Sorted, so a flood of names costs n log n. The pair reported is
 * the one the declaration order meets first: the smallest second index. */
static int check_collisions(struct collection *c, msb_error **err)
{
	struct keyed *v = msb__reallocarray(NULL, c->n ? c->n : 1, sizeof(*v));
	if (!v)
		return msb__error_nomem(err);
	size_t n = 0;
	int r = 0;
	for (size_t i = 0; i < c->n && r == 0; i++) {
		if (!c->items[i].land)
			continue;
		r = msb_artifact_name_collision_key(c->items[i].name, &v[n].key, err);
		if (r == 0)
			v[n++].index = i;
	}
	if (r == 0 && n > 1) {
		qsort(v, n, sizeof(*v), keyed_cmp);
		size_t best_first = 0, best_second = SIZE_MAX, start = 0;
		for (size_t k = 1; k < n; k++) {
			if (strcmp(v[k].key, v[k - 1].key) != 0) {
				start = k;
				continue;
			}
			/* The group's second entry has its second-smallest index. */
			if (k == start + 1 && v[k].index < best_second) {
				best_first = v[start].index;
				best_second = v[k].index;
			}
		}
		if (best_second != SIZE_MAX) {
			const struct item *a = &c->items[best_first], *b = &c->items[best_second];
			bool same = strcmp(a->given, b->given) == 0;
			r = msb_error_set(err, MSB_E_ARTIFACT_NAME_COLLISION,
					  same ? "artifact names `%s` and `%s` are identical"
					       : "artifact names `%s` and `%s` differ only in case "
						 "or Unicode form",
					  a->given, b->given);
			msb__error_set_path(err, b->decl->path);
		}
	}
	for (size_t k = 0; k < n; k++)
		free(v[k].key);
	free(v);
	return r;
}

/* Phase 1: the declaration alone. */
static int phase_declare(struct collection *c, msb_error **err)
{
	const msb_collect_options *o = c->o;
	if (o->n_outputs > 0 && !msb_spec_outputs_named_at_call_time(c->spec))
		return msb_error_set(err, MSB_E_VALUE,
				     "collect_outputs: outputs named at call time need a spec with "
				     "outputs_named_at_call_time (kind `%s`)",
				     msb_spec_kind(c->spec));
	size_t nd = msb_spec_declared_output_count(c->spec);
	size_t total;
	if (msb__add_overflow(nd, o->n_outputs, &total))
		return msb__error_nomem(err);
	c->items = msb__reallocarray(NULL, total ? total : 1, sizeof(*c->items));
	if (!c->items)
		return msb__error_nomem(err);
	memset(c->items, 0, (total ? total : 1) * sizeof(*c->items));
	c->n = total;
	bool lands = msb_spec_outputs_named_at_call_time(c->spec);
	for (size_t i = 0; i < total; i++) {
		const msb_declared_output *d =
			i < nd ? msb_spec_declared_output(c->spec, i) : &o->outputs[i - nd];
		if (!d || !d->path)
			return msb_error_set(err, MSB_E_VALUE,
					     "collect_outputs: output %zu has no path", i);
		c->items[i].decl = d;
		c->items[i].land = d->disposition == MSB_DISPOSITION_LAND;
		lands = lands || c->items[i].land;
	}
	if (lands && !o->sink)
		return msb_missing_sink_refusal(c->spec, "collect_outputs", err);
	if (o->sink && o->sink->per_call && (!o->call_id || !*o->call_id))
		return msb_error_set(
			err, MSB_E_VALUE,
			"collect_outputs: the output sink is per call and needs a call_id");
	for (size_t i = 0; i < total; i++) {
		struct item *it = &c->items[i];
		int r = msb_validate_artifact_name(it->decl->path, err);
		if (r < 0)
			return r;
		if (!it->land)
			continue;
		const char *given = it->decl->name ? it->decl->name : it->decl->path;
		it->given = given;
		if (given != it->decl->path && (r = msb_validate_artifact_name(given, err)) < 0)
			return r;
		r = msb_artifact_name_normalize(given, o->sink->normalization, &it->name, err);
		if (r < 0)
			return r;
		if (strcmp(it->name, given) != 0 &&
		    (r = msb_validate_artifact_name(it->name, err)) < 0)
			return r;
	}
	return check_collisions(c, err);
}

/* What a non-regular entry is, with its article, for a refusal. */
static const char *entry_phrase(msb_entry_kind kind)
{
	switch (kind) {
	case MSB_ENTRY_DIRECTORY:
		return "a directory";
	case MSB_ENTRY_SYMLINK:
		return "a link";
	case MSB_ENTRY_FILE:
		return "a regular file";
	case MSB_ENTRY_OTHER:
		break;
	}
	return "a device, socket or fifo";
}

/* Phase 2: stat and cap every declared output, CONSUME too (12.12-12.16). */
static int phase_stat(struct collection *c, msb_error **err)
{
	uint64_t files = 0, bytes = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct item *it = &c->items[i];
		const char *path = it->decl->path;
		msb_entry e = {0};
		bool present = false;
		msb_error *inner = NULL;
		int r = msb_sandbox_stat_file(c->sb, path, c->o->working_directory, &present, &e,
					      &inner);
		if (r < 0)
			return translate(err, inner, path, "stat");
		if (!present) {
			if (it->decl->required)
				return output_refusal(err, MSB_E_OUTPUT_MISSING, path,
						      "the required output is missing");
			continue;
		}
		msb_entry_kind kind = e.kind;
		bool known = e.size_known;
		uint64_t size = e.size_bytes;
		msb_entry_clear(&e);
		if (kind != MSB_ENTRY_FILE)
			return output_refusal(err, MSB_E_OUTPUT_NOT_REGULAR, path,
					      "the output is %s, not a regular file",
					      entry_phrase(kind));
		if (!known)
			return output_refusal(err, MSB_E_OUTPUT_SIZE_UNKNOWN, path,
					      "the backend reports no size for it");
		char why[96];
		if (size > c->caps.max_bytes_per_file) {
			snprintf(why, sizeof(why), "%" PRIu64 " bytes > %" PRIu64, size,
				 c->caps.max_bytes_per_file);
			return cap_exceeded(err, "max_bytes_per_file", path, why);
		}
		if (files + 1 > c->caps.max_files) {
			snprintf(why, sizeof(why), "file %" PRIu64 " > %" PRIu64, files + 1,
				 c->caps.max_files);
			return cap_exceeded(err, "max_files", path, why);
		}
		if (size > c->caps.max_total_bytes - bytes) {
			snprintf(why, sizeof(why), "total above %" PRIu64 " bytes",
				 c->caps.max_total_bytes);
			return cap_exceeded(err, "max_total_bytes", path, why);
		}
		files++;
		bytes += size;
		it->present = true;
		it->size = size;
	}
	return 0;
}

/* Phase 3: read the landing outputs, bounded by their stat; count again (12.17). */
static int phase_read(struct collection *c, msb_error **err)
{
	/* Bytes of the outputs not read (CONSUME) count at their stat size. */
	uint64_t total = 0;
	for (size_t i = 0; i < c->n; i++)
		if (c->items[i].present && !c->items[i].land)
			total += c->items[i].size;
	for (size_t i = 0; i < c->n; i++) {
		struct item *it = &c->items[i];
		if (!it->present || !it->land)
			continue;
		const char *path = it->decl->path;
		uint64_t remaining = c->caps.max_total_bytes - total;
		uint64_t bound = it->size < remaining ? it->size : remaining;
		msb_error *inner = NULL;
		int r = msb_sandbox_read_file(c->sb, path, c->o->working_directory, bound,
					      &it->data, &it->len, &inner);
		if (r == MSB_E_TRANSFER_CAP_EXCEEDED) {
			msb_error_free(inner);
			char why[96];
			snprintf(why, sizeof(why),
				 "it grew past the %" PRIu64 " bytes its stat said", it->size);
			return cap_exceeded(
				err, bound < it->size ? "max_total_bytes" : "max_bytes_per_file",
				path, why);
		}
		if (r < 0)
			return translate(err, inner, path, "read");
		/* Count what arrived, whatever the backend promised. */
		if (it->len > bound) {
			char why[96];
			snprintf(why, sizeof(why), "%zu bytes arrived for a %" PRIu64 "-byte bound",
				 it->len, bound);
			return cap_exceeded(err, "max_bytes_per_file", path, why);
		}
		total += it->len;
	}
	return 0;
}

/* Phase 4: deliver in order (12.19, 12.22). */
static int phase_deliver(struct collection *c, msb_landed_artifact **out, size_t *n_out,
			 msb_error **err)
{
	for (size_t i = 0; i < c->n; i++) {
		struct item *it = &c->items[i];
		if (!it->present || !it->land)
			continue;
		msb_artifact a = {
			.name = it->name,
			.content = it->data ? it->data : (const uint8_t *)"",
			.len = it->len,
			.kind = msb_spec_kind(c->spec),
			.media_type = it->decl->media_type,
		};
		msb_landed_artifact l = {0};
		int r = c->o->sink->deliver(c->o->sink->userdata, &a, c->o->call_id, &l, err);
		if (r < 0) {
			msb_landed_artifact_clear(&l);
			return r;
		}
		if (!l.name)
			l.name = msb__strdup(it->name);
		if (!l.media_type && it->decl->media_type)
			l.media_type = msb__strdup(it->decl->media_type);
		l.size_bytes = it->len;
		msb__sha256_hex(a.content, a.len, l.sha256);
		msb_landed_artifact *v = msb__reallocarray(*out, *n_out + 1, sizeof(**out));
		if (!v || !l.name || !l.display) {
			msb_landed_artifact_clear(&l);
			if (v)
				*out = v;
			return l.name && !l.display && v ? msb_error_set(err, MSB_E_VALUE,
									 "output sink returned no "
									 "display for `%s`",
									 it->name)
							 : msb__error_nomem(err);
		}
		*out = v;
		(*out)[(*n_out)++] = l;
	}
	return 0;
}

static void emit(const struct collection *c, const msb_landed_artifact *landed, size_t n, int code)
{
	const msb_observer *ob = c->o->observer;
	if (!msb_observer__wants(ob, outputs_collected))
		return;
	const char **names = msb__reallocarray(NULL, n ? n : 1, sizeof(char *));
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++) {
		if (names)
			names[i] = landed[i].name;
		bytes += landed[i].size_bytes;
	}
	msb_ev_outputs_collected ev = {
		.key = c->o->key,
		.call = c->o->call_id,
		.landed = names,
		.n_landed = names ? n : 0,
		.bytes = bytes,
		.refusal = code < 0 ? msb_code_name(code) : NULL,
	};
	msb_logger lg = {c->o->log, c->o->log_userdata};
	msb_observer__outputs_collected(ob, &lg, &ev);
	free(names);
}

int msb_collect_outputs(msb_sandbox *sb, const msb_spec *spec, const msb_collect_options *opts,
			msb_landed_artifact **landed, size_t *n_landed, msb_error **err)
{
	static const msb_collect_options none = MSB_COLLECT_OPTIONS_INIT;
	const msb_collect_options *o = opts ? opts : &none;
	if (!sb || !spec || !landed || !n_landed)
		return msb_error_set(err, MSB_E_VALUE, "collect_outputs: NULL argument");
	if (o->version != MSB_COLLECT_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "collect_outputs: options version %u",
				     o->version);
	if (o->sink && (o->sink->version != MSB_OUTPUT_SINK_VERSION || !o->sink->deliver))
		return msb_error_set(
			err, MSB_E_VALUE,
			"collect_outputs: the output sink has no deliver or a bad version");
	struct collection c = {.sb = sb, .spec = spec, .o = o, .caps = msb_spec_files_out(spec)};
	msb_landed_artifact *out = NULL;
	size_t n = 0;
	int r = phase_declare(&c, err);
	if (r == 0)
		r = phase_stat(&c, err);
	if (r == 0)
		r = phase_read(&c, err);
	if (r == 0) {
		msb__fault_point("outputs.read");
		r = phase_deliver(&c, &out, &n, err);
	}
	emit(&c, out, n, r);
	items_free(c.items, c.n);
	if (r < 0) {
		msb_landed_artifacts_free(out, n);
		return r;
	}
	*landed = out;
	*n_landed = n;
	return 0;
}
