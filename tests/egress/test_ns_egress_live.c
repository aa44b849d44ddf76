/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allowlist proxy of a live ns sandbox through the library: a request
 * answers, its record becomes an EgressObserved event with the key and no
 * call (4.22, 17.5, 17.9), and after a reset (the shim restarts the sandbox
 * and its proxy) the proxy answers again. Needs root, MSB_SHIM and
 * MSB_AGENT (set by meson).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>
#include <msb/observer.h>

#include "util/fs.h"

static int lfd = -1;
static int port;

/* A destination on the host's loopback: one fixed answer per connection. */
static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[4096];
		size_t got = 0;
		while (got < sizeof(buf) - 1) {
			ssize_t n = read(c, buf + got, sizeof(buf) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
			buf[got] = '\0';
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		const char *resp =
			"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\n"
			"live!\n";
		ssize_t w = write(c, resp, strlen(resp));
		(void)w;
		close(c);
	}
}

struct events {
	int allow, deny, with_call;
	char scope[64];
};

static int on_egress(void *ud, const msb_ev_egress_observed *ev)
{
	struct events *e = ud;
	if (ev->record->decision == MSB_EGRESS_ALLOW)
		e->allow++;
	else
		e->deny++;
	if (ev->call)
		e->with_call++;
	snprintf(e->scope, sizeof(e->scope), "%s", ev->key->scope);
	return 0;
}

static int get(msb_sandbox *sb, const char *host, char *out, size_t cap)
{
	char code[512];
	snprintf(code, sizeof(code),
		 "import urllib.request\n"
		 "try:\n"
		 "    print(urllib.request.urlopen('http://%s:%d/', timeout=20).status)\n"
		 "except Exception as e:\n"
		 "    print(getattr(e, 'code', 0))\n",
		 host, port);
	const char *argv[] = {"python3", "-c", code, NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 60;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	int r = msb_sandbox_exec(sb, &req, &res, &err);
	cr_assert_eq(r, 0, "%s", msb_error_message(err));
	snprintf(out, cap, "%.*s", (int)res.stdout_len, (const char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	return 0;
}

Test(ns_egress_live, request_event_and_reset)
{
	if (geteuid() != 0)
		cr_skip_test("needs root");
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	cr_assert_eq(listen(lfd, 16), 0);
	pthread_t th;
	pthread_create(&th, NULL, serve, NULL);

	char root[] = "/tmp/msb-egress-live-XXXXXX";
	cr_assert_not_null(mkdtemp(root));
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.egress_config =
		"{\"allow_cidrs\": [\"127.0.0.0/8\"], \"hosts\": {\"d.test\": "
		"[\"127.0.0.1\"], \"e.test\": [\"127.0.0.1\"]}, \"system_resolver\": false}";
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &err), 0, "%s", msb_error_message(err));
	struct events ev = {0};
	msb_observer obs = MSB_OBSERVER_INIT;
	obs.userdata = &ev;
	obs.egress_observed = on_egress;
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	ro.observer = &obs;
	msb_router *r = NULL;
	cr_assert_eq(msb_router_new(&b, 1, &ro, &r, &err), 0, "%s", msb_error_message(err));
	msb_backend_unref(b);

	msb_spec_builder *sbld = msb_spec_builder_new("live");
	msb_spec_builder_set_requires(sbld, MSB_CAP_EXEC | MSB_CAP_SNAPSHOT);
	msb_spec_builder_set_egress(sbld, MSB_EGRESS_ALLOWLIST);
	msb_spec_builder_add_egress_host(sbld, "d.test");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sbld, &spec, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(sbld);
	msb_key key = {"live-scope", "t1", "agent", NULL};
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, spec, NULL, &sb, &err), 0, "%s",
		     msb_error_message(err));

	char out[64];
	get(sb, "d.test", out, sizeof(out));
	cr_expect_str_eq(out, "200\n");
	get(sb, "e.test", out, sizeof(out));
	cr_expect_str_eq(out, "403\n");
	/* Read when each exec completed: both decisions are events already. */
	cr_expect_eq(ev.allow, 1);
	cr_expect_eq(ev.deny, 1);
	cr_expect_eq(ev.with_call, 0);
	cr_expect_str_eq(ev.scope, "live-scope");

	cr_assert_eq(msb_sandbox_reset(sb, 30, &err), 0, "%s", msb_error_message(err));
	get(sb, "d.test", out, sizeof(out));
	cr_expect_str_eq(out, "200\n", "the proxy is back after a reset");
	cr_expect_eq(ev.allow, 2);

	msb_sandbox_free(sb);
	bool gone = false;
	msb_router_dispose(r, &key, &gone, NULL);
	cr_expect(gone);
	msb_spec_unref(spec);
	msb_router_free(r);
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	pthread_join(th, NULL);
	msb__rm_rf_at(AT_FDCWD, root);
}

