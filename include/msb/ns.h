/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/ns.h - the `ns` backend: a daemonless Linux namespace sandbox.
 *
 * Declares isolation `container`. Each sandbox is a set of new user, mount,
 * pid, net, ipc, uts and cgroup namespaces around a static agent running as
 * PID 1, held alive by a per-sandbox `msb-shim` on the host that outlives the
 * process which acquired it. State lives in `<state root>/ns/<name>/`, where
 * the name is derived from the key and kind by SHA-256, so any process can
 * find, reuse and dispose a sandbox another process made (DESIGN §5).
 *
 * As a backend type (msb/backend.h) `ns` reads backend JSON with the keys of
 * msb_ns_options by the same names - name, state_dir, image, memory_bytes,
 * pids_max, cpu_millis, writable_bytes, start_timeout, egress (an object,
 * docs/egress.md), pool_size (docs/pool.md) - and its doctor probes what the boundary needs (user
 * namespaces, overlayfs, cgroup v2/v1, seccomp, openat2, Landlock, ...).
 *
 * Thread-safety: the backend and its sandboxes may be used from any thread;
 * get-or-create is serialised across processes by flock on the sandbox's
 * state directory.
 */
#ifndef MSB_NS_H
#define MSB_NS_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/hosttools_native.h>
#include <msb/sandbox.h>
#include <msb/error.h>

MSB_BEGIN_DECLS

/*
 * Progress of an OCI image's first unpack (image `oci:...`): reported on the
 * acquiring thread while the layers not yet in the image cache are unpacked,
 * at each layer's start and end and about every MiB of its blob in between,
 * then once with `done`. Nothing is reported when every layer is cached. The
 * pointer and its strings are valid only during the call.
 */
typedef struct msb_ns_progress {
	const char *image;    /* the image, as the backend spells it */
	unsigned layer;	      /* 1-based: the layer being unpacked now */
	unsigned layers;      /* the layers this acquire unpacks */
	uint64_t layer_bytes; /* bytes of the layer's blob read so far */
	uint64_t layer_size;  /* the blob's size (the manifest's) */
	uint64_t bytes;	      /* the same over every layer this acquire unpacks */
	uint64_t total;
	bool done; /* the last report: every layer is in place */
} msb_ns_progress;
typedef void (*msb_ns_progress_fn)(void *userdata, const msb_ns_progress *p);

/* memory_bytes, pids_max, cpu_millis and writable_bytes are each sandbox's
 * default and the most a spec may ask for (the spec's `resources`; more is
 * refused at acquire with MSB_E_VALUE). docs/ns.md "Limits". */
typedef struct msb_ns_options {
	unsigned version;
	const char *name;	 /* NULL = "ns" */
	const char *state_root;	 /* NULL = $MSB_STATE_DIR, else /run/msb (root) or
				  * $XDG_RUNTIME_DIR/msb */
	const char *shim_path;	 /* NULL = $MSB_SHIM, else the installed msb-shim */
	const char *agent_path;	 /* NULL = $MSB_AGENT, else the installed msb-agent */
	const char *image;	 /* "host" (default), "dir:PATH" or "oci:PATH[:TAG]" (an OCI
				  * image layout, unpacked once under the state root) */
	uint64_t memory_bytes;	 /* cgroup memory limit; 0 = default (512 MiB) */
	uint64_t pids_max;	 /* 0 = default (512) */
	uint64_t cpu_millis;	 /* CPU quota in thousandths of a core; 0 = default (1000) */
	uint64_t writable_bytes; /* size cap of the writable layer; 0 = default (256 MiB) */
	double start_timeout;	 /* seconds to wait for a new sandbox; 0 = 30 */
	/* The egress proxy's settings for ALLOWLIST sandboxes, strict JSON
	 * (docs/egress.md): allow_cidrs, hosts, system_resolver,
	 * header_timeout_ms, connect_timeout_ms, max_tunnels. NULL = defaults
	 * (no private destination allowed). Copied. */
	const char *egress_config;
	/* Version 2: image unpack progress (msb_ns_progress); NULL = none.
	 * Version 1 options (without these fields) are still accepted. */
	msb_ns_progress_fn progress;
	void *progress_userdata;
	/* Version 3. The warm pool (docs/pool.md): how many sandboxes of each
	 * template this backend keeps ready ahead of any acquire, refilled in
	 * the background after each claim. 0 (the default) = no pool kept by
	 * this backend; acquire still claims from one another process filled.
	 * At most MSB_NS_POOL_MAX. */
	unsigned pool_size;
} msb_ns_options;
#define MSB_NS_OPTIONS_VERSION 3
#define MSB_NS_OPTIONS_INIT                                                                        \
	{                                                                                          \
		MSB_NS_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL,   \
			NULL, 0                                                                    \
	}
#define MSB_NS_POOL_MAX 64u

/* Make the backend. Nothing is started until acquire. */
MSB_EXTERN int msb_ns_backend_new(const msb_ns_options *opts, msb_backend **out, msb_error **err);

