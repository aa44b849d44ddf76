/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The native host-tool channel's server and its guest clients, on the host
 * (the ns end-to-end tests run the same through a real sandbox): the C
 * header-only client and the Python module reach the same door as over
 * exec - same gates, caps and events (checklist 13.18, 13.20, 13.22, 13.29).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/msb.h>

#include "../../clients/c/msb_host_tools.h"

static char tmp[128];
static char sock[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/msb-native-%d-XXXXXX", (int)getpid());
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(sock, sizeof(sock), "%s/" MSB_HOST_TOOLS_SOCKET_NAME, tmp);
}

static void teardown(void)
{
	nftw(tmp, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(native, .init = setup, .fini = teardown, .timeout = 60);

static int add_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	json_t *a = json_loads(args, 0, NULL);
	long long s = json_integer_value(json_object_get(a, "left")) +
		      json_integer_value(json_object_get(a, "right"));
	json_decref(a);
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", s);
	*result = strdup(buf);
	return 0;
}

static int events;
static char last_outcome[32];
static int on_called(void *ud, const msb_ev_host_tool_called *ev)
{
	events++;
	snprintf(last_outcome, sizeof(last_outcome), "%s", ev->outcome);
	return 0;
}

static const msb_host_tool_decl pure = {MSB_HOST_TOOL_DECL_VERSION,
					MSB_LEG_NONE,
					MSB_INTEGRITY_UNTRUSTED,
					MSB_LEG_NONE,
					NULL,
					MSB_LEG_NONE,
					MSB_IDENTITY_APP};

static msb_host_tool_registry *registry(uint64_t cap)
{
	static msb_observer obs = MSB_OBSERVER_INIT;
	obs.host_tool_called = on_called;
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = cap;
	o.observer = &obs;
	msb_host_tool_registry *r = NULL;
	cr_assert_eq(msb_host_tool_registry_new(&o, &r, NULL), 0);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.decl = &pure;
	t.name = "add";
	t.fn = add_fn;
	t.parameters = "{\"type\": \"object\", \"properties\": {\"left\": {\"type\": \"integer\"}, "
		       "\"right\": {\"type\": \"integer\"}}, \"required\": [\"left\", \"right\"]}";
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	events = 0;
	return r;
}

static char *call(int fd, const char *req)
{
	char *out = NULL;
	cr_assert_eq(msb_ht_call(fd, req, &out), 0);
	return out;
}

Test(native, c_client_through_the_door)
{
	msb_host_tool_registry *r = registry(3);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, NULL, &run, NULL), 0);
	msb_native_server *srv = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_native_server_start(tmp, "/guest/work", run, NULL, NULL, &srv, &err), 0,
		     "%s", err ? msb_error_message(err) : "");
	cr_assert_str_eq(msb_native_server_guest_path(srv), "/guest/work/.msb-host-tools.sock");
	struct stat st;
	cr_assert_eq(stat(sock, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0666);

	int fd = msb_ht_connect(sock);
	cr_assert_geq(fd, 0);
	char *a = call(fd, "{\"name\": \"add\", \"arguments\": {\"left\": 2, \"right\": 3}}");
	cr_assert_str_eq(a, "{\"value\": 5}");
	free(a);
	a = call(fd, "{\"name\": \"add\", \"arguments\": {\"left\": 2}}");
	cr_assert_str_eq(a, "{\"refusal\":\"Error: arguments do not bind to host tool 'add': "
			    "missing required argument 'right'\"}");
	free(a);
	/* A second connection shares the run: the cap counts across both. */
	int fd2 = msb_ht_connect(sock);
	a = call(fd2, "{\"name\": \"nope\"}");
	cr_assert_str_eq(a, "{\"refusal\":\"Error: 'nope' is not a registered host tool\"}");
	free(a);
	a = call(fd, "{\"name\": \"add\", \"arguments\": {\"left\": 2, \"right\": 3}}");
	cr_assert(strstr(a, "host-tool-call cap (3) is exhausted"), "%s", a);
	free(a);
	cr_assert_eq(events, 4);
	cr_assert_str_eq(last_outcome, "refused");
	cr_assert_eq(msb_host_tool_run_calls(run), 4);
	close(fd);
	close(fd2);
	msb_native_server_stop(srv);
	cr_assert_neq(stat(sock, &st), 0, "the socket is removed");
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* A bad frame closes that connection only; the server keeps serving. */
Test(native, malformed_frames_close_one_connection)
{
	msb_host_tool_registry *r = registry(16);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, NULL, &run, NULL), 0);
	msb_native_server *srv = NULL;
	cr_assert_eq(msb_native_server_start(tmp, "/g", run, NULL, NULL, &srv, NULL), 0);
	int bad = msb_ht_connect(sock);
	uint8_t empty[4] = {0, 0, 0, 0}; /* a request of no bytes is no frame */
	cr_assert_eq(write(bad, empty, 4), 4);
	char c;
	cr_assert_eq(read(bad, &c, 1), 0, "closed by the server");
	close(bad);
	int fd = msb_ht_connect(sock);
	char *a = call(fd, "not json at all");
	cr_assert_str_eq(a, "{\"refusal\":\"Error: this host-tool request is not valid JSON\"}");
	free(a);
	a = call(fd, "{\"name\": \"add\", \"arguments\": {\"left\": 40, \"right\": 2}}");
	cr_assert_str_eq(a, "{\"value\": 42}");
	free(a);
	close(fd);
	/* A second server on the same directory is refused while one runs. */
	msb_native_server *two = NULL;
	msb_error *e = NULL;
	cr_assert_lt(msb_native_server_start(tmp, "/g", run, NULL, NULL, &two, &e), 0);
	msb_error_free(e);
	msb_native_server_stop(srv);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* The Python client module, run by the host's python3. */
