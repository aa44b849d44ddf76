/* SPDX-License-Identifier: Apache-2.0 */
/* Library-internal declarations of the host-tools module (src/core/hosttools/). */
#ifndef MSB_CORE_HOSTTOOLS_INT_H
#define MSB_CORE_HOSTTOOLS_INT_H

#include <jansson.h>
#include <msb/hosttools.h>
#include <pthread.h>
#include <stdatomic.h>

#include "util/util.h"

struct msb_hosttools_entry {
	char *name;
	char *description;
	json_t *schema;
	bool declared; /* a complete stamp was captured at registration */
	msb_host_tool_decl decl;
	char *sink; /* decl.sink points here */
	msb_host_tool_fn fn;
	void *ud;
};

struct msb_host_tool_registry {
	atomic_uint refs;
	pthread_mutex_t lock; /* tools, n, sealed */
	bool sealed;
	struct msb_hosttools_entry *tools;
	size_t n;
	bool require_declared;
	msb_identity_set allowed;
	uint64_t max_calls;
	msb_transfer_limits limits;
	msb_observer observer;
	bool has_observer;
	msb_mint_user_identity_fn mint;
	void *mint_ud;
	msb_logger log;
};

/* Entries are never removed or moved once sealed; lookups before the seal
 * hold the registry lock. */
const struct msb_hosttools_entry *msb_hosttools__lookup(const msb_host_tool_registry *r,
							const char *name);

/* Registration: refuse a schema using a keyword the validator does not
 * implement, or one whose top level is not an object schema. */
int msb_hosttools__schema_check(json_t *schema, const char *where, msb_error **err);
/* 0 valid; 1 invalid with *msg (malloc) naming the first violation; -ENOMEM. */
int msb_hosttools__schema_validate(json_t *schema, json_t *args, char **msg);

/* The door over an already-parsed request. name/args may be any JSON (args
 * NULL = none); `unreadable` (a refusal sentence, or NULL) answers a request
 * the transport could not take in, after the call is counted. */
int msb_hosttools__door(msb_host_tool_run *run, json_t *name, json_t *args, const char *unreadable,
			int64_t framing_bytes, msb_host_tool_result *out, msb_error **err);

/*
 * The budget on one host-tool request (docs/security.md, "Budgets on guest
 * bytes"): a transport never holds more of one request than this. A request
 * past it is read (or drained) without being held and answered through the
 * door with MSB_HOSTTOOLS_TOO_LARGE: counted as a call (13.18), observed
 * (13.29), a refusal the guest reads.
 */
#define MSB_HOSTTOOLS_MAX_REQUEST_BYTES (1u << 20)
#define MSB_HOSTTOOLS_TOO_LARGE                                                                    \
	"Error: this host-tool request is over the 1048576-byte limit — send smaller arguments"
_Static_assert(MSB_HOSTTOOLS_MAX_REQUEST_BYTES == 1048576, "the sentence names the limit");

/* Count a request the transport refused to take in, and answer `sentence`. */
int msb_hosttools__refuse_request(msb_host_tool_run *run, const char *sentence,
				  int64_t framing_bytes, msb_host_tool_result *out,
				  msb_error **err);

/* `s` quoted the way the seed's sentences quote a name ('x'), bounded to
 * MSB_HOST_TOOL_BOUND characters then " (truncated)" when `bound`. */
char *msb_hosttools__quote(const char *s, bool bound);

/* A response as both transports write it: {"value": <the tool's JSON>} or
 * {"refusal": "<sentence>"}; the framing counts against the response cap.
 * Clears *res; NULL when out of memory. */
#define MSB_HOSTTOOLS_FRAME_OPEN "{\"value\": "
#define MSB_HOSTTOOLS_FRAME_CLOSE "}"
#define MSB_HOSTTOOLS_FRAMING_BYTES                                                                \
	((int64_t)(sizeof(MSB_HOSTTOOLS_FRAME_OPEN) - 1 + sizeof(MSB_HOSTTOOLS_FRAME_CLOSE) - 1))
struct msb_host_tool_result;
char *msb_hosttools__response_body(struct msb_host_tool_result *res);

/* Over exec (hosttools_layout.c): the launcher text for a layout; the names
 * the generated shim binds; whether a name gets a convenience wrapper. */
struct msb_guest_run_layout;
int msb_hosttools__launcher(const struct msb_guest_run_layout *l, const char *interpreter,
			    double gate_seconds, char **out);
extern const char *const msb_hosttools__shim_globals[];
bool msb_hosttools__spellable(const char *name);

/* Tests: forget that the one-time notice was given (and unsuppress it). */
void msb_hosttools__notice_reset(void);

#endif
