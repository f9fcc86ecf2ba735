// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_spe: driver for the paravirtual Arm Statistical Profiling
 * Extension device of vhost-device-spe (virtio device ID 58).
 *
 * This file is the virtio transport: configuration, the control queue
 * (synchronous register accesses) and the event queue (PMBIRQ level
 * changes and snapshot completions). vspe_pmu.c is the perf PMU (with
 * vspe_aux.c and vspe_sysfs.c).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>

#include "vspe.h"

#define VSPE_EVENT_BUFS	64

static_assert(sizeof(struct virtio_spe_config) == VIRTIO_SPE_CONFIG_SIZE);
static_assert(sizeof(struct virtio_spe_ctrl_req) == VIRTIO_SPE_CTRL_REQ_SIZE);
static_assert(sizeof(struct virtio_spe_ctrl_resp) == VIRTIO_SPE_CTRL_RESP_SIZE);
static_assert(sizeof(struct virtio_spe_event) == VIRTIO_SPE_EVENT_SIZE);

static unsigned int ctrl_timeout_ms = 1000;
module_param(ctrl_timeout_ms, uint, 0644);
MODULE_PARM_DESC(ctrl_timeout_ms,
		 "How long a register access waits for the device (ms)");

/*
 * Polls for the batch the device holds. Returns 0 when it completed
 * with all responses written, -ETIMEDOUT when the device did not answer
 * in time (the batch stays with the device: ctrl_busy).
 */
static int vspe_ctrl_wait(struct vspe_dev *v, unsigned int n)
{
	u64 deadline = ktime_get_mono_fast_ns() +
		       (u64)ctrl_timeout_ms * NSEC_PER_MSEC;
	unsigned int len;

	while (!virtqueue_get_buf(v->ctrl_vq, &len)) {
		if (virtqueue_is_broken(v->ctrl_vq))
			return -EIO;
		if (ktime_get_mono_fast_ns() > deadline) {
			v->ctrl_busy = true;
			return -ETIMEDOUT;
		}
		cpu_relax();
	}
	v->ctrl_busy = false;
	return len >= n * sizeof(*v->resp) ? 0 : -EIO;
}

/**
 * vspe_ctrl() - run register accesses of one vCPU on the device
 * @v: the device
 * @vcpu: whose registers
 * @acc: the accesses, in order; status and value are filled in
 * @n: how many (at most max_batch)
 *
 * Callable in any context: it spins until the device answers or
 * ctrl_timeout_ms passes. Return: 0 if every access was made (check
 * each status), or a negative errno if the device did not answer.
 */
int vspe_ctrl(struct vspe_dev *v, unsigned int vcpu,
	      struct vspe_access *acc, unsigned int n)
{
	struct scatterlist out, in, *sgs[2] = { &out, &in };
	unsigned long flags;
	unsigned int i;
	int err;

	if (WARN_ON_ONCE(!n || n > v->max_batch))
		return -EINVAL;

	raw_spin_lock_irqsave(&v->ctrl_lock, flags);
	if (v->removing) {
		err = -ENODEV;
		goto out;
	}
	/* A device that came back answers the batch it still holds first. */
	if (v->ctrl_busy) {
		unsigned int len;

		if (!virtqueue_get_buf(v->ctrl_vq, &len)) {
			err = -EIO;
			goto out;
		}
		v->ctrl_busy = false;
	}
	for (i = 0; i < n; i++) {
		v->req[i] = (struct virtio_spe_ctrl_req) {
			.vcpu = cpu_to_le32(vcpu),
			.reg = cpu_to_le32(acc[i].reg),
			.op = acc[i].op,
			.value = cpu_to_le64(acc[i].value),
		};
	}
	memset(v->resp, 0, n * sizeof(*v->resp));
	sg_init_one(&out, v->req, n * sizeof(*v->req));
	sg_init_one(&in, v->resp, n * sizeof(*v->resp));
	err = virtqueue_add_sgs(v->ctrl_vq, sgs, 1, 1, v, GFP_ATOMIC);
	if (err)
		goto out;
	if (!virtqueue_kick(v->ctrl_vq)) {
		err = -EIO;
		goto out;
	}
	err = vspe_ctrl_wait(v, n);
	if (err)
		goto out;
	for (i = 0; i < n; i++) {
		acc[i].status = v->resp[i].status;
		acc[i].value = le64_to_cpu(v->resp[i].value);
	}
out:
	raw_spin_unlock_irqrestore(&v->ctrl_lock, flags);
	if (err)
		dev_err_ratelimited(&v->vdev->dev,
				    "control queue: vCPU %u: %d\n", vcpu, err);
	return err;
}

