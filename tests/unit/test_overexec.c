/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-tool calls over exec (checklist 14.1-14.36). The layout, name rules
 * and shim are pure; the transport runs against local_sandbox, a backend
 * double whose guest is this host (real /bin/sh, real python3), so the
 * launcher, the shim and the request protocol are exercised for real.
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/msb.h>

#include "core/hosttools/hosttools_int.h"
#include "helpers.h"
#include "local_sandbox.h"

#define PY "/usr/bin/python3"

/* ---- fixtures ------------------------------------------------------------------ */

static char tmp[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static void setup_tmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/msb-overexec-%d-XXXXXX", (int)getpid());
	cr_assert_not_null(mkdtemp(tmp));
}

static void teardown_tmp(void)
{
	nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(overexec, .init = setup_tmp, .fini = teardown_tmp, .timeout = 60);

static int add_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	int *calls = ud;
	if (calls)
		(*calls)++;
	json_t *a = json_loads(args, 0, NULL);
	long long s = json_integer_value(json_object_get(a, "left")) +
		      json_integer_value(json_object_get(a, "right"));
	json_decref(a);
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", s);
	*result = strdup(buf);
	return 0;
}

/* Records the order in which `note` arguments arrive. */
static char order[256];
static int note_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	json_t *a = json_loads(args, 0, NULL);
	strncat(order, json_string_value(json_object_get(a, "tag")),
		sizeof(order) - strlen(order) - 1);
	json_decref(a);
	*result = strdup("true");
	return 0;
}

static int slept;
static int sleepy_fn(void *ud, const char *args, const char *user, char **result, msb_error **err)
{
	usleep(4500 * 1000);
	slept++;
	*result = strdup("\"slept\"");
	return 0;
}

static const msb_host_tool_decl pure = {MSB_HOST_TOOL_DECL_VERSION,
					MSB_LEG_NONE,
					MSB_INTEGRITY_UNTRUSTED,
					MSB_LEG_NONE,
					NULL,
					MSB_LEG_NONE,
					MSB_IDENTITY_APP};

static int add_calls;
static msb_host_tool_registry *registry(uint64_t cap, uint64_t per_response)
{
	msb_host_tool_registry_options o = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	o.max_host_tool_calls_per_run = cap;
	if (per_response)
		o.response_limits.max_bytes_per_file = per_response;
	msb_host_tool_registry *r = NULL;
	cr_assert_eq(msb_host_tool_registry_new(&o, &r, NULL), 0);
	msb_host_tool t = MSB_HOST_TOOL_INIT;
	t.decl = &pure;
	t.name = "add";
	t.fn = add_fn;
	t.userdata = &add_calls;
	t.parameters = "{\"type\": \"object\", \"properties\": {\"left\": {\"type\": \"integer\"}, "
		       "\"right\": {\"type\": \"integer\"}}, \"required\": [\"left\", \"right\"]}";
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	t.name = "note";
	t.fn = note_fn;
	t.parameters = "{\"type\": \"object\", \"properties\": {\"tag\": {\"type\": \"string\"}}}";
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	t.name = "sleepy";
	t.fn = sleepy_fn;
	t.parameters = NULL;
	cr_assert_eq(msb_host_tool_registry_register(r, &t, NULL), 0);
	return r;
}

struct harness {
	struct local_counts counts;
	msb_sandbox *sb;
	msb_host_tool_registry *reg;
	msb_host_tool_run *run;
	msb_guest_run_layout layout;
};

