/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container-engine core (checklist section 21, 22.1-22.7): what the
 * `docker` and `wslc` backends share - names derived from the key, labels
 * with digesting, get-or-create with adoption, disposal selected from labels
 * read back from the engine, the confined file plane over an engine's stat,
 * archive and exec - over a transport (an engine API, or a CLI) that each
 * backend brings. docs/internals/engine.md.
 */
#ifndef MSB_ENGINE_INT_H
#define MSB_ENGINE_INT_H

#include <pthread.h>

#include <msb/backend.h>
#include <msb/engine.h>
#include <msb/sandbox.h>
#include <msb/spec.h>

#include "util/util.h"

/* ---- names and labels (21.13-21.17) --------------------------------------- */

#define ENGINE_LABEL_PREFIX "maf-sandbox."
#define ENGINE_LABEL_SCOPE "maf-sandbox.scope"
#define ENGINE_LABEL_THREAD "maf-sandbox.thread"
#define ENGINE_LABEL_AGENT "maf-sandbox.agent"
#define ENGINE_LABEL_KIND "maf-sandbox.kind"
#define ENGINE_LABEL_ROLE "maf-sandbox.role"
#define ENGINE_LABEL_USER "maf-sandbox.label."
/* A label value's longest pass-through form, and the digest's shape. */
#define ENGINE_LABEL_MAX 63
#define ENGINE_DIGEST_LEN 55 /* "sha256-" + 48 hex */
/* Room for either form with its NUL: a pass-through value is the longer. */
#define ENGINE_LABEL_VALUE_SIZE (ENGINE_LABEL_MAX + 1)

/* The value as written to (and queried from) the engine: unchanged when it
 * is at most 63 bytes of [A-Za-z0-9._-] and not itself digest-shaped,
 * otherwise "sha256-" + the first 48 hex of its SHA-256. out[ENGINE_LABEL_VALUE_SIZE]:
 * a 63-byte pass-through fills it (a buffer sized for the digest did not). */
void msb_engine__label_value(const char *value, char out[ENGINE_LABEL_VALUE_SIZE]);

/* "allow:" + the sorted, comma-joined hosts when allowlisting is configured
 * and the spec's allowlist is non-empty; "" otherwise (21.14). Newly
 * allocated. */
char *msb_engine__egress_id(const msb_spec *spec, bool proxy_configured);

/* "<prefix>" + the first 12 hex of SHA-256("scope|thread|agent|kind" and
 * "|egress_id" when that is non-empty); NULL fields hash as "". Newly
 * allocated (21.13). */
char *msb_engine__container_name(const char *prefix, const msb_key *key, const char *kind,
				 const char *egress_id);

/* The labels of a workload container, "k=v" each (21.16): scope, thread and
 * agent when set, kind, one maf-sandbox.label.<k> per spec label. An msb_strv. */
int msb_engine__labels(const msb_key *key, const char *kind, const msb_spec *spec, char ***out,
		       msb_error **err);

/* ---- what a transport serves ----------------------------------------------- */

typedef enum engine_state {
	ENGINE_ABSENT = 0,
	ENGINE_RUNNING,
	ENGINE_STOPPED,
} engine_state;

/* One container from a listing, with every label the engine holds for it. */
typedef struct engine_container {
	char *name; /* without docker's leading "/" */
	char *id;
	char **labels; /* msb_strv of "k=v" */
	/* What `msb ls` shows (msb_engine_list), when the engine says: */
	char *image;	    /* or NULL */
	int64_t created_s;  /* seconds since the epoch, 0 = not said */
	engine_state state; /* ENGINE_ABSENT = not said */
} engine_container;
void msb_engine__containers_free(engine_container *v, size_t n);
/* The value of label `key` on c, or NULL. */
const char *msb_engine__container_label(const engine_container *c, const char *key);
/* A listing's fields onto c: the state from a state word ("running" or
 * another), the creation time from seconds (> 0) or else a date-time string
 * ("2026-12-01 21:07:22 +0000 UTC", "2026-12-01T21:07:22Z"). Fields absent
 * (NULL, 0) or not understood are left unsaid; out of memory: -ENOMEM. */
