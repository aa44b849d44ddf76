/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` backend from its JSON object (for the backend-type table) and its
 * `msb doctor` probes.
 */
#include <stdio.h>

#include "egress/egress.h"
#include "util/json.h"
#include "vm_backend.h"

/* "type", then every key of the vm backend's JSON: the one list, which the
 * backend-type table (vm_json.c) takes from its second entry. */
const char *const msb_vm__json_keys[] = {"type",
					 "name",
					 "state_dir",
					 "cache_dir",
					 "qemu",
					 "kernel",
					 "modules_dir",
					 "image",
					 "host_programs",
					 "accel",
					 "memory_bytes",
					 "vcpus",
					 "writable_bytes",
					 "pids_max",
					 "cpu_millis",
					 "start_timeout",
					 "kvm_probe_timeout",
					 "snapshots",
					 "egress",
					 NULL};

int msb_vm__from_object(json_t *obj, const char *where, msb_backend **out, msb_error **err)
{
	msb_vm_options o = MSB_VM_OPTIONS_INIT;
	uint64_t vcpus = 0;
	const char **progs = NULL;
	size_t n_progs = 0;
	bool has_progs = false, snapshots = true;
	int r;
	if ((r = msb__json_check_keys(obj, msb_vm__json_keys, where, err)) < 0 ||
	    (r = msb__json_get_string(obj, "name", where, &o.name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "state_dir", where, &o.state_root, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "cache_dir", where, &o.cache_dir, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "qemu", where, &o.qemu_path, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "kernel", where, &o.kernel_path, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "modules_dir", where, &o.modules_dir, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "image", where, &o.image, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "accel", where, &o.accel, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "memory_bytes", where, &o.memory_bytes, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "vcpus", where, &vcpus, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "writable_bytes", where, &o.writable_bytes, NULL, err)) <
		    0 ||
	    (r = msb__json_get_u64(obj, "pids_max", where, &o.pids_max, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "cpu_millis", where, &o.cpu_millis, NULL, err)) < 0 ||
	    (r = msb__json_get_double(obj, "start_timeout", where, &o.start_timeout, NULL, err)) <
		    0 ||
	    (r = msb__json_get_double(obj, "kvm_probe_timeout", where, &o.kvm_probe_timeout, NULL,
				      err)) < 0 ||
	    (r = msb__json_get_bool(obj, "snapshots", where, &snapshots, NULL, err)) < 0 ||
	    (r = msb__json_get_string_array(obj, "host_programs", where, &progs, &n_progs,
					    &has_progs, err)) < 0)
		return r;
	if (vcpus > 64) {
		free(progs);
		return msb_error_set(err, MSB_E_VALUE, "%s.vcpus must be 1..64", where);
	}
	o.vcpus = (uint32_t)vcpus;
	o.snapshots = snapshots ? 1 : -1;
	/* "egress": the proxy's settings, checked strictly by the backend. */
	json_t *egress = json_object_get(obj, "egress");
	if (egress && !json_is_object(egress)) {
		free(progs);
		return msb_error_set(err, MSB_E_TYPE, "%s: `egress` must be an object", where);
	}
	_cleanup_free_ char *egress_text = egress ? json_dumps(egress, JSON_COMPACT) : NULL;
	if (egress && !egress_text) {
		free(progs);
		return msb__error_nomem(err);
	}
	o.egress_config = egress_text;
	_cleanup_free_ const char **list = NULL;
	if (has_progs) {
		list = calloc(n_progs + 1, sizeof(*list));
		if (!list) {
			free(progs);
			return msb__error_nomem(err);
		}
		for (size_t i = 0; i < n_progs; i++)
			list[i] = progs[i];
		o.host_programs = list;
	}
	r = msb_vm_backend_new(&o, out, err);
	free(progs);
	return r;
}

int msb_vm_backend_from_json(const char *json, size_t len, msb_backend **out, msb_error **err)
{
	json_t *obj = NULL;
	int r = msb__json_load_object(json, len, "vm backend", &obj, err);
	if (r < 0)
		return r;
	json_t *type = json_object_get(obj, "type");
	if (type && (!json_is_string(type) || strcmp(json_string_value(type), "vm") != 0))
		r = msb_error_set(err, MSB_E_VALUE, "vm backend: `type` must be `vm`");
	if (r == 0)
		r = msb_vm__from_object(obj, "vm backend", out, err);
	json_decref(obj);
	return r;
}

static int add(msb_probe **v, size_t *n, const char *name, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int add(msb_probe **v, size_t *n, const char *name, bool ok, const char *fmt, ...)
{
	msb_probe *nv = msb__reallocarray(*v, *n + 1, sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	va_list ap;
	va_start(ap, fmt);
	char *reason = msb__vasprintf(fmt, ap);
	va_end(ap);
	nv[*n].name = strdup(name);
	nv[*n].reason = reason;
	nv[*n].ok = ok;
	if (!nv[*n].name || !reason) {
		free(nv[*n].name);
		free(reason);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

int msb_vm_doctor(const msb_vm_options *opts, msb_doctor_report **out, msb_error **err)
{
	msb_doctor_report *rep = calloc(1, sizeof(*rep));
	if (!rep)
		return msb__error_nomem(err);
	msb_probe **p = &rep->probes;
	size_t *n = &rep->n_probes;
	int r = 0;
	vm_backend b;
	msb_error *e = NULL;
	int q = msb_vm__backend_init(&b, opts, true, &e);
	if (q < 0) {
		/* Say what was found before the failure. */
		msb_vm_options defaults = MSB_VM_OPTIONS_INIT;
		msb_vm_host h;
		msb_error *he = NULL;
		bool found = msb_vm__host_find(opts ? opts : &defaults, &h, &he) == 0;
		if (found) {
			r |= add(p, n, "vm.qemu", true, "%s", h.qemu);
			r |= add(p, n, "vm.kernel", true, "%s (modules %s)", h.kernel,
				 h.modules_dir);
			r |= add(p, n, "vm.mkfs_erofs", true, "%s", h.mkfs_erofs);
			msb_vm__host_clear(&h);
		} else {
			r |= add(p, n, "vm.host", false, "%s", msb_error_message(he));
		}
		msb_error_free(he);
		r |= add(p, n, "vm.build", false, "%s", msb_error_message(e));
		r |= add(&rep->backends, &rep->n_backends, "vm", false, "not usable: %s",
			 msb_error_message(e));
		msb_error_free(e);
	} else {
		r |= add(p, n, "vm.qemu", true, "%s (KVM: %s)", b.host.qemu, b.host.qemu_kvm);
		r |= add(p, n, "vm.kernel", true, "%s (modules %s)", b.host.kernel,
			 b.host.modules_dir);
		r |= add(p, n, "vm.mkfs_erofs", true, "%s", b.host.mkfs_erofs);
		r |= add(p, n, "vm.initramfs", true, "%s", b.initramfs);
		r |= add(p, n, "vm.image", true, "host: %s", b.disk);
		r |= add(p, n, "vm.kvm", b.kvm, "%s", b.accel_why);
		r |= add(p, n, "vm.rung", true, "%s",
			 b.kvm ? "microvm: hardware-assisted KVM proved working"
			       : "container: qemu's TCG emulation, for which qemu makes no "
				 "security promise");
		r |= add(p, n, "vm.egress", true,
			 "closed: the VM has no network device (only its own loopback); "
			 "allowlist: the guest agent's proxy port 127.0.0.1:%u is relayed over "
			 "the serial port to msb-vm-shim's proxy, which decides by the sandbox's "
			 "rules and dials from the host (records in <state>/egress.log)",
			 (unsigned)MSB_EGRESS_PORT);
		r |= add(&rep->backends, &rep->n_backends, "vm", true,
			 "usable: accelerator %s, declares `%s`, kernel %s%s",
			 b.kvm ? "kvm" : "tcg", b.kvm ? "microvm" : "container", b.host.kernel,
			 geteuid() == 0 ? "" : " (needs root: the VMM's jail)");
		msb_vm__backend_clear(&b);
	}
	if (r != 0) {
		msb_doctor_report_free(rep);
		return msb__error_nomem(err);
	}
	*out = rep;
	return 0;
}
