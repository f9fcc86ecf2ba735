// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_spe: the perf PMU's AUX buffer: the pages perf gives it, mapped
 * contiguously (their kernel virtual addresses are what the buffer
 * registers hold), the stretch of them the device may write next, and
 * what a management event (PMBSR) means for the data in it.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitfield.h>
#include <linux/perf_event.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "vspe_pmu.h"

/* Offset of handle index idx in the AUX buffer. */
static u64 vspe_idx2off(unsigned long idx, struct vspe_buf *buf)
{
	return idx % ((unsigned long)buf->nr_pages << PAGE_SHIFT);
}

static void vspe_pad_buf(struct perf_output_handle *handle, int len)
{
	struct vspe_buf *buf = perf_get_aux(handle);
	u64 head = vspe_idx2off(handle->head, buf);

	/* Zero bytes are SPE padding packets. */
	memset(buf->base + head, 0, len);
	if (!buf->snapshot)
		perf_aux_output_skip(handle, len);
}

/*
 * The limit for the next stretch of a snapshot buffer: the whole buffer,
 * wrapping to its start when less than a record is left.
 */
static u64 vspe_next_snapshot_off(struct perf_output_handle *handle)
{
	struct vspe_buf *buf = perf_get_aux(handle);
	struct vspe_pmu *p = to_vspe_pmu(handle->event->pmu);
	u64 limit = (u64)buf->nr_pages * PAGE_SIZE;
	u64 head = vspe_idx2off(handle->head, buf);

	if (limit - head < p->max_record_sz) {
		vspe_pad_buf(handle, limit - head);
		handle->head = 0;
	}
	return limit;
}

/*
 * The limit for the next stretch of a normal buffer: up to the consumer's
 * tail, and no further than the page after the next wakeup, so perf is
 * woken in time. 0 when there is no room.
 */
static u64 __vspe_next_off(struct perf_output_handle *handle)
{
	struct vspe_buf *buf = perf_get_aux(handle);
	struct vspe_pmu *p = to_vspe_pmu(handle->event->pmu);
	u64 limit = (u64)buf->nr_pages * PAGE_SIZE;
	u64 head = vspe_idx2off(handle->head, buf);
	u64 tail, wakeup;

	if (!IS_ALIGNED(head, p->align)) {
		unsigned long delta = roundup(head, p->align) - head;

		vspe_pad_buf(handle, min_t(unsigned long, delta, handle->size));
		head = vspe_idx2off(handle->head, buf);
	}
	if (!handle->size)
		goto no_space;

	tail = vspe_idx2off(handle->head + handle->size, buf);
	wakeup = vspe_idx2off(handle->wakeup, buf);
	/* head == tail with room left means the buffer is empty. */
	if (head < tail)
		limit = round_down(tail, PAGE_SIZE);
	if (handle->wakeup < handle->head + handle->size && head <= wakeup)
		limit = min(limit, round_up(wakeup, PAGE_SIZE));
	if (limit > head)
		return limit;

	vspe_pad_buf(handle, handle->size);
no_space:
	perf_aux_output_flag(handle, PERF_AUX_FLAG_TRUNCATED);
	perf_aux_output_end(handle, 0);
	return 0;
}

/*
 * A stretch shorter than the largest record is full before the device
 * writes anything (SPEBufferIsFull): pad it and take the next one, or the
 * buffer-full events would repeat at the same PMBPTR.
 */
static u64 vspe_next_off(struct perf_output_handle *handle)
{
	struct vspe_buf *buf = perf_get_aux(handle);
	struct vspe_pmu *p = to_vspe_pmu(handle->event->pmu);
	u64 limit = __vspe_next_off(handle);
	u64 head = vspe_idx2off(handle->head, buf);

	if (limit && limit - head < p->max_record_sz) {
		vspe_pad_buf(handle, limit - head);
		limit = __vspe_next_off(handle);
	}
	return limit;
}

/*
 * Reports what the device wrote, from its PMBPTR. A pointer outside
 * what it was given (a back end that restarted with its registers reset)
 * says nothing about the data: report it lost.
 */
void vspe_aux_output_end(struct perf_output_handle *handle, u64 pmbptr)
{
	struct vspe_buf *buf = perf_get_aux(handle);
	u64 head = vspe_idx2off(handle->head, buf);
	u64 offset = pmbptr - (u64)buf->base;

	if (pmbptr < (u64)buf->base || offset < head ||
	    offset > (u64)buf->nr_pages * PAGE_SIZE) {
		pr_err_ratelimited("PMBPTR 0x%llx outside the buffer on CPU %d: data lost\n",
				   pmbptr, smp_processor_id());
		perf_aux_output_flag(handle, PERF_AUX_FLAG_TRUNCATED);
		perf_aux_output_end(handle, 0);
		return;
	}
	if (buf->snapshot)
		handle->head = offset;
	perf_aux_output_end(handle, offset - head);
}