int msb_engine__container_fields(engine_container *c, const char *image, const char *state,
				 int64_t created_s, const char *created_text);
/* The engine backend behind b, or NULL for another backend. */
struct engine_backend *msb_engine__of(const msb_backend *b);

typedef struct engine_create {
	const char *name;
	const char *image;
	char *const *labels; /* msb_strv "k=v" */
	const char *work_dir;
	/* The spec's resources (docs/spec.md), 0 = the engine's default. */
	uint64_t memory_bytes, pids_max, cpu_millis, writable_bytes;
	/* The allowlist topology (21.21): the internal network the workload
	 * joins instead of none, and its environment (HTTP(S)_PROXY). */
	const char *network;
	char *const *env; /* msb_strv "K=V", or NULL */
} engine_create;

/* The egress proxy of one sandbox (21.21, engine_egress.c). */
typedef struct engine_proxy {
	const char *name;	  /* "<workload>-proxy" (21.15) */
	const char *network;	  /* "<workload>-net", where it listens */
	char *const *labels;	  /* the workload's, role=proxy, the config digest */
	const char *config_json;  /* its $MSB_EGRESS_CONFIG: the backend's and the spec's rules */
	const char *config_label; /* "maf-sandbox.egress-config=<digest>" */
} engine_proxy;

#define ENGINE_LABEL_EGRESS_CONFIG "maf-sandbox.egress-config"
#define ENGINE_PROXY_PORT 3128

typedef struct engine_exec {
	const char *const *argv;
	const char *const *env; /* "K=V", may be NULL */
	const char *work_dir;	/* absolute guest path, or NULL for the image's */
	bool as_root;
	const uint8_t *stdin_data;
	size_t stdin_len;
	double timeout; /* seconds, > 0 */
	msb_cancel *cancel;
	/* Bytes kept of stdout+stderr together. Past it: `bounded` drops the
	 * rest and sets truncated; otherwise the exec fails (MSB_E_OS). */
	uint64_t max_output;
	bool bounded;
} engine_exec;

typedef struct engine_stat {
	bool present;
	msb_entry_kind kind;
	uint64_t size; /* regular files */
} engine_stat;

/* create's answer when the name is taken (the adopt path, 21.18). */
#define ENGINE_EXISTS 1

/* A process kept running in a container on one stream (the kept agent,
 * docs/engine.md): its bytes both ways on a socket of ours. */
typedef struct engine_stream engine_stream;

