/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host tools end to end on the real `ns` backend (issue 8): a Python program
 * in the guest calls a registered host tool over exec and gets the answer;
 * a guest writing request files by hand is served identically (14.35); the
 * call cap, a schema violation and an unregistered name are refused with the
 * seed's sentences (13.18, 13.22, 13.20); a program that ignores SIGTERM is
 * stopped and reported (14.25).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/msb.h>

static char root[64];
static msb_backend *backend;
static msb_sandbox *sb;
static msb_key key = {"tenant", "hosttools", "devops", NULL};

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msb-ht-%d", (int)getpid());
	mkdir(root, 0700);
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder *b = msb_spec_builder_new("codeact");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, NULL), 0);
	msb_spec_builder_free(b);
	cr_assert_eq(msb_backend_acquire(backend, &key, spec, &sb, &err), 0, "%s",
		     msb_error_message(err));
	msb_spec_unref(spec);
}

static void teardown(void)
{
	msb_sandbox_free(sb);
	if (backend) {
		msb_scope_purge p = {0};
		msb_backend_dispose_scope(backend, "tenant", "hosttools", &p, NULL);
		msb_backend_unref(backend);
	}
	char p[128];
	snprintf(p, sizeof(p), "%s/ns", root);
	rmdir(p);
	rmdir(root);
}

TestSuite(ns_hosttools, .init = setup, .fini = teardown, .timeout = 180);

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

static const msb_host_tool_decl pure = {MSB_HOST_TOOL_DECL_VERSION,
					MSB_LEG_NONE,
					MSB_INTEGRITY_UNTRUSTED,
					MSB_LEG_NONE,
					NULL,
					MSB_LEG_NONE,
					MSB_IDENTITY_APP};

static msb_host_tool_registry *registry(uint64_t cap)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = cap;
	msb_host_tool_registry *r = NULL;
	cr_assert_eq(msb_host_tool_registry_new(&o, &r, NULL), 0);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.decl = &pure;
	t.name = "add";
	t.fn = add_fn;
	t.parameters = "{\"type\": \"object\", \"properties\": {\"left\": {\"type\": \"integer\"}, "
		       "\"right\": {\"type\": \"integer\"}}, \"required\": [\"left\", \"right\"], "
		       "\"additionalProperties\": false}";
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	return r;
}

/* Process observations and cleanup, as the transport reports them. */
static int cleanups;
static bool last_unclean;
static size_t last_survivors;
static int observed_complete;
static int on_cleanup(void *ud, const msb_ev_process_cleanup *ev)
{
	cleanups++;
	last_unclean = ev->unclean;
	last_survivors = ev->n_survivors;
	return 0;
}
static int on_observed(void *ud, const msb_ev_processes_observed *ev)
{
	observed_complete += ev->available && ev->complete;
	return 0;
}
static msb_observer proc_obs = {MSB_OBSERVER_VERSION, NULL,	  NULL, NULL, NULL, NULL, NULL,
				on_observed,	      on_cleanup, NULL, NULL, NULL};

