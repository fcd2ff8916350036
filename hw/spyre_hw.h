/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Spyre emulated card: hardware programming interface.
 *
 * This header is the single definition of everything the host driver and
 * the card model share that is not userspace ABI: BAR layout, BAR0
 * registers, the job descriptor, the completion record, the page-table
 * entry format and fault records.  It is included by driver/ (the kernel
 * driver) and qemu-device/ (the QEMU model).  docs/spyre-hw.rst is the
 * prose reference; the two are kept in step.
 *
 * Only fixed-width types from <linux/types.h> and plain #defines are used,
 * so both the kernel and QEMU can include it unchanged.  What the card
 * reads or writes in system memory (ring entries, completion records,
 * page-table entries) is little-endian, and typed __le16/__le32/__le64 so
 * that sparse checks every access in the driver.
 *
 * All registers are little-endian.  32-bit registers take 32-bit accesses;
 * 64-bit registers take one 64-bit access (or two 32-bit accesses, low
 * half first).
 */
#ifndef SPYRE_HW_H
#define SPYRE_HW_H

#include <linux/types.h>

/*
 * ---- PCI identity ----------------------------------------------------
 * Vendor, device and subsystem IDs: the driver binds a card only if all
 * four match.  The subsystem marks the emulated model, so that real
 * hardware, whose interface differs, is never bound.  Userspace finds
 * cards by the driver bound to them, not by these.
 */
#define SPYRE_PCI_VENDOR_ID		0x1014	/* IBM */
#define SPYRE_PCI_DEVICE_ID		0x06a7	/* Spyre PF */
#define SPYRE_PCI_SUBVENDOR_ID		0x1af4	/* emulated model marker */
#define SPYRE_PCI_SUBDEVICE_ID		0x1100
#define SPYRE_PCI_CLASS			0x1200	/* processing accelerator */
#define SPYRE_PCI_REVISION		0x01

/* ---- BARs ------------------------------------------------------------ */
#define SPYRE_BAR_REGS			0	/* 4 MiB MMIO, 32-bit */
#define SPYRE_BAR_DEVMEM		2	/* device memory, 64-bit pref. */
#define SPYRE_BAR_MSIX			4	/* MSI-X table and PBA */
#define SPYRE_BAR0_SIZE			0x400000ULL

/* ---- Limits ---------------------------------------------------------- */
#define SPYRE_MAX_QUEUES		512
#define SPYRE_MAX_CONTEXTS		512
#define SPYRE_MAX_VECTORS		64
#define SPYRE_RING_MIN_ENTRIES		2
#define SPYRE_RING_MAX_ENTRIES		4096
#define SPYRE_MAX_CMD_STREAM		(1U << 20)	/* bytes per job */
#define SPYRE_FAULT_FIFO_DEPTH		16
#define SPYRE_PAGE_SHIFT		12
#define SPYRE_PAGE_SIZE			(1ULL << SPYRE_PAGE_SHIFT)
#define SPYRE_VA_BITS			48