typedef struct engine_transport_ops {
	/* Exactly this name (21.19): *state, and *id (malloc()ed) unless absent. */
	int (*inspect)(void *t, const char *name, engine_state *state, char **id, msb_error **err);
	/* Create and start a workload container that idles (`sleep infinity`)
	 * with NetworkMode none (21.20) and work_dir present. 0 with *id, or
	 * ENGINE_EXISTS when the name is taken. */
	int (*run)(void *t, const engine_create *c, char **id, msb_error **err);
	int (*start)(void *t, const char *ref, msb_error **err);
	/* Force remove (never stop, 21.32); an absent container is success. */
	int (*remove)(void *t, const char *ref, msb_error **err);
	/* Every container (running or not) carrying all these "k=v" labels. */
	int (*list)(void *t, char *const *labels, engine_container **out, size_t *n,
		    msb_error **err);
	/* Run a process; a timeout or a cancellation ends it (each transport
	 * says how) before MSB_E_TIMEOUT / MSB_E_CANCELLED returns. */
	int (*exec)(void *t, const char *ref, const engine_exec *x, msb_exec_result *out,
		    msb_error **err);
	/* lstat of an absolute guest path, as the engine (or the guest) sees
	 * it; the parents are not checked here. */
	int (*stat)(void *t, const char *ref, const char *abs_path, engine_stat *out,
		    msb_error **err);
	/* The regular file at abs_path: refused on its header when it is not
	 * regular or is larger than max_bytes, without streaming the body
	 * (22.7). Codes: MSB_E_NOT_FOUND, MSB_E_IS_DIRECTORY, MSB_E_OS,
	 * MSB_E_TRANSFER_CAP_EXCEEDED. */
	int (*read)(void *t, const char *ref, const char *abs_path, uint64_t max_bytes,
		    uint8_t **data, size_t *len, msb_error **err);
	/* Place one regular file (mode 0644, root's) at abs_path, creating
	 * missing parents; an existing entry there is replaced, not followed. */
	int (*write)(void *t, const char *ref, const char *abs_path, const uint8_t *data,
		     size_t len, msb_error **err);
	/* The filesystem changes since creation and the running programs, or
	 * *supported = false. */
	int (*fingerprint)(void *t, const char *ref, bool *supported, msb_fingerprint *out,
			   msb_error **err);
	/* Place an executable (0755, root's) at abs, parents made: the confined
	 * file plane's agent. NULL op = the tar-header walk only. */
	int (*install)(void *t, const char *ref, const char *abs, const uint8_t *data, size_t len,
		       msb_error **err);
	/* The host directory of the container's root filesystem, as the engine
	 * reports it (the escape suite's cross-checks); NULL op = not known. */
	int (*host_root)(void *t, const char *ref, char **out, msb_error **err);
	/* The container's init as the host's /proc numbers it, 0 when it is
	 * not running or not known (engine_hostfs.c); NULL op = never. */
	int64_t (*pid)(void *t, const char *ref);
	/* Start argv in container `ref` (the image's user) on a stream kept
	 * open: *fd is a connected stream socket (ours, close-on-exec) whose
	 * bytes are the process's stdin and stdout; it reads end-of-file when
	 * the process or the engine ends. stream_close ends the stream (the
	 * process sees the end of its stdin) and frees it; NULL ops = every
	 * exec is one engine exec. */
	int (*stream_open)(void *t, const char *ref, const char *const *argv, engine_stream **out,
			   int *fd, msb_error **err);
	void (*stream_close)(engine_stream *s);

	/* ---- the allowlist topology (21.21-21.23, 21.31, 21.33); NULL ops =
	 * not served, and the backend then declares egress `closed` only. */
	/* An internal network (no route out, no address of the host's on it)
	 * with these labels; ENGINE_EXISTS when one of that name is there. */
	int (*net_create)(void *t, const char *name, char *const *labels, msb_error **err);
	/* Remove a network; an absent one is success. */
	int (*net_remove)(void *t, const char *name, msb_error **err);
	/* Every network carrying all these labels, with its labels. */
	int (*net_list)(void *t, char *const *labels, engine_container **out, size_t *n,
			msb_error **err);
	/* The proxy running on p->network with p->config_label: *kept when such
	 * a one runs already; otherwise an old one's records are read into
	 * *records (it is stopped first) and it is removed, and a fresh one is
	 * created on p->network, waited for until it listens, and connected to
	 * the outbound network. */
	int (*proxy_ensure)(void *t, const engine_proxy *p, bool *kept, msb_buf *records,
			    msb_error **err);
	/* The decision records proxy `ref` holds, its log emptied; with `final`
	 * it is stopped first (its open tunnels end and are recorded). */
	int (*proxy_records)(void *t, const char *ref, bool final, msb_buf *out, msb_error **err);
	void (*free)(void *t);
} engine_transport_ops;

/* ---- the backend ----------------------------------------------------------------- */

typedef struct engine_busy engine_busy;

