/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `msb ls` for the container-engine backends (`docker`, `wslc`; docs/cli.md):
 * the sandboxes the engine holds for msb as msb_engine_list reads them back
 * by msb's labels (21.30-21.31), in the table and JSON shape of the ns
 * listing (ls_print.c). Built on every platform: on Windows it is what `msb
 * ls` lists (docs/windows.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jansson.h>
#include <msb/engine.h>

#include "cli.h"

int64_t cli_age_seconds(int64_t created_ns)
{
	time_t now = time(NULL);
	if (created_ns <= 0 || now == (time_t)-1)
		return -1;
	int64_t d = (int64_t)now - created_ns / 1000000000;
	return d < 0 ? 0 : d;
}

void cli_format_age(int64_t s, char *out, size_t size)
{
	if (s < 0)
		snprintf(out, size, "-");
	else if (s < 60)
		snprintf(out, size, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(out, size, "%lldm", (long long)(s / 60));
	else if (s < 86400)
		snprintf(out, size, "%lldh", (long long)(s / 3600));
	else
		snprintf(out, size, "%lldd", (long long)(s / 86400));
}

void cli_ls_header(void)
{
	printf("%-36s %-8s %-8s %-24s %-5s %s\n", "NAME", "STATE", "BACKEND", "IMAGE", "AGE",
	       "KEY");
}

static const char *or_dash(const char *s)
{
	return s ? s : "-";
}

static void print_row(const msb_engine_entry *e, const char *backend, json_t *arr)
{
	const char *state = e->running ? "running" : "stopped";
	int64_t age = cli_age_seconds(e->created_ns);
	if (arr) {
		json_t *o = json_pack(
			"{s:s, s:s?, s:s?, s:s?, s:s?, s:s, s:s, s:s, s:s?, s:o, s:o, s:b}", "name",
			e->name, "scope", e->scope, "thread_id", e->thread_id, "agent_dir",
			e->agent_dir, "kind", e->kind, "instance_id", e->id, "backend", backend,
			"state", state, "image", e->image, "created_ns",
			e->created_ns > 0 ? json_integer(e->created_ns) : json_null(), "age_s",
			age >= 0 ? json_integer(age) : json_null(), "alive", e->running);
		if (o)
			json_array_append_new(arr, o);
		return;
	}
	char a[32];
	cli_format_age(age, a, sizeof(a));
	printf("%-36s %-8s %-8s %-24s %-5s scope=%s thread=%s agent=%s kind=%s\n", e->name, state,
	       backend, or_dash(e->image), a, or_dash(e->scope), or_dash(e->thread_id),
	       or_dash(e->agent_dir), or_dash(e->kind));
}

int cli_ls_engine(msb_backend *b, bool as_json, msb_error **err)
{
	msb_engine_entry *e = NULL;
	size_t n = 0;
	int r = msb_engine_list(b, &e, &n, err);
	if (r < 0)
		return r;
	json_t *arr = as_json ? json_array() : NULL;
	if (!arr && n)
		cli_ls_header();
	for (size_t i = 0; i < n; i++)
		print_row(&e[i], msb_backend_name(b), arr);
	if (arr) {
		char *t = json_dumps(arr, JSON_COMPACT);
		printf("%s\n", t ? t : "[]");
		free(t);
		json_decref(arr);
	}
	msb_engine_entries_free(e, n);
	return 0;
}
