/* SPDX-License-Identifier: Apache-2.0 */
/* The handle table of the JSON-RPC front (handles.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"

static const char *const kind_names[] = {"router", "sandbox", "session", "call", "registry"};

void rpc_handles_init(rpc_handles *t)
{
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->released, NULL);
	t->list = NULL;
	t->next_id = 1;
}

rpc_handle *rpc_handle_add(rpc_handles *t, rpc_hkind kind, void *ptr, rpc_handle *parent,
			   const rpc_handle_extra *extra)
{
	rpc_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	if (extra) {
		h->call_owned = extra->call_owned;
		if ((extra->scope && !(h->scope = strdup(extra->scope))) ||
		    (extra->thread_id && !(h->thread_id = strdup(extra->thread_id)))) {
			free(h->scope);
			free(h);
			return NULL;
		}
	}
	h->kind = kind;
	h->ptr = ptr;
	h->refs = 1;
	pthread_mutex_lock(&t->lock);
	snprintf(h->id, sizeof(h->id), "%s-%lu", kind_names[kind], t->next_id++);
	if (parent) {
		parent->refs++;
		h->parent = parent;
	}
	h->next = t->list;
	t->list = h;
	pthread_mutex_unlock(&t->lock);
	return h;
}

int rpc_handle_get(rpc_handles *t, json_t *params, const char *key, rpc_hkind kind,
		   rpc_handle **out, msb_error **err)
{
	const char *id = NULL;
	int r = rpc_str(params, key, true, &id, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&t->lock);
	rpc_handle *h = t->list;
	while (h && strcmp(h->id, id) != 0)
		h = h->next;
	if (h && h->kind == kind)
		h->refs++;
	pthread_mutex_unlock(&t->lock);
	if (!h)
		return rpc_bad_params(err, "`%s`: no open %s `%.60s`", key, kind_names[kind], id);
	if (h->kind != kind)
		return rpc_bad_params(err, "`%s`: `%.60s` is a %s, not a %s", key, id,
				      kind_names[h->kind], kind_names[kind]);
	*out = h;
	return 0;
}

static void destroy(rpc_handles *t, rpc_handle *h)
{
	switch (h->kind) {
	case H_ROUTER:
		msb_router_free(h->ptr);
		break;
	case H_SANDBOX:
		if (!h->call_owned)
			msb_sandbox_release(h->ptr);
		break;
	case H_SESSION:
		msb_tool_session_unref(h->ptr);
		break;
	case H_CALL:
		if (!h->ended) {
			/* Never ended by the client: end it cancelled, which runs
			 * the call's own cleanup (docs/serve.md "Shutdown"). */
			msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
			oc.kind = MSB_CALL_CANCELLED;
			msb_tool_call_end(h->ptr, &oc, NULL, NULL);
		}
		free(h->scope);
		free(h->thread_id);
		break;
	case H_REGISTRY:
		rpc_registry_free(h->ptr);
		break;
	}
	if (h->aux_free)
		h->aux_free(h->aux); /* after the object that used it */
	rpc_handle *parent = h->parent;
	free(h);
	if (parent)
		rpc_handle_put(t, parent);
}

void rpc_handle_put(rpc_handles *t, rpc_handle *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&t->lock);
	bool last = --h->refs == 0;
	pthread_cond_broadcast(&t->released);
	pthread_mutex_unlock(&t->lock);
	if (last)
		destroy(t, h);
}

void rpc_handle_close(rpc_handles *t, rpc_handle *h)
{
	pthread_mutex_lock(&t->lock);
	bool was_open = !h->closed;
	if (was_open) {
		h->closed = true;
		for (rpc_handle **p = &t->list; *p; p = &(*p)->next) {
			if (*p == h) {
				*p = h->next;
				break;
			}
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (was_open)
		rpc_handle_put(t, h);
}

bool rpc_handle_wait_refs(rpc_handles *t, rpc_handle *h, int n)
{
	pthread_mutex_lock(&t->lock);
	if (h->refs > n)
		pthread_cond_wait(&t->released, &t->lock);
	bool done = h->refs <= n;
	pthread_mutex_unlock(&t->lock);
	return done;
}

void rpc_handle_close_children(rpc_handles *t, rpc_hkind kind, rpc_handle *parent)
{
	for (;;) {
		pthread_mutex_lock(&t->lock);
		rpc_handle *h = t->list;
		while (h && !(h->kind == kind && (!parent || h->parent == parent)))
			h = h->next;
		if (h)
			h->refs++;
		pthread_mutex_unlock(&t->lock);
		if (!h)
			return;
		rpc_handle_close(t, h);
		rpc_handle_put(t, h);
	}
}

size_t rpc_handles_count(rpc_handles *t)
{
	size_t n = 0;
	pthread_mutex_lock(&t->lock);
	for (rpc_handle *h = t->list; h; h = h->next)
		n++;
	pthread_mutex_unlock(&t->lock);
	return n;
}