typedef struct engine_backend {
	char *name;	     /* the backend's name */
	char *prefix;	     /* container-name prefix, "maf-sandbox-docker-" */
	char *image;	     /* default image; NULL = the spec must name one */
	char *transport_tag; /* "docker", "wslc": messages */
	char *endpoint;	     /* the engine's unix socket (docker), or NULL */
	const engine_transport_ops *ops;
	void *t;
	msb_declarations decl;
	msb_logger log;
	/* In-process get-or-create serialisation per name (21.18). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char **busy;
	/* Names this instance created with their keys, the fallback when a
	 * listing fails at dispose (21.30). */
	struct engine_made *made;
	size_t n_made;
	msb_egress_reporter reporter;
	msb_backend *self; /* the wrapper (not a reference); sandboxes ref it */
	/* The allowlist topology, when configured: the backend's egress
	 * settings (src/egress/config.c, without "allow"), or NULL for none. */
	bool allowlist;
	char *egress_config;
	/* Why an allowlist is not served here (the acquire's refusal), or NULL
	 * for "every container runs with no network". */
	char *allowlist_refused;
	/* The confined file plane (engine_sandbox.c): msb-agent's bytes, where
	 * it goes in a container, and whether it was found unusable here (no
	 * openat2 in the engine's kernel): then the tar-header walk. */
	msb_buf agent_bin;
	char *agent_guest;
	bool agent_off;
	/* The host's file plane (engine_hostfs.c) not used: $MSB_ENGINE_HOSTFS=0. */
	bool hostfs_off;
	/* The kept agent stream (engine_kept.c) not used: $MSB_ENGINE_KEPT=0. */
	bool kept_off;
} engine_backend;

typedef struct engine_backend_config {
	const char *name;
	const char *prefix;
	const char *image;
	const char *transport_tag;
	const char *endpoint;
	const engine_transport_ops *ops;
	void *t; /* taken, freed with ops->free on failure too */
	const msb_declarations *decl;
	const char *isolation;
	msb_log_fn log;
	void *log_userdata;
	/* Serve the allowlist topology (the transport has its ops), with these
	 * proxy settings (a JSON object's text, or NULL for the defaults). */
	bool allowlist;
	const char *egress_config;
	/* Why this engine serves no allowlist (said at acquire), or NULL. */
	const char *allowlist_refused;
	/* The confined file plane: msb-agent on the host (NULL = the tar-header
	 * walk); used when the transport has `install`. */
	const char *agent_path;
} engine_backend_config;

/* msb-agent for the confined file plane: as configured, $MSB_AGENT, or the
 * installed one (engine_backend.c). Newly allocated. */
char *msb_engine__agent_path(const char *configured);

int msb_engine__backend_new(const engine_backend_config *cfg, msb_backend **out, msb_error **err);

/* A handle onto one container (engine_sandbox.c); `proxy` names its egress
 * proxy when it has one, whose records are reported for `key` after each
 * exec. */
int msb_engine__sandbox_new(engine_backend *b, const msb_key *key, const char *name, const char *id,
			    const char *work_dir, const char *proxy, msb_sandbox **out,
			    msb_error **err);

/* ---- the confined file plane (engine_agent.c) ------------------------------------- */

/* What an agent operation returns when it cannot run here: the caller
 * falls back to the tar-header walk. */
#define ENGINE_AGENT_FALLBACK 2

/* msb-agent present in container `ref` (placed now if it is not): true
 * when the confined file plane serves it. */
bool msb_engine__agent_place(engine_backend *b, const char *ref);
/* One operation each, on an absolute guest path already confined lexically;
 * 0, ENGINE_AGENT_FALLBACK, or a negative MSB_E_* worded as the walk words
 * it (`path` is the caller's, for messages). */
int msb_engine__agent_stat(engine_backend *b, const char *ref, const char *abs, engine_stat *out,
			   msb_error **err);
int msb_engine__agent_read(engine_backend *b, const char *ref, const char *abs, const char *path,
			   uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err);
int msb_engine__agent_write(engine_backend *b, const char *ref, const char *abs, const char *path,
			    const uint8_t *data, size_t len, msb_error **err);