/* A run directory under tmp holding `program` (and the shim unless no_shim). */
static void harness(struct harness *h, const char *program_name, const char *program, uint64_t cap,
		    uint64_t per_response)
{
	memset(h, 0, sizeof(*h));
	h->sb = local_sandbox_new(tmp, &h->counts);
	cr_assert_not_null(h->sb);
	h->reg = registry(cap, per_response);
	cr_assert_eq(msb_host_tool_run_new(h->reg, NULL, "call-1", &h->run, NULL), 0);
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/run", tmp);
	msb_error *err = NULL;
	cr_assert_eq(msb_guest_run_layout_new(dir, program_name, &h->layout, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(msb_sandbox_write_file(h->sb, h->layout.program, (const uint8_t *)program,
					    strlen(program), NULL, NULL),
		     0);
	char **names = msb_host_tool_registry_names(h->reg);
	size_t n = 0;
	while (names[n])
		n++;
	char *shim = NULL;
	cr_assert_eq(msb_host_tool_shim((const char *const *)names, n, 300, &shim, NULL), 0);
	msb_strv_free(names);
	cr_assert_eq(msb_sandbox_write_file(h->sb, h->layout.shim, (const uint8_t *)shim,
					    strlen(shim), NULL, NULL),
		     0);
	free(shim);
	h->counts.execs = h->counts.writes = 0;
}

static void harness_free(struct harness *h)
{
	msb_guest_run_layout_clear(&h->layout);
	msb_host_tool_run_free(h->run);
	msb_host_tool_registry_unref(h->reg);
	msb_sandbox_free(h->sb);
}

static int go(struct harness *h, double timeout, msb_exec_result *res, msb_error **err,
	      const msb_observer *obs, const char *interp)
{
	msb_over_exec_options o = MSB_OVER_EXEC_OPTIONS_INIT;
	o.timeout = timeout;
	o.poll_interval = 0.01;
	o.interpreter = interp ? interp : PY;
	o.observer = obs;
	memset(res, 0, sizeof(*res));
	return msb_host_tool_calls_over_exec(h->sb, h->run, &h->layout, &o, res, err);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- 14.4-14.9 the layout and its names ------------------------------------------ */

Test(overexec, layout_two_directories_14_4_14_5)
{
	msb_guest_run_layout l;
	cr_assert_eq(msb_guest_run_layout_new("/r", NULL, &l, NULL), 0);
	cr_assert_str_eq(l.directory, "/r");
	cr_assert_str_eq(l.work, "/r/work");
	cr_assert_str_eq(l.shim, "/r/host_tools/maf_host_tools.py");
	cr_assert_str_eq(l.calls, "/r/host_tools/host_tool_calls");
	cr_assert_str_eq(l.exit_code, "/r/host_tools/program_exit_code");
	cr_assert_str_eq(l.launcher, "/r/host_tools/run_program.sh");
	cr_assert_str_eq(l.output, "/r/host_tools/program_output.txt");
	cr_assert_str_eq(l.pid, "/r/host_tools/program_pid");
	/* 14.5: the program sits beside the shim, never in work/. */
	cr_assert_str_eq(l.program, "/r/host_tools/program.py");
	msb_guest_run_layout_clear(&l);
}

Test(overexec, run_directory_rules_14_6)
{
	msb_guest_run_layout l;
	assert_refused(msb_guest_run_layout_new("/runs/2026-08-17T10:30:00Z", NULL, &l, &e_),
		       MSB_E_VALUE, "contains `:`");
	assert_refused(msb_guest_run_layout_new("/runs\\x", NULL, &l, &e_), MSB_E_VALUE,
		       "backslash");
	assert_refused(msb_guest_run_layout_new("", NULL, &l, &e_), MSB_E_VALUE, "empty");
	assert_refused(msb_guest_run_layout_new("../up", NULL, &l, &e_), MSB_E_VALUE,
		       "beneath the storage base");
	cr_assert_eq(msb_guest_run_layout_new("/r/../r2", NULL, &l, NULL), 0);
	cr_assert_str_eq(l.directory, "/r2");
	msb_guest_run_layout_clear(&l);
	/* [seed] a relative call path is accepted, resolved in the guest. */
	cr_assert_eq(msb_guest_run_layout_new("abc123def456", NULL, &l, NULL), 0);
	cr_assert_str_eq(l.work, "abc123def456/work");
	msb_guest_run_layout_clear(&l);
}

Test(overexec, program_names_14_7_14_8_14_9)
{
	msb_guest_run_layout l;
	static const char *const refused[] = {
		"sub/p.py",
		"",
		".",
		"..",
		"program_pid",
		"program_pid.part",
		"program_exit_code.part",
		"program_exit_code",
		"maf_host_tools.py",
		"run_program.sh",
		"host_tool_calls",
		"program_output.txt",
		"program_start_gate",
		"json.py",
		"json.abi3.so",
		"site.pyc",
		"maf_host_tools.so",
		"os.py",
		"time.pyw",
		"sitecustomize.py",
		"_bootlocale.py",
		"io.pyd",
		"encodings.cpython-311-x86_64-linux-gnu.so",
		NULL,
	};
	for (size_t i = 0; refused[i]; i++) {
		msb_error *e = NULL;
		cr_assert_eq(msb_guest_run_layout_new("/r", refused[i], &l, &e), MSB_E_VALUE,
			     "`%s` was accepted", refused[i]);
		msb_error_free(e);
	}
	static const char *const accepted[] = {
		"json.backup.py", "json.txt",	     "helper.py", "json",
		"program.py",	  "site.backup.pyc", NULL};
	for (size_t i = 0; accepted[i]; i++) {
		cr_assert_eq(msb_guest_run_layout_new("/r", accepted[i], &l, NULL), 0, "%s",
			     accepted[i]);
		msb_guest_run_layout_clear(&l);
	}
	assert_refused(msb_guest_run_layout_new("/r", "json.py", &l, &e_), MSB_E_VALUE,
		       "would answer to the module `json`");
}

/* ---- 14.10-14.12 the shim ----------------------------------------------------------- */

Test(overexec, shim_source_14_10_14_11)
{
	/* "ｃall": a fullwidth c (U+FF43) then "all", NFKC-equal to "call". */
	static const char fullwidth_call[] = "\xef\xbd\x83"
					     "all";
	const char *names[] = {"class", "call", fullwidth_call, "lookup", "add"};
	char *shim = NULL;
	cr_assert_eq(msb_host_tool_shim(names, 5, 300, &shim, NULL), 0);
	cr_assert(strstr(shim, "\ndef lookup(**arguments):"));
	cr_assert(strstr(shim, "\ndef add(**arguments):"));
	cr_assert_null(strstr(shim, "def class("));
	cr_assert(strstr(shim, "\ndef call(name, **arguments):"), "call() is the shim's own");
	cr_assert_null(strstr(strstr(shim, "def call(") + 1, "def call("), "exactly one def call");
	cr_assert(strstr(shim, "class HostToolError(Exception)"));
	/* Exactly two wrappers. */
	int wrappers = 0;
	for (const char *p = shim; (p = strstr(p, "(**arguments):")); p++)
		wrappers++;
	cr_assert_eq(wrappers, 2, "%d wrappers", wrappers);
	free(shim);
	/* Every shim global is refused as a wrapper name. */
	for (size_t i = 0; msb_hosttools__shim_globals[i]; i++)
		cr_assert_not(msb_hosttools__spellable(msb_hosttools__shim_globals[i]));
	cr_assert_not(msb_hosttools__spellable("__import__"));
	cr_assert(msb_hosttools__spellable("lookup_2"));
}

/* The shim's global list stays true to the template (24.28): every name the
 * module binds at top level is in msb_hosttools__shim_globals. */
Test(overexec, shim_globals_match_template_14_11)
{
	char *shim = NULL;
	cr_assert_eq(msb_host_tool_shim(NULL, 0, 1, &shim, NULL), 0);
	for (char *line = shim; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char name[64] = {0};
		if (sscanf(line, "import %63[A-Za-z_]", name) == 1 ||
		    sscanf(line, "def %63[A-Za-z_]", name) == 1 ||
		    sscanf(line, "class %63[A-Za-z_]", name) == 1 ||
		    sscanf(line, "%63[A-Z_] =", name) == 1) {
			bool found = false;
			for (size_t i = 0; msb_hosttools__shim_globals[i]; i++)
				found = found || strcmp(name, msb_hosttools__shim_globals[i]) == 0;
			cr_assert(found, "shim binds `%s`, missing from the list", name);
		}
	}
	free(shim);
}

Test(overexec, call_timeout_validation_14_12)
{
	char *shim = NULL;
	assert_refused(msb_host_tool_shim(NULL, 0, NAN, &shim, &e_), MSB_E_VALUE, "call_timeout");
	assert_refused(msb_host_tool_shim(NULL, 0, 0, &shim, &e_), MSB_E_VALUE, "call_timeout");
	assert_refused(msb_host_tool_shim(NULL, 0, INFINITY, &shim, &e_), MSB_E_VALUE,
		       "call_timeout");
}

/* ---- 14.1-14.3 the run --------------------------------------------------------------- */

static const char add_program[] = "import maf_host_tools as t\n"
				  "print('sum', t.add(left=2, right=3))\n"
				  "raise SystemExit(7)\n";

Test(overexec, one_call_end_to_end_14_1_14_2)
{
	struct harness h;
	add_calls = 0;
	harness(&h, "program.py", add_program, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes, "sum 5\n");
	cr_assert_eq(res.exit_code, 7);
	cr_assert_eq(msb_host_tool_run_calls(h.run), 1);
	cr_assert_eq(add_calls, 1);
	/* 14.2: never enumerates. */
	cr_assert_eq(h.counts.lists, 0);
	cr_assert_eq(MSB_HOST_TOOLS_OVER_EXEC_REQUIRES & MSB_CAP_FILES_LIST, 0u);
	cr_assert_eq(MSB_HOST_TOOLS_OVER_EXEC_REQUIRES,
		     MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_HOST_TOOLS);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

Test(overexec, argument_validation_up_front_14_3)
{
	struct harness h;
	harness(&h, "program.py", add_program, 16, 0);
	msb_over_exec_options o = MSB_OVER_EXEC_OPTIONS_INIT;
	msb_exec_result res;
	o.timeout = INFINITY;
	assert_refused(msb_host_tool_calls_over_exec(h.sb, h.run, &h.layout, &o, &res, &e_),
		       MSB_E_VALUE, "timeout");
	o.timeout = 1;
	o.poll_interval = 0;
	assert_refused(msb_host_tool_calls_over_exec(h.sb, h.run, &h.layout, &o, &res, &e_),
		       MSB_E_VALUE, "poll_interval");
	cr_assert_eq(h.counts.execs + h.counts.bounded + h.counts.writes + h.counts.stats, 0,
		     "no guest calls made");
	harness_free(&h);
}

/* ---- 14.13-14.16 the request protocol ------------------------------------------------ */

Test(overexec, concurrent_claims_14_13)
{
	static const char prog[] = "import os, maf_host_tools as t\n"
				   "pid = os.fork()\n"
				   "v = t.add(left=1, right=1 if pid == 0 else 2)\n"
				   "if pid == 0:\n"
				   "    os._exit(0 if v == 2 else 1)\n"
				   "_, st = os.waitpid(pid, 0)\n"
				   "print(v, os.waitstatus_to_exitcode(st))\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes, "3 0\n");
	cr_assert_eq(msb_host_tool_run_calls(h.run), 2);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* A program that publishes 0002 before 0001, then an abandoned 0003 and a
 * 0004, by hand: answered 0001 first, 0003 skipped without waiting. */
static const char order_program[] =
	"import json, os, time\n"
	"c = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'host_tool_calls')\n"
	"def pub(n, body):\n"
	"    p = os.path.join(c, '%04d.request.json' % n)\n"
	"    open(p + '.part', 'w').write(json.dumps(body)); os.rename(p + '.part', p)\n"
	"def wait(n):\n"
	"    p = os.path.join(c, '%04d.response.json' % n)\n"
	"    while not os.path.exists(p): time.sleep(0.005)\n"
	"    return json.load(open(p))\n"
	"pub(2, {'id': 2, 'name': 'note', 'arguments': {'tag': 'B'}})\n"
	"time.sleep(0.3)\n"
	"pub(1, {'id': 1, 'name': 'note', 'arguments': {'tag': 'A'}})\n"
	"pub(3, {'id': 3, 'abandoned': True})\n"
	"pub(4, {'id': 4, 'name': 'note', 'arguments': {'tag': 'C'}})\n"
	"print(wait(1), wait(2), wait(4))\n"
	"print(os.path.exists(os.path.join(c, '0003.response.json')))\n";

Test(overexec, sequential_service_14_14)
{
	struct harness h;
	order[0] = 0;
	harness(&h, "program.py", order_program, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq(order, "ABC");
	cr_assert_str_eq((char *)res.stdout_bytes,
			 "{'value': True} {'value': True} {'value': True}\nFalse\n");
	cr_assert_eq(msb_host_tool_run_calls(h.run), 3, "an abandoned id is not a call");
	msb_exec_result_clear(&res);
	harness_free(&h);
}

Test(overexec, framing_charged_over_exec_14_15)
{
	/* "add" answers "42": {"value": 42} is 13 bytes. */
	static const char prog[] = "import maf_host_tools as t\n"
				   "try:\n"
				   "    print(t.add(left=20, right=22))\n"
				   "except t.HostToolError as e:\n"
				   "    print(e)\n";
	for (uint64_t cap = 12; cap <= 13; cap++) {
		struct harness h;
		harness(&h, "program.py", prog, 16, cap);
		msb_exec_result res;
		msb_error *err = NULL;
		cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), 0, "%s",
			     err ? msb_error_message(err) : "");
		if (cap == 12)
			cr_assert(strstr((char *)res.stdout_bytes,
					 "response is 13 bytes and the per-response cap allows 12"),
				  "%s", res.stdout_bytes);
		else
			cr_assert_str_eq((char *)res.stdout_bytes, "42\n");
		msb_exec_result_clear(&res);
		harness_free(&h);
	}
}

Test(overexec, malformed_request_14_16)
{
	static const char prog[] =
		"import os, time\n"
		"c = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'host_tool_calls')\n"
		"open(os.path.join(c, '0001.request.json'), 'wb').write(b'\\xff{not json')\n"
		"p = os.path.join(c, '0001.response.json')\n"
		"while not os.path.exists(p): time.sleep(0.005)\n"
		"print(open(p).read())\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes,
			 "{\"refusal\":\"Error: this host-tool request is not valid JSON\"}\n");
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* A request file past 1 MiB (docs/security.md, "Budgets on guest bytes") is
 * not read whole: the refusal names the limit, and the call is counted. */
Test(overexec, request_past_its_budget_is_refused)
{
	static const char prog[] =
		"import os, time\n"
		"c = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'host_tool_calls')\n"
		"req = b'{\"name\": \"add\", \"arguments\": {\"left\": 1, \"right\": 2}}'\n"
		"for n, size in ((1, 1048577), (2, 1048576)):\n"
		"    p = os.path.join(c, '%04d.request.json' % n)\n"
		"    open(p + '.part', 'wb').write(req.rjust(size))\n"
		"    os.rename(p + '.part', p)\n"
		"    r = os.path.join(c, '%04d.response.json' % n)\n"
		"    while not os.path.exists(r): time.sleep(0.005)\n"
		"    print(open(r).read())\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes,
			 "{\"refusal\":\"Error: this host-tool request is over the 1048576-byte "
			 "limit — send smaller arguments\"}\n"
			 "{\"value\": 3}\n");
	cr_assert_eq(msb_host_tool_run_calls(h.run), 2);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* 14.35: a shell program writing the request by hand, no shim, no Python. */
Test(overexec, shim_is_not_a_control_14_35)
{
	static const char prog[] =
		"c=\"$(dirname \"$0\")/host_tool_calls\"\n"
		"printf '{\"id\": 1, \"name\": \"add\", \"arguments\": {\"left\": 40, \"right\": "
		"2}}' "
		">\"$c/0001.request.json.part\"\n"
		"mv \"$c/0001.request.json.part\" \"$c/0001.request.json\"\n"
		"printf '{\"id\": 2, \"name\": \"add\", \"arguments\": {\"left\": \"x\"}}' "
		">\"$c/0002.request.json.part\"\n"
		"mv \"$c/0002.request.json.part\" \"$c/0002.request.json\"\n"
		"while [ ! -e \"$c/0002.response.json\" ]; do sleep 0.01; done\n"
		"cat \"$c/0001.response.json\"; echo; cat \"$c/0002.response.json\"\n";
	struct harness h;
	harness(&h, "prog.sh", prog, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, "/bin/sh"), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_str_eq((char *)res.stdout_bytes,
			 "{\"value\": 42}\n{\"refusal\":\"Error: arguments do not bind to host "
			 "tool 'add': missing required argument 'right'\"}",
			 "%s", res.stdout_bytes);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* ---- 14.17-14.22 receipts, gate, processes --------------------------------------------- */

/* 14.17: the launcher reports receipts and exits; without the gate the
 * program never starts; with it, it does. */
Test(overexec, receipts_and_start_gate_14_17)
{
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/run", tmp);
	msb_guest_run_layout l;
	cr_assert_eq(msb_guest_run_layout_new(dir, "p.sh", &l, NULL), 0);
	char *launcher = NULL;
	cr_assert_eq(msb_hosttools__launcher(&l, "/bin/sh", 5, &launcher), 0);
	mkdir(dir, 0755);
	mkdir(l.transport, 0755);
	FILE *f = fopen(l.program, "w");
	fputs("echo started\n", f);
	fclose(f);
	f = fopen(l.launcher, "w");
	fputs(launcher, f);
	fclose(f);
	free(launcher);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "sh '%s'", l.launcher);
	struct local_counts c = {0};
	msb_sandbox *sb = local_sandbox_new(tmp, &c);
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = cmd;
	msb_exec_result r;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &r, NULL), 0);
	cr_assert_eq(r.exit_code, 0);
	const char *out = (const char *)r.stdout_bytes;
	int pid = 0, pgid = 0;
	cr_assert_eq(sscanf(out, "msb-receipt pid=%d\nmsb-receipt pgid=%d\nmsb-receipt end\n", &pid,
			    &pgid),
		     2, "%s", out);
	cr_assert_eq(pid, pgid);
	usleep(300 * 1000);
	cr_assert_not(exists(l.output), "the program started without the gate");
	cr_assert_eq(kill(pid, 0), 0, "the helper waits");
	f = fopen(l.gate, "w");
	fclose(f);
	for (int i = 0; i < 200 && !exists(l.exit_code); i++)
		usleep(10 * 1000);
	cr_assert(exists(l.exit_code));
	f = fopen(l.output, "r");
	char got[64] = {0};
	cr_assert_not_null(fgets(got, sizeof(got), f));
	fclose(f);
	cr_assert_str_eq(got, "started\n");
	msb_exec_result_clear(&r);
	msb_sandbox_free(sb);
	msb_guest_run_layout_clear(&l);
}

Test(overexec, bad_receipts_refuse_start_14_18)
{
	static const char *const bad[] = {
		"",
		"msb-receipt pid=1\nmsb-receipt end\n",
		"msb-receipt pid=abc\nmsb-receipt end\n",
		"msb-receipt pid=123\n", /* stream not closed with end */
		"msb-receipt pid=123\nmsb-receipt pgid=77\nmsb-receipt end\n",
		"msb-receipt pid=123\nmsb-receipt end\nextra\n",
		NULL};
	for (size_t i = 0; bad[i]; i++) {
		struct harness h;
		harness(&h, "program.py", add_program, 16, 0);
		h.counts.launcher_stdout = bad[i];
		msb_exec_result res;
		assert_refused(go(&h, 5, &res, &e_, NULL, NULL), MSB_E_RUNTIME,
			       "receipts are missing or invalid");
		char gate[400];
		snprintf(gate, sizeof(gate), "%s", h.layout.gate);
		cr_assert_not(exists(gate), "no program released");
		harness_free(&h);
	}
}

static int cleanups, observed;
static bool last_unclean;
static msb_signal_outcome last_signal;
static size_t last_survivors, last_targets;
static int on_cleanup(void *ud, const msb_ev_process_cleanup *ev)
{
	cleanups++;
	last_unclean = ev->unclean;
	last_signal = ev->signal;
	last_survivors = ev->n_survivors;
	last_targets = ev->targets_signalled;
	return 0;
}
static int observed_incomplete;
static size_t most_observed;
static int on_observed(void *ud, const msb_ev_processes_observed *ev)
{
	observed++;
	observed_incomplete += !ev->complete;
	if (ev->n_processes > most_observed)
		most_observed = ev->n_processes;
	return 0;
}
static msb_observer proc_observer(void)
{
	msb_observer o = MSB_OBSERVER_INIT;
	o.process_cleanup = on_cleanup;
	o.processes_observed = on_observed;
	cleanups = observed = observed_incomplete = 0;
	most_observed = 0;
	return o;
}

/* 14.19: the program overwrites program_pid with 1; only the receipt's pid
 * is ever a target (this test process survives to assert). */
Test(overexec, guest_files_never_name_targets_14_19_14_25)
{
	static const char prog[] = "import os, time\n"
				   "d = os.path.dirname(os.path.abspath(__file__))\n"
				   "open(os.path.join(d, 'program_pid'), 'w').write('1')\n"
				   "print('partial', flush=True)\n"
				   "time.sleep(100)\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_observer obs = proc_observer();
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 3, &res, &err, &obs, NULL), MSB_E_PROGRAM_TIMEOUT);
	cr_assert_str_eq(msb_error_name(err), "SandboxProgramTimeout");
	cr_assert(msb_code_is(MSB_E_PROGRAM_TIMEOUT, MSB_CAT_TIMEOUT));
	int sig = -1;
	const uint8_t *output = NULL;
	size_t olen = 0;
	cr_assert(msb_error_timeout(err, &sig, &output, &olen));
	cr_assert_eq(sig, MSB_SIGNAL_SENT, "%s", msb_signal_outcome_name(sig));
	cr_assert_eq(olen, 8);
	cr_assert_eq(memcmp(output, "partial\n", 8), 0);
	cr_assert(strstr(msb_error_message(err), "signalled"), "%s", msb_error_message(err));
	msb_error_free(err);
	cr_assert_eq(cleanups, 1);
	cr_assert_eq(last_survivors, 0, "the program is gone");
	cr_assert_eq(kill(getpid(), 0), 0);
	harness_free(&h);
}

