/*
 * pmca native hook backend: the hook functions libc's memory-release calls
 * are redirected to, and the exported C API the Python binding drives.
 *
 * A hook pushes one event into the ring (ring.c), then does the raw system
 * call itself (the patched libc entry can no longer be called).  Hooks never allocate, lock, log, touch Python or use
 * global-dynamic TLS: they run inside malloc with arena locks held and in
 * signal handlers.  This library is linked -z nodelete: hooks, ring and
 * trampolines must outlive every call that may still be executing them.
 */
#include "hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef MADV_REMOVE
#define MADV_REMOVE 9
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24 /* kernel ABI value since Linux 5.18 */
#endif
#ifndef MAP_FIXED
#define MAP_FIXED 0x10
#endif

/* ------------------------------------------------------------------------ */
/* Raw system calls                                                          */
/* ------------------------------------------------------------------------ */

#if defined(__x86_64__)
long pmca_raw_syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6)
{
    long result;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}
#else
long pmca_raw_syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6)
{
    int saved_errno = errno;
    long result = syscall(number, a1, a2, a3, a4, a5, a6);
    if (result == -1) {
        result = -errno;
        errno = saved_errno;
    }
    return result;
}
#endif

/* libc semantics: errno is written only on failure. */
static long finish_call(long result)
{
    if (pmca_is_error(result)) {
        errno = (int)-result;
        return -1;
    }
    return result;
}

/* ------------------------------------------------------------------------ */
/* Hooks                                                                     */
/* ------------------------------------------------------------------------ */

#define PMCA_HOOK __attribute__((noinline, used))

static void **libc_curbrk; /* glibc's __curbrk, which its sbrk trusts */
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/*
 * Every hook publishes its event *before* the system call (docs/architecture.md,
 * section 4, rule 2).  Once the kernel has released a range, another thread
 * can map the same addresses and look them up in a registration cache; if the
 * event were published afterwards, that lookup could drain the ring before
 * the event exists and hand out a stale registration.  Published first, any
 * drain that begins after the release sees it.  A spurious event for a call
 * that then fails only costs a cache miss.
 */
PMCA_HOOK static int hook_munmap(void *address, size_t length)
{
    pmca_ring_count_call(PMCA_SYM_MUNMAP);
    pmca_ring_record(PMCA_SYM_MUNMAP, PMCA_KIND_MUNMAP, (uintptr_t)address, length, 1);
    long result = pmca_raw_syscall6(SYS_munmap, (long)address, (long)length, 0, 0, 0, 0);
    return (int)finish_call(result);
}

static int advice_releases_memory(int advice)
{
    /* POSIX_MADV_DONTNEED has MADV_DONTNEED's value on Linux. */
    return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE ||
           advice == MADV_DONTNEED_LOCKED;
}

PMCA_HOOK static int hook_madvise(void *address, size_t length, int advice)
{
    pmca_ring_count_call(PMCA_SYM_MADVISE);
    if (advice_releases_memory(advice))
        pmca_ring_record(PMCA_SYM_MADVISE, PMCA_KIND_MADVISE, (uintptr_t)address, length, 1);
    long result =
        pmca_raw_syscall6(SYS_madvise, (long)address, (long)length, advice, 0, 0, 0);
    return (int)finish_call(result);
}

/* libc declares mremap variadic; integer arguments travel in the same
 * registers either way, and new_address is only meaningful with
 * MREMAP_FIXED, so it is forwarded only then. */
PMCA_HOOK static void *hook_mremap(void *old_address, size_t old_length, size_t new_length,
                                   int flags, void *new_address)
{
    pmca_ring_count_call(PMCA_SYM_MREMAP);
    long target = (flags & MREMAP_FIXED) ? (long)new_address : 0;
    /* The old range is reported whole even when the mapping grows in place:
     * cheap, conservative, and what every consumer of mremap events expects.
     * MREMAP_FIXED also unmaps whatever was at the target, like MAP_FIXED. */
    pmca_ring_record(PMCA_SYM_MREMAP, PMCA_KIND_MREMAP, (uintptr_t)old_address, old_length, 1);
    if (flags & MREMAP_FIXED)
        pmca_ring_record(PMCA_SYM_MREMAP, PMCA_KIND_MREMAP, (uintptr_t)target, new_length, 1);
    long result = pmca_raw_syscall6(SYS_mremap, (long)old_address, (long)old_length,
                                    (long)new_length, flags, target, 0);
    return (void *)finish_call(result);
}

