/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ns backend's egress declarations as the router judges them (checklist
 * 6.7, 6.10: allowlist served, method tokens exactly the proxy's verbs), its
 * strict egress configuration, and the records-to-events path (4.22, 17.5,
 * 17.9) with a reporter of our own.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>
#include <msb/observer.h>

#include "backends/ns/ns_int.h"
#include "egress/egress.h"
#include "util/fs.h"

static char root[] = "/tmp/msb-ns-egress-XXXXXX";

static msb_router *router_with(const char *egress_config, int *rc, msb_error **err)
{
	cr_assert_not_null(mkdtemp(root));
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.egress_config = egress_config;
	msb_backend *b = NULL;
	*rc = msb_ns_backend_new(&o, &b, err);
	if (*rc < 0)
		return NULL;
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	msb_router *r = NULL;
	*rc = msb_router_new(&b, 1, &ro, &r, err);
	msb_backend_unref(b);
	return r;
}

static void cleanup(void)
{
	msb__rm_rf_at(AT_FDCWD, root);
	memcpy(root + strlen(root) - 6, "XXXXXX", 6);
}

static int can_serve(msb_router *r, msb_egress mode, const char *host, const char *const *methods,
		     size_t n, msb_error **err)
{
	msb_spec_builder *sb = msb_spec_builder_new("k");
	msb_spec_builder_set_egress(sb, mode);
	if (host && methods)
		msb_spec_builder_add_egress_rule(sb, host, methods, n);
	else if (host)
		msb_spec_builder_add_egress_host(sb, host);
	msb_spec *spec = NULL;
	int rc = msb_spec_build(sb, &spec, err);
	msb_spec_builder_free(sb);
	if (rc < 0)
		return rc;
	rc = msb_router_ensure_can_serve(r, spec, err);
	msb_spec_unref(spec);
	return rc;
}

Test(ns_egress, declares_allowlist_and_the_proxys_verbs_6_7_6_10, .fini = cleanup)
{
	int rc;
	msb_error *err = NULL;
	msb_router *r = router_with(NULL, &rc, &err);
	cr_assert_eq(rc, 0, "%s", msb_error_message(err));
	cr_assert_eq(can_serve(r, MSB_EGRESS_CLOSED, NULL, NULL, 0, &err), 0);
	cr_assert_eq(can_serve(r, MSB_EGRESS_ALLOWLIST, "example.com", NULL, 0, &err), 0, "%s",
		     msb_error_message(err));
	static const char *const get[] = {"GET", "HEAD"};
	cr_assert_eq(can_serve(r, MSB_EGRESS_ALLOWLIST, "api.example.com", get, 2, &err), 0, "%s",
		     msb_error_message(err));
	for (size_t i = 0; msb_egress__method_tokens[i]; i++) {
		const char *one[] = {msb_egress__method_tokens[i]};
		cr_assert_eq(can_serve(r, MSB_EGRESS_ALLOWLIST, "h.example", one, 1, &err), 0, "%s",
			     msb_egress__method_tokens[i]);
	}
	/* Verbs the proxy cannot see or does not know are refused, not served
	 * host-wide. */
	static const char *const connect[] = {"CONNECT"};
	cr_assert_lt(can_serve(r, MSB_EGRESS_ALLOWLIST, "h.example", connect, 1, &err), 0);
	msb_error_free(err);
	err = NULL;
	static const char *const brew[] = {"BREW"};
	cr_assert_lt(can_serve(r, MSB_EGRESS_ALLOWLIST, "h.example", brew, 1, &err), 0);
	msb_error_free(err);
	err = NULL;
	/* Never unrestricted. */
	cr_assert_eq(can_serve(r, MSB_EGRESS_UNRESTRICTED, NULL, NULL, 0, &err),
		     MSB_E_EGRESS_NOT_ENFORCED);
	msb_error_free(err);
	msb_router_free(r);
	cr_assert_eq(MSB_EGRESS_N_METHOD_TOKENS,
		     sizeof(msb_egress__method_tokens) / sizeof(msb_egress__method_tokens[0]) - 1);
	cr_assert_null(msb_egress__method_tokens[MSB_EGRESS_N_METHOD_TOKENS]);
}

Test(ns_egress, backend_config_is_strict, .fini = cleanup)
{
	static const char *const bad[] = {
		"{\"allow_cidr\": [\"127.0.0.0/8\"]}",		 /* unknown key */
		"{\"allow\": [{\"host\": \"a.example\"}]}",	 /* rules come from the spec */
		"{\"allow_cidrs\": [\"127.0.0.0/33\"]}",	 /* not a CIDR */
		"{\"allow_cidrs\": \"127.0.0.0/8\"}",		 /* not a list */
		"{\"hosts\": {\"a.example\": [\"not-an-ip\"]}}", /* bad address */
		"{\"max_tunnels\": 61}",			 /* over the channel cap */
		"{\"header_timeout_ms\": 0}",
		"[1]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;
		msb_error *err = NULL;
		msb_router *r = router_with(bad[i], &rc, &err);
		cr_expect_lt(rc, 0, "accepted %s", bad[i]);
		cr_expect(msb_error_message(err) && strstr(msb_error_message(err), "egress"),
			  "%s: %s", bad[i], msb_error_message(err));
		msb_error_free(err);
		msb_router_free(r);
		cleanup();
	}
	int rc;
	msb_error *err = NULL;
	msb_router *r = router_with("{\"allow_cidrs\": [\"127.0.0.0/8\", \"::1\"], \"hosts\": "
				    "{\"t.example\": [\"127.0.0.1\"]}, \"max_tunnels\": 8}",
				    &rc, &err);
	cr_assert_eq(rc, 0, "%s", msb_error_message(err));
	msb_router_free(r);
}