/* 14.20: a child that calls setsid escapes the group; it is observed as a
 * descendant, signalled and not left behind. */
Test(overexec, escaped_descendant_14_20)
{
	static const char prog[] = "import os, time\n"
				   "pid = os.fork()\n"
				   "if pid == 0:\n"
				   "    os.setsid()\n"
				   "    open('escaped.pid', 'w').write(str(os.getpid()))\n"
				   "    time.sleep(100)\n"
				   "    os._exit(0)\n"
				   "time.sleep(100)\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_observer obs = proc_observer();
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 3, &res, &err, &obs, NULL), MSB_E_PROGRAM_TIMEOUT, "%s",
		     err ? msb_error_message(err) : "");
	msb_error_free(err);
	char path[400];
	snprintf(path, sizeof(path), "%s/work/escaped.pid", h.layout.directory);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	int esc = 0;
	cr_assert_eq(fscanf(f, "%d", &esc), 1);
	fclose(f);
	cr_assert_geq(last_targets, 2, "group and the escaped descendant");
	cr_assert_eq(last_survivors, 0);
	usleep(100 * 1000);
	/* Reaped by init or a zombie at most: not a running process. */
	char stat[64], st[512] = {0};
	snprintf(stat, sizeof(stat), "/proc/%d/stat", esc);
	FILE *s = fopen(stat, "r");
	if (s) {
		if (!fgets(st, sizeof(st), s))
			st[0] = 0;
		fclose(s);
		cr_assert(strstr(st, ") Z ") || strstr(st, ") X "), "escaped child alive: %s", st);
	}
	harness_free(&h);
}