/* ---- Global registers (BAR0 page 0) ---------------------------------- */
#define SPYRE_REG_ID			0x0000	/* RO32: SPYRE_ID_MAGIC */
#define   SPYRE_ID_MAGIC		0x53505952	/* "SPYR" */
#define SPYRE_REG_VERSION		0x0004	/* RO32: major << 16 | minor */
#define   SPYRE_HW_VERSION_MAJOR	1
#define   SPYRE_HW_VERSION_MINOR	2	/* 1.2: KERNEL part 2 */
#define SPYRE_REG_CAPS			0x0008	/* RO64: SPYRE_CAP_* */
#define   SPYRE_CAP_FP16		(1ULL << 0)
#define   SPYRE_CAP_BF16		(1ULL << 1)
#define   SPYRE_CAP_FP8			(1ULL << 2)
#define   SPYRE_CAP_INT8		(1ULL << 3)
#define   SPYRE_CAP_MMU			(1ULL << 4)
#define   SPYRE_CAP_SEM			(1ULL << 5)
#define   SPYRE_CAP_KERNEL		(1ULL << 6)	/* KERNEL command */
#define SPYRE_REG_NUM_QUEUES		0x0010	/* RO32 */
#define SPYRE_REG_NUM_CORES		0x0014	/* RO32 */
#define SPYRE_REG_NUM_CONTEXTS		0x0018	/* RO32 */
#define SPYRE_REG_NUM_VECTORS		0x001c	/* RO32: MSI-X vectors */
#define SPYRE_REG_DEVMEM_SIZE		0x0020	/* RO64: bytes in BAR2 */
#define SPYRE_REG_SCRATCH		0x0028	/* RW32: no side effect */
#define SPYRE_REG_CLOCK			0x0030	/* RO64: ns since reset */
#define SPYRE_REG_CONTROL		0x0040	/* RW32 */
#define   SPYRE_CONTROL_ENABLE		(1U << 0)	/* queues may run */
#define SPYRE_REG_STATUS		0x0044	/* RO32 */
#define   SPYRE_DEV_STATUS_READY	(1U << 0)	/* card ready (not a job status) */
#define   SPYRE_DEV_STATUS_FATAL	(1U << 1)	/* stopped; needs RESET */
#define SPYRE_REG_RESET			0x0048	/* WO32 */
#define   SPYRE_RESET_MAGIC		0x52534554	/* "RSET": full reset */
#define SPYRE_REG_IRQ_STATUS		0x0050	/* RW1C32: SPYRE_IRQ_* */
#define SPYRE_REG_IRQ_MASK		0x0054	/* RW32: 1 = enabled */
#define   SPYRE_IRQ_FAULT		(1U << 0)	/* fault record queued */
#define   SPYRE_IRQ_QUEUE_ERROR		(1U << 1)	/* a queue halted */
#define   SPYRE_IRQ_FATAL		(1U << 2)	/* STATUS.FATAL set */
#define   SPYRE_IRQ_ALL			(SPYRE_IRQ_FAULT | SPYRE_IRQ_QUEUE_ERROR | \
					 SPYRE_IRQ_FATAL)
/* MSI-X vector 0 is the error vector; 1..NUM_VECTORS-1 are completions. */
#define SPYRE_ERROR_VECTOR		0

/* ---- MMU registers ------------------------------------------------------ */
#define SPYRE_REG_MMU_INVAL		0x1000	/* WO64: request invalidate */
#define   SPYRE_MMU_INVAL_CTX_MASK	0xffffULL
#define   SPYRE_MMU_INVAL_ALL		(1ULL << 63)
#define SPYRE_REG_MMU_INVAL_REQ		0x1008	/* RO32: requests made */
#define SPYRE_REG_MMU_INVAL_ACK		0x100c	/* RO32: requests done */
#define SPYRE_REG_FAULT_COUNT		0x1020	/* RO32: records pending */
#define SPYRE_REG_FAULT_LOST		0x1024	/* RO32: records dropped */
#define SPYRE_REG_FAULT_POP		0x1028	/* WO32: drop head record */
#define SPYRE_REG_FAULT_VA		0x1030	/* RO64: head record VA */
#define SPYRE_REG_FAULT_INFO		0x1038	/* RO64: head record info */
#define   SPYRE_FAULT_INFO_CTX(x)	((__u32)((x) & 0xffff))
#define   SPYRE_FAULT_INFO_QUEUE(x)	((__u32)(((x) >> 16) & 0xffff))
#define   SPYRE_FAULT_INFO_WRITE(x)	((__u32)(((x) >> 32) & 0x1))
#define   SPYRE_FAULT_INFO_REASON(x)	((__u32)(((x) >> 40) & 0xff))
#define   SPYRE_FAULT_UNMAPPED		1	/* no valid PTE */
#define   SPYRE_FAULT_READONLY		2	/* write to !WRITE page */
#define   SPYRE_FAULT_BAD_CONTEXT	3	/* context has no root */
#define   SPYRE_FAULT_BAD_TARGET	4	/* PTE outside memory */
#define   SPYRE_FAULT_PT_DMA		5	/* table walk DMA error */
#define   SPYRE_FAULT_INJECTED		6	/* SPYRE_DBG_MMU_FAULT */

