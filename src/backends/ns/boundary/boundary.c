/* SPDX-License-Identifier: Apache-2.0 */
/* The boundary's configuration: defaults, validation, strict JSON. */
#include <sys/resource.h>

#include "backends/ns/boundary/boundary.h"
#include "util/json.h"

static const struct rlimit_name {
	const char *name;
	int resource;
} rlimit_names[] = {
	{"as", RLIMIT_AS},	     {"core", RLIMIT_CORE},
	{"cpu", RLIMIT_CPU},	     {"data", RLIMIT_DATA},
	{"fsize", RLIMIT_FSIZE},     {"locks", RLIMIT_LOCKS},
	{"memlock", RLIMIT_MEMLOCK}, {"msgqueue", RLIMIT_MSGQUEUE},
	{"nofile", RLIMIT_NOFILE},   {"nproc", RLIMIT_NPROC},
	{"rss", RLIMIT_RSS},	     {"sigpending", RLIMIT_SIGPENDING},
	{"stack", RLIMIT_STACK},
};

/* Guest paths that the boundary itself mounts or that are read-only: the
 * working directory must not be one of them or lie below one. */
static const char *const reserved_dirs[] = {
	"/proc", "/sys",   "/dev",   "/usr",	"/bin", "/sbin",
	"/lib",	 "/lib32", "/lib64", "/libx32", "/etc", NULL,
};

int msb_ns__config_set_rlimit(msb_ns_config *cfg, int resource, uint64_t value)
{
	for (size_t i = 0; i < cfg->n_rlimits; i++)
		if (cfg->rlimits[i].resource == resource) {
			cfg->rlimits[i].value = value;
			return 0;
		}
	if (cfg->n_rlimits >= MSB_NS_MAX_RLIMITS)
		return -E2BIG;
	cfg->rlimits[cfg->n_rlimits].resource = resource;
	cfg->rlimits[cfg->n_rlimits].value = value;
	cfg->n_rlimits++;
	return 0;
}

int msb_ns__config_init(msb_ns_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->version = 1;
	cfg->image = MSB_NS_IMAGE_HOST;
	cfg->hostname = strdup(MSB_NS_DEFAULT_HOSTNAME);
	cfg->work_dir = strdup(MSB_NS_DEFAULT_WORK_DIR);
	if (!cfg->hostname || !cfg->work_dir) {
		msb_ns__config_clear(cfg);
		return -ENOMEM;
	}
	cfg->uid_base = MSB_NS_DEFAULT_ID_BASE;
	cfg->gid_base = MSB_NS_DEFAULT_ID_BASE;
	cfg->rootfs_size = MSB_NS_DEFAULT_ROOTFS_SIZE;
	cfg->shm_size = MSB_NS_DEFAULT_SHM_SIZE;
	cfg->cgroup = MSB_NS_CGROUP_AUTO;
	msb_ns__config_set_rlimit(cfg, RLIMIT_CORE, 0);
	msb_ns__config_set_rlimit(cfg, RLIMIT_NOFILE, 4096);
	return 0;
}

void msb_ns__config_clear(msb_ns_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->image_path);
	msb_strv_free(cfg->layers);
	free(cfg->hostname);
	free(cfg->work_dir);
	free(cfg->cgroup_parent);
	memset(cfg, 0, sizeof(*cfg));
}

bool msb_ns__config_has_limits(const msb_ns_config *cfg)
{
	return cfg->memory_max || cfg->pids_max || cfg->cpu_quota_us;
}

