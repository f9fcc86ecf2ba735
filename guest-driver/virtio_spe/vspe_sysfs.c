// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_spe: the perf PMU's sysfs attributes: cpumask, and the format/
 * and caps/ groups of drivers/perf/arm_spe_pmu.c, which perf reads to
 * build and decode its events.
 */

#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/perf_event.h>
#include <linux/sysfs.h>

#include "vspe_pmu.h"

/* inv_event_filter: perf_event_attr.config3 exists since 6.3. */
static bool vspe_has_config3(void)
{
#ifdef VSPE_HAVE_CONFIG3
	return true;
#else
	return false;
#endif
}

static ssize_t cpumask_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	return sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(&p->supported_cpus));
}
static DEVICE_ATTR_RO(cpumask);

static struct attribute *vspe_attrs[] = {
	&dev_attr_cpumask.attr,
	NULL,
};

static const struct attribute_group vspe_group = {
	.attrs = vspe_attrs,
};

PMU_FORMAT_ATTR(ts_enable, "config:0");
PMU_FORMAT_ATTR(pa_enable, "config:1");
PMU_FORMAT_ATTR(pct_enable, "config:2");
PMU_FORMAT_ATTR(jitter, "config:16");
PMU_FORMAT_ATTR(branch_filter, "config:32");
PMU_FORMAT_ATTR(load_filter, "config:33");
PMU_FORMAT_ATTR(store_filter, "config:34");
PMU_FORMAT_ATTR(discard, "config:35");
PMU_FORMAT_ATTR(branch_filter_mask, "config:36");
PMU_FORMAT_ATTR(load_filter_mask, "config:37");
PMU_FORMAT_ATTR(store_filter_mask, "config:38");
PMU_FORMAT_ATTR(simd_filter, "config:39");
PMU_FORMAT_ATTR(simd_filter_mask, "config:40");
PMU_FORMAT_ATTR(float_filter, "config:41");
PMU_FORMAT_ATTR(float_filter_mask, "config:42");
PMU_FORMAT_ATTR(event_filter, "config1:0-63");
PMU_FORMAT_ATTR(min_latency, "config2:0-11");
PMU_FORMAT_ATTR(inv_event_filter, "config3:0-63");

static struct attribute *vspe_format_attrs[] = {
	&format_attr_ts_enable.attr,
	&format_attr_pa_enable.attr,
	&format_attr_pct_enable.attr,
	&format_attr_jitter.attr,
	&format_attr_branch_filter.attr,
	&format_attr_load_filter.attr,
	&format_attr_store_filter.attr,
	&format_attr_discard.attr,
	&format_attr_branch_filter_mask.attr,
	&format_attr_load_filter_mask.attr,
	&format_attr_store_filter_mask.attr,
	&format_attr_simd_filter.attr,
	&format_attr_simd_filter_mask.attr,
	&format_attr_float_filter.attr,
	&format_attr_float_filter_mask.attr,
	&format_attr_event_filter.attr,
	&format_attr_min_latency.attr,
	&format_attr_inv_event_filter.attr,
	NULL,
};

/* Formats appear only where the device has the feature behind them. */
static umode_t vspe_format_visible(struct kobject *kobj,
				   struct attribute *attr, int unused)
{
	struct device *dev = kobj_to_dev(kobj);
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	if (attr == &format_attr_inv_event_filter.attr)
		return p->v->pmsidr & PMSIDR_FNE &&
		       vspe_has_config3() ? attr->mode : 0;
	if (attr == &format_attr_discard.attr)
		return p->pmsver >= DFR0_PMSVER_V1P2 ? attr->mode : 0;
	if (attr == &format_attr_event_filter.attr)
		return p->v->pmsidr & PMSIDR_FE ? attr->mode : 0;
	if (attr == &format_attr_min_latency.attr)
		return p->v->pmsidr & PMSIDR_FL ? attr->mode : 0;
	if (attr == &format_attr_branch_filter_mask.attr ||
	    attr == &format_attr_load_filter_mask.attr ||
	    attr == &format_attr_store_filter_mask.attr ||
	    attr == &format_attr_simd_filter.attr ||
	    attr == &format_attr_simd_filter_mask.attr ||
	    attr == &format_attr_float_filter.attr ||
	    attr == &format_attr_float_filter_mask.attr)
		return p->v->pmsidr & PMSIDR_EFT ? attr->mode : 0;
	return attr->mode;
}

static const struct attribute_group vspe_format_group = {
	.name = "format",
	.is_visible = vspe_format_visible,
	.attrs = vspe_format_attrs,
};

static ssize_t arch_inst_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	return sysfs_emit(buf, "%d\n", !!(p->v->pmsidr & PMSIDR_ARCHINST));
}
static DEVICE_ATTR_RO(arch_inst);

static ssize_t ernd_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	return sysfs_emit(buf, "%d\n", !!(p->v->pmsidr & PMSIDR_ERND));
}
static DEVICE_ATTR_RO(ernd);

static ssize_t count_size_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	return sysfs_emit(buf, "%u\n", p->counter_sz);
}
static DEVICE_ATTR_RO(count_size);

static ssize_t min_interval_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	return sysfs_emit(buf, "%u\n", p->min_period);
}
static DEVICE_ATTR_RO(min_interval);

static ssize_t cap_event_filter_show(struct device *dev,
				     struct device_attribute *attr, char *buf)
{
	struct vspe_pmu *p = to_vspe_pmu(dev_get_drvdata(dev));

	return sysfs_emit(buf, "0x%llx\n", p->pmsevfr_mask);
}

/* caps/event_filter: named as the format attribute is. */
static struct device_attribute dev_attr_cap_event_filter =
	__ATTR(event_filter, 0444, cap_event_filter_show, NULL);

static struct attribute *vspe_cap_attrs[] = {
	&dev_attr_arch_inst.attr,
	&dev_attr_ernd.attr,
	&dev_attr_count_size.attr,
	&dev_attr_min_interval.attr,
	&dev_attr_cap_event_filter.attr,
	NULL,
};

static const struct attribute_group vspe_cap_group = {
	.name = "caps",
	.attrs = vspe_cap_attrs,
};

const struct attribute_group *vspe_attr_groups[] = {
	&vspe_group,
	&vspe_cap_group,
	&vspe_format_group,
	NULL,
};