Test(overexec, incomplete_snapshots_are_unclean_14_21)
{
	struct harness h;
	harness(&h, "program.py", add_program, 16, 0);
	h.counts.no_bounded = true;
	msb_observer obs = proc_observer();
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, &obs, NULL), 0);
	cr_assert_eq(res.exit_code, 7);
	cr_assert_eq(cleanups, 1);
	cr_assert(last_unclean, "unavailable observations mark cleanup unclean");
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* A scan of `n` live processes outside the run (pids 3000000 and up), and
 * one line that ends at its ')'. */
static char *canned_snapshot(int n)
{
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, "self 1\np 0 7 (cut)\n");
	for (int i = 0; i < n; i++)
		msb__buf_printf(&b, "p 0 %d (sleep) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d\n",
				3000000 + i, 3000000 + i, 3000000 + i, 100 + i);
	msb__buf_puts(&b, "end\n");
	return msb__buf_steal_str(&b);
}

/* The transport holds at most 4096 processes of a scan (docs/security.md,
 * "Budgets on guest bytes"): one more makes the snapshot incomplete and the
 * cleanup unclean (14.21), never a silently partial view. */
Test(overexec, snapshot_past_the_process_budget_is_unclean_14_21)
{
	for (int n = 4096; n <= 4097; n++) {
		_cleanup_free_ char *canned = canned_snapshot(n);
		struct harness h;
		harness(&h, "program.py", add_program, 16, 0);
		h.counts.snapshot_stdout = canned;
		msb_observer obs = proc_observer();
		msb_exec_result res;
		msb_error *err = NULL;
		cr_assert_eq(go(&h, 20, &res, &err, &obs, NULL), 0, "%s",
			     err ? msb_error_message(err) : "");
		cr_assert_eq(res.exit_code, 7);
		cr_assert_eq(cleanups, 1);
		cr_assert_leq(most_observed, 4096);
		if (n == 4096) {
			cr_assert_eq(observed_incomplete, 0, "%d processes fit", n);
			cr_assert_not(last_unclean, "%d processes fit", n);
		} else {
			cr_assert_gt(observed_incomplete, 0, "%d processes are past it", n);
			cr_assert(last_unclean, "%d processes are past it", n);
		}
		msb_exec_result_clear(&res);
		harness_free(&h);
	}
}