/*
 * Opens the next stretch of the AUX buffer and fills in the PMBPTR and
 * PMBLIMITR values for it. Returns false, with the event stopped, when
 * there is nothing to write into (PMBLIMITR is then 0: disabled).
 */
bool vspe_aux_output_begin(struct perf_output_handle *handle,
			   struct perf_event *event, u64 *pmbptr,
			   u64 *pmblimitr)
{
	struct vspe_buf *buf;
	u64 limit;

	*pmbptr = 0;
	*pmblimitr = 0;
	if (event->attr.config & CFG_DISCARD) {
		*pmblimitr = PMBLIMITR_FM_DISCARD | PMBLIMITR_E;
		return true;
	}
	buf = perf_aux_output_begin(handle, event);
	if (!buf) {
		event->hw.state |= PERF_HES_STOPPED;
		return false;
	}
	limit = buf->snapshot ? vspe_next_snapshot_off(handle) :
				vspe_next_off(handle);
	if (!limit) {
		/* Stopped, as Linux 283182c1c239 fixed arm_spe_pmu to do. */
		event->hw.state |= PERF_HES_STOPPED;
		return false;
	}
	*pmblimitr = ((u64)buf->base + limit) | PMBLIMITR_E;
	*pmbptr = (u64)buf->base + vspe_idx2off(handle->head, buf);
	return true;
}

/*
 * What a management event means, as arm_spe_pmu reads PMBSR: data loss
 * and collisions are flagged to perf; a full buffer is normal; anything
 * else stops the event. Ends the AUX transaction unless spurious.
 */
enum vspe_fault_act vspe_fault_act(struct perf_output_handle *handle,
				   u64 pmbsr, u64 pmbptr, u64 pmblimitr)
{
	const char *err;

	if (!(pmbsr & PMBSR_S))
		return VSPE_ACT_SPURIOUS;
	if (pmbsr & PMBSR_DL)
		perf_aux_output_flag(handle, PERF_AUX_FLAG_TRUNCATED |
					     PERF_AUX_FLAG_PARTIAL);
	if (pmbsr & PMBSR_COLL)
		perf_aux_output_flag(handle, PERF_AUX_FLAG_COLLISION);

	switch (FIELD_GET(PMBSR_EC, pmbsr)) {
	case PMBSR_EC_BUF:
		if (FIELD_GET(PMBSR_BSC, pmbsr) == PMBSR_BSC_FULL) {
			vspe_aux_output_end(handle, pmbptr);
			return VSPE_ACT_OK;
		}
		err = "Unknown buffer status code";
		break;
	case PMBSR_EC_FAULT_S1:
	case PMBSR_EC_FAULT_S2:
		err = "Unexpected buffer fault";
		break;
	default:
		err = "Unknown error code";
		break;
	}
	pr_err_ratelimited("%s on CPU %d [PMBSR=0x%016llx, PMBPTR=0x%016llx, PMBLIMITR=0x%016llx]\n",
			   err, smp_processor_id(), pmbsr, pmbptr, pmblimitr);
	vspe_aux_output_end(handle, pmbptr);
	return VSPE_ACT_FATAL;
}

/* perf's setup_aux and free_aux callbacks */

void *vspe_setup_aux(struct perf_event *event, void **pages,
		     int nr_pages, bool snapshot)
{
	int i, cpu = event->cpu == -1 ? raw_smp_processor_id() : event->cpu;
	struct vspe_buf *buf;
	struct page **pglist;

	/* A stretch must end on a page boundary before the consumer. */
	if (nr_pages < 2)
		return NULL;
	buf = kzalloc_node(sizeof(*buf), GFP_KERNEL, cpu_to_node(cpu));
	if (!buf)
		return NULL;
	pglist = kcalloc(nr_pages, sizeof(*pglist), GFP_KERNEL);
	if (!pglist)
		goto out_free_buf;
	for (i = 0; i < nr_pages; i++)
		pglist[i] = virt_to_page(pages[i]);
	buf->base = vmap(pglist, nr_pages, VM_MAP, PAGE_KERNEL);
	kfree(pglist);
	if (!buf->base)
		goto out_free_buf;
	buf->nr_pages = nr_pages;
	buf->snapshot = snapshot;
	return buf;

out_free_buf:
	kfree(buf);
	return NULL;
}

void vspe_free_aux(void *aux)
{
	struct vspe_buf *buf = aux;

	vunmap(buf->base);
	kfree(buf);
}
