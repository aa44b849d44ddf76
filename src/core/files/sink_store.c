/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file-store sink and its two read-only tools (checklist 16.17-16.22):
 * artifacts land as text at "<call_id>/<name>" in a store the model can read
 * but not write; provenance is recorded before the bytes are written.
 */
#include <stdio.h>

#include <msb/outputs.h>

#include "util/util.h"

struct store_sink {
	msb_text_store store;
	msb_file_store_provenance *provenance;
	msb_integrity integrity;
};

static void store_sink_free(void *ud)
{
	struct store_sink *s = ud;
	if (!s)
		return;
	msb_file_store_provenance_unref(s->provenance);
	free(s);
}

/* Strict UTF-8 (no surrogates, no overlongs, NUL allowed). */
static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t tl = 0;
	_cleanup_free_ char *text = msb_text_from_bytes_len(s, n, &tl);
	/* msb_text_from_bytes replaces each invalid subpart with U+FFFD: the
	 * bytes are valid exactly when the decode is byte-identical. */
	return text && tl == n && memcmp(text, s, n) == 0;
}

static int store_deliver(void *ud, const msb_artifact *a, const char *call_id,
			 msb_landed_artifact *out, msb_error **err)
{
	struct store_sink *s = ud;
	if (!call_id || !*call_id || strchr(call_id, '/') || strcmp(call_id, ".") == 0 ||
	    strcmp(call_id, "..") == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "file store sink: the call id must be one path segment");
	int r = msb_validate_artifact_name(a->name, err);
	if (r < 0)
		return r;
	if (!utf8_valid(a->content, a->len)) {
		msb_error_set(err, MSB_E_LANDING_NOT_TEXT,
			      "artifact `%s` is not UTF-8 text and the file store holds only text",
			      a->name);
		msb__error_set_path(err, a->name);
		return MSB_E_LANDING_NOT_TEXT;
	}
	_cleanup_free_ char *path = msb__asprintf("%s/%s", call_id, a->name);
	if (!path)
		return msb__error_nomem(err);
	/* Refuse an existing destination before recording anything for it. */
	_cleanup_free_ char *old = NULL;
	size_t old_len = 0;
	bool present = false;
	r = s->store.read(s->store.userdata, path, &old, &old_len, &present, err);
	if (r < 0)
		return r;
	if (present) {
		msb_error_set(err, MSB_E_LANDING_EXISTS, "artifact `%s`: `%s` exists in the store",
			      a->name, path);
		msb__error_set_path(err, a->name);
		return MSB_E_LANDING_EXISTS;
	}
	/* Provenance first (16.19): a write that fails after this leaves a
	 * record, never bytes without one. */
	if (s->provenance &&
	    (r = msb_file_store_provenance_record(s->provenance, path, s->integrity, err)) < 0)
		return r;
	_cleanup_free_ char *text = malloc(a->len + 1);
	if (!text)
		return msb__error_nomem(err);
	memcpy(text, a->content, a->len);
	text[a->len] = '\0';
	r = s->store.create(s->store.userdata, path, text, a->len, err);
	if (r < 0)
		return r;
	out->name = msb__strdup(a->name);
	out->handle = TAKE_PTR(path);
	out->display = msb__asprintf("%s (%zu bytes)", out->handle, a->len);
	if (!out->name || !out->display)
		return msb__error_nomem(err);
	return 0;
}

