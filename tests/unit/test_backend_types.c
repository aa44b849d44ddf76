/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend-type table and the backend contract around it (issue 14):
 * every backend from JSON is made by a row of msb_backend_types(); msb doctor
 * reports exactly those rows; a backend reaches its own object behind a
 * handle through its vtable's address; the `fake` row takes the emulated
 * POSIX guest and seeded files; the `ns` row resolves its state root by the
 * one rule of ns_state.c (checklist 4.1, 4.10, 19.5, 19.6).
 */
#include <criterion/criterion.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/testing.h>

#include "helpers.h"
#include "inert_sandbox.h"

static msb_backend *from_json(const char *json)
{
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_from_json(json, strlen(json), &b, &err), 0, "%s: %s", json,
		     msb_error_message(err));
	return b;
}

#define assert_json_refused(json, code, phrase)                                                    \
	do {                                                                                       \
		msb_backend *b_ = NULL;                                                            \
		assert_refused(msb_backend_from_json(json, strlen(json), &b_, &e_), code, phrase); \
		cr_assert_null(b_);                                                                \
	} while (0)

/* ---- the table ------------------------------------------------------------------------ */

Test(backend_types, one_row_per_built_in_backend)
{
	size_t n = 0;
	const msb_backend_type *const *t = msb_backend_types(&n);
	const char *want[] = {"declared", "fake", "ns", "oci", "docker", "wslc", "vm"};
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]));
	cr_assert_null(t[n], "the table is NULL-terminated");
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(t[i]->name, want[i]);
		cr_assert_eq(t[i]->version, MSB_BACKEND_TYPE_VERSION);
		cr_assert(t[i]->summary && *t[i]->summary && !strchr(t[i]->summary, '\n'));
		cr_assert_not_null(t[i]->keys);
		cr_assert_not_null(t[i]->from_json);
		cr_assert_not_null(t[i]->doctor);
		cr_assert_eq(msb_backend_type_find(want[i]), t[i]);
	}
	cr_assert_null(msb_backend_type_find("kvm"));	 /* not a type: a rung of `vm` */
	cr_assert_null(msb_backend_type_find("Docker")); /* names are exact */
	cr_assert_null(msb_backend_type_find(NULL));
	cr_assert_eq(msb_backend_types(NULL), t);
}

/* The refusal of an unknown or missing type lists the table, not a copy. */
Test(backend_types, type_refusals_list_the_table)
{
	size_t n = 0;
	const msb_backend_type *const *t = msb_backend_types(&n);
	char names[256] = "";
	for (size_t i = 0; i < n; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s`%s`",
			 i ? ", " : "", t[i]->name);
	char phrase[320];
	snprintf(phrase, sizeof(phrase), "backend.type is required: one of %s", names);
	assert_json_refused("{\"name\": \"x\"}", MSB_E_VALUE, phrase);
	snprintf(phrase, sizeof(phrase), "`kvm` is not a backend type: expected one of %s", names);
	assert_json_refused("{\"type\": \"kvm\"}", MSB_E_VALUE, phrase);
	assert_json_refused("{\"type\": 3}", MSB_E_TYPE, "type");
}

/* Every backend JSON goes through its row: the row's keys are the strict
 * list, and a legacy declaration key is only ever a legacy-key refusal for
 * a type that carries declarations (4.10). */
Test(backend_types, keys_come_from_the_row)
{
	assert_json_refused("{\"type\": \"ns\", \"posix_guest\": true}", MSB_E_VALUE,
			    "backend: unknown key `posix_guest`");
	assert_json_refused("{\"type\": \"declared\", \"name\": \"d\", \"isolation\": \"vm\", "
			    "\"state_dir\": \"/x\"}",
			    MSB_E_VALUE, "backend: unknown key `state_dir`");
	assert_json_refused("{\"type\": \"ns\", \"egress_modes\": [\"closed\"]}", MSB_E_VALUE,
			    "unknown key `egress_modes`");
	assert_json_refused("{\"type\": \"fake\", \"name\": \"f\", \"egress_modes\": []}",
			    MSB_E_VALUE, "sandbox backend 'f' declares `egress_modes` outside");
}

/* ---- msb doctor -------------------------------------------------------------------------- */

