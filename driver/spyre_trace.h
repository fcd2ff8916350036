/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: tracepoints (events/spyre/ in tracefs).
 *
 * A job's life: spyre_submit (the ioctl queued it), spyre_job_run (its
 * descriptors went on the ring), spyre_job_done (its fence signalled,
 * with the card's start and end time when the completion record was its
 * own), spyre_job_timeout; and around it spyre_fault, spyre_reset,
 * spyre_bo_create and spyre_bo_destroy.  Times named card_* are the
 * card's clock (its CLOCK register, ns since its last reset), so guest
 * and card events can share a time base: spyre_job_run samples the card
 * clock when the event is enabled.  Every event names its card by PCI
 * device (dev=), since context and queue numbers are per card;
 * scripts/trace-timeline.py turns a trace of them into a timeline.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM spyre

#if !defined(SPYRE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define SPYRE_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(spyre_submit,
	    TP_PROTO(const struct device *dev, u32 ctx, u32 hwq, u64 seqno,
		     u32 ndesc, u32 bo_count),
	    TP_ARGS(dev, ctx, hwq, seqno, ndesc, bo_count),
	    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __field(u32, ctx)
			     __field(u32, hwq)
			     __field(u64, seqno)
			     __field(u32, ndesc)
			     __field(u32, bo_count)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->ctx = ctx;
			   __entry->hwq = hwq;
			   __entry->seqno = seqno;
			   __entry->ndesc = ndesc;
			   __entry->bo_count = bo_count;),
	    TP_printk("dev=%s ctx=%u hwq=%u seqno=%llu ndesc=%u bos=%u",
		      __get_str(dev), __entry->ctx, __entry->hwq, __entry->seqno, __entry->ndesc,
		      __entry->bo_count)
);

TRACE_EVENT(spyre_job_run,
	    TP_PROTO(const struct device *dev, u32 ctx, u32 hwq, u64 seqno,
		     u64 card_ns),
	    TP_ARGS(dev, ctx, hwq, seqno, card_ns),
	    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __field(u32, ctx)
			     __field(u32, hwq)
			     __field(u64, seqno)
			     __field(u64, card_ns)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->ctx = ctx;
			   __entry->hwq = hwq;
			   __entry->seqno = seqno;
			   __entry->card_ns = card_ns;),
	    TP_printk("dev=%s ctx=%u hwq=%u seqno=%llu card_ns=%llu",
		      __get_str(dev), __entry->ctx, __entry->hwq, __entry->seqno,
		      __entry->card_ns)
);

TRACE_EVENT(spyre_job_done,
	    TP_PROTO(const struct device *dev, u32 ctx, u32 hwq, u64 seqno,
		     int err, u64 card_start_ns, u64 card_end_ns),
	    TP_ARGS(dev, ctx, hwq, seqno, err, card_start_ns, card_end_ns),
	    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __field(u32, ctx)
			     __field(u32, hwq)
			     __field(u64, seqno)
			     __field(int, err)
			     __field(u64, card_start_ns)
			     __field(u64, card_end_ns)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->ctx = ctx;
			   __entry->hwq = hwq;
			   __entry->seqno = seqno;
			   __entry->err = err;
			   __entry->card_start_ns = card_start_ns;
			   __entry->card_end_ns = card_end_ns;),
	    TP_printk("dev=%s ctx=%u hwq=%u seqno=%llu err=%d card_start_ns=%llu card_end_ns=%llu",
		      __get_str(dev),
		      __entry->ctx, __entry->hwq, __entry->seqno, __entry->err,
		      __entry->card_start_ns, __entry->card_end_ns)
);

TRACE_EVENT(spyre_job_timeout,
	    TP_PROTO(const struct device *dev, u32 ctx, u32 hwq, u64 seqno),
	    TP_ARGS(dev, ctx, hwq, seqno),
	    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __field(u32, ctx)
			     __field(u32, hwq)
			     __field(u64, seqno)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->ctx = ctx;
			   __entry->hwq = hwq;
			   __entry->seqno = seqno;),
	    TP_printk("dev=%s ctx=%u hwq=%u seqno=%llu", __get_str(dev),
		      __entry->ctx, __entry->hwq,
		      __entry->seqno)
);

TRACE_EVENT(spyre_fault,
	    TP_PROTO(const struct device *dev, u32 ctx, u32 hwq, u64 va,
		     bool write, u32 reason),
	    TP_ARGS(dev, ctx, hwq, va, write, reason),
	    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __field(u32, ctx)
			     __field(u32, hwq)
			     __field(u64, va)
			     __field(bool, write)
			     __field(u32, reason)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->ctx = ctx;
			   __entry->hwq = hwq;
			   __entry->va = va;
			   __entry->write = write;
			   __entry->reason = reason;),
	    TP_printk("dev=%s ctx=%u hwq=%u va=%#llx %s reason=%u",
		      __get_str(dev), __entry->ctx,
		      __entry->hwq, __entry->va, __entry->write ? "write" : "read",
		      __entry->reason)
);

TRACE_EVENT(spyre_reset,
	    TP_PROTO(const struct device *dev, const char *reason, int ret),
	    TP_ARGS(dev, reason, ret),
	    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __string(reason, reason)
			     __field(int, ret)),
	    TP_fast_assign(__assign_str(dev);
			   __assign_str(reason);
			   __entry->ret = ret;),
	    TP_printk("dev=%s reason=%s ret=%d", __get_str(dev),
		      __get_str(reason), __entry->ret)
);

/* BOs of every placement (DRM_SPYRE_PLACEMENT_*); size in bytes. */
DECLARE_EVENT_CLASS(spyre_bo,
		    TP_PROTO(const struct device *dev, u64 size, u32 placement),
		    TP_ARGS(dev, size, placement),
		    TP_STRUCT__entry(__string(dev, dev_name(dev))
			     __field(u64, size)
				     __field(u32, placement)),
		    TP_fast_assign(__assign_str(dev);
			   __entry->size = size;
				   __entry->placement = placement;),
		    TP_printk("dev=%s size=%llu placement=%u", __get_str(dev),
			      __entry->size, __entry->placement)
);

DEFINE_EVENT(spyre_bo, spyre_bo_create,
	     TP_PROTO(const struct device *dev, u64 size, u32 placement),
	     TP_ARGS(dev, size, placement));

DEFINE_EVENT(spyre_bo, spyre_bo_destroy,
	     TP_PROTO(const struct device *dev, u64 size, u32 placement),
	     TP_ARGS(dev, size, placement));

#endif /* SPYRE_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE spyre_trace
#include <trace/define_trace.h>