static bool valid_hostname(const char *h)
{
	size_t n = strlen(h);
	if (n == 0 || n > 63 || h[0] == '-' || h[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* Absolute, normalised (no "", ".", ".." components, no trailing slash),
 * printable, bounded. */
static bool normalised_abs_path(const char *p, size_t max)
{
	size_t n = strlen(p);
	if (n < 2 || n > max || p[0] != '/' || p[n - 1] == '/')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return false;
	const char *c = p + 1;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t len = e ? (size_t)(e - c) : strlen(c);
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (len > 255)
			return false;
		c += len;
		if (*c == '/')
			c++;
	}
	return true;
}

static bool path_is_or_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int msb_ns__config_check(const msb_ns_config *cfg, msb_error **err)
{
	if (cfg->image != MSB_NS_IMAGE_HOST && cfg->image != MSB_NS_IMAGE_DIR &&
	    cfg->image != MSB_NS_IMAGE_OCI)
		return msb_error_set(err, MSB_E_VALUE, "ns config: unknown image kind %d",
				     (int)cfg->image);
	if (cfg->image == MSB_NS_IMAGE_DIR) {
		if (!cfg->image_path || !normalised_abs_path(cfg->image_path, 4000))
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config: image `dir:PATH` needs an absolute, "
					     "normalised PATH");
	}
	if (cfg->image == MSB_NS_IMAGE_OCI) {
		if (cfg->n_layers == 0 || cfg->n_layers > MSB_NS_MAX_LAYERS || !cfg->layers)
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config: image `oci` needs 1 to %d `layers`",
					     MSB_NS_MAX_LAYERS);
		for (size_t i = 0; i < cfg->n_layers; i++)
			if (!cfg->layers[i] || !normalised_abs_path(cfg->layers[i], 4000))
				return msb_error_set(err, MSB_E_VALUE,
						     "ns config: layer %zu must be an absolute, "
						     "normalised path",
						     i);
	} else if (cfg->n_layers) {
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config: `layers` belong to the `oci` image only");
	}
	if (!cfg->hostname || !valid_hostname(cfg->hostname))
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config: hostname `%s` is not a valid host name",
				     cfg->hostname ? cfg->hostname : "");
	if (!cfg->work_dir || !normalised_abs_path(cfg->work_dir, 1024))
		return msb_error_set(
			err, MSB_E_VALUE,
			"ns config: work_dir `%s` must be an absolute, normalised path",
			cfg->work_dir ? cfg->work_dir : "");
	for (size_t i = 0; reserved_dirs[i]; i++)
		if (path_is_or_under(cfg->work_dir, reserved_dirs[i]))
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config: work_dir `%s` lies in `%s`, which the "
					     "boundary owns",
					     cfg->work_dir, reserved_dirs[i]);
	if (cfg->uid_base == 0 || cfg->gid_base == 0 ||
	    (uint64_t)cfg->uid_base + MSB_NS_ID_COUNT > UINT32_MAX ||
	    (uint64_t)cfg->gid_base + MSB_NS_ID_COUNT > UINT32_MAX)
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config: uid_base and gid_base must be in 1..%u",
				     (unsigned)(UINT32_MAX - MSB_NS_ID_COUNT));
	if (cfg->rootfs_size < (1u << 20) || cfg->rootfs_size > (1ull << 44))
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config: writable_bytes must be between 1 MiB and 16 TiB");
	if (cfg->shm_size < (1u << 16) || cfg->shm_size > (1ull << 44))
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config: shm_bytes must be between 64 KiB and 16 TiB");
	if (cfg->memory_max && cfg->memory_max < (4u << 20))
		return msb_error_set(err, MSB_E_VALUE, "ns config: memory_bytes below 4 MiB");
	if (cfg->memory_max > (1ull << 50) || cfg->pids_max > (1u << 22))
		return msb_error_set(err, MSB_E_VALUE, "ns config: limit out of range");
	if (cfg->cpu_quota_us &&
	    (cfg->cpu_quota_us < 1000 || cfg->cpu_quota_us > 1024 * MSB_NS_CPU_PERIOD_US))
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config: cpu_millis must be between 10 and 1024000");
	if (cfg->cgroup == MSB_NS_CGROUP_NONE && msb_ns__config_has_limits(cfg))
		return msb_error_set(
			err, MSB_E_VALUE,
			"ns config: cgroup `none` cannot enforce the limits asked for");
	if (cfg->cgroup_parent) {
		const char *p = cfg->cgroup_parent;
		if (strcmp(p, "/") != 0 && !normalised_abs_path(p, 1024))
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config: cgroup_parent `%s` must be an absolute, "
					     "normalised path",
					     p);
	}
	return 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static int parse_image(msb_ns_config *cfg, const char *s, msb_error **err)
{
	if (strcmp(s, "host") == 0) {
		cfg->image = MSB_NS_IMAGE_HOST;
		free(cfg->image_path);
		cfg->image_path = NULL;
		return 0;
	}
	if (strncmp(s, "dir:", 4) == 0) {
		const char *path = s + 4;
		if (strcmp(path, "/") == 0)
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config.image: `dir:/` is the host's root; use the "
					     "`host` image");
		if (!normalised_abs_path(path, 4000))
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config.image: `%s`: PATH must be absolute and "
					     "normalised",
					     s);
		char *copy = strdup(path);
		if (!copy)
			return msb__error_nomem(err);
		free(cfg->image_path);
		cfg->image_path = copy;
		cfg->image = MSB_NS_IMAGE_DIR;
		return 0;
	}
	if (strcmp(s, "oci") == 0) {
		free(cfg->image_path);
		cfg->image_path = NULL;
		cfg->image = MSB_NS_IMAGE_OCI;
		return 0;
	}
	if (strncmp(s, "oci:", 4) == 0)
		return msb_error_set(
			err, MSB_E_VALUE,
			"ns config.image: `%s`: oci images are not supported unresolved "
			"here; the host library unpacks them and passes `\"image\": "
			"\"oci\"` with their `layers`",
			s);
	return msb_error_set(err, MSB_E_VALUE,
			     "ns config.image: `%s` is not an image (use `host`, `dir:PATH` or "
			     "`oci` with `layers`)",
			     s);
}

