/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Methods described by their parameters and results (invoke.c).
 *
 * A method's row names its parameters - each a JSON type, whether it is
 * required, its default - and its result members, each at an offset into
 * the method's frame: a struct holding one typed field per parameter and
 * per result. The generic layer reads and checks the parameters into a
 * zeroed frame (unknown, missing or mistyped parameters are refused with
 * -32602 naming the parameter, a handle is looked up and held), calls the
 * handler with the frame, turns the frame's result fields into the result
 * object (putting new objects into handles), then frees what the frame
 * owns. A handler is then its library call.
 */
#ifndef MSB_CLI_RPC_INVOKE_H
#define MSB_CLI_RPC_INVOKE_H

#include <stddef.h>

#include "handles.h"
#include "rpc.h"

typedef enum rpc_type {
	RPC_T_HANDLE,  /* a handle's name -> rpc_handle * of `kind`, held for the call */
	RPC_T_STR,     /* const char * (borrowed; a NUL inside is refused) */
	RPC_T_BOOL,    /* bool */
	RPC_T_U64,     /* uint64_t, a non-negative integer */
	RPC_T_DOUBLE,  /* double, a finite number */
	RPC_T_STRV,    /* const char ** (NULL-terminated; strings borrowed) */
	RPC_T_BYTES,   /* rpc_bytes, from base64 */
	RPC_T_DOC,     /* rpc_doc: an object as JSON text, for a library reader */
	RPC_T_OBJECT,  /* json_t * (borrowed), an object */
	RPC_T_SPEC,    /* msb_spec *, by the spec's reader */
	RPC_T_KEY,     /* rpc_key: {scope, thread_id, agent_dir, call_id?} */
	RPC_T_SINK,    /* msb_output_sink *: {directory, existing?} (msb_fs_sink_new) */
	RPC_T_OUTPUTS, /* rpc_outputs: call-time declared outputs, by the spec's reader */
	RPC_T_LIMITS,  /* msb_transfer_limits, by the spec's reader (its files_out) */
	RPC_T_OUTCOME, /* msb_call_outcome: {kind, text?, error?} */
	RPC_T_ENUM,    /* int: the index of the string in `names` */
	RPC_T_ENV,     /* char ** (NULL-terminated, owned): ["NAME=VALUE"] or {NAME: VALUE} */
} rpc_type;

/* Parameter flags. */
#define RPC_REQUIRED 1u /* absence (or null) is refused */
#define RPC_CLOSE 2u	/* a handle closed once the call succeeded */

typedef struct rpc_param {
	const char *name;
	rpc_type type;
	unsigned flags;
	rpc_hkind kind;		  /* RPC_T_HANDLE */
	size_t off;		  /* the field in the frame */
	double num;		  /* default of RPC_T_DOUBLE, RPC_T_U64, RPC_T_ENUM */
	const char *str;	  /* default of RPC_T_STR */
	const char *const *names; /* RPC_T_ENUM: the accepted strings, NULL-terminated */
} rpc_param;

typedef enum rpc_rtype {
	RPC_R_END,	 /* the end of a method's results */
	RPC_R_STR,	 /* const char * (borrowed) */
	RPC_R_TEXT,	 /* char * (owned): library or guest text, invalid UTF-8 replaced */
	RPC_R_BOOL,	 /* bool */
	RPC_R_U64,	 /* uint64_t */
	RPC_R_SIZE,	 /* size_t */
	RPC_R_DOUBLE,	 /* double */
	RPC_R_BYTES,	 /* rpc_bytes (owned) as base64 */
	RPC_R_EXEC,	 /* msb_exec_result (owned); its members merged into the result */
	RPC_R_ENTRY,	 /* msb_entry (owned); null when its path is NULL */
	RPC_R_ENTRIES,	 /* rpc_entries (owned) */
	RPC_R_LANDED,	 /* rpc_landed (owned) */
	RPC_R_KEY,	 /* msb_key * (owned) */
	RPC_R_STRV,	 /* char ** (owned, msb_strv_free) */
	RPC_R_JSON,	 /* json_t * (owned); name NULL: an object merged into the result */
	RPC_R_JSON_TEXT, /* char * (owned) JSON text; name NULL: merged */
	RPC_R_HANDLE,	 /* rpc_new: an object put into a new handle of `kind` */
} rpc_rtype;

/* Result flags. */
#define RPC_OMIT_NULL 1u /* a NULL value leaves the member out (else it is null) */

typedef struct rpc_result {
	const char *name;
	rpc_rtype type;
	unsigned flags;
	rpc_hkind kind; /* RPC_R_HANDLE */
	size_t off;
} rpc_result;

