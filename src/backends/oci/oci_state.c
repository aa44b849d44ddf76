/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What msb-oci-shim and the `oci` backend share (oci_shim.h): runtime names,
 * the shim's configuration, the oci files of a state directory and their
 * purge. Linked into the shim and into libmsb.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <jansson.h>

#include "backends/oci/oci_shim.h"
#include "util/fs.h"
#include "util/json.h"

static const char *const runtime_names[OCI_N_RUNTIMES] = {"runsc", "crun", "runc"};

const char *msb_oci__runtime_name(oci_runtime rt)
{
	return (unsigned)rt < OCI_N_RUNTIMES ? runtime_names[rt] : NULL;
}

int msb_oci__runtime_from_name(const char *name)
{
	for (int i = 0; name && i < OCI_N_RUNTIMES; i++)
		if (strcmp(runtime_names[i], name) == 0)
			return i;
	return -1;
}

void msb_oci__shim_config_clear(oci_shim_config *c)
{
	msb_ns__config_clear(&c->ns);
	free(c->runtime_path);
	free(c->platform);
	c->runtime_path = NULL;
	c->platform = NULL;
}

/* Take a string key out of `o` (absent: *out stays NULL). */
static int take_string(json_t *o, const char *key, char **out, msb_error **err)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return msb_error_set(err, MSB_E_TYPE, "oci config: `%s` must be a string", key);
	if (!(*out = strdup(json_string_value(v))))
		return msb__error_nomem(err);
	json_object_del(o, key);
	return 0;
}

static bool platform_ok(const char *p)
{
	if (!p[0] || strlen(p) > 32)
		return false;
	for (const char *c = p; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
			return false;
	return true;
}

int msb_oci__shim_config_parse(oci_shim_config *c, const char *json, size_t len, msb_error **err)
{
	memset(c, 0, sizeof(*c));
	_cleanup_json_ json_t *o = NULL;
	int r = msb__json_load_object(json, len, "oci config", &o, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *runtime = NULL;
	_cleanup_free_ char *rest = NULL;
	if ((r = take_string(o, "runtime", &runtime, err)) < 0 ||
	    (r = take_string(o, "runtime_path", &c->runtime_path, err)) < 0 ||
	    (r = take_string(o, "platform", &c->platform, err)) < 0)
		goto fail;
	int rt = msb_oci__runtime_from_name(runtime);
	if (rt < 0) {
		r = msb_error_set(err, MSB_E_VALUE,
				  "oci config: `runtime` must be `runsc`, `crun` or `runc`");
		goto fail;
	}
	c->runtime = (oci_runtime)rt;
	if (!c->runtime_path || c->runtime_path[0] != '/') {
		r = msb_error_set(err, MSB_E_VALUE,
				  "oci config: `runtime_path` must be an absolute path");
		goto fail;
	}
	if (c->platform && (c->runtime != OCI_RUNSC || !platform_ok(c->platform))) {
		r = msb_error_set(
			err, MSB_E_VALUE,
			"oci config: `platform` is a gVisor platform name, for runsc only");
		goto fail;
	}
	if (c->runtime == OCI_RUNSC && !c->platform &&
	    !(c->platform = strdup(OCI_DEFAULT_PLATFORM))) {
		r = msb__error_nomem(err);
		goto fail;
	}
	if (!(rest = msb__json_dump(o))) {
		r = msb__error_nomem(err);
		goto fail;
	}
	if ((r = msb_ns__config_init(&c->ns)) < 0) {
		r = msb__error_nomem(err);
		goto fail;
	}
	if ((r = msb_ns__config_from_json(&c->ns, rest, strlen(rest), err)) < 0)
		goto fail;
	return 0;
fail:
	msb_oci__shim_config_clear(c);
	return r;
}

int msb_oci__state_remove_files(int dirfd)
{
	return msb__rm_rf_at(dirfd, OCI_STATE_PRIVATE);
}

int msb_oci__state_purge(const char *state_dir, bool remove_dir, int timeout_ms, msb_error **err)
{
	int r = msb_ns__state_purge(state_dir, false, timeout_ms, err);
	if (r < 0)
		return r;
	/* guest-names: ok - the sandbox's state dir, host-private; its trees are removed
	 * fd-relative */
	_cleanup_close_ int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : msb__error_errno(err, errno, "purge `%s`", state_dir);
	if ((r = msb_oci__state_remove_files(dfd)) < 0)
		return msb__error_errno(err, r, "purge `%s`: remove the oci files", state_dir);
	/* guest-names: ok - the sandbox's state dir, host-private; rmdir never follows */
	if (remove_dir && rmdir(state_dir) < 0 && errno != ENOENT)
		return msb__error_errno(err, errno, "purge: remove `%s`", state_dir);
	return 0;
}