static int replace_string(char **dst, const char *s, msb_error **err)
{
	char *c = strdup(s);
	if (!c)
		return msb__error_nomem(err);
	free(*dst);
	*dst = c;
	return 0;
}

static int parse_id(json_t *root, const char *key, uint32_t *out, msb_error **err)
{
	uint64_t v;
	bool present = false;
	int r = msb__json_get_u64(root, key, "ns config", &v, &present, err);
	if (r < 0 || !present)
		return r;
	if (v == 0 || v > UINT32_MAX)
		return msb_error_set(err, MSB_E_VALUE, "ns config.%s: out of range", key);
	*out = (uint32_t)v;
	return 0;
}

static int parse_rlimits(msb_ns_config *cfg, json_t *obj, msb_error **err)
{
	const char *key;
	json_t *value;
	json_object_foreach (obj, key, value) {
		const struct rlimit_name *rn = NULL;
		for (size_t i = 0; i < MSB_ARRAY_SIZE(rlimit_names); i++)
			if (strcmp(rlimit_names[i].name, key) == 0)
				rn = &rlimit_names[i];
		if (!rn)
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config.rlimits: unknown key `%s`", key);
		uint64_t v = 0;
		int r = msb__json_get_u64(obj, key, "ns config.rlimits", &v, NULL, err);
		if (r < 0)
			return r;
		if (json_is_null(value))
			return msb_error_set(err, MSB_E_TYPE,
					     "ns config.rlimits.%s: must be an integer", key);
		if (msb_ns__config_set_rlimit(cfg, rn->resource, v) < 0)
			return msb_error_set(err, MSB_E_VALUE, "ns config.rlimits: too many");
	}
	return 0;
}

/* A byte or count limit where 0 means "none". */
static int parse_limit(json_t *root, const char *key, uint64_t *out, msb_error **err)
{
	return msb__json_get_u64(root, key, "ns config", out, NULL, err);
}

/* "layers": the unpacked lower layers of an `oci` image, top first. */
static int parse_layers(msb_ns_config *cfg, json_t *root, msb_error **err)
{
	json_t *v = json_object_get(root, "layers");
	if (!v)
		return 0;
	if (!json_is_array(v))
		return msb_error_set(err, MSB_E_TYPE,
				     "ns config.layers: must be an array of paths");
	size_t n = json_array_size(v);
	if (n == 0 || n > MSB_NS_MAX_LAYERS)
		return msb_error_set(err, MSB_E_VALUE, "ns config.layers: 1 to %d layers",
				     MSB_NS_MAX_LAYERS);
	char **layers = calloc(n + 1, sizeof(*layers));
	if (!layers)
		return msb__error_nomem(err);
	for (size_t i = 0; i < n; i++) {
		const char *p = json_string_value(json_array_get(v, i));
		if (!p) {
			msb_strv_free(layers);
			return msb_error_set(err, MSB_E_TYPE,
					     "ns config.layers[%zu]: must be a string", i);
		}
		if (!normalised_abs_path(p, 4000)) {
			msb_strv_free(layers);
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config.layers[%zu]: `%s` must be absolute and "
					     "normalised",
					     i, p);
		}
		if (!(layers[i] = strdup(p))) {
			msb_strv_free(layers);
			return msb__error_nomem(err);
		}
	}
	msb_strv_free(cfg->layers);
	cfg->layers = layers;
	cfg->n_layers = n;
	return 0;
}