/*
 * glibc's brk stores the kernel's answer in __curbrk, which sbrk (and so
 * malloc) trusts.  The store is skipped when the break did not move: that is
 * the same value, and skipping it keeps a concurrent brk(0) probe from
 * writing back a break that another thread's sbrk has just moved.
 * A shrink releases [address, current break): both are known before the
 * call, so it is published first like every other release.
 */
PMCA_HOOK static int hook_brk(void *address)
{
    pmca_ring_count_call(PMCA_SYM_BRK);
    void **curbrk = libc_curbrk;
    uintptr_t previous = curbrk ? (uintptr_t)__atomic_load_n(curbrk, __ATOMIC_RELAXED) : 0;
    if (previous != 0 && (uintptr_t)address != 0 && (uintptr_t)address < previous)
        pmca_ring_record(PMCA_SYM_BRK, PMCA_KIND_BRK, (uintptr_t)address,
                         previous - (uintptr_t)address, 1);
    long result = pmca_raw_syscall6(SYS_brk, (long)address, 0, 0, 0, 0, 0);
    if (curbrk && (uintptr_t)result != previous)
        __atomic_store_n(curbrk, (void *)result, __ATOMIC_RELAXED);
    if ((uintptr_t)result < (uintptr_t)address) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* The segment size is unknown here and finding it would need /proc parsing
 * in the hook: length 0 means "from address to the end of memory".
 * from_alloc = 0 as in Open MPI: no allocator detaches. */
PMCA_HOOK static int hook_shmdt(const void *address)
{
    pmca_ring_count_call(PMCA_SYM_SHMDT);
    pmca_ring_record(PMCA_SYM_SHMDT, PMCA_KIND_SHMDT, (uintptr_t)address, 0, 0);
    long result = pmca_raw_syscall6(SYS_shmdt, (long)address, 0, 0, 0, 0, 0);
    return (int)finish_call(result);
}

/* MAP_FIXED silently unmaps whatever was at the target range.
 * MAP_FIXED_NOREPLACE does not carry the MAP_FIXED bit and never replaces. */
PMCA_HOOK static void *hook_mmap(void *address, size_t length, int protection, int flags,
                                 int fd, off_t offset)
{
    pmca_ring_count_call(PMCA_SYM_MMAP);
    if (flags & MAP_FIXED)
        pmca_ring_record(PMCA_SYM_MMAP, PMCA_KIND_MMAP_FIXED, (uintptr_t)address, length, 1);
    long result = pmca_raw_syscall6(SYS_mmap, (long)address, (long)length, protection, flags,
                                    fd, (long)offset);
    return (void *)finish_call(result);
}

/* ------------------------------------------------------------------------ */
/* Symbol table and initialisation                                           */
/* ------------------------------------------------------------------------ */

static const char *const symbol_names[PMCA_SYM_COUNT] = {
    [PMCA_SYM_MUNMAP] = "munmap", [PMCA_SYM_MADVISE] = "madvise",
    [PMCA_SYM_MREMAP] = "mremap", [PMCA_SYM_BRK] = "brk",
    [PMCA_SYM_SHMDT] = "shmdt",   [PMCA_SYM_MMAP] = "mmap",
};

void *pmca_hook_target(int symbol)
{
    switch (symbol) {
    case PMCA_SYM_MUNMAP: return (void *)&hook_munmap;
    case PMCA_SYM_MADVISE: return (void *)&hook_madvise;
    case PMCA_SYM_MREMAP: return (void *)&hook_mremap;
    case PMCA_SYM_BRK: return (void *)&hook_brk;
    case PMCA_SYM_SHMDT: return (void *)&hook_shmdt;
    case PMCA_SYM_MMAP: return (void *)&hook_mmap;
    default: return NULL;
    }
}


static uintptr_t symbol_addresses[PMCA_SYM_COUNT];
static char init_error[PMCA_REASON_LEN];
static int init_status = -1;

static void set_init_error(const char *message, const char *detail)
{
    if (detail)
        (void)snprintf(init_error, sizeof init_error, "%s: %s", message, detail);
    else
        (void)snprintf(init_error, sizeof init_error, "%s", message);
}

/* Forking while another thread patches would leave patch_lock held forever
 * in the child (and libc text possibly writable): fork waits for the patch. */
static void atfork_prepare(void) { pthread_mutex_lock(&patch_lock); }

static void atfork_parent(void) { pthread_mutex_unlock(&patch_lock); }

static void atfork_child(void)
{
    pthread_mutex_init(&patch_lock, NULL);
    pmca_ring_reset_after_fork();
}

static void initialise(void)
{
#if !defined(__x86_64__) || !defined(__GLIBC__)
    set_init_error("unsupported platform: prologue patching is implemented for "
                   "x86_64 Linux with glibc only", NULL);
    init_status = PMCA_UNSUPPORTED;
    return;
#else
    /* Never dlclose'd: the addresses are used for the life of the process. */
    void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
    if (!libc) {
        set_init_error("libc.so.6 is not loaded in this process", dlerror());
        init_status = PMCA_SYMBOL_NOT_FOUND;
        return;
    }
    for (int i = 0; i < PMCA_SYM_COUNT; i++)
        symbol_addresses[i] = (uintptr_t)dlsym(libc, symbol_names[i]);
    libc_curbrk = (void **)dlsym(libc, "__curbrk");

    (void)pmca_patch_membarrier_init();
    if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0) {
        set_init_error("pthread_atfork() failed", NULL);
        init_status = PMCA_UNSUPPORTED;
        return;
    }
    init_status = PMCA_OK;
#endif
}