Test(overexec, cleanup_on_success_14_22)
{
	struct harness h;
	harness(&h, "program.py", add_program, 16, 0);
	msb_observer obs = proc_observer();
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, &obs, NULL), 0);
	cr_assert_eq(cleanups, 1, "a successful run is cleaned up too");
	cr_assert_geq(observed, 4, "before/after launch, before signal, after cleanup");
	cr_assert_geq(last_targets, 1);
	cr_assert_not(last_unclean);
	cr_assert_gt(h.counts.bounded, 0);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* ---- 14.23-14.28 time, signals, results ------------------------------------------------ */

Test(overexec, timing_budget_14_23)
{
	static const char prog[] = "import signal, time\n"
				   "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
				   "time.sleep(100)\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	double t0 = now_s();
	cr_assert_eq(go(&h, 1, &res, &err, NULL, NULL), MSB_E_PROGRAM_TIMEOUT);
	double took = now_s() - t0;
	cr_assert_lt(took, 1 + 21, "transport overhead beyond timeout + 21 s: %g", took);
	int sig;
	cr_assert(msb_error_timeout(err, &sig, NULL, NULL));
	cr_assert_eq(sig, MSB_SIGNAL_SENT, "SIGTERM ignored, SIGKILL followed");
	msb_error_free(err);
	harness_free(&h);
}