int msb_engine__agent_remove(engine_backend *b, const char *ref, const char *abs, const char *path,
			     bool recursive, double timeout, const char *op, msb_error **err);

/* ---- the kept agent stream (engine_kept.c) ---- */

/* One msb-agent per sandbox handle on a stream kept open (docs/engine.md):
 * started on the handle's first exec, each exec then frames of the msb
 * protocol on it. */
typedef struct engine_kept {
	pthread_mutex_t lock; /* held for one exec; a busy stream is not waited for */
	int state;	      /* 0 not tried, 1 held, -1 not served here (engine execs) */
	engine_stream *stream;
	struct msb_client *client;
	unsigned streams; /* streams made in all (diagnostics, tests) */
} engine_kept;

/* ENGINE_KEPT_UNAVAILABLE: the exec is not run on the stream (none can be
 * made here, or it is busy with another exec): the caller does one engine
 * exec. Otherwise 0 with *out, or a negative MSB_E_*: a stream lost under
 * the exec is an error (the engine's, when it is unreachable) and the next
 * exec makes a fresh one. */
#define ENGINE_KEPT_UNAVAILABLE 3
int msb_engine__kept_exec(engine_backend *b, engine_kept *k, const char *ref, const char *name,
			  const char *base, const msb_exec_request *req, bool bounded,
			  msb_exec_result *out, msb_error **err);
void msb_engine__kept_init(engine_kept *k);
/* The stream ended and freed (the agent sees the end of its stdin). */
void msb_engine__kept_clear(engine_kept *k, engine_backend *b);

/* ---- the host's file plane (engine_hostfs.c) ---- */

/* A file operation of the sandbox file plane (msb/sandbox.h) served by the
 * host itself when the container `id` is visible from here: its storage
 * base `base` opened through the container's root (/proc/PID/root, a local
 * engine's), resolved there with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), then ns's file plane on that
 * directory fd. ENGINE_HOSTFS_NONE when the container is not visible (a
 * remote or stopped engine, another pid namespace, $MSB_ENGINE_HOSTFS=0, or
 * a host without /proc: engine_hostfs_none.c on Windows): then the agent or
 * the walk serve. */
#define ENGINE_HOSTFS_NONE 2
int msb_engine__hostfs_write(engine_backend *b, const char *id, const char *base, const char *path,
			     const uint8_t *data, size_t len, const char *working_directory,
			     msb_error **err);
int msb_engine__hostfs_stat(engine_backend *b, const char *id, const char *base, const char *path,
			    const char *working_directory, bool *present, msb_entry *out,
			    msb_error **err);
int msb_engine__hostfs_read(engine_backend *b, const char *id, const char *base, const char *path,
			    const char *working_directory, uint64_t max_bytes, uint8_t **data,
			    size_t *len, msb_error **err);
/* Remove path (a directory only when recursive), or with `reclaim` empty
 * the directory path. */
int msb_engine__hostfs_remove(engine_backend *b, const char *id, const char *base, const char *path,
			      const char *working_directory, bool recursive, bool reclaim,
			      msb_error **err);

/* The rows' doctors (docker_json.c, wslc_json.c): one asked about the
 * defaults (no JSON), its answer as the table's verdict. */
int msb_engine__doctor_verdict(int (*doctor)(const char *, size_t, bool *, char **, msb_error **),
			       msb_backend_probe *out, msb_error **err);

/* ---- the allowlist topology (engine_egress.c) ------------------------------------- */

/* For an allowlist spec with hosts on a backend serving it: the internal
 * network, the proxy on it (re-ensured on every acquire, 21.22), and what the
 * workload is created with. *network, *proxy newly allocated, *env an
 * msb_strv; all NULL when the spec needs none (21.20, 21.23). */
int msb_engine__egress_prepare(engine_backend *b, const msb_key *key, const msb_spec *spec,
			       const char *name, char **network, char **proxy, char ***env,
			       msb_error **err);
