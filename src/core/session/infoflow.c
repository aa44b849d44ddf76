/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Information flow on a call's result (checklist 16.1-16.16, 17.12, 17.15,
 * 15.23; C forms 24.14, 24.15): standing guidance committed at attach and
 * checked on every return, the file fold stamping derived items, file
 * integrity at read time against recorded provenance, and the tool's
 * declarations.
 */
#include "core/session/session_int.h"
#include "util/json.h"

/* ---- FileStoreProvenance (16.8) ------------------------------------------------------------- */

struct prov_entry {
	char *path;
	msb_integrity integrity; /* the weakest recorded */
};

struct msb_file_store_provenance {
	atomic_uint refs;
	pthread_mutex_t lock;
	msb_integrity floor;
	struct prov_entry *v;
	size_t n;
};

static bool integrity_valid(msb_integrity i)
{
	return i == MSB_INTEGRITY_UNESTABLISHED || i == MSB_INTEGRITY_UNTRUSTED ||
	       i == MSB_INTEGRITY_TRUSTED;
}

int msb_file_store_provenance_new(msb_integrity floor, msb_file_store_provenance **out,
				  msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "provenance: no place for the result");
	if (!integrity_valid(floor))
		return msb_error_set(err, MSB_E_VALUE, "provenance floor: %d is not an integrity",
				     (int)floor);
	msb_file_store_provenance *p = calloc(1, sizeof(*p));
	if (!p)
		return msb__error_nomem(err);
	atomic_init(&p->refs, 1);
	pthread_mutex_init(&p->lock, NULL);
	p->floor = floor;
	*out = p;
	return 0;
}

msb_file_store_provenance *msb_file_store_provenance_ref(msb_file_store_provenance *p)
{
	if (p)
		atomic_fetch_add(&p->refs, 1);
	return p;
}

void msb_file_store_provenance_unref(msb_file_store_provenance *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].path);
	free(p->v);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int msb_file_store_provenance_record(msb_file_store_provenance *p, const char *path,
				     msb_integrity integrity, msb_error **err)
{
	if (!p || !path)
		return msb_error_set(err, MSB_E_VALUE, "provenance record: missing argument");
	if (!integrity_valid(integrity))
		return msb_error_set(err, MSB_E_VALUE, "provenance record: %d is not an integrity",
				     (int)integrity);
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].path, path) == 0) {
			p->v[i].integrity = msb_integrity_weakest(p->v[i].integrity, integrity);
			pthread_mutex_unlock(&p->lock);
			return 0;
		}
	struct prov_entry *v = msb__reallocarray(p->v, p->n + 1, sizeof(*v));
	char *copy = strdup(path);
	if (!v || !copy) {
		if (v)
			p->v = v;
		free(copy);
		pthread_mutex_unlock(&p->lock);
		return msb__error_nomem(err);
	}
	p->v = v;
	p->v[p->n++] = (struct prov_entry){copy, integrity};
	pthread_mutex_unlock(&p->lock);
	return 0;
}

msb_integrity msb_file_store_provenance_fold(msb_file_store_provenance *p, const char *path,
					     bool *recorded)
{
	if (recorded)
		*recorded = false;
	if (!p || !path)
		return MSB_INTEGRITY_UNESTABLISHED;
	pthread_mutex_lock(&p->lock);
	msb_integrity out = p->floor;
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].path, path) == 0) {
			out = p->v[i].integrity;
			if (recorded)
				*recorded = true;
		}
	pthread_mutex_unlock(&p->lock);
	return out;
}

/* ---- standing guidance (16.2-16.4) ---------------------------------------------------------- */

int msb_infoflow__check_guidance(const char *const *g, size_t n, msb_error **err)
{
	if (n > 0 && !g)
		return msb_error_set(err, MSB_E_VALUE, "standing_guidance: %zu counted, none given",
				     n);
	for (size_t i = 0; i < n; i++)
		if (!g[i] || !*g[i])
			return msb_error_set(err, MSB_E_VALUE,
					     "standing_guidance %zu: a committed sentence cannot "
					     "be empty",
					     i);
	return 0;
}