static int vspe_post_event(struct vspe_dev *v, struct virtio_spe_event *ev)
{
	struct scatterlist sg;

	sg_init_one(&sg, ev, sizeof(*ev));
	return virtqueue_add_inbuf(v->event_vq, &sg, 1, ev, GFP_ATOMIC);
}

static void vspe_event_done(struct virtqueue *vq)
{
	struct vspe_dev *v = vq->vdev->priv;
	struct virtio_spe_event *ev;
	unsigned long flags;
	unsigned int len;

	spin_lock_irqsave(&v->event_lock, flags);
	while ((ev = virtqueue_get_buf(vq, &len))) {
		u32 vcpu = le32_to_cpu(ev->vcpu);

		if (len < sizeof(*ev))
			dev_warn_ratelimited(&vq->vdev->dev,
					     "short event (%u bytes)\n", len);
		else if (ev->kind == VIRTIO_SPE_EV_PMBIRQ && ev->pmbirq)
			vspe_pmu_pmbirq(v, vcpu, le64_to_cpu(ev->pmbsr));
		else if (ev->kind == VIRTIO_SPE_EV_SNAPSHOT_DONE)
			dev_dbg(&vq->vdev->dev, "vCPU %u: snapshot done\n",
				vcpu);
		if (vspe_post_event(v, ev))
			dev_warn_ratelimited(&vq->vdev->dev,
					     "cannot repost an event buffer\n");
	}
	virtqueue_kick(vq);
	spin_unlock_irqrestore(&v->event_lock, flags);
}

static int vspe_find_vqs(struct vspe_dev *v)
{
	struct virtqueue *vqs[VIRTIO_SPE_NUM_QUEUES];
	int err;
#ifdef VSPE_HAVE_VQ_INFO
	struct virtqueue_info info[VIRTIO_SPE_NUM_QUEUES] = {
		[VIRTIO_SPE_CONTROL_QUEUE] = { "control", NULL },
		[VIRTIO_SPE_EVENT_QUEUE] = { "event", vspe_event_done },
	};

	err = virtio_find_vqs(v->vdev, VIRTIO_SPE_NUM_QUEUES, vqs, info, NULL);
#else
	vq_callback_t *cbs[VIRTIO_SPE_NUM_QUEUES] = {
		[VIRTIO_SPE_CONTROL_QUEUE] = NULL,
		[VIRTIO_SPE_EVENT_QUEUE] = vspe_event_done,
	};
	static const char * const names[VIRTIO_SPE_NUM_QUEUES] = {
		[VIRTIO_SPE_CONTROL_QUEUE] = "control",
		[VIRTIO_SPE_EVENT_QUEUE] = "event",
	};

	err = virtio_find_vqs(v->vdev, VIRTIO_SPE_NUM_QUEUES, vqs, cbs, names,
			      NULL);
#endif
	if (err)
		return err;
	v->ctrl_vq = vqs[VIRTIO_SPE_CONTROL_QUEUE];
	v->event_vq = vqs[VIRTIO_SPE_EVENT_QUEUE];
	return 0;
}

static int vspe_read_config(struct vspe_dev *v)
{
	struct virtio_device *vdev = v->vdev;
	u32 version;

	virtio_cread_le(vdev, struct virtio_spe_config, version, &version);
	if (version != VIRTIO_SPE_VERSION) {
		dev_err(&vdev->dev, "device speaks version %u, driver %u\n",
			version, VIRTIO_SPE_VERSION);
		return -ENODEV;
	}
	virtio_cread_le(vdev, struct virtio_spe_config, num_vcpus,
			&v->num_vcpus);
	virtio_cread_le(vdev, struct virtio_spe_config, features,
			&v->features);
	virtio_cread_le(vdev, struct virtio_spe_config, pmsidr, &v->pmsidr);
	virtio_cread_le(vdev, struct virtio_spe_config, pmbidr, &v->pmbidr);
	virtio_cread_le(vdev, struct virtio_spe_config, id_aa64dfr0,
			&v->id_aa64dfr0);
	virtio_cread_le(vdev, struct virtio_spe_config, max_batch,
			&v->max_batch);
	v->max_batch = min_t(u32, v->max_batch, VIRTIO_SPE_MAX_BATCH);
	if (!v->num_vcpus || !v->max_batch) {
		dev_err(&vdev->dev, "config: %u vCPUs, batches of %u\n",
			v->num_vcpus, v->max_batch);
		return -ENODEV;
	}
	return 0;
}