static int parse_root(msb_ns_config *cfg, json_t *root, msb_error **err)
{
	static const char *const keys[] = {
		"image",      "hostname",	"work_dir",	"uid_base",
		"gid_base",   "writable_bytes", "shm_bytes",	"egress",
		"cgroup",     "cgroup_parent",	"memory_bytes", "pids_max",
		"cpu_millis", "rlimits",	"layers",	NULL,
	};
	const char *where = "ns config";
	int r = msb__json_check_keys(root, keys, where, err);
	if (r < 0)
		return r;

	const char *s = NULL;
	bool present = false;
	r = msb__json_get_string(root, "image", where, &s, &present, err);
	if (r < 0 || (present && (r = parse_image(cfg, s, err)) < 0))
		return r;
	if ((r = parse_layers(cfg, root, err)) < 0)
		return r;
	r = msb__json_get_string(root, "hostname", where, &s, &present, err);
	if (r < 0 || (present && (r = replace_string(&cfg->hostname, s, err)) < 0))
		return r;
	r = msb__json_get_string(root, "work_dir", where, &s, &present, err);
	if (r < 0 || (present && (r = replace_string(&cfg->work_dir, s, err)) < 0))
		return r;
	bool gid_given = json_object_get(root, "gid_base") != NULL;
	if ((r = parse_id(root, "uid_base", &cfg->uid_base, err)) < 0)
		return r;
	if ((r = parse_id(root, "gid_base", &cfg->gid_base, err)) < 0)
		return r;
	if (!gid_given)
		cfg->gid_base = cfg->uid_base;
	uint64_t v = 0;
	r = msb__json_get_u64(root, "writable_bytes", where, &v, &present, err);
	if (r < 0)
		return r;
	if (present && v) /* 0: the default */
		cfg->rootfs_size = v;
	r = msb__json_get_u64(root, "shm_bytes", where, &v, &present, err);
	if (r < 0)
		return r;
	if (present && v)
		cfg->shm_size = v;
	r = msb__json_get_string(root, "egress", where, &s, &present, err);
	if (r < 0)
		return r;
	if (present && strcmp(s, "closed") != 0) {
		if (strcmp(s, "allowlist") == 0 || strcmp(s, "unrestricted") == 0)
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config.egress: the ns boundary cannot enforce the "
					     "`%s` egress here; only `closed` (loopback only)",
					     s);
		return msb_error_set(err, MSB_E_VALUE, "ns config.egress: unknown mode `%s`", s);
	}
	r = msb__json_get_string(root, "cgroup", where, &s, &present, err);
	if (r < 0)
		return r;
	if (present) {
		if (strcmp(s, "auto") == 0)
			cfg->cgroup = MSB_NS_CGROUP_AUTO;
		else if (strcmp(s, "v1") == 0)
			cfg->cgroup = MSB_NS_CGROUP_V1;
		else if (strcmp(s, "v2") == 0)
			cfg->cgroup = MSB_NS_CGROUP_V2;
		else if (strcmp(s, "none") == 0)
			cfg->cgroup = MSB_NS_CGROUP_NONE;
		else
			return msb_error_set(err, MSB_E_VALUE,
					     "ns config.cgroup: `%s` is not one of auto, v1, v2, "
					     "none",
					     s);
	}
	r = msb__json_get_string(root, "cgroup_parent", where, &s, &present, err);
	if (r < 0 || (present && (r = replace_string(&cfg->cgroup_parent, s, err)) < 0))
		return r;
	if ((r = parse_limit(root, "memory_bytes", &cfg->memory_max, err)) < 0 ||
	    (r = parse_limit(root, "pids_max", &cfg->pids_max, err)) < 0)
		return r;
	uint64_t millis = 0;
	if ((r = parse_limit(root, "cpu_millis", &millis, err)) < 0)
		return r;
	if (millis > 1024 * 1000)
		return msb_error_set(err, MSB_E_VALUE,
				     "ns config.cpu_millis: at most 1024000 (1024 CPUs)");
	cfg->cpu_quota_us = millis * (MSB_NS_CPU_PERIOD_US / 1000);
	json_t *obj = NULL;
	r = msb__json_get_object(root, "rlimits", where, &obj, &present, err);
	if (r < 0 || (present && (r = parse_rlimits(cfg, obj, err)) < 0))
		return r;
	return 0;
}

int msb_ns__config_from_json(msb_ns_config *cfg, const char *json, size_t len, msb_error **err)
{
	json_t *root = NULL;
	int r = msb__json_load_object(json, len, "ns config", &root, err);
	if (r < 0) {
		msb_ns__config_clear(cfg);
		return r;
	}
	r = parse_root(cfg, root, err);
	json_decref(root);
	if (r == 0)
		r = msb_ns__config_check(cfg, err);
	if (r < 0)
		msb_ns__config_clear(cfg);
	return r;
}
