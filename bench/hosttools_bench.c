/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hosttools_bench: round-trip latency of one host-tool call over each
 * transport, on the `ns` backend, measured inside the guest.
 *
 *   hosttools_bench [-n N] [--exec-n M] [--poll S]
 *
 * Cases (one JSON line each; p50/p90/p99 in microseconds, nearest rank):
 *   native_c        N calls (default 2000) over the native socket with the
 *                   header-only C client (bench/hosttools_guest.c), one
 *                   connection, each call timed around msb_ht_call
 *   native_python   N calls with clients/python/msb_host_tools.py, each
 *                   timed around h.call() with time.perf_counter_ns
 *   over_exec       M calls (default 200) through the generated shim over
 *                   exec (request file, host poll every S seconds, default
 *                   0.001, response file), each timed around t.add()
 * The tool is `add` (two integers, a JSON-schema check, an integer back):
 * what is measured is the transport plus the one door, not a tool body.
 * Helpers come from $MSB_SHIM / $MSB_AGENT or beside this binary in a build
 * tree; state goes to a fresh directory under /tmp, removed at the end.
 * Needs root. A benchmark, never a test.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/msb.h>

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

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, const char *text)
{
	long long *v = NULL;
	size_t n = 0;
	for (const char *p = text; p && *p;) {
		char *end;
		long long x = strtoll(p, &end, 10);
		if (end == p)
			break;
		v = realloc(v, (n + 1) * sizeof(*v));
		v[n++] = x;
		p = end;
		while (*p == '\n')
			p++;
	}
	if (!n) {
		printf("{\"case\": \"%s\", \"error\": \"no samples\"}\n", name);
		return;
	}
	qsort(v, n, sizeof(*v), cmp);
#define RANK(q) v[(size_t)((q) * (double)(n - 1) + 0.5)]
	printf("{\"case\": \"%s\", \"n\": %zu, \"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": "
	       "%.1f}\n",
	       name, n, RANK(0.50) / 1e3, RANK(0.90) / 1e3, RANK(0.99) / 1e3);
	free(v);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (r == 0)
			break;
		n += r;
	}
	fclose(f);
	*len = n;
	return buf;
}

static void die(const char *what, msb_error *e)
{
	fprintf(stderr, "hosttools_bench: %s: %s\n", what, e ? msb_error_message(e) : "failed");
	exit(1);
}

/* The native channel: the C client, then the Python client, n calls each. */
static void bench_native(msb_sandbox *sb, msb_host_tool_registry *reg, const msb_key *key,
			 const char *exe, int n)
{
	size_t len = 0;
	char path[4200];
	msb_error *e = NULL;
	snprintf(path, sizeof(path), "%s/hosttools_guest", exe);
	char *bin = slurp(path, &len);
	if (!bin ||
	    msb_sandbox_write_file(sb, "bench/hosttools_guest", (uint8_t *)bin, len, NULL, &e) < 0)
		die("guest client", e);
	free(bin);
	char *py = slurp(MSB_SOURCE_ROOT "/clients/python/msb_host_tools.py", &len);
	if (!py ||
	    msb_sandbox_write_file(sb, "bench/msb_host_tools.py", (uint8_t *)py, len, NULL, &e) < 0)
		die("python client", e);
	free(py);
	for (int which = 0; which < 2; which++) {
		msb_host_tool_run *run = NULL;
		msb_host_tool_run_new(reg, key, NULL, &run, NULL);
		msb_native_server *srv = NULL;
		if (msb_ns_host_tools_attach(sb, run, NULL, NULL, &srv, &e) < 0)
			die("attach", e);
		char env[300], cmd[600];
		snprintf(env, sizeof(env), MSB_HOST_TOOLS_SOCKET_ENV "=%s",
			 msb_native_server_guest_path(srv));
		const char *envv[] = {env, "PYTHONPATH=/maf-sandbox/work/bench", NULL};
		if (which == 0)
			snprintf(cmd, sizeof(cmd),
				 "chmod +x bench/hosttools_guest && "
				 "bench/hosttools_guest %d",
				 n);
		else
			snprintf(
				cmd, sizeof(cmd),
				"python3 -c 'import msb_host_tools as h, time\n"
				"for i in range(%d):\n"
				"    a = time.perf_counter_ns(); h.call(\"add\", left=2, right=3)\n"
				"    print(time.perf_counter_ns() - a)'",
				n);
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		req.shell = cmd;
		req.env = envv;
		req.timeout = 600;
		msb_exec_result res = {0};
		if (msb_sandbox_exec(sb, &req, &res, &e) < 0 || res.exit_code != 0) {
			fprintf(stderr, "%s\n", res.stderr_bytes ? (char *)res.stderr_bytes : "");
			die("native run", e);
		}
		report(which == 0 ? "native_c" : "native_python", (char *)res.stdout_bytes);
		msb_exec_result_clear(&res);
		msb_native_server_stop(srv);
		msb_host_tool_run_free(run);
	}
}

