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

const char *rpc_hkind_name(rpc_hkind kind)
{
	return kind_names[kind];
}

/* What closing a handle does to its object: a sandbox a call owns is the
 * library's, a call never ended is ended cancelled (docs/serve.md
 * "Shutdown"), which runs the call's own cleanup. */
static void free_object(rpc_hkind kind, void *ptr, bool call_owned, bool ended)
{
	switch (kind) {
	case H_ROUTER:
		msb_router_free(ptr);
		break;
	case H_SANDBOX:
		if (!call_owned)
			msb_sandbox_free(ptr);
		break;
	case H_SESSION:
		msb_tool_session_unref(ptr);
		break;
	case H_CALL:
		if (ptr && !ended) {
			msb_call_outcome oc = MSB_CALL_OUTCOME_INIT;
			oc.kind = MSB_CALL_CANCELLED;
			msb_tool_call_end(ptr, &oc, NULL, NULL);
		}
		break;
	case H_REGISTRY:
		rpc_registry_free(ptr);
		break;
	}
}

void rpc_object_free(rpc_hkind kind, void *ptr, const rpc_handle_extra *extra)
{
	free_object(kind, ptr, extra && extra->call_owned, false);
	if (extra && extra->aux_free)
		extra->aux_free(extra->aux);
}

rpc_handle *rpc_handle_add(rpc_handles *t, rpc_hkind kind, void *ptr, rpc_handle *parent,
			   const rpc_handle_extra *extra)
{
	rpc_handle *h = calloc(1, sizeof(*h));
	if (!h)
		goto fail;
	if (extra) {
		h->call_owned = extra->call_owned;
		if ((extra->scope && !(h->scope = strdup(extra->scope))) ||
		    (extra->thread_id && !(h->thread_id = strdup(extra->thread_id)))) {
			free(h->scope);
			free(h);
			goto fail;
		}
		h->aux = extra->aux;
		h->aux_free = extra->aux_free;
	}
	h->kind = kind;
	h->ptr = ptr;
	h->refs = 1;
	pthread_mutex_lock(&t->lock);
	snprintf(h->id, sizeof(h->id), "%s-%lu", kind_names[kind], t->next_id++);
	if (extra && extra->id_out)
		memcpy(extra->id_out, h->id, sizeof(h->id));
	if (parent) {
		parent->refs++;
		h->parent = parent;
	}
	h->next = t->list;
	t->list = h;
	pthread_mutex_unlock(&t->lock);
	return h;
fail:
	rpc_object_free(kind, ptr, extra);
	return NULL;
}

int rpc_handle_find(rpc_handles *t, const char *id, const char *param, rpc_hkind kind,
		    rpc_handle **out, msb_error **err)
{
	pthread_mutex_lock(&t->lock);
	rpc_handle *h = t->list;
	while (h && strcmp(h->id, id) != 0)
		h = h->next;
	if (h && h->kind == kind)
		h->refs++;
	pthread_mutex_unlock(&t->lock);
	if (!h)
		return rpc_bad_params(err, "`%s`: no open %s `%.60s`", param, kind_names[kind], id);
	if (h->kind != kind)
		return rpc_bad_params(err, "`%s`: `%.60s` is a %s, not a %s", param, id,
				      kind_names[h->kind], kind_names[kind]);
	*out = h;
	return 0;
}

static void destroy(rpc_handles *t, rpc_handle *h)
{
	free_object(h->kind, h->ptr, h->call_owned, h->ended);
	free(h->scope);
	free(h->thread_id);
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

void rpc_handles_release_all(rpc_handles *t)
{
	rpc_handle_close_children(t, H_SANDBOX, NULL);
	rpc_handle_close_children(t, H_CALL, NULL);
	rpc_handle_close_children(t, H_SESSION, NULL);
	rpc_handle_close_children(t, H_ROUTER, NULL);
	rpc_handle_close_children(t, H_REGISTRY, NULL);
}
