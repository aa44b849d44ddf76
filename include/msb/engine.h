/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/engine.h - the container-engine backends (docs/engine.md): `docker`,
 * the Docker Engine API over its unix socket (also podman's Docker-compatible
 * service), and `wslc`, the CLI contract of WSL's container tool (checklist
 * section 21). Reached by name: msb/msb.h does not include this header.
 *
 * Both declare isolation `container`, never higher (22.1, 21.3): a router
 * admits them only with min_isolation lowered to `container`. Each sandbox is
 * one container named from the key (21.13) and labelled with it (21.16), so
 * acquire and dispose agree across processes without a registry; disposal
 * selects by the labels the engine reports (21.30, 21.31) and removes with
 * force, never `stop` (21.32). Egress is `closed` (NetworkMode none, 21.20),
 * and on docker with egress_proxy_image also `allowlist`: an internal network
 * per sandbox and msb's own egress proxy on it, the workload's only route out
 * (21.21-21.24, docs/engine.md "Egress").
 *
 * The file plane (docker): msb-agent placed in the container and run by
 * exec for each operation, resolving the whole path with openat2 and no link
 * followed ($MSB_AGENT, else the installed msb-agent). Without it, and on
 * wslc, the tar-header walk: every path walked from the guest's root with the
 * engine's no-follow stat before acting, where a link the guest swaps in
 * between that check and the transfer is followed inside the container - the
 * residual docs/security.md states. msb doctor says which.
 *
 * Thread-safety: a backend and its sandboxes may be used from any thread.
 */
#ifndef MSB_ENGINE_H
#define MSB_ENGINE_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>

MSB_BEGIN_DECLS

/* ---- docker ----------------------------------------------------------------- */

typedef struct msb_docker_options {
	unsigned version;
	const char *name; /* NULL = "docker" */
	/* The engine: "unix:///path/docker.sock" or a bare absolute path. NULL =
	 * $DOCKER_HOST when set (unix only: another scheme is refused), else
	 * unix:///var/run/docker.sock. */
	const char *host;
	/* The image a spec without one runs, named as `docker run` names it; an
	 * absent image is pulled if the engine can, never replaced. NULL = a
	 * spec must name its image. */
	const char *image;
	double api_timeout; /* seconds for each API call but exec's own; 0 = 60 */
	/*
	 * The allowlist topology (21.5, 22.4): the repository name msb's own
	 * egress proxy image is kept under in the engine. Set, the backend
	 * declares egress {closed, allowlist} and, at construction, imports the
	 * static proxy binary (egress_proxy) as "<repo>:<first 12 hex of its
	 * SHA-256>" unless the engine has that image - a one-file image, never
	 * pulled. NULL = egress `closed` only.
	 */
	const char *egress_proxy_image;
	msb_log_fn log; /* acquire outcomes at info (21.34); may be NULL */
	void *log_userdata;
	/* The proxy binary; NULL = $MSB_EGRESS_PROXY, else the installed one. */
	const char *egress_proxy;
	/* The network the proxies dial from; NULL = "bridge" (21.21). */
	const char *egress_network;
	/* The proxies' settings as a JSON object's text (docs/egress.md:
	 * allow_cidrs, hosts, system_resolver, timeouts, max_tunnels; no
	 * "allow", which is the spec's); NULL = the defaults. */
	const char *egress_config;
} msb_docker_options;
#define MSB_DOCKER_OPTIONS_VERSION 1
#define MSB_DOCKER_OPTIONS_INIT                                                                    \
	{                                                                                          \
		MSB_DOCKER_OPTIONS_VERSION, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL,     \
			NULL                                                                       \
	}

/*
 * Make the backend. Asks the engine once (GET /version): the API version to
 * speak (the engine's, capped at the newest this client knows; an engine
 * older than API v1.40 is refused) and os_families from its OSType
 * (22.6). MSB_E_OS when the engine is not reachable, MSB_E_VALUE for a host
 * that is not a unix socket.
 */
MSB_EXTERN int msb_docker_backend_new(const msb_docker_options *opts, msb_backend **out,
				      msb_error **err);

/* From router JSON: {"type": "docker", "name", "host", "image",
 * "api_timeout", "egress_proxy_image", "egress_proxy", "egress_network",
 * "egress": {...}}, strict (an unknown key is refused naming it). "type" may
 * be absent. */
MSB_EXTERN int msb_docker_backend_from_json(const char *json, size_t len, msb_backend **out,
					    msb_error **err);

/*
 * msb doctor: is the engine reachable (the same JSON as above, or NULL for
 * the defaults), which version, and what works. *ok false with the reason
 * when it is not usable; the reason is one line and says which file-plane
 * confinement is in place. Newly allocated.
 */