/* Decision records (JSON lines) to EgressObserved events for key (21.33). */
void msb_engine__egress_report(engine_backend *b, const msb_key *key, const msb_buf *records);
/* Remove the networks selected by these labels filters whose labels match
 * exactly (after their proxies and workloads, 21.31). Failures are counted in
 * *failed; "not found" is success. */
int msb_engine__egress_sweep_networks(engine_backend *b, char *const *filters, const char *scope,
				      const char *thread_id, bool by_agent, const char *agent_dir,
				      size_t *failed, msb_error **err);

/* ---- tar (engine_tar.c) ---------------------------------------------------------- */

/* A one-entry ustar archive: a regular file `name` (relative; split at a
 * "/" as ustar allows past 100 bytes, or a PAX path record), mode 0644,
 * owned by 0:0, then the two zero blocks. tar_head appends the headers,
 * the body follows, then tar_tail_len() zero bytes; tar_one does all three. */
int msb_engine__tar_head(const char *name, size_t len, msb_buf *out, msb_error **err);
size_t msb_engine__tar_tail_len(size_t len);
int msb_engine__tar_one(const char *name, const uint8_t *data, size_t len, msb_buf *out,
			msb_error **err);
/* One entry of an archive built in memory: a short name (at most 100
 * bytes), root's, `type` '0' (with data) or '5'; then msb_engine__tar_end. */
int msb_engine__tar_add(msb_buf *out, const char *name, char type, unsigned mode,
			const uint8_t *data, size_t len, msb_error **err);
int msb_engine__tar_end(msb_buf *out, msb_error **err);

/*
 * A streaming reader of the first entry of a tar stream, fed in pieces as
 * they arrive (22.7). Extended headers (PAX x/g, GNU L/K) are read within
 * ENGINE_TAR_EXT_BUDGET. When the first real header is complete, on_header
 * decides: 1 ends the read there (a stat), 0 takes the body, which must then be a regular file (the
 * check refuses anything else, and a size over the cap, before a body byte is kept); an error stops
 * the feed. Once the body is complete the reader is done and ignores the rest (padding, trailer):
 * the caller may hang up.
 */
typedef struct engine_tar_header {
	char type; /* '0' regular, '5' dir, '2' symlink, '1' hard link, ... */
	uint64_t size;
	char name[256];
} engine_tar_header;

typedef int (*engine_tar_on_header)(void *ud, const engine_tar_header *h, msb_error **err);

typedef struct engine_tar_reader {
	engine_tar_on_header on_header;
	void *ud;
	uint8_t block[512];
	size_t have;	   /* bytes of the current header block */
	char ext_type;	   /* the extension being read, or 0 */
	uint64_t ext_left; /* its bytes still to come, padding included */
	uint64_t ext_size; /* its size without padding */
	msb_buf ext;	   /* the PAX records read so far */
	uint64_t ext_used; /* extension bytes seen in all */
	bool pax_size_set;
	uint64_t pax_size;
	char long_name[256];
	bool header_done;
	bool done;
	engine_tar_header hdr;
	uint8_t *body; /* malloc()ed, hdr.size bytes; taken by the caller */
	uint64_t body_have;
} engine_tar_reader;

#define ENGINE_TAR_EXT_BUDGET (64u << 10)

void msb_engine__tar_reader_init(engine_tar_reader *r, engine_tar_on_header on_header, void *ud);
void msb_engine__tar_reader_clear(engine_tar_reader *r);
/* Feed bytes; 0 or a negative MSB_E_* with *err set. r->done once the
 * body is in. A stream that ends before then is the caller's to refuse. */
int msb_engine__tar_feed(engine_tar_reader *r, const uint8_t *p, size_t n, msb_error **err);

/* Map a header to a kind. */
msb_entry_kind msb_engine__tar_kind(char type);

/* The header-time refusals of a read (22.7), shared by both transports. */
int msb_engine__tar_check(const engine_tar_header *h, const char *abs_path, uint64_t max_bytes,
			  msb_error **err);

#endif