/* Write program + shim into a fresh relative run directory and run it. */
static int run_program(const char *run_dir, const char *name, const char *program,
		       const char *interp, uint64_t cap, double timeout, msb_exec_result *res,
		       msb_error **err, msb_host_tool_run **run_out,
		       msb_host_tool_registry **reg_out)
{
	msb_host_tool_registry *reg = registry(cap);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(reg, &key, "call-1", &run, NULL), 0);
	msb_guest_run_layout l;
	msb_error *e = NULL;
	cr_assert_eq(msb_guest_run_layout_new(run_dir, name, &l, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
	cr_assert_eq(msb_sandbox_write_file(sb, l.program, (const uint8_t *)program,
					    strlen(program), NULL, &e),
		     0, "%s", e ? msb_error_message(e) : "");
	const char *names[] = {"add"};
	char *shim = NULL;
	cr_assert_eq(msb_host_tool_shim(names, 1, 300, &shim, NULL), 0);
	cr_assert_eq(
		msb_sandbox_write_file(sb, l.shim, (const uint8_t *)shim, strlen(shim), NULL, NULL),
		0);
	free(shim);
	msb_over_exec_options o = MSB_OVER_EXEC_OPTIONS_INIT;
	o.timeout = timeout;
	o.poll_interval = 0.005;
	o.interpreter = interp;
	o.key = &key;
	o.observer = &proc_obs;
	int rc = msb_host_tool_calls_over_exec(sb, run, &l, &o, res, err);
	bool removed = false;
	msb_guest_run_layout_clear(&l);
	(void)removed;
	if (run_out)
		*run_out = run;
	else
		msb_host_tool_run_free(run);
	if (reg_out)
		*reg_out = reg;
	else
		msb_host_tool_registry_unref(reg);
	return rc;
}

Test(ns_hosttools, python_program_calls_host_tool_over_exec_14_1)
{
	static const char prog[] = "import maf_host_tools as t, os\n"
				   "print(t.add(left=40, right=2), os.getcwd())\n";
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(run_program("runs/r1", "program.py", prog, "python3", 16, 60, &res, &err, NULL,
				 NULL),
		     0, "%s", err ? msb_error_message(err) : "");
	cr_assert_eq(res.exit_code, 0, "%s", res.stdout_bytes);
	cr_assert_str_eq((char *)res.stdout_bytes, "42 /maf-sandbox/work/runs/r1/work\n");
	msb_exec_result_clear(&res);
	/* The transport directory is gone; work/ stays (14.29, 14.30). */
	bool present = true;
	msb_entry e = {0};
	cr_assert_eq(msb_sandbox_stat_file(sb, "runs/r1/host_tools", NULL, &present, &e, NULL), 0);
	cr_assert_not(present);
	cr_assert_eq(msb_sandbox_stat_file(sb, "runs/r1/work", NULL, &present, &e, NULL), 0);
	cr_assert(present);
	msb_entry_clear(&e);
}

Test(ns_hosttools, hand_written_requests_served_identically_14_35)
{
	static const char prog[] = "c=\"$(dirname \"$0\")/host_tool_calls\"\n"
				   "printf '{\"id\": 1, \"name\": \"add\", \"arguments\": "
				   "{\"left\": 40, \"right\": 2}}' "
				   ">\"$c/0001.request.json.part\"\n"
				   "mv \"$c/0001.request.json.part\" \"$c/0001.request.json\"\n"
				   "while [ ! -e \"$c/0001.response.json\" ]; do sleep 0.01; done\n"
				   "cat \"$c/0001.response.json\"\n";
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(
		run_program("runs/r2", "prog.sh", prog, "/bin/sh", 16, 60, &res, &err, NULL, NULL),
		0, "%s", err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes, "{\"value\": 42}");
	msb_exec_result_clear(&res);
}

Test(ns_hosttools, refusals_carry_the_seed_sentences_13_18_13_20_13_22)
{
	static const char prog[] = "import maf_host_tools as t\n"
				   "for name, args in [('add', {'left': 1}), ('rm_rf', {}),\n"
				   "                   ('add', {'left': 1, 'right': 2})]:\n"
				   "    try:\n"
				   "        print(t.call(name, **args))\n"
				   "    except t.HostToolError as e:\n"
				   "        print(e)\n";
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(run_program("runs/r3", "program.py", prog, "python3", 2, 60, &res, &err, NULL,
				 NULL),
		     0, "%s", err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes,
			 "Error: arguments do not bind to host tool 'add': missing required "
			 "argument 'right'\n"
			 "Error: 'rm_rf' is not a registered host tool\n"
			 "Error: this run's host-tool-call cap (2) is exhausted — finish with the "
			 "results already delivered and report what remains undone\n");
	msb_exec_result_clear(&res);
}

Test(ns_hosttools, sigterm_ignoring_program_stopped_14_25)
{
	static const char prog[] = "import signal, time\n"
				   "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
				   "print('working', flush=True)\n"
				   "time.sleep(600)\n";
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cleanups = observed_complete = 0;
	cr_assert_eq(run_program("runs/r4", "program.py", prog, "python3", 16, 2, &res, &err, NULL,
				 NULL),
		     MSB_E_PROGRAM_TIMEOUT, "%s", err ? msb_error_message(err) : "");
	int sig = -1;
	const uint8_t *out = NULL;
	size_t olen = 0;
	cr_assert(msb_error_timeout(err, &sig, &out, &olen));
	cr_assert_eq(sig, MSB_SIGNAL_SENT, "%s", msb_signal_outcome_name(sig));
	cr_assert_eq(olen, 8);
	cr_assert_eq(memcmp(out, "working\n", 8), 0);
	msb_error_free(err);
	/* 14.20-14.22 on ns: complete snapshots through the agent, no survivor. */
	cr_assert_eq(cleanups, 1);
	cr_assert_eq(last_survivors, 0);
	cr_assert_not(last_unclean);
	cr_assert_geq(observed_complete, 4);
	/* Nothing of the program is left running in the guest. */
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; "
		    "done | grep -c '[p]rogram[.]py' || true";
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_str_eq((char *)res.stdout_bytes, "0\n", "survivors: %s", res.stdout_bytes);
	msb_exec_result_clear(&res);
}

/* ---- the native channel ---------------------------------------------------------- */

static void put_client(void)
{
	FILE *f = fopen(MSB_SOURCE_ROOT "/clients/python/msb_host_tools.py", "r");
	cr_assert_not_null(f);
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	cr_assert_eq(msb_sandbox_write_file(sb, "lib/msb_host_tools.py", (const uint8_t *)buf, n,
					    NULL, NULL),
		     0);
}

static int run_native(const char *program, uint64_t cap, msb_exec_result *res)
{
	msb_host_tool_registry *reg = registry(cap);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(reg, &key, "call-n", &run, NULL), 0);
	msb_native_server *srv = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_host_tools_attach(sb, run, NULL, NULL, &srv, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	put_client();
	char env[300];
	snprintf(env, sizeof(env), MSB_HOST_TOOLS_SOCKET_ENV "=%s",
		 msb_native_server_guest_path(srv));
	const char *envv[] = {env, "PYTHONPATH=/maf-sandbox/work/lib", NULL};
	const char *argv[] = {"python3", "-c", program, NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.env = envv;
	req.timeout = 60;
	int rc = msb_sandbox_exec(sb, &req, res, &err);
	cr_assert_eq(rc, 0, "%s", err ? msb_error_message(err) : "");
	msb_native_server_stop(srv);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(reg);
	return rc;
}

Test(ns_hosttools, python_program_calls_host_tool_natively)
{
	msb_exec_result res = {0};
	run_native("import msb_host_tools as h, os\n"
		   "print(h.call('add', left=40, right=2), os.environ['MSB_HOST_TOOLS_SOCKET'])\n",
		   16, &res);
	cr_assert_eq(res.exit_code, 0, "%s", res.stderr_bytes);
	cr_assert_str_eq((char *)res.stdout_bytes, "42 /maf-sandbox/work/.msb-host-tools.sock\n");
	msb_exec_result_clear(&res);
	/* The socket is gone once the run is over. */
	bool present = true;
	msb_entry e = {0};
	cr_assert_eq(msb_sandbox_stat_file(sb, ".msb-host-tools.sock", NULL, &present, &e, NULL),
		     0);
	cr_assert_not(present);
}

Test(ns_hosttools, native_refusals_carry_the_seed_sentences)
{
	msb_exec_result res = {0};
	run_native("import msb_host_tools as h\n"
		   "for name, args in [('add', {'left': 1}), ('rm_rf', {}),\n"
		   "                   ('add', {'left': 1, 'right': 2})]:\n"
		   "    try:\n"
		   "        print(h.call(name, **args))\n"
		   "    except h.HostToolError as e:\n"
		   "        print(e)\n",
		   2, &res);
	cr_assert_str_eq((char *)res.stdout_bytes,
			 "Error: arguments do not bind to host tool 'add': missing required "
			 "argument 'right'\n"
			 "Error: 'rm_rf' is not a registered host tool\n"
			 "Error: this run's host-tool-call cap (2) is exhausted — finish with the "
			 "results already delivered and report what remains undone\n",
			 "%s", res.stderr_bytes);
	msb_exec_result_clear(&res);
}

/*
 * Issue 15, finding 1, from inside the guest: a program (swap_loop.c) swaps
 * the socket's name for a link to a host file as soon as it appears, while the
 * host starts and stops the native channel over and over. The host file must
 * keep its mode, owner and bytes. The server used to chmod the name after the
 * bind and so followed the guest's link (a root-owned 0600 file became 0666).
 */
struct swap_exec {
	const char *target;
	const char *seconds;
	msb_exec_result res;
	int rc;
	volatile int done;
};

static void *swap_exec_thread(void *arg)
{
	struct swap_exec *x = arg;
	const char *argv[] = {"/maf-sandbox/work/swap-loop",
			      "/maf-sandbox/work/.msb-host-tools.sock", x->target, x->seconds,
			      NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 120;
	x->rc = msb_sandbox_exec(sb, &req, &x->res, NULL);
	x->done = 1;
	return NULL;
}

Test(ns_hosttools, a_guest_link_swap_never_reaches_a_host_file_issue_15, .timeout = 240)
{
	char sentinel[128];
	snprintf(sentinel, sizeof(sentinel), "/tmp/msb-ht-sentinel-%d", (int)getpid());
	unlink(sentinel);
	int fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, 0600), 0);
	cr_assert_eq(write(fd, "sentinel", 8), 8);
	close(fd);
	struct stat before, after;
	cr_assert_eq(stat(sentinel, &before), 0);

	FILE *f = fopen(MSB_SWAP_LOOP, "rb");
	cr_assert_not_null(f);
	static uint8_t bin[1 << 20];
	size_t n = fread(bin, 1, sizeof(bin), f);
	fclose(f);
	cr_assert(n > 0 && n < sizeof(bin));
	cr_assert_eq(msb_sandbox_write_file(sb, "swap-loop", bin, n, NULL, NULL), 0);
	msb_exec_result res = {0};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "chmod 0755 swap-loop";
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_eq(res.exit_code, 0);
	msb_exec_result_clear(&res);

	msb_host_tool_registry *reg = registry(16);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(reg, &key, "call-swap", &run, NULL), 0);
	struct swap_exec x = {.target = sentinel, .seconds = "8"};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, swap_exec_thread, &x), 0);
	unsigned attempts = 0, started = 0;
	bool changed = false;
	while (!x.done && !changed) {
		msb_native_server *srv = NULL;
		attempts++;
		if (msb_ns_host_tools_attach(sb, run, NULL, NULL, &srv, NULL) == 0) {
			started++;
			msb_native_server_stop(srv);
		}
		cr_assert_eq(stat(sentinel, &after), 0);
		changed = after.st_mode != before.st_mode;
	}
	pthread_join(t, NULL);
	cr_assert_eq(stat(sentinel, &after), 0);
	char bytes[16] = {0};
	fd = open(sentinel, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(read(fd, bytes, sizeof(bytes) - 1), 8);
	close(fd);
	unlink(sentinel);
	cr_assert_eq(after.st_mode, before.st_mode,
		     "the host file went from %o to %o after %u starts (%u bound): the host "
		     "followed the guest's link",
		     before.st_mode & 07777, after.st_mode & 07777, attempts, started);
	cr_assert_eq(after.st_uid, before.st_uid);
	cr_assert_eq(after.st_gid, before.st_gid);
	cr_assert_str_eq(bytes, "sentinel");
	cr_assert_eq(x.rc, 0);
	cr_assert_eq(x.res.exit_code, 0, "%s", x.res.stderr_bytes);
	/* The guest did swap: the race ran. */
	cr_assert_gt(strtol((char *)x.res.stdout_bytes, NULL, 10), 0,
		     "no swap in %u starts (%u bound)", attempts, started);
	msb_exec_result_clear(&x.res);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(reg);
}
