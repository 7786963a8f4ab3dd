/*
 * pmca native hook backend: declarations shared by the translation units of
 * libpmca_hooks.so.  Nothing here is exported; the public C API is declared
 * (and documented) in hooks.c next to its definitions.
 */
#ifndef PMCA_HOOKS_H
#define PMCA_HOOKS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stddef.h>

#define PMCA_EXPORT __attribute__((visibility("default")))

/* Indices of the hookable libc functions; the Python binding mirrors them. */
enum pmca_symbol {
    PMCA_SYM_MUNMAP = 0,
    PMCA_SYM_MADVISE = 1,
    PMCA_SYM_MREMAP = 2,
    PMCA_SYM_BRK = 3,
    PMCA_SYM_SHMDT = 4,
    PMCA_SYM_MMAP = 5,
    PMCA_SYM_COUNT = 6,
};

/* Event kinds stored in the ring; 0 is never used so a zeroed slot is invalid. */
enum pmca_kind {
    PMCA_KIND_MUNMAP = 1,
    PMCA_KIND_MADVISE = 2,
    PMCA_KIND_MREMAP = 3,
    PMCA_KIND_BRK = 4,
    PMCA_KIND_SHMDT = 5,
    PMCA_KIND_MMAP_FIXED = 6,
    PMCA_KIND_UCM_UNMAPPED = 7, /* UCX's ucm said VM_UNMAPPED (any release call) */
};

/* Layout shared with Python (ctypes): keep field order and sizes stable. */
struct pmca_event {
    uint64_t address;
    uint64_t length; /* 0 = unknown (shmdt): consumers treat it as [address, end of memory) */
    uint32_t kind;
    uint32_t from_alloc;
};

/* Status codes of patch/restore, mirrored in Python. */
enum pmca_status {
    PMCA_OK = 0,
    PMCA_ALREADY_INSTALLED = 1,
    PMCA_REFUSED_FOREIGN = 2,
    PMCA_REFUSED_PROLOGUE = 3,
    PMCA_NO_PADDING = 4,
    PMCA_SYMBOL_NOT_FOUND = 5,
    PMCA_PROTECT_FAILED = 6,
    PMCA_NOT_OURS = 7,
    PMCA_NOT_INSTALLED = 8,
    PMCA_UNSUPPORTED = 9,
    PMCA_NO_TRAMPOLINE = 10,
    PMCA_BAD_ARGUMENT = 11,
};

/* Per-symbol patch states. */
enum pmca_state {
    PMCA_STATE_IDLE = 0,      /* never patched, or restored byte-exact */
    PMCA_STATE_INSTALLED = 1, /* our jump is live at the entry */
    PMCA_STATE_ORPHANED = 2,  /* someone overwrote our jump; hook left pass-through */
};

#define PMCA_MAX_PATCH 8
#define PMCA_REASON_LEN 200

/* What patch/restore/inspect report to the caller (ctypes-mirrored). */
struct pmca_site_report {
    uint64_t function;        /* libc entry point */
    uint64_t patch_address;   /* where the 2-byte jump lives (after endbr64) */
    uint64_t padding_address; /* where the jmp rel32 to the trampoline lives */
    uint64_t trampoline;
    uint64_t hook;
    uint32_t status;
    uint32_t state;
    int32_t sys_errno;
    uint32_t replaced_length;
    uint32_t padding_length;
    uint32_t reserved;
    uint8_t original[PMCA_MAX_PATCH];
    uint8_t patched[PMCA_MAX_PATCH];
    uint8_t padding_original[PMCA_MAX_PATCH];
    uint8_t padding_patched[PMCA_MAX_PATCH];
    uint8_t found[16]; /* bytes at the function entry when the call was made */
    char reason[PMCA_REASON_LEN];
};

/* ring.c */
/* Publish one release event from any native source of this library (a hook,
 * or another translation unit that learns of releases some other way).
 * Call it *before* the memory is released.  Never blocks, allocates or
 * touches errno; async-signal-safe.  A full ring counts a drop, which every
 * consumer sees as an overflow. */
void pmca_ring_publish(uint32_t kind, uintptr_t address, uintptr_t length, uint32_t from_alloc);
/* pmca_ring_publish for a hook: records nothing while the hooks are disabled
 * or `symbol` is not active. */
void pmca_ring_record(int symbol, uint32_t kind, uintptr_t address, uintptr_t length,
                      uint32_t from_alloc);
void pmca_ring_count_call(int symbol);
/* Events were lost outside the ring (a hook was bypassed): the next drain
 * reports overflow, so consumers invalidate everything. */
void pmca_ring_report_loss(void);
void pmca_ring_reset_after_fork(void);
/* Allocate the ring at its default size unless configured; 0 or -errno. */
int pmca_ring_ensure_configured(void);

/* syscall.c helpers shared by hooks and the patcher: raw syscalls that never
 * touch errno and never go through a (possibly patched) libc wrapper. */
long pmca_raw_syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6);
static inline int pmca_is_error(long result) { return (unsigned long)result > -4096UL; }

/* hooks.c: the static hook targets and resolved libc entries, by index */
void *pmca_hook_target(int symbol);
uint64_t pmca_hooks_symbol_address(int symbol);

/* patch_x86_64.c / patch_other.c */
int pmca_patch_install(int symbol, uintptr_t function, struct pmca_site_report *report);
int pmca_patch_restore(int symbol, struct pmca_site_report *report);
void pmca_patch_describe(int symbol, struct pmca_site_report *report);
int pmca_patch_verify(int symbol);
/* 1 if `symbol` was installed but its jump is gone (now orphaned), else 0. */
int pmca_patch_orphan_if_overwritten(int symbol);
int pmca_patch_membarrier_init(void);

/* ucm.c: 1 if the prologues guarded for the ucm subscription changed. */
int pmca_ucm_guard_changed(void);

/* Per-symbol flag read by the hooks: 1 = record events, 0 = pass-through. */
extern int pmca_symbol_active[PMCA_SYM_COUNT];

#endif