/* Per-context page-table root: 64-bit, page address | SPYRE_PTE_VALID. */
#define SPYRE_REG_CTX_ROOT(ctx)		(0x2000 + 8 * (ctx))

/* ---- Telemetry (RO64, reset to 0 by a device reset) --------------------- */
#define SPYRE_REG_TEL_JOBS		0x3000	/* jobs completed */
#define SPYRE_REG_TEL_CMDS		0x3008	/* commands executed */
#define SPYRE_REG_TEL_BUSY_NS		0x3010	/* sum of job run time */
#define SPYRE_REG_TEL_BYTES		0x3018	/* bytes read + written */
#define SPYRE_REG_TEL_FAULTS		0x3020	/* MMU faults */
#define SPYRE_REG_TEL_ACTIVE_NS		0x3028	/* time with a job begun */

/* ---- Debug / fault injection ------------------------------------------- */
/*
 * DBG_INJECT arms one fault on one queue (a new write replaces what is
 * armed there); COUNT is how many jobs or completions it applies to, minus
 * one.  FATAL applies to the whole card at once (QUEUE must still be a
 * valid queue).  docs/spyre-hw.rst describes each kind.
 */
#define SPYRE_REG_DBG_INJECT		0x3800	/* WO32 */
#define   SPYRE_DBG_INJECT_QUEUE(x)	((x) & 0xffff)
#define   SPYRE_DBG_INJECT_KIND(x)	(((x) >> 16) & 0xff)
#define   SPYRE_DBG_INJECT_COUNT(x)	((((x) >> 24) & 0xff) + 1)
#define   SPYRE_DBG_INJECT_VAL(q, kind, count) \
	((__u32)(q) | (__u32)(kind) << 16 | ((__u32)(count) - 1) << 24)
#define   SPYRE_DBG_HANG		1	/* next job on queue hangs */
#define   SPYRE_DBG_ERROR		2	/* next job fails INTERNAL */
#define   SPYRE_DBG_FATAL		3	/* card stops: STATUS.FATAL */
#define   SPYRE_DBG_DROP_IRQ		4	/* next completion: no MSI-X */
#define   SPYRE_DBG_DUP_IRQ		5	/* next completion: MSI-X twice */
#define   SPYRE_DBG_CORRUPT_SEQNO	6	/* next record: seqno skewed */
#define   SPYRE_DBG_CORRUPT_STATUS	7	/* next record: unknown status */
#define   SPYRE_DBG_MMU_FAULT		8	/* next job faults on its stream */
#define   SPYRE_DBG_KIND_MAX		8
/* What CORRUPT_SEQNO adds to the seqno, CORRUPT_STATUS writes as status. */
#define   SPYRE_DBG_SEQNO_SKEW		(1ULL << 40)
#define   SPYRE_DBG_BAD_STATUS		0xbad

/* ---- Queue pages --------------------------------------------------------- */
#define SPYRE_QUEUE_BASE		0x10000
#define SPYRE_QUEUE_STRIDE		0x1000	/* one page per queue */
#define SPYRE_QUEUE_REG(q, r)		(SPYRE_QUEUE_BASE + \
					 SPYRE_QUEUE_STRIDE * (q) + (r))
#define SPYRE_Q_DOORBELL		0x00	/* RW32: ring tail index */
#define SPYRE_Q_HEAD			0x04	/* RO32: next entry to run */
#define SPYRE_Q_RING_BASE		0x08	/* RW64: DMA addr, 64B align */
#define SPYRE_Q_RING_ENTRIES		0x10	/* RW32: power of two */
#define SPYRE_Q_CONTROL			0x14	/* RW32 */
#define   SPYRE_Q_CONTROL_ENABLE	(1U << 0)
#define   SPYRE_Q_CONTROL_PRIO(x)	(((x) & 0x3) << 8)
#define   SPYRE_Q_CONTROL_PRIO_GET(x)	(((x) >> 8) & 0x3)
#define   SPYRE_Q_CONTROL_VECTOR(x)	(((x) & 0x3ff) << 16)
#define   SPYRE_Q_CONTROL_VECTOR_GET(x)	(((x) >> 16) & 0x3ff)
#define   SPYRE_Q_PRIO_LOW		0
#define   SPYRE_Q_PRIO_NORMAL		1
#define   SPYRE_Q_PRIO_HIGH		2
#define SPYRE_Q_COMPL_ADDR		0x18	/* RW64: DMA addr, 64B align */
#define SPYRE_Q_STATUS			0x20	/* RO32: SPYRE_QS_* */
#define   SPYRE_QS_DISABLED		0
#define   SPYRE_QS_IDLE			1
#define   SPYRE_QS_BUSY			2
#define   SPYRE_QS_SEM_WAIT		3
#define   SPYRE_QS_ERROR		4	/* halted on a job error */
#define SPYRE_Q_RESET			0x24	/* WO32: write 1 */
#define SPYRE_Q_LAST_SEQNO		0x28	/* RO64 */
#define SPYRE_Q_BUSY_NS			0x30	/* RO64: sum of job run times */