Test(backend_types, doctor_lists_exactly_the_table, .timeout = 60)
{
	msb_doctor_report *rep = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_doctor(&rep, &err), 0, "%s", msb_error_message(err));
	size_t n = 0;
	const msb_backend_type *const *t = msb_backend_types(&n);
	cr_assert_eq(rep->n_backends, n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(rep->backends[i].name, t[i]->name);
		cr_assert(rep->backends[i].reason && *rep->backends[i].reason);
	}
	/* The fake and the declared backend need nothing of the host. */
	cr_assert(rep->backends[0].ok && rep->backends[1].ok);
	/* The facilities come from the types that try some: ns's, and vm's
	 * under its own name (vm.qemu, vm.kvm, ...). */
	bool userns = false, vm = false;
	for (size_t i = 0; i < rep->n_probes; i++) {
		cr_assert_str_neq(rep->probes[i].name, "kvm");
		userns |= strncmp(rep->probes[i].name, "userns.", 7) == 0;
		vm |= strncmp(rep->probes[i].name, "vm.", 3) == 0;
	}
	cr_assert(userns && vm);
	msb_doctor_report_free(rep);
	msb_doctor_report_free(NULL);
	msb_backend_probe_clear(NULL);
}

/* ---- reaching one's own object ------------------------------------------------------------- */

Test(backend_types, sandbox_impl_only_for_its_own_vtable)
{
	msb_sandbox *sb = NULL;
	cr_assert_eq(test_inert_sandbox_new("inst-1", "inert", &sb, NULL), 0);
	/* The inert sandbox's impl is its instance id string. */
	void *impl = msb_sandbox_impl(sb, &test_inert_ops);
	cr_assert_not_null(impl);
	cr_assert_eq(impl, (void *)msb_sandbox_instance_id(sb));
	/* The same slots in another vtable are another backend's. */
	msb_sandbox_ops copy = test_inert_ops;
	cr_assert_null(msb_sandbox_impl(sb, &copy));
	cr_assert_null(msb_sandbox_impl(NULL, &test_inert_ops));
	cr_assert_null(msb_sandbox_impl(sb, NULL));
	msb_sandbox_free(sb);

	/* The fake's handle is not the inert backend's. */
	msb_fake_sandbox *fs = NULL;
	cr_assert_eq(msb_fake_sandbox_new(NULL, &fs, NULL), 0);
	cr_assert_eq(msb_fake_sandbox_handle(fs, &sb, NULL), 0);
	cr_assert_null(msb_sandbox_impl(sb, &test_inert_ops));
	msb_sandbox_free(sb);
	msb_fake_sandbox_unref(fs);
}

static int b_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		     msb_error **err)
{
	return MSB_E_NOT_IMPLEMENTED;
}
static int b_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		     msb_disposal_failure **failure, msb_error **err)
{
	*failure = NULL;
	return 0;
}
static int b_dispose_scope(void *impl, const char *scope, const char *thread_id,
			   msb_scope_purge *out, msb_error **err)
{
	return 0;
}
static void b_reporter(void *impl, const msb_egress_reporter *reporter)
{
}
static void b_free(void *impl)
{
}
static const msb_backend_ops b_ops = {MSB_BACKEND_OPS_VERSION, b_acquire,  b_dispose,
				      b_dispose_scope,	       b_reporter, b_free};

Test(backend_types, backend_impl_only_for_its_own_vtable)
{
	static int object;
	msb_backend_info info = {MSB_BACKEND_INFO_VERSION, "mine", "container", NULL};
	msb_backend *b = NULL;
	cr_assert_eq(msb_backend_new(&b_ops, &info, &object, &b, NULL), 0);
	cr_assert_eq(msb_backend_impl(b, &b_ops), &object);
	msb_backend_ops copy = b_ops;
	cr_assert_null(msb_backend_impl(b, &copy));
	cr_assert_null(msb_backend_impl(NULL, &b_ops));
	/* The ns accessor asks the same question of its own vtable. */
	cr_assert_null(msb_ns_backend_state_root(b));
	msb_backend_unref(b);
}

/* ---- the fake row --------------------------------------------------------------------------- */

static msb_sandbox *acquire(msb_backend *b)
{
	msb_key key = {"s", "t", "a", NULL};
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_from_json("{\"kind\": \"k\"}", 13, &spec, NULL), 0);
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_acquire(b, &key, spec, &sb, &err), 0, "%s",
		     msb_error_message(err));
	msb_spec_unref(spec);
	return sb;
}

static void run(msb_sandbox *sb, const char *const *argv, int want_code, const char *want_out)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(res.exit_code, want_code, "%s exited %d", argv[0], res.exit_code);
	cr_assert_eq(res.stdout_len, strlen(want_out), "%s printed `%s`", argv[0],
		     (char *)res.stdout_bytes);
	cr_assert_eq(memcmp(res.stdout_bytes, want_out, res.stdout_len), 0);
	msb_exec_result_clear(&res);
}