/*
 * Report image unpack progress to `fn` (NULL: stop) on a backend made from
 * backend JSON, where no options struct reaches the caller. MSB_E_VALUE
 * when `b` is not an ns backend. Call it before the backend is used from
 * more than one thread.
 */
MSB_EXTERN int msb_ns_backend_set_progress(msb_backend *b, msb_ns_progress_fn fn, void *userdata,
					   msb_error **err);

/* One sandbox as recorded in the state directory (msb ls). Exactly one of
 * `alive` and `dead` is true, or neither (stale: never started, or taken
 * down on purpose; the next acquire replaces it). */
typedef struct msb_ns_entry {
	char *name;
	char *scope;
	char *thread_id;
	char *agent_dir;
	char *kind;
	char *call_id; /* NULL when conversation-scoped */
	char *instance_id;
	int64_t shim_pid;   /* 0 when the shim is gone (a zombie is gone) */
	bool alive;	    /* running: its shim is alive and its agent not known dead */
	bool dead;	    /* its agent or its shim died unasked: acquire refuses the key
			       (SandboxUnclean) until it is disposed of */
	char *reason;	    /* when dead: what happened, one line; else NULL */
	char *image;	    /* the image it was made from ("host", "dir:...", "oci:..."); NULL
			     * when its labels predate the field */
	int64_t created_ns; /* when it was made: CLOCK_REALTIME nanoseconds; 0 = unknown */
} msb_ns_entry;

/* Every sandbox under the state root, read from labels on disk. */
MSB_EXTERN int msb_ns_list(const msb_ns_options *opts, msb_ns_entry **entries, size_t *n,
			   msb_error **err);
/* The same for a backend: an ns backend's state root, or an oci backend's
 * (its sandboxes under <root>/oci, msb/oci_backend.h). MSB_E_VALUE for any
 * other backend. */
MSB_EXTERN int msb_ns_backend_list(const msb_backend *b, msb_ns_entry **entries, size_t *n,
				   msb_error **err);
MSB_EXTERN void msb_ns_entries_free(msb_ns_entry *entries, size_t n);

/*
 * The warm pool (docs/pool.md). A pooled sandbox is made ahead of any
 * acquire from a template - the backend's options and what of the spec does
 * not depend on a key (image, limits, work_dir, egress mode) - and given its
 * identity (name, labels, host name, egress rules) by the acquire that
 * claims it. Pools live under the state root, so one process fills what
 * another claims. `b` must be an ns backend (MSB_E_VALUE otherwise).
 */

/* Start pooled sandboxes for the template of `spec` until n (0: the
 * backend's pool_size) are ready or starting, and wait for the ones started
 * here. *made (may be NULL): how many came up. */
MSB_EXTERN int msb_ns_pool_fill(msb_backend *b, const msb_spec *spec, unsigned n, unsigned *made,
				msb_error **err);

/* One pooled sandbox as its directory shows it. */
typedef struct msb_ns_pool_entry {
	char *name;	   /* "msb-" + 32 hex, until a claim renames it */
	char *template_id; /* 16 hex digits: the pool it belongs to */
	const char *state; /* "ready" (claimable), "starting", "stale" (discarded by the
			      next claim or fill) */
	int64_t shim_pid;  /* 0 when not known alive */
	int64_t created_ns;
} msb_ns_pool_entry;

/* Every pooled sandbox under b's state root. */
MSB_EXTERN int msb_ns_pool_list(const msb_backend *b, msb_ns_pool_entry **entries, size_t *n,
				msb_error **err);
MSB_EXTERN void msb_ns_pool_entries_free(msb_ns_pool_entry *entries, size_t n);

/* Take down and remove every pooled sandbox (of template_id only, when not
 * NULL), waiting for those still starting; the pool's directories go too.
 * *removed (may be NULL): how many. */
MSB_EXTERN int msb_ns_pool_drain(msb_backend *b, const char *template_id, size_t *removed,
				 msb_error **err);

/*
 * The state root an ns backend resolved (its options' state_root, else
 * $MSB_STATE_DIR, else /run/msb as root or $XDG_RUNTIME_DIR/msb), which
 * holds ns/<name>/ per sandbox: what the escape suite and `msb ls` read.
 * NULL when `b` is not an ns backend. Borrowed while b lives.
 */
MSB_EXTERN const char *msb_ns_backend_state_root(const msb_backend *b);

/*
 * The native host-tool channel on an ns sandbox (docs/hosttools.md): serve
 * `run` on <work_dir>/.msb-host-tools.sock inside the guest until
 * msb_native_server_stop. MSB_E_VALUE when `sb` is not an ns sandbox.
 */
MSB_EXTERN int msb_ns_host_tools_attach(msb_sandbox *sb, msb_host_tool_run *run, msb_log_fn log,
					void *log_userdata, msb_native_server **out,
					msb_error **err);

MSB_END_DECLS

#endif
