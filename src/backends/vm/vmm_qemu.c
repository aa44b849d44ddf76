/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qemu as the VMM: `-M microvm`, the kernel and initramfs given directly, one
 * read-only virtio-blk disk (the image), one virtio-serial port (the agent's
 * channel, a unix socket qemu listens on), the guest console on stdout, no
 * network device, no default devices, no user configuration, and qemu's own
 * seccomp filter (`-sandbox on` with every optional deny).
 */
#include <stdio.h>

#include "vmm.h"

static int push(char ***v, const char *s)
{
	return msb__strv_push(v, s);
}

static int qemu_argv(const msb_vmm_config *c, char ***out)
{
	_cleanup_strv_ char **v = NULL;
	char mach[96], mem[32], smp[32], chardev[160];
	/* ACPI stays on: the guest finds the virtio-mmio devices through it
	 * (the Debian cloud kernel has no virtio_mmio.device= parameter). */
	snprintf(mach, sizeof(mach), c->ram ? "microvm,memory-backend=mem" : "microvm");
	snprintf(mem, sizeof(mem), "%lluM", (unsigned long long)c->memory_mib);
	snprintf(smp, sizeof(smp), "%u", c->vcpus ? c->vcpus : 1);
	snprintf(chardev, sizeof(chardev), "socket,path=%s/%s,server=on,wait=off,id=c0",
		 MSB_VMM_JAIL_RUN, MSB_VMM_SERIAL_SOCK);
	const char *args[] = {
		c->binary,
		"-M",
		mach,
		"-accel",
		/* TCG's translation cache is 1 GiB unless told: bounded, so the
		 * VMM's memory stays near the guest's RAM. */
		c->kvm ? "kvm" : "tcg,tb-size=64",
		"-cpu",
		c->kvm ? "host" : "max",
		"-m",
		mem,
		"-smp",
		smp,
		"-no-user-config",
		"-nodefaults",
		"-display",
		"none",
		"-serial",
		"stdio",
		"-msg",
		"timestamp=off",
		"-no-reboot",
		"-kernel",
		MSB_VMM_JAIL_KERNEL,
		"-initrd",
		MSB_VMM_JAIL_INITRD,
		"-append",
		c->cmdline,
		"-device",
		"virtio-serial-device",
		"-chardev",
		chardev,
		"-device",
		"virtserialport,chardev=c0,name=msb",
		"-drive",
		"id=d0,file=" MSB_VMM_JAIL_DISK ",format=raw,if=none,readonly=on",
		"-device",
		"virtio-blk-device,drive=d0",
		/* Free page reporting: pages the guest frees go back to the host,
		 * so an idle VM holds what its guest uses, not what it once did. */
		"-device",
		"virtio-balloon-device,free-page-reporting=on",
		"-sandbox",
		"on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		NULL,
	};
	for (size_t i = 0; args[i]; i++)
		if (push(&v, args[i]) < 0)
			return -ENOMEM;
	char incoming[32], qmp[160], ram[192];
	snprintf(incoming, sizeof(incoming), "fd:%d", c->incoming_fd);
	/* The guest's RAM in a file the jail inherited: the template writes
	 * its RAM there (share=on) so its saved state needs only the devices
	 * (x-ignore-shared); a restore maps the template's sealed copy private
	 * (share=off): pages read are shared by every VM until one writes. */
	snprintf(ram, sizeof(ram),
		 "memory-backend-file,id=mem,size=%lluM,mem-path=/proc/self/fd/%d,share=%s",
		 (unsigned long long)c->memory_mib, c->ram_fd, c->ram_shared ? "on" : "off");
	if (c->ram && (push(&v, "-object") < 0 || push(&v, ram) < 0))
		return -ENOMEM;
	snprintf(qmp, sizeof(qmp), "unix:%s/%s,server=on,wait=off", MSB_VMM_JAIL_RUN,
		 MSB_VMM_QMP_SOCK);
	/* The saved state comes in on an inherited descriptor: qemu's own
	 * filter (spawn=deny) forbids the exec: transports. */
	if (c->incoming &&
	    (push(&v, "-incoming") < 0 || push(&v, c->incoming_defer ? "defer" : incoming) < 0))
		return -ENOMEM;
	if (c->qmp && (push(&v, "-qmp") < 0 || push(&v, qmp) < 0))
		return -ENOMEM;
	*out = TAKE_PTR(v);
	return 0;
}

const msb_vmm_ops msb_vmm__qemu = {
	.name = "qemu",
	.argv = qemu_argv,
};