/* ---- the typed fields of a frame ----------------------------------------------------------- */

typedef struct rpc_bytes {
	uint8_t *data;
	size_t len;
} rpc_bytes;

typedef struct rpc_doc {
	char *text; /* NULL when absent */
	size_t len;
} rpc_doc;

typedef struct rpc_key {
	bool present;
	msb_key key; /* strings borrowed from the request */
} rpc_key;

typedef struct rpc_outputs {
	msb_spec *holder; /* owns what v points into */
	const msb_declared_output *v;
	size_t n;
} rpc_outputs;

typedef struct rpc_entries {
	msb_entry *v;
	size_t n;
} rpc_entries;

typedef struct rpc_landed {
	msb_landed_artifact *v;
	size_t n;
} rpc_landed;

/* An object for a new handle: the handler sets obj (and extra); the
 * generic layer adds the handle - parent: the method's first handle
 * parameter; a sandbox whose parent is a call belongs to the call - and
 * answers its name (a sandbox's also its instance_id and backend). obj and
 * extra.aux are the handle's from then on, freed with it even when the
 * handle cannot be made. */
typedef struct rpc_new {
	void *obj;
	rpc_handle_extra extra;
} rpc_new;

/* ---- the request being served --------------------------------------------------------------- */

typedef struct rpc_call {
	rpc_server *srv;
	rpc_handles *handles; /* the server's handle table (NULL: the method takes none) */
	const rpc_method *method;
	void *frame;
} rpc_call;

/* The request this thread is serving (NULL outside a handler). */
rpc_call *rpc_call_current(void);
/* The call's handle parameter of `kind` (the first; NULL when none). */
rpc_handle *rpc_call_handle(const rpc_call *c, rpc_hkind kind);

/*
 * Serve one request with method `m`: read params (an object, or NULL for
 * none) into a frame, call the handler, answer *result (a new reference).
 * Returns 0 or a negative code with *err set, as a handler does.
 */
int rpc_invoke(rpc_server *srv, rpc_handles *handles, const rpc_method *m, json_t *params,
	       json_t **result, msb_error **err);

/* Composite parameter readers (args.c): v is present and not null. */
int rpc_read_composite(const rpc_param *p, json_t *v, void *field, msb_error **err);
/* Release what a composite field owns. */
void rpc_free_composite(const rpc_param *p, void *field);

/* ---- describing methods --------------------------------------------------------------------- */