MSB_EXTERN int msb_docker_doctor(const char *json, size_t len, bool *ok, char **reason,
				 msb_error **err);

/* ---- wslc -------------------------------------------------------------------- */

typedef struct msb_wslc_options {
	unsigned version;
	const char *name;      /* NULL = "wslc" (21.1) */
	const char *wslc_path; /* NULL = "wslc", looked up on PATH (21.2) */
	/* Bounds every lifecycle command (run, start, list, remove, cp, stat);
	 * never exec, whose bound is the call's. 0 = 60 (21.2). */
	double command_timeout;
	const char *image; /* as for docker */
	/* The allowlist topology is docker's only for now: refused here. */
	const char *egress_proxy_image;
	msb_log_fn log;
	void *log_userdata;
} msb_wslc_options;
#define MSB_WSLC_OPTIONS_VERSION 1
#define MSB_WSLC_OPTIONS_INIT                                                                      \
	{                                                                                          \
		MSB_WSLC_OPTIONS_VERSION, NULL, NULL, 0, NULL, NULL, NULL, NULL                    \
	}

/* Make the backend. Runs nothing: every command is spawned at use. */
MSB_EXTERN int msb_wslc_backend_new(const msb_wslc_options *opts, msb_backend **out,
				    msb_error **err);
/* {"type": "wslc", "name", "wslc_path", "command_timeout", "image",
 * "egress_proxy_image"}, strict. */
MSB_EXTERN int msb_wslc_backend_from_json(const char *json, size_t len, msb_backend **out,
					  msb_error **err);
/* msb doctor: runs `wslc --version` bounded; *ok and a one-line reason. */
MSB_EXTERN int msb_wslc_doctor(const char *json, size_t len, bool *ok, char **reason,
			       msb_error **err);

/* ---- listing (msb ls) ------------------------------------------------------------ */

/* One sandbox an engine holds for msb: a workload container named with this
 * backend's prefix and carrying msb's labels (21.13, 21.16). */
typedef struct msb_engine_entry {
	char *name; /* the container's name */
	char *id;   /* the engine's id (the acquire's instance_id) */
	/* The key's labels as the engine holds them, or NULL where absent: a
	 * value over 63 bytes or outside [A-Za-z0-9._-] reads as its digest,
	 * "sha256-" and 48 hex (21.17). The kind is always there. */
	char *scope, *thread_id, *agent_dir, *kind;
	char *image;	    /* as the engine names it, or NULL when not said */
	int64_t created_ns; /* creation time (the engine's, to the second); 0 = not said */
	bool running;	    /* false: created, exited, paused, ... */
} msb_engine_entry;

/*
 * The sandboxes the engine behind a `docker` or `wslc` backend holds for
 * msb, made by any process: listed from the engine by msb's kind label (the
 * selection dispose_scope uses, 21.30-21.31), its egress proxies left out.
 * The listing is bounded (16 MiB); a container whose state the listing does
 * not give is asked about by name (wslc). MSB_E_VALUE for another backend;
 * the engine's errors as acquire reports them. *out is freed with
 * msb_engine_entries_free.
 */
MSB_EXTERN int msb_engine_list(msb_backend *b, msb_engine_entry **out, size_t *n, msb_error **err);
MSB_EXTERN void msb_engine_entries_free(msb_engine_entry *v, size_t n);
/* Whether b is a `docker` or `wslc` backend (any name), whose sandboxes
 * msb_engine_list lists. */
MSB_EXTERN bool msb_engine_backend_is(const msb_backend *b);

/* ---- for the escape suite ---------------------------------------------------------- */

/* The engine's unix socket a docker backend speaks to (the path alone), or
 * NULL for any other backend: the escape suite checks a container cannot
 * reach it. Lives as long as the backend. */
MSB_EXTERN const char *msb_engine_backend_socket(const msb_backend *b);
/* The host directory of an engine sandbox's root filesystem as the engine
 * reports it (docker: GraphDriver.Data.MergedDir), newly allocated: the
 * escape suite addresses another sandbox's files by it. MSB_E_NOT_IMPLEMENTED
 * where the engine does not say, MSB_E_VALUE for a handle of another backend. */
MSB_EXTERN int msb_engine_sandbox_host_root(msb_sandbox *sb, char **out, msb_error **err);

/* The wslc container-name prefix and the docker one (21.13). */
#define MSB_WSLC_NAME_PREFIX "maf-sandbox-wslc-"
#define MSB_DOCKER_NAME_PREFIX "maf-sandbox-docker-"

MSB_END_DECLS

#endif