Test(overexec, running_tool_not_cancelled_14_24)
{
	static const char prog[] = "import maf_host_tools as t, time\n"
				   "print(t.sleepy(), flush=True)\n"
				   "time.sleep(100)\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	msb_error *err = NULL;
	slept = 0;
	double t0 = now_s();
	cr_assert_eq(go(&h, 3, &res, &err, NULL, NULL), MSB_E_PROGRAM_TIMEOUT);
	cr_assert_eq(slept, 1, "the tool ran to completion");
	cr_assert_geq(now_s() - t0, 4.5);
	cr_assert_eq(msb_host_tool_run_delivered(h.run), 1, "and its answer was delivered");
	msb_error_free(err);
	harness_free(&h);
}

Test(overexec, backend_timeout_passes_through_14_25)
{
	static const char prog[] = "import time\ntime.sleep(2)\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	h.counts.stat_timeout_from = 2;
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, NULL, NULL), MSB_E_TIMEOUT);
	cr_assert_str_eq(msb_error_name(err), "TimeoutError");
	msb_error_free(err);
	harness_free(&h);
}

/* 14.26: a recorded process that is already gone: nothing to signal. */
Test(overexec, absent_signal_14_26)
{
	pid_t dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	char receipts[128];
	snprintf(receipts, sizeof(receipts),
		 "msb-receipt pid=%d\nmsb-receipt pgid=%d\nmsb-receipt end\n", (int)dead,
		 (int)dead);
	struct harness h;
	harness(&h, "program.py", add_program, 16, 0);
	h.counts.launcher_stdout = receipts;
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 0.5, &res, &err, NULL, NULL), MSB_E_PROGRAM_TIMEOUT);
	int sig;
	size_t olen = 99;
	cr_assert(msb_error_timeout(err, &sig, NULL, &olen));
	cr_assert_eq(sig, MSB_SIGNAL_ABSENT, "%s", msb_signal_outcome_name(sig));
	cr_assert_eq(olen, 0, "never started: empty output");
	msb_error_free(err);
	harness_free(&h);
}