/* 0, after checking at compile time that frame T's field f has type `type`. */
#define RPC_FIELD_IS(T, f, type)                                                                   \
	(0 * sizeof(struct {                                                                       \
		 _Static_assert(__builtin_types_compatible_p(__typeof__(((T *)0)->f), type),       \
				"`" #f "` of " #T " is not " #type);                               \
		 char c;                                                                           \
	 }))
#define RPC_AT(T, f, type) (offsetof(T, f) + RPC_FIELD_IS(T, f, type))

/* A method's row: {"name", RPC_FRAME(T), handler, RPC_PARAMS(...), RPC_RESULTS(...)?,
 * RPC_FLAGS(...)?}. */
#define RPC_FRAME(T) sizeof(T)
#define RPC_PARAMS(...) .params = ((const rpc_param[]){__VA_ARGS__, {.name = NULL}})
#define RPC_NO_PARAMS .params = ((const rpc_param[]){{.name = NULL}})
#define RPC_RESULTS(...) .results = ((const rpc_result[]){__VA_ARGS__, {.type = RPC_R_END}})
#define RPC_FLAGS(f) .flags = (f)

/* Parameters: the name is the field's; options follow (RPC_REQ, a default). */
#define RPC_REQ .flags = RPC_REQUIRED
#define RPC_DEFAULT(v) .num = (v)
#define RPC_DEFAULT_STR(s) .str = (s)
#define RPC_P_(T, f, name_, t, ctype, ...)                                                         \
	{                                                                                          \
		.name = name_, .type = t, .off = RPC_AT(T, f, ctype), __VA_ARGS__                  \
	}
#define P_HANDLE(T, f, k, ...) RPC_P_(T, f, #f, RPC_T_HANDLE, rpc_handle *, .kind = k, __VA_ARGS__)
#define P_STR(T, f, ...) RPC_P_(T, f, #f, RPC_T_STR, const char *, __VA_ARGS__)
#define P_BOOL(T, f, ...) RPC_P_(T, f, #f, RPC_T_BOOL, bool, __VA_ARGS__)
#define P_U64(T, f, ...) RPC_P_(T, f, #f, RPC_T_U64, uint64_t, __VA_ARGS__)
#define P_DOUBLE(T, f, ...) RPC_P_(T, f, #f, RPC_T_DOUBLE, double, __VA_ARGS__)
#define P_STRV(T, f, ...) RPC_P_(T, f, #f, RPC_T_STRV, const char **, __VA_ARGS__)
#define P_BYTES(T, f, name, ...) RPC_P_(T, f, name, RPC_T_BYTES, rpc_bytes, __VA_ARGS__)
#define P_DOC(T, f, ...) RPC_P_(T, f, #f, RPC_T_DOC, rpc_doc, __VA_ARGS__)
#define P_ENV(T, f, ...) RPC_P_(T, f, #f, RPC_T_ENV, char **, __VA_ARGS__)
#define P_OBJECT(T, f, ...) RPC_P_(T, f, #f, RPC_T_OBJECT, json_t *, __VA_ARGS__)
#define P_SPEC(T, f, ...) RPC_P_(T, f, #f, RPC_T_SPEC, msb_spec *, __VA_ARGS__)
#define P_KEY(T, f, ...) RPC_P_(T, f, #f, RPC_T_KEY, rpc_key, __VA_ARGS__)
#define P_SINK(T, f, ...) RPC_P_(T, f, #f, RPC_T_SINK, msb_output_sink *, __VA_ARGS__)
#define P_OUTPUTS(T, f, ...) RPC_P_(T, f, #f, RPC_T_OUTPUTS, rpc_outputs, __VA_ARGS__)
#define P_LIMITS(T, f, ...) RPC_P_(T, f, #f, RPC_T_LIMITS, msb_transfer_limits, __VA_ARGS__)
#define P_OUTCOME(T, f, ...) RPC_P_(T, f, #f, RPC_T_OUTCOME, msb_call_outcome, __VA_ARGS__)
#define P_ENUM(T, f, list, ...) RPC_P_(T, f, #f, RPC_T_ENUM, int, .names = list, __VA_ARGS__)
/* A parameter whose name is not a C identifier one can use ("stdin"). */
#define P_NAMED(name, T, f, t, ctype, ...) RPC_P_(T, f, name, t, ctype, __VA_ARGS__)

/* Results. */
#define RPC_R_(T, f, name_, t, ctype, ...)                                                         \
	{                                                                                          \
		.name = name_, .type = t, .off = RPC_AT(T, f, ctype), __VA_ARGS__                  \
	}
#define R_STR(name, T, f, ...) RPC_R_(T, f, name, RPC_R_STR, const char *, __VA_ARGS__)
#define R_TEXT(name, T, f, ...) RPC_R_(T, f, name, RPC_R_TEXT, char *, __VA_ARGS__)
#define R_BOOL(name, T, f) RPC_R_(T, f, name, RPC_R_BOOL, bool)
#define R_U64(name, T, f) RPC_R_(T, f, name, RPC_R_U64, uint64_t)
#define R_SIZE(name, T, f) RPC_R_(T, f, name, RPC_R_SIZE, size_t)
#define R_DOUBLE(name, T, f) RPC_R_(T, f, name, RPC_R_DOUBLE, double)
#define R_BYTES(name, T, f) RPC_R_(T, f, name, RPC_R_BYTES, rpc_bytes)
#define R_EXEC(T, f) RPC_R_(T, f, NULL, RPC_R_EXEC, msb_exec_result)
#define R_ENTRY(name, T, f) RPC_R_(T, f, name, RPC_R_ENTRY, msb_entry)
#define R_ENTRIES(name, T, f) RPC_R_(T, f, name, RPC_R_ENTRIES, rpc_entries)
#define R_LANDED(name, T, f) RPC_R_(T, f, name, RPC_R_LANDED, rpc_landed)
#define R_KEY(name, T, f, ...) RPC_R_(T, f, name, RPC_R_KEY, msb_key *, __VA_ARGS__)
#define R_STRV(name, T, f) RPC_R_(T, f, name, RPC_R_STRV, char **)
#define R_JSON(name, T, f, ...) RPC_R_(T, f, name, RPC_R_JSON, json_t *, __VA_ARGS__)
#define R_JSON_TEXT(name, T, f) RPC_R_(T, f, name, RPC_R_JSON_TEXT, char *)
#define R_HANDLE(name, T, f, k, ...)                                                               \
	RPC_R_(T, f, name, RPC_R_HANDLE, rpc_new, .kind = k, __VA_ARGS__)
#define RPC_OMIT .flags = RPC_OMIT_NULL

#endif
