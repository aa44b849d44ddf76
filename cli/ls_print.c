/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rows of `msb ls` and `msb pool ls`: the sandboxes an `ns` backend keeps
 * on disk (msb_ns_list) and its pooled ones (msb_ns_pool_list, docs/pool.md),
 * as a table or one JSON array.
 */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>
#include <msb/ns.h>

#include "cli.h"

/* The state as the library's listing judges it (msb_ns_list): the row
 * formats it and adds nothing of its own. */
/* running; dead: its agent or shim died unasked, kept until disposed of
 * (issue 15); stale: never started, or taken down on purpose */
static const char *state_name(const msb_ns_entry *e)
{
	return e->alive ? "running" : e->dead ? "dead" : "stale";
}

static void print_entries(const msb_ns_entry *e, size_t n, const char *backend, json_t *arr)
{
	if (!arr && n)
		cli_ls_header();
	for (size_t i = 0; i < n; i++) {
		int64_t age = cli_age_seconds(e[i].created_ns);
		if (arr) {
			json_t *o = json_pack(
				"{s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:s, s:s?, s:o, s:o, "
				"s:b, s:I, s:s?}",
				"name", e[i].name, "scope", e[i].scope, "thread_id", e[i].thread_id,
				"agent_dir", e[i].agent_dir, "kind", e[i].kind, "instance_id",
				e[i].instance_id, "call_id", e[i].call_id, "backend", backend,
				"state", state_name(&e[i]), "image", e[i].image, "created_ns",
				e[i].created_ns > 0 ? json_integer(e[i].created_ns) : json_null(),
				"age_s", age >= 0 ? json_integer(age) : json_null(), "alive",
				e[i].alive, "shim_pid", (json_int_t)e[i].shim_pid, "reason",
				e[i].reason);
			if (o)
				json_array_append_new(arr, o);
			continue;
		}
		char a[32];
		cli_format_age(age, a, sizeof(a));
		printf("%-36s %-8s %-8s %-24s %-5s scope=%s thread=%s agent=%s kind=%s%s%s%s%s\n",
		       e[i].name, state_name(&e[i]), backend, e[i].image ? e[i].image : "-", a,
		       e[i].scope, e[i].thread_id, e[i].agent_dir, e[i].kind,
		       e[i].call_id ? " call=" : "", e[i].call_id ? e[i].call_id : "",
		       e[i].reason ? ": " : "", e[i].reason ? e[i].reason : "");
	}
}

/* Pooled sandboxes: no key yet; the pool's template and state instead. */
static void print_pooled(const msb_ns_pool_entry *e, size_t n, const char *backend, bool header,
			 json_t *arr)
{
	if (!arr && n && header)
		cli_ls_header();
	for (size_t i = 0; i < n; i++) {
		int64_t age = cli_age_seconds(e[i].created_ns);
		if (arr) {
			json_t *o = json_pack(
				"{s:s, s:s, s:s, s:o, s:o, s:b, s:I, s:{s:s, s:s}}", "name",
				e[i].name, "backend", backend, "state", "pooled", "created_ns",
				e[i].created_ns > 0 ? json_integer(e[i].created_ns) : json_null(),
				"age_s", age >= 0 ? json_integer(age) : json_null(), "alive",
				e[i].shim_pid > 0, "shim_pid", (json_int_t)e[i].shim_pid, "pool",
				"template", e[i].template_id, "state", e[i].state);
			if (o)
				json_array_append_new(arr, o);
			continue;
		}
		char a[32];
		cli_format_age(age, a, sizeof(a));
		printf("%-36s %-8s %-8s %-24s %-5s template=%s %s\n", e[i].name, "pooled", backend,
		       "-", a, e[i].template_id, e[i].state);
	}
}

void cli_ls_print(const msb_ns_entry *e, size_t n, const msb_ns_pool_entry *pe, size_t pn,
		  const char *backend, bool as_json)
{
	json_t *arr = as_json ? json_array() : NULL;
	print_entries(e, n, backend, arr);
	print_pooled(pe, pn, backend, n == 0, arr);
	if (arr) {
		char *t = json_dumps(arr, JSON_COMPACT);
		printf("%s\n", t ? t : "[]");
		free(t);
		json_decref(arr);
	}
}