/* The record log's budget (docs/security.md, "Budgets on guest bytes"): a
 * guest that floods the proxy with refused requests fills the log's 1 MiB
 * between two reads; from then on, a destination the allowlist admits is
 * refused too ("record-log-full", 503) - no egress goes unrecorded - until
 * the backend reads the log at the end of the exec. The host reads at most
 * the budget's worth of records. */
static const char flood[] =
	"import os, socket, urllib.parse, urllib.request\n"
	"u = urllib.parse.urlsplit(os.environ['http_proxy'])\n"
	"denied = 0\n"
	"for i in range(9000):\n"
	"    s = socket.create_connection((u.hostname, u.port))\n"
	"    s.sendall(b'CONNECT e.test:80 HTTP/1.1\\r\\n\\r\\n')\n"
	"    denied += s.recv(4096).startswith(b'HTTP/1.1 403')\n"
	"    s.close()\n"
	"try:\n"
	"    print(denied, urllib.request.urlopen('http://d.test:%d/', timeout=20).status)\n"
	"except Exception as e:\n"
	"    print(denied, getattr(e, 'code', 0), e.headers.get('X-Msb-Egress'))\n";

Test(ns_egress_live, a_full_record_log_refuses_new_egress, .timeout = 300)
{
	if (geteuid() != 0)
		cr_skip_test("needs root");
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	cr_assert_eq(listen(lfd, 16), 0);
	pthread_t th;
	pthread_create(&th, NULL, serve, NULL);

	char root[] = "/tmp/msb-egress-full-XXXXXX";
	cr_assert_not_null(mkdtemp(root));
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.egress_config =
		"{\"allow_cidrs\": [\"127.0.0.0/8\"], \"hosts\": {\"d.test\": "
		"[\"127.0.0.1\"], \"e.test\": [\"127.0.0.1\"]}, \"system_resolver\": false}";
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &err), 0, "%s", msb_error_message(err));
	struct events ev = {0};
	msb_observer obs = MSB_OBSERVER_INIT;
	obs.userdata = &ev;
	obs.egress_observed = on_egress;
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	ro.observer = &obs;
	msb_router *r = NULL;
	cr_assert_eq(msb_router_new(&b, 1, &ro, &r, &err), 0, "%s", msb_error_message(err));
	msb_backend_unref(b);
	msb_spec_builder *sbld = msb_spec_builder_new("full");
	msb_spec_builder_set_requires(sbld, MSB_CAP_EXEC);
	msb_spec_builder_set_egress(sbld, MSB_EGRESS_ALLOWLIST);
	msb_spec_builder_add_egress_host(sbld, "d.test");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sbld, &spec, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(sbld);
	msb_key key = {"full-scope", "t1", "agent", NULL};
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, spec, NULL, &sb, &err), 0, "%s",
		     msb_error_message(err));

	char code[sizeof(flood) + 16];
	snprintf(code, sizeof(code), flood, port);
	const char *argv[] = {"python3", "-c", code, NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 240;
	msb_exec_result res = {0};
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(res.exit_code, 0, "%s", (char *)res.stderr_bytes);
	cr_expect_str_eq((char *)res.stdout_bytes, "9000 503 DENY record-log-full\n", "%s",
			 (char *)res.stderr_bytes);
	msb_exec_result_clear(&res);
	/* What the host read: no allow, and no more denials than fit 1 MiB. */
	cr_expect_eq(ev.allow, 0);
	cr_expect_gt(ev.deny, 1000);
	cr_expect_lt(ev.deny, 9000, "the log's budget dropped some of the 9000 denials");

	/* Read, the log has room again. */
	char out[64];
	get(sb, "d.test", out, sizeof(out));
	cr_expect_str_eq(out, "200\n");
	cr_expect_eq(ev.allow, 1);

	msb_sandbox_free(sb);
	bool gone = false;
	msb_router_dispose(r, &key, &gone, NULL);
	cr_expect(gone);
	msb_spec_unref(spec);
	msb_router_free(r);
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	pthread_join(th, NULL);
	msb__rm_rf_at(AT_FDCWD, root);
}