/**
 * struct spyre_hw_job - one ring entry (64 bytes, in system memory).
 * @seqno: written back to the completion record when the job ends.
 * @cmd_va: device VA of the command stream in context @ctx, 8-byte aligned.
 * @cmd_size: command stream length in bytes, multiple of 8,
 *	8..SPYRE_MAX_CMD_STREAM.
 * @ctx: context (address space) id, < NUM_CONTEXTS, with a valid root.
 * @flags: SPYRE_JOB_F_*; unknown bits fail the job with INVALID_JOB.
 * @reserved: must be zero.
 */
struct spyre_hw_job {
	__le64 seqno;
	__le64 cmd_va;
	__le32 cmd_size;
	__le16 ctx;
	__le16 flags;
	__le64 reserved[5];
};

#define SPYRE_JOB_F_IRQ			(1U << 0)	/* MSI-X on completion */
#define SPYRE_JOB_F_ALL			SPYRE_JOB_F_IRQ

/**
 * struct spyre_hw_completion - per-queue completion record (64 bytes).
 * @seqno: seqno of the last job that ended; written last.
 * @status: SPYRE_STATUS_* (uapi/drm/spyre_cmd.h) of that job.
 * @cmd_offset: byte offset in the stream of the command that failed.
 * @error_va: faulting device VA for SPYRE_STATUS_MMU_FAULT, else 0.
 * @start_ns: device clock when the job started.
 * @end_ns: device clock when the job ended.
 * @detail: status detail (kernel statuses: uapi/drm/spyre_cmd.h,
 *	SPYRE_KERR_* and following), else zero.
 * @detail2: second status detail (as @detail), else zero.
 * @reserved: written as zero.
 *
 * Lives in kernel-owned memory; the card writes every field, then @seqno,
 * then raises the queue's vector if the job asked for it.
 */
struct spyre_hw_completion {
	__le64 seqno;
	__le32 status;
	__le32 cmd_offset;
	__le64 error_va;
	__le64 start_ns;
	__le64 end_ns;
	__le64 detail;
	__le64 detail2;
	__le64 reserved;
};

/* ---- Page tables --------------------------------------------------------- */
/*
 * Four levels of 512 64-bit entries (one 4 KiB page each, in system memory)
 * translate a 48-bit device VA: level 0 indexes VA[47:39], level 1 VA[38:30],
 * level 2 VA[29:21], level 3 VA[20:12].  A level-3 entry maps a 4 KiB page.
 * Entries are little-endian 64-bit values.
 */
#define SPYRE_PT_LEVELS			4
#define SPYRE_PT_ENTRIES		512
#define SPYRE_PT_INDEX(va, lvl)	\
	((unsigned int)(((va) >> (39 - 9 * (lvl))) & (SPYRE_PT_ENTRIES - 1)))
#define SPYRE_PTE_VALID			(1ULL << 0)
#define SPYRE_PTE_WRITE			(1ULL << 1)	/* leaf: writable */
#define SPYRE_PTE_DEVMEM		(1ULL << 2)	/* leaf: BAR2 offset */
#define SPYRE_PTE_ADDR_MASK		0x000ffffffffff000ULL

#endif /* SPYRE_HW_H */