struct seen {
	int n;
	msb_egress_decision decision[4];
	char host[4][64];
	char method[4][16];
	char scope[32];
};

static void report(void *ud, const msb_key *key, const msb_egress_record *rec)
{
	struct seen *s = ud;
	if (s->n < 4) {
		s->decision[s->n] = rec->decision;
		snprintf(s->host[s->n], sizeof(s->host[0]), "%s", rec->host);
		snprintf(s->method[s->n], sizeof(s->method[0]), "%s",
			 rec->method ? rec->method : "-");
		snprintf(s->scope, sizeof(s->scope), "%s", key->scope);
	}
	s->n++;
}

Test(ns_egress, records_become_events_once_17_9)
{
	char dir[] = "/tmp/msb-ns-egress-log-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *log =
		"{\"time_ns\":1,\"decision\":\"ALLOW\",\"host\":\"a.example\",\"port\":443,"
		"\"method\":null,\"reason\":\"allowlisted\",\"bytes_up\":10,\"bytes_down\":20}\n"
		"this line is not a record\n"
		"{\"time_ns\":2,\"decision\":\"DENY\",\"host\":\"b.example\",\"port\":80,"
		"\"method\":\"POST\",\"reason\":\"method-not-allowed\",\"bytes_up\":0,"
		"\"bytes_down\":0}\n"
		"{\"time_ns\":3,\"decision\":\"DENY\",\"host\":\"partial";
	cr_assert_eq(msb__write_file_atomic_at(dfd, MSB_EGRESS_LOG_NAME, log, strlen(log), 0600),
		     0);
	struct seen s = {0};
	msb_egress_reporter rep = {report, &s};
	msb_key key = {"scope-1", "t", "a", NULL};
	msb_ns__egress_drain(dfd, &key, &rep);
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.decision[0], MSB_EGRESS_ALLOW);
	cr_assert_str_eq(s.host[0], "a.example");
	cr_assert_str_eq(s.method[0], "-");
	cr_assert_eq(s.decision[1], MSB_EGRESS_DENY);
	cr_assert_str_eq(s.method[1], "POST");
	cr_assert_str_eq(s.scope, "scope-1");
	/* Consumed: a second read reports nothing again. */
	msb_ns__egress_drain(dfd, &key, &rep);
	cr_assert_eq(s.n, 2);
	close(dfd);
	msb__rm_rf_at(AT_FDCWD, dir);
}

/* The host reads at most the log's budget (MSB_EGRESS_LOG_MAX, plus one
 * record of slack) in one go, whatever the file holds: a log of the budget is
 * reported whole, a larger one - which no shim writes - is consumed unread. */
Test(ns_egress, the_host_reads_the_log_within_its_budget)
{
	static const char rec[] =
		"{\"time_ns\":1,\"decision\":\"DENY\",\"host\":\"b.example\",\"port\":80,"
		"\"method\":\"POST\",\"reason\":\"method-not-allowed\",\"bytes_up\":0,"
		"\"bytes_down\":0}\n";
	size_t fit = (MSB_EGRESS_LOG_MAX + MSB_EGRESS_RECORD_MAX) / (sizeof(rec) - 1);
	for (int over = 0; over <= 1; over++) {
		char dir[] = "/tmp/msb-ns-egress-cap-XXXXXX";
		cr_assert_not_null(mkdtemp(dir));
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		size_t n = fit + (size_t)over;
		char *log = malloc(n * (sizeof(rec) - 1) + 1);
		for (size_t i = 0; i < n; i++)
			memcpy(log + i * (sizeof(rec) - 1), rec, sizeof(rec) - 1);
		cr_assert_eq(msb__write_file_atomic_at(dfd, MSB_EGRESS_LOG_NAME, log,
						       n * (sizeof(rec) - 1), 0600),
			     0);
		free(log);
		struct seen s = {0};
		msb_egress_reporter rep = {report, &s};
		msb_key key = {"scope-1", "t", "a", NULL};
		msb_ns__egress_drain(dfd, &key, &rep);
		cr_assert_eq((size_t)s.n, over ? 0 : n, "%d records of %zu", s.n, n);
		struct stat st;
		cr_assert_eq(fstatat(dfd, MSB_EGRESS_LOG_NAME, &st, 0), 0);
		cr_assert_eq(st.st_size, 0, "consumed");
		close(dfd);
		msb__rm_rf_at(AT_FDCWD, dir);
	}
}
