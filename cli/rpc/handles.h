/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named handles of the JSON-RPC front: routers, sandboxes, tool sessions and
 * calls the client refers to by id ("router-1", "sandbox-3"). Each handle is
 * reference-counted: a request holds it while it runs, a child holds its
 * parent (a sandbox its router, a call its session), so closing a handle
 * never frees what a running request still uses.
 */
#ifndef MSB_CLI_RPC_HANDLES_H
#define MSB_CLI_RPC_HANDLES_H

#include <pthread.h>

#include "rpc.h"

typedef enum rpc_hkind {
	H_ROUTER,
	H_SANDBOX,
	H_SESSION,
	H_CALL,
	H_REGISTRY, /* a host-tool registry (hosttools.c) */
} rpc_hkind;

/* Frees a registry handle's object (hosttools.c). */
void rpc_registry_free(void *p);

#define RPC_HANDLE_ID_MAX 40

typedef struct rpc_handle rpc_handle;
struct rpc_handle {
	char id[RPC_HANDLE_ID_MAX];
	rpc_hkind kind;
	int refs;
	bool closed;
	rpc_handle *parent;
	void *ptr;
	bool call_owned; /* a sandbox owned by a call (valid until the call ends) */
	bool ended;	 /* a call that has ended */
	char *scope;	 /* a call's caller context */
	char *thread_id;
	void *aux; /* something the handle owns besides ptr (a session's sink) */
	void (*aux_free)(void *aux);
	rpc_handle *next;
};

typedef struct rpc_handles {
	pthread_mutex_t lock;
	pthread_cond_t released; /* a reference was dropped */
	rpc_handle *list;
	unsigned long next_id;
} rpc_handles;

void rpc_handles_init(rpc_handles *t);
/* What a handle carries beyond its object, set before anyone can see it. */
typedef struct rpc_handle_extra {
	bool call_owned;       /* a sandbox owned by its parent call */
	const char *scope;     /* a call's caller context (copied) */
	const char *thread_id; /* (copied; NULL = no thread) */
	void *aux;	       /* owned by the handle from rpc_handle_add on */
	void (*aux_free)(void *aux);
	char *id_out; /* receives the handle's name (RPC_HANDLE_ID_MAX bytes), for the object */
} rpc_handle_extra;

/* A new handle with one reference held by the table; takes a reference on
 * parent. `extra` may be NULL. The handle owns ptr (and extra->aux) from
 * here on: on allocation failure both are freed and NULL is returned. */
rpc_handle *rpc_handle_add(rpc_handles *t, rpc_hkind kind, void *ptr, rpc_handle *parent,
			   const rpc_handle_extra *extra);
/* Free an object of `kind` that no handle holds (as closing its handle would). */
void rpc_object_free(rpc_hkind kind, void *ptr, const rpc_handle_extra *extra);
/* The handle named `id` (len bytes), of `kind`, with a reference taken;
 * `param` names the parameter in the refusals. */
int rpc_handle_find(rpc_handles *t, const char *id, const char *param, rpc_hkind kind,
		    rpc_handle **out, msb_error **err);
void rpc_handle_put(rpc_handles *t, rpc_handle *h);
/* Remove from the table (idempotent); freed when the last request lets go. */
void rpc_handle_close(rpc_handles *t, rpc_handle *h);
/* true when `h` is held by at most `n` references (the caller's among
 * them); otherwise wait for one reference anywhere to be dropped and answer
 * again. */
bool rpc_handle_wait_refs(rpc_handles *t, rpc_handle *h, int n);
/* Close every open handle of `kind` whose parent is `parent` (NULL: any). */
void rpc_handle_close_children(rpc_handles *t, rpc_hkind kind, rpc_handle *parent);
/* The number of open handles (for tests and the shutdown rule). */
size_t rpc_handles_count(rpc_handles *t);
/* The shutdown rule (docs/serve.md): close every handle the client left
 * open, children first, disposing nothing. */
void rpc_handles_release_all(rpc_handles *t);
/* "router", "sandbox", ... */
const char *rpc_hkind_name(rpc_hkind kind);

#endif