/* The committed text with every {call_id} replaced: the only interpolation. */
static char *interpolate(const char *text, const char *call_id)
{
	static const char ph[] = "{call_id}";
	msb_buf b = MSB_BUF_INIT;
	const char *p = text;
	for (const char *hit; (hit = strstr(p, ph)); p = hit + sizeof(ph) - 1) {
		msb__buf_append(&b, p, (size_t)(hit - p));
		msb__buf_puts(&b, call_id);
	}
	msb__buf_puts(&b, p);
	return msb__buf_steal_str(&b);
}

static int refuse(msb_error **err, const char *why)
{
	return msb_error_set(err, MSB_E_VALUE, "the tool result is refused: %s", why);
}

/* Body items as given: one derived item for a string (16.1, 16.13). */
static void body_items(const msb_call_outcome *oc, const msb_result_item **items, size_t *n,
		       msb_result_item *one)
{
	if (oc->items) {
		*items = oc->items;
		*n = oc->n_items;
		return;
	}
	*one = (msb_result_item){.text = oc->text};
	*items = one;
	*n = 1;
}

void msb_tool_result_free(msb_tool_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_items; i++) {
		free((char *)r->items[i].text);
		free((char *)r->items[i].confidentiality);
	}
	free(r->items);
	free(r);
}

int msb_infoflow__result(const struct msb_tool_session *s, const char *call_id,
			 const msb_call_outcome *oc, size_t fed_count, msb_integrity fed_weakest,
			 msb_tool_result **out, msb_error **err)
{
	const msb_result_item *items;
	msb_result_item one;
	size_t n;
	body_items(oc, &items, &n, &one);
	if (n == 0 && s->n_guidance == 0)
		return refuse(err, "the body returned no item");
	for (size_t i = 0; i < n; i++) {
		if (!items[i].text)
			return refuse(err, "a result item has no text");
		/* Labels are the wrapper's to give (16.4, 16.6). */
		if (items[i].has_label)
			return refuse(err, "the body labelled a result item; return unlabelled "
					   "items and commit standing guidance at attach");
	}

	/* Guidance: last, in order, exact but for {call_id}, and after at
	 * least one derived item (16.2-16.4). */
	size_t m = s->n_guidance;
	_cleanup_strv_ char **expect = calloc(m + 1, sizeof(char *));
	if (!expect)
		return msb__error_nomem(err);
	for (size_t i = 0; i < m; i++)
		if (!(expect[i] = interpolate(s->guidance[i], call_id)))
			return msb__error_nomem(err);
	if (m > 0) {
		bool tail = n >= m;
		for (size_t i = 0; tail && i < m; i++)
			tail = strcmp(items[n - m + i].text, expect[i]) == 0;
		if (!tail)
			return refuse(err, "it does not end with the committed standing guidance "
					   "(text, count, order and placement are fixed; only "
					   "{call_id} interpolates)");
		if (n == m)
			return refuse(err, "standing guidance needs at least one derived item "
					   "before it");
	}

	/* The file fold (16.11-16.16): weaker of the declaration and every read
	 * that carried text; never a promotion, never the declaration itself. */
	msb_integrity stamp = s->declared;
	if (fed_count > 0)
		stamp = msb_integrity_weakest(stamp, fed_weakest);
	/* A label is trusted or untrusted: content fed by an unestablished
	 * source is labelled untrusted, the weakest label there is (23.23). */
	if (stamp == MSB_INTEGRITY_UNESTABLISHED)
		stamp = MSB_INTEGRITY_UNTRUSTED;

	msb_tool_result *r = calloc(1, sizeof(*r));
	if (!r || !(r->items = calloc(n, sizeof(*r->items)))) {
		free(r);
		return msb__error_nomem(err);
	}
	for (size_t i = 0; i < n; i++) {
		msb_result_item *it = &r->items[i];
		bool guidance = i >= n - m;
		it->text = strdup(guidance ? expect[i - (n - m)] : items[i].text);
		r->n_items++;
		if (!it->text)
			goto nomem;
		if (guidance) {
			it->guidance = true;
			it->has_label = true;
			it->integrity = MSB_INTEGRITY_TRUSTED;
			if (!(it->confidentiality = strdup(MSB_GUIDANCE_CONFIDENTIALITY)))
				goto nomem;
		} else if (s->stamping) {
			it->has_label = true;
			it->integrity = stamp;
			if (!(it->confidentiality = strdup(s->confidentiality)))
				goto nomem;
		}
	}
	*out = r;
	return 0;

nomem:
	msb_tool_result_free(r);
	return msb__error_nomem(err);
}