Test(native, python_client)
{
	msb_host_tool_registry *r = registry(16);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, NULL, &run, NULL), 0);
	msb_native_server *srv = NULL;
	cr_assert_eq(msb_native_server_start(tmp, "/g", run, NULL, NULL, &srv, NULL), 0);
	int pipefd[2];
	cr_assert_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		setenv("MSB_HOST_TOOLS_SOCKET", sock, 1);
		setenv("PYTHONPATH", MSB_SOURCE_ROOT "/clients/python", 1);
		execl("/usr/bin/python3", "python3", "-c",
		      "import msb_host_tools as h\n"
		      "print(h.call('add', left=20, right=22))\n"
		      "try:\n"
		      "    h.call('add', left='x', right=1)\n"
		      "except h.HostToolError as e:\n"
		      "    print(e)\n",
		      (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	char out[512] = {0};
	size_t n = 0;
	ssize_t k;
	while ((k = read(pipefd[0], out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)k;
	close(pipefd[0]);
	int st;
	waitpid(pid, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	cr_assert_str_eq(out, "42\nError: arguments do not bind to host tool 'add': left: expected "
			      "integer, got string\n");
	msb_native_server_stop(srv);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/*
 * Issue 15, finding 1 (STYLE "The guest is hostile"): the socket's name is in
 * a directory the guest writes. A loop swapping that name for a link to a
 * host file while the server starts must never change the file. The server
 * used to chmod the name after the bind, following the link the guest had
 * put there meanwhile: a root-owned 0600 host file became 0666.
 */
static volatile int swapping;
static char sentinel[192];

/* What a guest would run: wait for the socket to appear, swap it for the
 * link at once, hold the link a moment, then clear the name for the next
 * start. */
static void *swap_loop(void *arg)
{
	(void)arg;
	struct stat st;
	while (swapping) {
		if (lstat(sock, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		unlink(sock);
		if (symlink(sentinel, sock) == 0) {
			for (volatile int i = 0; i < 20000; i++)
				;
			unlink(sock);
		}
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

Test(native, a_link_swapped_in_during_start_is_never_followed, .timeout = 120)
{
	msb_host_tool_registry *r = registry(16);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, NULL, &run, NULL), 0);
	snprintf(sentinel, sizeof(sentinel), "%s.sentinel", tmp);
	int fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, 0600), 0);
	close(fd);

	swapping = 1;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, swap_loop, NULL), 0);
	struct stat st;
	unsigned attempts = 0, started = 0;
	double t0 = now_s(), end = t0 + 5;
	while (now_s() < end) {
		msb_native_server *srv = NULL;
		attempts++;
		if (msb_native_server_start(tmp, "/g", run, NULL, NULL, &srv, NULL) == 0) {
			started++;
			msb_native_server_stop(srv);
		}
		cr_assert_eq(stat(sentinel, &st), 0);
		if ((st.st_mode & 07777) != 0600)
			break;
	}
	swapping = 0;
	pthread_join(t, NULL);
	cr_assert_eq(stat(sentinel, &st), 0);
	unlink(sentinel);
	cr_assert_eq(st.st_mode & 07777, 0600,
		     "the host file became %o after %u starts (%u bound): a start followed the "
		     "guest's link",
		     st.st_mode & 07777, attempts, started);
	cr_assert_gt(started, 0, "no start bound the socket in %u attempts: the race never ran",
		     attempts);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* A request padded with leading spaces to `len` bytes (malloc()ed). */
static char *padded(size_t len, const char *json)
{
	char *b = malloc(len + 1);
	size_t j = strlen(json);
	memset(b, ' ', len - j);
	memcpy(b + len - j, json, j + 1);
	return b;
}

#define ADD "{\"name\": \"add\", \"arguments\": {\"left\": 1, \"right\": 2}}"
#define TOO_LARGE                                                                                  \
	"{\"refusal\":\"Error: this host-tool request is over the 1048576-byte limit — send "    \
	"smaller arguments\"}"

/* One request past 1 MiB (docs/security.md, "Budgets on guest bytes"): read
 * but never held, refused through the door (counted, observed), and the
 * connection stays in step for the next request. */
Test(native, a_request_past_its_budget_is_refused_in_step)
{
	msb_host_tool_registry *r = registry(16);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, NULL, &run, NULL), 0);
	msb_native_server *srv = NULL;
	cr_assert_eq(msb_native_server_start(tmp, "/g", run, NULL, NULL, &srv, NULL), 0);
	int fd = msb_ht_connect(sock);
	char *big = padded((1u << 20) + 1, ADD);
	char *a = call(fd, big);
	cr_assert_str_eq(a, TOO_LARGE);
	free(a);
	free(big);
	big = padded(1u << 20, ADD); /* at the budget: served */
	a = call(fd, big);
	cr_assert_str_eq(a, "{\"value\": 3}");
	free(a);
	free(big);
	cr_assert_eq(msb_host_tool_run_calls(run), 2);
	cr_assert_eq(events, 2);
	close(fd);
	msb_native_server_stop(srv);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}

/* Wait until the server has read everything sent on fd. */
static void drained(int fd)
{
	for (int i = 0; i < 5000; i++) {
		int q = -1;
		cr_assert_eq(ioctl(fd, SIOCOUTQ, &q), 0);
		if (q == 0)
			return;
		usleep(1000);
	}
	cr_assert_fail("the server did not read");
}

/* Unfinished requests held at once are budgeted too (8 MiB): eight of 1 MiB
 * each, all but their last byte sent, and a ninth is refused; once one is
 * finished the ninth is served. */
Test(native, unfinished_requests_share_one_budget)
{
	msb_host_tool_registry *r = registry(16);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(r, NULL, NULL, &run, NULL), 0);
	msb_native_server *srv = NULL;
	cr_assert_eq(msb_native_server_start(tmp, "/g", run, NULL, NULL, &srv, NULL), 0);
	char *req = padded(1u << 20, ADD);
	size_t len = 1u << 20;
	uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
			  (uint8_t)(len >> 24)};
	int held[8];
	for (int i = 0; i < 8; i++) {
		held[i] = msb_ht_connect(sock);
		cr_assert_eq(msb_ht__io(held[i], hdr, 4, 1), 0);
		cr_assert_eq(msb_ht__io(held[i], req, len - 1, 1), 0);
		drained(held[i]);
	}
	int ninth = msb_ht_connect(sock);
	char *a = call(ninth, ADD);
	cr_assert_str_eq(a,
			 "{\"refusal\":\"Error: the host already holds 8388608 bytes of unfinished "
			 "host-tool requests — finish those first\"}");
	free(a);
	/* The first one finishes and is answered; then the ninth fits. */
	cr_assert_eq(msb_ht__io(held[0], req + len - 1, 1, 1), 0);
	uint8_t rh[4];
	cr_assert_eq(msb_ht__io(held[0], rh, 4, 0), 0);
	char body[32] = {0};
	cr_assert_eq(rh[0], 12);
	cr_assert_eq(msb_ht__io(held[0], body, 12, 0), 0);
	cr_assert_str_eq(body, "{\"value\": 3}");
	a = call(ninth, ADD);
	cr_assert_str_eq(a, "{\"value\": 3}");
	free(a);
	free(req);
	for (int i = 0; i < 8; i++)
		close(held[i]);
	close(ninth);
	msb_native_server_stop(srv);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(r);
}