int msb_store_sink_new(const msb_text_store *store, const msb_store_sink_options *opts,
		       msb_output_sink **out, msb_error **err)
{
	static const msb_store_sink_options defaults = MSB_STORE_SINK_OPTIONS_INIT;
	if (!store || store->version != MSB_TEXT_STORE_VERSION || !store->create || !store->read ||
	    !out)
		return msb_error_set(err, MSB_E_VALUE,
				     "file store sink: the store needs version, create and read");
	if (opts && opts->version != MSB_STORE_SINK_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "file store sink: options version %u",
				     opts->version);
	const msb_store_sink_options *o = opts ? opts : &defaults;
	struct store_sink *s = calloc(1, sizeof(*s));
	msb_output_sink *sink = calloc(1, sizeof(*sink));
	if (!s || !sink) {
		free(s);
		free(sink);
		return msb__error_nomem(err);
	}
	s->store = *store;
	s->provenance = o->provenance ? msb_file_store_provenance_ref(o->provenance) : NULL;
	s->integrity = o->integrity;
	*sink = (msb_output_sink)MSB_OUTPUT_SINK_INIT;
	sink->userdata = s;
	sink->deliver = store_deliver;
	sink->per_call = true;
	sink->free = store_sink_free;
	*out = sink;
	return 0;
}

/* ---- the read-only tools (16.21) ---------------------------------------------------------- */

int msb_outputs_read_tool_names(const char *prefix, char ***names, msb_error **err)
{
	const char *p = prefix && *prefix ? prefix : MSB_OUTPUTS_TOOL_PREFIX;
	_cleanup_strv_ char **v = NULL;
	_cleanup_free_ char *ls = msb__asprintf("%s_ls", p);
	_cleanup_free_ char *rd = msb__asprintf("%s_read", p);
	if (!ls || !rd || msb__strv_push_take(&v, TAKE_PTR(ls)) < 0 ||
	    msb__strv_push_take(&v, TAKE_PTR(rd)) < 0)
		return msb__error_nomem(err);
	*names = TAKE_PTR(v);
	return 0;
}

/* "Error: <before>`<arg>`<after>": the model's sentence. */
static int sentence(char **text, msb_error **err, const char *before, const char *arg,
		    const char *after)
{
	*text = msb__asprintf("Error: %s`%s`%s", before, arg, after);
	return *text ? 0 : msb__error_nomem(err);
}

/* A store path the tools accept: "" or a valid artifact-style path. */
static bool tool_path_ok(const char *p)
{
	return *p == '\0' || msb_validate_artifact_name(p, NULL) == 0;
}

int msb_outputs_tool_ls(const msb_text_store *store, const char *dir, char **text, msb_error **err)
{
	if (!store || !store->list || !text)
		return msb_error_set(err, MSB_E_VALUE, "outputs ls: no store or no list function");
	const char *d = !dir || strcmp(dir, ".") == 0 ? "" : dir;
	if (!tool_path_ok(d))
		return sentence(text, err, "", d, " is not a path in the outputs store");
	_cleanup_strv_ char **names = NULL;
	msb_error *inner = NULL;
	if (store->list(store->userdata, d, &names, &inner) < 0) {
		int code = msb_error_code(inner);
		msb_error_free(inner);
		if (code == MSB_E_NOMEM)
			return msb__error_nomem(err);
		return sentence(text, err, "could not list ", d, " in the outputs store");
	}
	msb__strv_sort(names);
	char *joined = names && names[0] ? msb__strv_join(names, "\n") : msb__strdup("");
	if (!joined)
		return msb__error_nomem(err);
	*text = joined;
	return 0;
}

int msb_outputs_tool_read(const msb_text_store *store, const char *path, char **text,
			  msb_error **err)
{
	if (!store || !store->read || !text)
		return msb_error_set(err, MSB_E_VALUE,
				     "outputs read: no store or no read function");
	if (!path || !*path || !tool_path_ok(path))
		return sentence(text, err, "", path ? path : "",
				" is not a path in the outputs store");
	char *t = NULL;
	size_t len = 0;
	bool present = false;
	msb_error *inner = NULL;
	if (store->read(store->userdata, path, &t, &len, &present, &inner) < 0) {
		int code = msb_error_code(inner);
		msb_error_free(inner);
		if (code == MSB_E_NOMEM)
			return msb__error_nomem(err);
		return sentence(text, err, "could not read ", path, " from the outputs store");
	}
	if (!present)
		return sentence(text, err, "", path, " is not in the outputs store");
	*text = t;
	return 0;
}