/* ---- session.read_file (16.7-16.9, 17.12) --------------------------------------------------- */

static void emit_read(struct msb_tool_call *c, const msb_key *key, const char *path,
		      const char *outcome, msb_integrity integrity)
{
	msb_router *r = c->s->r;
	if (!msb_observer__wants(&r->observer, store_file_read))
		return;
	msb_ev_store_file_read ev = {
		.path = path,
		.outcome = outcome,
		.integrity = integrity,
		.key = key,
		.call = c->id,
	};
	msb_observer__store_file_read(&r->observer, &r->lg, &ev);
}

static int sentence(char **out, msb_error **err, const char *fmt, ...) MSB_PRINTF(3, 4);
static int sentence(char **out, msb_error **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!s)
		return msb__error_nomem(err);
	*out = s;
	return 0;
}

int msb_tool_call_read_file(msb_tool_call *c, const char *path, char **text, size_t *len,
			    char **sentence_out, msb_error **err)
{
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME, "read_file: outside a tool call");
	if (!path || !text || !sentence_out)
		return msb_error_set(err, MSB_E_VALUE, "read_file: missing argument");
	struct msb_tool_session *s = c->s;
	if (!s->has_store)
		return msb_error_set(err, MSB_E_VALUE,
				     "read_file: the tool was attached without a file store");
	pthread_mutex_lock(&c->lock);
	bool closed = c->closed;
	pthread_mutex_unlock(&c->lock);
	if (closed)
		return msb_error_set(err, MSB_E_RUNTIME, "read_file: the tool call has ended");
	*text = NULL;
	*sentence_out = NULL;

	/* The key the read happened under joins ToolCallEnded.keys (17.4). */
	msb_key *key = msb_session__event_key(c);
	if (key)
		msb_session__touch_key(c, key);

	/* Integrity at admission to the workload (16.7, 16.8): recorded
	 * provenance, its floor for unrecorded paths, unestablished with none. */
	msb_integrity integrity =
		s->provenance ? msb_file_store_provenance_fold(s->provenance, path, NULL)
			      : MSB_INTEGRITY_UNESTABLISHED;
	int rc;
	if (s->requires_set && msb_integrity_rank(integrity) < msb_integrity_rank(s->requires)) {
		const char *have = integrity == MSB_INTEGRITY_UNESTABLISHED
					   ? "unestablished"
					   : msb_integrity_name(integrity);
		rc = sentence(sentence_out, err,
			      "Error: `%s` is refused: its integrity is %s, below the %s this tool "
			      "requires",
			      path, have, msb_integrity_name(s->requires));
		emit_read(c, key, path, "refused", integrity);
		msb_key_free(key);
		return rc;
	}

	char *t = NULL;
	size_t n = 0;
	bool present = false;
	msb_error *e = NULL;
	rc = s->store.read(s->store.userdata, path, &t, &n, &present, &e);
	if (rc < 0) {
		/* Not a read: it fed nothing. */
		msb__log(&s->r->lg, MSB_LOG_WARNING, "session",
			 "file store read of `%s` failed: %s", path, msb_error_message(e));
		rc = sentence(sentence_out, err,
			      "Error: could not read `%s` from the file store: %s", path,
			      msb_error_message(e));
		msb_error_free(e);
		msb_key_free(key);
		return rc;
	}
	if (!present) {
		free(t);
		rc = sentence(sentence_out, err, "Error: `%s` does not exist in the file store",
			      path);
		emit_read(c, key, path, "absent", integrity);
		msb_key_free(key);
		return rc;
	}
	/* The call's fold; a read finishing after the call closed feeds
	 * nothing the call returned. */
	pthread_mutex_lock(&c->lock);
	if (!c->closed) {
		c->fed_weakest = c->fed_count == 0
					 ? integrity
					 : msb_integrity_weakest(c->fed_weakest, integrity);
		c->fed_count++;
	}
	pthread_mutex_unlock(&c->lock);
	emit_read(c, key, path, "read", integrity);
	msb_key_free(key);
	*text = t;
	if (len)
		*len = n;
	return 0;
}