/* Over exec: m calls through the file transport, polled every `poll` s. */
static void bench_over_exec(msb_sandbox *sb, msb_host_tool_registry *reg, const msb_key *key, int m,
			    double poll)
{
	msb_error *e = NULL;
	msb_host_tool_run *run = NULL;
	msb_host_tool_run_new(reg, key, NULL, &run, NULL);
	msb_guest_run_layout l;
	msb_guest_run_layout_new("bench/run", NULL, &l, NULL);
	char prog[400];
	snprintf(prog, sizeof(prog),
		 "import maf_host_tools as t, time\n"
		 "for i in range(%d):\n"
		 "    a = time.perf_counter_ns(); t.add(left=2, right=3)\n"
		 "    print(time.perf_counter_ns() - a)\n",
		 m);
	msb_sandbox_write_file(sb, l.program, (uint8_t *)prog, strlen(prog), NULL, NULL);
	const char *names[] = {"add"};
	char *shim = NULL;
	msb_host_tool_shim(names, 1, 300, &shim, NULL);
	msb_sandbox_write_file(sb, l.shim, (uint8_t *)shim, strlen(shim), NULL, NULL);
	free(shim);
	msb_over_exec_options xo = MSB_OVER_EXEC_OPTIONS_INIT;
	xo.timeout = 600;
	xo.poll_interval = poll;
	msb_exec_result res = {0};
	if (msb_host_tool_calls_over_exec(sb, run, &l, &xo, &res, &e) < 0 || res.exit_code != 0)
		die("over exec", e);
	report("over_exec", (char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	msb_guest_run_layout_clear(&l);
	msb_host_tool_run_free(run);
}

int main(int argc, char **argv)
{
	int n = 2000, m = 200;
	double poll = 0.001;
	static const struct option opts[] = {{"exec-n", required_argument, NULL, 'm'},
					     {"poll", required_argument, NULL, 'p'},
					     {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		if (ch == 'n')
			n = (int)strtol(optarg, NULL, 10);
		else if (ch == 'm')
			m = (int)strtol(optarg, NULL, 10);
		else if (ch == 'p')
			poll = strtod(optarg, NULL);
		else
			return 2;
	}
	char exe[4096];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (el <= 0)
		return 1;
	exe[el] = 0;
	*strrchr(exe, '/') = 0;
	char path[4200];
	if (!getenv("MSB_SHIM")) {
		snprintf(path, sizeof(path), "%s/../shim/msb-shim", exe);
		setenv("MSB_SHIM", path, 1);
	}
	if (!getenv("MSB_AGENT")) {
		snprintf(path, sizeof(path), "%s/../agent/msb-agent", exe);
		setenv("MSB_AGENT", path, 1);
	}
	char root[64];
	snprintf(root, sizeof(root), "/tmp/msb-htbench-%d", (int)getpid());
	mkdir(root, 0700);
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_backend *b = NULL;
	msb_error *e = NULL;
	if (msb_ns_backend_new(&o, &b, &e) < 0)
		die("ns backend", e);
	msb_key key = {"bench", "hosttools", "bench", NULL};
	msb_spec_builder *sbld = msb_spec_builder_new("bench");
	msb_spec *spec = NULL;
	msb_spec_build(sbld, &spec, NULL);
	msb_spec_builder_free(sbld);
	msb_sandbox *sb = NULL;
	if (msb_backend_acquire(b, &key, spec, &sb, &e) < 0)
		die("acquire", e);

	msb_host_tool_registry_options ro = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	ro.max_host_tool_calls_per_run = (uint64_t)(n > m ? n : m) + 10;
	ro.response_limits.max_files = ro.max_host_tool_calls_per_run;
	msb_host_tool_registry *reg = NULL;
	msb_host_tool_registry_new(&ro, &reg, NULL);
	msb_host_tools_suppress_notice();
	msb_host_tool_decl d = {MSB_HOST_TOOL_DECL_VERSION,
				MSB_LEG_NONE,
				MSB_INTEGRITY_UNTRUSTED,
				MSB_LEG_NONE,
				NULL,
				MSB_LEG_NONE,
				MSB_IDENTITY_APP};
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.name = "add";
	t.fn = add_fn;
	t.decl = &d;
	t.parameters = "{\"type\": \"object\", \"properties\": {\"left\": {\"type\": \"integer\"}, "
		       "\"right\": {\"type\": \"integer\"}}, \"required\": [\"left\", \"right\"]}";
	if (msb_host_tool_registry_register(reg, &t, &e) < 0)
		die("register", e);

	bench_native(sb, reg, &key, exe, n);
	bench_over_exec(sb, reg, &key, m, poll);

	msb_host_tool_registry_unref(reg);
	msb_sandbox_free(sb);
	msb_scope_purge p = {0};
	msb_backend_dispose_scope(b, "bench", "hosttools", &p, NULL);
	msb_backend_unref(b);
	msb_spec_unref(spec);
	snprintf(path, sizeof(path), "%s/ns", root);
	rmdir(path);
	rmdir(root);
	return 0;
}
