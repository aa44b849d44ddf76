/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `msb ls` for the engine backends (docs/engine.md "Listing"): the sandboxes
 * an engine holds for msb, read back from the engine by msb's labels - the
 * listing dispose_scope selects from (21.30, 21.31) - with the fields the
 * engine reports for each (image, creation time, state). Every byte comes
 * through the transport's bounded list (16 MiB of listing at most).
 */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "engine.h"

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	const int64_t era = (y >= 0 ? y : y - 399) / 400;
	const unsigned yoe = (unsigned)(y - era * 400);
	const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static bool digits(const char **p, int n, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (unsigned)(c - '0');
	}
	*p += n;
	*out = v;
	return true;
}

/* "YYYY-MM-DD[T ]HH:MM:SS[.frac][ ][Z|+HHMM|+HH:MM|-...][ anything]" to
 * seconds since the epoch; 0 when it is not that. No offset = UTC. */
static int64_t parse_time(const char *s)
{
	unsigned y, mo, d, h, mi, se;
	const char *p = s;
	if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
	    !digits(&p, 2, &d) || (*p != 'T' && *p != ' ') || !(++p, digits(&p, 2, &h)) ||
	    *p++ != ':' || !digits(&p, 2, &mi) || *p++ != ':' || !digits(&p, 2, &se))
		return 0;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return 0;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	while (*p == ' ')
		p++;
	int64_t off = 0;
	if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1;
		unsigned oh, om = 0;
		if (!digits(&p, 2, &oh))
			return 0;
		if (*p == ':')
			p++;
		if (*p >= '0' && *p <= '9' && !digits(&p, 2, &om))
			return 0;
		off = sign * ((int64_t)oh * 3600 + (int64_t)om * 60);
	}
	int64_t t = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + se;
	t -= off;
	return t > 0 ? t : 0;
}

int msb_engine__container_fields(engine_container *c, const char *image, const char *state,
				 int64_t created_s, const char *created_text)
{
	if (image && *image && !(c->image = msb__strdup(image)))
		return -ENOMEM;
	if (state && *state)
		c->state = strcasecmp(state, "running") == 0 ? ENGINE_RUNNING : ENGINE_STOPPED;
	c->created_s = created_s > 0 ? created_s : created_text ? parse_time(created_text) : 0;
	return 0;
}

bool msb_engine_backend_is(const msb_backend *b)
{
	return msb_engine__of(b) != NULL;
}

void msb_engine_entries_free(msb_engine_entry *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].id);
		free(v[i].scope);
		free(v[i].thread_id);
		free(v[i].agent_dir);
		free(v[i].kind);
		free(v[i].image);
	}
	free(v);
}

static int dup_label(const engine_container *c, const char *key, char **out)
{
	const char *v = msb_engine__container_label(c, key);
	*out = NULL;
	return v && !(*out = msb__strdup(v)) ? -ENOMEM : 0;
}

/* One row from one workload container; its state asked for when the
 * listing did not say (wslc's may not). */
static int entry_of(engine_backend *b, const engine_container *c, msb_engine_entry *e,
		    msb_error **err)
{
	if (!(e->name = msb__strdup(c->name)) || !(e->id = msb__strdup(c->id)) ||
	    dup_label(c, ENGINE_LABEL_SCOPE, &e->scope) < 0 ||
	    dup_label(c, ENGINE_LABEL_THREAD, &e->thread_id) < 0 ||
	    dup_label(c, ENGINE_LABEL_AGENT, &e->agent_dir) < 0 ||
	    dup_label(c, ENGINE_LABEL_KIND, &e->kind) < 0 ||
	    (c->image && !(e->image = msb__strdup(c->image))))
		return msb__error_nomem(err);
	e->created_ns = c->created_s > 0 ? c->created_s * 1000000000 : 0;
	engine_state st = c->state;
	if (st == ENGINE_ABSENT) {
		char *id = NULL;
		int r = b->ops->inspect(b->t, c->name, &st, &id, err);
		free(id);
		if (r < 0)
			return r;
	}
	e->running = st == ENGINE_RUNNING;
	return 0;
}

int msb_engine_list(msb_backend *backend, msb_engine_entry **out, size_t *n, msb_error **err)
{
	*out = NULL;
	*n = 0;
	engine_backend *b = msb_engine__of(backend);
	if (!b)
		return msb_error_set(
			err, MSB_E_VALUE,
			"backend `%s` is not a container-engine backend (docker, wslc)",
			msb_backend_name(backend));
	/* Every container with a kind label, as dispose_scope selects them
	 * (21.31); then those named by this backend's prefix, workloads only
	 * (a proxy carries a role label). */
	char *filters[] = {(char *)ENGINE_LABEL_KIND, NULL};
	engine_container *v = NULL;
	size_t count = 0;
	int r = b->ops->list(b->t, filters, &v, &count, err);
	if (r < 0)
		return r;
	msb_engine_entry *rows = calloc(count ? count : 1, sizeof(*rows));
	if (!rows) {
		msb_engine__containers_free(v, count);
		return msb__error_nomem(err);
	}
	size_t k = 0;
	for (size_t i = 0; i < count && r == 0; i++) {
		const engine_container *c = &v[i];
		if (strncmp(c->name, b->prefix, strlen(b->prefix)) != 0 ||
		    msb_engine__container_label(c, ENGINE_LABEL_ROLE))
			continue;
		r = entry_of(b, c, &rows[k++], err);
	}
	msb_engine__containers_free(v, count);
	if (r < 0) {
		msb_engine_entries_free(rows, k);
		return r;
	}
	*out = rows;
	*n = k;
	return 0;
}