/* ------------------------------------------------------------------------ */
/* Exported API                                                              */
/* ------------------------------------------------------------------------ */

/* Idempotent.  Returns PMCA_OK or a status; pmca_hooks_init_error() explains. */
PMCA_EXPORT int pmca_hooks_init(void)
{
    (void)pthread_once(&init_once, initialise);
    return init_status;
}

PMCA_EXPORT const char *pmca_hooks_init_error(void) { return init_error; }

PMCA_EXPORT int pmca_hooks_symbol_count(void) { return PMCA_SYM_COUNT; }

PMCA_EXPORT const char *pmca_hooks_symbol_name(int symbol)
{
    return (symbol >= 0 && symbol < PMCA_SYM_COUNT) ? symbol_names[symbol] : NULL;
}

PMCA_EXPORT uint64_t pmca_hooks_symbol_address(int symbol)
{
    if (pmca_hooks_init() != PMCA_OK || symbol < 0 || symbol >= PMCA_SYM_COUNT)
        return 0;
    return symbol_addresses[symbol];
}

static int check_symbol(int symbol, struct pmca_site_report *report)
{
    memset(report, 0, sizeof *report);
    if (symbol < 0 || symbol >= PMCA_SYM_COUNT) {
        report->status = PMCA_BAD_ARGUMENT;
        (void)snprintf(report->reason, sizeof report->reason, "no hookable symbol #%d", symbol);
        return PMCA_BAD_ARGUMENT;
    }
    int status = pmca_hooks_init();
    if (status != PMCA_OK) {
        report->status = (uint32_t)status;
        (void)snprintf(report->reason, sizeof report->reason, "%s", init_error);
        return status;
    }
    if (symbol_addresses[symbol] == 0) {
        report->status = PMCA_SYMBOL_NOT_FOUND;
        (void)snprintf(report->reason, sizeof report->reason, "%s not found in libc.so.6",
                       symbol_names[symbol]);
        return PMCA_SYMBOL_NOT_FOUND;
    }
    if (symbol == PMCA_SYM_BRK && libc_curbrk == NULL) {
        report->status = PMCA_UNSUPPORTED;
        (void)snprintf(report->reason, sizeof report->reason,
                       "libc.so.6 exports no __curbrk: a brk hook would desynchronise sbrk");
        return PMCA_UNSUPPORTED;
    }
    return PMCA_OK;
}

