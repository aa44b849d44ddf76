/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem sink (checklist 12.22, 12.26-12.29): artifacts land under
 * one host directory, never through a link, whole or not at all. What
 * holds the root and lands a file is the platform's (sink_fs.h); the
 * refusals, their typed errors and the landed record are here, the same on
 * every platform.
 */
#include <stdio.h>

#include <msb/outputs.h>

#include "core/files/sink_fs.h"
#include "util/util.h"

struct fs_sink {
	fs_sink_root *root_h;
	char *root; /* absolute, resolved once */
	msb_fs_sink_options opts;
};

static void fs_sink_free(void *ud)
{
	struct fs_sink *s = ud;
	if (!s)
		return;
	msb_fs_sink__root_close(s->root_h);
	free(s->root);
	free(s);
}

static int not_confined(msb_error **err, const char *name)
{
	/* The message names the artifact, never a host path (12.26). */
	msb_error_set(err, MSB_E_LANDING_NOT_CONFINED,
		      "artifact `%s` would land outside the sink's root (a link or an escape on "
		      "its way)",
		      name);
	msb__error_set_path(err, name);
	return MSB_E_LANDING_NOT_CONFINED;
}

static int landing_exists(msb_error **err, const char *name, const char *what)
{
	msb_error_set(err, MSB_E_LANDING_EXISTS, "artifact `%s`: %s", name, what);
	msb__error_set_path(err, name);
	return MSB_E_LANDING_EXISTS;
}

static int default_display(const msb_artifact *a, char **out)
{
	*out = msb__asprintf("%s (%zu bytes)", a->name, a->len);
	return *out ? 0 : -ENOMEM;
}

static int fs_deliver(void *ud, const msb_artifact *a, const char *call_id,
		      msb_landed_artifact *out, msb_error **err)
{
	struct fs_sink *s = ud;
	int r = msb_validate_artifact_name(a->name, err);
	if (r < 0)
		return r;
	const char *stage = "landing it";
	r = msb_fs_sink__land(s->root_h, a->name, a->content, a->len,
			      s->opts.file_mode ? s->opts.file_mode : 0644, s->opts.existing,
			      &stage);
	switch (r) {
	case 0:
		break;
	case FS_SINK_NOT_CONFINED:
		return not_confined(err, a->name);
	case FS_SINK_PARENT_NOT_DIR:
		return landing_exists(err, a->name, "a parent exists and is not a directory");
	case FS_SINK_EXISTS:
		return landing_exists(err, a->name, "the destination exists");
	case FS_SINK_IS_DIR:
		return landing_exists(err, a->name, "the destination is a directory");
	case FS_SINK_BAD_NAME:
		msb_error_set(err, MSB_E_ARTIFACT_NAME_INVALID,
			      "artifact name is invalid here: a segment this system cannot hold as "
			      "a file name (a stream, a reserved character or device name, a "
			      "trailing dot or space)");
		msb__error_set_path(err, a->name);
		return MSB_E_ARTIFACT_NAME_INVALID;
	default:
		if (r == -ENOMEM)
			return msb__error_nomem(err);
		return msb__error_errno(err, r, "artifact `%s`: %s", a->name, stage);
	}
	out->handle = msb_fs_sink__handle(s->root, a->name);
	if (!out->handle)
		return msb__error_nomem(err);
	if (s->opts.display)
		r = s->opts.display(s->opts.display_userdata, a, out->handle, &out->display, err);
	else if (default_display(a, &out->display) < 0)
		r = msb__error_nomem(err);
	if (r == 0 && !out->display)
		r = msb_error_set(err, MSB_E_VALUE, "the sink's display gave no text for `%s`",
				  a->name);
	if (r < 0)
		return r;
	out->name = msb__strdup(a->name);
	return out->name ? 0 : msb__error_nomem(err);
}

int msb_fs_sink_new(const char *root, const msb_fs_sink_options *opts, msb_output_sink **out,
		    msb_error **err)
{
	static const msb_fs_sink_options defaults = MSB_FS_SINK_OPTIONS_INIT;
	if (!root || !*root || !out)
		return msb_error_set(err, MSB_E_VALUE, "file system sink: no root");
	if (opts && opts->version != MSB_FS_SINK_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "file system sink: options version %u",
				     opts->version);
	struct fs_sink *s = calloc(1, sizeof(*s));
	msb_output_sink *sink = calloc(1, sizeof(*sink));
	if (!s || !sink) {
		free(s);
		free(sink);
		return msb__error_nomem(err);
	}
	s->opts = opts ? *opts : defaults;
	int r = msb_fs_sink__root_open(root, &s->root_h, &s->root);
	if (r < 0) {
		fs_sink_free(s);
		free(sink);
		return msb__error_errno(err, r, "file system sink: root `%s`", root);
	}
	*sink = (msb_output_sink)MSB_OUTPUT_SINK_INIT;
	sink->userdata = s;
	sink->deliver = fs_deliver;
	sink->free = fs_sink_free;
	*out = sink;
	return 0;
}