/* 14.27, 14.36: the exit marker is a guest-written claim; once it lands the
 * run is reported completed with that code, not as a timeout. */
Test(overexec, marker_means_completed_14_27_14_36)
{
	static const char prog[] =
		"import os, time\n"
		"d = os.path.dirname(os.path.abspath(__file__))\n"
		"print('done', flush=True)\n"
		"p = os.path.join(d, 'program_exit_code')\n"
		"open(p + '.part', 'w').write('3\\n')\n"
		"os.replace(p + '.part', p)\n" /* lands whole, as the launcher's */
		"time.sleep(100)\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_observer obs = proc_observer();
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(go(&h, 20, &res, &err, &obs, NULL), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(res.exit_code, 3);
	cr_assert_str_eq((char *)res.stdout_bytes, "done\n");
	/* The claim did not stop the program; cleanup did. */
	cr_assert_eq(last_survivors, 0);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

Test(overexec, launcher_failure_14_28)
{
	struct harness h;
	harness(&h, "program.py", add_program, 16, 0);
	FILE *f = fopen(h.layout.work, "w"); /* work/ cannot be created */
	fclose(f);
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, NULL, NULL), 0);
	cr_assert_eq(res.exit_code, 126);
	cr_assert(strstr((char *)res.stderr_bytes, "launcher did not start the program"));
	cr_assert_eq(add_calls, 0);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

/* ---- 14.29-14.34 files, reclaim, environment -------------------------------------------- */

Test(overexec, transport_removed_work_kept_14_29_14_30)
{
	static const char prog[] = "open('artifact.txt', 'w').write('kept')\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, NULL, NULL), 0);
	cr_assert_not(exists(h.layout.transport), "host_tools/ is gone");
	char art[400];
	snprintf(art, sizeof(art), "%s/artifact.txt", h.layout.work);
	cr_assert(exists(art), "work/ is left for collection");
	msb_exec_result_clear(&res);
	/* and on a failure path too */
	harness_free(&h);
	harness(&h, "program.py", add_program, 16, 0);
	h.counts.launcher_stdout = "garbage\n";
	cr_assert_eq(go(&h, 5, &res, NULL, NULL, NULL), MSB_E_RUNTIME);
	cr_assert_not(exists(h.layout.transport));
	harness_free(&h);
}

Test(overexec, reclaim_run_14_31)
{
	struct local_counts c = {0};
	msb_sandbox *sb = local_sandbox_new(tmp, &c);
	msb_guest_run_layout l;
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/run", tmp);
	cr_assert_eq(msb_guest_run_layout_new(dir, NULL, &l, NULL), 0);
	bool removed = true;
	assert_refused(msb_reclaim_run(sb, &l, NAN, &removed, &e_), MSB_E_VALUE, "timeout");
	cr_assert_eq(c.execs, 0);
	mkdir(dir, 0755);
	mkdir(l.work, 0755);
	/* A layout whose work lies outside its directory: refused, no rm. */
	char *saved = l.work;
	l.work = strdup("/elsewhere/work");
	cr_assert_eq(msb_reclaim_run(sb, &l, 5, &removed, NULL), 0);
	cr_assert_not(removed);
	cr_assert_eq(c.execs, 0);
	free(l.work);
	l.work = saved;
	/* Too short a directory. */
	msb_guest_run_layout t;
	cr_assert_eq(msb_guest_run_layout_new("/tmp", NULL, &t, NULL), 0);
	cr_assert_eq(msb_reclaim_run(sb, &t, 5, &removed, NULL), 0);
	cr_assert_not(removed);
	msb_guest_run_layout_clear(&t);
	cr_assert_eq(msb_guest_run_layout_new("rel/run", NULL, &t, NULL), 0);
	cr_assert_eq(msb_reclaim_run(sb, &t, 5, &removed, NULL), 0);
	cr_assert_not(removed, "a relative directory is refused");
	msb_guest_run_layout_clear(&t);
	cr_assert_eq(c.execs, 0);
	/* Normal. */
	cr_assert_eq(msb_reclaim_run(sb, &l, 5, &removed, NULL), 0);
	cr_assert(removed);
	cr_assert_not(exists(dir));
	msb_guest_run_layout_clear(&l);
	msb_sandbox_free(sb);
}

Test(overexec, pythonpath_rewrite_14_32)
{
	static const char prog[] = "import os\nprint(os.environ['PYTHONPATH'])\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	char inherited[1024];
	const char *r = h.layout.directory;
	snprintf(inherited, sizeof(inherited),
		 "/opt/a:rel:%s/work:%s:%s2:/x/./y:/opt/*:/z//q:/w/..:", r, r, r);
	setenv("PYTHONPATH", inherited, 1);
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, NULL, NULL), 0);
	char want[1024];
	snprintf(want, sizeof(want), "%s:/opt/a:%s2:/opt/*\n", h.layout.transport, r);
	cr_assert_str_eq((char *)res.stdout_bytes, want);
	unsetenv("PYTHONPATH");
	msb_exec_result_clear(&res);
	harness_free(&h);
}