/* 19.6 through JSON: posix_guest turns the emulated guest on, so the
 * conformance suites can run against a fake a router holds (msb serve). */
Test(backend_types, fake_posix_guest_from_json)
{
	const char *printf_argv[] = {"printf", "[%s]", "a b", NULL};
	msb_backend *b = from_json("{\"type\": \"fake\", \"posix_guest\": true}");
	msb_sandbox *sb = acquire(b);
	run(sb, printf_argv, 0, "[a b]");
	msb_sandbox_free(sb);
	msb_backend_unref(b);

	/* Off (the default): exec answers from scripted outputs, runs nothing. */
	b = from_json("{\"type\": \"fake\"}");
	sb = acquire(b);
	run(sb, printf_argv, 0, "");
	msb_sandbox_free(sb);
	msb_backend_unref(b);

	assert_json_refused("{\"type\": \"fake\", \"posix_guest\": \"yes\"}", MSB_E_TYPE,
			    "posix_guest");
}

/* 19.5 through JSON: seeded files, directories and links, present from the
 * start (so fingerprint() sees no change), contents as text or base64. */
Test(backend_types, fake_seed_files_from_json)
{
	msb_backend *b = from_json(
		"{\"type\": \"fake\", \"posix_guest\": true, \"seed_files\": ["
		"{\"path\": \"/w/a.txt\", \"text\": \"alpha\\n\"},"
		"{\"path\": \"/w/bin.dat\", \"kind\": \"file\", \"base64\": \"AAEC/w==\"},"
		"{\"path\": \"/w/empty-dir\", \"kind\": \"directory\"},"
		"{\"path\": \"/w/link\", \"kind\": \"symlink\"}]}");
	msb_sandbox *sb = acquire(b);
	const char *cat[] = {"cat", "/w/a.txt", NULL};
	run(sb, cat, 0, "alpha\n");
	const char *isdir[] = {"test", "-d", "/w/empty-dir", NULL};
	run(sb, isdir, 0, "");
	const char *islink[] = {"test", "-L", "/w/link", NULL};
	run(sb, islink, 0, "");
	uint8_t *data = NULL;
	size_t len = 0;
	cr_assert_eq(msb_sandbox_read_file(sb, "bin.dat", "/w", 64, &data, &len, NULL), 0);
	cr_assert_eq(len, 4);
	cr_assert_eq(memcmp(data, "\x00\x01\x02\xff", 4), 0);
	free(data);
	bool supported = false;
	msb_fingerprint fp = {0};
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, NULL), 0);
	cr_assert(supported);
	cr_assert_eq(msb_strv_len(fp.changed_paths), 0, "seeds are the state at creation");
	msb_fingerprint_clear(&fp);
	msb_sandbox_free(sb);
	msb_backend_unref(b);

	/* Each backend made from JSON has a fresh sandbox of its own. */
	b = from_json("{\"type\": \"fake\", \"posix_guest\": true}");
	sb = acquire(b);
	const char *absent[] = {"test", "-e", "/w/a.txt", NULL};
	run(sb, absent, 1, "");
	msb_sandbox_free(sb);
	msb_backend_unref(b);
}

Test(backend_types, fake_seed_files_strict)
{
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": {}}", MSB_E_TYPE,
			    "backend.seed_files must be a list");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [\"/w/a\"]}", MSB_E_TYPE,
			    "backend.seed_files[0] must be an object");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"text\": \"x\"}]}",
			    MSB_E_VALUE, "backend.seed_files[0].path is required");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"/a\", "
			    "\"mode\": 420}]}",
			    MSB_E_VALUE, "backend.seed_files[0]: unknown key `mode`");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"/a\", "
			    "\"text\": \"x\", \"base64\": \"eA==\"}]}",
			    MSB_E_VALUE, "refused together");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"/d\", "
			    "\"kind\": \"directory\", \"text\": \"x\"}]}",
			    MSB_E_VALUE, "only a `file` seed has contents");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"/a\", "
			    "\"kind\": \"fifo\"}]}",
			    MSB_E_VALUE, "backend.seed_files[0].kind");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"/a\", "
			    "\"base64\": \"not base64!\"}]}",
			    MSB_E_VALUE, "backend.seed_files[0].base64 is not base64");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"w/a\"}]}",
			    MSB_E_VALUE, "not an absolute POSIX guest path");
	assert_json_refused("{\"type\": \"fake\", \"seed_files\": [{\"path\": \"/a\"}, "
			    "{\"path\": \"/a\"}]}",
			    MSB_E_VALUE, "given twice");
}