int msb_tool_call_list_files(msb_tool_call *c, char ***files, char **sentence_out, msb_error **err)
{
	if (!c)
		return msb_error_set(err, MSB_E_RUNTIME, "list_files: outside a tool call");
	if (!files || !sentence_out)
		return msb_error_set(err, MSB_E_VALUE, "list_files: missing argument");
	struct msb_tool_session *s = c->s;
	if (!s->ctx.list_files)
		return msb_error_set(err, MSB_E_VALUE,
				     "list_files: the caller context has no list_files");
	*files = NULL;
	*sentence_out = NULL;
	char **v = NULL;
	msb_error *e = NULL;
	int rc = s->ctx.list_files(s->ctx.userdata, s->store_name ? s->store_name : "", &v, &e);
	if (rc < 0) {
		/* A refusal, never an empty listing (2.8). */
		rc = sentence(sentence_out, err, "Error: could not list the file store: %s",
			      msb_error_message(e));
		msb_error_free(e);
		return rc;
	}
	if (!v && !(v = calloc(1, sizeof(char *))))
		return msb__error_nomem(err);
	*files = v;
	return 0;
}

/* ---- sandbox_tool_declarations (15.23) ------------------------------------------------------ */

static bool spec_lands(const msb_spec *spec)
{
	for (size_t i = 0; i < msb_spec_declared_output_count(spec); i++)
		if (msb_spec_declared_output(spec, i)->disposition == MSB_DISPOSITION_LAND)
			return true;
	return false;
}

int msb_sandbox_tool_declarations(const msb_spec *spec, const msb_tool_declarations_options *opts,
				  char **out, msb_error **err)
{
	static const msb_tool_declarations_options defaults = MSB_TOOL_DECLARATIONS_OPTIONS_INIT;
	if (!spec || !out)
		return msb_error_set(err, MSB_E_VALUE, "tool declarations: missing argument");
	if (!opts)
		opts = &defaults;
	if (opts->version != MSB_TOOL_DECLARATIONS_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "tool declarations options: unsupported version %u",
				     opts->version);
	msb_integrity i;
	if (opts->source_integrity) {
		int rc = msb_integrity_parse(opts->source_integrity, &i, err);
		if (rc < 0) {
			msb_error_wrap(err, "source_integrity");
			return rc;
		}
	}
	json_t *o = json_object();
	if (!o)
		return msb__error_nomem(err);
	int bad = 0;
	if (opts->source_integrity)
		bad |= json_object_set_new(o, "source_integrity",
					   json_string(opts->source_integrity));
	/* An outbound cap means something only where something goes out. */
	bool carries_out = msb_spec_egress_allow_count(spec) > 0 ||
			   (spec_lands(spec) && opts->has_output_sink) || opts->also_carries_out;
	if (opts->outbound_max_confidentiality && carries_out)
		bad |= json_object_set_new(o, "max_allowed_confidentiality",
					   json_string(opts->outbound_max_confidentiality));
	char *s = bad ? NULL : msb__json_dump(o);
	json_decref(o);
	if (!s)
		return msb__error_nomem(err);
	*out = s;
	return 0;
}

bool msb_infoflow__spec_lands(const msb_spec *spec)
{
	return spec_lands(spec);
}