static int vspe_probe(struct virtio_device *vdev)
{
	struct vspe_dev *v;
	unsigned int i;
	int err;

	v = devm_kzalloc(&vdev->dev, sizeof(*v), GFP_KERNEL);
	if (!v)
		return -ENOMEM;
	v->vdev = vdev;
	vdev->priv = v;
	raw_spin_lock_init(&v->ctrl_lock);
	spin_lock_init(&v->event_lock);

	err = vspe_read_config(v);
	if (err)
		return err;
	v->req = devm_kcalloc(&vdev->dev, v->max_batch, sizeof(*v->req),
			      GFP_KERNEL);
	v->resp = devm_kcalloc(&vdev->dev, v->max_batch, sizeof(*v->resp),
			       GFP_KERNEL);
	v->events = devm_kcalloc(&vdev->dev, VSPE_EVENT_BUFS,
				 sizeof(*v->events), GFP_KERNEL);
	if (!v->req || !v->resp || !v->events)
		return -ENOMEM;

	err = vspe_find_vqs(v);
	if (err)
		return err;
	virtio_device_ready(vdev);

	v->nr_events = min_t(unsigned int, VSPE_EVENT_BUFS,
			     virtqueue_get_vring_size(v->event_vq));
	for (i = 0; i < v->nr_events; i++) {
		err = vspe_post_event(v, &v->events[i]);
		if (err)
			goto err_reset;
	}
	virtqueue_kick(v->event_vq);

	err = vspe_pmu_probe(v);
	if (err)
		goto err_reset;
	return 0;

err_reset:
	virtio_reset_device(vdev);
	vdev->config->del_vqs(vdev);
	return err;
}

static void vspe_remove(struct virtio_device *vdev)
{
	struct vspe_dev *v = vdev->priv;
	unsigned long flags;

	/* No request reaches the device from here on: the PMU sees -ENODEV. */
	raw_spin_lock_irqsave(&v->ctrl_lock, flags);
	v->removing = true;
	raw_spin_unlock_irqrestore(&v->ctrl_lock, flags);
	virtio_reset_device(vdev);
	vdev->config->del_vqs(vdev);
	vspe_pmu_remove(v);
}

/*
 * QEMU up to 10.2 aborts on a virtio-id it has no name for, which 58 is:
 * on an unpatched QEMU the device takes an ID QEMU names and Linux has no
 * driver for, and the driver is told which.
 */
static unsigned int virtio_id = VIRTIO_ID_SPE;
module_param(virtio_id, uint, 0444);
MODULE_PARM_DESC(virtio_id, "virtio device ID to bind (default 58)");

static struct virtio_device_id vspe_id_table[] = {
	{ VIRTIO_ID_SPE, VIRTIO_DEV_ANY_ID },
	{ 0 },
};
MODULE_DEVICE_TABLE(virtio, vspe_id_table);

static struct virtio_driver vspe_driver = {
	.driver.name = KBUILD_MODNAME,
#ifndef VSPE_HAVE_VIRTIO_OWNER
	/* Newer kernels' register_virtio_driver() sets it. */
	.driver.owner = THIS_MODULE,
#endif
	.id_table = vspe_id_table,
	.probe = vspe_probe,
	.remove = vspe_remove,
};

static int __init vspe_init(void)
{
	vspe_id_table[0].device = virtio_id;
	return register_virtio_driver(&vspe_driver);
}
module_init(vspe_init);

static void __exit vspe_exit(void)
{
	unregister_virtio_driver(&vspe_driver);
}
module_exit(vspe_exit);

MODULE_DESCRIPTION("Paravirtual Arm SPE (virtio-spe) perf driver");
MODULE_LICENSE("GPL");