/* ---- the ns row: one state-root rule (ns_state.c) ----------------------------------------- */

/* pool_size (docs/pool.md): a count of sandboxes kept ready, 0..64. */
Test(backend_types, ns_pool_size_from_json)
{
	msb_backend *b = from_json("{\"type\": \"ns\", \"pool_size\": 64}");
	cr_assert_not_null(b);
	msb_backend_unref(b);
	assert_json_refused("{\"type\": \"ns\", \"pool_size\": 65}", MSB_E_VALUE,
			    "`pool_size` 65 is over the most, 64");
	assert_json_refused("{\"type\": \"ns\", \"pool_size\": -1}", MSB_E_VALUE, "pool_size");
	assert_json_refused("{\"type\": \"ns\", \"pool_size\": \"2\"}", MSB_E_TYPE, "pool_size");
	/* C callers of options versions 1 and 2 have no pool_size field: 0
	 * whatever lies past their struct. */
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = "/tmp/msb-types-root";
	o.pool_size = MSB_NS_POOL_MAX + 1;
	o.version = 1;
	cr_assert_eq(msb_ns_backend_new(&o, &b, NULL), 0);
	msb_backend_unref(b);
	o.version = 2;
	cr_assert_eq(msb_ns_backend_new(&o, &b, NULL), 0);
	msb_backend_unref(b);
	o.version = 3;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &err), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(err), "pool_size"), "%s", msb_error_message(err));
	msb_error_free(err);
}

Test(backend_types, ns_state_root_from_json)
{
	msb_backend *b = from_json("{\"type\": \"ns\", \"state_dir\": \"/tmp/msb-types-root\"}");
	cr_assert_str_eq(msb_ns_backend_state_root(b), "/tmp/msb-types-root");
	msb_backend_unref(b);

	setenv("MSB_STATE_DIR", "/tmp/msb-types-env", 1);
	b = from_json("{\"type\": \"ns\"}");
	cr_assert_str_eq(msb_ns_backend_state_root(b), "/tmp/msb-types-env");
	msb_backend_unref(b);
	unsetenv("MSB_STATE_DIR");

	b = from_json("{\"type\": \"fake\"}");
	cr_assert_null(msb_ns_backend_state_root(b));
	msb_backend_unref(b);
}

/* What an ordinary user's ns backend resolves, checked in a child that is
 * one (nobody, when the tests run as root): 0 when it matched. */
static int child_state_root(const char *xdg, const char *state_env, const char *want_root)
{
	if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
		return 10;
	unsetenv("MSB_STATE_DIR");
	unsetenv("XDG_RUNTIME_DIR");
	if (xdg)
		setenv("XDG_RUNTIME_DIR", xdg, 1);
	if (state_env)
		setenv("MSB_STATE_DIR", state_env, 1);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	const char *json = "{\"type\": \"ns\"}";
	int r = msb_backend_from_json(json, strlen(json), &b, &err);
	if (!want_root) {
		/* Refused, never quietly /run/msb: that is root's. */
		return r == MSB_E_VALUE && strstr(msb_error_message(err),
						  "no state directory: set MSB_STATE_DIR or "
						  "XDG_RUNTIME_DIR")
			       ? 0
			       : 11;
	}
	return r == 0 && strcmp(msb_ns_backend_state_root(b), want_root) == 0 ? 0 : 12;
}

static void in_child(const char *xdg, const char *state_env, const char *want_root)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child_state_root(xdg, state_env, want_root));
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "xdg=%s MSB_STATE_DIR=%s: child status %d",
		  xdg ? xdg : "(unset)", state_env ? state_env : "(unset)", WEXITSTATUS(st));
}

Test(backend_types, ns_state_root_of_an_ordinary_user)
{
	/* No XDG_RUNTIME_DIR: refused (the case msb conformance used to send
	 * to /run/msb on its own). */
	in_child(NULL, NULL, NULL);
	in_child("", NULL, NULL);
	/* With one: $XDG_RUNTIME_DIR/msb; an empty MSB_STATE_DIR is unset. */
	in_child("/tmp/msb-types-xdg", NULL, "/tmp/msb-types-xdg/msb");
	in_child("/tmp/msb-types-xdg", "", "/tmp/msb-types-xdg/msb");
	in_child(NULL, "/tmp/msb-types-env", "/tmp/msb-types-env");
}