/* Redirect libc's `symbol` to our hook.  Fills *report; returns its status. */
PMCA_EXPORT int pmca_hooks_patch(int symbol, struct pmca_site_report *report)
{
    int status = check_symbol(symbol, report);
    if (status != PMCA_OK)
        return status;
    if (pmca_ring_ensure_configured() != 0) {
        report->status = PMCA_UNSUPPORTED;
        (void)snprintf(report->reason, sizeof report->reason,
                       "cannot allocate the release-event ring");
        return PMCA_UNSUPPORTED;
    }
    pthread_mutex_lock(&patch_lock);
    status = pmca_patch_install(symbol, symbol_addresses[symbol], report);
    pthread_mutex_unlock(&patch_lock);
    return status;
}

/* Put libc's original bytes back if the live bytes are still ours;
 * otherwise leave our hook in place as pass-through (PMCA_NOT_OURS). */
PMCA_EXPORT int pmca_hooks_restore(int symbol, struct pmca_site_report *report)
{
    int status = check_symbol(symbol, report);
    if (status != PMCA_OK)
        return status;
    pthread_mutex_lock(&patch_lock);
    status = pmca_patch_restore(symbol, report);
    pthread_mutex_unlock(&patch_lock);
    return status;
}

/* Current state of a site, without changing anything. */
PMCA_EXPORT int pmca_hooks_inspect(int symbol, struct pmca_site_report *report)
{
    int status = check_symbol(symbol, report);
    if (status != PMCA_OK)
        return status;
    pthread_mutex_lock(&patch_lock);
    pmca_patch_describe(symbol, report);
    pthread_mutex_unlock(&patch_lock);
    return PMCA_OK;
}

/* 1 if our jump, padding jump and trampoline are all live and intact. */
PMCA_EXPORT int pmca_hooks_verify(int symbol)
{
    if (symbol < 0 || symbol >= PMCA_SYM_COUNT || pmca_hooks_init() != PMCA_OK)
        return 0;
    pthread_mutex_lock(&patch_lock);
    int intact = pmca_patch_verify(symbol);
    pthread_mutex_unlock(&patch_lock);
    return intact;
}

/*
 * The cheap overwrite check the dispatcher runs at every drain: bit i set
 * when site i was installed and someone has written over its jump since the
 * last call (it is orphaned now), bit PMCA_SYM_COUNT when the prologues
 * guarded for the ucm subscription changed.  Either means releases may have
 * gone unseen, so the ring reports an overflow at the next drain.
 */
static int overwrite_pending; /* changes reported whose reaction is not over yet */

PMCA_EXPORT uint32_t pmca_hooks_check_overwrites(void)
{
    if (pmca_hooks_init() != PMCA_OK)
        return 0;
    uint32_t changed = 0;
    pthread_mutex_lock(&patch_lock);
    for (int symbol = 0; symbol < PMCA_SYM_COUNT; symbol++)
        if (pmca_patch_orphan_if_overwritten(symbol))
            changed |= 1u << symbol;
    pthread_mutex_unlock(&patch_lock);
    if (pmca_ucm_guard_changed())
        changed |= 1u << PMCA_SYM_COUNT;
    if (changed) {
        /* Set before the caller learns of the change: a reader that finds
         * nothing new but this flag set knows a reaction is under way. */
        __atomic_fetch_add(&overwrite_pending, 1, __ATOMIC_SEQ_CST);
        pmca_ring_report_loss();
    }
    return changed;
}

/* The word the Python side reads to know whether a reaction is under way. */
PMCA_EXPORT int *pmca_hooks_overwrite_pending(void) { return &overwrite_pending; }

/* One reaction is over (reset: after a fork, where none can be running). */
PMCA_EXPORT void pmca_hooks_overwrite_handled(int reset)
{
    if (reset)
        __atomic_store_n(&overwrite_pending, 0, __ATOMIC_SEQ_CST);
    else
        __atomic_fetch_sub(&overwrite_pending, 1, __ATOMIC_SEQ_CST);
}

PMCA_EXPORT uint32_t pmca_hooks_event_size(void) { return (uint32_t)sizeof(struct pmca_event); }

PMCA_EXPORT uint32_t pmca_hooks_report_size(void)
{
    return (uint32_t)sizeof(struct pmca_site_report);
}