Test(overexec, interpreter_environment_14_33)
{
	static const char prog[] =
		"import os, sys\n"
		"print(os.environ['PYTHONNOUSERSITE'], os.environ['PYTHONUNBUFFERED'])\n"
		"print(os.getcwd())\n"
		"print(sys.path[0])\n";
	struct harness h;
	harness(&h, "program.py", prog, 16, 0);
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, NULL, NULL), 0);
	char want[9000];
	char real[4096];
	cr_assert_not_null(realpath(tmp, real));
	snprintf(want, sizeof(want), "1 1\n%s/run/work\n%s/run/host_tools\n", real, real);
	cr_assert_str_eq((char *)res.stdout_bytes, want);
	msb_exec_result_clear(&res);
	harness_free(&h);
}

Test(overexec, relative_run_directory_14_34)
{
	static const char prog[] =
		"import os, maf_host_tools as t\nprint(os.getcwd(), t.add(left=1, "
		"right=1))\n";
	struct local_counts c = {0};
	msb_sandbox *sb = local_sandbox_new(tmp, &c);
	msb_host_tool_registry *reg = registry(16, 0);
	msb_host_tool_run *run = NULL;
	cr_assert_eq(msb_host_tool_run_new(reg, NULL, NULL, &run, NULL), 0);
	msb_guest_run_layout l;
	cr_assert_eq(msb_guest_run_layout_new("abc", NULL, &l, NULL), 0);
	cr_assert_eq(msb_sandbox_write_file(sb, l.program, (const uint8_t *)prog, strlen(prog),
					    NULL, NULL),
		     0);
	const char *names[] = {"add"};
	char *shim = NULL;
	cr_assert_eq(msb_host_tool_shim(names, 1, 300, &shim, NULL), 0);
	cr_assert_eq(
		msb_sandbox_write_file(sb, l.shim, (const uint8_t *)shim, strlen(shim), NULL, NULL),
		0);
	free(shim);
	msb_over_exec_options o = MSB_OVER_EXEC_OPTIONS_INIT;
	o.interpreter = PY;
	o.poll_interval = 0.01;
	msb_exec_result res;
	msb_error *err = NULL;
	cr_assert_eq(msb_host_tool_calls_over_exec(sb, run, &l, &o, &res, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	char real[4096], want[4200];
	cr_assert_not_null(realpath(tmp, real));
	snprintf(want, sizeof(want), "%s/abc/work 2\n", real);
	cr_assert_str_eq((char *)res.stdout_bytes, want);
	msb_exec_result_clear(&res);
	msb_guest_run_layout_clear(&l);
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(reg);
	msb_sandbox_free(sb);
}

/* The call cap over the transport: a refusal the program reads, not an end. */
Test(overexec, cap_refusal_reaches_program_13_18)
{
	static const char prog[] = "import maf_host_tools as t\n"
				   "print(t.add(left=1, right=1))\n"
				   "try:\n"
				   "    t.add(left=1, right=1)\n"
				   "except t.HostToolError as e:\n"
				   "    print(e)\n"
				   "print('finished')\n";
	struct harness h;
	harness(&h, "program.py", prog, 1, 0);
	msb_exec_result res;
	cr_assert_eq(go(&h, 20, &res, NULL, NULL, NULL), 0);
	cr_assert_str_eq(
		(char *)res.stdout_bytes,
		"2\nError: this run's host-tool-call cap (1) is exhausted — finish with "
		"the results already delivered and report what remains undone\nfinished\n");
	msb_exec_result_clear(&res);
	harness_free(&h);
}
