/* SPDX-License-Identifier: Apache-2.0 */
/* Observer seam (checklist 17.1, 17.3, 17.17) and the JSON-lines recorder. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <msb/observer.h>

#include "core/core.h"

static int acquired_calls;
static int on_acquired(void *ud, const msb_ev_sandbox_acquired *ev)
{
	(void)ud;
	acquired_calls++;
	cr_assert_str_eq(ev->key->scope, "tenant-1");
	return 0;
}

/* 17.1: overriding one handler receives only that event; the others are no-ops. */
Test(observer, one_handler_only_17_1)
{
	msb_observer o = MSB_OBSERVER_INIT;
	o.sandbox_acquired = on_acquired;
	msb_key key = {"tenant-1", "t-1", "devops", NULL};
	msb_ev_sandbox_acquired ev = {.key = &key};
	msb_ev_scope_disposed sd = {.scope = "tenant-1", .thread_id = "t-1", .disposed = 3};
	acquired_calls = 0;
	msb_observer__sandbox_acquired(&o, NULL, &ev);
	msb_observer__scope_disposed(&o, NULL, &sd);	 /* NULL slot: ignored */
	msb_observer__sandbox_acquired(NULL, NULL, &ev); /* no observer: nothing */
	cr_assert_eq(acquired_calls, 1);
}

static int always_fails(void *ud, const msb_ev_scope_disposed *ev)
{
	(void)ud;
	(void)ev;
	return -5;
}

static char last_log[256];
static int log_lines;
static void capture_log(void *ud, msb_log_level level, const char *component, const char *message)
{
	(void)ud;
	cr_assert_eq(level, MSB_LOG_WARNING);
	cr_assert_str_eq(component, "observer");
	snprintf(last_log, sizeof(last_log), "%s", message);
	log_lines++;
}

/* 17.17: an observer failure is contained and logged, one line per failure. */
Test(observer, failure_contained_and_logged_17_17)
{
	msb_observer o = MSB_OBSERVER_INIT;
	o.scope_disposed = always_fails;
	msb_logger lg = {capture_log, NULL};
	msb_ev_scope_disposed sd = {.scope = "s", .thread_id = "t", .disposed = 1};
	log_lines = 0;
	msb_observer__scope_disposed(&o, &lg, &sd);
	msb_observer__scope_disposed(&o, &lg, &sd);
	cr_assert_eq(log_lines, 2);
	cr_assert(strstr(last_log, "scope_disposed") != NULL, "%s", last_log);
}

static char *read_all(FILE *f)
{
	fflush(f);
	rewind(f);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	return buf;
}

Test(observer, jsonl_writes_one_object_per_line)
{
	FILE *f = tmpfile();
	cr_assert_not_null(f);
	msb_jsonl_recorder *rec = NULL;
	msb_observer o;
	cr_assert_eq(msb_jsonl_recorder_new(fileno(f), &rec, &o, NULL), 0);
	msb_key key = {"tenant-1", "t-1", "devops", NULL};
	msb_ev_sandbox_acquired ev = {.key = &key, .refusal = "SandboxEgressNotEnforced"};
	msb_observer__sandbox_acquired(&o, NULL, &ev);
	struct msb_egress_record rec1 = {.time_ns = 1,
					 .decision = MSB_EGRESS_DENY,
					 .host = "evil.example",
					 .port = 443,
					 .reason = "not-allowlisted"};
	msb_ev_egress_observed eg = {.key = &key, .record = &rec1};
	msb_observer__egress_observed(&o, NULL, &eg);
	msb_jsonl_recorder_free(rec);

	char *text = read_all(f);
	char *nl = strchr(text, '\n');
	cr_assert_not_null(nl);
	*nl = 0;
	json_t *a = json_loads(text, 0, NULL);
	json_t *b = json_loads(nl + 1, JSON_DISABLE_EOF_CHECK, NULL);
	cr_assert_not_null(a);
	cr_assert_not_null(b);
	cr_assert_str_eq(json_string_value(json_object_get(a, "event")), "SandboxAcquired");
	cr_assert_str_eq(json_string_value(json_object_get(a, "refusal")),
			 "SandboxEgressNotEnforced");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "key"), "agent_dir")),
			 "devops");
	cr_assert_str_eq(json_string_value(json_object_get(b, "event")), "EgressObserved");
	cr_assert_str_eq(json_string_value(json_object_get(b, "decision")), "DENY");
	cr_assert_eq(json_integer_value(json_object_get(b, "port")), 443);
	/* 17.5: EgressObserved's call column is always null. */
	cr_assert(json_is_null(json_object_get(b, "call")));
	json_decref(a);
	json_decref(b);
	fclose(f);
}

struct writer_arg {
	msb_observer *o;
	int id;
};

static void *writer(void *p)
{
	struct writer_arg *w = p;
	char scope[32];
	snprintf(scope, sizeof(scope), "scope-%d", w->id);
	for (int i = 0; i < 200; i++) {
		msb_ev_scope_disposed sd = {
			.scope = scope, .thread_id = "t", .disposed = (uint64_t)i};
		msb_observer__scope_disposed(w->o, NULL, &sd);
	}
	return NULL;
}

/* Events arrive from several threads (17.17): lines never interleave. */
Test(observer, jsonl_lines_never_interleave)
{
	FILE *f = tmpfile();
	msb_jsonl_recorder *rec = NULL;
	msb_observer o;
	cr_assert_eq(msb_jsonl_recorder_new(fileno(f), &rec, &o, NULL), 0);
	pthread_t th[4];
	struct writer_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct writer_arg){&o, i};
		pthread_create(&th[i], NULL, writer, &args[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	msb_jsonl_recorder_free(rec);
	char *text = read_all(f);
	int lines = 0;
	for (char *line = text, *next; *line; line = next) {
		next = strchr(line, '\n');
		cr_assert_not_null(next);
		*next++ = 0;
		json_t *v = json_loads(line, 0, NULL);
		cr_assert_not_null(v, "line %d not JSON: %s", lines, line);
		cr_assert_str_eq(json_string_value(json_object_get(v, "event")), "ScopeDisposed");
		json_decref(v);
		lines++;
	}
	cr_assert_eq(lines, 800);
	fclose(f);
}
