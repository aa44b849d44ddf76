/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend type `fake` (msb/backend.h): the in-process fake (msb/testing.h)
 * from backend JSON, so a router loaded anywhere - msb check, msb serve, msb
 * mcp, msb conformance - can hold one, with the emulated POSIX guest and a
 * seeded store when asked:
 *
 *   {"type": "fake", "name": ..., "isolation": ..., "declarations": {...},
 *    "posix_guest": true,
 *    "seed_files": [{"path": "/abs", "kind": "file", "text": "..."},
 *                   {"path": "/abs", "base64": "..."},
 *                   {"path": "/abs/dir", "kind": "directory"}, ...]}
 *
 * Each backend made here has its own fresh fake sandbox.
 */
#include <msb/testing.h>

#include "backends/types.h"
#include "util/base64.h"
#include "util/json.h"

static const char *const fake_keys[] = {"name",	       "isolation",  "declarations",
					"posix_guest", "seed_files", NULL};
static const char *const seed_keys[] = {"path", "kind", "text", "base64", NULL};

/* The seeds as msb_fake_seed values; data points into obj or into *owned. */
struct seeds {
	msb_fake_seed *v;
	uint8_t **owned; /* decoded base64, one per seed (NULL when none) */
	size_t n;
};

static void seeds_clear(struct seeds *s)
{
	for (size_t i = 0; s->owned && i < s->n; i++)
		free(s->owned[i]);
	free(s->owned);
	free(s->v);
}

static int seed_kind(const char *name, const char *where, msb_fake_seed_kind *out, msb_error **err)
{
	msb_entry_kind k;
	if (msb_entry_kind_parse(name, &k, err) < 0)
		return msb_error_wrap(err, "%s.kind", where);
	switch (k) {
	case MSB_ENTRY_FILE:
		*out = MSB_FAKE_SEED_BYTES;
		break;
	case MSB_ENTRY_DIRECTORY:
		*out = MSB_FAKE_SEED_DIRECTORY;
		break;
	case MSB_ENTRY_SYMLINK:
		*out = MSB_FAKE_SEED_SYMLINK;
		break;
	case MSB_ENTRY_OTHER:
		*out = MSB_FAKE_SEED_OTHER;
		break;
	}
	return 0;
}

static int seed_from_object(json_t *o, const char *where, msb_fake_seed *sd, uint8_t **owned,
			    msb_error **err)
{
	if (!json_is_object(o))
		return msb_error_set(err, MSB_E_TYPE, "%s must be an object", where);
	const char *kind = NULL, *text = NULL, *b64 = NULL;
	bool has_path = false;
	int r;
	if ((r = msb__json_check_keys(o, seed_keys, where, err)) < 0 ||
	    (r = msb__json_get_string(o, "path", where, &sd->path, &has_path, err)) < 0 ||
	    (r = msb__json_get_string(o, "kind", where, &kind, NULL, err)) < 0 ||
	    (r = msb__json_get_string(o, "text", where, &text, NULL, err)) < 0 ||
	    (r = msb__json_get_string(o, "base64", where, &b64, NULL, err)) < 0)
		return r;
	if (!has_path)
		return msb_error_set(err, MSB_E_VALUE, "%s.path is required", where);
	sd->kind = MSB_FAKE_SEED_BYTES;
	if (kind && (r = seed_kind(kind, where, &sd->kind, err)) < 0)
		return r;
	if (text && b64)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: `text` and `base64` are refused together", where);
	if ((text || b64) && sd->kind != MSB_FAKE_SEED_BYTES)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: only a `file` seed has contents (`text` or `base64`)",
				     where);
	if (text) {
		sd->data = (const uint8_t *)text;
		sd->len = json_string_length(json_object_get(o, "text"));
	} else if (b64) {
		r = msb__base64_decode(b64, strlen(b64), false, owned, &sd->len);
		if (r == -ENOMEM)
			return msb__error_nomem(err);
		if (r < 0)
			return msb_error_set(err, MSB_E_VALUE, "%s.base64 is not base64", where);
		sd->data = *owned;
	}
	return 0;
}

static int seeds_from_object(json_t *obj, const char *where, struct seeds *s, msb_error **err)
{
	json_t *arr = json_object_get(obj, "seed_files");
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return msb_error_set(err, MSB_E_TYPE,
				     "%s.seed_files must be a list of seed objects", where);
	size_t n = json_array_size(arr);
	if (n == 0)
		return 0;
	s->v = calloc(n, sizeof(*s->v));
	s->owned = calloc(n, sizeof(*s->owned));
	if (!s->v || !s->owned)
		return msb__error_nomem(err);
	s->n = n;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *w = msb__asprintf("%s.seed_files[%zu]", where, i);
		if (!w)
			return msb__error_nomem(err);
		int r = seed_from_object(json_array_get(arr, i), w, &s->v[i], &s->owned[i], err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int fake_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(in->json, in->len, in->where, &obj, err);
	if (r < 0)
		return r;
	msb_fake_backend_options fo = MSB_FAKE_BACKEND_OPTIONS_INIT;
	msb_fake_sandbox_options so = MSB_FAKE_SANDBOX_OPTIONS_INIT;
	if ((r = msb__json_get_string(obj, "name", in->where, &fo.name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "isolation", in->where, &fo.isolation, NULL, err)) < 0 ||
	    (r = msb__json_get_bool(obj, "posix_guest", in->where, &so.posix_guest, NULL, err)) < 0)
		return r;
	struct seeds seeds = {0};
	r = seeds_from_object(obj, in->where, &seeds, err);
	msb_fake_sandbox *fs = NULL;
	if (r == 0) {
		so.seed_files = seeds.v;
		so.n_seed_files = seeds.n;
		r = msb_fake_sandbox_new(&so, &fs, err);
		if (r < 0 && r != MSB_E_NOMEM && seeds.n)
			msb_error_wrap(err, "%s.seed_files", in->where);
	}
	seeds_clear(&seeds);
	if (r < 0)
		return r;
	fo.sandbox = fs;
	fo.declarations = in->declarations;
	r = msb_fake_backend_new(&fo, out, NULL, err);
	msb_fake_sandbox_unref(fs); /* the backend holds its own reference */
	return r;
}

static int fake_doctor(msb_backend_probe *out, msb_error **err)
{
	return msb_backends__verdict(out, true,
				     "in-process testing backend, always available (isolation "
				     "none)",
				     err);
}

const msb_backend_type msb_fake__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "fake",
	.summary = "the in-process testing fake: a bytes store, scripted or emulated exec",
	.keys = fake_keys,
	.from_json = fake_from_json,
	.doctor = fake_doctor,
};
